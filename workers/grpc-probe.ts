// The gRPC health probe (upstream: pkg/probe/grpc): grpc.health.v1.Health/Check on a connection
// of its own, by a lean h2c client (HTTP/2 frames and HPACK by hand, one write out), with the
// former Node http2 client kept beside it to compare against.

import * as http2 from 'node:http2';
import * as net from 'node:net';
import {
  ACK,
  CONTINUATION,
  DATA,
  END_HEADERS,
  END_STREAM,
  GOAWAY,
  HEADERS,
  MAX_HEADER_BLOCK,
  PADDED,
  PING,
  PREFACE,
  PRIORITY,
  PUSH_PROMISE,
  RST_STREAM,
  SETTINGS,
  frameHeader,
  h2ErrorName,
} from './h2-frames.js';
import { HpackDecoder, hpackLiteral } from './hpack.js';
import type { GrpcProbeRequest, ProbeOutcome } from './probe.js';
import { hostPort, reset } from './sockets.js';

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

/** gRPC status codes the probe names (google.golang.org/grpc/codes). */
const GRPC_CODES = ['OK', 'Canceled', 'Unknown', 'InvalidArgument', 'DeadlineExceeded', 'NotFound', 'AlreadyExists', 'PermissionDenied', 'ResourceExhausted', 'FailedPrecondition', 'Aborted', 'OutOfRange', 'Unimplemented', 'Internal', 'Unavailable', 'DataLoss', 'Unauthenticated'];
const UNIMPLEMENTED = 12;
const DEADLINE_EXCEEDED = 4;

function grpcMessage(v: unknown): string {
  if (typeof v !== 'string') return '';
  try { return decodeURIComponent(v); } catch { return v; }
}

/** The answer of one Health/Check call as upstream's probe words it. */
export function grpcAnswer(httpStatus: number, grpcStatus: unknown, grpcMsg: unknown, body: Buffer, secs: string): ProbeOutcome {
  if (grpcStatus === undefined) {
    return { result: 'failure', output: `error: health rpc probe failed: rpc error: code = Unknown desc = unexpected HTTP status code ${httpStatus} with no grpc-status` };
  }
  const code = Number(grpcStatus);
  const desc = grpcMessage(grpcMsg);
  if (code === UNIMPLEMENTED) return { result: 'failure', output: `error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ${desc}` };
  if (code === DEADLINE_EXCEEDED) return { result: 'failure', output: `timeout: health rpc did not complete within ${secs}` };
  if (code !== 0) return { result: 'failure', output: `error: health rpc probe failed: rpc error: code = ${GRPC_CODES[code] ?? `Code(${code})`} desc = ${desc}` };
  const len = body.length >= 5 ? body.readUInt32BE(1) : 0;
  const status = decodeHealthCheckResponse(body.subarray(5, 5 + len));
  if (status !== 1) return { result: 'failure', output: `service unhealthy (responded with "${SERVING_STATUS[status] ?? status}")` };
  return { result: 'success', output: 'service is serving' };
}

/** The request message with its 5-byte gRPC prefix (not compressed, length). */
function grpcMessageFrame(service: string): Buffer {
  const msg = encodeHealthCheckRequest(service);
  const frame = Buffer.alloc(5 + msg.length);
  frame.writeUInt32BE(msg.length, 1);
  msg.copy(frame, 5);
  return frame;
}

const grpcTimeout = (ms: number): string => `${Math.max(1, Math.ceil(ms))}m`;

// HTTP/2 (RFC 9113) as the lean client needs it, beyond the shared framing (h2-frames.ts).
/** SETTINGS_MAX_FRAME_SIZE this side keeps (the protocol's default). */
const MAX_FRAME = 16384;
/** The most of a response body kept: a health answer is a few bytes, and the default window bounds it anyway. */
const MAX_BODY = 65535;

