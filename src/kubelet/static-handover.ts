// A static pod's previous instance, left in the runtime under another UID, is stopped and removed
// before the static pod starts. Upstream derives a static pod's UID from an MD5 of go-spew's
// rendering of the decoded internal Go Pod structure (pkg/kubelet/config/common.go applyDefaults
// with hash.DeepHashObject): every field of that internal type, with its Go type names, in the
// order of the Kubernetes release that read the file. That cannot be reproduced faithfully (it
// changes whenever a release adds a Pod field, so upstream's own UIDs change across upgrades), so
// kubelet-ts's UIDs differ from upstream's. The first start after a swap would then find the
// upstream kubelet's sandbox and containers of each static pod under the old UID: that instance is
// stopped and removed first, then the static pod starts once (its mirror pod, annotated with the
// old hash, is replaced by the mirror pod reconciliation). Two instances never run side by side
// (a host-network static pod would find its ports taken).

import type { Pod } from '../api/types.js';
import type { KnownPod } from '../pleg/types.js';
import { isStaticPod } from '../sources/static-pod.js';
import type { Clock } from '../util/clock.js';

/** How long a static pod's first sync waits for the first full relist before it goes on without it. */
export const FIRST_RELIST_WAIT_MS = 10_000;
const FIRST_RELIST_POLL_MS = 50;

export interface StaticHandoverOptions {
  clock: Pick<Clock, 'setTimeout'>;
  /** The runtime's pods as the last full relist saw them. */
  knownPods: () => ReadonlyMap<string, KnownPod>;
  /** When the last full relist finished (0: none yet). */
  relistedAt: () => number;
  /** A pod some source wants, or one a pod worker already has. */
  isTracked: (uid: string) => boolean;
}

/**
 * The runtime pods a static pod must wait for: same name and namespace, another UID, wanted by no
 * source and not yet handled by a pod worker. Returned as minimal pods, for a kill that removes them.
 */
export async function previousStaticInstances(pod: Pod, o: StaticHandoverOptions): Promise<Pod[]> {
  if (!isStaticPod(pod)) return [];
  // the first sync of a pod waits for the first relist anyway; this only covers a status read
  // that answered before it (the evented PLEG reads a pod at once)
  for (let waited = 0; o.relistedAt() === 0 && waited < FIRST_RELIST_WAIT_MS; waited += FIRST_RELIST_POLL_MS) {
    await new Promise<void>((r) => o.clock.setTimeout(r, FIRST_RELIST_POLL_MS));
  }
  const out: Pod[] = [];
  o.knownPods().forEach((rp, uid) => {
    if (uid === pod.metadata.uid || rp.name !== pod.metadata.name || rp.namespace !== pod.metadata.namespace) return;
    if (o.isTracked(uid)) return;
    out.push({ metadata: { uid, name: rp.name, namespace: rp.namespace }, spec: { containers: [] } });
  });
  return out;
}
