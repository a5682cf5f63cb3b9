// The kubelet's HTTP endpoints: the healthz port (127.0.0.1:10248 by default) and the optional
// read-only port (10255 upstream's usual choice; 0 disables it) serving /pods and /healthz.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pod, PodList } from '../api/types.js';
import type { Logger } from '../util/log.js';

export interface ServerHost {
  getPods(): Pod[];
  healthChecks(): { name: string; ok: boolean; message: string }[];
}

export type Handler = (req: IncomingMessage, res: ServerResponse, url: URL) => void | Promise<void>;

export interface KubeletServerOptions {
  host: ServerHost;
  log: Logger;
  healthzBindAddress: string;
  healthzPort: number;
  address: string;
  readOnlyPort: number;
  /** Extra read-only routes (path → handler), e.g. /stats/summary from the stats subsystem. */
  routes?: Map<string, Handler>;
}

export function sendJSON(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** /metrics: a registry in the Prometheus text format. */
export function metricsHandler(registry: { metricsText(): string }): Handler {
  return (_req, res) => {
    const text = registry.metricsText();
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  };
}

function sendText(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
  res.end(text);
}

/** /healthz as upstream's healthz package renders it: `ok`, or the failing checks, with ?verbose. */
function healthz(host: ServerHost, url: URL, res: ServerResponse): void {
  const checks = host.healthChecks();
  const sub = url.pathname.replace(/^\/healthz\/?/, '');
  const selected = sub ? checks.filter((c) => c.name === sub) : checks;
  if (sub && selected.length === 0) return sendText(res, 404, `404 page not found\n`);
  const failed = selected.filter((c) => !c.ok);
  if (!failed.length && !url.searchParams.has('verbose')) return sendText(res, 200, 'ok');
  const lines = selected.map((c) => (c.ok ? `[+]${c.name} ok` : `[-]${c.name} failed: ${c.message}`));
  lines.push(failed.length ? 'healthz check failed' : 'healthz check passed');
  sendText(res, failed.length ? 500 : 200, lines.join('\n') + '\n');
}

function podList(host: ServerHost): PodList {
  return { apiVersion: 'v1', kind: 'PodList', metadata: {}, items: host.getPods() };
}

export class KubeletServer {
  private servers: Server[] = [];

  constructor(private readonly opts: KubeletServerOptions) {}

  async start(): Promise<void> {
    const { opts } = this;
    if (opts.healthzPort > 0) {
      await this.listen(opts.healthzBindAddress, opts.healthzPort, 'healthz', (req, res, url) => {
        if (url.pathname === '/healthz' || url.pathname.startsWith('/healthz/')) return healthz(opts.host, url, res);
        sendText(res, 404, '404 page not found\n');
      });
    }
    if (opts.readOnlyPort > 0) {
      await this.listen(opts.address, opts.readOnlyPort, 'read-only', async (req, res, url) => {
        if (req.method !== 'GET' && req.method !== 'HEAD') return sendText(res, 405, 'method not allowed\n');
        if (url.pathname === '/pods' || url.pathname === '/pods/') return sendJSON(res, 200, podList(opts.host));
        if (url.pathname === '/healthz' || url.pathname.startsWith('/healthz/')) return healthz(opts.host, url, res);
        const route = opts.routes?.get(url.pathname);
        if (route) return route(req, res, url);
        sendText(res, 404, '404 page not found\n');
      });
    }
  }

  /** The bound ports (useful when a port was given as 0 in tests). */
  addresses(): AddressInfo[] {
    return this.servers.map((s) => s.address() as AddressInfo);
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => new Promise<void>((r) => { s.closeAllConnections?.(); s.close(() => r()); })));
    this.servers = [];
  }

  private listen(address: string, port: number, name: string, handler: Handler): Promise<void> {
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      Promise.resolve(handler(req, res, url)).catch((err) => {
        this.opts.log.error('HTTP handler failed', { server: name, path: url.pathname, err: (err as Error).message });
        if (!res.headersSent) sendText(res, 500, 'internal error\n');
      });
    });
    return new Promise((resolve, reject) => {
      server.once('error', (err) => reject(new Error(`cannot serve ${name} on ${address}:${port}: ${err.message}`)));
      server.listen(port, address, () => {
        this.servers.push(server);
        this.opts.log.info('Serving', { server: name, address, port });
        resolve();
      });
    });
  }
}
