// Housekeeping (upstream: HandlePodCleanups): every 2s, once all sources were seen and the
// runtime is up, kill the pods the runtime runs that no source wants, remove pod cgroups
// nobody owns, forget finished pod workers and drop what is kept for pods that are gone
// (statuses, start failures, quiet backoff entries) and the OOM watches of containers the
// runtime no longer has (restarted or removed behind the kubelet's back).

import type { Pod } from '../api/types.js';
import type { PodLifecycleEventGenerator } from '../pleg/index.js';
import type { KubeletRuntime } from '../runtime/types.js';
import type { StatusManager } from '../status/status-manager.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { cleanupPodLogDirs } from '../logs/rotation.js';
import type { KubeletOomWatcher, PodCgroups } from './dependencies.js';
import type { PodManager } from './pod-manager.js';
import type { PodWorkers } from './pod-workers.js';

/** upstream: housekeepingPeriod. */
export const HOUSEKEEPING_PERIOD_MS = 2_000;
/**
 * How often pod log directories are scanned for removal: upstream does it in the container GC
 * (evictPodLogsDirectories), every ContainerGCPeriod (1 minute), not every housekeeping pass.
 */
export const POD_LOG_DIRS_CLEANUP_PERIOD_MS = 60_000;

export interface HousekeepingOptions {
  log: Logger;
  podManager: PodManager;
  podWorkers: Pick<PodWorkers, 'updatePod' | 'has' | 'isKnown' | 'forgetFinished'>;
  pleg: Pick<PodLifecycleEventGenerator, 'knownPods' | 'lastSeen'>;
  cgroups: Pick<PodCgroups, 'listPodCgroups' | 'remove'>;
  statusManager: Pick<StatusManager, 'removeOrphanedStatuses'>;
  /** Restart and pull backoff entries are keyed by pod UID: forgotten once quiet. */
  runtime: Pick<KubeletRuntime, 'gcBackoff'>;
  /** Undefined: no OOM watcher. */
  oom?: Pick<KubeletOomWatcher, 'watched' | 'unwatch'>;
  /** Per-pod caches to trim to the live pods. */
  caches: Map<string, unknown>[];
  /** Housekeeping waits for every source's first list and a running runtime. */
  ready(): boolean;
  /** Where pods' log directories are: those of pods gone everywhere are removed. */
  podLogsDir?: string;
  /** Paces the pod log directory scan (once per POD_LOG_DIRS_CLEANUP_PERIOD_MS); without it every pass scans. */
  clock?: Pick<Clock, 'now'>;
  /** Removes the directories (and mounts) of pods nobody has; undefined: no volume manager. */
  volumes?: { cleanupOrphanedPodDirs(keep: Pick<ReadonlySet<string>, 'has'>): Promise<string[]> };
}

/** Pod log directories being scanned. */
const logDirScans = new Set<string>();
/** When each pod log directory's last scan started (clock ms). */
const logDirScanAt = new Map<string, number>();

export async function handleHousekeeping(o: HousekeepingOptions): Promise<void> {
  if (!o.ready()) return;
  // Every pass walks all pods (1000 pods: every 2 s): forEach and lookups, no copies of the
  // UID sets and no [key, value] pair per entry.
  const desired = o.podManager.uidSet();
  // Pods the runtime runs that no source wants (deleted while we were down, or orphans).
  o.pleg.knownPods().forEach((rp, uid) => {
    if (desired.has(uid) || o.podWorkers.has(uid)) return;
    o.log.info('Cleaning up orphaned pod', { pod: `${rp.namespace}/${rp.name}`, podUID: uid });
    const pod: Pod = { metadata: { uid, name: rp.name, namespace: rp.namespace }, spec: { containers: [] } };
    o.podWorkers.updatePod({ updateType: 'kill', pod, removed: true });
  });
  // Pod cgroups nobody owns.
  try {
    const known = o.pleg.knownPods();
    const orphans: string[] = [];
    (await o.cgroups.listPodCgroups()).forEach((name, uid) => {
      if (!desired.has(uid) && !o.podWorkers.has(uid) && !known.has(uid)) orphans.push(name);
    });
    for (const name of orphans) {
      o.log.info('Removing orphaned pod cgroup', { cgroup: name });
      await o.cgroups.remove(name).catch((err) => o.log.warn('Failed to remove orphaned pod cgroup', { cgroup: name, err: (err as Error).message }));
    }
  } catch (err) {
    o.log.warn('Housekeeping: listing pod cgroups failed', { err: (err as Error).message });
  }
  o.podWorkers.forgetFinished();
  // desired, or held by a worker that has not finished
  const live = { has: (uid: string): boolean => desired.has(uid) || o.podWorkers.isKnown(uid) };
  o.statusManager.removeOrphanedStatuses(live);
  for (const cache of o.caches) {
    cache.forEach((_, uid) => {
      if (!live.has(uid)) cache.delete(uid);
    });
  }
  o.runtime.gcBackoff();
  if (o.podLogsDir) {
    // upstream evictPodLogsDirectories: a pod no source wants, no worker holds and the runtime no longer has
    // (off the housekeeping pass: a large directory must not hold the next tick back; one scan at a time)
    const dir = o.podLogsDir;
    const now = o.clock?.now();
    const last = logDirScanAt.get(dir);
    const due = now === undefined || last === undefined || now - last >= POD_LOG_DIRS_CLEANUP_PERIOD_MS || now < last;
    if (due && !logDirScans.has(dir)) {
      const known = o.pleg.knownPods();
      logDirScans.add(dir);
      if (now !== undefined) logDirScanAt.set(dir, now);
      void cleanupPodLogDirs(dir, (uid) => !live.has(uid) && !known.has(uid), o.log)
        .catch((err) => o.log.warn('Housekeeping: cleaning pod log directories failed', { path: dir, err: (err as Error).message }))
        .finally(() => logDirScans.delete(dir));
    }
  }
  if (o.oom) unwatchGoneContainers(o.oom, o.pleg, o.log);
  // Pod directories left by pods deleted while kubelet-ts was down (after a restart nothing
  // else knows them): only once every source was listed, so no wanted pod loses its volumes.
  if (o.volumes) {
    const known = o.pleg.knownPods();
    const keep = { has: (uid: string): boolean => live.has(uid) || known.has(uid) };
    await o.volumes.cleanupOrphanedPodDirs(keep).catch((err) => o.log.warn('Housekeeping: cleaning up orphaned pod directories failed', { err: (err as Error).message }));
  }
}

/**
 * Unwatches the containers the runtime no longer has. Only a container watched before the
 * PLEG's last successful list can be judged by it: that list was taken after the container
 * started, so its absence means it is gone (a ContainerRemoved event may have been dropped).
 */
export function unwatchGoneContainers(oom: Pick<KubeletOomWatcher, 'watched' | 'unwatch'>, pleg: Pick<PodLifecycleEventGenerator, 'knownPods' | 'lastSeen'>, log: Logger): void {
  const listedAt = pleg.lastSeen();
  if (listedAt === 0) return;
  const watched = oom.watched().filter((w) => w.since < listedAt);
  if (watched.length === 0) return;
  const known = pleg.knownPods();
  for (const w of watched) {
    // the PLEG groups containers by pod: look the id up in its pod's few, not in a set of all
    if (known.get(w.podUID)?.containers.some((c) => c.id === w.containerID)) continue;
    log.v(4).info('Container gone from the runtime; unwatching it for OOM', { containerID: w.containerID, podUID: w.podUID });
    oom.unwatch(w.containerID);
  }
}
