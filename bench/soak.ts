// Soak benchmark. The real kubelet-ts CLI (its own process) runs 1000 static pods against the
// SIMULATED CRI runtime (`kubelet-ts sim-runtime`, another process: in-memory sandboxes and
// containers, nothing runs; a test double) while the simulator churns 1% of the containers per
// second (exits, restarts, whole pods replaced). After a warm-up, the kubelet's own /metrics is
// scraped each minute: heap used, RSS, libuv handles, timers. Growth is the Theil-Sen slope of
// the per-minute samples (the median of all pairwise slopes: one GC-timing outlier cannot move
// it) times the window; the median of the last three samples minus that of the first three is
// reported beside it. Prints a table; writes bench/results/soak.json.
//   node dist/bench/soak.js [--pods=1000] [--churn-percent=1] [--minutes=10] [--warmup-minutes=3]
//        [--out=FILE] [--no-write]
// KTS_SOAK_MINUTES and KTS_SOAK_WARMUP_MINUTES override the defaults (shorter runs while developing;
// the committed result is a run of at least 10 minutes).
// Pod cgroups are real (the kubelet creates them, as root, under a private cgroupRoot); pod
// dirs, logs, manifests and the socket live in a temp dir. All of it, and both processes, are
// removed at the end, also on SIGINT/SIGTERM or a failure.

import { fork, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.join(here, '..', '..');
const cli = path.join(repo, 'bin', 'kubelet-ts.mjs');

interface Args {
  pods: number;
  churnPercent: number;
  minutes: number;
  warmupMinutes: number;
  sampleEverySec: number;
  out: string;
  write: boolean;
}

function parseArgs(argv: string[]): Args {
  const envNum = (k: string, d: number): number => (process.env[k] ? Number(process.env[k]) : d);
  const a: Args = {
    pods: 1000,
    churnPercent: 1,
    minutes: envNum('KTS_SOAK_MINUTES', 10),
    warmupMinutes: envNum('KTS_SOAK_WARMUP_MINUTES', 3),
    sampleEverySec: 60,
    out: path.join(process.cwd(), 'bench', 'results', 'soak.json'),
    write: true,
  };
  for (const arg of argv) {
    const [k, v = ''] = arg.split('=');
    if (k === '--pods') a.pods = Number(v);
    else if (k === '--churn-percent') a.churnPercent = Number(v);
    else if (k === '--minutes') a.minutes = Number(v);
    else if (k === '--warmup-minutes') a.warmupMinutes = Number(v);
    else if (k === '--sample-every-s') a.sampleEverySec = Number(v);
    else if (k === '--out') a.out = v;
    else if (k === '--no-write') a.write = false;
    else throw new Error(`unknown argument ${arg}`);
  }
  for (const [k, v] of Object.entries(a)) if (typeof v === 'number' && !(v >= 0)) throw new Error(`--${k}: expected a number >= 0, got ${v}`);
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

/** Theil-Sen estimator: the median of the slopes between every pair of points (per unit of x). */
export function theilSenSlope(xs: number[], ys: number[]): number {
  const slopes: number[] = [];
  for (let i = 0; i < xs.length; i++) {
    for (let j = i + 1; j < xs.length; j++) if (xs[j] !== xs[i]) slopes.push((ys[j]! - ys[i]!) / (xs[j]! - xs[i]!));
  }
  return median(slopes);
}

/** Median of the last k samples minus the median of the first k. */
function endsDelta(ys: number[], k = 3): number {
  const n = Math.min(k, Math.floor(ys.length / 2));
  return n ? median(ys.slice(-n)) - median(ys.slice(0, n)) : NaN;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

// ---- cleanup that also runs on a signal ----

const cleanups: Array<() => Promise<void> | void> = [];
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const f of cleanups.reverse()) {
      try {
        await f();
      } catch (err) {
        console.error(`# cleanup: ${(err as Error).message}`);
      }
    }
  })();
  return cleaning;
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(sig, () => {
    console.error(`# ${sig}: stopping kubelet-ts and the simulated runtime, removing temp files`);
    void cleanup().finally(() => process.exit(130));
  });
}

