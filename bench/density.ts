// Density benchmark: the whole agent on the work its users run, many pods starting, running
// and stopping.
//
// Real containerd (needs root and the shared runtime; run it under the integration lock):
//   - floor: a direct CRI driver makes the calls kubelet-ts makes for a pod (pod cgroup,
//     RunPodSandbox, CreateContainer, StartContainer), every pod at once as kubelet-ts's per-pod
//     workers do, nothing else; then StopContainer, StopPodSandbox, RemoveContainer,
//     RemovePodSandbox and the pod cgroup for deletion;
//   - kubelet-ts (the CLI, its own process): N static pod files dropped at once into its
//     manifest dir; time until /pods shows every pod Running with its container running; then
//     the files removed and the time until the runtime holds none of the pods' sandboxes.
//   Runs floor, kubelet-ts, floor (the floor's figure is the mean of its two runs) so drift on a
//   shared machine hits both sides. kubelet-ts's CPU (utime + stime) and RSS during the burst
//   and at rest (with the pods running) come from /proc.
// Simulated runtime (kubelet-ts sim-runtime: in-memory containers, nothing runs; a test
//   double), at 1000 and 5000 pods: pod-start throughput (all files dropped at once, until the
//   simulator holds every sandbox and container), then kubelet-ts's steady CPU and RSS.
// Prints tables; writes bench/results/density.json.
//   node dist/bench/density.js [--pods=100] [--rounds=2] [--sim-sizes=1000,5000] [--rest-s=20] [--sim-settle-s=60] [--sim-rest-s=60] [--no-real]
//        [--no-sim] [--out=FILE] [--no-write]

import { fork, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Pod } from '../src/api/types.js';
import { discoverCgroupMounts } from '../src/cgroups/index.js';
import { PodContainerManager } from '../src/cm/pod-container-manager.js';
import { containerLogsDirectory, generateContainerConfig } from '../src/runtime/container-config.js';
import { CriClient } from '../src/runtime/cri-client.js';
import { KUBERNETES_POD_NAMESPACE_LABEL } from '../src/runtime/labels.js';
import { generatePodSandboxConfig } from '../src/runtime/sandbox-config.js';
import { createLogger } from '../src/util/log.js';
import { freePort, startKubelet, type KubeletProcess } from '../test/fixtures/kubelet-process.js';
import { ensureRuntime, type TestRuntime } from '../test/fixtures/runtime.js';
import type { BenchResult, BenchTarget } from './stats.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.join(here, '..', '..');
const cli = path.join(repo, 'bin', 'kubelet-ts.mjs');
const NAMESPACE = 'kts-bench-density';
const GRACE_S = 2;

interface Args {
  pods: number;
  /** kubelet-ts runs on real containerd, each between two floor runs (floor, kubelet-ts, floor, ...). */
  rounds: number;
  simSizes: number[];
  restS: number;
  /**
   * Simulated cases: the wait after the last pod started, then the window measured. Steady means
   * past the burst's aftermath (V8's optimizing compiles of the code the burst made hot, the
   * memory reducer's collections once allocation drops) and over a whole minute, so every
   * once-a-minute task (each pod's resync, container GC, volume and log accounting) falls in it once.
   */
  simSettleS: number;
  simRestS: number;
  real: boolean;
  sim: boolean;
  out: string;
  write: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    pods: 100,
    rounds: 2,
    simSizes: [1000, 5000],
    restS: 20,
    simSettleS: 60,
    simRestS: 60,
    real: true,
    sim: true,
    out: path.join(process.cwd(), 'bench', 'results', 'density.json'),
    write: true,
  };
  for (const arg of argv) {
    const [k, v = ''] = arg.split('=');
    if (k === '--pods') a.pods = Number(v);
    else if (k === '--rounds') a.rounds = Number(v);
    else if (k === '--sim-sizes') a.simSizes = v ? v.split(',').map(Number) : [];
    else if (k === '--rest-s') a.restS = Number(v);
    else if (k === '--sim-settle-s') a.simSettleS = Number(v);
    else if (k === '--sim-rest-s') a.simRestS = Number(v);
    else if (k === '--no-real') a.real = false;
    else if (k === '--no-sim') a.sim = false;
    else if (k === '--out') a.out = v;
    else if (k === '--no-write') a.write = false;
    else throw new Error(`unknown argument ${arg} (--pods=100 --rounds=2 --sim-sizes=1000,5000 --rest-s=20 --sim-settle-s=60 --sim-rest-s=60 --no-real --no-sim --out=FILE --no-write)`);
  }
  if (!Number.isInteger(a.rounds) || a.rounds < 1) throw new Error(`--rounds must be a positive integer, got ${a.rounds}`);
  return a;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const round = (v: number, d = 3): number => Math.round(v * 10 ** d) / 10 ** d;
