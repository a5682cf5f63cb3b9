// The kubelet's HTTP endpoints: the healthz port (127.0.0.1:10248 by default), the optional
// read-only port (10255 upstream's usual choice; 0 disables it) serving /pods, /healthz and the
// routes other subsystems register (/stats/summary, /metrics/resource, /metrics), and the secure
// port (10250): TLS (ALPN h2 and http/1.1, as Go's server offers), every request authenticated
// and authorized before its route runs, and HTTP/1.1 upgrades (exec, attach, port-forward).
//
// Routes are matched as Go's ServeMux matches patterns: a path ending in '/' is a subtree (the
// longest registered prefix wins, an exact path before any subtree) unless its handler is `exact`.
//
// No request can stop the process: a malformed target is a 400, a handler's throw or rejection a
// logged 500, and what one client can make a server hold is bounded (head size, timeouts, idle
// sockets, connection count; request bodies are never read).

import { createServer, ServerResponse, type IncomingMessage, type Server } from 'node:http';
import { createSecureServer, type Http2SecureServer, type SecureServerOptions, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Pod, PodList } from '../api/types.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { logCheck, pingCheck, serveHealthzCheck, serveHealthzRoot, type HealthzCheck, type HealthzNote } from './healthz.js';
import { escapePath, parseRequestTarget } from './request-target.js';
import { ServerLimitsError, ServerListenError } from './errors.js';

export interface ServerHost {
  getPods(): Pod[];
  /** What the kubelet knows of its own health (syncloop, pleg, runtime, ...). */
  healthChecks(): { name: string; ok: boolean; message: string }[];
}

/** Methods a route answers; 'any' as Go's ServeMux handlers (healthz, metrics) do. */
export type Methods = readonly string[] | 'any';

/**
 * A route. The server matches the (decoded, clean) path and the method before calling it; `url`
 * carries that path and the raw query. The response is complete, or at least started, when the
 * returned promise settles: a handler that settles without answering is a 500.
 */
export type Handler = ((req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>) & {
  /** Methods this route answers; GET when unset. */
  readonly methods?: Methods;
  /** A path ending in '/' that matches only itself, not its subtree. */
  readonly exact?: boolean;
  /**
   * Serves an HTTP/1.1 Upgrade request (SPDY or WebSocket streams) on the raw socket, after the
   * request passed authentication and authorization. Without it an upgrade request is answered as
   * an ordinary one (the connection closes after the answer).
   */
  readonly upgrade?: UpgradeHandler;
};

/** The raw socket is the handler's from here on: it writes the 101 (or a refusal) itself. */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) => void | Promise<void>;

/** A request that may not proceed, and its answer (401 Unauthorized, 403 Forbidden, 500). */
export interface Refusal {
  status: number;
  message: string;
  /** The connection closes after the answer (set by the server for a stranger's 401). */
  close?: boolean;
}

/**
 * Authentication and authorization of one request on the secure port: undefined admits it. `path`
 * is the clean decoded path the route was matched on.
 */
export interface RequestGate {
  admit(req: IncomingMessage, path: string): Promise<Refusal | undefined>;
}

/** The secure port: where, its TLS, its gate and its routes (beside /pods and /healthz). */
export interface SecureServing {
  address: string;
  port: number;
  /** Key, certificate, CA for client certificates, minVersion, ciphers (see tls.ts). */
  tls: SecureServerOptions;
  gate: RequestGate;
  routes: Map<string, Handler>;
  /**
   * Serving certificates that change at run time (serverTLSBootstrap): each new pair replaces the
   * context for new handshakes; connections already open keep theirs. Until the first pair, `tls`
   * holds none and handshakes fail, as upstream's "no serving certificate available".
   */
  certificateUpdates?: (apply: (pair: { cert: string; key: string }) => void) => void;
}

