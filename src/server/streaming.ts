// /exec, /attach, /portForward and /run (upstream: Server.getExec/getAttach/getPortForward/getRun):
// each asks the runtime (CRI Exec/Attach/PortForward/ExecSync) for the session, then proxies
// the client's upgraded connection to the runtime's streaming server URL (stream-proxy.ts).
// Handlers come in the server's two shapes: `(req, res, url)` for a plain request and
// `upgrade(req, socket, head, url)` for an Upgrade request.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { CriError } from '../runtime/cri-errors.js';
import type { AttachRequest, ExecRequest, ExecSyncResponse, PortForwardRequest } from '../runtime/cri-types.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { pathSegments, sendPlain } from './container-logs.js';
import { StreamingRequestError } from './errors.js';
import { proxyUpgrade, writeRawError } from './stream-proxy.js';

export interface StreamingHost {
  clock: Clock;
  log: Logger;
  /** streamingConnectionIdleTimeout (ms). */
  streamingConnectionIdleTimeoutMs: number;
  getPodByName(namespace: string, name: string): Pod | undefined;
  /** The runtime id of the pod's running container of that name (upstream findContainer), undefined when none runs. */
  findRunningContainer(pod: Pod, containerName: string): string | undefined;
  /** The pod's ready sandbox (upstream: the runtime pod's first sandbox), undefined when none. */
  podSandboxID(pod: Pod): Promise<string | undefined>;
  cri: {
    exec(req: ExecRequest): Promise<string>;
    attach(req: AttachRequest): Promise<string>;
    portForward(req: PortForwardRequest): Promise<string>;
    execSync(containerId: string, cmd: string[], timeoutSeconds: number): Promise<ExecSyncResponse>;
  };
}

export interface StreamOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

/** upstream remotecommand NewOptions: each stream is on when its parameter is "1"; tty drops stderr. */
export function parseStreamOptions(query: URLSearchParams): StreamOptions {
  const on = (k: string): boolean => query.get(k) === '1';
  const o = { stdin: on('input') || on('stdin'), stdout: on('output') || on('stdout'), stderr: on('error') || on('stderr'), tty: on('tty') };
  if (o.tty && o.stderr) o.stderr = false;
  if (!o.stdin && !o.stdout && !o.stderr) throw new StreamingRequestError(400, 'you must specify at least 1 of stdin, stdout, stderr');
  return o;
}

export function isWebSocketRequest(req: IncomingMessage): boolean {
  const conn = String(req.headers.connection ?? '').toLowerCase().split(',').map((s) => s.trim());
  return conn.includes('upgrade') && String(req.headers.upgrade ?? '').toLowerCase() === 'websocket';
}

/** upstream portforward NewV4Options: WebSocket clients name their ports in the query; SPDY ones per stream. */
export function parsePortForwardPorts(req: IncomingMessage, query: URLSearchParams): number[] {
  if (!isWebSocketRequest(req)) return [];
  const raw = query.getAll('port');
  if (raw.length === 0) throw new StreamingRequestError(400, 'query parameter "port" is required');
  return raw.map((p) => {
    const n = /^\d+$/.test(p) ? Number(p) : NaN;
    if (!Number.isInteger(n) || n > 65535) throw new StreamingRequestError(400, `unable to parse "${p}" as a port: invalid syntax`);
    if (n === 0) throw new StreamingRequestError(400, `port "${p}" must be > 0`);
    return n;
  });
}

/** A runtime error as upstream's streaming.WriteError answers it: NotFound 404, ResourceExhausted 429, else 500. */
function runtimeErrorStatus(err: unknown): { status: number; text: string } {
  if (err instanceof StreamingRequestError) return { status: err.status, text: err.message };
  if (err instanceof CriError) {
    if (err.grpcCode === 5) return { status: 404, text: err.details };
    if (err.grpcCode === 8) return { status: 429, text: err.details };
    return { status: 500, text: err.details || err.message };
  }
  return { status: 500, text: errorMessage(err) };
}

const REASONS: Record<number, string> = { 400: 'Bad Request', 404: 'Not Found', 429: 'Too Many Requests', 500: 'Internal Server Error' };

type Kind = 'exec' | 'attach' | 'portForward';

/** The path's parameters: exec/attach {ns}/{pod}[/{uid}]/{container}; portForward {ns}/{pod}[/{uid}]. */
function routeParams(kind: Kind | 'run', url: URL): { namespace: string; pod: string; uid: string; container: string } | undefined {
  const segs = pathSegments(url, `/${kind}/`);
  if (!segs || segs.some((s) => s === '')) return undefined;
  if (kind === 'portForward') {
    if (segs.length === 2) return { namespace: segs[0]!, pod: segs[1]!, uid: '', container: '' };
    if (segs.length === 3) return { namespace: segs[0]!, pod: segs[1]!, uid: segs[2]!, container: '' };
    return undefined;
  }
  if (segs.length === 3) return { namespace: segs[0]!, pod: segs[1]!, uid: '', container: segs[2]! };
  if (segs.length === 4) return { namespace: segs[0]!, pod: segs[1]!, uid: segs[2]!, container: segs[3]! };
  return undefined;
}

function containerIDOf(host: StreamingHost, pod: Pod, uid: string, container: string): string {
  // a uid in the path must name this pod (upstream FindPod by uid)
  const id = uid && uid !== pod.metadata.uid ? undefined : host.findRunningContainer(pod, container);
  if (!id) throw new StreamingRequestError(500, `container not found (${JSON.stringify(container)})`);
  return id;
}

