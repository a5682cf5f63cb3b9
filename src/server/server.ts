// The kubelet's HTTP endpoints: the healthz port (127.0.0.1:10248 by default) and the optional
// read-only port (10255 upstream's usual choice; 0 disables it) serving /pods, /healthz and the
// routes other subsystems register (/stats/summary, /metrics/resource, /metrics).
//
// No request can stop the process: a malformed target is a 400, a handler's throw or rejection a
// logged 500, and what one client can make a server hold is bounded (head size, timeouts, idle
// sockets, connection count; request bodies are never read).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
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
};

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
};

export interface KubeletServerOptions {
  host: ServerHost;
  log: Logger;
  healthzBindAddress: string;
  healthzPort: number;
  address: string;
  readOnlyPort: number;
  /** Extra read-only routes (path → handler), e.g. /stats/summary from the stats subsystem. */
  routes?: Map<string, Handler>;
  limits?: Partial<ServerLimits>;
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
      const pods = withMethods(['GET'], (_req, res) => sendJSON(res, 200, podList(opts.host)));
      routes.set('/pods', pods);
      routes.set('/pods/', pods);
      for (const [path, h] of healthzRoutes(opts.host, 'kubelet', opts.log)) routes.set(path, h);
      await this.listen(opts.address, opts.readOnlyPort, 'read-only', routes);
    }
  }

  /** The bound ports (useful when a port was given as 0 in tests). */
  addresses(): AddressInfo[] {
    return this.servers.map((s) => s.address() as AddressInfo);
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => new Promise<void>((r) => { s.closeAllConnections(); s.close(() => r()); })));
    this.servers = [];
  }

  private dispatch(name: string, routes: Map<string, Handler>, req: IncomingMessage, res: ServerResponse): void {
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
    try {
      // No route reads a body: what arrives is discarded (so closing does not reset the answer
      // away) and the connection closes after the answer instead of waiting for the body's end.
      if (hasBody(req)) {
        res.setHeader('Connection', 'close');
        req.resume();
      }
      if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
        res.setHeader('Connection', 'close');
        return sendText(res, 400, '400 Bad Request: missing required Host header\n');
      }
      const target = parseRequestTarget(method, req.url ?? '');
      switch (target.kind) {
        case 'bad':
          res.setHeader('Connection', 'close');
          return sendText(res, 400, `400 Bad Request: ${target.reason}\n`);
        case 'options-asterisk':
          res.writeHead(200, { 'Content-Length': 0 });
          return void res.end();
        case 'redirect':
          res.writeHead(301, { Location: target.location, 'Content-Length': 0 });
          return void res.end();
        case 'path':
          break;
      }
      path = target.path;
      const route = routes.get(path);
      if (!route) return sendText(res, 404, '404 page not found\n');
      if (!allows(route.methods, method)) {
        const allow = route.methods === undefined ? 'GET' : (route.methods as readonly string[]).join(', ');
        return sendText(res, 405, '405: Method Not Allowed', { Allow: allow });
      }
      const url = new URL('http://localhost/');
      url.pathname = escapePath(path);
      url.search = target.rawQuery;
      const settled = (): void => {
        if (!res.headersSent) failed(new Error('handler returned without answering'));
      };
      const result = route(req, res, url);
      if (result && typeof (result as Promise<void>).then === 'function') (result as Promise<void>).then(settled, failed);
      else settled();
    } catch (err) {
      failed(err);
    }
  }

  private listen(address: string, port: number, name: string, routes: Map<string, Handler>): Promise<void> {
    const { limits, opts } = this;
    const server = createServer(
      {
        maxHeaderSize: limits.maxHeaderSize,
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
        // Checked in dispatch instead, to answer with the reason (node's own 400 has no body).
        requireHostHeader: false,
      },
      (req, res) => this.dispatch(name, routes, req, res),
    );
    server.timeout = limits.socketIdleTimeoutMs;
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
