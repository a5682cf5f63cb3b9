// The status manager (upstream: status.Manager): the latest API status of every pod, versioned.
// In standalone mode it is the source of truth for the read-only /pods endpoint; with an API
// server it also batches status patches (a later subsystem).

import type { Pod, PodStatus } from '../api/types.js';

interface Versioned {
  status: PodStatus;
  version: number;
}

export class StatusManager {
  private statuses = new Map<string, Versioned>();

  setPodStatus(pod: Pod, status: PodStatus): void {
    const uid = pod.metadata.uid!;
    const prev = this.statuses.get(uid);
    this.statuses.set(uid, { status, version: (prev?.version ?? 0) + 1 });
  }

  getPodStatus(uid: string): PodStatus | undefined {
    return this.statuses.get(uid)?.status;
  }

  deletePodStatus(uid: string): void {
    this.statuses.delete(uid);
  }

  /** Drops statuses of pods that are no longer known. */
  removeOrphanedStatuses(known: Set<string>): void {
    for (const uid of this.statuses.keys()) if (!known.has(uid)) this.statuses.delete(uid);
  }
}
