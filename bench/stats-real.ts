// Stats benchmark on real containers: N host-network pods with one busybox `sleep` container
// each, created through the CRI with upstream's labels under /kubepods/besteffort/pod<uid>,
// then one full snapshot of the same containers by
//   (a) the native batch reader with open/read/close per file (async and sync),
//   (e) the same reader through kept-open descriptors (async, the agent's path; and sync),
//   (b) the pure-TypeScript fs reader,
//   (c) CRI ListContainerStats (the runtime asks every shim),
// interleaved, median of several runs, with the main thread's event-loop delay. Target
// cri_vs_native_real = CRI time / kept-open native time (>= 10). The pods are removed afterwards.
//   node dist/bench/stats-real.js [--pods=100] [--runs=9] [--out=FILE] [--no-write]
// Standalone it merges its rows and target into bench/results/stats.json, keeping the rest;
// bench/stats.ts can run it as an extra case: runStatsBench({ extraCases: [realContainerdCase()] }).
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import type { Container as PodContainer, Pod } from '../src/api/types.js';
import { PodContainerManager } from '../src/cm/pod-container-manager.js';
import { findPackageRoot } from '../src/native.js';
import { containerLogsDirectory, generateContainerConfig } from '../src/runtime/container-config.js';
import { CriClient } from '../src/runtime/cri-client.js';
import { KUBERNETES_POD_NAMESPACE_LABEL } from '../src/runtime/labels.js';
import { generatePodSandboxConfig } from '../src/runtime/sandbox-config.js';
import { FsCgroupReader } from '../src/stats/cgroup-fs-reader.js';
import { createNativeCgroupReader } from '../src/stats/cgroup-native-reader.js';
import { discoverCgroupMounts } from '../src/cgroups/index.js';
import { cgroupFilesFor } from '../src/stats/cgroup-sample.js';
import type { CgroupRef } from '../src/stats/cgroup-sample.js';
import { statsCgroupRef } from '../src/stats/provider.js';
import { createLogger } from '../src/util/log.js';
import { ensureRuntime } from '../test/fixtures/runtime.js';
import { compileFloor, median, timeOnce, withEventLoopDelay, type BenchReport, type BenchResult, type BenchTarget, type ExtraCase } from './stats.js';

/** The namespace of the benchmark's pods: how they are found again (and cleaned up). */
export const BENCH_NAMESPACE = 'kts-bench-stats-real';
const CREATE_CONCURRENCY = 8;

export interface RealStatsBenchOptions {
  /** Pods (one container each). Default 100. */
  pods?: number;
  /** Measured runs per backend (after one warm-up). Default 9. */
  runs?: number;
  log?: (line: string) => void;
}

interface Delay {
  p99: number;
  max: number;
}

export interface RealStatsBenchResult {
  containers: number;
  runs: number;
  /** Median ms of one full snapshot of all the containers. */
  nativeAsyncMs: number;
  nativeSyncMs?: number;
  nativeFullMs?: number;
  keptAsyncMs: number;
  keptSyncMs?: number;
  floorMs?: number;
  criFirstMs?: number;
  fsMs: number;
  criMs: number;
  delay: { nativeAsync: Delay; keptAsync: Delay; fs: Delay; cri: Delay };
  results: BenchResult[];
  targets: BenchTarget[];
  table: string[];
}

async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function benchPod(i: number, image: string): Pod {
  const container: PodContainer = { name: 'sleep', image, command: ['sleep', '86400'] };
  return {
    metadata: { name: `stats-real-${i}`, namespace: BENCH_NAMESPACE, uid: randomUUID() },
    spec: { hostNetwork: true, containers: [container], terminationGracePeriodSeconds: 0 },
  };
}

/** Removes every sandbox of the benchmark's namespace (this run's or a crashed one's) and the pod cgroups. */
async function removeBenchPods(cri: CriClient, cgroups: PodContainerManager, pods: readonly Pod[] = []): Promise<number> {
  const sandboxes = await cri.listPodSandbox({ label_selector: { [KUBERNETES_POD_NAMESPACE_LABEL]: BENCH_NAMESPACE } });
  await pool(sandboxes, CREATE_CONCURRENCY, async (s) => {
    await cri.stopPodSandbox(s.id).catch(() => undefined);
    await cri.removePodSandbox(s.id).catch(() => undefined);
  });
  for (const [, name] of await cgroups.listPodCgroups()) {
    if (!name.includes('/besteffort/pod')) continue;
    // Only the pods of this benchmark: their sandboxes are gone, the dirs are empty.
    if (sandboxes.some((s) => name.endsWith(`pod${s.metadata?.uid}`))) await cgroups.remove(name).catch(() => undefined);
  }
  for (const pod of pods) await cgroups.remove(cgroups.podCgroupName(pod)).catch(() => undefined);
  return sandboxes.length;
}

