// npm run bench:probes — pods × 3 probes (HTTP, TCP, gRPC) at a 1 s period against local peers,
// driven by the real ProbeManager (shared schedule, workers, results), run once through the
// Piscina pool and once on the main thread, side by side.
//   Peers (--peers): `c` (default) bench/probe-peers.c, one epoll thread compiled here with cc,
//   standing for the applications in other containers so that they do not take the prober's
//   CPU; `node` bench/probe-servers.ts (node http, net and @grpc/grpc-js), to compare.
//   Per mode: the schedule slots of the window that got a probe started, late ones included, per
//   second of the window (`rate`: the schedule's rate when every slot ran, never more; a probe
//   scheduled before the window and started in it is not counted), completions per second apart; start jitter of every start in the window against
//   the schedule; main-thread event-loop delay p99 (`eld_p99`): monitorEventLoopDelay's timer
//   fires every --eld-resolution ms (default 1) and Node records the whole interval between two
//   fires (uv_hrtime now minus the last fire), so the timer's own period is in every sample; the
//   delay proper is the excess over that period, p99(interval) - resolution (the same shift of
//   every sample, so percentiles carry over), reported for both modes and the idle process
//   alike; the raw interval p99 stays in the output and results (`eld_interval_p99`) beside it.
//   A 1 ms timer sees stalls shorter than a 5 ms one would hide inside its wait. CPU per 1000 probes/s of
//   this process, split main thread / pool threads / other threads (GC, libuv) from
//   /proc/self/task, and of the peers process; TIME_WAIT sockets (`ss -tan state time-wait`:
//   those with a peer's port, and the machine's total, which other work adds to).
//   --kinds=http,tcp,grpc keeps only those probes (each pod has one probe per kind) to see what
//   each kind costs; the results file is written by the full run only.
// Exec probes (--exec-pods N, needs root and the runtime; run under the integration lock too):
//   N busybox containers on the project's containerd, each with an exec readiness probe at 1 s
//   through the real runner (CRI ExecSync), measured on their own (bench/probes-exec.ts); its
//   rows (case 'exec') replace those of the last exec run in the results file.
// Writes bench/results/probes.json (targets probe_rate, eld_p99_ms, jitter_p99_ms,
// pool_vs_main_eld_p99, time_wait_sockets).
//   node dist/bench/probes.js [--pods 1000] [--seconds 10] [--threads n] [--kinds=http,tcp,grpc]
//        [--peers=c|node] [--modes=pool,main] [--eld-resolution ms] [--no-write]
//        [--exec-pods N] [--exec-seconds S]
//   --no-write: print only, leave the results file as it is (while iterating).

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Pod, Probe } from '../src/api/types.js';
import { ProbeManager } from '../src/prober/manager.js';
import { createProbeRunner } from '../src/prober/runner.js';
import { realClock } from '../src/util/clock.js';
import { arg, argFlag, argValue, ELD_RESOLUTION_MS, eldOf, type Eld, compileBenchC, countingRunner, percentile, procCpuSeconds, runningStatus, silentLog } from './probes-util.js';

const run = promisify(execFile);

const here = path.dirname(fileURLToPath(import.meta.url));

/** CPU seconds of each thread of this process by thread id. */
function threadCpu(): Map<number, number> {
  const m = new Map<number, number>();
  for (const t of readdirSync('/proc/self/task')) m.set(Number(t), procCpuSeconds(`/proc/self/task/${t}/stat`));
  return m;
}

/** TCP sockets in TIME_WAIT as `ss -tan state time-wait` lists them: all, and those with a peer port. */
async function timeWaitSockets(ports: number[]): Promise<{ all: number; probes: number }> {
  const { stdout } = await run('ss', ['-tanH', 'state', 'time-wait']);
  const lines = stdout.split('\n').filter((l) => l.trim());
  const ours = lines.filter((l) => ports.some((p) => new RegExp(`:${p}\\b`).test(l)));
  return { all: lines.length, probes: ours.length };
}

