// Eviction detection benchmark (needs root and the cgroup v1 memory controller): the time from
// memory crossing the eviction threshold to the eviction manager's decision, with the memcg
// threshold notification (native eventfd on memory.usage_in_bytes) and with polling alone
// (the 10 s monitoring period), trials of both interleaved in one run.
//
// Each trial: a fresh memory cgroup stands in for the node (capacity 512 MiB, evictionHard
// memory.available<448Mi, i.e. a working set of 64 MiB crosses it); the real EvictionManager
// reads the cgroup's memory.usage_in_bytes and memory.stat as its Summary; a C allocator
// (bench/eviction-alloc.c) inside the cgroup touches 1 MiB at a time and reports the
// CLOCK_MONOTONIC time just before the MiB that took usage over the threshold. Detection =
// decision time (process.hrtime, same clock) − that time. Poll trials start the allocation at
// a random phase of the monitoring period.
//
//   node dist/bench/eviction.js [--notify-trials 100] [--poll-trials 8] [--out FILE | --no-write]
// Writes bench/results/eviction.json (targets detect_p99_ms_notify, notify_vs_poll_p50).
import { execFile, spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import type { Pod } from '../src/api/types.js';
import { discoverCgroupMounts } from '../src/cgroups/index.js';
import { EvictionManager, memcgUsageThreshold, parseThresholdConfig, type EvictionHost } from '../src/eviction/index.js';
import { createNativeMemcgNotifier, type NativeMemcgNotifier } from '../src/eviction/memcg-notifier.js';
import { findPackageRoot } from '../src/native.js';
import { loadOomNative } from '../src/oom/oom-watcher.js';
import type { Summary } from '../src/stats/summary.js';
import { realClock } from '../src/util/clock.js';
import { createLogger, setLogSink } from '../src/util/log.js';
import { createMemoryCgroup } from '../test/fixtures/oom-cgroup.js';

const MI = 1024n * 1024n;
const CAPACITY = 512n * MI;
const THRESHOLD = '448Mi';
const MONITORING_PERIOD_MS = 10_000;

interface Options { notifyTrials: number; pollTrials: number; out: string | null | undefined }

function parseArgs(argv: string[]): Options {
  const o: Options = { notifyTrials: 100, pollTrials: 8, out: undefined };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--notify-trials' && v) { o.notifyTrials = Number(v); i++; } else if (k === '--poll-trials' && v) { o.pollTrials = Number(v); i++; } else if (k === '--out' && v) { o.out = v; i++; } else if (k === '--no-write') { o.out = null; } else throw new Error(`unknown argument ${k} (usage: eviction.js [--notify-trials N] [--poll-trials N] [--out FILE | --no-write])`);
  }
  return o;
}

function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
const round = (v: number, d = 3): number => (Number.isFinite(v) ? Number(v.toFixed(d)) : v);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function allocBinary(): Promise<string> {
  const root = findPackageRoot();
  const source = root && path.join(root, 'bench', 'eviction-alloc.c');
  if (!source || !(await access(source).then(() => true, () => false))) throw new Error('bench/eviction-alloc.c not found');
  const out = path.join(await mkdtemp(path.join(os.tmpdir(), 'kts-evict-alloc-')), 'eviction-alloc');
  await new Promise<void>((resolve, reject) =>
    execFile('gcc', ['-O1', '-o', out, source], (err, _o, stderr) => (err ? reject(new Error(`gcc eviction-alloc.c: ${stderr || err.message}`)) : resolve())));
  return out;
}