/** A handler that answers `methods` (GET only is the default). */
export function withMethods(methods: Methods, fn: (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>): Handler {
  return Object.assign(fn, { methods });
}

/** What one client can make a server hold. Defaults: DEFAULT_SERVER_LIMITS. */
export interface ServerLimits {
  /** Largest request head (request line and headers); more is a 431. */
  maxHeaderSize: number;
  /** Time to receive the request head; a slower client gets a 408 and the connection closes. */
  headersTimeoutMs: number;
  /** Time to receive the whole request. */
  requestTimeoutMs: number;
  /** Idle time between requests on a kept-alive connection (upstream's IdleTimeout). */
  keepAliveTimeoutMs: number;
  /** No bytes either way for this long ends a connection (a client that stops reading its answer). */
  socketIdleTimeoutMs: number;
  /** Open connections per server; more are dropped at accept. */
  maxConnections: number;
  /** How often the head and request timeouts are checked. */
  connectionsCheckingIntervalMs: number;
  /** After a raw rejection, how long the connection is left for the client to read it before it is destroyed. */
  rejectLingerMs: number;
  /** Time for a client to complete the TLS handshake on the secure port; a slower one is cut. */
  tlsHandshakeTimeoutMs: number;
  /**
   * Connections from one source address not yet authenticated (on a port without authentication:
   * all of them); more from that address are dropped at accept.
   */
  maxUnauthenticatedConnectionsPerIP: number;
  /**
   * Connections on the secure port not yet authenticated (by a verified client certificate or an
   * admitted request), from anyone; more are dropped at accept. The rest of maxConnections is kept
   * for authenticated ones, which strangers therefore cannot crowd out.
   */
  maxUnauthenticatedConnections: number;
  /**
   * HTTP/2 control frames (PING, SETTINGS) and streams the client resets, per session: a burst of
   * this many, refilled at http2ControlFramesPerSecond; past it the session ends with GOAWAY
   * ENHANCE_YOUR_CALM.
   */
  http2ControlFrameBurst: number;
  http2ControlFramesPerSecond: number;
}

export const DEFAULT_SERVER_LIMITS: ServerLimits = {
  maxHeaderSize: 16 * 1024,
  headersTimeoutMs: 60_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 90_000,
  socketIdleTimeoutMs: 120_000,
  maxConnections: 512,
  connectionsCheckingIntervalMs: 30_000,
  rejectLingerMs: 1_000,
  tlsHandshakeTimeoutMs: 10_000,
  maxUnauthenticatedConnectionsPerIP: 32,
  maxUnauthenticatedConnections: 128,
  http2ControlFrameBurst: 200,
  http2ControlFramesPerSecond: 20,
};

/** GOAWAY's error code for a peer that floods (RFC 9113 ENHANCE_YOUR_CALM). */
const NGHTTP2_ENHANCE_YOUR_CALM = 0xb;

/**
 * Which connections are not yet authenticated, per source address and in all; connections are
 * keyed by remote address and port (the same for a TCP socket and the TLS socket over it).
 */
class ConnectionAdmission {
  readonly #pending = new Map<string, string>(); // connection key -> source address
  readonly #perIP = new Map<string, number>();

  constructor(private readonly limits: ServerLimits, private readonly authenticated: boolean) {}

  static key(sock: { remoteAddress?: string; remotePort?: number }): string {
    return `${sock.remoteAddress ?? ''}|${sock.remotePort ?? ''}`;
  }

  readonly #probation = new Set<string>();

  /**
   * A new connection: false when it must be dropped. Past maxUnauthenticatedConnections one is
   * let through its TLS handshake on probation: a verified client certificate admits it, else
   * it is dropped then (handshaken).
   */
  accept(sock: Socket): boolean {
    const ip = sock.remoteAddress ?? '';
    const n = this.#perIP.get(ip) ?? 0;
    if (n >= this.limits.maxUnauthenticatedConnectionsPerIP) return false;
    const key = ConnectionAdmission.key(sock);
    if (this.authenticated && this.#pending.size >= this.limits.maxUnauthenticatedConnections) this.#probation.add(key);
    this.#pending.set(key, ip);
    this.#perIP.set(ip, n + 1);
    sock.once('close', () => this.authenticate(key));
    return true;
  }

  /** After the TLS handshake: false when the connection must be dropped. */
  handshaken(key: string, authorized: boolean): boolean {
    const probation = this.#probation.has(key);
    if (authorized) this.authenticate(key);
    return authorized || !probation;
  }

  /** The connection is authenticated (or gone): it no longer counts. */
  authenticate(key: string): void {
    this.#probation.delete(key);
    const ip = this.#pending.get(key);
    if (ip === undefined) return;
    this.#pending.delete(key);
    const n = (this.#perIP.get(ip) ?? 1) - 1;
    if (n <= 0) this.#perIP.delete(ip);
    else this.#perIP.set(ip, n);
  }

  isPending(key: string): boolean {
    return this.#pending.has(key);
  }
}

/** A token bucket of `burst` refilled at `perSecond`: take() is false once it is empty. */
function tokenBucket(burst: number, perSecond: number): { take(): boolean } {
  let tokens = burst;
  let last = performance.now();
  return {
    take() {
      const now = performance.now();
      tokens = Math.min(burst, tokens + ((now - last) / 1000) * perSecond);
      last = now;
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
  };
}

export interface KubeletServerOptions {
  host: ServerHost;
  log: Logger;
  healthzBindAddress: string;
  healthzPort: number;
  address: string;
  readOnlyPort: number;
  /** Extra read-only routes (path → handler), e.g. /stats/summary from the stats subsystem. */
  routes?: Map<string, Handler>;
  /** The secure port (10250); unset when the server is disabled (enableServer false). */
  secure?: SecureServing;
  limits?: Partial<ServerLimits>;
}

/** The route for a clean path: exact first, then the longest subtree pattern above it. */
export function matchRoute(routes: Map<string, Handler>, path: string): Handler | undefined {
  const exact = routes.get(path);
  if (exact) return exact;
  for (let i = path.lastIndexOf('/'); i >= 0; i = path.lastIndexOf('/', i - 1)) {
    const h = routes.get(path.slice(0, i + 1));
    if (h && !h.exact) return h;
    if (i === 0) break;
  }
  return undefined;
}

export function sendJSON(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** /metrics: a registry in the Prometheus text format; any method, as upstream's promhttp handler. */
export function metricsHandler(registry: { metricsText(): string }): Handler {
  return withMethods('any', (_req, res) => {
    const text = registry.metricsText();
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  });
}

function sendText(res: ServerResponse, code: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(code, {
    'Content-Type': 'text/plain; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** The TLS socket under an HTTP/1.1 or HTTP/2 request (client certificates live there). */
export function tlsSocketOf(req: IncomingMessage): TLSSocket | undefined {
  const h2 = (req as unknown as { stream?: { session?: { socket?: unknown } } }).stream;
  const sock = (h2?.session?.socket ?? req.socket) as TLSSocket | undefined;
  return sock && typeof sock.getPeerCertificate === 'function' ? sock : undefined;
}

function isHttp1(req: IncomingMessage): boolean {
  return req.httpVersionMajor === 1;
}

/** The connection (HTTP/1.1) or the session (HTTP/2) under a request ends once it is answered. */
function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  if (isHttp1(req)) {
    if (!res.headersSent) res.setHeader('Connection', 'close');
    return;
  }
  const session = (req as unknown as { stream?: { session?: { close(): void } } }).stream?.session;
  const stream = (req as unknown as { stream?: { once(e: string, f: () => void): void } }).stream;
  stream?.once('close', () => session?.close());
}

function podList(host: ServerHost): PodList {
  return { apiVersion: 'v1', kind: 'PodList', metadata: {}, items: host.getPods() };
}

/** Which of the host's reports are this server's healthz checks; the rest are notes. */
function healthzFor(host: ServerHost, port: 'healthz' | 'kubelet'): { checks: HealthzCheck[]; notes: HealthzNote[] } {
  const reported = host.healthChecks();
  if (port === 'healthz') {
    // upstream's healthz port installs no checks, which means ping alone.
    return { checks: [pingCheck], notes: reported.filter((c) => c.name !== 'ping') };
  }
  const syncloop = reported.find((c) => c.name === 'syncloop');
  const syncloopCheck: HealthzCheck = {
    name: 'syncloop',
    check: () => (syncloop === undefined ? 'the kubelet reports no sync loop health' : syncloop.ok ? undefined : syncloop.message),
  };
  const checkNames = new Set(['ping', 'log', 'syncloop']);
  return { checks: [pingCheck, logCheck, syncloopCheck], notes: reported.filter((c) => !checkNames.has(c.name)) };
}

function healthzRoutes(host: ServerHost, port: 'healthz' | 'kubelet', log: Logger): Map<string, Handler> {
  const routes = new Map<string, Handler>();
  routes.set('/healthz', withMethods('any', (_req, res, url) => {
    const { checks, notes } = healthzFor(host, port);
    serveHealthzRoot(res, url.searchParams, checks, notes, log);
  }));
  const names = port === 'healthz' ? ['ping'] : ['ping', 'log', 'syncloop'];
  for (const name of names) {
    routes.set(`/healthz/${name}`, withMethods('any', (_req, res) => {
      const check = healthzFor(host, port).checks.find((c) => c.name === name)!;
      serveHealthzCheck(res, check);
    }));
  }
  return routes;
}

/** Routes both the read-only and the secure port serve: /pods and the kubelet's healthz. */
function kubeletRoutes(host: ServerHost, log: Logger): Map<string, Handler> {
  const routes = new Map<string, Handler>();
  const pods = Object.assign(withMethods(['GET'], (_req, res) => sendJSON(res, 200, podList(host))), { exact: true });
  routes.set('/pods', pods);
  routes.set('/pods/', pods);
  for (const [path, h] of healthzRoutes(host, 'kubelet', log)) routes.set(path, h);
  return routes;
}

function allows(methods: Methods | undefined, method: string): boolean {
  const m = methods ?? ['GET'];
  return m === 'any' || m.includes(method);
}

function hasBody(req: IncomingMessage): boolean {
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

/** The status a parser or timeout error from node's HTTP server becomes. */
function clientErrorStatus(code: string | undefined): [number, string] {
  if (code === 'HPE_HEADER_OVERFLOW') return [431, 'Request Header Fields Too Large'];
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT') return [408, 'Request Timeout'];
  return [400, 'Bad Request'];
}

export class KubeletServer {
  private servers: Server[] = [];
  private readonly sockets = new WeakMap<Server, Set<Socket>>();
  private readonly limits: ServerLimits;

  constructor(private readonly opts: KubeletServerOptions) {
    this.limits = { ...DEFAULT_SERVER_LIMITS, ...opts.limits };
    if (this.limits.headersTimeoutMs > this.limits.requestTimeoutMs) {
      throw new ServerLimitsError('headersTimeoutMs', `${this.limits.headersTimeoutMs} exceeds requestTimeoutMs (${this.limits.requestTimeoutMs})`);
    }
  }

  async start(): Promise<void> {
    const { opts } = this;
    if (opts.healthzPort > 0) {
      await this.listen(opts.healthzBindAddress, opts.healthzPort, 'healthz', healthzRoutes(opts.host, 'healthz', opts.log));
    }
    if (opts.readOnlyPort > 0) {
      const routes = new Map<string, Handler>(opts.routes ?? []);
      for (const [path, h] of kubeletRoutes(opts.host, opts.log)) routes.set(path, h);
      await this.listen(opts.address, opts.readOnlyPort, 'read-only', routes);
    }
    if (opts.secure) {
      const routes = new Map<string, Handler>(opts.secure.routes);
      for (const [path, h] of kubeletRoutes(opts.host, opts.log)) routes.set(path, h);
      await this.listen(opts.secure.address, opts.secure.port, 'kubelet', routes, opts.secure);
    }
  }

  /** The bound ports (useful when a port was given as 0 in tests). */
  addresses(): AddressInfo[] {
    return this.servers.map((s) => s.address() as AddressInfo);
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => new Promise<void>((r) => {
      s.close(() => r());
      // Every connection, upgraded streams and HTTP/2 sessions included, ends with the server.
      for (const sock of this.sockets.get(s) ?? []) sock.destroy();
    })));
    this.servers = [];
  }

  /** The gate with what it admits recorded: an admitted request authenticates its connection. */
  private gateFor(gate: RequestGate | undefined, admission: ConnectionAdmission): RequestGate | undefined {
    if (!gate) return undefined;
    return {
      admit: async (req, path) => {
        const refusal = await gate.admit(req, path);
        const sock = tlsSocketOf(req) ?? req.socket;
        const key = ConnectionAdmission.key(sock);
        // admitted: the connection is no stranger's (a refused one, even as an authenticated
        // user, is not: anonymous requests are refused with 403 under Webhook authorization)
        if (!refusal) admission.authenticate(key);
        // a stranger's connection holds no slot after its refusal
        else if (admission.isPending(key)) return { ...refusal, close: true };
        return refusal;
      },
    };
  }

  private dispatch(name: string, routes: Map<string, Handler>, gate: RequestGate | undefined, req: IncomingMessage, res: ServerResponse): void {
    const method = req.method ?? 'GET';
    let path = req.url ?? '';
    const failed = (err: unknown): void => {
      this.opts.log.error('HTTP handler failed', { server: name, method, path, err: errorMessage(err) });
      if (!res.headersSent) sendText(res, 500, '500 Internal Server Error\n');
      else if (!res.writableEnded) res.destroy();
    };
    // A response that cannot be written (the client went away) is no concern of the process.
    res.on('error', (err) => this.opts.log.v(4).info('HTTP response not delivered', { server: name, path, err: err.message }));
    req.on('error', () => undefined);
    // HTTP/2 has no Connection header (setting one is an error): its streams end on their own.
    const closeAfter = (): void => { if (isHttp1(req)) res.setHeader('Connection', 'close'); };
    const refuse = (refusal: Refusal): void => {
      if (refusal.close) closeAfterAnswer(req, res);
      sendText(res, refusal.status, refusal.message);
    };
    try {
      // No route reads a body: what arrives is discarded (so closing does not reset the answer
      // away) and the connection closes after the answer instead of waiting for the body's end.
      if (hasBody(req)) {
        closeAfter();
        req.resume();
      }
      if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
        closeAfter();
        return sendText(res, 400, '400 Bad Request: missing required Host header\n');
      }
      const target = parseRequestTarget(method, req.url ?? '');
      switch (target.kind) {
        case 'bad':
          closeAfter();
          return sendText(res, 400, `400 Bad Request: ${target.reason}\n`);
        case 'options-asterisk':
          res.writeHead(200, { 'Content-Length': 0 });
          return void res.end();
        case 'redirect': {
          const redirect = (): void => {
            res.writeHead(301, { Location: target.location, 'Content-Length': 0 });
            res.end();
          };
          if (!gate) return redirect();
          // the mux's cleaning redirect is behind the filter chain too: authorized on the path as
          // asked (upstream's attributes read the request's path before any cleaning)
          const asked = (req.url ?? '').split('?')[0]!;
          let decoded = asked;
          try { decoded = decodeURIComponent(asked); } catch { /* kept as sent */ }
          gate.admit(req, decoded).then((refusal) => (refusal ? refuse(refusal) : redirect())).catch(failed);
          return;
        }
        case 'path':
          break;
      }
      path = target.path;
      const route = matchRoute(routes, path);
      if (!route) {
        const notFound = (): void => sendText(res, 404, '404 page not found\n');
        if (!gate) return notFound();
        // As upstream's filter chain: an unknown path is authenticated and authorized like any
        // other (a 401 or 403 to whoever may not ask), so a 404 tells nothing to a stranger.
        gate.admit(req, path).then((refusal) => (refusal ? refuse(refusal) : notFound())).catch(failed);
        return;
      }
      const url = new URL('http://localhost/');
      url.pathname = escapePath(path);
      url.search = target.rawQuery;
      const serve = (): void => {
        if (!allows(route.methods, method)) {
          const allow = route.methods === undefined ? 'GET' : (route.methods as readonly string[]).join(', ');
          return sendText(res, 405, '405: Method Not Allowed', { Allow: allow });
        }
        const settled = (): void => {
          if (!res.headersSent) failed(new Error('handler returned without answering'));
        };
        const result = route(req, res, url);
        if (result && typeof (result as Promise<void>).then === 'function') (result as Promise<void>).then(settled, failed);
        else settled();
      };
      if (!gate) return serve();
      // As upstream's filter: identity and permission before the route's own answers (405 included).
      gate.admit(req, path).then((refusal) => (refusal ? refuse(refusal) : serve())).catch(failed);
    } catch (err) {
      failed(err);
    }
  }

  /**
   * An HTTP/1.1 request with Upgrade: to its route's upgrade handler once admitted; any refusal,
   * or a route with no upgrade handler, is answered as an ordinary request on the socket.
   */
  private dispatchUpgrade(name: string, routes: Map<string, Handler>, gate: RequestGate | undefined, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    const asOrdinary = (): void => {
      const res = new ServerResponse(req);
      res.shouldKeepAlive = false;
      res.assignSocket(socket as Socket);
      res.on('finish', () => {
        res.detachSocket(socket as Socket);
        // Whatever else the client sends (a body, pipelined requests) is read and dropped, so the
        // close is not a reset that could discard the answer; a client that never stops is cut.
        socket.resume();
        socket.end();
        (socket as Socket).setTimeout(this.limits.rejectLingerMs, () => socket.destroy());
      });
      this.dispatch(name, routes, gate, req, res);
    };
    try {
      const target = parseRequestTarget(req.method ?? 'GET', req.url ?? '');
      const route = target.kind === 'path' ? matchRoute(routes, target.path) : undefined;
      if (target.kind !== 'path' || !route?.upgrade || !allows(route.methods, req.method ?? 'GET')) return asOrdinary();
      const upgrade = route.upgrade;
      const url = new URL('http://localhost/');
      url.pathname = escapePath(target.path);
      url.search = target.rawQuery;
      const run = (): void => {
        const failed = (err: unknown): void => {
          this.opts.log.error('HTTP upgrade handler failed', { server: name, path: target.path, err: errorMessage(err) });
          socket.destroy();
        };
        try {
          const result = upgrade(req, socket, head, url);
          if (result && typeof (result as Promise<void>).then === 'function') (result as Promise<void>).catch(failed);
        } catch (err) {
          failed(err);
        }
      };
      if (!gate) return run();
      gate.admit(req, target.path).then((refusal) => (refusal ? asOrdinary() : run()), () => asOrdinary());
    } catch {
      asOrdinary();
    }
  }

  private listen(address: string, port: number, name: string, routes: Map<string, Handler>, secure?: SecureServing): Promise<void> {
    const { limits, opts } = this;
    const admission = new ConnectionAdmission(limits, secure !== undefined);
    const gate = this.gateFor(secure?.gate, admission);
    const handle = (req: IncomingMessage, res: ServerResponse): void => this.dispatch(name, routes, gate, req, res);
    let server: Server;
    if (secure) {
      // HTTP/2 and HTTP/1.1 on one TLS port, chosen by ALPN, as Go's TLS server offers them.
      const h2 = createSecureServer({
        ...secure.tls,
        allowHTTP1: true,
        ALPNProtocols: ['h2', 'http/1.1'],
        maxSessionMemory: 10,
        // Go's defaults: 250 concurrent streams; header lists as large as an HTTP/1.1 head.
        settings: { maxConcurrentStreams: 250, maxHeaderListSize: limits.maxHeaderSize },
        maxSendHeaderBlockLength: limits.maxHeaderSize,
        handshakeTimeout: limits.tlsHandshakeTimeoutMs,
        // node's own flood guards, explicit: invalid frames and refused streams end a session
        maxSessionInvalidFrames: 100,
        maxSessionRejectedStreams: 100,
        maxOutstandingPings: 10,
        unknownProtocolTimeout: limits.tlsHandshakeTimeoutMs,
      }, handle as never);
      // A client certificate the client CA verified authenticates the connection at once.
      h2.on('secureConnection', (tls: TLSSocket) => {
        if (admission.handshaken(ConnectionAdmission.key(tls), tls.authorized)) return;
        opts.log.v(4).info('HTTP connection dropped: too many not yet authenticated', { server: name, remote: tls.remoteAddress });
        tls.destroy();
      });
      h2.on('session', (session: ServerHttp2Session) => guardSession(session, limits));
      // The HTTP/1.1 side reads these from the server object (http.Server sets them from options).
      Object.assign(h2, {
        maxHeaderSize: limits.maxHeaderSize,
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
      });
      let serving = secure.tls.cert !== undefined;
      secure.certificateUpdates?.((pair) => {
        h2.setSecureContext({ ...secure.tls, cert: pair.cert, key: pair.key });
        serving = true;
        opts.log.info('Serving with a new certificate', { server: name });
      });
      h2.on('tlsClientError', (err: NodeJS.ErrnoException) => {
        if (!serving) opts.log.v(2).info('http: TLS handshake error: no serving certificate available for the kubelet', { server: name });
        else opts.log.v(4).info('TLS handshake failed', { server: name, code: err.code, err: err.message });
      });
      h2.on('sessionError', (err: Error) => opts.log.v(4).info('HTTP/2 session error', { server: name, err: err.message }));
      server = h2 as unknown as Server;
      (h2 as Http2SecureServer).setTimeout(limits.socketIdleTimeoutMs);
    } else {
      server = createServer(
        {
          maxHeaderSize: limits.maxHeaderSize,
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
          // Checked in dispatch instead, to answer with the reason (node's own 400 has no body).
          requireHostHeader: false,
        },
        handle,
      );
    }
    server.timeout = limits.socketIdleTimeoutMs;
    const sockets = new Set<Socket>();
    this.sockets.set(server, sockets);
    server.on('connection', (sock: Socket) => {
      if (!admission.accept(sock)) {
        opts.log.v(4).info('HTTP connection dropped: too many not yet authenticated', { server: name, remote: sock.remoteAddress });
        sock.destroy();
        return;
      }
      sockets.add(sock);
      sock.once('close', () => sockets.delete(sock));
    });
    server.maxConnections = limits.maxConnections;

    // Responses open per socket: a raw rejection must not be written into the middle of one.
    // (The parser can fail after it handed a request over, e.g. on an invalid Transfer-Encoding.)
    const open = new WeakMap<Duplex, Set<ServerResponse>>();
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      let set = open.get(req.socket);
      if (!set) open.set(req.socket, (set = new Set()));
      set.add(res);
      res.once('close', () => set.delete(res));
    });
    // Expect: 100-continue asks to send a body no route reads: answer without inviting it.
    server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
      server.emit('request', req, res);
    });

    // Any other Expect is a 417, with the reason (node's own has no body).
    server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
      res.setHeader('Connection', 'close');
      sendText(res, 417, `417 Expectation Failed: unsupported expectation ${JSON.stringify(String(req.headers.expect))}\n`);
    });

    const rejected = new WeakSet<Duplex>();
    const rejectRaw = (socket: Duplex, status: number, reason: string, detail: string): void => {
      const body = `${status} ${reason}: ${detail}\n`;
      socket.end(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      // Give the client time to read the answer before the socket goes (a reset could discard it).
      (socket as Socket).setTimeout(limits.rejectLingerMs, () => socket.destroy());
    };
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      // The parser reports every later chunk again; the first answer stands.
      if (rejected.has(socket)) return;
      rejected.add(socket);
      const started = [...(open.get(socket) ?? [])].some((res) => res.headersSent);
      if (err.code === 'ECONNRESET' || !socket.writable || started) {
        socket.destroy();
        return;
      }
      const [status, reason] = clientErrorStatus(err.code);
      opts.log.v(4).info('Rejected HTTP request', { server: name, status, code: err.code, err: err.message });
      rejectRaw(socket, status, reason, err.code === 'HPE_HEADER_OVERFLOW' ? `request head exceeds ${limits.maxHeaderSize} bytes` : err.message);
    });
    // CONNECT (tunnels) is served by no route; node would otherwise drop the connection silently.
    server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
      socket.on('error', () => undefined);
      socket.resume();
      rejectRaw(socket, 405, 'Method Not Allowed', 'CONNECT is not served');
    });
    // Upgrade requests (exec, attach, port-forward streams) go to their route's upgrade handler.
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.dispatchUpgrade(name, routes, gate, req, socket, head));
    server.on('drop', () => opts.log.v(4).info('HTTP connection dropped: too many open', { server: name, max: limits.maxConnections }));

    return new Promise((resolve, reject) => {
      const onListenError = (err: Error): void => reject(new ServerListenError(name, address, port, err));
      server.once('error', onListenError);
      server.listen(port, address, () => {
        server.off('error', onListenError);
        // Later errors (e.g. EMFILE at accept) are logged; an unhandled 'error' would end the process.
        server.on('error', (err) => opts.log.error('HTTP server error', { server: name, err: err.message }));
        this.servers.push(server);
        opts.log.info('Serving', { server: name, address, port: (server.address() as AddressInfo).port });
        resolve();
      });
    });
  }
}