type Kind = 'http' | 'tcp' | 'grpc';
const KINDS: Kind[] = ['http', 'tcp', 'grpc'];
interface Ports { http: number; tcp: number; grpc: number }

interface RunResult {
  mode: string;
  /** Probes started in the window, per second. */
  rate: number;
  /** Probes that completed in the window, per second (some started before it). */
  completedRate: number;
  jitterP50: number;
  jitterP99: number;
  /** Event-loop delay p99: the excess of the sampling timer's interval over its period. */
  eldP99: number;
  /** The sampling timer's interval p99 as Node records it (period included). */
  eldIntervalP99: number;
  /** Cores per 1000 probes/s: this process, its main thread, its pool threads, its other threads, the peers process. */
  cpuPer1000: number;
  mainPer1000: number;
  poolPer1000: number;
  otherPer1000: number;
  peersPer1000: number;
  ok: number;
  failed: number;
  timeWait: number;
  timeWaitAll: number;
}

function benchPods(n: number, ports: Ports, kinds: Kind[]): Pod[] {
  const probe = (k: Kind): Probe => ({
    ...(k === 'http' ? { httpGet: { port: ports.http, path: '/healthz' } } : k === 'tcp' ? { tcpSocket: { port: ports.tcp } } : { grpc: { port: ports.grpc } }),
    periodSeconds: 1,
  });
  const pods: Pod[] = [];
  for (let i = 0; i < n; i++) {
    const web: Pod['spec']['containers'][number] = { name: 'web' };
    if (kinds.includes('http')) web.livenessProbe = probe('http');
    if (kinds.includes('tcp')) web.readinessProbe = probe('tcp');
    const containers = [web];
    if (kinds.includes('grpc')) containers.push({ name: 'rpc', readinessProbe: probe('grpc') });
    pods.push({ metadata: { uid: `u${i}`, name: `p${i}`, namespace: 'bench' }, spec: { containers } });
  }
  return pods;
}

/** The event-loop delay p99 of this process doing nothing: the machine's floor for eld_p99. */
async function idleEld(seconds: number): Promise<Eld> {
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  eld.disable();
  return eldOf(eld);
}

