// Stats benchmark, io_uring case: would batching the kept-open reads through io_uring beat the
// pread loop? On real cgroups (N empty cgroups made with mkdir under the host's hierarchies:
// v1 cpuacct + memory, the files the provider reads for a container; and the cgroup2 mount,
// the files of a v2 ref that exist there), side by side in one run, interleaved rounds:
//   floor        C open/read/close of every file (bench/uring-reads.c, as bench/floor.c)
//   pread        C, every file kept open, pread at offset 0 in a loop (the reader's I/O)
//   uring        C, the same descriptors, IORING_OP_READ, one io_uring_enter per SQ chunk
//   uring-fixed  the same with registered files and buffers (IORING_OP_READ_FIXED)
//   uring-async  the same as uring with IOSQE_ASYNC (every read on an io-wq worker)
//   native kept  the addon's reader through kept-open descriptors, sync (reads + parsing)
// Wall and CPU time (the C process's CPU includes its io-wq worker threads). Needs root (mkdir
// in cgroupfs); the cgroups are removed afterwards.
//   node dist/bench/stats-uring.js [--cgroups=1000] [--rounds=15] [--sq=32] [--out=FILE] [--no-write]
// Standalone it merges its rows into bench/results/stats.json; bench/stats.ts runs it as an
// extra case (uringReadsCase()).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

import { cgroupMode, discoverCgroupMounts, type CgroupMounts } from '../src/cgroups/index.js';
import { findPackageRoot } from '../src/native.js';
import { createNativeCgroupReader, type NativeCgroupReader } from '../src/stats/cgroup-native-reader.js';
import { cgroupFilesFor, type CgroupRef } from '../src/stats/cgroup-sample.js';
import { statsCgroupRef } from '../src/stats/provider.js';
import { mergeStatsResults } from './stats-real.js';
import { median, timeOnce, type BenchResult, type BenchTarget, type ExtraCase } from './stats.js';

const execFileAsync = promisify(execFile);

/** The parent of the benchmark's cgroups in every hierarchy (a crashed run's are removed first). */
const PARENT_PREFIX = 'kts-bench-uring-';

export const URING_MODES = ['floor', 'pread', 'uring', 'uring-fixed', 'uring-async'] as const;
export type UringMode = (typeof URING_MODES)[number];

export interface UringReadsOptions {
  /** Cgroups per version. Default 1000. */
  cgroups?: number;
  /** Interleaved rounds. Default 15. */
  rounds?: number;
  /** io_uring submission queue entries. Default 32 (io_uring's best here of 32, 256 and 4096). */
  sqEntries?: number;
  log?: (line: string) => void;
}

export interface UringCaseResult {
  name: string;
  files: number;
  /** Median wall and CPU ms per mode; undefined when the mode could not run (with its errno). */
  wallMs: Partial<Record<UringMode, number>>;
  cpuMs: Partial<Record<UringMode, number>>;
  unavailable: Partial<Record<UringMode, number>>;
  nativeKeptMs?: number;
  /** Files of the refs absent here (the C modes skip them; the native reader tries them). */
  absentFiles: number;
}

interface ReadsProgram {
  /** One process: opens the files (untimed), then `iterations` interleaved passes. */
  run(listFile: string, iterations: number, sq: number): Promise<string>;
  cleanup(): void;
}

