// A small HTTP(S) client for tests of the test API server: JSON requests with a bearer token
// or client certificate, and watch streams read line by line.

import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { TestApiServer, type TestApiServerOptions } from '../fixtures/test-apiserver/server.js';

export const TOKEN = 'admin-token';

export async function startServer(opts: TestApiServerOptions = {}): Promise<TestApiServer> {
  const s = new TestApiServer({ tls: false, tokens: { [TOKEN]: { user: 'admin', groups: ['system:masters'] } }, ...opts });
  await s.start();
  return s;
}

export interface CallOptions {
  body?: unknown;
  token?: string | null;
  contentType?: string;
  accept?: string;
  cert?: { cert: string; key: string };
}

export interface Reply {
  code: number;
  headers: IncomingMessage['headers'];
  body: any;
}

function open(server: TestApiServer, method: string, path: string, o: CallOptions): ReturnType<typeof httpRequest> {
  const url = new URL(path, server.url);
  const headers: Record<string, string> = { Accept: o.accept ?? 'application/json' };
  const token = o.token === undefined ? TOKEN : o.token;
  if (token) headers.Authorization = `Bearer ${token}`;
  if (o.body !== undefined) {
    headers['Content-Type'] = o.contentType ?? 'application/json';
    // node sends a DELETE body unframed unless told its length.
    headers['Content-Length'] = String(Buffer.byteLength(typeof o.body === 'string' ? o.body : JSON.stringify(o.body)));
  }
  const common = { method, headers, agent: false as const };
  return url.protocol === 'https:'
    ? httpsRequest(url, { ...common, ca: server.ca?.cert, cert: o.cert?.cert, key: o.cert?.key })
    : httpRequest(url, common);
}

export function call(server: TestApiServer, method: string, path: string, o: CallOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = open(server, method, path, o);
    req.on('error', reject);
    req.on('response', (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { data += d; });
      res.on('end', () => {
        let body: any = data;
        try { body = JSON.parse(data); } catch { /* plain text */ }
        resolve({ code: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    if (o.body !== undefined) req.write(typeof o.body === 'string' ? o.body : JSON.stringify(o.body));
    req.end();
  });
}

export interface WatchEvent {
  type: string;
  object: any;
}

export interface Watch {
  code: number;
  events: WatchEvent[];
  /** Resolves with the next event not yet taken (waits for it), or undefined once the stream ended. */
  next(timeoutMs?: number): Promise<WatchEvent | undefined>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

export function watch(server: TestApiServer, path: string, o: CallOptions = {}): Promise<Watch> {
  return new Promise((resolve, reject) => {
    const req = open(server, 'GET', path, o);
    req.on('error', reject);
    req.on('response', (res) => {
      const events: WatchEvent[] = [];
      let taken = 0;
      let buf = '';
      let done = false;
      let wake: (() => void) | undefined;
      let endResolve!: () => void;
      const ended = new Promise<void>((r) => { endResolve = r; });
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim()) events.push(JSON.parse(line));
        }
        wake?.();
      });
      const finish = () => { done = true; wake?.(); endResolve(); };
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
      resolve({
        code: res.statusCode ?? 0,
        events,
        ended,
        async next(timeoutMs = 3000) {
          const deadline = Date.now() + timeoutMs;
          while (taken >= events.length && !done) {
            const left = deadline - Date.now();
            if (left <= 0) throw new Error(`no watch event within ${timeoutMs} ms (have ${events.length})`);
            await new Promise<void>((r) => {
              const t = setTimeout(r, left);
              wake = () => { clearTimeout(t); r(); };
            });
            wake = undefined;
          }
          return taken < events.length ? events[taken++] : undefined;
        },
        close() { req.destroy(); },
      });
    });
    req.end();
  });
}

export function podManifest(name: string, nodeName = 'n1', labels: Record<string, string> = {}): Record<string, unknown> {
  return {
    apiVersion: 'v1', kind: 'Pod', metadata: { name, labels },
    spec: { nodeName, containers: [{ name: 'c', image: 'busybox:1.36' }] },
  };
}

export function nodeManifest(name: string): Record<string, unknown> {
  return {
    apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'kubernetes.io/hostname': name } },
    status: {
      conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: '2026-01-01T00:00:00Z', lastTransitionTime: '2026-01-01T00:00:00Z' }],
      addresses: [{ type: 'InternalIP', address: '10.0.0.5' }, { type: 'Hostname', address: name }],
      nodeInfo: { kubeletVersion: 'v1.32.0-kts', osImage: 'Debian GNU/Linux 12', kernelVersion: '6.1.0', containerRuntimeVersion: 'containerd://1.7.0', operatingSystem: 'linux', architecture: 'amd64', machineID: 'm', systemUUID: 's', bootID: 'b', kubeProxyVersion: '' },
      capacity: { cpu: '2', memory: '4Gi', pods: '110' }, allocatable: { cpu: '2', memory: '4Gi', pods: '110' },
    },
  };
}
