// Drives a FakeClock while real I/O with the test API server happens: check, let I/O run,
// step the clock, until the condition holds (fails after a wall-clock limit naming it).

import { setTimeout as delay } from 'node:timers/promises';
import type { FakeClock } from '../../src/util/clock.js';
import type { Logger } from '../../src/util/log.js';

export async function until<T>(clock: FakeClock, what: string, cond: () => T | undefined | null | false, stepMs = 100, limitMs = 15_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(3);
    clock.step(stepMs);
  }
}

/** Lets pending I/O callbacks run without moving the fake clock. */
export async function settle(ms = 30): Promise<void> {
  await delay(ms);
}

/** Tracks a promise's outcome so tests can look at it synchronously. */
export function track<T>(p: Promise<T>): { done: boolean; value?: T; error?: unknown; promise: Promise<T> } {
  const t: { done: boolean; value?: T; error?: unknown; promise: Promise<T> } = { done: false, promise: p };
  p.then((v) => { t.done = true; t.value = v; }, (e) => { t.done = true; t.error = e; });
  return t;
}

/** A logger that keeps its lines, so expected warnings do not clutter test output. */
export function quietLogger(lines: string[] = []): Logger {
  const l: Logger = {
    info: (m) => void lines.push(m),
    warn: (m) => void lines.push(m),
    error: (m) => void lines.push(m),
    v: () => l,
    with: () => l,
  };
  return l;
}