const median = (xs: number[]): number => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** utime + stime of a process (s). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // clock ticks: USER_HZ is 100 on Linux
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** VmRSS of a process (MiB). */
function rssMb(pid: number): number {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return m ? Number(m[1]) / 1024 : NaN;
}

/** CPU cores and RSS of a process over `seconds` at rest. */
async function atRest(pid: number, seconds: number): Promise<{ cores: number; rssMb: number }> {
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  const rss: number[] = [];
  while (performance.now() - t0 < seconds * 1000) {
    await sleep(1000);
    rss.push(rssMb(pid));
  }
  return { cores: (cpuSeconds(pid) - c0) / ((performance.now() - t0) / 1000), rssMb: median(rss) };
}

async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

// ---- real containerd ----

function densityPod(i: number, image: string, run: string): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `density-${run}-${String(i).padStart(3, '0')}`, namespace: NAMESPACE, uid: randomUUID(), labels: { bench: 'density' } },
    spec: {
      // host network: the runtime's share is then sandbox + container, no CNI (the same on both sides)
      hostNetwork: true,
      terminationGracePeriodSeconds: GRACE_S,
      // the pause image's /pause exits on SIGTERM at once: stopping costs the runtime's work only
      containers: [{ name: 'main', image, imagePullPolicy: 'IfNotPresent' }],
    },
  } as Pod;
}

interface BurstResult {
  createS: number;
  deleteS: number;
  /** Per pod: seconds from the start to its container started (floor) / reported Running (kubelet-ts). */
  podP50S: number;
}

/** The floor: the same CRI calls, every pod at once, nothing else. */
async function floorBurst(rt: TestRuntime, cri: CriClient, cgroups: PodContainerManager, n: number, run: string, imageRef: string, logsDir: string): Promise<BurstResult> {
  const pods = Array.from({ length: n }, (_, i) => densityPod(i, rt.images.pause, run));
  const made: Array<{ pod: Pod; sandboxId: string; containerId: string }> = [];
  const perPod: number[] = [];
  const t0 = performance.now();
  await pool(pods, n, async (pod) => {
    const cgroupParent = await cgroups.ensureExists(pod);
    const sandboxConfig = generatePodSandboxConfig(pod, 0, { cgroupParent, podLogsDir: logsDir });
    const { pod_sandbox_id: sandboxId } = await cri.runPodSandbox(sandboxConfig);
    const c = pod.spec.containers[0]!;
    mkdirSync(containerLogsDirectory(pod, c, logsDir), { recursive: true });
    const config = generateContainerConfig(pod, c, 0, {
      podIPs: [],
      hostIPs: ['127.0.0.1'],
      nodeName: os.hostname(),
      imageRef,
      podLogsDir: logsDir,
      memoryCapacityBytes: os.totalmem(),
    });
    const { container_id: containerId } = await cri.createContainer(sandboxId, config, sandboxConfig);
    await cri.startContainer(containerId);
    perPod.push((performance.now() - t0) / 1000);
    made.push({ pod, sandboxId, containerId });
  });
  const createS = (performance.now() - t0) / 1000;
  await sleep(2000);
  const t1 = performance.now();
  await pool(made, n, async ({ pod, sandboxId, containerId }) => {
    await cri.stopContainer(containerId, GRACE_S);
    await cri.stopPodSandbox(sandboxId);
    await cri.removeContainer(containerId);
    await cri.removePodSandbox(sandboxId);
    await cgroups.remove(cgroups.podCgroupName(pod));
  });
  const deleteS = (performance.now() - t1) / 1000;
  return { createS, deleteS, podP50S: median(perPod) };
}