/**
 * An HTTP/2 session's own limits beside node's: it ends (GOAWAY) once it has had no stream open
 * for keepAliveTimeoutMs (Go's IdleTimeout; PINGs do not keep it alive), and a flood of PINGs,
 * SETTINGS or streams reset by the client ends it with ENHANCE_YOUR_CALM.
 */
function guardSession(session: ServerHttp2Session, limits: ServerLimits): void {
  let open = 0;
  let idle: NodeJS.Timeout | undefined;
  const arm = (): void => {
    clearTimeout(idle);
    idle = setTimeout(() => { if (open === 0 && !session.closed) session.close(); }, limits.keepAliveTimeoutMs);
    idle.unref();
  };
  const bucket = tokenBucket(limits.http2ControlFrameBurst, limits.http2ControlFramesPerSecond);
  const spend = (): void => {
    if (bucket.take() || session.destroyed) return;
    clearTimeout(idle);
    // GOAWAY with the code (node sends a destroy's code only along with an error), then the end
    session.destroy(new Error('HTTP/2 control frame flood'), NGHTTP2_ENHANCE_YOUR_CALM);
  };
  session.on('ping', spend);
  session.on('remoteSettings', spend);
  session.on('stream', (stream: ServerHttp2Stream) => {
    open++;
    clearTimeout(idle);
    stream.once('close', () => {
      // a stream reset (a client opening and cancelling streams: rapid reset) costs as a PING does
      if (stream.rstCode !== undefined && stream.rstCode !== 0) spend();
      open--;
      if (open === 0) arm();
    });
  });
  session.once('close', () => clearTimeout(idle));
  session.on('error', () => undefined);
  arm();
}
