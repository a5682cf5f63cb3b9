// The series the community kubernetes-mixin's rules, alerts and dashboards read from a kubelet
// (test/metrics/mixin-series.json, written down from the mixin) on a real kubelet-ts: joined to
// the test API server, running a static pod and an API pod on containerd (CPU-limited, doing a
// little direct disk I/O), every series marked served is on its endpoint with the labels the
// mixin selects and aggregates on; and promtool parses every metrics endpoint.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { ensureRuntime, repoRoot } from '../fixtures/runtime.js';

const run = promisify(execFile);
const NODE = 'kts-mixin-node';
const WAIT = 90_000;

interface MixinSeries {
  name: string;
  endpoint: string;
  labels: string[];
  status: 'served' | 'after-event' | 'when-enabled' | 'not-served';
  nonEmpty?: string[];
  match?: Record<string, string>;
  why?: string;
}

function secureGet(port: number, path: string): Promise<{ status: number; body: string }> {
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

/** Every sample of a series name in Prometheus text, as label maps. */
function samples(text: string, name: string): Array<Record<string, string>> {
  const out: Array<Record<string, string>> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    const labels: Record<string, string> = {};
    if (rest[0] === '{') {
      const body = rest.slice(1, rest.indexOf('} '));
      for (const m of body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
    }
    out.push(labels);
  }
  return out;
}

/** A series the mixin would select: every label present, the non-empty ones set, the matches matching. */
function selected(s: MixinSeries, text: string): Record<string, string> | undefined {
  return samples(text, s.name).find((l) => s.labels.every((k) => k in l)
    && (s.nonEmpty ?? []).every((k) => l[k] !== undefined && l[k] !== '')
    && Object.entries(s.match ?? {}).every(([k, re]) => new RegExp(re).test(l[k] ?? '')));
}

function podManifest(name: string, busybox: string): object {
  // a little CPU each second (CFS periods) and reads that bypass the page cache (block I/O)
  const script = 'while true; do dd if=/bin/busybox of=/dev/null bs=64k iflag=direct 2>/dev/null; i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done';
  return {
    apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default', labels: { test: 'mixin-metrics' } },
    spec: {
      terminationGracePeriodSeconds: 1,
      automountServiceAccountToken: false,
      containers: [{ name: 'work', image: busybox, command: ['sh', '-c', script], resources: { limits: { cpu: '200m', memory: '64Mi' } } }],
    },
  };
}

describe('the kubernetes-mixin series on a kubelet-ts with pods', () => {
  let dir: string;
  let api: TestApiServer;
  let kubelet: KubeletProcess;
  let admin: string;
  const pages = new Map<string, string>();
  const series = (JSON.parse(readFileSync(join(repoRoot(), 'test', 'metrics', 'mixin-series.json'), 'utf8')) as { series: MixinSeries[] }).series;

  before(async () => {
    const rt = await ensureRuntime();
    dir = await mkdtemp(join(tmpdir(), 'kts-mixin-'));
    api = new TestApiServer({ tls: true });
    await api.start();
    admin = join(dir, 'admin.kubeconfig');
    const kc = join(dir, 'kubelet.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'), { mode: 0o600 });
    await writeFile(kc, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    kubelet = await startKubelet({ endpoint: rt.endpoint, nodeName: NODE, extraArgs: ['--kubeconfig', kc] });
    await writeFile(join(kubelet.manifestDir, 'static.json'), JSON.stringify(podManifest('mixin-static', rt.images.busybox)));
    await waitFor(async () => {
      const { stdout } = await run('kubectl', ['--kubeconfig', admin, 'get', 'node', NODE, '-o', 'name'], { timeout: 30_000 }).catch(() => ({ stdout: '' }));
      return stdout.trim() !== '';
    }, WAIT, 'the node to register', 1_000);
    const apiPod = podManifest('mixin-api', rt.images.busybox) as { spec: Record<string, unknown> };
    apiPod.spec.nodeName = NODE;
    const file = join(dir, 'api-pod.json');
    await writeFile(file, JSON.stringify(apiPod));
    await run('kubectl', ['--kubeconfig', admin, 'apply', '-f', file], { timeout: 30_000 });
    // both pods run and their network and block I/O show on /metrics/cadvisor
    let missing: string[] = [];
    await waitFor(async () => {
      const r = await secureGet(kubelet.port, '/metrics/cadvisor').catch(() => undefined);
      if (!r) return false;
      const ok = (name: string, pod: string) => samples(r.body, name).some((l) => l.pod === pod && (name.startsWith('container_network') || l.container === 'work'));
      missing = ['mixin-api', `mixin-static-${NODE}`].flatMap((pod) => ['container_memory_working_set_bytes', 'container_network_receive_packets_total']
        .filter((name) => !ok(name, pod)).map((name) => `${name} of ${pod}`));
      return missing.length === 0;
    }, WAIT, 'both pods\' containers, network and block I/O on /metrics/cadvisor', 1_000).catch((err: Error) => {
      throw new Error(`${err.message}; missing: ${missing.join(', ')}\n${kubelet.logs().split('\n').filter((l) => /^E|cadvisor/i.test(l)).slice(-20).join('\n')}`);
    });
    for (const path of ['/metrics', '/metrics/cadvisor', '/metrics/resource', '/metrics/probes']) {
      const r = await secureGet(kubelet.port, path);
      assert.equal(r.status, 200, path);
      pages.set(path, r.body);
    }
  });

  after(async () => {
    if (kubelet) {
      await rm(join(kubelet.manifestDir, 'static.json'), { force: true });
      await run('kubectl', ['--kubeconfig', admin, 'delete', 'pod', 'mixin-api', '--wait=false'], { timeout: 30_000 }).catch(() => undefined);
      await waitFor(async () => (await kubelet.pods()).length === 0, WAIT, 'the pods to be removed', 1_000).catch(() => undefined);
      await kubelet.stop();
    }
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('every series the mixin reads that kubelet-ts serves is there with the mixin\'s labels', () => {
    const missing: string[] = [];
    for (const s of series) {
      if (s.status === 'not-served' || s.status === 'when-enabled') {
        assert.ok(s.why, `${s.name}: a series not served here says why`);
        continue;
      }
      // a labelled counter has no series before its event (block I/O: see the next test)
      if (s.status === 'after-event') continue;
      if (!selected(s, pages.get(s.endpoint)!)) missing.push(`${s.endpoint} ${s.name}{${s.labels.join(',')}}`);
    }
    assert.deepEqual(missing, []);
  });

  it('container_fs_* has a device row for a container exactly when the kernel accounted block I/O to its cgroup', async () => {
    const page = pages.get('/metrics/cadvisor')!;
    const c = samples(page, 'container_memory_working_set_bytes').find((l) => l.pod === 'mixin-api' && l.container === 'work')!;
    const v1 = await readFile(`/sys/fs/cgroup/blkio${c.id}/blkio.throttle.io_service_bytes_recursive`, 'utf8').catch(() => undefined);
    const text = v1 ?? (await readFile(`/sys/fs/cgroup${c.id}/io.stat`, 'utf8').catch(() => ''));
    const kernelDevices = new Set([...text.matchAll(/^(\d+:\d+) /gm)].map((m) => m[1]));
    const rows = samples(page, 'container_fs_reads_bytes_total').filter((l) => l.id === c.id);
    assert.equal(rows.length, kernelDevices.size, `device rows ${JSON.stringify(rows)} against the kernel's ${[...kernelDevices].join(', ') || 'none'}`);
    for (const r of rows) {
      assert.match(r.device!, /^\/dev\/\S+$|^\d+:\d+$/);
      for (const name of ['container_fs_writes_bytes_total', 'container_fs_reads_total', 'container_fs_writes_total']) {
        assert.ok(samples(page, name).some((l) => l.id === c.id && l.device === r.device), `${name} for ${r.device}`);
      }
    }
  });

  it('the pod-level series (container="", id = the pod cgroup) and the node root (id="/") are on /metrics/cadvisor', () => {
    const page = pages.get('/metrics/cadvisor')!;
    const ws = samples(page, 'container_memory_working_set_bytes');
    assert.ok(ws.some((l) => l.id === '/' && l.container === '' && l.pod === ''), 'the node root');
    for (const pod of ['mixin-api', `mixin-static-${NODE}`]) {
      const podLevel = ws.find((l) => l.pod === pod && l.container === '' && /^\/kubepods(\/burstable|\/besteffort)?\/pod[0-9a-f-]+$/.test(l.id ?? ''));
      assert.ok(podLevel, `the pod-level series of ${pod}`);
      const c = ws.find((l) => l.pod === pod && l.container === 'work')!;
      assert.equal(c.id, `${podLevel.id}/${c.name}`);
      assert.match(c.image!, /busybox/);
    }
    // the pod's 200m limit as the cgroup holds it (period 100 ms, quota 20 ms)
    const quota = samples(page, 'container_spec_cpu_quota').find((l) => l.pod === 'mixin-api' && l.container === 'work');
    assert.ok(quota);
    assert.match(page, /^container_spec_cpu_quota\{container="work",[^}]*pod="mixin-api"\} 20000 /m);
    assert.match(page, /^machine_cpu_cores\{[^}]*\} [1-9]\d*$/m);
    assert.match(page, /^container_threads\{container="work",[^}]*pod="mixin-api"\} [1-9]\d* /m);
  });

  it('/metrics counts what the kubelet did: pods and containers started, CRI calls, syncs, REST requests', () => {
    const page = pages.get('/metrics')!;
    const value = (line: RegExp) => Number(line.exec(page)?.[1] ?? NaN);
    assert.ok(value(/^kubelet_started_pods_total (\d+)$/m) >= 2);
    assert.ok(value(/^kubelet_started_containers_total\{container_type="container"\} (\d+)$/m) >= 2);
    assert.ok(value(/^kubelet_runtime_operations_total\{operation_type="run_podsandbox"\} (\d+)$/m) >= 2);
    assert.ok(value(/^kubelet_pod_start_sli_duration_seconds_count (\d+)$/m) >= 2);
    assert.ok(value(/^kubelet_cgroup_manager_duration_seconds_count\{operation_type="create"\} (\d+)$/m) >= 2);
    assert.match(page, /^kubelet_node_name\{node="kts-mixin-node"\} 1$/m);
    assert.match(page, /^kubelet_desired_pods\{static="true"\} 1$/m);
    assert.match(page, /^kubelet_desired_pods\{static=""\} 1$/m);
    assert.match(page, /^kubelet_mirror_pods 1$/m);
    assert.match(page, /^kubelet_working_pods\{config="desired",lifecycle="sync",static="true"\} 1$/m);
    assert.match(page, /^rest_client_requests_total\{code="200",host="127\.0\.0\.1:\d+",method="GET"\} [1-9]/m);
    assert.match(page, /^kubelet_runtime_operations_duration_seconds_bucket\{operation_type="run_podsandbox",le="0\.005"\} /m);
    assert.match(page, /^kubernetes_build_info\{build_date="[^"]*",compiler="[^"]*",git_commit="[^"]*",git_tree_state="[^"]*",git_version="v[^"]+",go_version="[^"]*",major="\d+",minor="\d+",platform="linux\/[^"]+"\} 1$/m);
    assert.ok(value(/^process_open_fds (\d+)$/m) > 0);
  });

  it('promtool parses every metrics endpoint', () => {
    for (const [path, body] of pages) {
      const r = spawnSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
      assert.ok(r.status !== null, 'promtool ran');
      const out = `${r.stdout}${r.stderr}`;
      assert.doesNotMatch(out, /error while linting|parsing error|text format parsing/i, `${path}: ${out}`);
    }
  });
});
