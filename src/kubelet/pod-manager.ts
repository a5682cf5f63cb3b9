// The pod manager (upstream: pod.Manager): the desired pods, by UID and by full name.

import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';

export class PodManager {
  private byUID = new Map<string, Pod>();

  addPod(pod: Pod): void {
    this.byUID.set(pod.metadata.uid!, pod);
  }

  updatePod(pod: Pod): void {
    this.byUID.set(pod.metadata.uid!, pod);
  }

  removePod(pod: Pod): void {
    this.byUID.delete(pod.metadata.uid!);
  }

  getPodByUID(uid: string): Pod | undefined {
    return this.byUID.get(uid);
  }

  getPodByFullName(fullName: string): Pod | undefined {
    for (const p of this.byUID.values()) if (podFullName(p) === fullName) return p;
    return undefined;
  }

  getPods(): Pod[] {
    return [...this.byUID.values()];
  }

  uids(): Set<string> {
    return new Set(this.byUID.keys());
  }

  /** The desired pods' UIDs without a copy (housekeeping reads it every 2 s): has() and keys() only. */
  uidSet(): Pick<ReadonlySet<string>, 'has' | 'keys' | 'size'> & Iterable<string> {
    const m = this.byUID;
    return { has: (uid) => m.has(uid), keys: () => m.keys(), get size() { return m.size; }, [Symbol.iterator]: () => m.keys() };
  }
}
