// A raw HTTP/1.1 client over net sockets (fetch would normalise `//`, `..` and bad escapes away,
// and refuses to send malformed requests), and a KubeletServer on loopback with a host double.

import { createServer as createNetServer, connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { KubeletServer, type Handler, type ServerHost, type ServerLimits } from '../../src/server/server.js';
import type { Logger, LogFields } from '../../src/util/log.js';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface RawExchange {
  /** The first response, when one arrived complete. */
  response?: RawResponse;
  /** The server closed (or reset) the connection. */
  closed: boolean;
  /** Neither happened before the deadline. */
  timedOut: boolean;
  /** Time until the exchange ended, in ms. */
  elapsedMs: number;
  raw: string;
}

export interface ExchangeOptions {
  /** The request method was HEAD: a response has no body. */
  head?: boolean;
  /** Pause between chunks, in ms. */
  gapMs?: number;
  /** Stop writing after the chunks (do not half-close); the server must end it. */
  stall?: boolean;
  deadlineMs?: number;
  /** Over TLS (the secure port; its certificate is not verified), HTTP/1.1 by ALPN. */
  tls?: boolean;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Parses one response from the bytes received so far; undefined until it is complete. */
export function parseResponse(buf: Buffer, head: boolean, closed = false): RawResponse | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!m) return { status: -1, headers: {}, body: buf.toString('latin1') };
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const status = Number(m[1]);
  const rest = buf.subarray(end + 4);
  if (head || status === 204 || status === 304) return { status, headers, body: '' };
  if (headers['content-length'] !== undefined) {
    const len = Number(headers['content-length']);
    if (rest.length < len) return undefined;
    return { status, headers, body: rest.subarray(0, len).toString('utf8') };
  }
  if (headers['transfer-encoding'] === 'chunked') {
    let body = '';
    let at = 0;
    for (;;) {
      const nl = rest.indexOf('\r\n', at);
      if (nl < 0) return undefined;
      const size = parseInt(rest.subarray(at, nl).toString('latin1'), 16);
      if (size === 0) return { status, headers, body };
      if (rest.length < nl + 2 + size + 2) return undefined;
      body += rest.subarray(nl + 2, nl + 2 + size).toString('utf8');
      at = nl + 2 + size + 2;
    }
  }
  // No length: the body runs until the close.
  return closed ? { status, headers, body: rest.toString('utf8') } : undefined;
}

/** Sends `chunks` on a fresh connection and waits for a whole response, a close, or the deadline. */
export function exchange(port: number, chunks: Array<string | Buffer>, opts: ExchangeOptions = {}): Promise<RawExchange> {
  const deadlineMs = opts.deadlineMs ?? 3000;
  const start = Date.now();
  return new Promise((resolve) => {
    const sock = opts.tls
      ? tlsConnect({ port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] })
      : connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (closed: boolean, timedOut: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const response = parseResponse(buf, opts.head ?? false, closed);
      sock.destroy();
      resolve({ response, closed, timedOut, elapsedMs: Date.now() - start, raw: buf.toString('latin1') });
    };
    const timer = setTimeout(() => finish(false, true), deadlineMs);
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (parseResponse(buf, opts.head ?? false)) finish(false, false);
    });
    sock.on('close', () => finish(true, false));
    sock.on('error', () => finish(true, false));
    void (async () => {
      for (const [i, c] of chunks.entries()) {
        if (done || sock.destroyed) return;
        if (i > 0 && opts.gapMs) await sleep(opts.gapMs);
        if (done || sock.destroyed) return;
        sock.write(c);
      }
    })();
  });
}

/** A GET on a fresh connection. */
export function get(port: number, target: string, extra = '', opts: ExchangeOptions = {}): Promise<RawExchange> {
  return exchange(port, [`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`], opts);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createNetServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface LogLine {
  severity: 'I' | 'W' | 'E';
  msg: string;
  fields: LogFields;
}

/** A Logger that keeps its lines (and prints nothing). */
export function recordingLogger(lines: LogLine[] = [], base: LogFields = {}): Logger & { lines: LogLine[] } {
  const push = (severity: LogLine['severity']) => (msg: string, fields?: LogFields) => { lines.push({ severity, msg, fields: { ...base, ...fields } }); };
  return {
    lines,
    info: push('I'),
    warn: push('W'),
    error: push('E'),
    v: () => ({ info: push('I') }),
    with: (fields) => recordingLogger(lines, { ...base, ...fields }),
  };
}

export interface HostDouble extends ServerHost {
  checks: { name: string; ok: boolean; message: string }[];
  pods: ReturnType<ServerHost['getPods']>;
}

export function hostDouble(): HostDouble {
  const host: HostDouble = {
    checks: [
      { name: 'ping', ok: true, message: 'ok' },
      { name: 'syncloop', ok: true, message: 'ok' },
      { name: 'pleg', ok: true, message: 'ok' },
      { name: 'runtime', ok: true, message: 'ok' },
    ],
    pods: [],
    getPods: () => host.pods,
    healthChecks: () => host.checks,
  };
  return host;
}

export interface TestServers {
  server: KubeletServer;
  host: HostDouble;
  log: Logger & { lines: LogLine[] };
  healthzPort: number;
  readOnlyPort: number;
  stop(): Promise<void>;
}

/** Both servers on loopback with a host double and a recording logger. */
export async function startServers(opts: { routes?: Map<string, Handler>; limits?: Partial<ServerLimits>; host?: HostDouble } = {}): Promise<TestServers> {
  const host = opts.host ?? hostDouble();
  const log = recordingLogger();
  const healthzPort = await freePort();
  const readOnlyPort = await freePort();
  const server = new KubeletServer({
    host, log, healthzBindAddress: '127.0.0.1', healthzPort, address: '127.0.0.1', readOnlyPort,
    routes: opts.routes, limits: opts.limits,
  });
  await server.start();
  return { server, host, log, healthzPort, readOnlyPort, stop: () => server.stop() };
}