async function compileReads(): Promise<ReadsProgram | { error: string }> {
  const root = findPackageRoot(import.meta.url);
  if (!root) return { error: 'no package root' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kts-uring-'));
  const bin = path.join(dir, 'uring-reads');
  try {
    await execFileAsync('gcc', ['-O2', '-o', bin, path.join(root, 'bench', 'uring-reads.c')]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    return { error: `gcc failed: ${(err as Error).message}` };
  }
  return {
    async run(listFile, iterations, sq) {
      return (await execFileAsync(bin, [listFile, String(iterations), String(sq)], { maxBuffer: 1 << 24 })).stdout;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The hierarchies the case's cgroups need, for one version. */
function hierarchiesFor(mounts: CgroupMounts, version: 1 | 2): string[] {
  if (version === 2) return mounts.unified ? [mounts.unified.mountPoint] : [];
  const out: string[] = [];
  for (const c of ['cpuacct', 'memory'] as const) {
    const m = mounts.v1[c];
    if (m && !out.includes(m.mountPoint)) out.push(m.mountPoint);
  }
  return out;
}

function removeParent(dir: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) rmdirSync(path.join(dir, e.name));
  rmdirSync(dir);
}

function removeStale(hierarchies: readonly string[]): void {
  for (const h of hierarchies) {
    for (const e of readdirSync(h, { withFileTypes: true })) {
      if (e.isDirectory() && e.name.startsWith(PARENT_PREFIX)) removeParent(path.join(h, e.name));
    }
  }
}

const lastLines = (stdout: string): Map<string, string[]> => {
  // Keep only each mode's last line: every round runs two passes and times the second.
  const out = new Map<string, string[]>();
  for (const line of stdout.split('\n')) {
    const cells = line.trim().split(/\s+/);
    if (cells.length >= 2) out.set(cells[0]!, cells.slice(1));
  }
  return out;
};

async function runVersion(
  version: 1 | 2,
  mounts: CgroupMounts,
  o: Required<Omit<UringReadsOptions, 'log'>>,
  program: ReadsProgram,
  kept: NativeCgroupReader | undefined,
  workDir: string,
  log: (line: string) => void,
): Promise<UringCaseResult | undefined> {
  const hierarchies = hierarchiesFor(mounts, version);
  if (hierarchies.length === 0) {
    log(`io_uring case v${version}: no such hierarchy here, skipped`);
    return undefined;
  }
  const parent = `${PARENT_PREFIX}${process.pid}`;
  const name = `real-cgroups-v${version}-${o.cgroups}`;
  const refs: CgroupRef[] = [];
  try {
    for (let i = 0; i < o.cgroups; i++) {
      for (const h of hierarchies) mkdirSync(path.join(h, parent, `c${i}`), { recursive: true });
      const cgroupPath = `/${parent}/c${i}`;
      refs.push(version === 2 ? { version: 2, dir: path.join(mounts.unified!.mountPoint, cgroupPath) } : statsCgroupRef(mounts, cgroupPath, 'container'));
    }
    // A hybrid host's cgroup2 mount has no memory/pids/io files: time the files that exist.
    const all = refs.flatMap(cgroupFilesFor);
    const files = all.filter((f) => existsSync(f));
    const listFile = path.join(workDir, `${name}.list`);
    writeFileSync(listFile, files.join('\n') + '\n');

    const wall = new Map<UringMode, number[]>();
    const cpu = new Map<UringMode, number[]>();
    const unavailable: Partial<Record<UringMode, number>> = {};
    const nativeKept: number[] = [];
    if (kept) kept.readCgroupsSync(refs);
    for (let r = 0; r < o.rounds; r++) {
      const lines = lastLines(await program.run(listFile, 2, o.sqEntries));
      for (const mode of URING_MODES) {
        const cells = lines.get(mode);
        if (!cells) continue;
        if (cells[0] === 'unavailable') {
          unavailable[mode] = Number(cells[1]);
          continue;
        }
        (wall.get(mode) ?? wall.set(mode, []).get(mode)!).push(Number(cells[0]) / 1e6);
        (cpu.get(mode) ?? cpu.set(mode, []).get(mode)!).push(Number(cells[1]) / 1e6);
      }
      if (kept) nativeKept.push(await timeOnce(() => kept.readCgroupsSync(refs)));
    }
    const med = (m: Map<UringMode, number[]>): Partial<Record<UringMode, number>> =>
      Object.fromEntries([...m].map(([k, v]) => [k, median(v)]));
    kept?.forget(refs);
    return {
      name,
      files: files.length,
      wallMs: med(wall),
      cpuMs: med(cpu),
      unavailable,
      nativeKeptMs: kept ? median(nativeKept) : undefined,
      absentFiles: all.length - files.length,
    };
  } finally {
    for (const h of hierarchies) {
      try {
        removeParent(path.join(h, parent));
      } catch (err) {
        log(`io_uring case: could not remove ${path.join(h, parent)}: ${(err as Error).message}`);
      }
    }
  }
}

const round = (v: number): number => Math.round(v * 1000) / 1000;

export function uringRows(c: UringCaseResult): BenchResult[] {
  const rows: BenchResult[] = [{ case: c.name, metric: 'files', value: c.files, unit: 'count' }];
  const metric = (mode: UringMode): string => mode.replace('-', '_');
  for (const mode of URING_MODES) {
    const w = c.wallMs[mode];
    const u = c.cpuMs[mode];
    if (w !== undefined) rows.push({ case: c.name, metric: `${metric(mode)}_snapshot`, value: round(w), unit: 'ms' });
    if (u !== undefined) rows.push({ case: c.name, metric: `${metric(mode)}_cpu`, value: round(u), unit: 'ms' });
    if (c.unavailable[mode] !== undefined) rows.push({ case: c.name, metric: `${metric(mode)}_unavailable_errno`, value: c.unavailable[mode]!, unit: 'errno' });
  }
  if (c.nativeKeptMs !== undefined) rows.push({ case: c.name, metric: 'kept_sync_snapshot', value: round(c.nativeKeptMs), unit: 'ms' });
  if (c.absentFiles > 0) rows.push({ case: c.name, metric: 'absent_files', value: c.absentFiles, unit: 'count' });
  const pread = c.wallMs.pread;
  const floor = c.wallMs.floor;
  for (const mode of ['uring', 'uring-fixed', 'uring-async'] as const) {
    const w = c.wallMs[mode];
    const u = c.cpuMs[mode];
    if (w !== undefined && pread) rows.push({ case: c.name, metric: `${metric(mode)}_vs_pread`, value: round(w / pread), unit: 'ratio' });
    if (u !== undefined && c.cpuMs.pread) rows.push({ case: c.name, metric: `${metric(mode)}_cpu_vs_pread_cpu`, value: round(u / c.cpuMs.pread), unit: 'ratio' });
  }
  if (floor) {
    for (const mode of ['pread', 'uring', 'uring-fixed', 'uring-async'] as const) {
      const w = c.wallMs[mode];
      if (w !== undefined) rows.push({ case: c.name, metric: `${metric(mode)}_vs_floor`, value: round(w / floor), unit: 'ratio' });
    }
    if (c.nativeKeptMs !== undefined) rows.push({ case: c.name, metric: 'kept_sync_vs_floor', value: round(c.nativeKeptMs / floor), unit: 'ratio' });
  }
  return rows;
}

const f = (v: number | undefined, digits = 2): string => (v === undefined || !Number.isFinite(v) ? '-' : v.toFixed(digits));

export function uringTable(cases: readonly UringCaseResult[], rounds: number, sq: number): string[] {
  const lines = [`reads of real cgroups, median of ${rounds} interleaved rounds (SQ ${sq}); cpu = the reading process's, io-wq workers included`];
  lines.push(`${'case'.padEnd(22)} ${'mode'.padEnd(24)} ${'wall ms'.padStart(9)} ${'cpu ms'.padStart(9)} ${'vs floor'.padStart(9)} ${'vs pread'.padStart(9)}`);
  for (const c of cases) {
    const floor = c.wallMs.floor;
    const pread = c.wallMs.pread;
    const label = `${c.name.replace('real-cgroups-', '')} (${c.files})`;
    for (const mode of URING_MODES) {
      const w = c.wallMs[mode];
      const desc = c.unavailable[mode] !== undefined ? `${mode} (errno ${c.unavailable[mode]})` : mode;
      lines.push(
        `${label.padEnd(22)} ${desc.padEnd(24)} ${f(w).padStart(9)} ${f(c.cpuMs[mode]).padStart(9)} ${f(floor && w && w / floor).padStart(9)} ${f(pread && w && w / pread).padStart(9)}`,
      );
    }
    const k = c.nativeKeptMs;
    lines.push(`${label.padEnd(22)} ${'native kept, sync'.padEnd(24)} ${f(k).padStart(9)} ${'-'.padStart(9)} ${f(floor && k && k / floor).padStart(9)} ${f(pread && k && k / pread).padStart(9)}`);
    if (c.absentFiles > 0) lines.push(`  (${c.name}: ${c.absentFiles} files absent on this host: the native reader remembers them and opens them again only once per re-check period; its time is reads + parsing)`);
  }
  return lines;
}

/** Runs the v1 and v2 cases this host has. */
export async function runUringReads(options: UringReadsOptions = {}): Promise<{ cases: UringCaseResult[]; table: string[]; results: BenchResult[] }> {
  const log = options.log ?? ((l: string) => console.log(l));
  const o = { cgroups: options.cgroups ?? 1000, rounds: options.rounds ?? 15, sqEntries: options.sqEntries ?? 32 };
  if (os.platform() !== 'linux' || process.getuid?.() !== 0) {
    log('io_uring case: needs root on Linux (it makes cgroups), skipped');
    return { cases: [], table: [], results: [] };
  }
  const mounts = await discoverCgroupMounts();
  const program = await compileReads();
  if ('error' in program) {
    log(`io_uring case: ${program.error}, skipped`);
    return { cases: [], table: [], results: [] };
  }
  const native = createNativeCgroupReader();
  const kept = native.reader?.keepOpen ? native.reader.withKeepOpen(true) : undefined;
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'kts-uring-lists-'));
  const cases: UringCaseResult[] = [];
  try {
    const versions: Array<1 | 2> = cgroupMode(mounts) === 'v2' ? [2] : [1, 2];
    removeStale(versions.flatMap((v) => hierarchiesFor(mounts, v)));
    for (const version of versions) {
      log(`running io_uring case v${version}: ${o.cgroups} cgroups, ${o.rounds} rounds...`);
      const c = await runVersion(version, mounts, o, program, kept, workDir, log);
      if (c) cases.push(c);
    }
  } finally {
    program.cleanup();
    rmSync(workDir, { recursive: true, force: true });
  }
  return { cases, table: uringTable(cases, o.rounds, o.sqEntries), results: cases.flatMap(uringRows) };
}

/** The io_uring case for bench/stats.ts (measurement only: no target). */
export function uringReadsCase(options: UringReadsOptions = {}): ExtraCase {
  return {
    name: `io_uring vs pread on real cgroups (${options.cgroups ?? 1000} per version)`,
    async run() {
      const r = await runUringReads(options);
      return { results: r.results, targets: [] as BenchTarget[], table: r.table };
    },
  };
}

function parseArgs(argv: string[]): UringReadsOptions & { out?: string | null } {
  const o: UringReadsOptions & { out?: string | null } = {};
  const int = (k: string, v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${k} must be a positive integer`);
    return n;
  };
  for (const a of argv) {
    const [k, v] = a.split('=', 2);
    if (k === '--cgroups' && v) o.cgroups = int(k, v);
    else if (k === '--rounds' && v) o.rounds = int(k, v);
    else if (k === '--sq' && v) o.sqEntries = int(k, v);
    else if (k === '--out' && v) o.out = v;
    else if (k === '--no-write') o.out = null;
    else throw new Error(`unknown argument ${a} (--cgroups=1000 --rounds=15 --sq=32 --out=FILE --no-write)`);
  }
  return o;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const opts = parseArgs(process.argv.slice(2));
  runUringReads(opts)
    .then((r) => {
      console.log('');
      for (const l of r.table) console.log(l);
      const root = findPackageRoot(import.meta.url);
      const file = opts.out === undefined ? root && path.join(root, 'bench', 'results', 'stats.json') : opts.out;
      if (file && r.results.length > 0) {
        mergeStatsResults(file, r.results, []);
        console.log(`merged into ${file}`);
      }
    })
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    });
}
