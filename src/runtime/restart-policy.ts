// The restart policy (upstream: kubecontainer.ShouldContainerBeRestarted): whether the next
// sync starts a container again. computePodActions decides with it and the status generator
// reports waiting reasons with it, so it lives beside the pod actions.

import type { Container, Pod } from '../api/types.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from './types.js';

/** The newest attempt of a container (upstream PodStatus.FindContainerStatusByName). */
export function latestAttempt(runtime: RuntimePodStatus | undefined, name: string): ContainerRuntimeStatus | undefined {
  let best: ContainerRuntimeStatus | undefined;
  for (const c of runtime?.containerStatuses ?? []) {
    if (c.name === name && (best === undefined || c.createdAt > best.createdAt)) best = c;
  }
  return best;
}

/** Upstream ShouldContainerBeRestarted: would the next sync start this container again? */
export function shouldContainerBeRestarted(container: Container, pod: Pod, runtime: RuntimePodStatus | undefined): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  const s = latestAttempt(runtime, container.name);
  if (!s) return true;
  if (s.state === 'running') return false;
  if (s.state === 'unknown' || s.state === 'created') return true;
  const policy = pod.spec.restartPolicy ?? 'Always';
  if (policy === 'Never') return false;
  if (policy === 'OnFailure' && s.exitCode === 0) return false;
  return true;
}
