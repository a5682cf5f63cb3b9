// Probe execution (upstream: pkg/probe/http, tcp, grpc), as a Piscina task module: the pool
// runs it off the main thread, and the main thread can import the same functions. Every probe
// socket is reset on close (SO_LINGER 0, as upstream now does) so probes leave no TIME_WAIT.
// serve() is the pool's long-lived task: probe batches in and result batches out on a port.

import * as https from 'node:https';
import * as net from 'node:net';
import { hostPort, reset } from './sockets.js';
import { grpcProbe } from './grpc-probe.js';
import type { MessagePort } from 'node:worker_threads';

export { grpcProbe } from './grpc-probe.js';

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

interface HttpAnswer { status: number; body: string; location?: string }

/** HTTPS through Node's client (TLS), with a keep-alive agent of its own so this side resets the socket. */
function httpGetOnce(url: URL, headers: [string, string][], timeoutMs: number, signal: AbortSignal): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
        const hdrs: Record<string, string> = {};
    for (const [k, v] of headers) {
      // upstream: a Host header sets the request's host
      hdrs[k] = v;
    }
    let settled = false;
    // A keep-alive agent of its own: Node then leaves the socket open after the response and this side resets it (no FIN, no TIME_WAIT).
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
    const req = https.request(url, { method: 'GET', headers: hdrs, agent, signal, rejectUnauthorized: false } as https.RequestOptions, (res) => {
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

/** The most header bytes a probe answer may carry (Go's default MaxHeaderBytes is 1 MiB; a probe needs far less). */
export const MAX_HEADER_BYTES = 64 * 1024;

class DeadlineError extends Error {
  override name = 'TimeoutError';
}

/**
 * One plain-HTTP GET on a socket of its own, without Node's HTTP client (a third of its CPU
 * per probe): the answer's status, Location and at most MAX_RESPONSE_BODY of body
 * (Content-Length, chunked, or up to close); then the socket is reset (no TIME_WAIT). No
 * `Connection: close` (upstream sends one): a server told so closes first, and its side of
 * the connection then sits in TIME_WAIT unless this side's reset comes before its FIN.
 */
function plainGetOnce(url: URL, headers: [string, string][], deadlineAt: number): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    let host = url.host;
    let extra = '';
    for (const [k, v] of headers) {
      // upstream: a Host header sets the request's host
      if (k.toLowerCase() === 'host') host = v;
      else if (!/[\r\n]/.test(k + v)) extra += `${k}: ${v}\r\n`;
    }
    const request = `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${host}\r\n${extra}\r\n`;
    const sock = net.connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80) });
    let settled = false;
    let head: Buffer<ArrayBufferLike> | undefined = Buffer.alloc(0);
    let status = 0;
    let location: string | undefined;
    // body framing: -1 until close, -2 chunked, else the bytes left
    let left = -1;
    const body: Buffer[] = [];
    let bodySize = 0;
    let chunkBuf: Buffer<ArrayBufferLike> = Buffer.alloc(0);
    const settle = (err: Error | undefined, a?: HttpAnswer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reset(sock);
      if (err) reject(err);
      else resolve(a!);
    };
    const answer = (): void => settle(undefined, { status, body: Buffer.concat(body).subarray(0, MAX_RESPONSE_BODY).toString('utf8'), location });
    const take = (b: Buffer): boolean => {
      body.push(b);
      bodySize += b.length;
      return bodySize >= MAX_RESPONSE_BODY;
    };
    // chunked: size line, data, CRLF ... 0 CRLF
    const chunked = (b: Buffer): void => {
      chunkBuf = chunkBuf.length ? Buffer.concat([chunkBuf, b]) : b;
      for (;;) {
        const eol = chunkBuf.indexOf('\r\n');
        if (eol < 0) return;
        const size = parseInt(chunkBuf.subarray(0, eol).toString('latin1'), 16);
        if (!Number.isFinite(size) || size < 0) return settle(new Error('malformed chunked encoding'));
        if (size === 0) return answer();
        if (chunkBuf.length < eol + 2 + size + 2) {
          // a large chunk: what arrived counts towards the body limit already
          if (chunkBuf.length - eol - 2 >= MAX_RESPONSE_BODY) { take(chunkBuf.subarray(eol + 2)); return answer(); }
          return;
        }
        if (take(chunkBuf.subarray(eol + 2, eol + 2 + size))) return answer();
        chunkBuf = chunkBuf.subarray(eol + 2 + size + 2);
      }
    };
    const onBody = (b: Buffer): void => {
      if (left === -2) return chunked(b);
      if (left >= 0) {
        const part = b.subarray(0, left);
        left -= part.length;
        if (take(part) || left === 0) answer();
        return;
      }
      if (take(b)) answer();
    };
    const onHead = (b: Buffer): void => {
      head = head!.length ? Buffer.concat([head!, b]) : b;
      for (;;) {
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > MAX_HEADER_BYTES) settle(new Error('net/http: server response headers exceeded the limit'));
          return;
        }
        const lines = head.subarray(0, end).toString('latin1').split('\r\n');
        const m = /^HTTP\/\d\.\d (\d{3})/.exec(lines[0]!);
        if (!m) return settle(new Error(`malformed HTTP response ${JSON.stringify(lines[0]!.slice(0, 40))}`));
        const code = Number(m[1]);
        const rest = head.subarray(end + 4);
        // 1xx answers precede the real one
        if (code >= 100 && code < 200 && code !== 101) {
          head = rest;
          continue;
        }
        status = code;
        let chunkedEnc = false;
        left = -1;
        for (let i = 1; i < lines.length; i++) {
          const line = lines[i]!;
          const c = line.indexOf(':');
          if (c <= 0) continue;
          const name = line.slice(0, c).trim().toLowerCase();
          const value = line.slice(c + 1).trim();
          if (name === 'location') location = value;
          else if (name === 'content-length') left = Number(value);
          else if (name === 'transfer-encoding' && /chunked/i.test(value)) chunkedEnc = true;
        }
        if (chunkedEnc) left = -2;
        if (!(left >= -2) || !Number.isInteger(left)) return settle(new Error('malformed Content-Length'));
        head = undefined;
        // no body: 204, 304, HEAD-less 1xx, or an explicit zero length
        if (code === 204 || code === 304 || left === 0) return answer();
        if (rest.length) onBody(rest);
        return;
      }
    };
    const timer = setTimeout(() => settle(new DeadlineError('deadline')), Math.max(0, deadlineAt - Date.now()));
    sock.setNoDelay(true);
    sock.once('connect', () => sock.write(request));
    sock.on('data', (b: Buffer) => {
      if (settled) return;
      if (head) onHead(b);
      else onBody(b);
    });
    sock.once('end', () => {
      if (head) settle(new Error('EOF'));
      else answer();
    });
    sock.once('error', (err) => settle(err));
  });
}

