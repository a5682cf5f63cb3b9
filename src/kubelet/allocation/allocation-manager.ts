// The allocation manager (upstream pkg/kubelet/allocation, 1.33): the resources the kubelet
// admitted for each pod's containers (allocated) and what it last gave the runtime (actuated),
// both checkpointed under the root dir in upstream's files, and the pod's resize conditions:
//   - a pod is admitted with the resources its spec asks; those are its allocation;
//   - a resize (the spec asks for other resources than allocated) is admitted as a new pod would
//     be, against the allocations of the others: fits → allocated, PodResizeInProgress; does
//     not fit now → PodResizePending Deferred (tried again on the pod's next sync); can never
//     fit (more than the node's allocatable, a static pod) → PodResizePending Infeasible;
//   - the runtime always works on the allocated pod (updatePodFromAllocation).
// Only containers and restartable init containers (sidecars) are resizable and allocated.

import { join } from 'node:path';
import type { Container, Pod, ResourceList, ResourceRequirements } from '../../api/types.js';
import { parseQuantity } from '../../api/quantity.js';
import type { Logger } from '../../util/log.js';
import { ACTUATED_PODS_STATE_FILE, ALLOCATED_PODS_STATE_FILE, readCheckpoint, writeCheckpoint, type PodResourceAllocation } from './checkpoint.js';

export const PodResizePending = 'PodResizePending';
export const PodResizeInProgress = 'PodResizeInProgress';
export const PodReasonDeferred = 'Deferred';
export const PodReasonInfeasible = 'Infeasible';
export const PodReasonError = 'Error';
export const StaticPodResizeMessage = 'In-place resize of static-pods is not supported';

/** A resize admission's answer (upstream canResizePod): fits, or why not. */
export interface ResizeFit {
  fit: boolean;
  reason?: typeof PodReasonDeferred | typeof PodReasonInfeasible;
  message?: string;
}

/** What the status shows of a pod's resize. */
export interface ResizeConditionState {
  pending?: { reason: string; message: string; generation?: number; since: number };
  inProgress?: { error?: string; generation?: number; since: number };
}

export interface AllocationManagerOptions {
  rootDir: string;
  log: Logger;
  now: () => number;
}

function quantityKey(q: string | number): string {
  try {
    return parseQuantity(q).nanos.toString();
  } catch {
    return `?${String(q)}`;
  }
}

function sameList(a: ResourceList | undefined, b: ResourceList | undefined): boolean {
  const ka = Object.keys(a ?? {});
  const kb = Object.keys(b ?? {});
  if (ka.length !== kb.length) return false;
  return ka.every((k) => b?.[k] !== undefined && quantityKey(a![k]!) === quantityKey(b[k]!));
}

/** Semantic equality of two ResourceRequirements (quantities by amount, as apiequality.Semantic). */
export function sameRequirements(a: ResourceRequirements | undefined, b: ResourceRequirements | undefined): boolean {
  return sameList(a?.limits, b?.limits) && sameList(a?.requests, b?.requests);
}

function copyRequirements(r: ResourceRequirements | undefined): ResourceRequirements {
  const out: ResourceRequirements = {};
  if (r?.limits) out.limits = { ...r.limits };
  if (r?.requests) out.requests = { ...r.requests };
  return out;
}

/** The containers upstream allocates (IsResizableContainer): regular ones and sidecars. */
function resizableContainers(pod: Pod): Container[] {
  return [...(pod.spec.initContainers ?? []).filter((c) => c.restartPolicy === 'Always'), ...(pod.spec.containers ?? [])];
}

export class AllocationManager {
  private allocated: PodResourceAllocation = new Map();
  private actuated: PodResourceAllocation = new Map();
  private readonly conditions = new Map<string, ResizeConditionState>();
  private readonly dirty = { allocated: false, actuated: false };
  private writing: Promise<void> = Promise.resolve();
  readonly allocatedFile: string;
  readonly actuatedFile: string;

  constructor(private readonly opts: AllocationManagerOptions) {
    this.allocatedFile = join(opts.rootDir, ALLOCATED_PODS_STATE_FILE);
    this.actuatedFile = join(opts.rootDir, ACTUATED_PODS_STATE_FILE);
  }

  /** Reads both checkpoints; a corrupt one is logged, naming the file, and starts empty. */
  async load(): Promise<void> {
    const read = async (file: string): Promise<PodResourceAllocation> => {
      try {
        return await readCheckpoint(file);
      } catch (err) {
        this.opts.log.error('Cannot restore the pod resource checkpoint; starting without it', { path: file, err: (err as Error).message });
        return new Map();
      }
    };
    [this.allocated, this.actuated] = await Promise.all([read(this.allocatedFile), read(this.actuatedFile)]);
  }

  /** Writes the checkpoints that changed (one write at a time, in order). */
  flush(): Promise<void> {
    this.writing = this.writing.then(async () => {
      const jobs: Promise<void>[] = [];
      if (this.dirty.allocated) {
        this.dirty.allocated = false;
        jobs.push(writeCheckpoint(this.allocatedFile, this.allocated));
      }
      if (this.dirty.actuated) {
        this.dirty.actuated = false;
        jobs.push(writeCheckpoint(this.actuatedFile, this.actuated));
      }
      await Promise.all(jobs);
    }).catch((err) => this.opts.log.error('Failed to save the pod resource checkpoint', { err: (err as Error).message }));
    return this.writing;
  }

