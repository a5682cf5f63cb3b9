// An injectable clock: every subsystem that waits or stamps time takes one, so tests step it.

export interface Timer {
  cancel(): void;
  /** Keeps the process alive while this timer is pending (real timers are unref'd by default). */
  ref?(): void;
}

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): Timer;
  sleep(ms: number): Promise<void>;
}

let realPending = 0;

/** Timers of realClock that have neither fired nor been cancelled (unref'd, so Node's counts miss them). */
export function realClockPendingTimers(): number {
  return realPending;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    let pending = true;
    const settle = (): void => {
      if (pending) realPending--;
      pending = false;
    };
    realPending++;
    const t = setTimeout(() => { settle(); fn(); }, ms);
    t.unref?.();
    return { cancel: () => { settle(); clearTimeout(t); }, ref: () => void t.ref?.() };
  },
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

interface PendingTimer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/** A clock that only moves when the test steps it. */
export class FakeClock implements Clock {
  private current: number;
  private seq = 0;
  private timers: PendingTimer[] = [];

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): Timer {
    const t: PendingTimer = { at: this.current + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(t);
    return { cancel: () => { t.cancelled = true; } };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.setTimeout(resolve, ms));
  }

  /** Moves time forward, firing due timers in order. */
  step(ms: number): void {
    const end = this.current + ms;
    for (;;) {
      const due = this.timers
        .filter((t) => !t.cancelled && t.at <= end)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.current = Math.max(this.current, due.at);
      due.fn();
    }
    this.current = end;
  }

  pendingTimers(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }
}