/** upstream httpprobe: 2xx success, 3xx warning (redirect not followed), anything else failure. */
export async function httpProbe(r: HttpProbeRequest): Promise<ProbeOutcome> {
  const scheme = r.scheme === 'HTTPS' ? 'https' : 'http';
  let url = new URL(`${scheme}://${hostPort(r.host, r.port)}${r.path}`);
  const firstHost = url.hostname;
  const deadlineAt = Date.now() + r.timeoutMs;
  try {
    for (let hops = 0; ; hops++) {
      const a = url.protocol === 'http:' ? await plainGetOnce(url, r.headers, deadlineAt) : await httpGetOnce(url, r.headers, r.timeoutMs, AbortSignal.timeout(Math.max(1, deadlineAt - Date.now())));
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

export function runNetworkProbe(r: NetworkProbeRequest): Promise<ProbeOutcome> {
  switch (r.kind) {
    case 'http': return httpProbe(r);
    case 'tcp': return tcpProbe(r);
    case 'grpc': return grpcProbe(r);
  }
}

/** Outcome codes on the wire between the pool and the main thread (index into this list). */
export const OUTCOME_CODES = ['success', 'warning', 'failure', 'unknown'] as const;

/** How long a pool thread gathers results before posting them (far below any probe period). */
export const RESULT_FLUSH_MS = 2;

/**
 * What the main thread posts to a pool thread: the probes started in one turn of its loop, as
 * ids and request keys in typed arrays (copied, not walked, by the structured clone). A request
 * crosses once per thread (`defs`, under its key) and is named by key after that; `forget`
 * drops keys whose request the main thread no longer holds.
 */
export interface ProbeBatch { ids: Float64Array; keys: Float64Array; defs?: { key: number; req: NetworkProbeRequest }[]; forget?: number[] }
/**
 * What a pool thread posts back: the probes that ended in one turn of its loop, as ids and
 * outcome codes; `outputs` (index-aligned) only when one of them did not succeed.
 */
export interface ResultBatch { ids: Float64Array; codes: Uint8Array; outputs?: string[] }

/**
 * A Piscina task that serves probes for as long as its port is open: batches of requests in,
 * batches of results out (gathered for RESULT_FLUSH_MS), rather than two messages per probe.
 */
export function serve({ port }: { port: MessagePort }): Promise<void> {
  return new Promise((done) => {
    /** Requests by key, as the main thread defined them. */
    const reqs = new Map<number, NetworkProbeRequest>();
    let ids: number[] = [];
    let codes: number[] = [];
    let outputs: string[] | undefined;
    let flushing = false;
    const flush = (): void => {
      flushing = false;
      const b: ResultBatch = { ids: Float64Array.from(ids), codes: Uint8Array.from(codes) };
      if (outputs) b.outputs = outputs;
      ids = [];
      codes = [];
      outputs = undefined;
      port.postMessage(b);
    };
    const settle = (id: number, o: ProbeOutcome): void => {
      const code = OUTCOME_CODES.indexOf(o.result);
      if (code !== 0 && !outputs) outputs = ids.map(() => '');
      ids.push(id);
      codes.push(code);
      outputs?.push(code === 0 ? '' : o.output);
      if (!flushing) {
        flushing = true;
        // results of the next few ms travel together: one message, not one per probe
        setTimeout(flush, RESULT_FLUSH_MS);
      }
    };
    port.on('message', (m: ProbeBatch | { close: true }) => {
      if ('close' in m) {
        port.close();
        return;
      }
      if (m.forget) for (const k of m.forget) reqs.delete(k);
      if (m.defs) for (const d of m.defs) reqs.set(d.key, d.req);
      for (let i = 0; i < m.ids.length; i++) {
        const id = m.ids[i]!;
        const req = reqs.get(m.keys[i]!);
        if (!req) {
          settle(id, { result: 'unknown', output: `probe request ${m.keys[i]} unknown to the pool thread` });
          continue;
        }
        runNetworkProbe(req).then((o) => settle(id, o), (err: Error) => settle(id, { result: 'unknown', output: err.message }));
      }
    });
    port.once('close', () => done());
  });
}

/** The Piscina task: one probe request in, its outcome out. */
export default function task(r: NetworkProbeRequest): Promise<ProbeOutcome> {
  return runNetworkProbe(r).catch((err: Error) => ({ result: 'unknown' as const, output: err.message }));
}
