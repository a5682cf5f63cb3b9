// CRI statuses → the runtime's view of a pod (src/runtime/types.ts): the one conversion the
// runtime manager and the PLEG share. Nanosecond timestamps become milliseconds here.

import type * as cri from './cri-types.js';
import * as labels from './labels.js';
import type { ContainerRuntimeStatus, SandboxRuntimeStatus } from './types.js';

export function nsToMs(ns: string | number | undefined): number {
  if (ns === undefined || ns === '' || ns === '0' || ns === 0) return 0;
  return Number(BigInt(ns) / 1_000_000n);
}

export function containerState(s: cri.ContainerState): ContainerRuntimeStatus['state'] {
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
    preStopHandler: info.preStopHandler,
    labels: s.labels,
    annotations: s.annotations,
    ...(s.resources?.linux ? { resources: linuxResourcesOf(s.resources.linux) } : {}),
  };
}

function linuxResourcesOf(l: cri.LinuxContainerResources): NonNullable<ContainerRuntimeStatus['resources']> {
  return { cpuQuota: Number(l.cpu_quota), cpuPeriod: Number(l.cpu_period), cpuShares: Number(l.cpu_shares), memoryLimit: Number(l.memory_limit_in_bytes) };
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
