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