interface KubeletBurst extends BurstResult {
  burstCpuS: number;
  burstCores: number;
  burstRssMaxMb: number;
  restCores: number;
  restRssMb: number;
  deleteCpuS: number;
  idleCoresBefore: number;
  idleRssBeforeMb: number;
}

async function kubeletBurst(rt: TestRuntime, cri: CriClient, n: number, run: string, restS: number, log: (l: string) => void): Promise<KubeletBurst> {
  const kubelet: KubeletProcess = await startKubelet({ endpoint: rt.endpoint, extraArgs: ['-v', '0', '--file-check-frequency', '20s'] });
  const pid = kubelet.child.pid!;
  try {
    // Settled and empty: its own idle cost first.
    await sleep(3000);
    const idle = await atRest(pid, 5);
    const staging = mkdtempSync(path.join(path.dirname(kubelet.manifestDir), 'kts-density-staging-'));
    const names: string[] = [];
    for (let i = 0; i < n; i++) {
      const pod = densityPod(i, rt.images.pause, run);
      const { uid: _uid, ...metadata } = pod.metadata;
      const name = `${pod.metadata.name}.json`;
      writeFileSync(path.join(staging, name), JSON.stringify({ ...pod, metadata }));
      names.push(name);
    }
    const seen = new Map<string, number>();
    const c0 = cpuSeconds(pid);
    let rssMax = rssMb(pid);
    const t0 = performance.now();
    for (const name of names) renameSync(path.join(staging, name), path.join(kubelet.manifestDir, name));
    rmSync(staging, { recursive: true, force: true });
    for (;;) {
      if (kubelet.child.exitCode !== null) throw new Error(`kubelet-ts exited: ${kubelet.logs().slice(-2000)}`);
      for (const p of await kubelet.pods().catch(() => [])) {
        const name = p.metadata.name ?? '';
        if (seen.has(name) || !name.startsWith(`density-${run}-`)) continue;
        const cs = p.status?.containerStatuses ?? [];
        if (p.status?.phase === 'Running' && cs.length > 0 && cs.every((c) => c.state?.running)) seen.set(name, (performance.now() - t0) / 1000);
      }
      rssMax = Math.max(rssMax, rssMb(pid));
      if (seen.size >= n) break;
      if (performance.now() - t0 > 600_000) throw new Error(`only ${seen.size}/${n} pods Running after 10 min`);
      await sleep(100);
    }
    const createS = (performance.now() - t0) / 1000;
    const burstCpuS = cpuSeconds(pid) - c0;
    log(`#   kubelet-ts: ${n} pods Running after ${createS.toFixed(2)} s (cpu ${burstCpuS.toFixed(2)} s); at rest for ${restS} s...`);
    await sleep(3000);
    const rest = await atRest(pid, restS);

    const d0 = cpuSeconds(pid);
    const t1 = performance.now();
    for (const name of names) rmSync(path.join(kubelet.manifestDir, name), { force: true });
    const selector = { label_selector: { [KUBERNETES_POD_NAMESPACE_LABEL]: NAMESPACE } };
    for (;;) {
      const left = await cri.listPodSandbox(selector);
      if (left.length === 0) break;
      if (performance.now() - t1 > 600_000) throw new Error(`${left.length} sandboxes left 10 min after the files were removed`);
      await sleep(100);
    }
    const deleteS = (performance.now() - t1) / 1000;
    return {
      createS,
      deleteS,
      podP50S: median([...seen.values()]),
      burstCpuS,
      burstCores: burstCpuS / createS,
      burstRssMaxMb: rssMax,
      restCores: rest.cores,
      restRssMb: rest.rssMb,
      deleteCpuS: cpuSeconds(pid) - d0,
      idleCoresBefore: idle.cores,
      idleRssBeforeMb: idle.rssMb,
    };
  } finally {
    await kubelet.stop();
  }
}

interface RealResult {
  skipped?: string;
  results: BenchResult[];
  floor?: BurstResult[];
  kubelets?: KubeletBurst[];
}

/** Removes what a crashed run left: sandboxes of the benchmark's namespace. */
async function removeLeftovers(cri: CriClient): Promise<number> {
  const left = await cri.listPodSandbox({ label_selector: { [KUBERNETES_POD_NAMESPACE_LABEL]: NAMESPACE } });
  await pool(left, 16, async (s) => {
    for (const c of await cri.listContainers({ pod_sandbox_id: s.id })) {
      await cri.stopContainer(c.id, 0).catch(() => undefined);
      await cri.removeContainer(c.id).catch(() => undefined);
    }
    await cri.stopPodSandbox(s.id).catch(() => undefined);
    await cri.removePodSandbox(s.id).catch(() => undefined);
  });
  return left.length;
}

