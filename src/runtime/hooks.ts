// Lifecycle hook handlers (upstream: lifecycle.handlerRunner): exec in the container, HTTP GET
// against the pod, or sleep. A failure is a LifecycleHookError whose message has upstream's shape.
// Every hook is bounded by its timeout and by the runner's signal (aborted at shutdown).

import type { Container, LifecycleHandler, Pod } from '../api/types.js';
import type { ExecSyncResponse } from './cri-types.js';
import { formatPod } from '../api/reasons.js';
import type { Clock } from '../util/clock.js';
import { LifecycleHookError, ShutdownError } from './errors.js';

export interface HookTarget {
  pod: Pod;
  container: Container | undefined;
  containerName: string;
  containerID: string;
  /** Where an httpGet without a host goes: the pod IP (host IP for host-network pods). */
  podIP: string;
}

/** The one CRI call hooks make. */
export interface HookCri {
  execSync(containerId: string, cmd: string[], timeoutSeconds: number, signal?: AbortSignal): Promise<ExecSyncResponse>;
}

function resolvePort(port: number | string, container: Container | undefined): number {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  const named = container?.ports?.find((p) => p.name === port);
  if (!named) throw new LifecycleHookError(`couldn't find port: ${port} in ${container?.name ?? 'container'}`);
  return named.containerPort;
}

/** Resolves after ms on the clock, or rejects with ShutdownError when the signal aborts. */
export function sleepOrAbort(clock: Clock, ms: number, signal: AbortSignal | undefined, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new ShutdownError(what));
    const onAbort = (): void => {
      timer.cancel();
      reject(new ShutdownError(what));
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** An AbortSignal that fires after ms on the clock or when parent fires; dispose() frees the timer. */
function deadlineSignal(clock: Clock, ms: number, parent: AbortSignal | undefined): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const timer = clock.setTimeout(() => ac.abort(new Error(`timed out after ${ms}ms`)), ms);
  const onAbort = (): void => ac.abort(parent!.reason);
  if (parent?.aborted) ac.abort(parent.reason);
  else parent?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: ac.signal,
    dispose: () => {
      timer.cancel();
      parent?.removeEventListener('abort', onAbort);
    },
  };
}

export interface HandlerRunnerOptions {
  cri: HookCri;
  clock: Clock;
  /** Aborted at shutdown: running hooks are abandoned. */
  signal?: AbortSignal;
}

export class HandlerRunner {
  constructor(private readonly opts: HandlerRunnerOptions) {}

  /** Runs a handler; `timeoutSeconds` bounds it (the grace period for preStop). */
  async run(t: HookTarget, handler: LifecycleHandler, timeoutSeconds: number): Promise<void> {
    const { clock, signal } = this.opts;
    const pod = formatPod(t.pod);
    if (handler.exec) {
      const cmd = handler.exec.command ?? [];
      let res;
      try {
        res = await this.opts.cri.execSync(t.containerID, cmd, Math.max(1, Math.ceil(timeoutSeconds)), signal);
      } catch (err) {
        throw new LifecycleHookError(`Exec lifecycle hook (${JSON.stringify(cmd)}) for Container "${t.containerName}" in Pod "${pod}" failed - error: ${(err as Error).message}, message: ""`, { cause: err });
      }
      if (res.exit_code !== 0) {
        const out = Buffer.from(res.stdout ?? []).toString() + Buffer.from(res.stderr ?? []).toString();
        throw new LifecycleHookError(`Exec lifecycle hook (${JSON.stringify(cmd)}) for Container "${t.containerName}" in Pod "${pod}" failed - error: command '${cmd.join(' ')}' exited with ${res.exit_code}: ${out}, message: ${JSON.stringify(out)}`);
      }
      return;
    }
    if (handler.httpGet) {
      const h = handler.httpGet;
      const host = h.host || t.podIP;
      const url = `${(h.scheme ?? 'HTTP').toLowerCase()}://${host.includes(':') ? `[${host}]` : host}:${resolvePort(h.port, t.container)}${h.path ?? '/'}`;
      const headers: Record<string, string> = { 'User-Agent': 'kube-lifecycle/1.30' };
      for (const hh of h.httpHeaders ?? []) headers[hh.name] = hh.value;
      const deadline = deadlineSignal(clock, Math.max(1, timeoutSeconds) * 1000, signal);
      let status: number;
      try {
        const res = await fetch(url, { headers, signal: deadline.signal });
        await res.arrayBuffer();
        status = res.status;
      } catch (err) {
        const why = deadline.signal.reason instanceof Error ? deadline.signal.reason.message : (err as Error).message;
        throw new LifecycleHookError(`HTTP lifecycle hook (${h.path ?? '/'}) for Container "${t.containerName}" in Pod "${pod}" failed - error: Get "${url}": ${why}`, { cause: err });
      } finally {
        deadline.dispose();
      }
      if (status < 200 || status >= 400) throw new LifecycleHookError(`HTTP lifecycle hook (${h.path ?? '/'}) for Container "${t.containerName}" in Pod "${pod}" failed - error: Get "${url}": status ${status}`);
      return;
    }
    if (handler.sleep) {
      await sleepOrAbort(clock, Math.min(handler.sleep.seconds, timeoutSeconds) * 1000, signal, `sleep lifecycle hook for Container "${t.containerName}" in Pod "${pod}"`);
      return;
    }
    throw new LifecycleHookError(`invalid lifecycle handler for Container "${t.containerName}" in Pod "${pod}"`);
  }
}
