// The pod status cache (upstream: kubecontainer.Cache): PLEG writes, pod workers read.
// getNewerThan lets a worker wait until the cache reflects the runtime after its last sync.

import type { RuntimePodStatus } from '../runtime/types.js';

interface Entry {
  status?: RuntimePodStatus;
  error?: Error;
  modified: number;
}

interface Waiter {
  uid: string;
  minTime: number;
  resolve: (e: Entry) => void;
}

export class PodCache {
  private entries = new Map<string, Entry>();
  /** Every pod's entry is at least this fresh (set after each full relist). */
  private timestamp = 0;
  private waiters: Waiter[] = [];

  get(uid: string): Entry {
    return this.entries.get(uid) ?? { modified: 0 };
  }

  set(uid: string, status: RuntimePodStatus | undefined, error: Error | undefined, modified: number): void {
    this.entries.set(uid, { status, error, modified });
    this.notify(uid);
  }

  delete(uid: string): void {
    this.entries.delete(uid);
  }

  /** Marks every entry fresh up to `t` (a relist saw no change for the others). */
  updateTime(t: number): void {
    this.timestamp = Math.max(this.timestamp, t);
    this.notify();
  }

  /** Resolves with the entry once it is at least as fresh as `minTime`. */
  getNewerThan(uid: string, minTime: number): Promise<Entry> {
    const ready = this.ready(uid, minTime);
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve) => this.waiters.push({ uid, minTime, resolve }));
  }

  uids(): IterableIterator<string> {
    return this.entries.keys();
  }

  private ready(uid: string, minTime: number): Entry | undefined {
    const e = this.entries.get(uid);
    if (e && e.modified >= minTime) return e;
    // Until the first relist completes, a missing entry means "not known yet", not "no containers".
    if (this.timestamp > 0 && this.timestamp >= minTime) return e ?? { modified: this.timestamp };
    return undefined;
  }

  private notify(uid?: string): void {
    if (!this.waiters.length) return;
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (uid !== undefined && w.uid !== uid) { still.push(w); continue; }
      const e = this.ready(w.uid, w.minTime);
      if (e) w.resolve(e); else still.push(w);
    }
    this.waiters = still;
  }
}
