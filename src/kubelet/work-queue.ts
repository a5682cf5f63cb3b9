// The pod work queue (upstream: queue.WorkQueue): when each pod is next due for a resync.

import type { Clock } from '../util/clock.js';

export class WorkQueue {
  private due = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  enqueue(uid: string, delayMs: number): void {
    this.due.set(uid, this.clock.now() + delayMs);
  }

  /** Removes and returns the UIDs that are due now. */
  getWork(): string[] {
    const now = this.clock.now();
    const ready: string[] = [];
    // keys and get: iterating entries makes a [uid, at] pair per pod on every tick
    const due = this.due;
    for (const uid of due.keys()) {
      if (due.get(uid)! <= now) {
        ready.push(uid);
        due.delete(uid);
      }
    }
    return ready;
  }

  forget(uid: string): void {
    this.due.delete(uid);
  }
}