async function realDensity(n: number, rounds: number, restS: number, log: (l: string) => void): Promise<RealResult> {
  if (process.getuid?.() !== 0) return { skipped: 'not root', results: [] };
  let rt: TestRuntime;
  try {
    rt = await ensureRuntime();
  } catch (err) {
    return { skipped: `runtime not available: ${(err as Error).message.split('\n')[0]}`, results: [] };
  }
  const cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 120_000 });
  const cgroups = new PodContainerManager({ mounts: await discoverCgroupMounts(), cgroupRoot: '', log: createLogger() });
  const logsDir = mkdtempSync(path.join(os.tmpdir(), 'kts-density-logs-'));
  try {
    const stale = await removeLeftovers(cri);
    if (stale) log(`# removed ${stale} sandboxes left by an earlier run`);
    const imageRef = (await cri.pullImage(rt.images.pause)).image_ref;
    log(`# real containerd: ${n} pods (host network, one pause container each), floor and kubelet-ts in turn, ${rounds} kubelet-ts runs`);
    const floor: BurstResult[] = [];
    const kubelets: KubeletBurst[] = [];
    const runFloor = async (): Promise<void> => {
      const f = await floorBurst(rt, cri, cgroups, n, `f${floor.length + 1}`, imageRef, logsDir);
      floor.push(f);
      log(`#   floor ${floor.length}: create ${f.createS.toFixed(2)} s, delete ${f.deleteS.toFixed(2)} s`);
    };
    await runFloor();
    for (let r = 0; r < rounds; r++) {
      await sleep(2000);
      const kb = await kubeletBurst(rt, cri, n, `k${r + 1}`, restS, log);
      kubelets.push(kb);
      log(`#   kubelet-ts ${r + 1}: create ${kb.createS.toFixed(2)} s, delete ${kb.deleteS.toFixed(2)} s`);
      await sleep(2000);
      await runFloor();
    }
    const m = realMedians(floor, kubelets);
    const k = `containerd-${n}pods`;
    const results: BenchResult[] = [];
    floor.forEach((f, i) => results.push(
      { case: k, metric: `floor_create_s_run${i + 1}`, value: round(f.createS), unit: 's' },
      { case: k, metric: `floor_delete_s_run${i + 1}`, value: round(f.deleteS), unit: 's' },
    ));
    kubelets.forEach((kb, i) => results.push(
      { case: k, metric: `kubelet_all_running_s_run${i + 1}`, value: round(kb.createS), unit: 's' },
      { case: k, metric: `kubelet_all_deleted_s_run${i + 1}`, value: round(kb.deleteS), unit: 's' },
    ));
    const med = (xs: number[]): number => median(xs);
    results.push(
      { case: k, metric: 'floor_create_s', value: round(m.floorCreateS), unit: 's' },
      { case: k, metric: 'floor_pod_started_p50_s', value: round(med(floor.map((f) => f.podP50S))), unit: 's' },
      { case: k, metric: 'floor_delete_s', value: round(m.floorDeleteS), unit: 's' },
      { case: k, metric: 'kubelet_all_running_s', value: round(m.kubeletCreateS), unit: 's' },
      { case: k, metric: 'kubelet_pod_running_p50_s', value: round(med(kubelets.map((kb) => kb.podP50S))), unit: 's' },
      { case: k, metric: 'kubelet_all_deleted_s', value: round(m.kubeletDeleteS), unit: 's' },
      { case: k, metric: 'startup_vs_cri_floor', value: round(m.kubeletCreateS / m.floorCreateS), unit: 'ratio' },
      { case: k, metric: 'delete_vs_cri_floor', value: round(m.kubeletDeleteS / m.floorDeleteS), unit: 'ratio' },
      { case: k, metric: 'kubelet_burst_cpu_s', value: round(med(kubelets.map((kb) => kb.burstCpuS))), unit: 's' },
      { case: k, metric: 'kubelet_burst_cpu_cores', value: round(med(kubelets.map((kb) => kb.burstCores))), unit: 'cores' },
      { case: k, metric: 'kubelet_burst_rss_max_mb', value: round(Math.max(...kubelets.map((kb) => kb.burstRssMaxMb)), 1), unit: 'MiB' },
      { case: k, metric: 'kubelet_delete_cpu_s', value: round(med(kubelets.map((kb) => kb.deleteCpuS))), unit: 's' },
      { case: k, metric: 'kubelet_rest_cpu_cores', value: round(med(kubelets.map((kb) => kb.restCores)), 4), unit: 'cores' },
      { case: k, metric: 'kubelet_rest_rss_mb', value: round(med(kubelets.map((kb) => kb.restRssMb)), 1), unit: 'MiB' },
      { case: k, metric: 'kubelet_idle_no_pods_cpu_cores', value: round(med(kubelets.map((kb) => kb.idleCoresBefore)), 4), unit: 'cores' },
      { case: k, metric: 'kubelet_idle_no_pods_rss_mb', value: round(med(kubelets.map((kb) => kb.idleRssBeforeMb)), 1), unit: 'MiB' },
    );
    return { results, floor, kubelets };
  } finally {
    await removeLeftovers(cri).catch(() => 0);
    rmSync(logsDir, { recursive: true, force: true });
    cri.close();
  }
}

