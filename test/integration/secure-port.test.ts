// The secure port (10250) of a real kubelet-ts on a real containerd, with the command line's
// legacy defaults (anonymous on, AlwaysAllow): a self-signed certificate appears in
// <rootDir>/pki, /pods, /runningpods/ and /configz answer over TLS, every metrics path is
// Prometheus text a real parser reads, and /metrics/cadvisor names a running container with
// cAdvisor's labels; the read-only port serves none of the secure port's own routes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 120_000;

function secureGet(port: number, path: string): Promise<{ status: number; body: string; alpn?: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, rejectUnauthorized: false, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function prometheusFamilies(text: string): string[] {
  const script = 'import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n' +
    'for f in text_string_to_metric_families(sys.stdin.read()):\n    print(f.name)\n';
  const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
  const r = spawnSync(python, ['-c', script], { input: text, encoding: 'utf8' });
  assert.equal(r.status, 0, `the Prometheus parser refused the text: ${r.stderr}`);
  return r.stdout.trim().split('\n');
}

describe('the secure port on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    kubelet = await startKubelet({ endpoint: rt.endpoint });
    await writeFile(join(kubelet.manifestDir, 'sleeper.json'), JSON.stringify({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'sleeper', labels: { test: 'secure-port' } },
      spec: { hostNetwork: true, terminationGracePeriodSeconds: 1, containers: [{ name: 'main', image: rt.images.busybox, command: ['sleep', '3600'], resources: { limits: { memory: '32Mi' } } }] },
    }));
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'secure-port' } })).length === 0, WAIT, 'the pod to be removed').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  it('generates its serving certificate in <rootDir>/pki and serves /pods, /runningpods/ and /configz over TLS', async () => {
    await waitFor(async () => (await secureGet(kubelet.port, '/healthz').catch(() => undefined))?.body === 'ok', WAIT, 'the secure port');
    assert.ok(existsSync(join(kubelet.rootDir, 'pki', 'kubelet.crt')));
    assert.ok(existsSync(join(kubelet.rootDir, 'pki', 'kubelet.key')));
    const running = await waitFor(async () => {
      const r = await secureGet(kubelet.port, '/runningpods/');
      const list = JSON.parse(r.body) as { items: Array<{ metadata: { name: string }; spec: { containers: Array<{ name: string }> } }> };
      return list.items.find((p) => p.metadata.name === `sleeper-${kubelet.nodeName}` && p.spec.containers.some((c) => c.name === 'main'));
    }, WAIT, 'the running pod in /runningpods/');
    assert.ok(running);
    const pods = JSON.parse((await secureGet(kubelet.port, '/pods')).body) as { kind: string; items: unknown[] };
    assert.equal(pods.kind, 'PodList');
    const configz = JSON.parse((await secureGet(kubelet.port, '/configz')).body) as { kubeletconfig: { port: number } };
    assert.equal(configz.kubeletconfig.port, kubelet.port);
  });

  it('every metrics path is Prometheus text; /metrics/cadvisor names the container with cAdvisor\'s labels', async () => {
    const line = await waitFor(async () => {
      const r = await secureGet(kubelet.port, '/metrics/cadvisor');
      return r.body.split('\n').find((l) => l.startsWith('container_memory_working_set_bytes{container="main"') && l.includes(`pod="sleeper-${kubelet.nodeName}"`));
    }, WAIT, 'the container in /metrics/cadvisor');
    assert.match(line!, /id="\/kubepods\/[^"]*pod[0-9a-f-]+\/[0-9a-f]{64}",image="[^"]*busybox[^"]*",name="[0-9a-f]{64}",namespace="default"/);
    for (const path of ['/metrics', '/metrics/cadvisor', '/metrics/resource', '/metrics/probes']) {
      const r = await secureGet(kubelet.port, path);
      assert.equal(r.status, 200, path);
      assert.ok(prometheusFamilies(r.body).length > 0, path);
    }
    const cadvisor = prometheusFamilies((await secureGet(kubelet.port, '/metrics/cadvisor')).body);
    for (const f of ['container_cpu_usage_seconds', 'container_memory_working_set_bytes', 'container_memory_rss', 'container_spec_memory_limit_bytes', 'container_last_seen']) {
      assert.ok(cadvisor.includes(f), `${f} in ${cadvisor.join(', ')}`);
    }
  });

  it('the read-only port serves none of the secure port\'s own routes', async () => {
    for (const p of ['/configz', '/runningpods/', '/metrics/cadvisor', '/logs/', '/debug/pprof/']) {
      const res = await fetch(`http://127.0.0.1:${kubelet.readOnlyPort}${p}`);
      assert.equal(res.status, 404, p);
    }
  });
});
