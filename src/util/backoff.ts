// Per-key exponential backoff (upstream flowcontrol.Backoff): initial, doubling to a cap,
// forgotten after a quiet period of twice the cap.

import type { Clock } from './clock.js';

interface Entry {
  backoffMs: number;
  lastUpdate: number;
}

export class Backoff {
  private entries = new Map<string, Entry>();

  constructor(
    private readonly clock: Clock,
    readonly initialMs: number,
    readonly maxMs: number,
  ) {}

  /** Records a failure now: the next allowed attempt moves out. */
  next(key: string): void {
    const now = this.clock.now();
    const e = this.entries.get(key);
    if (!e || this.hasExpired(e, now)) {
      this.entries.set(key, { backoffMs: this.initialMs, lastUpdate: now });
      return;
    }
    e.backoffMs = Math.min(e.backoffMs * 2, this.maxMs);
    e.lastUpdate = now;
  }

  /** Current backoff duration for the key (0 when none). */
  get(key: string): number {
    return this.entries.get(key)?.backoffMs ?? 0;
  }

  /** True while `eventTime` (when the last failure happened) is inside the key's backoff window. */
  isInBackOffSince(key: string, eventTime: number): boolean {
    const e = this.entries.get(key);
    if (!e) return false;
    const now = this.clock.now();
    if (this.hasExpired(e, now)) return false;
    return now - eventTime < e.backoffMs;
  }

  /** True while the last recorded failure of the key is inside its backoff window. */
  isInBackOffSinceUpdate(key: string): boolean {
    const e = this.entries.get(key);
    if (!e) return false;
    const now = this.clock.now();
    if (this.hasExpired(e, now)) return false;
    return now - e.lastUpdate < e.backoffMs;
  }

  /** Milliseconds left of the window that started at `eventTime`. */
  remaining(key: string, eventTime: number): number {
    const e = this.entries.get(key);
    if (!e) return 0;
    return Math.max(0, eventTime + e.backoffMs - this.clock.now());
  }

  /** Restores an entry known from elsewhere (e.g. rebuilt from the runtime after a restart). */
  seed(key: string, backoffMs: number, lastUpdate: number): void {
    if (!this.entries.has(key)) this.entries.set(key, { backoffMs: Math.min(backoffMs, this.maxMs), lastUpdate });
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  reset(key: string): void {
    this.entries.delete(key);
  }

  /** Drops entries not touched for twice the cap. */
  gc(): void {
    const now = this.clock.now();
    for (const [k, e] of this.entries) if (this.hasExpired(e, now)) this.entries.delete(k);
  }

  private hasExpired(e: Entry, now: number): boolean {
    return now - e.lastUpdate > 2 * this.maxMs;
  }
}

/**
 * upstream wait.Jitter: `durationMs` plus up to `maxFactor` times more, at random (a factor of 0
 * or less means 1). Spreads periodic per-pod work so pods started together do not stay in step.
 */
export function jitter(durationMs: number, maxFactor: number, random: () => number = Math.random): number {
  const f = maxFactor > 0 ? maxFactor : 1;
  return durationMs + random() * f * durationMs;
}
