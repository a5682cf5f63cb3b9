// npm run bench:probes — pods × 3 probes (HTTP, TCP, gRPC) at a 1 s period against local peers
// (bench/probe-servers.ts, another process), run once through the Piscina pool and once on the
// main thread, side by side: achieved probe rate, start jitter against the schedule, main-thread
// event-loop delay, CPU per 1000 probes/s, and TIME_WAIT sockets left on the machine.
// Exec probes are CRI calls (the runtime forks; the main thread only awaits) and are not run here.
// Writes bench/results/probes.json (targets probe_rate, eld_p99_ms, jitter_p99_ms,
// pool_vs_main_eld_p99, time_wait_sockets).
//   node dist/bench/probes.js [--pods 1000] [--seconds 10]

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createProbeRunner } from '../src/prober/runner.js';
import type { NetworkProbeRequest, ProbeRunner } from '../src/prober/types.js';
import { PROBE_USER_AGENT } from '../src/prober/target.js';

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

function timeWaitSockets(): number {
  let n = 0;
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    try {
      for (const line of readFileSync(f, 'utf8').split('\n').slice(1)) if (line.trim().split(/\s+/)[3] === '06') n++;
    } catch { /* no such table */ }
  }
  return n;
}

interface RunResult { mode: string; rate: number; jitterP50: number; jitterP99: number; eldP99: number; cpuPer1000: number; ok: number; failed: number; timeWait: number }

async function runMode(mode: 'pool' | 'main', reqs: NetworkProbeRequest[], seconds: number): Promise<RunResult> {
  const runner: ProbeRunner = createProbeRunner({ mode });
  // warm the pool / module up
  await Promise.all(reqs.slice(0, 30).map((r) => runner.run(r)));
  const eld = monitorEventLoopDelay({ resolution: 5 });
  const jitter: number[] = [];
  let ok = 0;
  let failed = 0;
  let inflight = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  const cpu0 = process.cpuUsage();
  const timers: NodeJS.Timeout[] = [];
  eld.enable();
  await new Promise<void>((done) => {
    reqs.forEach((r, i) => {
      // Probes spread over the period, as the prober's random start spreads them.
      let due = start + (i / reqs.length) * 1000;
      const fire = (): void => {
        const now = performance.now();
        if (now >= end) return;
        jitter.push(now - due);
        inflight++;
        void runner.run(r).then((o) => {
          inflight--;
          if (o.result === 'success') ok++;
          else failed++;
        });
        due += 1000;
        timers[i] = setTimeout(fire, Math.max(0, due - performance.now()));
      };
      timers[i] = setTimeout(fire, Math.max(0, due - performance.now()));
    });
    setTimeout(done, seconds * 1000 + 50);
  });
  for (const t of timers) clearTimeout(t);
  const wall = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  eld.disable();
  while (inflight > 0) await new Promise((r) => setTimeout(r, 20));
  const rate = (ok + failed) / wall;
  const cores = (cpu.user + cpu.system) / 1e6 / wall;
  const timeWait = timeWaitSockets();
  await runner.close();
  return { mode, rate, jitterP50: percentile(jitter, 50), jitterP99: percentile(jitter, 99), eldP99: eld.percentile(99) / 1e6, cpuPer1000: rate ? cores / (rate / 1000) : 0, ok, failed, timeWait };
}

async function main(): Promise<void> {
  const pods = arg('pods', 1000);
  const seconds = arg('seconds', 10);
  const peers = spawn(process.execPath, [path.join(here, 'probe-servers.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ports = await new Promise<{ http: number; tcp: number; grpc: number }>((res) => peers.stdout!.once('data', (d) => res(JSON.parse(String(d)))));
  const reqs: NetworkProbeRequest[] = [];
  for (let i = 0; i < pods; i++) {
    reqs.push({ kind: 'http', scheme: 'HTTP', host: '127.0.0.1', port: ports.http, path: '/healthz', headers: [['User-Agent', PROBE_USER_AGENT]], timeoutMs: 1000 });
    reqs.push({ kind: 'tcp', host: '127.0.0.1', port: ports.tcp, timeoutMs: 1000 });
    reqs.push({ kind: 'grpc', host: '127.0.0.1', port: ports.grpc, service: '', timeoutMs: 1000 });
  }
  try {
    const twBefore = timeWaitSockets();
    const pool = await runMode('pool', reqs, seconds);
    // let the pool run's sockets settle before the main-thread run
    await new Promise((r) => setTimeout(r, 2000));
    const mainRun = await runMode('main', reqs, seconds);
    const rows = [pool, mainRun];
    console.log(`pods=${pods} probes=${reqs.length} period=1s seconds=${seconds} time_wait_before=${twBefore}`);
    console.log('mode  rate/s   jitter_p50_ms jitter_p99_ms eld_p99_ms cpu_cores_per_1000/s ok failed time_wait');
    for (const r of rows) console.log(`${r.mode.padEnd(5)} ${r.rate.toFixed(0).padStart(7)} ${r.jitterP50.toFixed(1).padStart(13)} ${r.jitterP99.toFixed(1).padStart(13)} ${r.eldP99.toFixed(1).padStart(10)} ${r.cpuPer1000.toFixed(3).padStart(20)} ${r.ok} ${r.failed} ${r.timeWait}`);
    const results = rows.flatMap((r) => [
      { case: r.mode, metric: 'probe_rate', value: r.rate, unit: 'probes/s' },
      { case: r.mode, metric: 'jitter_p50', value: r.jitterP50, unit: 'ms' },
      { case: r.mode, metric: 'jitter_p99', value: r.jitterP99, unit: 'ms' },
      { case: r.mode, metric: 'eld_p99', value: r.eldP99, unit: 'ms' },
      { case: r.mode, metric: 'cpu_per_1000_probes_per_s', value: r.cpuPer1000, unit: 'cores' },
      { case: r.mode, metric: 'failed', value: r.failed, unit: 'probes' },
      { case: r.mode, metric: 'time_wait_sockets', value: r.timeWait, unit: 'sockets' },
    ]);
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
