// Probe execution (upstream: pkg/probe/http, tcp, grpc), as a Piscina task module: the pool
// runs it off the main thread, and the main thread can import the same functions. Every probe
// socket is reset on close (SO_LINGER 0, as upstream now does) so probes leave no TIME_WAIT.

import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import * as grpc from '@grpc/grpc-js';

/** The request shapes mirror src/prober/types.ts (kept structural: a worker imports nothing from src). */
export interface HttpProbeRequest { kind: 'http'; scheme: 'HTTP' | 'HTTPS'; host: string; port: number; path: string; headers: [string, string][]; timeoutMs: number }
export interface TcpProbeRequest { kind: 'tcp'; host: string; port: number; timeoutMs: number }
export interface GrpcProbeRequest { kind: 'grpc'; host: string; port: number; service: string; timeoutMs: number }
export type NetworkProbeRequest = HttpProbeRequest | TcpProbeRequest | GrpcProbeRequest;
export interface ProbeOutcome { result: 'success' | 'warning' | 'failure' | 'unknown'; output: string }

/** upstream: maxRespBodyLength, the most of a probe response's body read. */
export const MAX_RESPONSE_BODY = 10 * 1024;
/** upstream (net/http): the most redirects followed. */
export const MAX_REDIRECTS = 10;

const hostPort = (host: string, port: number): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/**
 * Closes with RST so the socket skips TIME_WAIT. A socket already shutting down (the peer
 * closed first, as busybox httpd does, and Node answered its FIN) cannot be reset: Node would
 * then drop the handle without closing it, leaking the descriptor and leaving a worker thread
 * that never finishes terminating (process.exit hangs). It is closed plainly; the TIME_WAIT is
 * the peer's, which closed first.
 */
function reset(sock: net.Socket | null | undefined): void {
  if (!sock || sock.destroyed) return;
  sock.on('error', () => {});
  if (sock.writableEnded || sock.readyState === 'opening' || typeof sock.resetAndDestroy !== 'function') {
    sock.destroy();
    return;
  }
  try {
    sock.resetAndDestroy();
  } catch {
    // not a TCP handle (TLS): a plain close
    sock.destroy();
  }
}

interface HttpAnswer { status: number; body: string; location?: string }

function httpGetOnce(url: URL, headers: [string, string][], timeoutMs: number, signal: AbortSignal): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const hdrs: Record<string, string> = {};
    for (const [k, v] of headers) {
      // upstream: a Host header sets the request's host
      hdrs[k] = v;
    }
    let settled = false;
    // A keep-alive agent of its own: Node then leaves the socket open after the response and this side resets it (no FIN, no TIME_WAIT).
    const agent = url.protocol === 'https:' ? new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false }) : new http.Agent({ keepAlive: true, maxSockets: 1 });
    const req = mod.request(url, { method: 'GET', headers: hdrs, agent, signal, rejectUnauthorized: false } as https.RequestOptions, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const done = (): void => {
        if (settled) return;
        settled = true;
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BODY).toString('utf8'), location: res.headers.location });
        reset(req.socket);
        agent.destroy();
      };
      res.on('data', (c: Buffer) => {
        chunks.push(c);
        size += c.length;
        // Enough of the body: stop reading (a probe never downloads a large answer).
        if (size >= MAX_RESPONSE_BODY) {
          res.removeAllListeners('data');
          done();
        }
      });
      res.on('end', done);
      res.on('error', (err) => { if (!settled) { settled = true; reject(err); } });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`Get "${url.href}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`)));
    req.on('socket', (s: net.Socket) => s.setNoDelay(true));
    req.on('error', (err) => {
      reset(req.socket);
      agent.destroy();
      if (!settled) {
        settled = true;
        reject(err);
      }
    });
    req.end();
  });
}

/** upstream httpprobe: 2xx success, 3xx warning (redirect not followed), anything else failure. */
export async function httpProbe(r: HttpProbeRequest): Promise<ProbeOutcome> {
  const scheme = r.scheme === 'HTTPS' ? 'https' : 'http';
  let url = new URL(`${scheme}://${hostPort(r.host, r.port)}${r.path}`);
  const firstHost = url.hostname;
  const deadline = AbortSignal.timeout(r.timeoutMs);
  try {
    for (let hops = 0; ; hops++) {
      const a = await httpGetOnce(url, r.headers, r.timeoutMs, deadline);
      if (a.status >= 300 && a.status < 400 && a.location) {
        const next = new URL(a.location, url);
        // Another host: not followed; the redirect itself is the answer (a warning).
        if (next.hostname === firstHost) {
          if (hops + 1 >= MAX_REDIRECTS) return { result: 'failure', output: `Get "${next.href}": stopped after ${MAX_REDIRECTS} redirects` };
          url = next;
          continue;
        }
      }
      if (a.status >= 200 && a.status < 400) {
        if (a.status >= 300) return { result: 'warning', output: `Probe terminated redirects, Response body: ${a.body}` };
        return { result: 'success', output: a.body };
      }
      return { result: 'failure', output: `HTTP probe failed with statuscode: ${a.status}` };
    }
  } catch (err) {
    const e = err as Error;
    if (e.name === 'AbortError' || e.name === 'TimeoutError') return { result: 'failure', output: `Get "${url.href}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)` };
    return { result: 'failure', output: `Get "${url.href}": ${e.message}` };
  }
}