/** The medians the ratios compare: every floor run against every kubelet-ts run of the same bench. */
function realMedians(floor: BurstResult[], kubelets: KubeletBurst[]): { floorCreateS: number; floorDeleteS: number; kubeletCreateS: number; kubeletDeleteS: number } {
  return {
    floorCreateS: median(floor.map((f) => f.createS)),
    floorDeleteS: median(floor.map((f) => f.deleteS)),
    kubeletCreateS: median(kubelets.map((kb) => kb.createS)),
    kubeletDeleteS: median(kubelets.map((kb) => kb.deleteS)),
  };
}

// ---- simulated runtime ----

/** Mount points of every cgroup hierarchy (v1 and v2). */
function cgroupMounts(): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup' || f[2] === 'cgroup2')
    .map((f) => f[1]!.replace(/\\040/g, ' '));
}

/** rmdir a cgroup subtree, children first. */
function removeCgroupTree(dir: string): void {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) if (e.isDirectory()) removeCgroupTree(path.join(dir, e.name));
  try {
    rmdirSync(dir);
  } catch {
    // busy or gone: nothing more to do
  }
}

async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(t);
}

interface Sim {
  child: ChildProcess;
  request(msg: Record<string, unknown>): Promise<Record<string, unknown>>;
}

async function startSim(socket: string, logFile: string): Promise<Sim> {
  const child = fork(cli, ['sim-runtime', '--socket', socket, '--containers', '0', '--churn-percent', '0', '--container-log-files'], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  child.stderr!.pipe(createWriteStream(logFile));
  const waitFor = (cmd: string): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const onMsg = (m: Record<string, unknown>): void => {
        if (m.cmd !== cmd) return;
        child.off('message', onMsg);
        child.off('exit', onExit);
        resolve(m);
      };
      const onExit = (code: number | null): void => reject(new Error(`simulated runtime exited (${code}); see ${logFile}`));
      child.on('message', onMsg);
      child.once('exit', onExit);
    });
  await waitFor('ready');
  return {
    child,
    request: (msg) => {
      const p = waitFor(msg.cmd as string);
      child.send(msg);
      return p;
    },
  };
}

function simManifest(i: number): string {
  const name = `density-${String(i).padStart(4, '0')}`;
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NAMESPACE, labels: { app: 'density' } },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'registry.example/kts-density/app:1.0',
          command: ['/app', '--serve'],
          // Burstable, and small enough that admission's fit check takes 5000 of them on a
          // 2-core node (a cpu request of even 1m each would not fit)
          resources: { requests: { memory: '1Mi' }, limits: { memory: '64Mi' } },
        },
      ],
    },
  });
}

interface SimResult {
  pods: number;
  startS: number;
  podsPerS: number;
  steadyCores: number;
  steadyRssMb: number;
  startCpuS: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
}

