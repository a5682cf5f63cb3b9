// npm run bench:api — API traffic of the kubelet against the test API server double, on the
// SIMULATED CRI runtime (src/sim, in-memory containers): pod status patches per pod from seen to
// Running (one container each), and every request the kubelet makes per minute with 1000 pods
// running and nothing changing (lease, node status, watches). Each is measured with status
// batching on (the default) and off, side by side, each on a fresh server and kubelet.
// Writes bench/results/api.json (targets status_patches_per_pod_start, idle_requests_per_min_1000).
//   node dist/bench/api.js [--start-pods 100] [--pods 1000] [--idle-seconds 60]

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Pod } from '../src/api/types.js';
import { RestClient } from '../src/client/rest.js';
import { defaultKubeletConfig, type KubeletFlags } from '../src/config/index.js';
import { buildDependencies } from '../src/kubelet/dependencies.js';
import { Kubelet } from '../src/kubelet/kubelet.js';
import { startSimRuntimeServer } from '../src/sim/server.js';
import { SimRuntime } from '../src/sim/sim-runtime.js';
import type { Logger } from '../src/util/log.js';
import { TestApiServer } from '../test/fixtures/test-apiserver/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const NODE = 'bench-node';
const KUBELET_TOKEN = 'bench-kubelet-token';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined, v: () => quiet, with: () => quiet };

/** In-memory pod cgroups: the simulated runtime has no real containers to confine. */
const cgroupsDouble = {
  podCgroupName: (pod: Pod) => `/kubepods/besteffort/pod${pod.metadata.uid}`,
  ensureExists: async (pod: Pod) => `/kubepods/besteffort/pod${pod.metadata.uid}`,
  remove: async () => undefined,
  listPodCgroups: async () => new Map<string, string>(),
};

interface Rig {
  api: TestApiServer;
  kubelet: Kubelet;
  kubeletRequests: () => TestApiServer['requests'];
  close(): Promise<void>;
}

async function rig(batching: boolean, maxPods: number): Promise<Rig> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kts-bench-api-'));
  const api = new TestApiServer({ tls: false, tokens: { [KUBELET_TOKEN]: { user: `system:node:${NODE}`, groups: ['system:nodes'] } } });
  await api.start();
  const sim = await startSimRuntimeServer({ runtime: new SimRuntime({ seed: 7 }), socketPath: path.join(dir, 'sim.sock') });
  const config = defaultKubeletConfig();
  config.containerRuntimeEndpoint = sim.endpoint;
  config.podLogsDir = path.join(dir, 'logs');
  config.maxPods = maxPods;
  // a cluster node has cluster DNS; without it every sync of a ClusterFirst pod records MissingClusterDNS
  config.clusterDNS = ['10.96.0.10'];
  const flags: KubeletFlags = { rootDir: path.join(dir, 'root'), nodeIP: ['10.0.0.10'], verbosity: 0, help: false, hostnameOverride: NODE };
  const deps = await buildDependencies(config, flags, NODE, quiet);
  const client = new RestClient({ source: 'bench', server: api.url, insecureSkipTLSVerify: false, token: KUBELET_TOKEN }, { qps: config.kubeAPIQPS, burst: config.kubeAPIBurst });
  const kubelet = new Kubelet({
    config, flags,
    deps: { ...deps, cgroups: cgroupsDouble, oomWatcher: undefined, probeRunner: undefined, apiClient: client, statusBatchDelayMs: batching ? undefined : 0 },
  });
  await kubelet.start();
  const kubeletRequests = () => api.requests.filter((r) => r.user === `system:node:${NODE}`);
  return {
    api, kubelet, kubeletRequests,
    close: async () => {
      await kubelet.stop();
      client.close();
      await api.stop();
      await sim.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function createPods(api: TestApiServer, prefix: string, n: number): void {
  for (let i = 0; i < n; i++) {
    api.create('pods', 'default', {
      metadata: { name: `${prefix}-${i}` },
      spec: { nodeName: NODE, containers: [{ name: 'app', image: 'registry.local/app:1' }] },
    });
  }
}

async function waitRunning(api: TestApiServer, prefix: string, n: number, limitMs: number): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const running = api.list('pods', 'default').filter((p) => p.metadata.name.startsWith(`${prefix}-`) && p.status?.phase === 'Running').length;
    if (running >= n) return Date.now() - t0;
    if (Date.now() - t0 > limitMs) throw new Error(`only ${running}/${n} pods Running after ${limitMs} ms`);
    await sleep(100);
  }
}

