// Container garbage collection (upstream: kuberuntime's containerGC) for the pods kubelet-ts
// runs: per (pod, container name) keep `maxPerPodContainer` dead attempts, and never the
// attempt just before the newest one (lastState and the rebuilt restart backoff read it);
// remove the older ones.

import type { ContainerRuntimeStatus, RuntimePodStatus } from '../runtime/types.js';

/** upstream's default MaxPerPodContainer. */
export const DEFAULT_MAX_PER_POD_CONTAINER = 1;

/** Dead containers of the pod beyond the newest `keep` per container name. */
export function evictableContainers(status: RuntimePodStatus, keep = DEFAULT_MAX_PER_POD_CONTAINER): ContainerRuntimeStatus[] {
  const byName = new Map<string, ContainerRuntimeStatus[]>();
  for (const c of status.containerStatuses) {
    let list = byName.get(c.name);
    if (!list) byName.set(c.name, (list = []));
    list.push(c);
  }
  const out: ContainerRuntimeStatus[] = [];
  for (const list of byName.values()) {
    list.sort((a, b) => b.createdAt - a.createdAt);
    // The newest attempt and its predecessor stay whatever their state.
    const protectedIds = new Set(list.slice(0, 2).map((c) => c.id));
    let dead = 0;
    for (const c of list) {
      if (c.state !== 'exited') continue;
      if (protectedIds.has(c.id) || dead < keep) {
        dead++;
        continue;
      }
      out.push(c);
    }
  }
  return out;
}

// ---- node-level container GC (upstream kuberuntime containerGC.GarbageCollect) ----

/** upstream's kubelet GC policy defaults (--minimum-container-ttl-duration, --maximum-dead-containers[-per-container]). */
export interface ContainerGCPolicy {
  /** ms a dead container must have existed before it is collected. Default 0. */
  minAgeMs: number;
  /** Dead containers kept per (pod, container name); < 0 = no limit. Default 1. */
  maxPerPodContainer: number;
  /** Dead containers kept on the node; < 0 = no limit. Default -1. */
  maxContainers: number;
}

export const DEFAULT_CONTAINER_GC_POLICY: Readonly<ContainerGCPolicy> = { minAgeMs: 0, maxPerPodContainer: 1, maxContainers: -1 };
/** upstream: ContainerGCPeriod. */
export const CONTAINER_GC_PERIOD_MS = 60_000;

/** A container or sandbox as GC sees it (from CRI ListContainers / ListPodSandbox). */
export interface GCContainer {
  id: string;
  podUID: string;
  name: string;
  running: boolean;
  /** ms since the epoch. */
  createdAt: number;
  sandboxID?: string;
}

export interface GCSandbox {
  id: string;
  podUID: string;
  podName: string;
  podNamespace: string;
  ready: boolean;
  createdAt: number;
}

/** What a pod's state allows (upstream podStateProvider). */
export interface GCPodState {
  /** The pod was deleted and its worker finished: everything it left may go. */
  shouldPodContentBeRemoved(uid: string): boolean;
  /** The pod is terminated: its runtime objects may go (eviction's reclaim). */
  shouldPodRuntimeBeRemoved(uid: string): boolean;
}

export interface ContainerGCRuntime {
  listContainers(): Promise<GCContainer[]>;
  listSandboxes(): Promise<GCSandbox[]>;
  removeContainer(id: string): Promise<void>;
  removeSandbox(id: string): Promise<void>;
  /** The pod log directories that exist: dir path → pod UID. */
  listPodLogDirs(): Promise<Map<string, string>>;
  removePodLogDir(dir: string): Promise<void>;
}

/** What one GC pass removed. */
export interface ContainerGCResult {
  containers: string[];
  sandboxes: string[];
  logDirs: string[];
}

/**
 * Which dead containers one pass removes: of pods whose content may go, all; then per
 * (pod, name) the oldest beyond maxPerPodContainer; then, past maxContainers on the node,
 * an even share per unit and finally the oldest overall.
 */
