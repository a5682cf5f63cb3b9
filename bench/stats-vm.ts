// Stats benchmark on a real node's cgroup v2 tree: boots the Debian 12 VM (scripts/vm-node.sh:
// systemd, unified cgroup v2) with this project shared in, and inside it, in one run, makes N
// empty cgroups under /sys/fs/cgroup/kts-bench-stats-vm (cpu, io, memory and pids enabled for
// them, as for pod cgroups) and measures one full snapshot of them by
//   (d) the C floor bench/floor.c (open/read/close of each file, nothing else),
//   (a) the native batch reader with open/read/close per file (sync and async),
//   (e) the same reader through kept-open descriptors (sync and async: the agent's path),
//   (b) the TypeScript fs reader,
// interleaved, median of the rounds. Target vm_v2_native_vs_floor_<N> = kept async / floor
// (<= 0.5), both measured in the same run. The VM is emulated (TCG): absolute times are
// emulated times; the ratios are the figures. The floor is compiled on the host (gcc, static)
// into .cache/stats-vm/ of the project, which the VM sees at the same path.
//   node dist/bench/stats-vm.js [--cgroups=1000] [--rounds=9] [--out=FILE] [--no-write]
// It writes its own results file, bench/results/stats-vm.json (one run, never merged), with
// the commit it ran on and whether the tree was clean.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

import { discoverCgroupMounts } from '../src/cgroups/index.js';
import { findPackageRoot } from '../src/native.js';
import { FsCgroupReader } from '../src/stats/cgroup-fs-reader.js';
import { createNativeCgroupReader } from '../src/stats/cgroup-native-reader.js';
import { cgroupFilesFor, type CgroupRef } from '../src/stats/cgroup-sample.js';
import { statsCgroupRef } from '../src/stats/provider.js';
import { median, timeOnce, withEventLoopDelay, type BenchResult, type BenchTarget } from './stats.js';

const execFileAsync = promisify(execFile);

/** The parent of the benchmark's cgroups inside the VM (a crashed run's are removed first). */
const BENCH_CGROUP = 'kts-bench-stats-vm';
const CONTROLLERS = ['cpu', 'io', 'memory', 'pids'];
const RESULT_PREFIX = 'STATS-VM-RESULT ';

interface InsideOptions {
  cgroups: number;
  rounds: number;
  floor: string;
}

interface InsideResult {
  kernel: string;
  cpus: number;
  files: number;
  results: BenchResult[];
  targets: BenchTarget[];
  table: string[];
}

const round = (v: number): number => Math.round(v * 1000) / 1000;

function removeBenchCgroups(parent: string): void {
  if (!existsSync(parent)) return;
  for (const e of readdirSync(parent, { withFileTypes: true })) if (e.isDirectory()) rmdirSync(path.join(parent, e.name));
  rmdirSync(parent);
}

