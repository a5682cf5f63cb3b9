// Unary gRPC calls over node:http2 directly, for the PLEG's hot single-status reads
// (PodSandboxStatus, ContainerStatus): a pre-encoded request, the response message handed to a
// lean decoder. grpc-js spends ~0.3 ms of CPU and ~40 KB of heap per call in its call stack
// (resolving, retrying, load-balancing and subchannel calls, filters, metadata); at the first
// relist after a restart on a full node that is 6000 calls. The wire is the gRPC HTTP/2
// protocol: one stream per call, a 5-byte message prefix, the status in the trailers (or in
// the headers of a trailers-only response).

import http2 from 'node:http2';
import net from 'node:net';
import { criEndpointToTarget } from './endpoint.js';
import { status as GrpcStatus } from '@grpc/grpc-js';

const {
  HTTP2_HEADER_METHOD,
  HTTP2_HEADER_PATH,
  HTTP2_HEADER_STATUS,
  HTTP2_HEADER_CONTENT_TYPE,
  HTTP2_HEADER_TE,
  NGHTTP2_CANCEL,
} = http2.constants;

/** What a failed call reports: the gRPC status code and message, as grpc-js's errors carry them. */
export interface UnaryStatus {
  code: number;
  details: string;
}

export interface Http2UnaryOptions {
  /** `unix:///path` or an absolute socket path. */
  runtimeEndpoint: string;
  /** Largest response message accepted (bytes). */
  maxMessageBytes: number;
  /** HTTP/2 receive window of the connection and its streams (bytes). */
  flowControlWindow: number;
}