  getContainerAllocation(uid: string, name: string): ResourceRequirements | undefined {
    return this.allocated.get(uid)?.get(name);
  }

  getActuated(uid: string, name: string): ResourceRequirements | undefined {
    return this.actuated.get(uid)?.get(name);
  }

  isPodAllocated(uid: string): boolean {
    return this.allocated.has(uid);
  }

  /** The pod with its allocated resources where they differ from its spec (a copy then); `updated` says whether. */
  updatePodFromAllocation(pod: Pod): { pod: Pod; updated: boolean } {
    const alloc = this.allocated.get(pod.metadata.uid ?? '');
    if (!alloc) return { pod, updated: false };
    let updated = false;
    const map = (list: Container[] | undefined): Container[] | undefined => list?.map((c) => {
      const a = alloc.get(c.name);
      if (!a || sameRequirements(c.resources, a)) return c;
      updated = true;
      return { ...c, resources: copyRequirements(a) };
    });
    const containers = map(pod.spec.containers)!;
    const initContainers = map(pod.spec.initContainers);
    if (!updated) return { pod, updated: false };
    return { pod: { ...pod, spec: { ...pod.spec, containers, ...(initContainers ? { initContainers } : {}) } }, updated: true };
  }

  /** Checkpoints the pod's resources as allocated (admission, or an admitted resize). */
  setAllocated(pod: Pod): void {
    const m = new Map<string, ResourceRequirements>();
    for (const c of resizableContainers(pod)) m.set(c.name, copyRequirements(c.resources));
    this.allocated.set(pod.metadata.uid ?? '', m);
    this.dirty.allocated = true;
    void this.flush();
  }

  /** Records what the runtime was given for one container. */
  setActuated(uid: string, name: string, resources: ResourceRequirements): void {
    let m = this.actuated.get(uid);
    if (!m) this.actuated.set(uid, (m = new Map()));
    const prev = m.get(name);
    if (prev && sameRequirements(prev, resources)) return;
    m.set(name, copyRequirements(resources));
    this.dirty.actuated = true;
    void this.flush();
  }

  removePod(uid: string): void {
    this.conditions.delete(uid);
    if (this.allocated.delete(uid)) this.dirty.allocated = true;
    if (this.actuated.delete(uid)) this.dirty.actuated = true;
  }

  /** Forgets every pod not in `keep` (housekeeping); written with the next change. */
  removeOrphanedPods(keep: ReadonlySet<string>): void {
    for (const uid of [...this.allocated.keys(), ...this.actuated.keys(), ...this.conditions.keys()]) if (!keep.has(uid)) this.removePod(uid);
  }

  /**
   * A pod's resize (upstream handlePodResourcesResize): when its spec asks for other resources
   * than allocated, `canResize` decides; the pod returned carries what is allocated now.
   */
  handlePodResourcesResize(pod: Pod, canResize: (pod: Pod) => ResizeFit): Pod {
    const uid = pod.metadata.uid ?? '';
    const { pod: allocatedPod, updated } = this.updatePodFromAllocation(pod);
    const state = this.conditions.get(uid) ?? {};
    if (!updated) {
      if (state.pending) {
        delete state.pending;
        this.conditions.set(uid, state);
      }
      return pod;
    }
    const r = canResize(pod);
    const generation = pod.metadata.generation;
    if (r.fit) {
      this.setAllocated(pod);
      delete state.pending;
      state.inProgress = { generation, since: this.opts.now() };
      this.conditions.set(uid, state);
      this.opts.log.info('Pod resize allocated', { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, podUID: uid });
      return pod;
    }
    const reason = r.reason ?? PodReasonDeferred;
    const message = r.message ?? '';
    const prev = state.pending;
    if (!prev || prev.reason !== reason || prev.message !== message || prev.generation !== generation) {
      state.pending = { reason, message, generation, since: prev && prev.reason === reason ? prev.since : this.opts.now() };
      this.opts.log.info('Pod resize pending', { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, podUID: uid, reason, message });
    }
    this.conditions.set(uid, state);
    return allocatedPod;
  }

  /** The runtime's answer to an in-place resize: an error keeps it in progress with reason Error. */
  setResizeResult(uid: string, error: string | undefined): void {
    const state = this.conditions.get(uid) ?? {};
    if (error === undefined) {
      if (state.inProgress?.error !== undefined) delete state.inProgress.error;
    } else {
      state.inProgress = { ...(state.inProgress ?? { since: this.opts.now() }), error };
    }
    this.conditions.set(uid, state);
  }

  /** Clears the in-progress state once the runtime runs what is allocated. */
  resizeDone(uid: string): void {
    const state = this.conditions.get(uid);
    if (state?.inProgress && state.inProgress.error === undefined) delete state.inProgress;
  }

  /** Marks a resize in progress when the runtime does not run what is allocated (e.g. after a restart). */
  resizeStarted(uid: string, generation: number | undefined): void {
    const state = this.conditions.get(uid) ?? {};
    state.inProgress ??= { generation, since: this.opts.now() };
    this.conditions.set(uid, state);
  }

  resizeConditions(uid: string): ResizeConditionState {
    return this.conditions.get(uid) ?? {};
  }
}
