// Unary gRPC calls on one multiplexed h2c connection (HTTP/2 frames and HPACK by hand on a
// plain socket): the PLEG's hot status reads, the lean list reads, and the CRI client's
// runtime-service calls. node:http2's client costs ~120 us of CPU per request (an
// AsyncResource, a stream object, its events); at the first relist after a restart on a full
// node that is 6000 requests. Here a call is a pre-encoded HEADERS block (one per
// method), a DATA frame, and a small record until its trailers arrive.

import net from 'node:net';
import { status as GrpcStatus } from '@grpc/grpc-js';
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
  WINDOW_UPDATE,
  frameHeader,
  h2ErrorName,
} from '../../workers/h2-frames.js';
import { HpackDecoder, hpackLiteral } from '../../workers/hpack.js';
import { criEndpointToTarget } from './endpoint.js';
import { realClock, type Clock, type Timer } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';
import { grpcMessage, grpcTimeout, httpToGrpc, type UnaryStatus, type UnaryTransport } from './unary.js';

// HTTP/2 (RFC 9113) as this client needs it, beyond the framing it shares (workers/h2-frames.ts).
const SETTINGS_HEADER_TABLE_SIZE = 1;
const SETTINGS_ENABLE_PUSH = 2;
const SETTINGS_MAX_CONCURRENT_STREAMS = 3;
const SETTINGS_INITIAL_WINDOW_SIZE = 4;
const SETTINGS_MAX_FRAME_SIZE = 5;
const PROTOCOL_ERROR = 1;
const FLOW_CONTROL_ERROR = 3;
const FRAME_SIZE_ERROR = 6;
const CANCEL = 8;
const COMPRESSION_ERROR = 9;
/** The protocol's default window and frame size (before SETTINGS say otherwise). */
const DEFAULT_WINDOW = 65_535;
const DEFAULT_FRAME = 16_384;
/** Bytes of one socket read. */
const READ_BUFFER = 64 * 1024;
const MAX_WINDOW = 0x7fff_ffff;
const MAX_STREAM_ID = 0x7fff_ffff;

function frame(type: number, flags: number, stream: number, payload?: Buffer): Buffer {
  const b = Buffer.allocUnsafe(9 + (payload?.length ?? 0));
  frameHeader(b, 0, payload?.length ?? 0, type, flags, stream);
  payload?.copy(b, 9);
  return b;
}

function u32(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(v >>> 0, 0);
  return b;
}

/** The request header block of a gRPC unary call: the fields node:http2's path sent. */
export function requestHeaderBlock(path: string, timeout: string): Buffer {
  // :method POST and :scheme http are static entries 3 and 6
  const block: number[] = [0x83, 0x86];
  hpackLiteral(block, 4, ':path', path);
  hpackLiteral(block, 1, ':authority', 'localhost');
  hpackLiteral(block, 31, 'content-type', 'application/grpc');
  hpackLiteral(block, 0, 'te', 'trailers');
  hpackLiteral(block, 0, 'grpc-timeout', timeout);
  return Buffer.from(block);
}

/**
 * The HTTP/2 receive window of the lean connections (the relist's, the CRI client's). At
 * HTTP/2's default of 64 KiB a 13 MB list response crosses ~200 WINDOW_UPDATE round trips,
 * each a turn of both event loops; a window as large as the response lets the runtime send it
 * in one go.
 */
export const LEAN_FLOW_CONTROL_WINDOW = 32 * 1024 * 1024;

export interface H2cUnaryOptions {
  /** `unix:///path` or an absolute socket path. */
  runtimeEndpoint: string;
  /** Largest response message accepted (bytes). */
  maxMessageBytes: number;
  /** HTTP/2 receive window of the connection and its streams (bytes). */
  flowControlWindow: number;
  /** Deadlines of calls. */
  clock?: Clock;
  /** Where each connection's stream ids start (odd, default 1): tests start near 2^31-1 to use them up. */
  firstStreamId?: number;
}

/**
 * A response buffer kept from call to call of one kind (a relist's list answers, each about
 * 0.6 MB at 1000 pods, once a second): the message is assembled into it instead of into new
 * memory. Buffers of that size live outside V8's heap, and V8 counts what was allocated there
 * since its last full collection towards starting the next one: a fresh pair each relist
 * started a mark-compact of the whole heap every few seconds on an idle node. One call at a
 * time uses it; a second concurrent call gets memory of its own.
 */