async function runMode(mode: 'pool' | 'main', pods: Pod[], seconds: number, peers: Peers, threads?: number): Promise<RunResult> {
  const peerPorts = [peers.ports.http, peers.ports.tcp, peers.ports.grpc];
  const tidsBefore = new Set(threadCpu().keys());
  const runner = countingRunner(createProbeRunner({ mode, threads }));
  const statuses = new Map(pods.map((p) => [p.metadata.uid!, runningStatus(p)]));
  const manager = new ProbeManager({
    clock: realClock,
    log: silentLog,
    runner,
    podStatus: (uid) => statuses.get(uid),
    recordEvent: () => {},
    onProbeStart: (_t, late) => runner.onProbeStart(late),
  });
  // The pool's thread starts, loads the probe module and warms up before the schedule does, as
  // in a kubelet that has been running: a cold pool's backlog is not the steady state measured.
  const { http, tcp, grpc } = peers.ports;
  const host = '127.0.0.1';
  await Promise.all(Array.from({ length: 100 }, () => [
    runner.run({ kind: 'http', scheme: 'HTTP', host, port: http, path: '/', headers: [], timeoutMs: 5000 }),
    runner.run({ kind: 'tcp', host, port: tcp, timeoutMs: 5000 }),
    runner.run({ kind: 'grpc', host, port: grpc, service: '', timeoutMs: 5000 }),
  ]).flat());
  // Probes start spread over the first period (the prober's random start), then run at 1 s.
  for (const p of pods) manager.addPod(p);
  await new Promise((r) => setTimeout(r, 3000));
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  runner.windowStart = Date.now();
  runner.windowMs = seconds * 1000;
  runner.counting = true;
  const start = performance.now();
  const cpu0 = process.cpuUsage();
  const thr0 = threadCpu();
  const peers0 = peers.cpuSeconds();
  eld.enable();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  eld.disable();
  runner.counting = false;
  const wall = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const thr1 = threadCpu();
  const peersCores = (peers.cpuSeconds() - peers0) / wall;
  // slots of the window that start late, after it, still count (up to a period late)
  await new Promise((r) => setTimeout(r, 1000));
  manager.stop();
  let mainS = 0;
  let poolS = 0;
  let otherS = 0;
  for (const [tid, s] of thr1) {
    const d = s - (thr0.get(tid) ?? 0);
    if (tid === process.pid) mainS += d;
    // threads born with the runner are the pool's (Piscina workers)
    else if (!tidsBefore.has(tid)) poolS += d;
    else otherS += d;
  }
  // Sockets of probes still finishing close before TIME_WAIT is counted.
  await new Promise((r) => setTimeout(r, 1500));
  const rate = runner.started / seconds;
  const completed = runner.ok + runner.failed;
  const cores = (cpu.user + cpu.system) / 1e6 / wall;
  const per1000 = (c: number): number => (rate ? c / (rate / 1000) : 0);
  const tw = await timeWaitSockets(peerPorts);
  await runner.close();
  return {
    mode, rate, completedRate: completed / wall, jitterP50: percentile(runner.jitter, 50), jitterP99: percentile(runner.jitter, 99), eldP99: eldOf(eld).p99, eldIntervalP99: eldOf(eld).intervalP99,
    cpuPer1000: per1000(cores), mainPer1000: per1000(mainS / wall), poolPer1000: per1000(poolS / wall), otherPer1000: per1000(otherS / wall), peersPer1000: per1000(peersCores),
    ok: runner.ok, failed: runner.failed, timeWait: tw.probes, timeWaitAll: tw.all,
  };
}

interface Peers {
  kind: 'c' | 'node';
  ports: Ports;
  pid: number;
  /** CPU seconds of the peers process so far. */
  cpuSeconds(): number;
  stop(): void;
}

