// npm run bench:probes — pods × 3 probes (HTTP, TCP, gRPC) at a 1 s period against local peers
// (bench/probe-servers.ts, another process), driven by the real ProbeManager (shared schedule,
// workers, results), run once through the Piscina pool and once on the main thread, side by
// side: achieved probe rate, start jitter against the schedule, main-thread event-loop delay,
// CPU per 1000 probes/s (all threads of this process), and TIME_WAIT sockets (`ss -tan state
// time-wait`: those with a peer's port, and the machine's total, which other work adds to).
// Exec probes are CRI calls (the runtime forks; the main thread only awaits) and are not run here.
// Writes bench/results/probes.json (targets probe_rate, eld_p99_ms, jitter_p99_ms,
// pool_vs_main_eld_p99, time_wait_sockets).
//   node dist/bench/probes.js [--pods 1000] [--seconds 10] [--threads n]

import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdir, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Pod, PodStatus } from '../src/api/types.js';
import { ProbeManager } from '../src/prober/manager.js';
import { createProbeRunner } from '../src/prober/runner.js';
import type { ProbeRunner } from '../src/prober/types.js';
import { realClock } from '../src/util/clock.js';
import type { Logger } from '../src/util/log.js';

const run = promisify(execFile);

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};

function percentile(xs: number[], p: number): number {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** TCP sockets in TIME_WAIT as `ss -tan state time-wait` lists them: all, and those with a peer port. */
async function timeWaitSockets(ports: number[]): Promise<{ all: number; probes: number }> {
  const { stdout } = await run('ss', ['-tanH', 'state', 'time-wait']);
  const lines = stdout.split('\n').filter((l) => l.trim());
  const ours = lines.filter((l) => ports.some((p) => new RegExp(`:${p}\\b`).test(l)));
  return { all: lines.length, probes: ours.length };
}

interface RunResult { mode: string; rate: number; jitterP50: number; jitterP99: number; eldP99: number; cpuPer1000: number; ok: number; failed: number; timeWait: number; timeWaitAll: number }

function benchPods(n: number, ports: { http: number; tcp: number; grpc: number }): Pod[] {
  const pods: Pod[] = [];
  for (let i = 0; i < n; i++) {
    pods.push({
      metadata: { uid: `u${i}`, name: `p${i}`, namespace: 'bench' },
      spec: {
        containers: [
          { name: 'web', livenessProbe: { httpGet: { port: ports.http, path: '/healthz' }, periodSeconds: 1 }, readinessProbe: { tcpSocket: { port: ports.tcp }, periodSeconds: 1 } },
          { name: 'rpc', readinessProbe: { grpc: { port: ports.grpc }, periodSeconds: 1 } },
        ],
      },
    });
  }
  return pods;
}

function runningStatus(pod: Pod): PodStatus {
  const startedAt = new Date(Date.now() - 3600_000).toISOString();
  return {
    phase: 'Running',
    podIP: '127.0.0.1',
    containerStatuses: pod.spec.containers.map((c, j) => ({
      name: c.name, containerID: `containerd://${pod.metadata.uid}-${j}`, ready: true, started: true, restartCount: 0, image: 'bench', imageID: '',
      state: { running: { startedAt } }, lastState: {},
    })),
  };
}

/** Runs the real ProbeManager (shared schedule, workers, results) with the runner in `mode`. */
/** The event-loop delay p99 of this process doing nothing: the machine's floor for eld_p99. */
async function idleEldP99(seconds: number): Promise<number> {
  const eld = monitorEventLoopDelay({ resolution: 5 });
  eld.enable();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  eld.disable();
  return eld.percentile(99) / 1e6;
}

async function runMode(mode: 'pool' | 'main', pods: Pod[], seconds: number, peerPorts: number[], threads?: number): Promise<RunResult> {
  const inner: ProbeRunner = createProbeRunner({ mode, threads });
  let ok = 0;
  let failed = 0;
  let counting = false;
  const runner: ProbeRunner = {
    run: (r) => inner.run(r).then((o) => {
      if (counting) {
        if (o.result === 'success') ok++;
        else failed++;
      }
      return o;
    }),
    close: () => inner.close(),
  };
  const statuses = new Map(pods.map((p) => [p.metadata.uid!, runningStatus(p)]));
  const jitter: number[] = [];
  const log: Logger = { info() {}, warn() {}, error() {}, v: () => ({ info() {} }), with: () => log } as unknown as Logger;
  const manager = new ProbeManager({
    clock: realClock,
    log,
    runner,
    podStatus: (uid) => statuses.get(uid),
    recordEvent: () => {},
    onProbeStart: (_t, late) => { if (counting) jitter.push(late); },
  });
  // Probes start spread over the first period (the prober's random start), then run at 1 s.
  for (const p of pods) manager.addPod(p);
  await new Promise((r) => setTimeout(r, 2000));
  const eld = monitorEventLoopDelay({ resolution: 5 });
  counting = true;
  const start = performance.now();
  const cpu0 = process.cpuUsage();
  eld.enable();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  eld.disable();
  counting = false;
  const wall = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  manager.stop();
  // Sockets of probes still finishing close before TIME_WAIT is counted.
  await new Promise((r) => setTimeout(r, 1500));
  const rate = (ok + failed) / wall;
  const cores = (cpu.user + cpu.system) / 1e6 / wall;
  const tw = await timeWaitSockets(peerPorts);
  await runner.close();
  return { mode, rate, jitterP50: percentile(jitter, 50), jitterP99: percentile(jitter, 99), eldP99: eld.percentile(99) / 1e6, cpuPer1000: rate ? cores / (rate / 1000) : 0, ok, failed, timeWait: tw.probes, timeWaitAll: tw.all };
}

async function main(): Promise<void> {
  const pods = arg('pods', 1000);
  const seconds = arg('seconds', 10);
  // default: the pool's own choice (availableParallelism - 1, at most 2)
  const threads = process.argv.includes('--threads') ? arg('threads', 1) : undefined;
  const peers = spawn(process.execPath, [path.join(here, 'probe-servers.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ports = await new Promise<{ http: number; tcp: number; grpc: number }>((res) => peers.stdout!.once('data', (d) => res(JSON.parse(String(d)))));
  const podList = benchPods(pods, ports);
  const peerPorts = [ports.http, ports.tcp, ports.grpc];
  try {
    const twBefore = await timeWaitSockets(peerPorts);
    const idle = await idleEldP99(Math.min(seconds, 5));
    const pool = await runMode('pool', podList, seconds, peerPorts, threads);
    // TIME_WAIT lasts 60 s: wait it out so the main-thread run counts only its own
    if (pool.timeWait > 0) await new Promise((r) => setTimeout(r, 61_000));
    const mainRun = await runMode('main', podList, seconds, peerPorts);
    const rows = [pool, mainRun];
    console.log(`pods=${pods} probes=${pods * 3} (http liveness, tcp + grpc readiness) period=1s seconds=${seconds} time_wait_before: probes=${twBefore.probes} machine=${twBefore.all}`);
    console.log('mode  rate/s   jitter_p50_ms jitter_p99_ms eld_p99_ms cpu_cores_per_1000/s ok failed time_wait(probes) time_wait(machine)');
    console.log(`idle  event-loop delay p99 of this process doing nothing (the machine's floor): ${idle.toFixed(1)} ms; pool threads: ${threads ?? 'default'}`);
    for (const r of rows) console.log(`${r.mode.padEnd(5)} ${r.rate.toFixed(0).padStart(7)} ${r.jitterP50.toFixed(1).padStart(13)} ${r.jitterP99.toFixed(1).padStart(13)} ${r.eldP99.toFixed(1).padStart(10)} ${r.cpuPer1000.toFixed(3).padStart(20)} ${r.ok} ${r.failed} ${r.timeWait} ${r.timeWaitAll}`);
    const results = [{ case: 'idle', metric: 'eld_p99', value: idle, unit: 'ms' }, ...rows.flatMap((r) => [
      { case: r.mode, metric: 'probe_rate', value: r.rate, unit: 'probes/s' },
      { case: r.mode, metric: 'jitter_p50', value: r.jitterP50, unit: 'ms' },
      { case: r.mode, metric: 'jitter_p99', value: r.jitterP99, unit: 'ms' },
      { case: r.mode, metric: 'eld_p99', value: r.eldP99, unit: 'ms' },
      { case: r.mode, metric: 'cpu_per_1000_probes_per_s', value: r.cpuPer1000, unit: 'cores' },
      { case: r.mode, metric: 'failed', value: r.failed, unit: 'probes' },
      { case: r.mode, metric: 'time_wait_sockets', value: r.timeWait, unit: 'sockets' },
      { case: r.mode, metric: 'time_wait_sockets_machine', value: r.timeWaitAll, unit: 'sockets' },
    ])];
    const target = (name: string, value: number, op: '<=' | '>=', t: number) => ({ name, value, op, target: t, met: op === '<=' ? value <= t : value >= t });
    const targets = [
      target('probe_rate', pool.rate, '>=', 3000),
      target('eld_p99_ms', pool.eldP99, '<=', 10),
      target('jitter_p99_ms', pool.jitterP99, '<=', 50),
      target('pool_vs_main_eld_p99', mainRun.eldP99 ? pool.eldP99 / mainRun.eldP99 : 0, '<=', 0.5),
      target('time_wait_sockets', pool.timeWait, '<=', 100),
    ];
    for (const t of targets) console.log(`target ${t.name}: ${t.value.toFixed(3)} ${t.op} ${t.target} ${t.met ? 'met' : 'NOT met'}`);
    const file = path.join(here, '..', '..', 'bench', 'results', 'probes.json');
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, JSON.stringify({ bench: 'probes', date: new Date().toISOString(), machine: { cpus: os.cpus().length, node: process.version, kernel: os.release() }, results, targets }, null, 2) + '\n');
  } finally {
    peers.kill();
  }
}

await main();