export class ResponseScratch {
  buf: Buffer = Buffer.alloc(0);
  busy = false;

  /** A buffer of at least `len` bytes, grown to the next power of two. */
  take(len: number): Buffer {
    if (this.buf.length < len) this.buf = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(Math.max(len, 4096))));
    return this.buf;
  }
}

/** One call: queued until the connection may open its stream, then in flight until it ends. */
interface Call {
  path: string;
  request: Buffer;
  timeout: string;
  resolve: (v: unknown) => void;
  reject: (s: UnaryStatus) => void;
  timer?: Timer;
  /** The connection holding the call (queued or in flight). */
  conn?: H2cConnection;
  stream: number;
  done: boolean;
  httpStatus: number;
  grpc?: UnaryStatus;
  gotHeaders: boolean;
  /** DATA bytes received (the 5-byte message prefix included). */
  received: number;
  /** Bytes of the message prefix seen (0-5), its compressed flag and declared length. */
  head: number;
  compressed: number;
  declared: number;
  /** The message, assembled as it arrives (from `scratch` when the call has one), and its bytes so far. */
  body?: Buffer;
  filled: number;
  scratch?: ResponseScratch;
  /** The scratch buffer this call holds (taken when its message length arrived). */
  held?: ResponseScratch;
  /** Decodes the message when it is complete, while the scratch buffer still holds it. */
  decode?: (msg: Buffer) => unknown;
  /** DATA bytes (padding included) taken since this stream's window was last replenished. */
  unacked: number;
}

/** The runtime broke HTTP/2 on the status connection: it is closed with GOAWAY and its calls fail. */
class H2cProtocolError extends KubeletError {
  constructor(
    message: string,
    readonly h2Code: number,
  ) {
    super('ERR_H2C_PROTOCOL', `runtime status connection: ${message}`);
  }
}

/** One h2c connection and its streams. */
class H2cConnection {
  readonly #sock: net.Socket;
  readonly #owner: H2cUnary;
  /** The receive window of each stream (advertised) and of the connection (opened to at least the default). */
  readonly #streamWindow: number;
  readonly #connWindow: number;
  readonly #hpack = new HpackDecoder();
  readonly #streams = new Map<number, Call>();
  readonly #queue: Call[] = [];
  #nextId: number;
  /** The socket reads into this one buffer (no new memory per read). */
  readonly #readBuf = Buffer.allocUnsafeSlow(READ_BUFFER);
  /** A frame cut by the end of a read, kept here with the next read appended. */
  #carry = Buffer.allocUnsafeSlow(READ_BUFFER + 9 + DEFAULT_FRAME);
  #carryLen = 0;
  #out: Buffer[] = [];
  #flushing = false;
  /** A header block being gathered (HEADERS then CONTINUATION on one stream). */
  #block: { stream: number; parts: Buffer[]; size: number; endStream: boolean } | undefined;
  #sawSettings = false;
  #peerMaxStreams = Infinity;
  #peerMaxFrame = DEFAULT_FRAME;
  #peerStreamWindow = DEFAULT_WINDOW;
  /** What this side may still send on the connection (request DATA). */
  #sendWindow = DEFAULT_WINDOW;
  /** What the peer may still send on the connection, and what was taken since the last WINDOW_UPDATE. */
  #recvWindow: number;
  #recvUnacked = 0;
  #refs = 0;
  /** GOAWAY received or the socket gone: no new streams. */
  draining = false;
  dead = false;