async function startPeers(kind: 'c' | 'node'): Promise<Peers> {
  let child: ChildProcess;
  let cleanup = (): void => {};
  if (kind === 'c') {
    const c = await compileBenchC('probe-peers.c');
    cleanup = c.cleanup;
    child = spawn(c.bin, [], { stdio: ['ignore', 'pipe', 'inherit'] });
  } else {
    child = spawn(process.execPath, [path.join(here, 'probe-servers.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  }
  const ports = await new Promise<Ports>((res, rej) => {
    child.once('exit', (code) => rej(new Error(`peers (${kind}) exited with ${code}`)));
    child.stdout!.once('data', (d) => res(JSON.parse(String(d).split('\n')[0]!)));
  });
  const pid = child.pid!;
  return {
    kind,
    ports,
    pid,
    cpuSeconds: () => procCpuSeconds(`/proc/${pid}/stat`),
    stop: () => {
      child.kill();
      cleanup();
    },
  };
}

const f = (v: number, d: number, w: number): string => v.toFixed(d).padStart(w);

async function networkCase(): Promise<{ results: object[]; targets: object[] } | undefined> {
  const pods = arg('pods', 1000);
  const seconds = arg('seconds', 10);
  // default: the pool's own choice (defaultPoolThreads)
  const threads = argValue('threads') !== undefined ? arg('threads', 1) : undefined;
  const kinds = (argValue('kinds') ?? KINDS.join(',')).split(',').filter((k): k is Kind => (KINDS as string[]).includes(k));
  const modes = (argValue('modes') ?? 'pool,main').split(',').filter((m): m is 'pool' | 'main' => m === 'pool' || m === 'main');
  if (!kinds.length || !modes.length) return undefined;
  const peerKind = argValue('peers') === 'node' ? 'node' : 'c';
  const peers = await startPeers(peerKind);
  const podList = benchPods(pods, peers.ports, kinds);
  const peerPorts = [peers.ports.http, peers.ports.tcp, peers.ports.grpc];
  try {
    const twBefore = await timeWaitSockets(peerPorts);
    const idle = await idleEld(Math.min(seconds, 5));
    const rows: RunResult[] = [];
    for (const mode of modes) {
      // TIME_WAIT lasts 60 s: wait it out so the next run counts only its own
      if (rows.length && rows[rows.length - 1]!.timeWait > 0) await new Promise((r) => setTimeout(r, 61_000));
      rows.push(await runMode(mode, podList, seconds, peers, mode === 'pool' ? threads : undefined));
    }
    const full = kinds.length === KINDS.length;
    console.log(`pods=${pods} probes=${pods * kinds.length} (${kinds.join(', ')}) period=1s seconds=${seconds} peers=${peers.kind} (${peerKind === 'c' ? 'bench/probe-peers.c' : 'bench/probe-servers.ts'}) pool threads: ${threads ?? 'default'} time_wait_before: probes=${twBefore.probes} machine=${twBefore.all}`);
    console.log(`event-loop delay: timer period ${ELD_RESOLUTION_MS} ms; eld_p99 = p99 of (interval - period), interval_p99 = p99 of the interval as Node records it`);
    console.log(`idle  event-loop delay p99 of this process doing nothing (the machine's floor): ${idle.p99.toFixed(2)} ms (interval p99 ${idle.intervalP99.toFixed(2)} ms); load: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    console.log('mode  started/s done/s jitter_p50 jitter_p99 eld_p99 interval_p99 | cores per 1000 probes/s: process  main  pool other peers |  ok failed tw(probes) tw(machine)');
    for (const r of rows) {
      console.log(`${r.mode.padEnd(5)} ${f(r.rate, 0, 9)} ${f(r.completedRate, 0, 6)} ${f(r.jitterP50, 1, 10)} ${f(r.jitterP99, 1, 10)} ${f(r.eldP99, 2, 7)} ${f(r.eldIntervalP99, 2, 12)} | ${' '.repeat(24)}${f(r.cpuPer1000, 3, 7)} ${f(r.mainPer1000, 3, 5)} ${f(r.poolPer1000, 3, 5)} ${f(r.otherPer1000, 3, 5)} ${f(r.peersPer1000, 3, 5)} | ${r.ok} ${r.failed} ${r.timeWait} ${r.timeWaitAll}`);
    }
    if (!full || modes.length < 2) {
      console.log('(a partial run: kinds or modes left out; the results file is not written)');
      return undefined;
    }
    const results = [
      { case: 'idle', metric: 'eld_p99', value: idle.p99, unit: 'ms' },
      { case: 'idle', metric: 'eld_interval_p99', value: idle.intervalP99, unit: 'ms' },
      { case: 'idle', metric: 'eld_resolution', value: ELD_RESOLUTION_MS, unit: 'ms' },
      ...rows.flatMap((r) => [
      { case: r.mode, metric: 'probe_rate', value: r.rate, unit: 'probes/s' },
      { case: r.mode, metric: 'completed_rate', value: r.completedRate, unit: 'probes/s' },
      { case: r.mode, metric: 'jitter_p50', value: r.jitterP50, unit: 'ms' },
      { case: r.mode, metric: 'jitter_p99', value: r.jitterP99, unit: 'ms' },
      { case: r.mode, metric: 'eld_p99', value: r.eldP99, unit: 'ms' },
      { case: r.mode, metric: 'eld_interval_p99', value: r.eldIntervalP99, unit: 'ms' },
      { case: r.mode, metric: 'cpu_per_1000_probes_per_s', value: r.cpuPer1000, unit: 'cores' },
      { case: r.mode, metric: 'main_thread_cpu_per_1000_probes_per_s', value: r.mainPer1000, unit: 'cores' },
      { case: r.mode, metric: 'pool_threads_cpu_per_1000_probes_per_s', value: r.poolPer1000, unit: 'cores' },
      { case: r.mode, metric: 'peers_cpu_per_1000_probes_per_s', value: r.peersPer1000, unit: 'cores' },
      { case: r.mode, metric: 'failed', value: r.failed, unit: 'probes' },
      { case: r.mode, metric: 'time_wait_sockets', value: r.timeWait, unit: 'sockets' },
      { case: r.mode, metric: 'time_wait_sockets_machine', value: r.timeWaitAll, unit: 'sockets' },
    ]), { case: 'peers', metric: `peers_${peers.kind}`, value: 1, unit: 'flag' }];
    const pool = rows.find((r) => r.mode === 'pool')!;
    const mainRun = rows.find((r) => r.mode === 'main')!;
    const target = (name: string, value: number, op: '<=' | '>=', t: number) => ({ name, value, op, target: t, met: op === '<=' ? value <= t : value >= t });
    const targets = [
      target('probe_rate', pool.rate, '>=', 3000),
      target('eld_p99_ms', pool.eldP99, '<=', 10),
      target('jitter_p99_ms', pool.jitterP99, '<=', 50),
      target('pool_vs_main_eld_p99', mainRun.eldP99 ? pool.eldP99 / mainRun.eldP99 : 0, '<=', 0.5),
      target('time_wait_sockets', pool.timeWait, '<=', 100),
    ];
    for (const t of targets) console.log(`target ${t.name}: ${t.value.toFixed(3)} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`);
    // the same ratio on the raw intervals, for the reader (not a target)
    if (mainRun.eldIntervalP99) console.log(`(interval p99 ratio pool/main, period included: ${(pool.eldIntervalP99 / mainRun.eldIntervalP99).toFixed(3)})`);
    if (argFlag('no-write')) {
      console.log('(--no-write: the results file is not written)');
      return undefined;
    }
    return { results, targets };
  } finally {
    peers.stop();
  }
}

async function main(): Promise<void> {
  const network = await networkCase();
  const execPods = arg('exec-pods', 0);
  let exec: object[] | undefined;
  if (execPods > 0) {
    const { execCase } = await import('./probes-exec.js');
    exec = await execCase(execPods, arg('exec-seconds', 20));
  }
  if ((!network && !exec) || argFlag('no-write')) return;
  // Cases not run this time keep their rows from the last run that ran them.
  const file = path.join(here, '..', '..', 'bench', 'results', 'probes.json');
  const prev = JSON.parse(await readFile(file, 'utf8').catch(() => '{}')) as { results?: { case: string }[]; targets?: object[] };
  const ran = new Set<string>([...(network ? ['idle', 'pool', 'main', 'peers'] : []), ...(exec ? ['exec'] : [])]);
  // Rows kept from a run before eld_p99 became the excess over the timer's period held the raw
  // 5 ms interval under that name: they are relabelled as what they measured.
  const kept = (prev.results ?? []).filter((r) => !ran.has(r.case));
  const raw = new Set(kept.filter((r) => (r as { metric?: string }).metric === 'eld_interval_p99').map((r) => r.case));
  for (const r of kept as { case: string; metric?: string; note?: string }[]) {
    if (r.metric === 'eld_p99' && !raw.has(r.case)) Object.assign(r, { metric: 'eld_interval_p99', note: 'raw interval p99 of a 5 ms timer, from a run before eld_p99 was the excess over the period' });
  }
  const results = [...kept, ...(network?.results ?? []), ...(exec ?? [])];
  const targets = network?.targets ?? prev.targets ?? [];
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, JSON.stringify({ bench: 'probes', date: new Date().toISOString(), machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() }, results, targets }, null, 2) + '\n');
}

await main();
