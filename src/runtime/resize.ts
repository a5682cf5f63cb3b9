// In-place pod vertical scaling in the runtime (upstream 1.33: kuberuntime's
// computePodResizeAction and doPodResizeAction). The pod given to the runtime carries its
// *allocated* resources (the allocation manager's); each running container's *actuated* ones
// (what the kubelet last gave the runtime, checkpointed) are compared with them:
//   - cpu limit, cpu request and memory limit are compared as the amounts the runtime gets
//     (millicores, bytes); requests at or below 2m and limits at or below 10m count as equal;
//   - a changed resource whose resizePolicy says RestartContainer restarts the container
//     ("Container <name> resize requires restart"); otherwise it is updated in place, decreases
//     ordered before increases;
//   - the pod cgroup and the containers are then updated per resource: limits growing, the pod
//     cgroup first; shrinking, the containers first; a pod memory limit below the pod's current
//     usage is refused ("aborting attempt to set pod memory limit less than current memory usage
//     for pod <name>") and the resize stays in progress with reason Error.

import type { Container, Pod, ResourceList, ResourceRequirements } from '../api/types.js';
import { parseQuantity } from '../api/quantity.js';
import { podCgroupResources } from './resources.js';
import type { ContainerRuntimeStatus } from './types.js';
import { KubeletError } from '../util/errors.js';

export type ResizeResource = 'cpu' | 'memory';

/** upstream cm.MinShares, compared with millicores as upstream does. */
const MIN_SHARES_MILLI = 2n;
/** upstream cm.MinMilliCPULimit: the smallest quota (1 ms per 100 ms). */
const MIN_MILLI_CPU_LIMIT = 10n;

export const RESIZE_POLICY_RESTART_CONTAINER = 'RestartContainer';

/** The amounts of a container's resources the runtime enforces (upstream containerResources). */
export interface ContainerResourceValues {
  cpuRequest: bigint;
  cpuLimit: bigint;
  memoryRequest: bigint;
  memoryLimit: bigint;
}

function amount(list: ResourceList | undefined, name: string, milli: boolean): bigint {
  const q = list?.[name];
  if (q === undefined || q === '') return 0n;
  try {
    const v = parseQuantity(q);
    return milli ? v.milliValueBig() : v.valueBig();
  } catch {
    return 0n;
  }
}

export function containerResourceValues(r: ResourceRequirements | undefined): ContainerResourceValues {
  return {
    cpuRequest: amount(r?.requests, 'cpu', true),
    cpuLimit: amount(r?.limits, 'cpu', true),
    memoryRequest: amount(r?.requests, 'memory', false),
    memoryLimit: amount(r?.limits, 'memory', false),
  };
}

function sameValues(a: ContainerResourceValues, b: ContainerResourceValues): boolean {
  return a.cpuRequest === b.cpuRequest && a.cpuLimit === b.cpuLimit && a.memoryRequest === b.memoryRequest && a.memoryLimit === b.memoryLimit;
}

/** A running container to update in place (upstream containerToUpdateInfo). */
export interface ContainerToUpdate {
  container: Container;
  /** CRI container id. */
  id: string;
  desired: ContainerResourceValues;
  current: ContainerResourceValues;
}

/** The in-place part of a pod's actions. */
export interface PodResizeActions {
  /** Per resource, the containers to update, decreases first. */
  containersToUpdate: Record<ResizeResource, ContainerToUpdate[]>;
  /** The pod cgroup must follow (a container of the pod is resized or restarted for a resize). */
  updatePodResources: boolean;
  /** Containers whose only change is their memory request: nothing to actuate, record it as actuated. */
  actuateOnly: Container[];
}

export function emptyResizeActions(): PodResizeActions {
  return { containersToUpdate: { cpu: [], memory: [] }, updatePodResources: false, actuateOnly: [] };
}

export function hasResizeWork(a: PodResizeActions | undefined): boolean {
  return a !== undefined && (a.updatePodResources || a.containersToUpdate.cpu.length > 0 || a.containersToUpdate.memory.length > 0 || a.actuateOnly.length > 0);
}