/** grpc-message is percent-encoded (gRPC over HTTP/2). */
export function grpcMessage(v: unknown): string {
  const s = Array.isArray(v) ? String(v[0] ?? '') : typeof v === 'string' ? v : '';
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** HTTP status → gRPC code when a response is not gRPC (the spec's mapping). */
export function httpToGrpc(status: number): number {
  switch (status) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** A grpc-timeout header value: at most 8 digits, in the coarsest unit that fits. */
export function grpcTimeout(ms: number): string {
  const v = Math.max(0, Math.ceil(ms));
  if (v < 1e8) return `${v}m`;
  const s = Math.ceil(v / 1000);
  if (s < 1e8) return `${s}S`;
  return `${Math.min(99_999_999, Math.ceil(s / 3600))}H`;
}

/** A unary call transport: the lean h2c client (h2c.ts) or node:http2 (Http2Unary). */
export interface UnaryTransport {
  call(path: string, request: Buffer, timeoutMs: number): Promise<Buffer>;
  close(): void;
}

export class Http2Unary implements UnaryTransport {
  readonly #socketPath: string;
  readonly #opts: Http2UnaryOptions;
  #session?: http2.ClientHttp2Session;
  #closed = false;
  /** Calls in flight per connection: a connection keeps the process alive only while it has some. */
  readonly #inFlight = new Map<http2.ClientHttp2Session, number>();

  constructor(opts: Http2UnaryOptions) {
    this.#socketPath = criEndpointToTarget(opts.runtimeEndpoint).slice('unix://'.length);
    this.#opts = opts;
  }

  /** The connection, (re)opened when there is none or the last one went away. */
  #connect(): http2.ClientHttp2Session {
    const s = this.#session;
    if (s && !s.closed && !s.destroyed) return s;
    const path = this.#socketPath;
    const session = http2.connect('http://localhost', {
      createConnection: () => net.connect(path),
      settings: { enablePush: false, initialWindowSize: this.#opts.flowControlWindow },
    });
    session.on('connect', () => {
      // the connection-level window too (initialWindowSize is per stream)
      if (this.#opts.flowControlWindow > 65_535) session.setLocalWindowSize(this.#opts.flowControlWindow);
    });
    const drop = (): void => {
      if (this.#session === session) this.#session = undefined;
    };
    // a failed connection fails its calls (each stream errors); the next call reconnects
    session.on('error', drop);
    session.on('goaway', drop);
    session.on('close', drop);
    session.unref();
    this.#session = session;
    return session;
  }

  close(): void {
    this.#closed = true;
    this.#session?.close();
    this.#session = undefined;
  }

  /**
   * One unary call: `request` is the encoded request message (without the gRPC prefix).
   * Resolves with the response message's bytes, rejects with a UnaryStatus.
   */
  call(path: string, request: Buffer, timeoutMs: number): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      if (this.#closed) {
        reject({ code: GrpcStatus.UNAVAILABLE, details: 'channel closed' } satisfies UnaryStatus);
        return;
      }
      let stream: http2.ClientHttp2Stream;
      let session: http2.ClientHttp2Session;
      try {
        session = this.#connect();
        stream = session.request(
          {
            [HTTP2_HEADER_METHOD]: 'POST',
            [HTTP2_HEADER_PATH]: path,
            [HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
            [HTTP2_HEADER_TE]: 'trailers',
            'grpc-timeout': grpcTimeout(timeoutMs),
          },
          { endStream: false },
        );
      } catch (err) {
        reject({ code: GrpcStatus.UNAVAILABLE, details: (err as Error).message } satisfies UnaryStatus);
        return;
      }
      const open = this.#inFlight.get(session) ?? 0;
      this.#inFlight.set(session, open + 1);
      if (open === 0) session.ref();
      const max = this.#opts.maxMessageBytes;
      const chunks: Buffer[] = [];
      let received = 0;
      let httpStatus = 0;
      let grpc: UnaryStatus | undefined;
      let failure: UnaryStatus | undefined;
      const takeStatus = (h: http2.IncomingHttpHeaders): void => {
        const code = h['grpc-status'];
        if (code === undefined) return;
        const n = Number(Array.isArray(code) ? code[0] : code);
        grpc = { code: Number.isInteger(n) && n >= 0 && n <= 16 ? n : GrpcStatus.UNKNOWN, details: grpcMessage(h['grpc-message']) };
      };
      stream.on('response', (h) => {
        httpStatus = Number(h[HTTP2_HEADER_STATUS]);
        takeStatus(h);
      });
      stream.on('trailers', takeStatus);
      stream.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > max + 5) {
          failure ??= { code: GrpcStatus.RESOURCE_EXHAUSTED, details: `Received message larger than max (${received - 5} vs. ${max})` };
          stream.close(NGHTTP2_CANCEL);
          return;
        }
        chunks.push(chunk);
      });
      stream.setTimeout(timeoutMs, () => {
        failure ??= { code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' };
        stream.close(NGHTTP2_CANCEL);
      });
      stream.on('error', (err: Error) => {
        failure ??= { code: GrpcStatus.UNAVAILABLE, details: err.message };
      });
      stream.on('close', () => {
        const left = (this.#inFlight.get(session) ?? 1) - 1;
        if (left > 0) this.#inFlight.set(session, left);
        else {
          this.#inFlight.delete(session);
          session.unref();
        }
        if (failure) return reject(failure);
        if (httpStatus !== 200 && grpc === undefined) {
          return reject({ code: httpStatus ? httpToGrpc(httpStatus) : GrpcStatus.UNAVAILABLE, details: httpStatus ? `Received HTTP status code ${httpStatus}` : `stream closed (code ${stream.rstCode})` });
        }
        if (!grpc) return reject({ code: GrpcStatus.INTERNAL, details: 'Received RST_STREAM or end of stream without a grpc-status' });
        if (grpc.code !== GrpcStatus.OK) return reject(grpc);
        const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received);
        if (body.length < 5) return reject({ code: GrpcStatus.INTERNAL, details: 'response without a message' });
        if (body[0] !== 0) return reject({ code: GrpcStatus.INTERNAL, details: 'compressed response message (no compression was offered)' });
        const len = body.readUInt32BE(1);
        if (len !== body.length - 5) return reject({ code: GrpcStatus.INTERNAL, details: `response message framing: ${len} bytes declared, ${body.length - 5} received` });
        resolve(body.subarray(5));
      });
      const framed = Buffer.allocUnsafe(5 + request.length);
      framed[0] = 0;
      framed.writeUInt32BE(request.length, 1);
      request.copy(framed, 5);
      stream.end(framed);
    });
  }
}