/** The cgroup's memory as the node's Summary (the manager's only input besides its pods). */
async function cgroupSummary(dir: string, pod: Pod): Promise<Summary> {
  const [usageText, stat] = await Promise.all([readFile(path.join(dir, 'memory.usage_in_bytes'), 'utf8'), readFile(path.join(dir, 'memory.stat'), 'utf8')]);
  const usage = BigInt(usageText.trim());
  const inactive = BigInt(/^total_inactive_file (\d+)$/m.exec(stat)?.[1] ?? '0');
  const ws = usage > inactive ? usage - inactive : 0n;
  const time = new Date();
  return {
    node: { nodeName: 'bench', startTime: null, memory: { time, usageBytes: usage, workingSetBytes: ws, availableBytes: CAPACITY > ws ? CAPACITY - ws : 0n } },
    pods: [{ podRef: { name: pod.metadata.name!, namespace: 'default', uid: pod.metadata.uid! }, startTime: null, containers: [], memory: { time, workingSetBytes: ws } }],
  };
}

async function trial(mode: 'notify' | 'poll', bin: string): Promise<number> {
  const mounts = await discoverCgroupMounts();
  const { native, error } = loadOomNative();
  if (mode === 'notify' && !native) throw new Error(`native addon: ${error}`);
  const cg = await createMemoryCgroup(Number(2n * CAPACITY), 'kts-evict-bench');
  const log = createLogger();
  const pod: Pod = { metadata: { uid: 'bench-pod', name: 'hog', namespace: 'default' }, spec: { containers: [{ name: 'hog', image: 'x' }] } };
  const [threshold] = parseThresholdConfig({ evictionHard: { 'memory.available': THRESHOLD }, evictionSoft: {}, evictionSoftGracePeriod: {}, evictionMinimumReclaim: {}, enforceNodeAllocatable: [] });
  // The usage the working set threshold corresponds to now (inactive file counted in).
  const crossBytes = memcgUsageThreshold(threshold!, (await cgroupSummary(cg.dir, pod)).node.memory)!;
  const child = spawn(bin, [cg.dir, '160', String(crossBytes)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let cross: bigint | undefined;
  let ready!: () => void;
  const isReady = new Promise<void>((r) => { ready = r; });
  let buf = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => {
    buf += d;
    const lines = buf.split('\n');
    buf = lines.pop()!;
    for (const l of lines) {
      if (l.startsWith('ready')) ready();
      else if (l.startsWith('cross ')) cross = BigInt(l.slice(6));
    }
  });
  let decided: bigint | undefined;
  let passes = 0;
  let notifier: NativeMemcgNotifier | undefined;
  const reasons: string[] = [];
  const host: EvictionHost = {
    activePods: () => (decided ? [] : [pod]),
    summary: () => cgroupSummary(cg.dir, pod),
    evictPod: () => undefined,
    podCleanedUp: () => true,
    recordEvent: () => undefined,
  };
  const manager = new EvictionManager({
    host, clock: realClock, log, thresholds: [threshold!], pressureTransitionPeriodMs: 300_000, maxPodGracePeriodSeconds: 0,
    monitoringPeriodMs: MONITORING_PERIOD_MS,
    memcgNotifier: mode === 'notify' ? (onCross) => (notifier = createNativeMemcgNotifier({ native: native!, mounts, log, onCross, memoryDir: () => cg.dir }).notifier) : undefined,
  });
  manager.onSynchronize = (r, reason) => {
    passes++;
    reasons.push(`${reason}:${r.thresholdsMet.length}`);
    if (r.evicted && decided === undefined) decided = process.hrtime.bigint();
  };
  try {
    await isReady;
    manager.start();
    while (passes === 0) await sleep(1);
    await sleep(mode === 'poll' ? Math.random() * MONITORING_PERIOD_MS : 20 + Math.random() * 80);
    child.stdin.write('go\n');
    const end = Date.now() + 3 * MONITORING_PERIOD_MS;
    while ((decided === undefined || cross === undefined) && Date.now() < end) await sleep(1);
    if (decided === undefined || cross === undefined) throw new Error(`${mode} trial: no ${cross === undefined ? 'crossing' : 'decision'} within ${3 * MONITORING_PERIOD_MS} ms`);
    const ms = Number(decided - cross) / 1e6;
    if (mode === 'notify' && ms > 100) {
      process.stderr.write(`slow notify trial: ${ms} ms; armed ${JSON.stringify([...(notifier?.armed() ?? new Map()).values()].map((a) => String(a.bytes)))} cross at ${crossBytes}; notification ${notifier?.lastCross ? `seen ${Number(notifier.lastCross.observedTimeNs - cross) / 1e6} ms after the crossing` : 'not seen'}; passes ${reasons.join(' ')}\n`);
    }
    return ms;
  } finally {
    manager.stop();
    child.stdin.end();
    child.kill('SIGKILL');
    await new Promise((r) => child.once('close', r));
    await cg.remove();
  }
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  setLogSink(() => undefined);
  const mounts = await discoverCgroupMounts();
  if (!mounts.v1.memory) throw new Error('bench:eviction needs the cgroup v1 memory controller (memcg usage thresholds are v1 only)');
  const bin = await allocBinary();
  const samples = { notify: [] as number[], poll: [] as number[] };
  // Interleaved: a poll trial, then its share of notify trials, so both see the same machine.
  const perPoll = Math.max(1, Math.ceil(opts.notifyTrials / Math.max(1, opts.pollTrials)));
  while (samples.notify.length < opts.notifyTrials || samples.poll.length < opts.pollTrials) {
    if (samples.poll.length < opts.pollTrials) {
      samples.poll.push(await trial('poll', bin));
      process.stderr.write(`poll trial ${samples.poll.length}: ${round(samples.poll.at(-1)!, 1)} ms\n`);
    }
    for (let i = 0; i < perPoll && samples.notify.length < opts.notifyTrials; i++) samples.notify.push(await trial('notify', bin));
  }
  const stats = (xs: number[]) => ({ p50: percentile(xs, 50), p99: percentile(xs, 99), max: Math.max(...xs), min: Math.min(...xs) });
  const n = stats(samples.notify);
  const p = stats(samples.poll);
  const results = [
    ...(['notify', 'poll'] as const).flatMap((mode) => {
      const s = mode === 'notify' ? n : p;
      return [
        { case: `${mode}`, metric: 'detect_p50', value: round(s.p50), unit: 'ms' },
        { case: `${mode}`, metric: 'detect_p99', value: round(s.p99), unit: 'ms' },
        { case: `${mode}`, metric: 'detect_min', value: round(s.min), unit: 'ms' },
        { case: `${mode}`, metric: 'detect_max', value: round(s.max), unit: 'ms' },
        { case: `${mode}`, metric: 'trials', value: samples[mode].length, unit: 'count' },
      ];
    }),
    { case: 'poll', metric: 'monitoring_period', value: MONITORING_PERIOD_MS, unit: 'ms' },
  ];
  const ratio = p.p50 > 0 ? n.p50 / p.p50 : NaN;
  const targets = [
    { name: 'detect_p99_ms_notify', value: round(n.p99), op: '<=' as const, target: 100, met: n.p99 <= 100 },
    { name: 'notify_vs_poll_p50', value: round(ratio, 5), op: '<=' as const, target: 0.05, met: ratio <= 0.05 },
  ];
  console.log('\nmode     trials   p50 ms     p99 ms     min ms     max ms');
  for (const [mode, s] of [['notify', n], ['poll', p]] as const) {
    console.log(`${mode.padEnd(8)} ${String(samples[mode].length).padStart(6)} ${round(s.p50, 1).toString().padStart(8)} ${round(s.p99, 1).toString().padStart(10)} ${round(s.min, 1).toString().padStart(10)} ${round(s.max, 1).toString().padStart(10)}`);
  }
  for (const t of targets) console.log(`target ${t.name}: ${t.value} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`);
  const report = {
    bench: 'eviction',
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() },
    results,
    targets,
  };
  const root = findPackageRoot();
  const file = opts.out === undefined ? (root && path.join(root, 'bench', 'results', 'eviction.json')) : opts.out;
  if (file) {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, JSON.stringify(report, null, 2) + '\n');
    console.log(`wrote ${file}`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
