// Per-container status reads and the pure updates of a cached pod status they feed, so the
// evented PLEG refreshes the one container an event names instead of the whole pod. The
// conversions mirror the runtime manager's (CRI status → runtime view, ns → ms).

import type { CriClient } from '../runtime/cri-client.js';
import { isNotFound } from '../runtime/cri-errors.js';
import type * as cri from '../runtime/cri-types.js';
import * as labels from '../runtime/labels.js';
import type { ContainerRuntimeStatus, RuntimePodStatus, SandboxRuntimeStatus } from '../runtime/types.js';

function nsToMs(ns: string | undefined): number {
  if (!ns || ns === '0') return 0;
  return Number(BigInt(ns) / 1_000_000n);
}

function containerState(s: cri.ContainerState): ContainerRuntimeStatus['state'] {
  switch (s) {
    case 'CONTAINER_CREATED': return 'created';
    case 'CONTAINER_RUNNING': return 'running';
    case 'CONTAINER_EXITED': return 'exited';
    default: return 'unknown';
  }
}

export function toContainerRuntimeStatus(s: cri.ContainerStatus, runtimeName: string): ContainerRuntimeStatus {
  const info = labels.getContainerInfoFromLabels(s.labels, s.annotations);
  return {
    id: s.id,
    containerID: `${runtimeName}://${s.id}`,
    name: info.containerName || s.metadata?.name || '',
    state: containerState(s.state),
    createdAt: nsToMs(s.created_at),
    startedAt: nsToMs(s.started_at),
    finishedAt: nsToMs(s.finished_at),
    exitCode: s.exit_code,
    image: s.image?.image || '',
    imageRef: s.image_ref,
    hash: info.hash,
    restartCount: info.restartCount ?? s.metadata?.attempt ?? 0,
    reason: s.reason,
    message: s.message,
    terminationGracePeriodSeconds: info.podTerminationGracePeriod,
    labels: s.labels,
    annotations: s.annotations,
  };
}

export function toSandboxRuntimeStatus(st: cri.PodSandboxStatus): SandboxRuntimeStatus {
  return {
    id: st.id,
    state: st.state === 'SANDBOX_READY' ? 'ready' : 'notready',
    createdAt: nsToMs(st.created_at),
    attempt: st.metadata?.attempt ?? 0,
    ip: st.network?.ip ?? '',
    additionalIps: (st.network?.additional_ips ?? []).map((p) => p.ip),
    hostNetwork: st.linux?.namespaces?.options?.network === 'NODE',
    labels: st.labels,
    annotations: st.annotations,
  };
}

/** One container's or sandbox's status; null when the runtime no longer has it. */
export interface ContainerStatusSource {
  containerStatus(id: string): Promise<ContainerRuntimeStatus | null>;
  sandboxStatus(id: string): Promise<SandboxRuntimeStatus | null>;
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