/** Inside the VM: make the cgroups, measure, remove them. */
async function runInside(o: InsideOptions): Promise<InsideResult> {
  if (process.env.KTS_VM !== '1') throw new Error('--inside runs only inside the VM node (KTS_VM=1)');
  const log = (l: string): void => console.error(l);
  const mounts = await discoverCgroupMounts();
  if (!mounts.unified || Object.keys(mounts.v1).length > 0) throw new Error('the VM node is not on the unified cgroup v2 hierarchy alone');
  const top = mounts.unified.mountPoint;
  const parent = path.join(top, BENCH_CGROUP);
  removeBenchCgroups(parent);
  // The controllers of a pod cgroup: enabled at the root (systemd does) and under the parent.
  const rootCtl = readFileSync(path.join(top, 'cgroup.subtree_control'), 'utf8').trim().split(/\s+/);
  for (const c of CONTROLLERS) if (!rootCtl.includes(c)) writeFileSync(path.join(top, 'cgroup.subtree_control'), `+${c}`);
  mkdirSync(parent);
  const names: string[] = [];
  try {
    writeFileSync(path.join(parent, 'cgroup.subtree_control'), CONTROLLERS.map((c) => `+${c}`).join(' '));
    for (let i = 0; i < o.cgroups; i++) {
      const name = `pod${i}`;
      mkdirSync(path.join(parent, name));
      names.push(name);
    }
    const got = readFileSync(path.join(parent, names[0]!, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
    for (const c of CONTROLLERS) if (!got.includes(c)) throw new Error(`controller ${c} not enabled in the benchmark cgroups (${got.join(' ')})`);
    const refs: CgroupRef[] = names.map((n) => statsCgroupRef(mounts, `/${BENCH_CGROUP}/${n}`, 'container'));
    const files = refs.flatMap(cgroupFilesFor);
    const listFile = path.join(os.tmpdir(), `${BENCH_CGROUP}.list`);
    writeFileSync(listFile, files.join('\n') + '\n');

    const native = createNativeCgroupReader();
    if (!native.reader) throw new Error(`native cgroup reader unavailable: ${native.error}`);
    const plain = native.reader.withKeepOpen(false);
    const kept = native.reader.withKeepOpen(true);
    const fsReader = new FsCgroupReader({ clockTicksPerSecond: plain.clockTicks });
    const floorOnce = async (): Promise<number> => {
      const { stdout } = await execFileAsync(o.floor, [listFile, '1']);
      return Number(stdout.trim()) / 1e6;
    };

    // Every file must be there, or the readers do not read the same data as the floor.
    const check = await plain.readCgroups(refs);
    let missing = 0;
    for (let i = 0; i < check.count; i++) if (!check.ok(i)) missing++;
    if (missing) throw new Error(`${missing} of ${refs.length} benchmark cgroups unreadable`);

    log(`measuring ${o.cgroups} cgroups (${files.length} files), ${o.rounds} rounds...`);
    await floorOnce();
    plain.readCgroupsSync(refs);
    await kept.readCgroups(refs);
    await fsReader.readCgroups(refs);
    const keptStart = kept.fdTable();
    const t = { floor: [] as number[], s: [] as number[], a: [] as number[], ks: [] as number[], ka: [] as number[], fs: [] as number[] };
    const eld = { a: [] as number[], ka: [] as number[], fs: [] as number[] };
    const fsRounds = Math.max(1, Math.ceil(o.rounds / 3));
    for (let r = 0; r < o.rounds; r++) {
      t.floor.push(await floorOnce());
      t.s.push(await timeOnce(() => plain.readCgroupsSync(refs)));
      const a = await withEventLoopDelay(() => timeOnce(() => plain.readCgroups(refs)));
      t.a.push(a.value);
      eld.a.push(a.p99);
      t.ks.push(await timeOnce(() => kept.readCgroupsSync(refs)));
      const ka = await withEventLoopDelay(() => timeOnce(() => kept.readCgroups(refs)));
      t.ka.push(ka.value);
      eld.ka.push(ka.p99);
      if (r < fsRounds) {
        const b = await withEventLoopDelay(() => timeOnce(() => fsReader.readCgroups(refs)));
        t.fs.push(b.value);
        eld.fs.push(b.p99);
      }
    }
    const keptEnd = kept.fdTable();
    kept.forget(refs);
    rmSync(listFile, { force: true });

    const floorMs = median(t.floor);
    const syncMs = median(t.s);
    const asyncMs = median(t.a);
    const keptSyncMs = median(t.ks);
    const keptAsyncMs = median(t.ka);
    const fsMs = median(t.fs);
    const name = `vm-v2-${o.cgroups}`;
    const ms = (metric: string, v: number): BenchResult => ({ case: name, metric, value: round(v), unit: 'ms' });
    const ratio = (metric: string, v: number): BenchResult => ({ case: name, metric, value: round(v), unit: 'ratio' });
    const fallbacks = keptStart && keptEnd ? Math.round((keptEnd.fallbacks - keptStart.fallbacks) / (2 * o.rounds)) : undefined;
    const results: BenchResult[] = [
      { case: name, metric: 'cgroups', value: o.cgroups, unit: 'count' },
      { case: name, metric: 'files', value: files.length, unit: 'count' },
      { case: name, metric: 'rounds', value: o.rounds, unit: 'count' },
      { case: name, metric: 'fs_rounds', value: fsRounds, unit: 'count' },
      ms('floor_snapshot', floorMs),
      ms('native_sync_snapshot', syncMs),
      ms('native_async_snapshot', asyncMs),
      ms('kept_sync_snapshot', keptSyncMs),
      ms('kept_async_snapshot', keptAsyncMs),
      ms('fs_snapshot', fsMs),
      { case: name, metric: 'kept_descriptors', value: keptEnd?.open ?? 0, unit: 'count' },
      ...(fallbacks === undefined ? [] : [{ case: name, metric: 'kept_fallback_files_per_snapshot', value: fallbacks, unit: 'count' }]),
      ratio('native_sync_vs_floor', syncMs / floorMs),
      ratio('native_async_vs_floor', asyncMs / floorMs),
      ratio('kept_sync_vs_floor', keptSyncMs / floorMs),
      ratio('kept_async_vs_floor', keptAsyncMs / floorMs),
      ratio('fs_vs_floor', fsMs / floorMs),
      ms('event_loop_delay_p99_native_async', median(eld.a)),
      ms('event_loop_delay_p99_kept_async', median(eld.ka)),
      ms('event_loop_delay_p99_fs', median(eld.fs)),
    ];
    const v = round(keptAsyncMs / floorMs);
    const targets: BenchTarget[] = [{ name: `vm_v2_native_vs_floor_${o.cgroups}`, value: v, op: '<=', target: 0.5, met: v <= 0.5 }];
    const row = (label: string, x: number): string => `${label.padEnd(44)} ${x.toFixed(2).padStart(10)} ${(x / floorMs).toFixed(2).padStart(9)}x`;
    const table = [
      `VM node (TCG-emulated, kernel ${os.release()}, ${os.cpus().length} vCPUs), real cgroup v2: ${o.cgroups} cgroups with ${CONTROLLERS.join('/')}, ${files.length} files; median of ${o.rounds} rounds (fs ${fsRounds})`,
      `${'backend'.padEnd(44)} ${'emul. ms'.padStart(10)} ${'vs floor'.padStart(10)}`,
      row('(d) floor: C open/read/close', floorMs),
      row('(a) native batch reader, sync', syncMs),
      row('(a) native batch reader, async', asyncMs),
      row(`(e) native, kept-open (${keptEnd?.open ?? 0} fds), sync`, keptSyncMs),
      row('(e) native, kept-open, async', keptAsyncMs),
      row('(b) fs reader (TypeScript)', fsMs),
    ];
    return { kernel: os.release(), cpus: os.cpus().length, files: files.length, results, targets, table };
  } finally {
    removeBenchCgroups(parent);
  }
}

function sh(cmd: string, args: string[], cwd: string): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout }));
  });
}