/** upstream tcp probe: a connection that opens is success; it is reset at once. */
export function tcpProbe(r: TcpProbeRequest): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const addr = hostPort(r.host, r.port);
    const sock = net.connect({ host: r.host, port: r.port });
    const timer = setTimeout(() => {
      sock.destroy();
      resolve({ result: 'failure', output: `dial tcp ${addr}: i/o timeout` });
    }, r.timeoutMs);
    sock.once('connect', () => {
      clearTimeout(timer);
      reset(sock);
      resolve({ result: 'success', output: '' });
    });
    sock.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      sock.destroy();
      const what = err.code === 'ECONNREFUSED' ? 'connect: connection refused' : err.message;
      resolve({ result: 'failure', output: `dial tcp ${addr}: ${what}` });
    });
  });
}

// grpc.health.v1 messages by hand: HealthCheckRequest{string service = 1}, HealthCheckResponse{ServingStatus status = 1}.
const SERVING_STATUS = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'];

export function encodeHealthCheckRequest(service: string): Buffer {
  const s = Buffer.from(service, 'utf8');
  if (s.length === 0) return Buffer.alloc(0);
  const len: number[] = [];
  let n = s.length;
  while (n > 0x7f) { len.push((n & 0x7f) | 0x80); n >>>= 7; }
  len.push(n);
  return Buffer.concat([Buffer.from([0x0a, ...len]), s]);
}

export function decodeHealthCheckResponse(b: Buffer): number {
  let i = 0;
  let status = 0;
  while (i < b.length) {
    const tag = b[i++]!;
    const wire = tag & 7;
    let v = 0;
    let shift = 0;
    if (wire === 0) {
      for (;;) { const x = b[i++]!; v += (x & 0x7f) * 2 ** shift; shift += 7; if (!(x & 0x80) || i >= b.length) break; }
      if (tag >> 3 === 1) status = v;
    } else if (wire === 2) {
      for (;;) { const x = b[i++]!; v += (x & 0x7f) * 2 ** shift; shift += 7; if (!(x & 0x80) || i >= b.length) break; }
      i += v;
    } else break;
  }
  return status;
}

/** upstream grpc probe: grpc.health.v1.Health/Check on the service; SERVING is success. */
export function grpcProbe(r: GrpcProbeRequest): Promise<ProbeOutcome> {
  const addr = hostPort(r.host, r.port);
  const client = new grpc.Client(addr, grpc.credentials.createInsecure(), { 'grpc.enable_retries': 0, 'grpc.max_reconnect_backoff_ms': r.timeoutMs });
  const deadline = Date.now() + r.timeoutMs;
  return new Promise<ProbeOutcome>((resolve) => {
    client.makeUnaryRequest<Buffer, number>(
      '/grpc.health.v1.Health/Check',
      (b) => b,
      decodeHealthCheckResponse,
      encodeHealthCheckRequest(r.service),
      new grpc.Metadata(),
      { deadline },
      (err, status) => {
        if (err) {
          if (err.code === grpc.status.UNIMPLEMENTED) return resolve({ result: 'failure', output: `this server does not implement the grpc health protocol (grpc.health.v1.Health): ${err.details}` });
          if (err.code === grpc.status.DEADLINE_EXCEEDED) return resolve({ result: 'failure', output: `timeout: failed to connect service "${addr}" within ${r.timeoutMs / 1000}s` });
          return resolve({ result: 'failure', output: `error: health rpc probe failed: ${err.details || err.message}` });
        }
        if (status !== 1) return resolve({ result: 'failure', output: `service unhealthy (responded with "${SERVING_STATUS[status ?? 0] ?? status}")` });
        resolve({ result: 'success', output: 'service is serving' });
      },
    );
  }).finally(() => client.close());
}

export function runNetworkProbe(r: NetworkProbeRequest): Promise<ProbeOutcome> {
  switch (r.kind) {
    case 'http': return httpProbe(r);
    case 'tcp': return tcpProbe(r);
    case 'grpc': return grpcProbe(r);
  }
}

/** The Piscina task: one probe request in, its outcome out. */
export default function task(r: NetworkProbeRequest): Promise<ProbeOutcome> {
  return runNetworkProbe(r).catch((err: Error) => ({ result: 'unknown' as const, output: err.message }));
}
