// Ephemeral containers (kubectl debug; upstream: EphemeralContainers in the runtime manager):
// added to a running pod through the API's ephemeralcontainers subresource, started in the pod's
// sandbox once and never restarted, and with targetContainerName in the process namespace of
// that container (NamespaceMode TARGET, as upstream's generateLinuxContainerConfig sets it).

import type { EphemeralContainer, Pod } from '../api/types.js';
import type { ContainerConfig } from './cri-types.js';
import type { RuntimePodStatus } from './types.js';
import { KubeletError } from '../util/errors.js';
import { Reasons } from '../api/reasons.js';

/** The pod's ephemeral containers (none when the field is absent or not a list). */
export function ephemeralContainersOf(pod: Pod | undefined): EphemeralContainer[] {
  const list = pod?.spec.ephemeralContainers;
  return Array.isArray(list) ? list : [];
}

/**
 * Indexes of the ephemeral containers to start: those the runtime has never seen (an
 * ephemeral container runs once; an exited one stays exited).
 */
export function ephemeralContainersToStart(pod: Pod, status: RuntimePodStatus): number[] {
  const seen = new Set(status.containerStatuses.map((c) => c.name));
  const out: number[] = [];
  ephemeralContainersOf(pod).forEach((c, i) => {
    if (!seen.has(c.name)) out.push(i);
  });
  return out;
}

/** The runtime id of the container an ephemeral container targets; throws when it has none (upstream getTargetID). */
export function targetContainerID(c: EphemeralContainer, status: RuntimePodStatus): string | undefined {
  if (!c.targetContainerName) return undefined;
  // newest first: the target's current attempt
  const target = status.containerStatuses.find((s) => s.name === c.targetContainerName);
  if (!target) throw new KubeletError(Reasons.CreateContainerConfigError, `unable to find target container ${c.targetContainerName}`);
  return target.id;
}

/**
 * Puts the container in the target's process namespace when it would have its own (a pod
 * with shareProcessNamespace or hostPID keeps its mode), as upstream does.
 */
export function applyTargetNamespace(config: ContainerConfig, targetID: string | undefined): void {
  const ns = config.linux?.security_context?.namespace_options;
  if (!targetID || !ns || ns.pid !== 'CONTAINER') return;
  ns.pid = 'TARGET';
  ns.target_id = targetID;
}
