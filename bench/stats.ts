// Stats benchmark: the time of one full cgroup snapshot by each backend, side by side in one
// run, on generated cgroup v2 and v1 trees on tmpfs (100, 1000, 5000 containers):
//   floor        bench/floor.c: plain open/read/close of the same files, no parsing
//   native sync  the addon's batch reader on the calling thread, open/read/close per file
//   native async the same on the libuv pool
//   kept sync    the addon's reader through kept-open descriptors (pread at offset 0)
//   kept async   the same on the libuv pool (what the agent uses)
//   fs           the pure-TypeScript reader (fs.promises)
// Medians over interleaved rounds; event-loop delay of the main thread while async
// snapshots run. Writes bench/results/stats.json. Other cases (real containers through CRI)
// plug in through runStatsBench({ extraCases }). As root it also times the kept-open pread
// loop against io_uring and the floor on real cgroups (bench/stats-uring.ts; --no-uring skips).
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

import { findPackageRoot } from '../src/native.js';
import { createNativeCgroupReader, type NativeCgroupReader } from '../src/stats/cgroup-native-reader.js';
import { FsCgroupReader } from '../src/stats/cgroup-fs-reader.js';
import { cgroupFilesFor } from '../src/stats/cgroup-sample.js';
import type { CgroupRef } from '../src/stats/cgroup-sample.js';
import { generateCgroupTree, removeCgroupTree } from '../test/fixtures/cgroup-tree.js';
import { uringReadsCase } from './stats-uring.js';

const execFileAsync = promisify(execFile);

export interface BenchResult {
  case: string;
  metric: string;
  value: number;
  unit: string;
}

export interface BenchTarget {
  name: string;
  value: number | null;
  op: '<=' | '>=';
  target: number;
  met: boolean;
}

export interface BenchReport {
  bench: string;
  date: string;
  machine: { cpus: number; node: string; kernel: string };
  results: BenchResult[];
  targets: BenchTarget[];
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Wall time of one call in ms. */
export async function timeOnce(fn: () => unknown): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

/** Event-loop delay of the main thread while `fn` runs (p50/p99/max in ms). */
export async function withEventLoopDelay<T>(fn: () => Promise<T>): Promise<{ value: T; p50: number; p99: number; max: number }> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  try {
    const value = await fn();
    return { value, p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 };
  } finally {
    h.disable();
  }
}

export interface Floor {
  /** Reads the files once in C; returns the elapsed ms. */
  run(listFile: string): Promise<number>;
  cleanup(): void;
}

