// The allocation manager joined to the kubelet's parts: admission of new pods with their
// allocation, the resize admission, the runtime's view of actuated resources and the status.

import type { Pod, PodStatus, ResourceRequirements } from '../../api/types.js';
import { isStaticPod } from '../../runtime/resources.js';
import { RESOURCES_HASH_ANNOTATION, resourcesHash } from '../../runtime/container-hash.js';
import type { RuntimeResizeOptions } from '../../runtime/runtime-manager.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../runtime/types.js';
import type { AdmissionNode, AdmitResult } from '../admission.js';
import type { AllocationManager } from './allocation-manager.js';
import { canResizePod } from './resize-admission.js';
import { applyResizeStatus } from './resize-status.js';

export interface ResizeWiringOptions {
  allocation: AllocationManager;
  admissionNode: () => AdmissionNode;
  admitPod: (pod: Pod, others: Pod[]) => AdmitResult;
  activePods: () => Pod[];
}

/**
 * What a container runs with when nothing was recorded for it: a container kubelet-ts started
 * before it recorded actuated resources carries the hash of the resources it was created with
 * (equal: the allocation; different: unknown, so the allocation is applied in place); one
 * started by another kubelet is taken to run its allocation.
 */
function fallbackActuated(pod: Pod, name: string, running: ContainerRuntimeStatus): ResourceRequirements | undefined {
  const c = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((x) => x.name === name);
  if (!c) return undefined;
  const recorded = running.annotations?.[RESOURCES_HASH_ANNOTATION];
  if (recorded !== undefined && recorded !== resourcesHash(c)) return {};
  return c.resources ?? {};
}

export function resizeHooks(o: ResizeWiringOptions) {
  const { allocation } = o;
  const allocatedOthers = (uid: string | undefined): Pod[] =>
    o.activePods().filter((p) => p.metadata.uid !== uid).map((p) => allocation.updatePodFromAllocation(p).pod);
  const runtime: Omit<RuntimeResizeOptions, 'podCgroup'> = {
    resizable: (pod) => !isStaticPod(pod),
    actuated: (pod, name, running) => allocation.getActuated(pod.metadata.uid ?? '', name) ?? fallbackActuated(pod, name, running),
    setActuated: (pod, name, res) => allocation.setActuated(pod.metadata.uid ?? '', name, res),
    onResizeResult: (pod, error) => allocation.setResizeResult(pod.metadata.uid ?? '', error),
  };
  const syncer = {
    handleResize: (pod: Pod): Pod => allocation.handlePodResourcesResize(pod, (p) =>
      canResizePod(p, isStaticPod(p), o.admissionNode(), () => o.admitPod(p, allocatedOthers(p.metadata.uid)))),
    applyStatus: (pod: Pod, status: PodStatus, rs: RuntimePodStatus): PodStatus => applyResizeStatus(pod, status, rs, allocation),
    resizeActive: (uid: string): boolean => allocation.resizeConditions(uid).inProgress !== undefined,
  };
  /** upstream AddPod: admitted with its allocation if it has one (a kubelet restart), which is then checkpointed. */
  const admitNewPod = (pod: Pod, others: Pod[]): AdmitResult => {
    const p = allocation.updatePodFromAllocation(pod).pod;
    const r = o.admitPod(p, others.map((x) => allocation.updatePodFromAllocation(x).pod));
    if (r.admit) allocation.setAllocated(p);
    return r;
  };
  return { runtime, syncer, admitNewPod };
}
