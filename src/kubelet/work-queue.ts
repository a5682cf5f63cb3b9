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
    for (const [uid, at] of this.due) {
      if (at <= now) {
        ready.push(uid);
        this.due.delete(uid);
      }
    }
    return ready;
  }

  forget(uid: string): void {
    this.due.delete(uid);
  }
}
