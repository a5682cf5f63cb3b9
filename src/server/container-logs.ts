// /containerLogs/{namespace}/{pod}/{container} (upstream: Server.getContainerLogs and
// Kubelet.GetKubeletContainerLogs): resolves the container instance from the pod's status
// (the last terminated one with `previous`), asks the runtime for its log path, and streams
// the CRI-format log (across its rotations) with upstream's options and error texts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Pod, PodStatus, ContainerStatus } from '../api/types.js';
import { LogOptionsError } from '../logs/errors.js';
import { parseContainerLogOptions } from '../logs/options.js';
import { readContainerLogs, type LogSink } from '../logs/reader.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import { ContainerLogStatusError } from './errors.js';

export interface ContainerLogsHost {
  clock: Clock;
  /** The desired pod of that namespace and name (the pod manager's). */
  getPodByName(namespace: string, name: string): Pod | undefined;
  /** The kubelet's latest status of the pod (status manager), else undefined. */
  getPodStatus(uid: string): PodStatus | undefined;
  /** The live log file of a container instance (the runtime's ContainerStatus log_path). */
  containerLogPath(containerID: string): Promise<string>;
  /** Whether the container instance still runs (a container the runtime no longer has does not). */
  isContainerRunning(containerID: string): Promise<boolean>;
}

/** The path's segments after the route's prefix, decoded (undefined when one is not valid). */
export function pathSegments(url: URL, prefix: string): string[] | undefined {
  if (!url.pathname.startsWith(prefix)) return undefined;
  try {
    return url.pathname.slice(prefix.length).split('/').map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

export function sendPlain(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function hasContainerSpec(pod: Pod, name: string): boolean {
  const spec = pod.spec as Pod['spec'] & { ephemeralContainers?: { name: string }[] };
  return [...(spec.containers ?? []), ...(spec.initContainers ?? []), ...(spec.ephemeralContainers ?? [])].some((c) => c.name === name);
}

/** `containerd://<id>` → `<id>`. */
export function runtimeContainerID(containerID: string): string {
  const i = containerID.indexOf('://');
  return i < 0 ? containerID : containerID.slice(i + 3);
}

/** Which container instance's log to read (upstream validateContainerLogStatus); throws with upstream's texts. */
export function containerIDForLogs(podName: string, status: PodStatus, containerName: string, previous: boolean): string {
  const all: ContainerStatus[] = [...(status.containerStatuses ?? []), ...(status.initContainerStatuses ?? []), ...(status.ephemeralContainerStatuses ?? [])];
  const cs = all.find((c) => c.name === containerName);
  const fail = (m: string): never => { throw new ContainerLogStatusError(containerName, podName, m); };
  if (!cs) return fail(`container ${JSON.stringify(containerName)} in pod ${JSON.stringify(podName)} is not available`);
  const last = cs.lastState?.terminated;
  const { waiting, running, terminated } = cs.state ?? {};
  if (previous) {
    if (!last?.containerID) return fail(`previous terminated container ${JSON.stringify(containerName)} in pod ${JSON.stringify(podName)} not found`);
    return last.containerID;
  }
  if (running) return cs.containerID ?? fail(`container ${JSON.stringify(containerName)} in pod ${JSON.stringify(podName)} is waiting to start - no logs yet`);
  if (terminated) {
    if (terminated.containerID) return terminated.containerID;
    if (last?.containerID) return last.containerID;
    return fail(`container ${JSON.stringify(containerName)} in pod ${JSON.stringify(podName)} is terminated`);
  }
  if (last) {
    if (!last.containerID) return fail(`container ${JSON.stringify(containerName)} in pod ${JSON.stringify(podName)} is terminated`);
    return last.containerID;
  }
  if (waiting) {
    const q = `container ${JSON.stringify(containerName)} in pod ${JSON.stringify(podName)} is waiting to start`;
    if (waiting.reason === 'ErrImagePull') return fail(`${q}: image can't be pulled`);
    if (waiting.reason === 'ImagePullBackOff') return fail(`${q}: trying and failing to pull image`);
    return fail(`${q}: ${waiting.reason ?? ''}`);
  }
  return fail(`container ${JSON.stringify(containerName)} in pod ${JSON.stringify(podName)} is waiting to start - no logs yet`);
}

/** A sink over an HTTP response that waits for the client to take what was written. */
function responseSink(res: ServerResponse): LogSink {
  return {
    write(chunk) {
      if (res.destroyed || res.writableEnded) return;
      if (res.write(chunk)) return;
      return new Promise<void>((resolve) => {
        const done = (): void => { res.off('drain', done); res.off('close', done); resolve(); };
        res.on('drain', done);
        res.on('close', done);
      });
    },
  };
}

/** The /containerLogs/ handler (GET). */
export function containerLogsHandler(host: ContainerLogsHost) {
  return async (_req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const segs = pathSegments(url, '/containerLogs/');
    if (!segs || segs.length !== 3) return sendPlain(res, 404, '404 page not found\n');
    const [namespace, podName, containerName] = segs as [string, string, string];
    if (!podName) return sendPlain(res, 400, '{"message": "Missing podID."}');
    if (!containerName) return sendPlain(res, 400, '{"message": "Missing container name."}');
    if (!namespace) return sendPlain(res, 400, '{"message": "Missing podNamespace."}');
    let opts;
    try {
      opts = parseContainerLogOptions(url.searchParams);
    } catch (err) {
      if (err instanceof LogOptionsError) return sendPlain(res, err.status, `${err.status === 400 ? 'Unable to decode query' : 'Invalid request'}: ${err.message}`);
      throw err;
    }
    const pod = host.getPodByName(namespace, podName);
    if (!pod) return sendPlain(res, 404, `pod ${JSON.stringify(podName)} does not exist`);
    if (!hasContainerSpec(pod, containerName)) return sendPlain(res, 404, `container ${JSON.stringify(containerName)} not found in pod ${JSON.stringify(podName)}`);
    const status = host.getPodStatus(pod.metadata.uid ?? '') ?? pod.status ?? {};
    let id: string;
    let logPath: string;
    try {
      id = runtimeContainerID(containerIDForLogs(podName, status, containerName, opts.previous));
      logPath = await host.containerLogPath(id);
    } catch (err) {
      return sendPlain(res, 400, errorMessage(err));
    }
    const abort = new AbortController();
    // the response closes when the client goes away (or when it is done): a follow ends there
    res.on('close', () => abort.abort());
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Transfer-Encoding': 'chunked', 'X-Content-Type-Options': 'nosniff' });
    res.flushHeaders();
    try {
      await readContainerLogs(logPath, opts, responseSink(res), {
        clock: host.clock,
        isRunning: () => host.isContainerRunning(id),
        signal: abort.signal,
      });
    } catch (err) {
      // the status is sent: the error goes into the body, as upstream's late WriteError does
      if (!res.destroyed) res.write(errorMessage(err));
    }
    res.end();
  };
}