/** The resize policy for one resource: RestartContainer or not (the default: NotRequired / PreferNoRestart). */
export function restartRequiredFor(c: Container, resource: ResizeResource): boolean {
  return (c.resizePolicy ?? []).some((p) => p.resourceName === resource && p.restartPolicy === RESIZE_POLICY_RESTART_CONTAINER);
}

/**
 * Decides for one running container (upstream computePodResizeAction): 'keep' (nothing to do
 * or updated in place, recorded in `actions`) or 'restart' (its resize policy asks for it).
 */
export function computeContainerResizeAction(
  container: Container,
  running: ContainerRuntimeStatus,
  actuated: ResourceRequirements | undefined,
  actions: PodResizeActions,
): 'keep' | 'restart' {
  const desired = containerResourceValues(container.resources);
  const current = containerResourceValues(actuated);
  if (desired.cpuRequest <= MIN_SHARES_MILLI && current.cpuRequest <= MIN_SHARES_MILLI) desired.cpuRequest = current.cpuRequest;
  if (desired.cpuLimit <= MIN_MILLI_CPU_LIMIT && current.cpuLimit <= MIN_MILLI_CPU_LIMIT) desired.cpuLimit = current.cpuLimit;
  if (sameValues(desired, current)) return 'keep';

  const memLimit = desired.memoryLimit !== current.memoryLimit;
  const cpuLimit = desired.cpuLimit !== current.cpuLimit;
  const cpuRequest = desired.cpuRequest !== current.cpuRequest;
  if ((memLimit && restartRequiredFor(container, 'memory')) || ((cpuLimit || cpuRequest) && restartRequiredFor(container, 'cpu'))) {
    actions.updatePodResources = true;
    return 'restart';
  }
  const info: ContainerToUpdate = { container, id: running.id, desired, current };
  const mark = (r: ResizeResource, want: bigint, have: bigint): void => {
    // decreases before increases, so that a pod's containers never sum past its new limits
    if (want < have) actions.containersToUpdate[r].unshift(info);
    else actions.containersToUpdate[r].push(info);
  };
  if (memLimit) mark('memory', desired.memoryLimit, current.memoryLimit);
  if (cpuLimit) mark('cpu', desired.cpuLimit, current.cpuLimit);
  else if (cpuRequest) mark('cpu', desired.cpuRequest, current.cpuRequest);
  if (!memLimit && !cpuLimit && !cpuRequest) actions.actuateOnly.push(container);
  return 'keep';
}

/** The pod cgroup's values that a resize reads and writes (upstream GetPodCgroupConfig / SetPodCgroupConfig). */
export interface PodCgroupResizeConfig {
  /** CFS quota in µs (-1: none). */
  cpuQuota: number;
  cpuPeriod: number;
  cpuShares: number;
  /** Memory limit in bytes (a huge number or -1: none). */
  memoryLimit: number;
}

/** The pod cgroup operations a resize needs (the pod container manager gives them). */
export interface PodCgroupResizer {
  getPodCgroupConfig(pod: Pod): Promise<PodCgroupResizeConfig>;
  getPodCgroupMemoryUsage(pod: Pod): Promise<number>;
  setPodCgroupConfig(pod: Pod, values: Partial<PodCgroupResizeConfig>): Promise<void>;
}

export interface PodResizeDeps {
  podCgroup: PodCgroupResizer;
  /** UpdateContainerResources with the container's linux resources for `resources`. */
  updateContainerResources(pod: Pod, container: Container, containerID: string): Promise<void>;
  /** Records what the runtime was given for the container. */
  setActuated(pod: Pod, containerName: string, resources: ResourceRequirements): void;
}

function withoutZero(list: Record<string, string>): ResourceList | undefined {
  const out: ResourceList = {};
  for (const [k, v] of Object.entries(list)) if (v !== '0') out[k] = v;
  return Object.keys(out).length ? out : undefined;
}

/**
 * The container with resource `r` at its desired amounts and the other one at what it runs with
 * now (upstream updatePodContainerResources): one resource moves at a time.
 */