/** Stops a child with SIGTERM, then SIGKILL after `graceMs` (kubelet-ts may hang on SIGTERM). */
async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(t);
}

/** Mount points of every cgroup hierarchy (v1 and v2). */
function cgroupMounts(): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup' || f[2] === 'cgroup2')
    .map((f) => f[1]!.replace(/\\040/g, ' '));
}

/** rmdir a cgroup subtree, children first (control files are not removable and need not be). */
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
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') console.error(`# cleanup: cannot remove cgroup ${dir}: ${(err as Error).message}`);
  }
}

// ---- the two processes ----

interface Sim {
  child: ChildProcess;
  request(msg: Record<string, unknown>): Promise<Record<string, unknown>>;
}

async function startSim(socket: string, logFile: string): Promise<Sim> {
  const log = createWriteStream(logFile);
  const child = fork(cli, ['sim-runtime', '--socket', socket, '--containers', '0', '--churn-percent', '0'], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  child.stderr!.pipe(log);
  cleanups.push(() => stopChild(child, 5000));
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

interface SimStats {
  counts: { sandboxes: number; containers: number };
  churn: { exits: number; restarts: number; podsReplaced: number; events: number };
}

function podManifest(i: number): string {
  const name = `soak-${String(i).padStart(4, '0')}`;
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'kts-soak', labels: { app: 'soak', index: String(i) } },
    spec: {
      restartPolicy: 'Always',
      containers: [
        {
          name: 'app',
          image: 'registry.example/kts-soak/app:1.0',
          command: ['/app', '--serve'],
          env: [{ name: 'POD_INDEX', value: String(i) }],
          resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
        },
      ],
    },
  });
}

interface Sample {
  minute: number;
  /** Heap used right after the kubelet's last mark-compact: the live set. */
  heapLiveMb: number;
  heapUsedMb: number;
  rssMb: number;
  handles: number;
  resources: number;
  refTimers: number;
  clockTimers: number;
  cpuSec: number;
  containers: number;
  churnEvents: number;
}