/** Asks the runtime for the session's URL; throws StreamingRequestError/CriError for the answer. */
async function sessionURL(host: StreamingHost, kind: Kind, req: IncomingMessage, url: URL): Promise<URL> {
  const p = routeParams(kind, url);
  if (!p) throw new StreamingRequestError(404, '404 page not found\n');
  const q = url.searchParams;
  if (kind === 'portForward') {
    const ports = parsePortForwardPorts(req, q);
    const pod = host.getPodByName(p.namespace, p.pod);
    if (!pod) throw new StreamingRequestError(404, 'pod does not exist');
    if (p.uid && pod.metadata.uid !== p.uid) throw new StreamingRequestError(404, 'pod not found');
    const sandbox = await host.podSandboxID(pod);
    if (!sandbox) throw new StreamingRequestError(500, `pod not found (${JSON.stringify(pod.metadata.uid ?? '')})`);
    return new URL(await host.cri.portForward({ pod_sandbox_id: sandbox, port: ports }));
  }
  const opts = parseStreamOptions(q);
  const pod = host.getPodByName(p.namespace, p.pod);
  if (!pod) throw new StreamingRequestError(404, 'pod does not exist');
  const id = containerIDOf(host, pod, p.uid, p.container);
  if (kind === 'exec') {
    return new URL(await host.cri.exec({ container_id: id, cmd: q.getAll('command'), tty: opts.tty, stdin: opts.stdin, stdout: opts.stdout, stderr: opts.stderr }));
  }
  // attach: the TTY is the container's, fixed when it started (upstream reads it from the spec)
  const spec = [...pod.spec.containers, ...(pod.spec.initContainers ?? []), ...(pod.spec.ephemeralContainers ?? [])].find((c) => c.name === p.container);
  if (!spec) throw new StreamingRequestError(500, `container not found (${JSON.stringify(p.container)})`);
  const tty = Boolean((spec as { tty?: boolean }).tty);
  return new URL(await host.cri.attach({ container_id: id, stdin: opts.stdin, tty, stdout: opts.stdout, stderr: opts.stderr && !tty }));
}

export interface StreamingRoute {
  /** A request without Upgrade: the session is made, then refused as upstream does. */
  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void>;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, url: URL): Promise<void>;
  readonly methods: readonly string[];
}

function streamingRoute(host: StreamingHost, kind: Kind): StreamingRoute {
  return {
    methods: ['GET', 'POST'],
    async handle(req, res, url) {
      try {
        await sessionURL(host, kind, req, url);
      } catch (err) {
        const { status, text } = runtimeErrorStatus(err);
        return sendPlain(res, status, text);
      }
      // upstream's proxy requires an upgrade; its responder answers the refusal with a 500
      sendPlain(res, 500, 'Upgrade request required\n');
    },
    async upgrade(req, socket, head, url) {
      socket.on('error', () => undefined);
      let target: URL;
      try {
        target = await sessionURL(host, kind, req, url);
      } catch (err) {
        const { status, text } = runtimeErrorStatus(err);
        host.log.v(2).info('Streaming request refused', { kind, path: url.pathname, status, err: text });
        return writeRawError(socket, status, REASONS[status] ?? 'Error', text);
      }
      host.log.v(4).info('Proxying streaming request', { kind, path: url.pathname, target: `${target.host}${target.pathname}` });
      await proxyUpgrade(req, socket, head, target, { clock: host.clock, log: host.log, idleTimeoutMs: host.streamingConnectionIdleTimeoutMs });
    },
  };
}

export function execRoute(host: StreamingHost): StreamingRoute {
  return streamingRoute(host, 'exec');
}

export function attachRoute(host: StreamingHost): StreamingRoute {
  return streamingRoute(host, 'attach');
}

export function portForwardRoute(host: StreamingHost): StreamingRoute {
  return streamingRoute(host, 'portForward');
}

/** POST /run/{ns}/{pod}[/{uid}]/{container}?cmd=...: runs the command (ExecSync) and answers its output. */
export function runHandler(host: StreamingHost) {
  return async (_req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const p = routeParams('run', url);
    if (!p) return sendPlain(res, 404, '404 page not found\n');
    const pod = host.getPodByName(p.namespace, p.pod);
    if (!pod) return sendPlain(res, 404, 'pod does not exist');
    // upstream's legacy parameter: one string, split on spaces
    const cmd = (url.searchParams.get('cmd') ?? '').split(' ');
    let out: ExecSyncResponse;
    try {
      const id = containerIDOf(host, pod, p.uid, p.container);
      out = await host.cri.execSync(id, cmd, 0);
    } catch (err) {
      const { status, text } = runtimeErrorStatus(err);
      host.log.v(2).info('Run in container failed', { pod: podFullName(pod), container: p.container, err: text });
      return sendPlain(res, status, text);
    }
    const stdout = Buffer.from(out.stdout ?? []);
    const stderr = Buffer.from(out.stderr ?? []);
    if (out.exit_code !== 0) {
      return sendPlain(res, 500, `command '${cmd.join(' ')}' exited with ${out.exit_code}: ${stderr.toString()}`);
    }
    const data = Buffer.concat([stdout, stderr]);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': data.length });
    res.end(data);
  };
}