const round = (v: number): number => Math.round(v * 1000) / 1000;

/** Creates the pods, measures, removes the pods. */
export async function runRealStatsBench(options: RealStatsBenchOptions = {}): Promise<RealStatsBenchResult> {
  const log = options.log ?? ((l: string) => console.log(l));
  const n = options.pods ?? 100;
  const runs = options.runs ?? 9;
  const rt = await ensureRuntime();
  const cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 120_000 });
  const quiet = createLogger();
  const cgroups = new PodContainerManager({ mounts: await discoverCgroupMounts(), cgroupRoot: '', log: quiet });
  const mounts = await discoverCgroupMounts();
  const logsDir = mkdtempSync(path.join(os.tmpdir(), 'kts-bench-logs-'));
  const native = createNativeCgroupReader();
  if (!native.reader) throw new Error(`native cgroup reader unavailable: ${native.error}`);
  const nativeReader = native.reader.withKeepOpen(false);
  // The agent's path: the same reader through kept-open descriptors.
  const keptReader = native.reader.withKeepOpen(true);
  const fsReader = new FsCgroupReader({ clockTicksPerSecond: nativeReader.clockTicks });

  const pods = Array.from({ length: n }, (_, i) => benchPod(i, rt.images.busybox));
  try {
    const stale = await removeBenchPods(cri, cgroups);
    if (stale) log(`removed ${stale} pods left by an earlier run`);
    const imageRef = (await cri.pullImage(rt.images.busybox)).image_ref;

    log(`creating ${n} pods on containerd...`);
    const containerIds: string[] = [];
    const refs: CgroupRef[] = [];
    const fullRefs: CgroupRef[] = [];
    await pool(pods, CREATE_CONCURRENCY, async (pod) => {
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
      const { container_id: id } = await cri.createContainer(sandboxId, config, sandboxConfig);
      await cri.startContainer(id);
      containerIds.push(id);
      // What the provider reads for a container (its CPU and memory: the data CRI gives), and every controller.
      refs.push(statsCgroupRef(mounts, `${cgroupParent}/${id}`, 'container'));
      fullRefs.push(statsCgroupRef(mounts, `${cgroupParent}/${id}`, 'node'));
    });
    const filter = { label_selector: { [KUBERNETES_POD_NAMESPACE_LABEL]: BENCH_NAMESPACE } };

    // Every backend must see every container, or the comparison is not of the same data.
    const check = async (): Promise<void> => {
      const batch = await nativeReader.readCgroups(refs);
      let missing = 0;
      for (let i = 0; i < batch.count; i++) if (!batch.ok(i)) missing++;
      const stats = await cri.listContainerStats(filter);
      if (missing > 0 || stats.length !== n) {
        throw new Error(`benchmark pods disturbed: ${missing} cgroups missing, CRI returned ${stats.length}/${n} stats`);
      }
    };
    // The runtime's first call after the pods started (what a kubelet pays after a restart).
    const criFirstMs = await timeOnce(() => cri.listContainerStats(filter));
    await check();

    const files = refs.flatMap(cgroupFilesFor);
    const fullFiles = fullRefs.flatMap(cgroupFilesFor);
    const listFile = path.join(logsDir, 'files.list');
    writeFileSync(listFile, files.join('\n') + '\n');
    const floor = await compileFloor();
    if ('error' in floor) log(`floor unavailable: ${floor.error}`);

    log(`measuring ${n} containers, ${runs} runs...`);
    // Warm-up of every path (proto loading, dentries, first calls).
    await nativeReader.readCgroups(refs);
    await nativeReader.readCgroups(fullRefs);
    await keptReader.readCgroups(refs);
    await fsReader.readCgroups(refs);
    await cri.listContainerStats(filter);
    const t = {
      a: [] as number[],
      s: [] as number[],
      full: [] as number[],
      ka: [] as number[],
      ks: [] as number[],
      b: [] as number[],
      c: [] as number[],
      floor: [] as number[],
    };
    const d = { a: [] as Delay[], ka: [] as Delay[], b: [] as Delay[], c: [] as Delay[] };
    try {
      for (let r = 0; r < runs; r++) {
        const a = await withEventLoopDelay(() => timeOnce(() => nativeReader.readCgroups(refs)));
        t.a.push(a.value);
        d.a.push(a);
        t.s.push(await timeOnce(() => nativeReader.readCgroupsSync(refs)));
        t.full.push(await timeOnce(() => nativeReader.readCgroups(fullRefs)));
        const ka = await withEventLoopDelay(() => timeOnce(() => keptReader.readCgroups(refs)));
        t.ka.push(ka.value);
        d.ka.push(ka);
        t.ks.push(await timeOnce(() => keptReader.readCgroupsSync(refs)));
        const b = await withEventLoopDelay(() => timeOnce(() => fsReader.readCgroups(refs)));
        t.b.push(b.value);
        d.b.push(b);
        const c = await withEventLoopDelay(() => timeOnce(() => cri.listContainerStats(filter)));
        t.c.push(c.value);
        d.c.push(c);
        if (!('error' in floor)) t.floor.push(await floor.run(listFile));
      }
    } finally {
      if (!('error' in floor)) floor.cleanup();
    }
    await check();
    const keptFds = keptReader.fdTable()?.open ?? 0;
    keptReader.forget(refs);

    const agg = (xs: Delay[]): Delay => ({ p99: median(xs.map((x) => x.p99)), max: Math.max(...xs.map((x) => x.max)) });
    const nativeAsyncMs = median(t.a);
    const nativeSyncMs = median(t.s);
    const nativeFullMs = median(t.full);
    const keptAsyncMs = median(t.ka);
    const keptSyncMs = median(t.ks);
    const fsMs = median(t.b);
    const criMs = median(t.c);
    const floorMs = t.floor.length ? median(t.floor) : undefined;
    const delay = { nativeAsync: agg(d.a), keptAsync: agg(d.ka), fs: agg(d.b), cri: agg(d.c) };
    const name = `real-containerd-${n}`;
    const ratio = round(criMs / keptAsyncMs);
    const results: BenchResult[] = [
      { case: name, metric: 'containers', value: n, unit: 'count' },
      { case: name, metric: 'files', value: files.length, unit: 'count' },
      { case: name, metric: 'files_all_controllers', value: fullFiles.length, unit: 'count' },
      { case: name, metric: 'native_async_snapshot', value: round(nativeAsyncMs), unit: 'ms' },
      { case: name, metric: 'native_sync_snapshot', value: round(nativeSyncMs), unit: 'ms' },
      { case: name, metric: 'native_async_snapshot_all_controllers', value: round(nativeFullMs), unit: 'ms' },
      { case: name, metric: 'fs_snapshot', value: round(fsMs), unit: 'ms' },
      { case: name, metric: 'cri_list_container_stats', value: round(criMs), unit: 'ms' },
      { case: name, metric: 'cri_list_container_stats_first_call', value: round(criFirstMs), unit: 'ms' },
      { case: name, metric: 'kept_async_snapshot', value: round(keptAsyncMs), unit: 'ms' },
      { case: name, metric: 'kept_sync_snapshot', value: round(keptSyncMs), unit: 'ms' },
      { case: name, metric: 'kept_descriptors', value: keptFds, unit: 'count' },
      { case: name, metric: 'cri_vs_native_async', value: round(criMs / nativeAsyncMs), unit: 'ratio' },
      { case: name, metric: 'cri_vs_kept_async', value: ratio, unit: 'ratio' },
      { case: name, metric: 'event_loop_delay_p99_kept_async', value: round(delay.keptAsync.p99), unit: 'ms' },
      { case: name, metric: 'fs_vs_native_async', value: round(fsMs / nativeAsyncMs), unit: 'ratio' },
      { case: name, metric: 'event_loop_delay_p99_native_async', value: round(delay.nativeAsync.p99), unit: 'ms' },
      { case: name, metric: 'event_loop_delay_p99_fs', value: round(delay.fs.p99), unit: 'ms' },
      { case: name, metric: 'event_loop_delay_p99_cri', value: round(delay.cri.p99), unit: 'ms' },
      { case: name, metric: 'event_loop_delay_max_cri', value: round(delay.cri.max), unit: 'ms' },
    ];
    if (floorMs !== undefined) {
      results.push({ case: name, metric: 'floor_snapshot', value: round(floorMs), unit: 'ms' });
      results.push({ case: name, metric: 'native_async_vs_floor', value: round(nativeAsyncMs / floorMs), unit: 'ratio' });
      results.push({ case: name, metric: 'kept_async_vs_floor', value: round(keptAsyncMs / floorMs), unit: 'ratio' });
      results.push({ case: name, metric: 'cri_vs_floor', value: round(criMs / floorMs), unit: 'ratio' });
    }
    const targets: BenchTarget[] = [{ name: 'cri_vs_native_real', value: ratio, op: '>=', target: 10, met: ratio >= 10 }];
    const cell = (v: number | undefined, digits: number, width: number): string => (v === undefined ? '-' : v.toFixed(digits)).padStart(width);
    const row = (label: string, ms: number | undefined, eld: Delay | undefined): string =>
      `${label.padEnd(40)} ${cell(ms, 2, 9)} ${cell(floorMs && ms && ms / floorMs, 2, 9)}x ${cell(ms && ms / keptAsyncMs, 1, 9)}x ${cell(eld?.p99, 2, 9)}`;
    const table = [
      `real containers on containerd: ${n} containers (${files.length} cgroup files: cpuacct + memory), median of ${runs} runs`,
      `${'backend'.padEnd(40)} ${'ms'.padStart(9)} ${'vs floor'.padStart(10)} ${'vs kept'.padStart(10)} ${'eld p99'.padStart(9)}`,
      row('(d) floor: C open/read/close', floorMs, undefined),
      row('(a) native batch reader, async', nativeAsyncMs, delay.nativeAsync),
      row('(a) native batch reader, sync', nativeSyncMs, undefined),
      row(`(e) native, kept-open (${keptFds} fds), async`, keptAsyncMs, delay.keptAsync),
      row('(e) native, kept-open, sync', keptSyncMs, undefined),
      row(`(a) native, all controllers (${fullFiles.length} files)`, nativeFullMs, undefined),
      row('(b) fs reader (TypeScript)', fsMs, delay.fs),
      row('(c) CRI ListContainerStats', criMs, delay.cri),
      row('(c) CRI ListContainerStats, first call', criFirstMs, undefined),
    ];
    return { containers: n, runs, nativeAsyncMs, nativeSyncMs, nativeFullMs, keptAsyncMs, keptSyncMs, floorMs, criMs, criFirstMs, fsMs, delay, results, targets, table };
  } finally {
    log('removing the benchmark pods...');
    await removeBenchPods(cri, cgroups, pods).catch((err) => log(`cleanup failed: ${(err as Error).message}`));
    rmSync(logsDir, { recursive: true, force: true });
    cri.close();
  }
}

