// A micro-benchmark of the probe executors (workers/probe.ts, workers/grpc-probe.ts) run on the
// main thread, as a pool thread runs them: CPU per probe of each kind against the C peers
// (bench/probe-peers.c), and of the gRPC probe through the lean h2c client and through Node's
// http2 client side by side. Not part of `npm run bench` (bench:probes is the figure of record).
//   node dist/bench/probes-micro.js [--probes 4000] [--concurrency 32] [--rounds 3]

import { spawn } from 'node:child_process';
import { httpProbe, tcpProbe, type ProbeOutcome } from '../workers/probe.js';
import { grpcProbe, grpcProbeHttp2 } from '../workers/grpc-probe.js';
import { arg, compileBenchC, procCpuSeconds } from './probes-util.js';

const probes = arg('probes', 4000);
const concurrency = arg('concurrency', 32);
const rounds = arg('rounds', 3);
const peersBin = await compileBenchC('probe-peers.c');
const peers = spawn(peersBin.bin, [], { stdio: ['ignore', 'pipe', 'inherit'] });
const ports = await new Promise<{ http: number; tcp: number; grpc: number }>((res) => peers.stdout!.once('data', (d) => res(JSON.parse(String(d).split('\n')[0]!))));
const host = '127.0.0.1';
const kinds: [string, () => Promise<ProbeOutcome>][] = [
  ['http', () => httpProbe({ kind: 'http', scheme: 'HTTP', host, port: ports.http, path: '/healthz', headers: [['User-Agent', 'kube-probe/1.30'], ['Accept', '*/*']], timeoutMs: 1000 })],
  ['tcp', () => tcpProbe({ kind: 'tcp', host, port: ports.tcp, timeoutMs: 1000 })],
  ['grpc (lean h2c)', () => grpcProbe({ kind: 'grpc', host, port: ports.grpc, service: '', timeoutMs: 1000 })],
  ['grpc (node http2)', () => grpcProbeHttp2({ kind: 'grpc', host, port: ports.grpc, service: '', timeoutMs: 1000 })],
];
try {
  console.log(`probes=${probes} concurrency=${concurrency} rounds=${rounds} (interleaved; median of rounds)`);
  console.log('kind               cpu_us/probe peers_us/probe wall_us/probe failed');
  const rows = new Map<string, { cpu: number[]; peers: number[]; wall: number[]; failed: number }>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, fn] of kinds) {
      let failed = 0;
      let next = 0;
      const p0 = procCpuSeconds(`/proc/${peers.pid}/stat`);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next++ < probes) if ((await fn()).result !== 'success') failed++;
      }));
      const wall = performance.now() - t0;
      const c = process.cpuUsage(c0);
      const row = rows.get(name) ?? { cpu: [], peers: [], wall: [], failed: 0 };
      row.cpu.push((c.user + c.system) / probes);
      row.peers.push(((procCpuSeconds(`/proc/${peers.pid}/stat`) - p0) * 1e6) / probes);
      row.wall.push((wall * 1000) / probes);
      row.failed += failed;
      rows.set(name, row);
    }
  }
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (const [name, r] of rows) console.log(`${name.padEnd(18)} ${med(r.cpu).toFixed(0).padStart(12)} ${med(r.peers).toFixed(0).padStart(14)} ${med(r.wall).toFixed(0).padStart(13)} ${r.failed}`);
} finally {
  peers.kill();
  peersBin.cleanup();
}