async function simDensity(n: number, settleS: number, restS: number, log: (l: string) => void): Promise<SimResult> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'kts-density-sim-'));
  const cgroupRoot = `/${path.basename(tmp)}`;
  const manifests = path.join(tmp, 'manifests');
  const staging = path.join(tmp, 'staging');
  mkdirSync(manifests);
  mkdirSync(staging);
  let sim: Sim | undefined;
  let kubelet: ChildProcess | undefined;
  try {
    sim = await startSim(path.join(tmp, 'sim.sock'), path.join(tmp, 'sim.log'));
    const port = await freePort();
    const config = path.join(tmp, 'kubelet-config.yaml');
    writeFileSync(
      config,
      [
        'apiVersion: kubelet.config.k8s.io/v1beta1',
        'kind: KubeletConfiguration',
        `containerRuntimeEndpoint: unix://${path.join(tmp, 'sim.sock')}`,
        `staticPodPath: ${manifests}`,
        `podLogsDir: ${path.join(tmp, 'pod-logs')}`,
        `cgroupRoot: ${cgroupRoot}`,
        `readOnlyPort: ${port}`,
        'healthzPort: 0',
        'fileCheckFrequency: 20s',
        // standalone: no API server for webhook authn/authz (upstream refuses them); no secure port
        'authentication: {webhook: {enabled: false}}',
        'authorization: {mode: AlwaysAllow}',
        'enableServer: false',
        // upstream's default (110) would refuse the rest at admission (OutOfpods)
        `maxPods: ${n}`,
        '',
      ].join('\n'),
    );
    const kubeletLog = path.join(tmp, 'kubelet.log');
    kubelet = spawn(process.execPath, [cli, '--config', config, '--root-dir', path.join(tmp, 'root'), '--hostname-override', 'kts-density-node', '-v', '0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    kubelet.stderr!.pipe(createWriteStream(kubeletLog));
    const k = kubelet;
    const died = (): Error => new Error(`kubelet-ts exited (${k.exitCode ?? k.signalCode}): ${readFileSync(kubeletLog, 'utf8').slice(-2000)}`);
    // Serving: /healthz on the read-only port answers.
    for (const t0 = Date.now(); ; ) {
      if (k.exitCode !== null) throw died();
      if (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status > 0, () => false)) break;
      if (Date.now() - t0 > 30_000) throw new Error('kubelet-ts did not serve within 30 s');
      await sleep(200);
    }
    await sleep(2000);
    for (let i = 0; i < n; i++) writeFileSync(path.join(staging, `d-${i}.json`), simManifest(i));
    const pid = k.pid!;
    const c0 = cpuSeconds(pid);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) renameSync(path.join(staging, `d-${i}.json`), path.join(manifests, `d-${i}.json`));
    for (;;) {
      if (k.exitCode !== null) throw died();
      const s = (await sim.request({ cmd: 'stats' })) as { counts: { sandboxes: number; containers: number } };
      if (s.counts.sandboxes >= n && s.counts.containers >= n) break;
      if (performance.now() - t0 > 15 * 60_000) throw new Error(`pods not up after 15 min: ${JSON.stringify(s.counts)}`);
      await sleep(250);
    }
    const startS = (performance.now() - t0) / 1000;
    const startCpuS = cpuSeconds(pid) - c0;
    log(`#   sim ${n} pods: all started after ${startS.toFixed(1)} s (${(n / startS).toFixed(0)} pods/s, cpu ${startCpuS.toFixed(1)} s); settling ${settleS} s, then ${restS} s at rest...`);
    // Settle: status updates, first stats housekeeping, and the burst's compiles and collections.
    await sleep(settleS * 1000);
    const rest = await atRest(pid, restS);
    // Where the RSS goes: the V8 heap (used / reserved) and memory outside it, from /metrics.
    const metrics = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text(), () => '');
    const metric = (name: string): number => {
      const m = metrics.match(new RegExp(`^${name} (\\S+)$`, 'm'));
      return m ? Number(m[1]) / 2 ** 20 : NaN;
    };
    return {
      pods: n,
      startS,
      podsPerS: n / startS,
      steadyCores: rest.cores,
      steadyRssMb: rest.rssMb,
      startCpuS,
      heapUsedMb: metric('nodejs_heap_size_used_bytes'),
      heapTotalMb: metric('nodejs_heap_size_total_bytes'),
      externalMb: metric('nodejs_external_memory_bytes'),
    };
  } finally {
    if (kubelet) await stopChild(kubelet, 10_000);
    if (sim) await stopChild(sim.child, 5000);
    for (const m of cgroupMounts()) removeCgroupTree(path.join(m, cgroupRoot));
    rmSync(tmp, { recursive: true, force: true });
  }
}

