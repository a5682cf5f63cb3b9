// Abortable waits on the injected clock, shared by the REST client and the reflector.

import type { Clock } from '../util/clock.js';

/** Resolves after `ms` on `clock`, or rejects with the signal's reason when aborted first. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      timer.cancel();
      reject(signal!.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Exponential backoff with a cap (and a reset), as wait.Backoff steps in client-go. */
export class ExponentialBackoff {
  private current: number;

  constructor(
    readonly initialMs: number,
    readonly maxMs: number,
    readonly factor = 2,
  ) {
    this.current = initialMs;
  }

  /** The next delay; each call multiplies the one after it, up to the cap. */
  next(): number {
    const d = this.current;
    this.current = Math.min(this.maxMs, this.current * this.factor);
    return d;
  }

  reset(): void {
    this.current = this.initialMs;
  }
}
