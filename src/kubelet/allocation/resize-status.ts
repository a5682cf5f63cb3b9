// What a pod's status shows of in-place resize (upstream 1.33 generateAPIPodStatus and
// convertContainerStatusResources):
//   - containerStatuses[].allocatedResources: the allocated requests;
//   - containerStatuses[].resources: for a running container, cpu limit and request and memory
//     limit as the runtime reports them (else what the kubelet last gave it), memory request
//     and other resources as allocated; for one not running, the allocation;
//   - the PodResizePending condition (reason Deferred or Infeasible, with the message) while a
//     resize waits, PodResizeInProgress while the runtime does not yet run what is allocated
//     (reason Error with the message when actuating failed); each with its observedGeneration.

import type { ContainerStatus, Pod, PodCondition, PodStatus, ResourceList, ResourceRequirements } from '../../api/types.js';
import { parseQuantity, Quantity } from '../../api/quantity.js';
import { containerResourceValues } from '../../runtime/resize.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../runtime/types.js';
import { PodReasonError, PodResizeInProgress, PodResizePending, type AllocationManager } from './allocation-manager.js';

function toRFC3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function milliOf(q: string | number | undefined): bigint | undefined {
  if (q === undefined) return undefined;
  try {
    return parseQuantity(q).milliValueBig();
  } catch {
    return undefined;
  }
}

/** A reported amount, spelled as allocated when it is that amount. */
function spell(milli: bigint, allocated: string | number | undefined, binary: boolean): string | number {
  if (allocated !== undefined && milliOf(allocated) === milli) return allocated;
  return binary ? Quantity.fromValue(milli / 1000n, 'BinarySI').toString() : Quantity.fromMilli(milli).toString();
}

/** upstream's running-container resources: the runtime's figures where it gives them, else the actuated ones. */
function actualResources(alloc: ResourceRequirements, actuated: ResourceRequirements | undefined, running: ContainerRuntimeStatus): ResourceRequirements {
  const r = running.resources;
  const act = actuated ?? alloc;
  const out: ResourceRequirements = {};
  if (alloc.limits) {
    const limits: ResourceList = { ...alloc.limits };
    delete limits.cpu;
    delete limits.memory;
    if (r && r.cpuPeriod > 0 && r.cpuQuota > 0) limits.cpu = spell(BigInt(r.cpuQuota) * 1000n / BigInt(r.cpuPeriod), alloc.limits.cpu, false);
    else if (act.limits?.cpu !== undefined) limits.cpu = act.limits.cpu;
    if (r && r.memoryLimit > 0) limits.memory = spell(BigInt(r.memoryLimit) * 1000n, alloc.limits.memory, true);
    else if (act.limits?.memory !== undefined) limits.memory = act.limits.memory;
    out.limits = limits;
  }
  if (alloc.requests) {
    const requests: ResourceList = { ...alloc.requests };
    delete requests.cpu;
    if (r && r.cpuShares >= 2) {
      // shares back to millicores, rounded up (upstream sharesToMilliCPU)
      const milli = BigInt(Math.ceil((r.cpuShares * 1000) / 1024));
      requests.cpu = spell(milli, alloc.requests.cpu, false);
    } else if (act.requests?.cpu !== undefined) requests.cpu = act.requests.cpu;
    out.requests = requests;
  }
  return out;
}

/** True when the runtime does not run what is allocated (compared as computePodResizeAction compares). */
export function actuationPending(alloc: ResourceRequirements, actuated: ResourceRequirements | undefined): boolean {
  if (!actuated) return false;
  const a = containerResourceValues(alloc);
  const b = containerResourceValues(actuated);
  const cpuReq = !(a.cpuRequest <= 2n && b.cpuRequest <= 2n) && a.cpuRequest !== b.cpuRequest;
  const cpuLim = !(a.cpuLimit <= 10n && b.cpuLimit <= 10n) && a.cpuLimit !== b.cpuLimit;
  return cpuReq || cpuLim || a.memoryLimit !== b.memoryLimit || a.memoryRequest !== b.memoryRequest;
}

function withResources(uid: string, s: ContainerStatus, am: AllocationManager, running: ContainerRuntimeStatus | undefined): ContainerStatus {
  const alloc = am.getContainerAllocation(uid, s.name);
  if (!alloc) return s;
  const out: ContainerStatus = { ...s };
  if (alloc.requests && Object.keys(alloc.requests).length) out.allocatedResources = { ...alloc.requests };
  const isRunning = s.state.running !== undefined && running?.state === 'running';
  const res = isRunning ? actualResources(alloc, am.getActuated(uid, s.name), running!) : { ...(alloc.limits ? { limits: { ...alloc.limits } } : {}), ...(alloc.requests ? { requests: { ...alloc.requests } } : {}) };
  if (res.limits || res.requests) out.resources = res;
  return out;
}

/** Adds the resize fields and conditions to a generated status; returns a new status. */
export function applyResizeStatus(pod: Pod, status: PodStatus, rs: RuntimePodStatus | undefined, am: AllocationManager): PodStatus {
  const uid = pod.metadata.uid ?? '';
  const latest = new Map<string, ContainerRuntimeStatus>();
  for (const c of rs?.containerStatuses ?? []) if (!latest.has(c.name)) latest.set(c.name, c);
  // in progress while a running container does not run its allocation
  let pending = false;
  for (const [name, c] of latest) {
    if (c.state !== 'running') continue;
    const alloc = am.getContainerAllocation(uid, name);
    if (alloc && actuationPending(alloc, am.getActuated(uid, name))) pending = true;
  }
  if (pending) am.resizeStarted(uid, pod.metadata.generation);
  else am.resizeDone(uid);

  const out: PodStatus = { ...status };
  if (status.containerStatuses) out.containerStatuses = status.containerStatuses.map((s) => withResources(uid, s, am, latest.get(s.name)));
  if (status.initContainerStatuses) out.initContainerStatuses = status.initContainerStatuses.map((s) => withResources(uid, s, am, latest.get(s.name)));

  const state = am.resizeConditions(uid);
  const conditions: PodCondition[] = (status.conditions ?? []).filter((c) => c.type !== PodResizePending && c.type !== PodResizeInProgress);
  if (state.pending) {
    const c: PodCondition = { type: PodResizePending, status: 'True', lastProbeTime: null, lastTransitionTime: toRFC3339(state.pending.since), reason: state.pending.reason, message: state.pending.message };
    if (state.pending.generation !== undefined) c.observedGeneration = state.pending.generation;
    conditions.push(c);
  }
  if (state.inProgress) {
    const c: PodCondition = { type: PodResizeInProgress, status: 'True', lastProbeTime: null, lastTransitionTime: toRFC3339(state.inProgress.since) };
    if (state.inProgress.error !== undefined) {
      c.reason = PodReasonError;
      c.message = state.inProgress.error;
    }
    if (state.inProgress.generation !== undefined) c.observedGeneration = state.inProgress.generation;
    conditions.push(c);
  }
  out.conditions = conditions;
  return out;
}