// ---- main ----

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const log = (l: string): void => console.log(l);
  const results: BenchResult[] = [];
  let real: RealResult | undefined;
  const sims: SimResult[] = [];
  if (args.real) {
    real = await realDensity(args.pods, args.rounds, args.restS, log).catch((err: Error) => ({ skipped: `failed: ${err.message.split('\n')[0]}`, results: [] }));
    if (real.skipped) {
      log(`# real containerd case skipped: ${real.skipped}`);
      results.push({ case: `containerd-${args.pods}pods`, metric: 'skipped', value: 1, unit: real.skipped });
    }
    results.push(...real.results);
  }
  if (args.sim) {
    if (process.getuid?.() !== 0) {
      log('# simulated cases skipped: not root (kubelet-ts creates real pod cgroups under a private cgroupRoot)');
    } else {
      log('# simulated runtime (a test double: in-memory containers, nothing runs); kubelet-ts is its own process');
      for (const n of args.simSizes) {
        const s = await simDensity(n, args.simSettleS, args.simRestS, log);
        sims.push(s);
        const k = `sim-${n}pods`;
        results.push(
          { case: k, metric: 'all_started_s', value: round(s.startS), unit: 's' },
          { case: k, metric: 'pod_start_throughput', value: round(s.podsPerS, 1), unit: 'pods/s' },
          { case: k, metric: 'start_cpu_s', value: round(s.startCpuS), unit: 's' },
          { case: k, metric: 'steady_cpu_cores', value: round(s.steadyCores, 4), unit: 'cores' },
          { case: k, metric: 'steady_rss_mb', value: round(s.steadyRssMb, 1), unit: 'MiB' },
          { case: k, metric: 'steady_heap_used_mb', value: round(s.heapUsedMb, 1), unit: 'MiB' },
          { case: k, metric: 'steady_heap_total_mb', value: round(s.heapTotalMb, 1), unit: 'MiB' },
          { case: k, metric: 'steady_external_mb', value: round(s.externalMb, 1), unit: 'MiB' },
        );
      }
    }
  }

  const target = (name: string, value: number | undefined, op: '<=' | '>=', t: number): BenchTarget => {
    const v = value === undefined || !Number.isFinite(value) ? null : round(value, 4);
    return { name, value: v, op, target: t, met: v !== null && (op === '<=' ? v <= t : v >= t) };
  };
  const fl = real?.floor;
  const kbs = real?.kubelets;
  const m = fl?.length && kbs?.length ? realMedians(fl, kbs) : undefined;
  const sim1000 = sims.find((s) => s.pods === 1000);
  const targets: BenchTarget[] = [
    target('startup_vs_cri_floor_100', m ? m.kubeletCreateS / m.floorCreateS : undefined, '<=', 1.2),
    target('delete_vs_cri_floor_100', m ? m.kubeletDeleteS / m.floorDeleteS : undefined, '<=', 1.2),
    target('rss_mb_1000_sim', sim1000?.steadyRssMb, '<=', 150),
    target('idle_cpu_cores_1000_sim', sim1000?.steadyCores, '<=', 0.03),
  ];

  log('');
  if (kbs && fl && m) {
    log(`| real containerd, ${args.pods} pods | all Running s | pod p50 s | all deleted s | vs floor median (create / delete) |`);
    log('|---|---|---|---|---|');
    fl.forEach((f, i) => {
      log(`| floor run ${i + 1} (direct CRI) | ${f.createS.toFixed(2)} | ${f.podP50S.toFixed(2)} | ${f.deleteS.toFixed(2)} | |`);
      const kb = kbs[i];
      if (kb) log(`| kubelet-ts run ${i + 1} | ${kb.createS.toFixed(2)} | ${kb.podP50S.toFixed(2)} | ${kb.deleteS.toFixed(2)} | ${(kb.createS / m.floorCreateS).toFixed(2)} / ${(kb.deleteS / m.floorDeleteS).toFixed(2)} |`);
    });
    log(`| **median** floor / kubelet-ts | ${m.floorCreateS.toFixed(2)} / ${m.kubeletCreateS.toFixed(2)} | | ${m.floorDeleteS.toFixed(2)} / ${m.kubeletDeleteS.toFixed(2)} | **${(m.kubeletCreateS / m.floorCreateS).toFixed(2)} / ${(m.kubeletDeleteS / m.floorDeleteS).toFixed(2)}** |`);
    log('');
    log(`| kubelet-ts process (per run) | cpu s | cpu cores | RSS MiB |`);
    log('|---|---|---|---|');
    kbs.forEach((kb, i) => {
      log(`| ${i + 1}: idle, no pods (5 s) | | ${kb.idleCoresBefore.toFixed(4)} | ${kb.idleRssBeforeMb.toFixed(1)} |`);
      log(`| ${i + 1}: burst, ${args.pods} pods to Running | ${kb.burstCpuS.toFixed(2)} | ${kb.burstCores.toFixed(3)} | ${kb.burstRssMaxMb.toFixed(1)} (max) |`);
      log(`| ${i + 1}: at rest, ${args.pods} pods (${args.restS} s) | | ${kb.restCores.toFixed(4)} | ${kb.restRssMb.toFixed(1)} |`);
      log(`| ${i + 1}: deletion | ${kb.deleteCpuS.toFixed(2)} | | |`);
    });
    log('');
  }
  if (sims.length) {
    log('| simulated runtime | all started s | pods/s | start cpu s | steady cpu cores | steady RSS MiB | heap used / total MiB | external MiB |');
    log('|---|---|---|---|---|---|---|---|');
    for (const s of sims) {
      log(`| sim ${s.pods} pods | ${s.startS.toFixed(1)} | ${s.podsPerS.toFixed(1)} | ${s.startCpuS.toFixed(1)} | ${s.steadyCores.toFixed(4)} | ${s.steadyRssMb.toFixed(1)} | ${s.heapUsedMb.toFixed(1)} / ${s.heapTotalMb.toFixed(1)} | ${s.externalMb.toFixed(1)} |`);
    }
    log('');
  }
  for (const t of targets) log(`# target ${t.name}: ${t.value ?? '-'} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`);

  const report = {
    bench: 'density',
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() },
    command: `node dist/bench/density.js ${process.argv.slice(2).filter((a) => !a.startsWith('--out') && a !== '--no-write').join(' ')}`.trim(),
    notes: [
      'containerd-*: real containerd; host-network pods, one pause container each (exits on SIGTERM). floor = a direct CRI driver making the calls kubelet-ts makes for each pod (pod cgroup, RunPodSandbox, CreateContainer, StartContainer; StopContainer, StopPodSandbox, RemoveContainer, RemovePodSandbox, cgroup removal), every pod at once as kubelet-ts\'s per-pod workers do. Runs alternate, floor first and last (floor, kubelet-ts, floor, ... : --rounds kubelet-ts runs, one more floor run); the ratios are the median kubelet-ts time over the median floor time, and the kubelet-ts process figures are medians of its runs (burst RSS: the max).',
      'kubelet-ts all Running = static pod files renamed into its manifest dir at once -> /pods (read-only port, polled every 100 ms) shows every pod Running with its container running. all deleted = files removed -> the runtime holds none of their sandboxes.',
      `sim-*: kubelet-ts (the CLI, its own process) against the SIMULATED CRI runtime (kubelet-ts sim-runtime, a test double: in-memory containers, nothing runs); pod cgroups are real, under a private cgroupRoot. all started = the simulator holds every sandbox and container. steady = after ${args.simSettleS} s settling (past the burst\'s optimizing compiles and memory-reducer collections), CPU (utime + stime from /proc) and median RSS over the ${args.simRestS} s rest window (a whole minute holds each once-a-minute task once).`,
      'The machine is shared (2 cores, other work running): ratios measured side by side in one run are what count.',
    ],
    results,
    targets,
  };
  if (args.write) {
    mkdirSync(path.dirname(args.out), { recursive: true });
    writeFileSync(args.out, JSON.stringify(report, null, 2) + '\n');
    log(`# wrote ${args.out}`);
  }
  return targets.every((t) => t.met) ? 0 : 1;
}

process.exitCode = await main();