function metricValue(text: string, name: string): number {
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  if (!m) throw new Error(`kubelet-ts /metrics has no ${name}`);
  return Number(m[1]);
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const log = (s: string): void => console.log(s);
  if (process.getuid?.() !== 0) {
    console.error('# bench soak: needs root (the kubelet creates real pod cgroups, under a private cgroupRoot)');
    return 1;
  }
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'kts-soak-'));
  const cgroupRoot = `/${path.basename(tmp)}`;
  cleanups.push(() => rmSync(tmp, { recursive: true, force: true }));
  cleanups.push(() => { for (const m of cgroupMounts()) removeCgroupTree(path.join(m, cgroupRoot)); });
  const manifests = path.join(tmp, 'manifests');
  mkdirSync(manifests);
  for (let i = 0; i < args.pods; i++) writeFileSync(path.join(manifests, `soak-${i}.json`), podManifest(i));

  log(`# bench soak: kubelet-ts (real process) on the SIMULATED CRI runtime (a test double: in-memory containers, nothing runs)`);
  log(`# ${args.pods} static pods, churn ${args.churnPercent}%/s of containers, warm-up ${args.warmupMinutes} min, ${args.minutes} min sampled every ${args.sampleEverySec} s`);
  const socket = path.join(tmp, 'sim.sock');
  const sim = await startSim(socket, path.join(tmp, 'sim.log'));

  const port = await freePort();
  const config = path.join(tmp, 'kubelet-config.yaml');
  writeFileSync(
    config,
    [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      `containerRuntimeEndpoint: unix://${socket}`,
      `staticPodPath: ${manifests}`,
      `podLogsDir: ${path.join(tmp, 'pod-logs')}`,
      `cgroupRoot: ${cgroupRoot}`,
      'readOnlyPort: ' + port,
      'healthzPort: 0',
      'fileCheckFrequency: 20s',
      // standalone: no API server for webhook authn/authz (upstream refuses them); no secure port
      'authentication: {webhook: {enabled: false}}',
      'authorization: {mode: AlwaysAllow}',
      'enableServer: false',
      '',
    ].join('\n'),
  );
  const kubeletLog = path.join(tmp, 'kubelet.log');
  const kubelet = spawn(process.execPath, [cli, '--config', config, '--root-dir', path.join(tmp, 'root'), '--hostname-override', 'kts-soak-node', '-v', '0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  kubelet.stderr!.pipe(createWriteStream(kubeletLog));
  cleanups.push(() => stopChild(kubelet, 10_000));
  const kubeletDied = (): Error => new Error(`kubelet-ts exited (${kubelet.exitCode ?? kubelet.signalCode}):\n${tail(kubeletLog)}`);
  const metrics = async (): Promise<string> => {
    if (kubelet.exitCode !== null) throw kubeletDied();
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
    return res.text();
  };
  const simStats = async (): Promise<SimStats> => (await sim.request({ cmd: 'stats' })) as unknown as SimStats;

  // Up: every pod has its sandbox and container on the simulator.
  const t0 = Date.now();
  for (;;) {
    if (kubelet.exitCode !== null) throw kubeletDied();
    const s = await simStats();
    if (s.counts.sandboxes >= args.pods && s.counts.containers >= args.pods) break;
    if (Date.now() - t0 > 15 * 60_000) throw new Error(`pods not up after 15 min: ${JSON.stringify(s.counts)}`);
    await sleep(2000);
  }
  const startupSec = (Date.now() - t0) / 1000;
  await metrics();
  log(`# all ${args.pods} pods running after ${round(startupSec, 1)} s`);

  const eventsPerSecond = (args.churnPercent / 100) * (await simStats()).counts.containers;
  await sim.request({ cmd: 'churn', eventsPerSecond });
  log(`# churn on: ${round(eventsPerSecond, 1)} container state changes/s; warming up ${args.warmupMinutes} min, then until the container count is steady`);
  // Dead attempts the kubelet keeps (up to two per container) pile up at first; what they cost is
  // not a leak, so sampling starts once the count has grown less than 2% in a minute.
  const warmStart = Date.now();
  await sleep(args.warmupMinutes * 60_000);
  for (let prev = (await simStats()).counts.containers; Date.now() - warmStart < (args.warmupMinutes + 10) * 60_000; ) {
    await sleep(60_000);
    const now = (await simStats()).counts.containers;
    if (now < prev * 1.02) break;
    prev = now;
  }
  const warmupMin = (Date.now() - warmStart) / 60_000;
  log(`# warm-up done after ${round(warmupMin, 1)} min`);

  // Each sample: five scrapes a second apart; heap used is their minimum (garbage only adds to it).
  const take = async (minute: number): Promise<Sample> => {
    const texts: string[] = [];
    for (let i = 0; i < 5; i++) {
      texts.push(await metrics());
      if (i < 4) await sleep(1000);
    }
    const at = (name: string): number[] => texts.map((t) => metricValue(t, name));
    const s = await simStats();
    return {
      minute,
      heapLiveMb: median(at('nodejs_heap_used_after_major_gc_bytes')) / 2 ** 20,
      heapUsedMb: Math.min(...at('nodejs_heap_size_used_bytes')) / 2 ** 20,
      rssMb: median(at('process_resident_memory_bytes')) / 2 ** 20,
      handles: median(at('nodejs_active_handles_total')),
      resources: median(at('nodejs_active_resources_total')),
      refTimers: median(at('nodejs_active_timers_total')),
      clockTimers: median(at('kubelet_ts_clock_pending_timers')),
      cpuSec: cpuSeconds(kubelet.pid!),
      containers: s.counts.containers,
      churnEvents: s.churn.events,
    };
  };
  const samples: Sample[] = [];
  const start = Date.now();
  const header = 'minute  heap_live_MB  heap_used_MB  rss_MB  handles  resources  ref_timers  clock_timers  cpu_s  containers  churn_events';
  log(header);
  for (let i = 0; i <= Math.round((args.minutes * 60) / args.sampleEverySec); i++) {
    const due = start + i * args.sampleEverySec * 1000;
    if (due > Date.now()) await sleep(due - Date.now());
    const s = await take(round((Date.now() - start) / 60_000, 2));
    samples.push(s);
    log(
      [s.minute.toFixed(2).padStart(6), s.heapLiveMb.toFixed(2).padStart(12), s.heapUsedMb.toFixed(2).padStart(12), s.rssMb.toFixed(1).padStart(7), String(s.handles).padStart(8),
        String(s.resources).padStart(10), String(s.refTimers).padStart(11), String(s.clockTimers).padStart(13), s.cpuSec.toFixed(1).padStart(6),
        String(s.containers).padStart(11), String(s.churnEvents).padStart(13)].join(' '),
    );
  }
  const windowMin = samples[samples.length - 1]!.minute - samples[0]!.minute;
  const xs = samples.map((s) => s.minute);
  const growth = (ys: number[]): { slope10: number; ends: number } => ({ slope10: theilSenSlope(xs, ys) * 10, ends: endsDelta(ys) });
  // The live set after a major GC when the kubelet had one in the window, else the scrape minimum.
  const liveKnown = samples.every((s) => Number.isFinite(s.heapLiveMb));
  const heap = growth(samples.map((s) => (liveKnown ? s.heapLiveMb : s.heapUsedMb)));
  const heapUsed = growth(samples.map((s) => s.heapUsedMb));
  const rss = growth(samples.map((s) => s.rssMb));
  const handles = growth(samples.map((s) => s.handles));
  const refTimers = growth(samples.map((s) => s.refTimers));
  const clockTimers = growth(samples.map((s) => s.clockTimers));
  const cpuPct = ((samples[samples.length - 1]!.cpuSec - samples[0]!.cpuSec) / (windowMin * 60)) * 100;
  const churnPerSec = (samples[samples.length - 1]!.churnEvents - samples[0]!.churnEvents) / (windowMin * 60);
  const kase = `sim-${args.pods}pods-churn${args.churnPercent}pct`;

  const results = [
    { case: kase, metric: 'startup_all_pods_running', value: round(startupSec, 1), unit: 's' },
    { case: kase, metric: 'warmup', value: round(warmupMin, 1), unit: 'min' },
    { case: kase, metric: 'window', value: round(windowMin, 2), unit: 'min' },
    { case: kase, metric: 'containers_first', value: samples[0]!.containers, unit: 'containers' },
    { case: kase, metric: 'containers_last', value: samples[samples.length - 1]!.containers, unit: 'containers' },
    { case: kase, metric: 'churn_events_per_sec', value: round(churnPerSec, 2), unit: 'events/s' },
    { case: kase, metric: 'kubelet_cpu', value: round(cpuPct, 1), unit: '% of one core' },
    { case: kase, metric: liveKnown ? 'heap_live_first' : 'heap_used_first', value: round(liveKnown ? samples[0]!.heapLiveMb : samples[0]!.heapUsedMb, 2), unit: 'MB' },
    { case: kase, metric: 'heap_growth_per_10min_theil_sen', value: round(heap.slope10, 3), unit: 'MB' },
    { case: kase, metric: 'heap_growth_last3_minus_first3', value: round(heap.ends, 3), unit: 'MB' },
    { case: kase, metric: 'heap_used_min_of_5_growth_per_10min_theil_sen', value: round(heapUsed.slope10, 3), unit: 'MB' },
    { case: kase, metric: 'rss_first', value: round(samples[0]!.rssMb, 1), unit: 'MB' },
    { case: kase, metric: 'rss_growth_per_10min_theil_sen', value: round(rss.slope10, 2), unit: 'MB' },
    { case: kase, metric: 'rss_growth_last3_minus_first3', value: round(rss.ends, 2), unit: 'MB' },
    { case: kase, metric: 'active_handles_first', value: samples[0]!.handles, unit: 'handles' },
    { case: kase, metric: 'active_handles_growth_per_10min_theil_sen', value: round(handles.slope10, 2), unit: 'handles' },
    { case: kase, metric: 'active_handles_growth_last3_minus_first3', value: handles.ends, unit: 'handles' },
    { case: kase, metric: 'ref_timers_growth_last3_minus_first3', value: refTimers.ends, unit: 'timers' },
    { case: kase, metric: 'clock_pending_timers_first', value: samples[0]!.clockTimers, unit: 'timers' },
    { case: kase, metric: 'clock_pending_timers_growth_last3_minus_first3', value: clockTimers.ends, unit: 'timers' },
    ...samples.flatMap((s) => [
      { case: `${kase}@${s.minute}min`, metric: 'heap_live_after_major_gc', value: round(s.heapLiveMb, 2), unit: 'MB' },
      { case: `${kase}@${s.minute}min`, metric: 'heap_used', value: round(s.heapUsedMb, 2), unit: 'MB' },
      { case: `${kase}@${s.minute}min`, metric: 'rss', value: round(s.rssMb, 1), unit: 'MB' },
      { case: `${kase}@${s.minute}min`, metric: 'active_handles', value: s.handles, unit: 'handles' },
      { case: `${kase}@${s.minute}min`, metric: 'active_timers', value: s.refTimers + s.clockTimers, unit: 'timers' },
    ]),
  ];
  const target = (name: string, value: number, op: '<=' | '>=', t: number) => ({
    name, value: round(value, 3), op, target: t, met: op === '<=' ? value <= t : value >= t,
  });
  // A window shorter than 10 minutes cannot meet a 10-minute target.
  const long = windowMin >= 10;
  const targets = [
    target('heap_growth_mb_10min', long ? heap.slope10 : NaN, '<=', 2),
    target('handles_growth', long ? Math.max(handles.ends, handles.slope10) : NaN, '<=', 0),
  ];
  log(`# heap (${liveKnown ? 'live after major GC' : 'used, min of 5 scrapes'}) growth: ${round(heap.slope10, 3)} MB per 10 min (Theil-Sen), last3-first3 ${round(heap.ends, 3)} MB; heap used ${round(heapUsed.slope10, 3)} MB; RSS ${round(rss.slope10, 2)} MB per 10 min`);
  log(`# handles growth: ${round(handles.slope10, 2)} per 10 min (Theil-Sen), last3-first3 ${handles.ends}; timers: ref'd ${refTimers.ends}, clock ${clockTimers.ends}`);
  for (const t of targets) log(`# target ${t.name}: ${t.value} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT MET'}`);
  const errorLines = grepCount(kubeletLog, /^E\d{4} /);
  log(`# kubelet-ts log: ${statSync(kubeletLog).size} bytes, ${errorLines} error lines`);

  const report = {
    bench: 'soak',
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() },
    command: `node dist/bench/soak.js --pods=${args.pods} --churn-percent=${args.churnPercent} --minutes=${args.minutes} --warmup-minutes=${args.warmupMinutes}`,
    notes: [
      'kubelet-ts runs as its own process (the CLI, static pods from a manifest dir) against the SIMULATED CRI runtime (kubelet-ts sim-runtime, a test double: in-memory sandboxes and containers, nothing runs), also its own process.',
      'Churn is the simulator\'s: container exits (the kubelet restarts them), restarts by the simulator and whole pods replaced (the kubelet recreates its sandboxes and removes the strangers), at churn-percent of the containers per second.',
      'Pod cgroups are real, created by the kubelet under a private cgroupRoot and removed afterwards.',
      'Samples come from the kubelet\'s /metrics: nodejs_heap_used_after_major_gc_bytes (heap used read right after the kubelet\'s last mark-compact: the live set; heap_growth_mb_10min uses it), nodejs_heap_size_used_bytes (minimum of 5 scrapes 1 s apart, reported beside it), process_resident_memory_bytes, nodejs_active_handles_total (ref\'d libuv handles), nodejs_active_timers_total (ref\'d timers) and kubelet_ts_clock_pending_timers (the kubelet clock\'s unref\'d timers).',
      'Growth: Theil-Sen slope (median of pairwise slopes) of the per-minute samples scaled to 10 min, robust to one GC-timed outlier; last3-first3 = median of the last three samples minus median of the first three. handles_growth is the larger of the two.',
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

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

function grepCount(file: string, re: RegExp): number {
  try {
    return readFileSync(file, 'utf8').split('\n').filter((l) => re.test(l)).length;
  } catch {
    return 0;
  }
}

let code = 1;
try {
  code = await main();
} catch (err) {
  console.error(`# bench soak failed: ${(err as Error).stack ?? err}`);
} finally {
  await cleanup();
}
process.exit(code);