/**
 * Everything the client sends, in one write: the preface, SETTINGS (no push), the request's
 * HEADERS (:method POST, :scheme http, :path, :authority, content-type, te, grpc-timeout: the
 * fields Node's client sent) and its DATA with END_STREAM.
 */
export function h2cHealthRequest(authority: string, service: string, timeoutMs: number): Buffer {
  const block: number[] = [0x83, 0x86];
  hpackLiteral(block, 4, ':path', '/grpc.health.v1.Health/Check');
  hpackLiteral(block, 1, ':authority', authority);
  hpackLiteral(block, 31, 'content-type', 'application/grpc');
  hpackLiteral(block, 0, 'te', 'trailers');
  hpackLiteral(block, 0, 'grpc-timeout', grpcTimeout(timeoutMs));
  const data = grpcMessageFrame(service);
  const settings = 6;
  const out = Buffer.alloc(PREFACE.length + 9 + settings + 9 + block.length + 9 + data.length);
  let at = PREFACE.copy(out, 0);
  frameHeader(out, at, settings, SETTINGS, 0, 0);
  // SETTINGS_ENABLE_PUSH = 0
  out.writeUInt16BE(2, at + 9);
  out.writeUInt32BE(0, at + 11);
  at += 9 + settings;
  frameHeader(out, at, block.length, HEADERS, END_HEADERS, 1);
  out.set(block, at + 9);
  at += 9 + block.length;
  frameHeader(out, at, data.length, DATA, END_STREAM, 1);
  data.copy(out, at + 9);
  return out;
}

class H2Error extends Error {}

/**
 * The response side of one call on stream 1: frames in, the answer out when the stream ends.
 * Throws H2Error on what breaks the protocol (its message becomes the probe's output).
 */
export class H2cCall {
  private buf: Buffer = Buffer.alloc(0);
  private sawSettings = false;
  private readonly hpack = new HpackDecoder();
  /** A header block being gathered (HEADERS then CONTINUATION). */
  private block?: { parts: Buffer[]; size: number; endStream: boolean };
  private head?: Map<string, string>;
  private trailers?: Map<string, string>;
  private readonly body: Buffer[] = [];
  private bodySize = 0;
  ended = false;

  /** Takes bytes from the socket; returns frames to write back (SETTINGS ACK, PING ACK). */
  push(chunk: Buffer): Buffer[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const replies: Buffer[] = [];
    while (!this.ended && this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      const type = this.buf[3]!;
      const flags = this.buf[4]!;
      const stream = this.buf.readUInt32BE(5) & 0x7fffffff;
      // a server's first frame is SETTINGS; anything else (an HTTP/1 answer) is not HTTP/2
      if (!this.sawSettings && type !== SETTINGS) throw new H2Error('Protocol error');
      if (len > MAX_FRAME) throw new H2Error(`frame of ${len} bytes over the maximum frame size ${MAX_FRAME}`);
      if (this.buf.length < 9 + len) break;
      const payload = this.buf.subarray(9, 9 + len);
      this.buf = this.buf.subarray(9 + len);
      if (this.block && type !== CONTINUATION) throw new H2Error('Protocol error: header block interrupted');
      this.frame(type, flags, stream, payload, replies);
    }
    return replies;
  }