/** On the host: compile the floor, boot the VM, run the inside half once, power off, write the file. */
async function runHost(o: { cgroups: number; rounds: number; out?: string | null }): Promise<void> {
  const root = findPackageRoot(import.meta.url);
  if (!root) throw new Error('no package root');
  const vmNode = path.join(root, 'scripts', 'vm-node.sh');
  const git = (...args: string[]): string => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
  const commit = git('rev-parse', 'HEAD');
  const clean = git('status', '--porcelain', '--untracked-files=no') === '';
  const floorDir = path.join(root, '.cache', 'stats-vm');
  mkdirSync(floorDir, { recursive: true });
  const floor = path.join(floorDir, 'floor');
  // Static, so the binary does not depend on the VM's libc matching the host's.
  await execFileAsync('gcc', ['-O2', '-static', '-o', floor, path.join(root, 'bench', 'floor.c')]);

  const t0 = Date.now();
  console.log('booting the VM node (waits for the VM lock)...');
  const start = await sh('bash', [vmNode, 'start', '--project', root, '--wait', '1800'], root);
  if (start.code !== 0) throw new Error(`vm-node.sh start failed (exit ${start.code})`);
  let inside: InsideResult;
  try {
    const rel = path.relative(root, path.join(root, 'dist', 'bench', 'stats-vm.js'));
    const r = await sh(
      'bash',
      [vmNode, 'run', '--timeout', '1800', '--', 'node', rel, '--inside', `--cgroups=${o.cgroups}`, `--rounds=${o.rounds}`, `--floor=${floor}`],
      root,
    );
    const line = r.stdout.split('\n').find((l) => l.startsWith(RESULT_PREFIX));
    if (r.code !== 0 || !line) throw new Error(`the benchmark inside the VM failed (exit ${r.code})\n${r.stdout}`);
    inside = JSON.parse(line.slice(RESULT_PREFIX.length)) as InsideResult;
  } finally {
    await sh('bash', [vmNode, 'stop'], root);
  }
  const wallS = Math.round((Date.now() - t0) / 1000);
  console.log('');
  for (const l of inside.table) console.log(l);
  for (const t of inside.targets) console.log(`target ${t.name}: ${t.value} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`);
  console.log(`boot + run + power-off: ${wallS} s`);
  const report = {
    bench: 'stats-vm',
    date: new Date().toISOString(),
    commit,
    clean,
    machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() },
    vm: { accel: 'tcg', emulated: true, kernel: inside.kernel, cpus: inside.cpus, wallSeconds: wallS },
    results: inside.results,
    targets: inside.targets,
  };
  const file = o.out === undefined ? path.join(root, 'bench', 'results', 'stats-vm.json') : o.out;
  if (file) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(report, null, 2) + '\n');
    console.log(`wrote ${file}`);
  }
}

function parseArgs(argv: string[]): { inside: boolean; cgroups: number; rounds: number; floor?: string; out?: string | null } {
  const o: { inside: boolean; cgroups: number; rounds: number; floor?: string; out?: string | null } = { inside: false, cgroups: 1000, rounds: 9 };
  for (const a of argv) {
    const [k, v] = a.split('=', 2);
    if (k === '--inside') o.inside = true;
    else if (k === '--cgroups' && v) o.cgroups = Number(v);
    else if (k === '--rounds' && v) o.rounds = Number(v);
    else if (k === '--floor' && v) o.floor = v;
    else if (k === '--out' && v) o.out = v;
    else if (k === '--no-write') o.out = null;
    else throw new Error(`unknown argument ${a} (--cgroups=1000 --rounds=9 --out=FILE --no-write)`);
  }
  if (!(Number.isInteger(o.cgroups) && o.cgroups >= 1)) throw new Error('--cgroups must be a positive integer');
  if (!(Number.isInteger(o.rounds) && o.rounds >= 1)) throw new Error('--rounds must be a positive integer');
  if (o.inside && !o.floor) throw new Error('--inside needs --floor=BIN');
  return o;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const o = parseArgs(process.argv.slice(2));
  const main = o.inside
    ? runInside({ cgroups: o.cgroups, rounds: o.rounds, floor: o.floor! }).then((r) => {
        for (const l of r.table) console.error(l);
        console.log(RESULT_PREFIX + JSON.stringify(r));
      })
    : runHost(o);
  main.catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