/** Waits until no status patch was made for `quietMs`. */
async function settle(r: Rig, quietMs: number, limitMs: number): Promise<void> {
  const t0 = Date.now();
  let last = r.kubeletRequests().length;
  let since = Date.now();
  while (Date.now() - since < quietMs && Date.now() - t0 < limitMs) {
    await sleep(250);
    const n = r.kubeletRequests().filter((q) => q.method === 'PATCH' && q.path.endsWith('/status') && q.path.includes('/pods/')).length;
    if (n !== last) { last = n; since = Date.now(); }
  }
}

interface Result { case: string; metric: string; value: number; unit: string }

async function podStart(batching: boolean, n: number): Promise<{ perPod: number; ms: number }> {
  const r = await rig(batching, n + 10);
  try {
    await sleep(2000); // registration, first lease and node status out of the way
    createPods(r.api, 'start', n);
    const ms = await waitRunning(r.api, 'start', n, 120_000);
    // status changes after Running (Ready, container started) still count
    await settle(r, 3000, 30_000);
    const patches = r.kubeletRequests().filter((q) => q.method === 'PATCH' && /\/pods\/start-\d+\/status$/.test(q.path)).length;
    return { perPod: patches / n, ms };
  } finally {
    await r.close();
  }
}

async function idle(batching: boolean, n: number, seconds: number): Promise<{ perMin: number; byKind: Record<string, number> }> {
  const r = await rig(batching, n + 10);
  try {
    createPods(r.api, 'idle', n);
    await waitRunning(r.api, 'idle', n, 600_000);
    await settle(r, 5000, 60_000);
    const before = r.kubeletRequests().length;
    await sleep(seconds * 1000);
    const window = r.kubeletRequests().slice(before);
    const byKind: Record<string, number> = {};
    for (const q of window) {
      const kind = q.path.includes('/leases/') ? 'lease' : q.path.includes('/nodes/') ? 'node' : q.path.includes('/pods') ? 'pods' : q.path.includes('/events') ? 'events' : 'other';
      const k = `${q.method}${q.watch ? ' watch' : ''} ${kind}`;
      byKind[k] = (byKind[k] ?? 0) + 1;
    }
    return { perMin: (window.length * 60) / seconds, byKind };
  } finally {
    await r.close();
  }
}

async function main(): Promise<void> {
  const startPods = arg('start-pods', 100);
  const pods = arg('pods', 1000);
  const idleSeconds = arg('idle-seconds', 60);
  const results: Result[] = [];
  const rows: string[][] = [];
  const per: Record<string, { start: number; idle: number }> = {};
  for (const batching of [true, false]) {
    const name = batching ? 'batching on' : 'batching off';
    const s = await podStart(batching, startPods);
    const i = await idle(batching, pods, idleSeconds);
    per[name] = { start: s.perPod, idle: i.perMin };
    results.push(
      { case: `${name}, ${startPods} pods started`, metric: 'status_patches_per_pod_start', value: round(s.perPod), unit: 'patches/pod' },
      { case: `${name}, ${startPods} pods started`, metric: 'time_to_all_running', value: s.ms, unit: 'ms' },
      { case: `${name}, ${pods} pods steady`, metric: 'idle_requests_per_min', value: round(i.perMin), unit: 'requests/min' },
    );
    rows.push([name, round(s.perPod).toString(), `${s.ms}`, round(i.perMin).toString(), JSON.stringify(i.byKind)]);
  }
  console.log('SIMULATED runtime (src/sim), test API server double; every request of the kubelet counted');
  console.log(['case', 'patches/pod start', 'ms to Running', `req/min (${pods} pods idle)`, 'idle requests by kind'].join(' | '));
  for (const r of rows) console.log(r.join(' | '));
  const on = per['batching on']!;
  const targets = [
    { name: 'status_patches_per_pod_start', value: round(on.start), op: '<=', target: 3, met: on.start <= 3 },
    { name: 'idle_requests_per_min_1000', value: round(on.idle), op: '<=', target: 10, met: on.idle <= 10 },
  ];
  console.log(targets.map((t) => `${t.name}: ${t.value} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`).join('\n'));
  const file = path.join(here, '..', '..', 'bench', 'results', 'api.json');
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, JSON.stringify({ bench: 'api', date: new Date().toISOString(), machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() }, results, targets }, null, 2) + '\n');
  console.log(`wrote ${file}`);
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

await main();
process.exit(0);
