// The pod status cache (upstream: kubecontainer.Cache): the PLEG writes, pod workers read.
// getNewerThan lets a worker wait until the cache reflects the runtime after its last sync.
// An entry is replaced only by one at least as new (a late answer never overwrites a newer
// one); the global timestamp (a relist saw every pod at that time) does not vouch for a pod
// whose update is still in flight.

import type { RuntimePodStatus } from '../runtime/types.js';

export interface CacheEntry {
  status?: RuntimePodStatus;
  error?: Error;
  /** When the status was read (ms since the epoch); 0 when the pod has no entry. */
  modified: number;
}

/** Called when a worker waits for an entry the cache cannot vouch for yet. */
export type StaleReadHook = (uid: string, minTime: number) => void;

export class PodCache {
  private entries = new Map<string, CacheEntry>();
  /** Every pod's entry is at least this fresh (set after each full relist). */
  private timestamp = 0;
  private waiters = new Map<string, { minTime: number; resolve: (e: CacheEntry) => void }[]>();
  /** Pods with an update in flight: the global timestamp does not cover them. */
  private pending = new Set<string>();
  private onStaleRead?: StaleReadHook;

  get(uid: string): CacheEntry {
    return this.entries.get(uid) ?? { modified: 0 };
  }

  /**
   * Stores a pod's status read at `modified`; refused (false) when the cache holds a newer
   * one, as upstream's cache does once events and relists both write it.
   */
  set(uid: string, status: RuntimePodStatus | undefined, error: Error | undefined, modified: number): boolean {
    const cur = this.entries.get(uid);
    if (cur && cur.modified > modified) return false;
    this.entries.set(uid, { status, error, modified });
    this.pending.delete(uid);
    this.notify(uid);
    return true;
  }

  delete(uid: string): void {
    this.entries.delete(uid);
    this.pending.delete(uid);
    this.notify(uid);
  }

  /** Marks every entry fresh up to `t` (a relist saw no change for the others). */
  updateTime(t: number): void {
    if (t <= this.timestamp) return;
    this.timestamp = t;
    for (const uid of [...this.waiters.keys()]) this.notify(uid);
  }

  /** The pod has an update in flight: until it lands, only its own entry's time counts. */
  markPending(uid: string): void {
    this.pending.add(uid);
  }

  clearPending(uid: string): void {
    if (this.pending.delete(uid)) this.notify(uid);
  }

  /** Installs the hook told about waits the cache cannot satisfy yet (the evented PLEG fetches then). */
  setStaleReadHook(hook: StaleReadHook | undefined): void {
    this.onStaleRead = hook;
  }

  /** Resolves with the entry once it is at least as fresh as `minTime`. */
  getNewerThan(uid: string, minTime: number): Promise<CacheEntry> {
    const ready = this.ready(uid, minTime);
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve) => {
      let list = this.waiters.get(uid);
      if (!list) this.waiters.set(uid, (list = []));
      list.push({ minTime, resolve });
      this.onStaleRead?.(uid, minTime);
    });
  }

  uids(): IterableIterator<string> {
    return this.entries.keys();
  }

  /** The global freshness time (tests, the evented PLEG). */
  globalTimestamp(): number {
    return this.timestamp;
  }

  waiting(): number {
    let n = 0;
    for (const l of this.waiters.values()) n += l.length;
    return n;
  }

  private ready(uid: string, minTime: number): CacheEntry | undefined {
    const e = this.entries.get(uid);
    if (e && e.modified >= minTime) return e;
    // Until the first relist completes, a missing entry means "not known yet", not "no containers".
    if (!this.pending.has(uid) && this.timestamp > 0 && this.timestamp >= minTime) return e ?? { modified: this.timestamp };
    return undefined;
  }

  private notify(uid: string): void {
    const list = this.waiters.get(uid);
    if (!list) return;
    const still = list.filter((w) => {
      const e = this.ready(uid, w.minTime);
      if (e) w.resolve(e);
      return !e;
    });
    if (still.length) this.waiters.set(uid, still);
    else this.waiters.delete(uid);
  }
}