  private frame(type: number, flags: number, stream: number, payload: Buffer, replies: Buffer[]): void {
    switch (type) {
      case SETTINGS:
        if (stream !== 0 || payload.length % 6 !== 0) throw new H2Error('Protocol error: malformed SETTINGS');
        this.sawSettings = true;
        if (!(flags & ACK)) {
          const ack = Buffer.alloc(9);
          frameHeader(ack, 0, 0, SETTINGS, ACK, 0);
          replies.push(ack);
        }
        return;
      case PING:
        if (payload.length !== 8) throw new H2Error('Protocol error: malformed PING');
        if (!(flags & ACK)) {
          const pong = Buffer.alloc(17);
          frameHeader(pong, 0, 8, PING, ACK, 0);
          payload.copy(pong, 9);
          replies.push(pong);
        }
        return;
      case GOAWAY: {
        if (payload.length < 8) throw new H2Error('Protocol error: malformed GOAWAY');
        const last = payload.readUInt32BE(0) & 0x7fffffff;
        const code = payload.readUInt32BE(4);
        // a graceful GOAWAY that covers stream 1 lets it finish
        if (code !== 0 || last < 1) throw new H2Error(`Session closed with error code ${code}`);
        return;
      }
      case PUSH_PROMISE:
        throw new H2Error('Protocol error: PUSH_PROMISE with push disabled');
    }
    if (stream !== 1) return;
    switch (type) {
      case RST_STREAM: {
        const code = payload.length >= 4 ? payload.readUInt32BE(0) : 2;
        throw new H2Error(`Stream closed with error code ${h2ErrorName(code)}`);
      }
      case HEADERS: {
        let p = unpad(flags, payload);
        if (flags & PRIORITY) {
          if (p.length < 5) throw new H2Error('Protocol error: malformed HEADERS');
          p = p.subarray(5);
        }
        this.block = { parts: [p], size: p.length, endStream: (flags & END_STREAM) !== 0 };
        if (flags & END_HEADERS) this.endBlock();
        return;
      }
      case CONTINUATION:
        if (!this.block) throw new H2Error('Protocol error: CONTINUATION without HEADERS');
        this.block.parts.push(payload);
        this.block.size += payload.length;
        if (this.block.size > MAX_HEADER_BLOCK) throw new H2Error(`header block over ${MAX_HEADER_BLOCK} bytes`);
        if (flags & END_HEADERS) this.endBlock();
        return;
      case DATA: {
        if (!this.head) throw new H2Error('Protocol error: DATA before HEADERS');
        const d = unpad(flags, payload);
        this.bodySize += d.length;
        if (this.bodySize > MAX_BODY) throw new H2Error(`response over ${MAX_BODY} bytes`);
        this.body.push(Buffer.from(d));
        if (flags & END_STREAM) this.ended = true;
        return;
      }
    }
  }

  private endBlock(): void {
    const b = this.block!;
    this.block = undefined;
    let fields: [string, string][];
    try {
      fields = this.hpack.decode(b.parts.length === 1 ? b.parts[0]! : Buffer.concat(b.parts));
    } catch (err) {
      throw new H2Error(`Protocol error: ${(err as Error).message}`);
    }
    const m = new Map(fields);
    if (!this.head) this.head = m;
    else this.trailers = m;
    if (b.endStream) this.ended = true;
  }

  /** The probe's answer from what arrived (all of it, or what came before the connection closed). */
  answer(secs: string): ProbeOutcome {
    const h = this.head;
    const t = this.trailers;
    // A trailers-only answer carries grpc-status in the headers.
    return grpcAnswer(Number(h?.get(':status') ?? 0), t?.get('grpc-status') ?? h?.get('grpc-status'), t?.get('grpc-message') ?? h?.get('grpc-message'), Buffer.concat(this.body), secs);
  }
}

function unpad(flags: number, p: Buffer): Buffer {
  if (!(flags & PADDED)) return p;
  if (p.length < 1 || p[0]! >= p.length) throw new H2Error('Protocol error: bad padding');
  return p.subarray(1, p.length - p[0]!);
}

/**
 * upstream grpc probe: grpc.health.v1.Health/Check on the service; SERVING is success. One
 * unary call over a connection of its own, written by hand rather than through Node's http2
 * client (which cost twice the CPU per probe): the whole request goes out in one write when the
 * connection opens, the answer's frames are read (HPACK decoded), and this side resets the
 * socket when done (a gRPC client's graceful close sends the first FIN and leaves TIME_WAIT).
 */