/** The real-container case for bench/stats.ts (runStatsBench({ extraCases: [...] })). */
export function realContainerdCase(options: RealStatsBenchOptions = {}): ExtraCase {
  return {
    name: `real containers on containerd (${options.pods ?? 100} pods)`,
    async run() {
      const r = await runRealStatsBench(options);
      return { results: r.results, targets: r.targets, table: r.table };
    },
  };
}

/**
 * Merges rows and targets into a results file: rows of the same cases and targets of the same
 * names are replaced, everything else (the synthetic cases) is kept.
 */
export function mergeStatsResults(file: string, results: BenchResult[], targets: BenchTarget[]): BenchReport {
  let report: BenchReport;
  if (existsSync(file)) {
    report = JSON.parse(readFileSync(file, 'utf8')) as BenchReport;
  } else {
    report = {
      bench: 'stats',
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() },
      results: [],
      targets: [],
    };
  }
  const cases = new Set(results.map((r) => r.case));
  const names = new Set(targets.map((t) => t.name));
  report.results = [...report.results.filter((r) => !cases.has(r.case)), ...results];
  report.targets = [...report.targets.filter((t) => !names.has(t.name)), ...targets];
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
  return report;
}

function parseArgs(argv: string[]): RealStatsBenchOptions & { out?: string | null } {
  const o: RealStatsBenchOptions & { out?: string | null } = {};
  for (const a of argv) {
    const [k, v] = a.split('=', 2);
    if (k === '--pods' && v) o.pods = Number(v);
    else if (k === '--runs' && v) o.runs = Number(v);
    else if (k === '--out' && v) o.out = v;
    else if (k === '--no-write') o.out = null;
    else throw new Error(`unknown argument ${a} (--pods=100 --runs=9 --out=FILE --no-write)`);
  }
  if (o.pods !== undefined && !(Number.isInteger(o.pods) && o.pods >= 1)) throw new Error('--pods must be a positive integer');
  if (o.runs !== undefined && !(Number.isInteger(o.runs) && o.runs >= 1)) throw new Error('--runs must be a positive integer');
  return o;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const opts = parseArgs(process.argv.slice(2));
  runRealStatsBench(opts)
    .then((r) => {
      console.log('');
      for (const l of r.table) console.log(l);
      for (const t of r.targets) console.log(`target ${t.name}: ${t.value} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`);
      const root = findPackageRoot(import.meta.url);
      const file = opts.out === undefined ? root && path.join(root, 'bench', 'results', 'stats.json') : opts.out;
      if (file) {
        mergeStatsResults(file, r.results, r.targets);
        console.log(`merged into ${file}`);
      }
    })
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    });
}
