// The probe schedule's clock: thousands of probe workers share one timer. Due times are rounded
// up to a slot of `resolutionMs`; one clock timer is armed for the earliest slot, so 3000 probes
// a second cost about 1000/resolutionMs timer callbacks a second instead of 3000 timers.

import type { Clock, Timer } from '../util/clock.js';

/** Slot width: a probe starts at most this late; far below upstream's period granularity (1 s). */
export const SCHEDULE_RESOLUTION_MS = 10;

export interface ScheduledRun {
  cancel(): void;
}

/** One pending run; it is its own handle (no closure per run). */
class Entry implements ScheduledRun {
  cancelled = false;
  constructor(readonly fn: () => void, private readonly owner: ProbeScheduler) {}

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.owner.cancelled();
  }
}

export class ProbeScheduler {
  /** Slot time → what runs then (insertion order). */
  private readonly slots = new Map<number, Entry[]>();
  /** Slot times, a binary min-heap. */
  private readonly heap: number[] = [];
  private timer?: Timer;
  private armedAt = Infinity;
  private pending = 0;
  /** Inside fire(): runs added now are armed for once it ends, not one by one. */
  private firing = false;

  constructor(private readonly clock: Clock, private readonly resolutionMs = SCHEDULE_RESOLUTION_MS) {}

  /** Runs `fn` at `at` (rounded up to the slot) or on the next slot when `at` is past. */
  runAt(at: number, fn: () => void): ScheduledRun {
    const r = this.resolutionMs;
    const slot = Math.max(Math.ceil(at / r) * r, 0);
    const e = new Entry(fn, this);
    let list = this.slots.get(slot);
    if (!list) {
      list = [];
      this.slots.set(slot, list);
      this.push(slot);
    }
    list.push(e);
    this.pending++;
    if (!this.firing && slot < this.armedAt) this.arm();
    return e;
  }

  /** An entry was cancelled before it ran. */
  cancelled(): void {
    // Nothing left to run: no timer stays armed for cancelled runs.
    if (--this.pending === 0) this.stop();
  }

  /** Runs not yet fired nor cancelled. */
  size(): number {
    return this.pending;
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.armedAt = Infinity;
    this.slots.clear();
    this.heap.length = 0;
    this.pending = 0;
  }

  private arm(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.armedAt = Infinity;
    const next = this.heap[0];
    if (next === undefined) return;
    this.armedAt = next;
    this.timer = this.clock.setTimeout(() => this.fire(), Math.max(0, next - this.clock.now()));
  }

  private fire(): void {
    this.timer = undefined;
    this.armedAt = Infinity;
    const now = this.clock.now();
    this.firing = true;
    try {
      while (this.heap.length && this.heap[0]! <= now) {
        const slot = this.pop()!;
        const list = this.slots.get(slot);
        this.slots.delete(slot);
        if (!list) continue;
        for (const e of list) {
          if (e.cancelled) continue;
          e.cancelled = true;
          this.pending--;
          e.fn();
        }
      }
    } finally {
      this.firing = false;
    }
    if (this.pending === 0) this.stop();
    else if (this.armedAt === Infinity) this.arm();
  }

  private push(v: number): void {
    const h = this.heap;
    h.push(v);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]! <= v) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = v;
  }

  private pop(): number | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length && last !== undefined) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const c = l + 1 < h.length && h[l + 1]! < h[l]! ? l + 1 : l;
        if (h[c]! >= last) break;
        h[i] = h[c]!;
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}
