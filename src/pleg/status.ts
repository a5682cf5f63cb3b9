// Per-container status reads and the pure updates of a cached pod status they feed, so the
// evented PLEG refreshes the one container an event names instead of the whole pod. The
// conversions mirror the runtime manager's (CRI status → runtime view, ns → ms).

import type { CriClient } from '../runtime/cri-client.js';
import { isNotFound } from '../runtime/cri-errors.js';
import type * as cri from '../runtime/cri-types.js';
import type { ContainerRuntimeStatus, RuntimePodStatus, SandboxRuntimeStatus } from '../runtime/types.js';
import { toContainerRuntimeStatus, toSandboxRuntimeStatus } from '../runtime/cri-status.js';

export { toContainerRuntimeStatus, toSandboxRuntimeStatus };

/** One container's or sandbox's status; null when the runtime no longer has it. */
export interface ContainerStatusSource {
  containerStatus(id: string): Promise<ContainerRuntimeStatus | null>;
  sandboxStatus(id: string): Promise<SandboxRuntimeStatus | null>;
  /**
   * The sandbox's status and, from a runtime that sends them (cri-api 0.27+ containers_statuses
   * with a timestamp), its containers' statuses in the same call; null when the sandbox is gone.
   */
  sandboxStatusWithContainers?(id: string): Promise<{ sandbox: SandboxRuntimeStatus; containers?: ContainerRuntimeStatus[] } | null>;
}

export class CriStatusReader implements ContainerStatusSource {
  constructor(
    private readonly cri: Pick<CriClient, 'containerStatus' | 'podSandboxStatus'>,
    private readonly runtimeName = 'containerd',
  ) {}

  async containerStatus(id: string): Promise<ContainerRuntimeStatus | null> {
    try {
      const res = await this.cri.containerStatus(id);
      return res.status ? toContainerRuntimeStatus(res.status, this.runtimeName) : null;
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async sandboxStatus(id: string): Promise<SandboxRuntimeStatus | null> {
    try {
      const res = await this.cri.podSandboxStatus(id);
      return res.status ? toSandboxRuntimeStatus(res.status) : null;
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }
}

/** Pod IPs from the newest ready sandbox (statuses are newest first). */
export function podIPs(sandboxes: readonly SandboxRuntimeStatus[]): string[] {
  const ready = sandboxes.find((s) => s.state === 'ready');
  return ready && ready.ip ? [ready.ip, ...ready.additionalIps] : [];
}

/**
 * upstream getPodIPs: a status read after the network was torn down keeps the IPs the cache
 * had, unless a sandbox is ready (then the new answer stands).
 */
export function preservePodIPs(status: RuntimePodStatus, previous: RuntimePodStatus | undefined): RuntimePodStatus {
  if (status.ips.length || !previous?.ips.length) return status;
  if (status.sandboxStatuses.some((s) => s.state === 'ready')) return status;
  return { ...status, ips: previous.ips };
}

/** The pod status with one container's status replaced (or added), newest first. */
export function withContainerStatus(prev: RuntimePodStatus, cs: ContainerRuntimeStatus, timestamp: number): RuntimePodStatus {
  const containerStatuses = prev.containerStatuses.filter((c) => c.id !== cs.id);
  containerStatuses.push(cs);
  containerStatuses.sort((a, b) => b.createdAt - a.createdAt);
  return { ...prev, containerStatuses, timestamp };
}

export function withoutContainer(prev: RuntimePodStatus, id: string, timestamp: number): RuntimePodStatus {
  return { ...prev, containerStatuses: prev.containerStatuses.filter((c) => c.id !== id), timestamp };
}

export function withSandboxStatus(prev: RuntimePodStatus, ss: SandboxRuntimeStatus, timestamp: number): RuntimePodStatus {
  const sandboxStatuses = prev.sandboxStatuses.filter((s) => s.id !== ss.id);
  sandboxStatuses.push(ss);
  sandboxStatuses.sort((a, b) => b.createdAt - a.createdAt || b.attempt - a.attempt);
  return { ...prev, sandboxStatuses, ips: podIPs(sandboxStatuses), timestamp };
}

export function withoutSandbox(prev: RuntimePodStatus, id: string, timestamp: number): RuntimePodStatus {
  const sandboxStatuses = prev.sandboxStatuses.filter((s) => s.id !== id);
  return { ...prev, sandboxStatuses, ips: podIPs(sandboxStatuses), timestamp };
}