export function containersToEvict(containers: readonly GCContainer[], policy: ContainerGCPolicy, now: number, state: GCPodState, allSourcesReady: boolean, evictNonDeletedPods: boolean): string[] {
  const units = new Map<string, GCContainer[]>();
  for (const c of containers) {
    if (c.running || now - c.createdAt < policy.minAgeMs) continue;
    const key = `${c.podUID}/${c.name}`;
    let u = units.get(key);
    if (!u) units.set(key, (u = []));
    u.push(c);
  }
  for (const u of units.values()) u.sort((a, b) => b.createdAt - a.createdAt);
  const out: string[] = [];
  const removeOldest = (u: GCContainer[], n: number): void => {
    for (const c of u.splice(Math.max(0, u.length - n), n)) out.push(c.id);
  };
  if (allSourcesReady) {
    for (const [key, u] of units) {
      const uid = key.slice(0, key.indexOf('/'));
      if (state.shouldPodContentBeRemoved(uid) || (evictNonDeletedPods && state.shouldPodRuntimeBeRemoved(uid))) {
        removeOldest(u, u.length);
        units.delete(key);
      }
    }
  }
  const enforcePerUnit = (max: number): void => {
    for (const u of units.values()) if (u.length > max) removeOldest(u, u.length - max);
  };
  if (policy.maxPerPodContainer >= 0) enforcePerUnit(policy.maxPerPodContainer);
  const total = (): number => [...units.values()].reduce((n, u) => n + u.length, 0);
  if (policy.maxContainers >= 0 && total() > policy.maxContainers) {
    enforcePerUnit(Math.max(1, Math.floor(policy.maxContainers / Math.max(1, units.size))));
    const over = total() - policy.maxContainers;
    if (over > 0) {
      const all = [...units.values()].flat().sort((a, b) => a.createdAt - b.createdAt);
      for (const c of all.slice(0, over)) out.push(c.id);
    }
  }
  return out;
}

/**
 * Sandboxes one pass removes: not ready and holding no container, of a pod whose content may
 * go (all of them) or not the pod's newest sandbox.
 */
export function sandboxesToEvict(sandboxes: readonly GCSandbox[], containers: readonly GCContainer[], state: GCPodState, evictNonDeletedPods: boolean): string[] {
  const withContainers = new Set(containers.map((c) => c.sandboxID).filter((x): x is string => Boolean(x)));
  const byPod = new Map<string, GCSandbox[]>();
  for (const s of sandboxes) {
    let l = byPod.get(s.podUID);
    if (!l) byPod.set(s.podUID, (l = []));
    l.push(s);
  }
  const out: string[] = [];
  for (const [uid, list] of byPod) {
    list.sort((a, b) => b.createdAt - a.createdAt);
    const removeAll = state.shouldPodContentBeRemoved(uid) || (evictNonDeletedPods && state.shouldPodRuntimeBeRemoved(uid));
    list.forEach((s, i) => {
      if (s.ready || withContainers.has(s.id)) return;
      if (removeAll || i > 0) out.push(s.id);
    });
  }
  return out;
}

export interface ContainerGCOptions {
  runtime: ContainerGCRuntime;
  state: GCPodState;
  policy?: ContainerGCPolicy;
  allSourcesReady: () => boolean;
  now: () => number;
  log: { info(msg: string, f?: Record<string, unknown>): void; warn(msg: string, f?: Record<string, unknown>): void };
}

/** One GC pass; `evictNonDeletedPods` is eviction's reclaim (terminated pods' leftovers go too). */
export async function garbageCollectContainers(o: ContainerGCOptions, evictNonDeletedPods = false): Promise<ContainerGCResult> {
  const policy = o.policy ?? DEFAULT_CONTAINER_GC_POLICY;
  const ready = o.allSourcesReady();
  const [containers, sandboxes] = await Promise.all([o.runtime.listContainers(), o.runtime.listSandboxes()]);
  const result: ContainerGCResult = { containers: [], sandboxes: [], logDirs: [] };
  const removedContainers = new Set<string>();
  for (const id of containersToEvict(containers, policy, o.now(), o.state, ready, evictNonDeletedPods)) {
    try {
      await o.runtime.removeContainer(id);
      result.containers.push(id);
      removedContainers.add(id);
    } catch (err) {
      o.log.warn('Failed to remove container', { containerID: id, err: (err as Error).message });
    }
  }
  const left = containers.filter((c) => !removedContainers.has(c.id));
  for (const id of sandboxesToEvict(sandboxes, left, o.state, evictNonDeletedPods)) {
    try {
      await o.runtime.removeSandbox(id);
      result.sandboxes.push(id);
    } catch (err) {
      o.log.warn('Failed to remove sandbox', { podSandboxID: id, err: (err as Error).message });
    }
  }
  // Log directories of pods whose content may go (only once every source has been seen).
  if (ready) {
    // pods that still have a container this pass did not remove (one set, not a scan per directory)
    const removedNow = new Set(result.containers);
    const withContainers = new Set<string>();
    for (const c of left) if (!removedNow.has(c.id)) withContainers.add(c.podUID);
    for (const [dir, uid] of await o.runtime.listPodLogDirs()) {
      if (!o.state.shouldPodContentBeRemoved(uid)) continue;
      if (withContainers.has(uid)) continue;
      try {
        await o.runtime.removePodLogDir(dir);
        result.logDirs.push(dir);
      } catch (err) {
        o.log.warn('Failed to remove pod logs directory', { path: dir, err: (err as Error).message });
      }
    }
  }
  if (result.containers.length || result.sandboxes.length || result.logDirs.length) {
    o.log.info('Container garbage collection removed', { containers: result.containers.length, sandboxes: result.sandboxes.length, logDirs: result.logDirs.length });
  }
  return result;
}
