import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { ensureRuntime, repoRoot, type TestRuntime } from '../fixtures/runtime.js';

const run = promisify(execFile);

async function containerdPid(rt: TestRuntime): Promise<string> {
  return (await readFile(join(dirname(rt.socketPath), 'containerd.pid'), 'utf8')).trim();
}

async function tags(rt: TestRuntime, repo: string): Promise<string[]> {
  const res = await fetch(`http://${rt.registry}/v2/${repo}/tags/list`, { signal: AbortSignal.timeout(10_000) });
  assert.equal(res.status, 200, `GET tags of ${repo}`);
  const body = (await res.json()) as { name: string; tags: string[] | null };
  assert.equal(body.name, repo);
  return body.tags ?? [];
}

test('repoRoot finds the repository holding the node scripts', () => {
  const root = repoRoot();
  assert.ok(existsSync(join(root, 'scripts', 'setup-node.sh')));
  assert.ok(existsSync(join(root, 'package.json')));
});

test('ensureRuntime brings the node up, and a second call changes nothing', async () => {
  const first = await ensureRuntime();
  const pidBefore = await containerdPid(first);
  const second = await ensureRuntime();
  assert.deepEqual(second, first);
  // Idempotent means the running containerd was kept, not restarted.
  assert.equal(await containerdPid(second), pidBefore);

  assert.equal(first.endpoint, `unix://${first.socketPath}`);
  assert.ok((await stat(first.socketPath)).isSocket(), `${first.socketPath} is a socket`);
  assert.match(first.registry, /^127\.0\.0\.1:\d+$/);
  assert.equal(first.images.pause, `${first.registry}/kubelet-ts/pause:3.9`);
  assert.equal(first.images.busybox, `${first.registry}/kubelet-ts/busybox:1.36`);
  assert.equal(first.images.busyboxLatest, `${first.registry}/kubelet-ts/busybox:latest`);
  assert.ok(existsSync(join(first.nodeDir, 'containerd', 'config.toml')));
});

test('the local registry serves the test images', async () => {
  const rt = await ensureRuntime();
  const busybox = await tags(rt, 'kubelet-ts/busybox');
  assert.ok(busybox.includes('1.36'), `busybox tags: ${busybox.join(',')}`);
  assert.ok(busybox.includes('latest'), `busybox tags: ${busybox.join(',')}`);
  assert.ok((await tags(rt, 'kubelet-ts/pause')).includes('3.9'));

  // 1.36 and latest are one image: the same manifest digest.
  const digest = async (tag: string): Promise<string | null> => {
    const res = await fetch(`http://${rt.registry}/v2/kubelet-ts/busybox/manifests/${tag}`, {
      method: 'HEAD',
      headers: { accept: 'application/vnd.oci.image.manifest.v1+json' },
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(res.status, 200);
    return res.headers.get('docker-content-digest');
  };
  const d136 = await digest('1.36');
  assert.match(d136 ?? '', /^sha256:[0-9a-f]{64}$/);
  assert.equal(await digest('latest'), d136);
});

test('containerd.sh status reports the runtime as running', async () => {
  await ensureRuntime();
  const { stdout } = await run('bash', [join(repoRoot(), 'scripts', 'containerd.sh'), 'status']);
  assert.match(stdout, /^containerd: running \(pid \d+/);
  const registry = await run('bash', [join(repoRoot(), 'scripts', 'registry.sh'), 'status']);
  assert.match(registry.stdout, /^registry: running/);
});

test('ensureRuntime names the failing step when the registry port is taken', async () => {
  // A listener that is not a registry: it hangs up on every connection.
  const squatter = createServer((socket) => socket.destroy());
  await new Promise<void>((ok) => squatter.listen(0, '127.0.0.1', ok));
  const port = (squatter.address() as AddressInfo).port;
  const dir = await mkdtemp(join(tmpdir(), 'kts-setup-fail-'));
  const saved = { ...process.env };
  // A separate node (own dirs and port), so the shared runtime is left alone.
  process.env.KTS_NODE_DIR = join(dir, 'node');
  process.env.KTS_RUN_DIR = join(dir, 'run');
  process.env.KTS_REGISTRY_PORT = String(port);
  try {
    await assert.rejects(ensureRuntime(), (err: Error) => {
      assert.match(err.message, /step "setup-node: registry" failed/);
      assert.match(err.message, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is taken`));
      return true;
    });
  } finally {
    for (const key of ['KTS_NODE_DIR', 'KTS_RUN_DIR', 'KTS_REGISTRY_PORT']) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
    squatter.close();
    await rm(dir, { recursive: true, force: true });
  }
});