function containerForUpdate(info: ContainerToUpdate, r: ResizeResource): Container {
  const cpu = r === 'cpu' ? info.desired : info.current;
  const mem = r === 'memory' ? info.desired : info.current;
  const resources: ResourceRequirements = {};
  const limits = withoutZero({ cpu: `${cpu.cpuLimit}m`.replace(/^0m$/, '0'), memory: String(mem.memoryLimit) });
  const requests = withoutZero({ cpu: `${cpu.cpuRequest}m`.replace(/^0m$/, '0'), memory: String(mem.memoryRequest) });
  if (limits) resources.limits = limits;
  if (requests) resources.requests = requests;
  return { ...info.container, resources };
}

/** Does the in-place part (upstream doPodResizeAction). Throws with the reason the resize stays in progress. */
export async function doPodResizeAction(pod: Pod, actions: PodResizeActions, deps: PodResizeDeps): Promise<void> {
  const { podCgroup } = deps;
  for (const c of actions.actuateOnly) deps.setActuated(pod, c.name, c.resources ?? {});
  const { containersToUpdate, updatePodResources } = actions;
  if (!updatePodResources && containersToUpdate.cpu.length === 0 && containersToUpdate.memory.length === 0) return;
  const podRes = podCgroupResources(pod);

  const updateContainers = async (r: ResizeResource): Promise<void> => {
    for (const info of containersToUpdate[r]) {
      const c = containerForUpdate(info, r);
      await deps.updateContainerResources(pod, c, info.id);
      // the runtime now runs this resource at its desired amount
      if (r === 'cpu') {
        info.current.cpuLimit = info.desired.cpuLimit;
        info.current.cpuRequest = info.desired.cpuRequest;
      } else {
        info.current.memoryLimit = info.desired.memoryLimit;
        info.current.memoryRequest = info.desired.memoryRequest;
      }
      if (sameValues(info.current, info.desired)) deps.setActuated(pod, info.container.name, info.container.resources ?? {});
      else deps.setActuated(pod, info.container.name, containerForUpdate({ ...info, desired: info.current }, r).resources ?? {});
    }
  };

  // limits grow before requests, shrink after them, so requests never pass limits
  const resize = async (r: ResizeResource, curLimit: number, newLimit: number, curReq: number, newReq: number, set: (limit: boolean) => Promise<void>): Promise<void> => {
    if (newLimit > curLimit) await set(true);
    if (newReq > curReq) await set(false);
    if (containersToUpdate[r].length > 0) await updateContainers(r);
    if (newReq < curReq) await set(false);
    if (newLimit < curLimit) await set(true);
  };

  if (containersToUpdate.memory.length > 0 || updatePodResources) {
    const current = await podCgroup.getPodCgroupConfig(pod);
    const newLimit = podRes.memoryLimitBytes ?? current.memoryLimit;
    if (podRes.memoryLimitBytes !== undefined) {
      const usage = await podCgroup.getPodCgroupMemoryUsage(pod);
      if (usage >= podRes.memoryLimitBytes) {
        throw new KubeletError('ERR_POD_RESIZE', `aborting attempt to set pod memory limit less than current memory usage for pod ${pod.metadata.name ?? ''}`);
      }
    }
    await resize('memory', current.memoryLimit, newLimit, 0, 0, async () => {
      if (podRes.memoryLimitBytes !== undefined) await podCgroup.setPodCgroupConfig(pod, { memoryLimit: podRes.memoryLimitBytes });
    });
  }
  if (containersToUpdate.cpu.length > 0 || updatePodResources) {
    const current = await podCgroup.getPodCgroupConfig(pod);
    // no pod cpu limit: the pod's quota stays as it is
    const newQuota = podRes.cpuQuotaUs ?? current.cpuQuota;
    const newShares = podRes.cpuShares ?? current.cpuShares;
    await resize('cpu', current.cpuQuota, newQuota, current.cpuShares, newShares, async (limit) => {
      if (limit) {
        if (podRes.cpuQuotaUs !== undefined) await podCgroup.setPodCgroupConfig(pod, { cpuQuota: podRes.cpuQuotaUs, cpuPeriod: podRes.cpuPeriodUs ?? current.cpuPeriod });
      } else {
        await podCgroup.setPodCgroupConfig(pod, { cpuShares: newShares });
      }
    });
  }
}
