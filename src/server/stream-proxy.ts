// Proxies an upgraded (SPDY/3.1 or WebSocket) connection to the runtime's streaming server, as
// upstream's kubelet does with its UpgradeAwareHandler: the client's request is sent on to the
// URL the CRI gave, the runtime's answer is relayed, and after a 101 the bytes flow both ways
// untouched. No traffic either way for the idle timeout (streamingConnectionIdleTimeout) ends
// both connections.
//
// Nothing the runtime sends reaches the client before a well-formed `101 Switching Protocols`
// head: an error answer (4xx, 5xx, relayed as upstream's proxy does) is re-framed by the kubelet
// (its status, a plain-text body of bounded size, none of the runtime's headers) and the connection
// closes; any other answer is upstream's 500 "invalid upgrade response". An https streaming URL is
// verified as upstream's dialer does (the system's roots, or the CA given, and the host name).
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
  /**
   * TLS to an https streaming URL: the CA that signed the runtime's certificate (PEM). Without it
   * the system's roots verify it, as upstream's DialURL does; the host name is always checked.
   */
  ca?: string | Buffer;
}

/** How long a client is given to read the kubelet's answer before its connection is cut. */
const ANSWER_LINGER_MS = 1_000;

/** The most bytes of a runtime's error answer relayed to the client. */
export const MAX_ERROR_BODY = 64 * 1024;

/** A status line as HTTP/1.1 writes it: the code and its reason (printable ASCII only). */
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: ([\x20-\x7e]*))?$/;

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
      // verified, as upstream's DialURL verifies (a runtime on loopback usually serves http)
      ? tlsConnect({ host, port, rejectUnauthorized: true, servername: host, ...(opts.ca ? { ca: opts.ca } : {}) })
      : netConnect({ host, port });
    let settled = false;
    const guard = idleGuard(opts.clock, opts.idleTimeoutMs, () => {
      opts.log.v(2).info('Streaming connection idle; closing it', { target: target.pathname, idleTimeoutMs: opts.idleTimeoutMs });
      client.destroy();
      backend.destroy();
    });
    // After the kubelet's own answer the client's side is ending: it is left to close once the
    // answer is out (or after a grace), not cut under it.
    let answering = false;
    const finish = (): void => {
      if (settled) return;
      backend.destroy();
      if (answering && !client.destroyed) {
        setTimeout(() => client.destroy(), ANSWER_LINGER_MS).unref();
        client.once('close', () => finish());
        answering = false;
        return;
      }
      settled = true;
      guard.stop();
      client.destroy();
      resolve();
    };
    const answer = (status: number, reason: string, body: string): void => {
      answering = true;
      answered = true;
      client.resume();
      rawResponse(client, status, reason, body);
      finish();
    };
    client.on('error', () => finish());
    client.on('close', () => finish());
    backend.on('close', () => finish());
    backend.on('error', (err) => {
      opts.log.v(2).info('Streaming backend connection failed', { target: `${target.host}${target.pathname}`, err: err.message });
      // before the runtime answered, the client is told why
      if (!upgraded && !answered && !refusal) return answer(500, 'Internal Server Error', `error dialing backend: ${err.message}`);
      if (refusal) return sendRefusal();
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

    // a refusal's body, gathered up to its length (or MAX_ERROR_BODY, or the runtime's close)
    let refusal: { status: number; reason: string; want: number; body: Buffer[]; got: number } | undefined;
    const sendRefusal = (): void => {
      if (!refusal) return;
      const body = Buffer.concat(refusal.body).subarray(0, Math.min(refusal.got, refusal.want, MAX_ERROR_BODY));
      const { status, reason } = refusal;
      refusal = undefined;
      answer(status, reason, body.toString('utf8'));
    };
    const onBackendData = (d: Buffer): void => {
      guard.touch();
      if (upgraded) {
        if (!client.write(d)) backend.pause();
        return;
      }
      if (refusal) {
        refusal.body.push(d);
        refusal.got += d.length;
        if (refusal.got >= Math.min(refusal.want, MAX_ERROR_BODY)) sendRefusal();
        return;
      }
      if (answered) return;
      pending = Buffer.concat([pending, d]);
      const end = pending.indexOf('\r\n\r\n');
      if (end < 0) {
        if (pending.length > maxHead) {
          answered = true;
          answer(502, 'Bad Gateway', 'the runtime streaming server sent an oversized response head');
        }
        return;
      }
      answered = true;
      const lines = pending.subarray(0, end).toString('latin1').split('\r\n');
      const m = STATUS_LINE.exec(lines[0]!);
      const status = m ? Number(m[1]) : 0;
      if (status === 101) {
        upgraded = true;
        // the 101 head as the runtime wrote it, and what follows it: the stream itself
        if (!client.write(pending)) backend.pause();
        pending = Buffer.alloc(0);
        return;
      }
      const rest = pending.subarray(end + 4);
      pending = Buffer.alloc(0);
      if (status >= 400 && status <= 599) {
        const lengthHeader = lines.slice(1).find((l) => /^content-length:/i.test(l));
        const length = lengthHeader === undefined ? NaN : Number(lengthHeader.slice(lengthHeader.indexOf(':') + 1).trim());
        const reason = m![2] || 'Error';
        refusal = { status, reason, want: Number.isInteger(length) && length >= 0 ? length : MAX_ERROR_BODY, body: [rest], got: rest.length };
        if (refusal.got >= Math.min(refusal.want, MAX_ERROR_BODY)) sendRefusal();
        return;
      }
      const why = m ? `invalid upgrade response: status code ${status}` : 'invalid upgrade response: malformed status line';
      opts.log.v(2).info('Streaming backend did not upgrade', { target: `${target.host}${target.pathname}`, err: why });
      answer(500, 'Internal Server Error', why);
    };
    backend.on('data', onBackendData);
    client.on('drain', () => backend.resume());
    backend.on('end', () => {
      // a refusal without its length ends with the runtime's connection
      if (refusal) return sendRefusal();
      if (!upgraded) return finish();
      if (client.writable) (client as Socket).end?.();
    });
    client.on('end', () => { if (backend.writable) backend.end(); });
  });
}