  constructor(owner: H2cUnary, socketPath: string, window: number, firstStreamId = 1) {
    this.#owner = owner;
    this.#nextId = firstStreamId;
    this.#streamWindow = Math.min(MAX_WINDOW, Math.max(1, Math.floor(window)));
    this.#connWindow = Math.max(DEFAULT_WINDOW, this.#streamWindow);
    this.#recvWindow = this.#connWindow;
    const sock = net.connect({ path: socketPath, onread: { buffer: this.#readBuf, callback: (n: number, b: Uint8Array) => this.#onRead(n, b as Buffer) } });
    this.#sock = sock;
    sock.unref();
    sock.setNoDelay(true);
    // the preface, SETTINGS (no push, the stream window), and the connection's window opened to match
    const settings = Buffer.allocUnsafe(12);
    settings.writeUInt16BE(SETTINGS_ENABLE_PUSH, 0);
    settings.writeUInt32BE(0, 2);
    settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 6);
    settings.writeUInt32BE(this.#streamWindow, 8);
    this.#out.push(PREFACE, frame(SETTINGS, 0, 0, settings));
    if (this.#connWindow > DEFAULT_WINDOW) this.#out.push(frame(WINDOW_UPDATE, 0, 0, u32(this.#connWindow - DEFAULT_WINDOW)));
    this.#scheduleFlush();
    sock.on('error', (err) => this.#fail({ code: GrpcStatus.UNAVAILABLE, details: err.message }));
    sock.on('close', () => this.#fail({ code: GrpcStatus.UNAVAILABLE, details: 'connection to the runtime closed' }));
  }

  /** Calls on this connection (queued or in flight). */
  get load(): number {
    return this.#streams.size + this.#queue.length;
  }

  submit(c: Call): void {
    c.conn = this;
    this.#queue.push(c);
    this.#retain();
    this.#pump();
  }

  /** A call's deadline passed: cancel its stream (or drop it from the queue). */
  expire(c: Call): void {
    if (c.done) return;
    if (c.stream) {
      this.#send(frame(RST_STREAM, 0, c.stream, u32(CANCEL)));
      this.#end(c, { code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
    } else {
      const i = this.#queue.indexOf(c);
      if (i >= 0) this.#queue.splice(i, 1);
      this.#settle(c, { code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
    }
  }

  close(): void {
    this.draining = true;
    this.#fail({ code: GrpcStatus.UNAVAILABLE, details: 'channel closed' });
  }

  #retain(): void {
    if (this.#refs++ === 0) this.#sock.ref();
  }

  #release(): void {
    if (--this.#refs === 0) this.#sock.unref();
  }

  /** Opens streams for queued calls while the peer's limits allow. */
  #pump(): void {
    while (this.#queue.length && !this.draining) {
      if (this.#streams.size >= this.#peerMaxStreams) return;
      const c = this.#queue[0]!;
      const body = 5 + c.request.length;
      if (body > this.#peerStreamWindow) {
        this.#queue.shift();
        this.#settle(c, { code: GrpcStatus.RESOURCE_EXHAUSTED, details: `request of ${body} bytes over the runtime's stream window ${this.#peerStreamWindow}` });
        continue;
      }
      if (body > this.#sendWindow) return;
      if (this.#nextId > MAX_STREAM_ID) {
        // stream ids used up (RFC 9113 5.1.1): the calls left go to a new connection, this one
        // closes once its streams are done
        this.draining = true;
        break;
      }
      this.#queue.shift();
      this.#open(c, body);
    }
    if (this.draining && this.#queue.length) {
      const moved = this.#queue.splice(0);
      for (const c of moved) {
        this.#release();
        this.#owner.resubmit(c);
      }
    }
    this.#maybeRetire();
  }

  #open(c: Call, body: number): void {
    const id = this.#nextId;
    this.#nextId += 2;
    c.stream = id;
    this.#streams.set(id, c);
    this.#sendWindow -= body;
    const block = this.#owner.headerBlock(c.path, c.timeout);
    const max = this.#peerMaxFrame;
    if (block.length <= max) {
      this.#send(frame(HEADERS, END_HEADERS, id, block));
    } else {
      for (let at = 0; at < block.length; at += max) {
        const part = block.subarray(at, Math.min(block.length, at + max));
        const last = at + max >= block.length;
        this.#send(frame(at === 0 ? HEADERS : CONTINUATION, last ? END_HEADERS : 0, id, part));
      }
    }
    // the message: one DATA frame per MAX_FRAME_SIZE, the last with END_STREAM
    const msg = Buffer.allocUnsafe(body);
    msg[0] = 0;
    msg.writeUInt32BE(c.request.length, 1);
    c.request.copy(msg, 5);
    for (let at = 0; ; at += max) {
      const end = Math.min(body, at + max);
      this.#send(frame(DATA, end === body ? END_STREAM : 0, id, msg.subarray(at, end)));
      if (end === body) break;
    }
  }

  #send(b: Buffer): void {
    if (this.dead) return;
    this.#out.push(b);
    this.#scheduleFlush();
  }

  /** Frames written in one go after the current turn: calls made together share a write. */
  #scheduleFlush(): void {
    if (this.#flushing) return;
    this.#flushing = true;
    process.nextTick(() => {
      this.#flushing = false;
      const out = this.#out;
      if (!out.length || this.dead) return;
      this.#out = [];
      this.#sock.write(out.length === 1 ? out[0]! : Buffer.concat(out));
    });
  }

  #onRead(n: number, read: Buffer): boolean {
    if (this.dead || n <= 0) return true;
    // Frames are parsed from the read buffer itself; a frame cut by the end of the read moves to
    // the carry buffer, where the next read is appended to it. Payload views are only valid
    // until the next read: what outlives this turn (a header block awaiting CONTINUATION, a
    // message) is copied.
    let b: Buffer;
    if (this.#carryLen === 0) {
      b = n === read.length ? read : read.subarray(0, n);
    } else {
      if (this.#carry.length < this.#carryLen + n) {
        const grown = Buffer.allocUnsafeSlow(this.#carryLen + n);
        this.#carry.copy(grown, 0, 0, this.#carryLen);
        this.#carry = grown;
      }
      read.copy(this.#carry, this.#carryLen, 0, n);
      b = this.#carry.subarray(0, this.#carryLen + n);
    }
    this.#carryLen = 0;
    try {
      let at = 0;
      while (b.length - at >= 9) {
        const len = (b[at]! << 16) | (b[at + 1]! << 8) | b[at + 2]!;
        const type = b[at + 3]!;
        // the server's first frame is SETTINGS; anything else (an HTTP/1 answer) is not HTTP/2
        if (!this.#sawSettings && type !== SETTINGS) throw new H2cProtocolError('the runtime did not answer with HTTP/2 SETTINGS', PROTOCOL_ERROR);
        if (len > DEFAULT_FRAME) throw new H2cProtocolError(`frame of ${len} bytes over the maximum frame size ${DEFAULT_FRAME}`, FRAME_SIZE_ERROR);
        if (b.length - at < 9 + len) break;
        const flags = b[at + 4]!;
        const stream = b.readUInt32BE(at + 5) & 0x7fff_ffff;
        const payload = b.subarray(at + 9, at + 9 + len);
        at += 9 + len;
        this.#frame(type, flags, stream, payload);
        if (this.dead) return true;
      }
      if (at < b.length) {
        // within the carry buffer this moves the tail to its start
        b.copy(this.#carry, 0, at, b.length);
        this.#carryLen = b.length - at;
      }
    } catch (err) {
      if (!(err instanceof H2cProtocolError)) throw err;
      this.#send(frame(GOAWAY, 0, 0, Buffer.concat([u32(Math.max(0, this.#nextId - 2)), u32(err.h2Code)])));
      this.#flushNow();
      this.#fail({ code: GrpcStatus.INTERNAL, details: `HTTP/2 protocol error: ${err.message}` });
    }
    this.#replenish();
    this.#pump();
    return true;
  }

  #flushNow(): void {
    const out = this.#out;
    this.#out = [];
    if (out.length && !this.#sock.destroyed) this.#sock.write(Buffer.concat(out));
  }

  #frame(type: number, flags: number, stream: number, p: Buffer): void {
    if (this.#block && (type !== CONTINUATION || stream !== this.#block.stream)) throw new H2cProtocolError('header block interrupted', PROTOCOL_ERROR);
    switch (type) {
      case SETTINGS:
        return this.#settings(flags, stream, p);
      case PING:
        if (stream !== 0) throw new H2cProtocolError('PING on a stream', PROTOCOL_ERROR);
        if (p.length !== 8) throw new H2cProtocolError('malformed PING', FRAME_SIZE_ERROR);
        if (!(flags & ACK)) this.#send(frame(PING, ACK, 0, p));
        return;
      case GOAWAY:
        return this.#goaway(stream, p);
      case WINDOW_UPDATE: {
        if (p.length !== 4) throw new H2cProtocolError('malformed WINDOW_UPDATE', FRAME_SIZE_ERROR);
        const inc = p.readUInt32BE(0) & 0x7fff_ffff;
        if (stream === 0) {
          if (inc === 0) throw new H2cProtocolError('WINDOW_UPDATE of 0', PROTOCOL_ERROR);
          this.#sendWindow += inc;
          if (this.#sendWindow > MAX_WINDOW) throw new H2cProtocolError('send window over 2^31-1', FLOW_CONTROL_ERROR);
        }
        // a stream's window only matters for its one DATA frame, sent when it opened
        return;
      }
      case PUSH_PROMISE:
        throw new H2cProtocolError('PUSH_PROMISE with push disabled', PROTOCOL_ERROR);
      case HEADERS: {
        this.#checkStream(stream, 'HEADERS');
        let h = unpad(flags, p);
        if (flags & PRIORITY) {
          if (h.length < 5) throw new H2cProtocolError('malformed HEADERS', FRAME_SIZE_ERROR);
          h = h.subarray(5);
        }
        // a block continued in later frames may outlive this read: its parts are copied
        this.#block = { stream, parts: [flags & END_HEADERS ? h : Buffer.from(h)], size: h.length, endStream: (flags & END_STREAM) !== 0 };
        if (flags & END_HEADERS) this.#endBlock();
        return;
      }
      case CONTINUATION: {
        const blk = this.#block;
        if (!blk) throw new H2cProtocolError('CONTINUATION without HEADERS', PROTOCOL_ERROR);
        blk.parts.push(flags & END_HEADERS ? p : Buffer.from(p));
        blk.size += p.length;
        if (blk.size > MAX_HEADER_BLOCK) throw new H2cProtocolError(`header block over ${MAX_HEADER_BLOCK} bytes`, PROTOCOL_ERROR);
        if (flags & END_HEADERS) this.#endBlock();
        return;
      }
      case DATA:
        return this.#data(flags, stream, p);
      case RST_STREAM: {
        this.#checkStream(stream, 'RST_STREAM');
        if (p.length !== 4) throw new H2cProtocolError('malformed RST_STREAM', FRAME_SIZE_ERROR);
        const c = this.#streams.get(stream);
        if (c) this.#end(c, { code: GrpcStatus.UNAVAILABLE, details: `Stream closed with error code ${h2ErrorName(p.readUInt32BE(0))}` });
        return;
      }
    }
    // PRIORITY and unknown frame types are ignored
  }

  /** Frames on stream 0 or on a stream this side never opened break the protocol. */
  #checkStream(stream: number, what: string): void {
    if (stream === 0 || stream % 2 === 0 || stream >= this.#nextId) throw new H2cProtocolError(`${what} on stream ${stream}, which this client did not open`, PROTOCOL_ERROR);
  }

  #settings(flags: number, stream: number, p: Buffer): void {
    if (stream !== 0) throw new H2cProtocolError('SETTINGS on a stream', PROTOCOL_ERROR);
    if (flags & ACK) {
      if (p.length) throw new H2cProtocolError('SETTINGS ACK with a payload', FRAME_SIZE_ERROR);
      return;
    }
    if (p.length % 6) throw new H2cProtocolError('malformed SETTINGS', FRAME_SIZE_ERROR);
    this.#sawSettings = true;
    for (let i = 0; i < p.length; i += 6) {
      const id = p.readUInt16BE(i);
      const v = p.readUInt32BE(i + 2);
      switch (id) {
        case SETTINGS_MAX_CONCURRENT_STREAMS:
          this.#peerMaxStreams = v;
          break;
        case SETTINGS_INITIAL_WINDOW_SIZE:
          if (v > MAX_WINDOW) throw new H2cProtocolError('initial window over 2^31-1', FLOW_CONTROL_ERROR);
          this.#peerStreamWindow = v;
          break;
        case SETTINGS_MAX_FRAME_SIZE:
          if (v < DEFAULT_FRAME || v > 0xff_ffff) throw new H2cProtocolError(`max frame size ${v} out of range`, PROTOCOL_ERROR);
          this.#peerMaxFrame = v;
          break;
        case SETTINGS_ENABLE_PUSH:
          if (v > 1) throw new H2cProtocolError('ENABLE_PUSH not 0 or 1', PROTOCOL_ERROR);
          break;
        case SETTINGS_HEADER_TABLE_SIZE:
          // this side's encoder keeps no table (literals without indexing): nothing to resize
          break;
      }
    }
    this.#send(frame(SETTINGS, ACK, 0));
  }

  #goaway(stream: number, p: Buffer): void {
    if (stream !== 0) throw new H2cProtocolError('GOAWAY on a stream', PROTOCOL_ERROR);
    if (p.length < 8) throw new H2cProtocolError('malformed GOAWAY', FRAME_SIZE_ERROR);
    const last = p.readUInt32BE(0) & 0x7fff_ffff;
    const code = p.readUInt32BE(4);
    this.draining = true;
    // streams above last-stream-id were not processed; those at or below may still finish
    for (const [id, c] of this.#streams) {
      if (id > last) this.#end(c, { code: GrpcStatus.UNAVAILABLE, details: `the runtime closed the connection (GOAWAY ${h2ErrorName(code)}) before taking the call` });
    }
    this.#owner.retire(this);
    // nothing left to finish: the connection goes now
    this.#maybeRetire();
  }

  #endBlock(): void {
    const blk = this.#block!;
    this.#block = undefined;
    let fields: [string, string][];
    try {
      // decoded even for a stream already given up: the dynamic table is the connection's
      fields = this.#hpack.decode(blk.parts.length === 1 ? blk.parts[0]! : Buffer.concat(blk.parts, blk.size));
    } catch (err) {
      throw new H2cProtocolError(`header block: ${(err as Error).message}`, COMPRESSION_ERROR);
    }
    const c = this.#streams.get(blk.stream);
    if (!c) return;
    if (!c.gotHeaders) {
      c.gotHeaders = true;
      for (const [n, v] of fields) if (n === ':status') c.httpStatus = Number(v);
    } else if (!blk.endStream) {
      throw new H2cProtocolError(`trailers without END_STREAM on stream ${blk.stream}`, PROTOCOL_ERROR);
    }
    let code: string | undefined;
    let message = '';
    for (const [n, v] of fields) {
      if (n === 'grpc-status') code = v;
      else if (n === 'grpc-message') message = v;
    }
    if (code !== undefined) {
      const n = Number(code);
      c.grpc = { code: Number.isInteger(n) && n >= 0 && n <= 16 ? n : GrpcStatus.UNKNOWN, details: grpcMessage(message) };
    }
    if (blk.endStream) this.#complete(c);
  }

  #data(flags: number, stream: number, p: Buffer): void {
    this.#checkStream(stream, 'DATA');
    // flow control counts the whole payload, padding included
    this.#recvWindow -= p.length;
    if (this.#recvWindow < 0) throw new H2cProtocolError('the runtime sent past the connection window', FLOW_CONTROL_ERROR);
    this.#recvUnacked += p.length;
    const c = this.#streams.get(stream);
    const d = unpad(flags, p);
    if (!c) return;
    if (!c.gotHeaders) throw new H2cProtocolError(`DATA before HEADERS on stream ${stream}`, PROTOCOL_ERROR);
    c.unacked += p.length;
    if (c.unacked > this.#streamWindow) throw new H2cProtocolError(`the runtime sent past stream ${stream}'s window`, FLOW_CONTROL_ERROR);
    const max = this.#owner.maxMessageBytes;
    c.received += d.length;
    // (a declared length over the limit already ended the call in #take)
    if (c.received > max + 5) {
      this.#send(frame(RST_STREAM, 0, stream, u32(CANCEL)));
      this.#end(c, { code: GrpcStatus.RESOURCE_EXHAUSTED, details: `Received message larger than max (${c.head === 5 ? c.declared : c.received - 5} vs. ${max})` });
      return;
    }
    if (d.length) this.#take(c, d, max);
    if (c.done) return;
    if (flags & END_STREAM) this.#complete(c);
    else if (c.unacked >= this.#streamWindow / 2) {
      this.#send(frame(WINDOW_UPDATE, 0, stream, u32(c.unacked)));
      c.unacked = 0;
    }
  }

  /**
   * DATA bytes into the call's message: the 5-byte prefix, then the message into a buffer of
   * its declared length. The bytes are copied: `d` is a view of the socket's read buffer.
   */
  #take(c: Call, d: Buffer, max: number): void {
    let at = 0;
    while (c.head < 5 && at < d.length) {
      const b = d[at++]!;
      if (c.head === 0) c.compressed = b;
      else c.declared = c.declared * 256 + b;
      if (++c.head === 5) {
        if (c.declared > max) {
          this.#send(frame(RST_STREAM, 0, c.stream, u32(CANCEL)));
          this.#end(c, { code: GrpcStatus.RESOURCE_EXHAUSTED, details: `Received message larger than max (${c.declared} vs. ${max})` });
          return;
        }
        const s = c.scratch && !c.scratch.busy ? c.scratch : undefined;
        if (s) {
          s.busy = true;
          c.held = s;
        }
        c.body = s ? s.take(c.declared) : Buffer.allocUnsafe(c.declared);
      }
    }
    // bytes past the declared length are counted (the framing check at the end) but not kept
    const n = Math.min(d.length - at, c.declared - c.filled);
    if (n > 0) {
      d.copy(c.body!, c.filled, at, at + n);
      c.filled += n;
    }
  }

  /** The connection's window opened again once half of it was taken. */
  #replenish(): void {
    if (this.dead || this.#recvUnacked < this.#connWindow / 2) return;
    this.#send(frame(WINDOW_UPDATE, 0, 0, u32(this.#recvUnacked)));
    this.#recvWindow += this.#recvUnacked;
    this.#recvUnacked = 0;
  }

  /** The stream ended (END_STREAM): the call's answer from what arrived. */
  #complete(c: Call): void {
    const grpc = c.grpc;
    if (c.httpStatus !== 200 && grpc === undefined) {
      return this.#end(c, { code: c.httpStatus ? httpToGrpc(c.httpStatus) : GrpcStatus.UNKNOWN, details: `Received HTTP status code ${c.httpStatus}` });
    }
    if (!grpc) return this.#end(c, { code: GrpcStatus.INTERNAL, details: 'Received RST_STREAM or end of stream without a grpc-status' });
    if (grpc.code !== GrpcStatus.OK) return this.#end(c, grpc);
    if (c.head < 5) return this.#end(c, { code: GrpcStatus.INTERNAL, details: 'response without a message' });
    if (c.compressed !== 0) return this.#end(c, { code: GrpcStatus.INTERNAL, details: 'compressed response message (no compression was offered)' });
    if (c.declared !== c.received - 5) return this.#end(c, { code: GrpcStatus.INTERNAL, details: `response message framing: ${c.declared} bytes declared, ${c.received - 5} received` });
    this.#end(c, undefined, c.body!.subarray(0, c.declared));
  }

  /** A stream is done: its call settled, its slot freed. */
  #end(c: Call, failure: UnaryStatus | undefined, value?: Buffer): void {
    this.#streams.delete(c.stream);
    this.#settle(c, failure, value);
  }

  #settle(c: Call, failure: UnaryStatus | undefined, value?: Buffer): void {
    if (c.done) return;
    c.done = true;
    c.timer?.cancel();
    let result: unknown = value;
    if (!failure && c.decode) {
      try {
        result = c.decode(value!);
      } catch (err) {
        // as grpc-js reports a deserializer that throws
        failure = { code: GrpcStatus.INTERNAL, details: `Response message parsing error: ${(err as Error).message}` };
      }
    }
    c.body = undefined;
    if (c.held) c.held.busy = false;
    c.held = undefined;
    this.#release();
    if (failure) c.reject(failure);
    else c.resolve(result);
    this.#maybeRetire();
  }

  /** A draining connection with nothing left in flight goes away. */
  #maybeRetire(): void {
    if (this.draining && !this.dead && this.#streams.size === 0 && this.#queue.length === 0) {
      // RFC 9113 6.8: a GOAWAY before closing (no server-initiated stream was processed: push is off)
      this.#out.push(frame(GOAWAY, 0, 0, Buffer.concat([u32(0), u32(0)])));
      this.dead = true;
      this.#flushNow();
      this.#sock.end();
      this.#sock.unref();
      this.#owner.retire(this);
    }
  }

  /** The connection is gone: every call on it fails. */
  #fail(s: UnaryStatus): void {
    const wasDead = this.dead;
    this.dead = true;
    this.draining = true;
    this.#owner.retire(this);
    for (const c of this.#streams.values()) this.#settle(c, s);
    this.#streams.clear();
    for (const c of this.#queue.splice(0)) this.#settle(c, s);
    if (!wasDead) this.#sock.destroy();
  }
}

function unpad(flags: number, p: Buffer): Buffer {
  if (!(flags & PADDED)) return p;
  if (p.length < 1 || p[0]! >= p.length) throw new H2cProtocolError('bad padding', PROTOCOL_ERROR);
  return p.subarray(1, p.length - p[0]!);
}

/** Unary gRPC calls over one multiplexed h2c connection, reopened when it goes away. */
export class H2cUnary implements UnaryTransport {
  readonly #socketPath: string;
  readonly #opts: H2cUnaryOptions;
  readonly #clock: Clock;
  readonly #blocks = new Map<string, Buffer>();
  #conn: H2cConnection | undefined;
  #closed = false;

  constructor(opts: H2cUnaryOptions) {
    this.#socketPath = criEndpointToTarget(opts.runtimeEndpoint).slice('unix://'.length);
    this.#opts = opts;
    this.#clock = opts.clock ?? realClock;
  }

  get maxMessageBytes(): number {
    return this.#opts.maxMessageBytes;
  }

  /** The request header block of a method and deadline, encoded once. */
  headerBlock(path: string, timeout: string): Buffer {
    const key = `${timeout} ${path}`;
    let b = this.#blocks.get(key);
    if (!b) {
      // deadlines differ only when callers do: keep the cache small
      if (this.#blocks.size >= 64) this.#blocks.clear();
      b = requestHeaderBlock(path, timeout);
      this.#blocks.set(key, b);
    }
    return b;
  }

  call(path: string, request: Buffer, timeoutMs: number): Promise<Buffer> {
    return this.callDecoded(path, request, timeoutMs, (msg) => msg);
  }

  /**
   * A call whose answer is decoded as soon as it is complete; with `scratch`, the message is
   * assembled in that kept buffer, which `decode` must not hold on to.
   */
  callDecoded<T>(path: string, request: Buffer, timeoutMs: number, decode: (msg: Buffer) => T, scratch?: ResponseScratch): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.#closed) {
        reject({ code: GrpcStatus.UNAVAILABLE, details: 'channel closed' } satisfies UnaryStatus);
        return;
      }
      const c: Call = {
        path,
        request,
        timeout: grpcTimeout(timeoutMs),
        resolve: resolve as (v: unknown) => void,
        reject,
        stream: 0,
        done: false,
        httpStatus: 0,
        gotHeaders: false,
        received: 0,
        head: 0,
        compressed: 0,
        declared: 0,
        filled: 0,
        scratch,
        decode,
        unacked: 0,
      };
      // the deadline reaches the call through the connection that holds it now
      c.timer = this.#clock.setTimeout(() => (c.conn ? c.conn.expire(c) : this.#expireOrphan(c)), timeoutMs);
      this.resubmit(c);
    });
  }

  #expireOrphan(c: Call): void {
    if (c.done) return;
    c.done = true;
    c.reject({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
  }

  /** Hands a call to the open connection, opening one when there is none or it is draining. */
  resubmit(c: Call): void {
    if (this.#closed) {
      c.done = true;
      c.timer?.cancel();
      c.reject({ code: GrpcStatus.UNAVAILABLE, details: 'channel closed' });
      return;
    }
    let conn = this.#conn;
    if (!conn || conn.draining) {
      conn = new H2cConnection(this, this.#socketPath, this.#opts.flowControlWindow, this.#opts.firstStreamId);
      this.#conn = conn;
    }
    conn.submit(c);
  }

  /** A connection no longer takes new calls. */
  retire(conn: H2cConnection): void {
    if (this.#conn === conn) this.#conn = undefined;
  }

  close(): void {
    this.#closed = true;
    const conn = this.#conn;
    this.#conn = undefined;
    conn?.close();
  }
}