/** Compiles bench/floor.c with gcc -O2 into a temp dir. */
export async function compileFloor(): Promise<Floor | { error: string }> {
  const root = findPackageRoot(import.meta.url);
  if (!root) return { error: 'no package root' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kts-floor-'));
  const bin = path.join(dir, 'floor');
  try {
    await execFileAsync('gcc', ['-O2', '-o', bin, path.join(root, 'bench', 'floor.c')]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    return { error: `gcc failed: ${(err as Error).message}` };
  }
  return {
    async run(listFile: string): Promise<number> {
      const { stdout } = await execFileAsync(bin, [listFile, '1']);
      return Number(stdout.trim()) / 1e6;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface SyntheticCaseOptions {
  version: 1 | 2;
  containers: number;
  /** Directory to build the tree in (tmpfs). */
  dir: string;
  rounds: number;
  /** Rounds for the slow fs reader (default: rounds). */
  fsRounds?: number;
  native?: NativeCgroupReader;
  /** The native reader through kept-open descriptors. */
  kept?: NativeCgroupReader;
  fs: FsCgroupReader;
  floor?: Floor;
}

export interface SyntheticCaseResult {
  name: string;
  files: number;
  floorMs?: number;
  nativeSyncMs?: number;
  nativeAsyncMs?: number;
  keptSyncMs?: number;
  keptAsyncMs?: number;
  /** Descriptors the kept reader held, and reads it fell back to open/read/close for. */
  keptOpen?: number;
  keptFallbackFiles?: number;
  fsMs: number;
  /** Main-thread event-loop delay while snapshots ran (ms). */
  nativeAsyncDelay?: { p50: number; p99: number; max: number };
  keptAsyncDelay?: { p50: number; p99: number; max: number };
  fsDelay: { p50: number; p99: number; max: number };
}

/** One tree, every backend, interleaved rounds (so machine noise hits all alike). */
export async function runSyntheticCase(o: SyntheticCaseOptions): Promise<SyntheticCaseResult> {
  const name = `synthetic-v${o.version}-${o.containers}`;
  const root = path.join(o.dir, name);
  removeCgroupTree(root);
  const tree = generateCgroupTree({ root, version: o.version, containers: o.containers, clockTicks: o.native?.clockTicks });
  const refs: CgroupRef[] = tree.refs;
  const files = refs.flatMap(cgroupFilesFor);
  const listFile = path.join(o.dir, `${name}.list`);
  writeFileSync(listFile, files.join('\n') + '\n');

  const floor: number[] = [];
  const sync: number[] = [];
  const async_: number[] = [];
  const keptSync: number[] = [];
  const keptAsync: number[] = [];
  const fsTimes: number[] = [];
  const fsRounds = o.fsRounds ?? o.rounds;
  // Warm-up: dentries and the first-call costs of each path.
  if (o.native) await o.native.readCgroups(refs);
  if (o.kept) await o.kept.readCgroups(refs);
  await o.fs.readCgroups(refs);
  const keptStart = o.kept?.fdTable();

  const asyncDelay = { p50: [] as number[], p99: [] as number[], max: [] as number[] };
  const keptDelay = { p50: [] as number[], p99: [] as number[], max: [] as number[] };
  const fsDelay = { p50: [] as number[], p99: [] as number[], max: [] as number[] };
  for (let r = 0; r < o.rounds; r++) {
    if (o.floor) floor.push(await o.floor.run(listFile));
    if (o.native) {
      const native = o.native;
      sync.push(await timeOnce(() => native.readCgroupsSync(refs)));
      const d = await withEventLoopDelay(() => timeOnce(() => native.readCgroups(refs)));
      async_.push(d.value);
      asyncDelay.p50.push(d.p50);
      asyncDelay.p99.push(d.p99);
      asyncDelay.max.push(d.max);
    }
    if (o.kept) {
      const kept = o.kept;
      keptSync.push(await timeOnce(() => kept.readCgroupsSync(refs)));
      const d = await withEventLoopDelay(() => timeOnce(() => kept.readCgroups(refs)));
      keptAsync.push(d.value);
      keptDelay.p50.push(d.p50);
      keptDelay.p99.push(d.p99);
      keptDelay.max.push(d.max);
    }
    if (r < fsRounds) {
      const d = await withEventLoopDelay(() => timeOnce(() => o.fs.readCgroups(refs)));
      fsTimes.push(d.value);
      fsDelay.p50.push(d.p50);
      fsDelay.p99.push(d.p99);
      fsDelay.max.push(d.max);
    }
  }
  const keptEnd = o.kept?.fdTable();
  // Release this tree's descriptors before the next case.
  o.kept?.forget(refs);
  removeCgroupTree(root);
  rmSync(listFile, { force: true });
  const agg = (d: typeof fsDelay) => ({ p50: median(d.p50), p99: median(d.p99), max: Math.max(...d.max) });
  return {
    name,
    files: files.length,
    floorMs: o.floor ? median(floor) : undefined,
    nativeSyncMs: o.native ? median(sync) : undefined,
    nativeAsyncMs: o.native ? median(async_) : undefined,
    keptSyncMs: o.kept ? median(keptSync) : undefined,
    keptAsyncMs: o.kept ? median(keptAsync) : undefined,
    keptOpen: keptEnd?.open,
    keptFallbackFiles:
      keptStart && keptEnd ? Math.round((keptEnd.fallbacks - keptStart.fallbacks) / (2 * o.rounds)) : undefined,
    fsMs: median(fsTimes),
    nativeAsyncDelay: o.native ? agg(asyncDelay) : undefined,
    keptAsyncDelay: o.kept ? agg(keptDelay) : undefined,
    fsDelay: agg(fsDelay),
  };
}

/** The synthetic case's rows for results[]. */
export function syntheticRows(c: SyntheticCaseResult): BenchResult[] {
  const rows: BenchResult[] = [{ case: c.name, metric: 'files', value: c.files, unit: 'count' }];
  const ms = (metric: string, v: number | undefined): void => {
    if (v !== undefined && Number.isFinite(v)) rows.push({ case: c.name, metric, value: round(v), unit: 'ms' });
  };
  const ratio = (metric: string, v: number | undefined): void => {
    if (v !== undefined && Number.isFinite(v)) rows.push({ case: c.name, metric, value: round(v), unit: 'ratio' });
  };
  ms('floor_snapshot', c.floorMs);
  ms('native_sync_snapshot', c.nativeSyncMs);
  ms('native_async_snapshot', c.nativeAsyncMs);
  ms('kept_sync_snapshot', c.keptSyncMs);
  ms('kept_async_snapshot', c.keptAsyncMs);
  if (c.keptOpen !== undefined) rows.push({ case: c.name, metric: 'kept_descriptors', value: c.keptOpen, unit: 'count' });
  if (c.keptFallbackFiles !== undefined) {
    rows.push({ case: c.name, metric: 'kept_fallback_files_per_snapshot', value: c.keptFallbackFiles, unit: 'count' });
  }
  ms('fs_snapshot', c.fsMs);
  if (c.floorMs) {
    ratio('native_sync_vs_floor', c.nativeSyncMs && c.nativeSyncMs / c.floorMs);
    ratio('native_async_vs_floor', c.nativeAsyncMs && c.nativeAsyncMs / c.floorMs);
    ratio('kept_sync_vs_floor', c.keptSyncMs && c.keptSyncMs / c.floorMs);
    ratio('kept_async_vs_floor', c.keptAsyncMs && c.keptAsyncMs / c.floorMs);
    ratio('fs_vs_floor', c.fsMs / c.floorMs);
  }
  ratio('fs_vs_native_async', c.nativeAsyncMs && c.fsMs / c.nativeAsyncMs);
  ms('event_loop_delay_p99_native_async', c.nativeAsyncDelay?.p99);
  ms('event_loop_delay_max_native_async', c.nativeAsyncDelay?.max);
  ms('event_loop_delay_p99_kept_async', c.keptAsyncDelay?.p99);
  ms('event_loop_delay_max_kept_async', c.keptAsyncDelay?.max);
  ms('event_loop_delay_p99_fs', c.fsDelay.p99);
  ms('event_loop_delay_max_fs', c.fsDelay.max);
  return rows;
}

const round = (v: number): number => Math.round(v * 1000) / 1000;

/**
 * Targets at 1000 containers, the worse of v1 and v2. native time = the agent's path: the
 * async reader through kept-open descriptors (else the plain async reader):
 * native_vs_fs_1000 = fs/native (>= 5), native_vs_floor_1000 = native/floor (<= 0.5).
 */
export function syntheticTargets(cases: readonly SyntheticCaseResult[]): BenchTarget[] {
  const at1000 = cases.filter((c) => c.name.endsWith('-1000'));
  const agent = (c: SyntheticCaseResult): number | undefined => c.keptAsyncMs ?? c.nativeAsyncMs;
  const vsFs = at1000.map((c) => (agent(c) ? c.fsMs / agent(c)! : NaN)).filter(Number.isFinite);
  const vsFloor = at1000.map((c) => (agent(c) && c.floorMs ? agent(c)! / c.floorMs : NaN)).filter(Number.isFinite);
  const fsValue = vsFs.length ? round(Math.min(...vsFs)) : null;
  const floorValue = vsFloor.length ? round(Math.max(...vsFloor)) : null;
  return [
    { name: 'native_vs_fs_1000', value: fsValue, op: '>=', target: 5, met: fsValue !== null && fsValue >= 5 },
    { name: 'native_vs_floor_1000', value: floorValue, op: '<=', target: 0.5, met: floorValue !== null && floorValue <= 0.5 },
  ];
}

/** A case added by another part of the benchmark (e.g. CRI ListContainerStats on real containers). */
export interface ExtraCase {
  name: string;
  run(): Promise<{ results: BenchResult[]; targets: BenchTarget[]; table?: string[] }>;
}

export interface StatsBenchOptions {
  sizes?: number[];
  versions?: Array<1 | 2>;
  /** tmpfs directory for the trees (default /dev/shm, else the OS temp dir). */
  dir?: string;
  extraCases?: ExtraCase[];
  /** The io_uring vs pread case on real cgroups (default true; skipped unless root). */
  uring?: boolean;
  /** Where to write the JSON (default bench/results/stats.json under the package root). */
  resultsFile?: string | null;
  log?: (line: string) => void;
}

function roundsFor(n: number): { rounds: number; fsRounds: number } {
  if (n <= 100) return { rounds: 31, fsRounds: 15 };
  if (n <= 1000) return { rounds: 15, fsRounds: 7 };
  return { rounds: 7, fsRounds: 3 };
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : ' '.repeat(n - s.length) + s;
}

const f = (v: number | undefined, digits = 2): string => (v === undefined || !Number.isFinite(v) ? '-' : v.toFixed(digits));

export function syntheticTable(cases: readonly SyntheticCaseResult[]): string[] {
  const head = ['case', 'files', 'floor ms', 'nat sync', 'nat async', 'kept sync', 'kept async', 'fs ms', 'sync/fl', 'async/fl', 'kept/fl', 'fs/fl', 'fs/kept', 'kept fds', 'eld p99 kept', 'eld p99 fs'];
  const widths = [12, 6, 9, 9, 10, 10, 11, 9, 8, 9, 8, 6, 8, 9, 13, 11];
  const lines = [head.map((h, i) => (i === 0 ? h.padEnd(widths[i]!) : pad(h, widths[i]!))).join(' ')];
  for (const c of cases) {
    const cells = [
      c.name.replace('synthetic-', ''),
      String(c.files),
      f(c.floorMs),
      f(c.nativeSyncMs),
      f(c.nativeAsyncMs),
      f(c.keptSyncMs),
      f(c.keptAsyncMs),
      f(c.fsMs),
      f(c.floorMs && c.nativeSyncMs && c.nativeSyncMs / c.floorMs),
      f(c.floorMs && c.nativeAsyncMs && c.nativeAsyncMs / c.floorMs),
      f(c.floorMs && c.keptAsyncMs && c.keptAsyncMs / c.floorMs),
      f(c.floorMs && c.fsMs / c.floorMs, 1),
      f(c.keptAsyncMs && c.fsMs / c.keptAsyncMs, 1),
      c.keptOpen === undefined ? '-' : String(c.keptOpen),
      f(c.keptAsyncDelay?.p99),
      f(c.fsDelay.p99),
    ];
    lines.push(cells.map((s, i) => (i === 0 ? s.padEnd(widths[i]!) : pad(s, widths[i]!))).join(' '));
  }
  return lines;
}

export async function runStatsBench(options: StatsBenchOptions = {}): Promise<BenchReport> {
  const log = options.log ?? ((l: string) => console.log(l));
  const sizes = options.sizes ?? [100, 1000, 5000];
  const versions = options.versions ?? [2, 1];
  const base = options.dir ?? (os.platform() === 'linux' ? '/dev/shm' : os.tmpdir());
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(path.join(base, 'kts-bench-stats-'));

  const native = createNativeCgroupReader();
  if (!native.reader) log(`native reader unavailable: ${native.error}`);
  const plain = native.reader?.withKeepOpen(false);
  const kept = native.reader?.keepOpen ? native.reader.withKeepOpen(true) : undefined;
  const table = kept?.fdTable();
  if (table) log(`kept-open descriptor budget ${table.budget} (RLIMIT_NOFILE soft ${table.softLimit}, high-water ${table.highWater})`);
  const fsReader = new FsCgroupReader({ clockTicksPerSecond: native.reader?.clockTicks });
  const floor = await compileFloor();
  if ('error' in floor) log(`floor unavailable: ${floor.error}`);

  const cases: SyntheticCaseResult[] = [];
  const results: BenchResult[] = [];
  const targets: BenchTarget[] = [];
  try {
    for (const version of versions) {
      for (const containers of sizes) {
        const { rounds, fsRounds } = roundsFor(containers);
        log(`running synthetic v${version} ${containers} containers (${rounds} rounds, fs ${fsRounds})...`);
        const c = await runSyntheticCase({
          version,
          containers,
          dir,
          rounds,
          fsRounds,
          native: plain,
          kept,
          fs: fsReader,
          floor: 'error' in floor ? undefined : floor,
        });
        cases.push(c);
        results.push(...syntheticRows(c));
      }
    }
    targets.push(...syntheticTargets(cases));
    const extraTables: string[] = [];
    const extras = [...(options.extraCases ?? []), ...(options.uring === false ? [] : [uringReadsCase({ log })])];
    for (const extra of extras) {
      log(`running ${extra.name}...`);
      const got = await extra.run();
      results.push(...got.results);
      targets.push(...got.targets);
      if (got.table) extraTables.push(...got.table);
    }

    log('');
    log('cgroup snapshot, median ms per full snapshot (eld = main-thread event-loop delay while snapshots ran)');
    for (const l of syntheticTable(cases)) log(l);
    for (const l of extraTables) log(l);
    log('');
    for (const t of targets) log(`target ${t.name}: ${t.value ?? '-'} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`);
  } finally {
    if (!('error' in floor)) floor.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }

  const report: BenchReport = {
    bench: 'stats',
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() },
    results,
    targets,
  };
  const root = findPackageRoot(import.meta.url);
  const file = options.resultsFile === undefined ? (root && path.join(root, 'bench', 'results', 'stats.json')) : options.resultsFile;
  if (file) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
    log(`wrote ${file}`);
  }
  return report;
}

function parseArgs(argv: string[]): StatsBenchOptions {
  const o: StatsBenchOptions = {};
  for (const a of argv) {
    const [k, v] = a.split('=', 2);
    if (k === '--sizes' && v) o.sizes = v.split(',').map(Number);
    else if (k === '--versions' && v) o.versions = v.split(',').map((x) => (x === '1' ? 1 : 2));
    else if (k === '--dir' && v) o.dir = v;
    else if (k === '--out' && v) o.resultsFile = v;
    else if (k === '--no-write') o.resultsFile = null;
    else if (k === '--no-uring') o.uring = false;
    else throw new Error(`unknown argument ${a} (--sizes=100,1000 --versions=2,1 --dir=/dev/shm --out=FILE --no-write --no-uring)`);
  }
  return o;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runStatsBench(parseArgs(process.argv.slice(2))).catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