export function grpcProbe(r: GrpcProbeRequest): Promise<ProbeOutcome> {
  const addr = hostPort(r.host, r.port);
  const secs = `${r.timeoutMs / 1000}s`;
  return new Promise<ProbeOutcome>((resolve) => {
    let settled = false;
    let connected = false;
    const call = new H2cCall();
    const sock = net.connect({ host: r.host, port: r.port });
    const finish = (o: ProbeOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reset(sock);
      resolve(o);
    };
    const timer = setTimeout(() => finish({
      result: 'failure',
      output: connected ? `timeout: health rpc did not complete within ${secs}` : `timeout: failed to connect service "${addr}" within ${secs}`,
    }), r.timeoutMs);
    sock.setNoDelay(true);
    sock.once('connect', () => {
      connected = true;
      sock.write(h2cHealthRequest(addr, r.service, r.timeoutMs));
    });
    sock.on('data', (b: Buffer) => {
      if (settled) return;
      try {
        const replies = call.push(b);
        if (call.ended) return finish(call.answer(secs));
        if (replies.length) sock.write(replies.length === 1 ? replies[0]! : Buffer.concat(replies));
      } catch (err) {
        finish({ result: 'failure', output: `error: health rpc probe failed: ${(err as Error).message}` });
      }
    });
    // the server closed before the stream ended: the answer so far (no grpc-status, as Node's client says)
    sock.once('end', () => finish(call.answer(secs)));
    sock.once('error', (err) => {
      if (connected) return finish({ result: 'failure', output: `error: health rpc probe failed: ${err.message}` });
      finish({ result: 'failure', output: `error: failed to connect service at "${addr}": ${err.message}` });
    });
  });
}

/**
 * The same probe through Node's http2 client (nghttp2), as it ran before the lean client:
 * kept to compare against (tests, bench/probes-micro) — it costs about twice the CPU.
 */
export function grpcProbeHttp2(r: GrpcProbeRequest): Promise<ProbeOutcome> {
  const addr = hostPort(r.host, r.port);
  const secs = `${r.timeoutMs / 1000}s`;
  return new Promise<ProbeOutcome>((resolve) => {
    let settled = false;
    let connected = false;
    let sock: net.Socket | undefined;
    const finish = (o: ProbeOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reset(sock);
      session.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => finish({
      result: 'failure',
      output: connected ? `timeout: health rpc did not complete within ${secs}` : `timeout: failed to connect service "${addr}" within ${secs}`,
    }), r.timeoutMs);
    const session = http2.connect(`http://${addr}`, {
      createConnection: () => {
        sock = net.connect({ host: r.host, port: r.port });
        sock.setNoDelay(true);
        sock.once('connect', () => { connected = true; });
        return sock;
      },
      settings: { enablePush: false },
    });
    const failed = (err: Error): void => {
      if (connected) return finish({ result: 'failure', output: `error: health rpc probe failed: ${err.message}` });
      // the stream fails first, naming the connect error as its cause
      const cause = (err as { cause?: Error }).cause ?? err;
      finish({ result: 'failure', output: `error: failed to connect service at "${addr}": ${cause.message}` });
    };
    session.on('error', failed);
    const frame = grpcMessageFrame(r.service);
    const call = session.request({
      ':method': 'POST',
      ':path': '/grpc.health.v1.Health/Check',
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': grpcTimeout(r.timeoutMs),
    });
    let head: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    call.on('response', (h) => { head = h; });
    call.on('trailers', (t) => { trailers = t; });
    call.on('data', (c: Buffer) => chunks.push(c));
    call.on('error', failed);
    call.on('end', () => {
      // A trailers-only answer carries grpc-status in the headers.
      finish(grpcAnswer(Number(head[':status'] ?? 0), trailers['grpc-status'] ?? head['grpc-status'], trailers['grpc-message'] ?? head['grpc-message'], Buffer.concat(chunks), secs));
    });
    call.end(frame);
  });
}

