// Lifecycle hook handlers (upstream: lifecycle.handlerRunner): exec in the container, HTTP GET
// against the pod, or sleep. A failure is an Error whose message has upstream's shape.

import type { Container, LifecycleHandler, Pod } from '../api/types.js';
import type { CriClient } from './cri-client.js';
import { formatPod } from '../api/reasons.js';

export interface HookTarget {
  pod: Pod;
  container: Container | undefined;
  containerName: string;
  containerID: string;
  /** Where an httpGet without a host goes: the pod IP (host IP for host-network pods). */
  podIP: string;
}

function resolvePort(port: number | string, container: Container | undefined): number {
  if (typeof port === 'number') return port;
  if (/^\d+$/.test(port)) return Number(port);
  const named = container?.ports?.find((p) => p.name === port);
  if (!named) throw new Error(`couldn't find port: ${port} in ${container?.name ?? 'container'}`);
  return named.containerPort;
}

export class HandlerRunner {
  constructor(private readonly cri: CriClient) {}

  /** Runs a handler; `timeoutSeconds` bounds it (the grace period for preStop). */
  async run(t: HookTarget, handler: LifecycleHandler, timeoutSeconds: number): Promise<void> {
    if (handler.exec) {
      const cmd = handler.exec.command ?? [];
      let res;
      try {
        res = await this.cri.execSync(t.containerID, cmd, Math.max(1, Math.ceil(timeoutSeconds)));
      } catch (err) {
        throw new Error(`Exec lifecycle hook (${JSON.stringify(cmd)}) for Container "${t.containerName}" in Pod "${formatPod(t.pod)}" failed - error: ${(err as Error).message}, message: ""`);
      }
      if (res.exit_code !== 0) {
        const out = Buffer.from(res.stdout ?? []).toString() + Buffer.from(res.stderr ?? []).toString();
        throw new Error(`Exec lifecycle hook (${JSON.stringify(cmd)}) for Container "${t.containerName}" in Pod "${formatPod(t.pod)}" failed - error: command '${cmd.join(' ')}' exited with ${res.exit_code}: ${out}, message: ${JSON.stringify(out)}`);
      }
      return;
    }
    if (handler.httpGet) {
      const h = handler.httpGet;
      const host = h.host || t.podIP;
      const url = `${(h.scheme ?? 'HTTP').toLowerCase()}://${host.includes(':') ? `[${host}]` : host}:${resolvePort(h.port, t.container)}${h.path ?? '/'}`;
      const headers: Record<string, string> = { 'User-Agent': 'kube-lifecycle/1.30' };
      for (const hh of h.httpHeaders ?? []) headers[hh.name] = hh.value;
      try {
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(Math.max(1, timeoutSeconds) * 1000) });
        await res.arrayBuffer();
        if (res.status < 200 || res.status >= 400) throw new Error(`HTTP lifecycle hook (${h.path ?? '/'}) for Container "${t.containerName}" in Pod "${formatPod(t.pod)}" failed - error: Get "${url}": status ${res.status}`);
      } catch (err) {
        if ((err as Error).message.startsWith('HTTP lifecycle hook')) throw err;
        throw new Error(`HTTP lifecycle hook (${h.path ?? '/'}) for Container "${t.containerName}" in Pod "${formatPod(t.pod)}" failed - error: Get "${url}": ${(err as Error).message}`);
      }
      return;
    }
    if (handler.sleep) {
      await new Promise((r) => setTimeout(r, Math.min(handler.sleep!.seconds, timeoutSeconds) * 1000));
      return;
    }
    throw new Error(`invalid lifecycle handler for Container "${t.containerName}" in Pod "${formatPod(t.pod)}"`);
  }
}
