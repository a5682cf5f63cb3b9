// Proxies an upgraded (SPDY/3.1 or WebSocket) connection to the runtime's streaming server, as
// upstream's kubelet does with its UpgradeAwareHandler: the client's request is sent on to the
// URL the CRI gave, the runtime's answer is relayed, and after a 101 the bytes flow both ways
// untouched. No traffic either way for the idle timeout (streamingConnectionIdleTimeout) ends
// both connections.
import type { IncomingMessage } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Duplex } from 'node:stream';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';

export interface StreamProxyOptions {
  clock: Clock;
  log: Logger;
  /** streamingConnectionIdleTimeout (ms); 0 disables it. */
  idleTimeoutMs: number;
  /** The most bytes of response head the runtime may send. */
  maxResponseHead?: number;
}

const HOP_BY_HOP_KEPT = new Set(['connection', 'upgrade']);
const HOP_BY_HOP = new Set(['keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding']);

/** The request head sent to the runtime: the client's method and headers, the runtime's path and host. */
export function backendRequestHead(req: IncomingMessage, target: URL): string {
  const lines = [`${req.method ?? 'GET'} ${target.pathname}${target.search} HTTP/1.1`, `Host: ${target.host}`];
  const raw = req.rawHeaders;
  let forwardedFor: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (lower === 'host') continue;
    if (lower === 'x-forwarded-for') { forwardedFor = forwardedFor ? `${forwardedFor}, ${raw[i + 1]}` : raw[i + 1]; continue; }
    if (HOP_BY_HOP.has(lower) && !HOP_BY_HOP_KEPT.has(lower)) continue;
    lines.push(`${name}: ${raw[i + 1]}`);
  }
  // upstream appends the client's address on the upgrade path
  const client = req.socket.remoteAddress;
  if (client) forwardedFor = forwardedFor ? `${forwardedFor}, ${client}` : client;
  if (forwardedFor) lines.push(`X-Forwarded-For: ${forwardedFor}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

function rawResponse(socket: Duplex, status: number, reason: string, body: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

export const writeRawError = rawResponse;

/** Ends both sides after `ms` without a byte either way; returns a toucher and a stopper. */
function idleGuard(clock: Clock, ms: number, onIdle: () => void): { touch(): void; stop(): void } {
  if (!(ms > 0)) return { touch: () => undefined, stop: () => undefined };
  let last = clock.now();
  let timer: Timer | undefined;
  const arm = (delay: number): void => {
    timer = clock.setTimeout(() => {
      const idle = clock.now() - last;
      if (idle >= ms) onIdle();
      else arm(ms - idle);
    }, delay);
  };
  arm(ms);
  return {
    touch: () => { last = clock.now(); },
    stop: () => timer?.cancel(),
  };
}

/**
 * Proxies the client's upgrade request to `target`. The promise settles when both connections
 * are closed; it never rejects (failures end the connections and are logged).
 */
export function proxyUpgrade(req: IncomingMessage, client: Duplex, head: Buffer, target: URL, opts: StreamProxyOptions): Promise<void> {
  const maxHead = opts.maxResponseHead ?? 64 * 1024;
  return new Promise<void>((resolve) => {
    const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
    const host = target.hostname.replace(/^\[|\]$/g, '');
    const backend: Socket = target.protocol === 'https:'
      // the runtime's streaming server is local and its certificate self-signed, as upstream assumes
      ? tlsConnect({ host, port, rejectUnauthorized: false, servername: host })
      : netConnect({ host, port });
    let settled = false;
    const guard = idleGuard(opts.clock, opts.idleTimeoutMs, () => {
      opts.log.v(2).info('Streaming connection idle; closing it', { target: target.pathname, idleTimeoutMs: opts.idleTimeoutMs });
      client.destroy();
      backend.destroy();
    });
    const finish = (): void => {
      if (settled) return;
      settled = true;
      guard.stop();
      client.destroy();
      backend.destroy();
      resolve();
    };
    client.on('error', () => finish());
    client.on('close', () => finish());
    backend.on('close', () => finish());
    backend.on('error', (err) => {
      opts.log.v(2).info('Streaming backend connection failed', { target: `${target.host}${target.pathname}`, err: err.message });
      // before the runtime answered, the client is told why
      if (!upgraded && !answered) rawResponse(client, 500, 'Internal Server Error', `error dialing backend: ${err.message}`);
      finish();
    });

    let upgraded = false;
    let answered = false;
    let pending = Buffer.alloc(0);
    const onConnect = (): void => {
      backend.write(backendRequestHead(req, target));
      if (head.length) backend.write(head);
      // the client's bytes go on as they come (a body or early frames) until the runtime answers
      client.on('data', (d: Buffer) => { guard.touch(); if (!backend.write(d)) client.pause(); });
      backend.on('drain', () => client.resume());
    };
    backend.once(target.protocol === 'https:' ? 'secureConnect' : 'connect', onConnect);

    const onBackendData = (d: Buffer): void => {
      guard.touch();
      if (answered) {
        if (!client.write(d)) backend.pause();
        return;
      }
      pending = Buffer.concat([pending, d]);
      const end = pending.indexOf('\r\n\r\n');
      if (end < 0) {
        if (pending.length > maxHead) {
          rawResponse(client, 502, 'Bad Gateway', 'the runtime streaming server sent an oversized response head');
          finish();
        }
        return;
      }
      answered = true;
      const statusLine = pending.subarray(0, pending.indexOf('\r\n')).toString('latin1');
      upgraded = / 101 /.test(`${statusLine} `);
      // a refusal (not 101) is relayed as it is, then the connection ends with the runtime's
      if (!client.write(pending)) backend.pause();
      pending = Buffer.alloc(0);
    };
    backend.on('data', onBackendData);
    client.on('drain', () => backend.resume());
    backend.on('end', () => { if (client.writable) (client as Socket).end?.(); });
    client.on('end', () => { if (backend.writable) backend.end(); });
  });
}
