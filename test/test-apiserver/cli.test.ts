import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { parse } from 'yaml';

const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'test-apiserver', 'main.js');

describe('test API server CLI', () => {
  it('names itself a test double in its help', async () => {
    const out = await new Promise<string>((resolve) => {
      const c = spawn(process.execPath, [main, '--help']);
      let s = '';
      c.stdout.on('data', (d) => { s += d; });
      c.on('close', () => resolve(s));
    });
    assert.match(out, /TEST DOUBLE of kube-apiserver/);
    assert.match(out, /--node-name/);
  });

  it('starts, writes an admin and a kubelet kubeconfig, and serves with them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kts-tas-cli-'));
    const c = spawn(process.execPath, [main, '--port', '0', '--dir', dir, '--node-name', 'n9', '--no-tls'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      c.stdout.on('data', (d) => { out += d; });
      const deadline = Date.now() + 10_000;
      while (!/^try: /m.test(out)) {
        if (Date.now() > deadline || c.exitCode !== null) throw new Error(`CLI did not start: ${out}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.match(out, /TEST DOUBLE/);
      const server = out.match(/^server: (\S+)$/m)![1];
      const admin = parse(readFileSync(join(dir, 'admin.kubeconfig'), 'utf8'));
      const kubelet = parse(readFileSync(join(dir, 'kubelet.kubeconfig'), 'utf8'));
      assert.equal(admin.clusters[0].cluster.server, server);
      assert.equal(kubelet.users[0].name, 'system:node:n9');
      const res = await fetch(`${server}/api/v1/namespaces`, { headers: { Authorization: `Bearer ${kubelet.users[0].user.token}` } });
      assert.equal(res.status, 200);
      assert.equal((await res.json()).items.length, 4);
      const anon = await fetch(`${server}/api/v1/namespaces`);
      assert.equal(anon.status, 401);
    } finally {
      c.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
