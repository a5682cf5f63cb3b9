// Client-side rate limiting as client-go's token bucket (flowcontrol.NewTokenBucketRateLimiter):
// `burst` tokens to start with, refilled at `qps` per second; a request takes one token and
// waits, on the injected clock, until it is its turn. Waiting is first come, first served.

import type { Clock } from '../util/clock.js';
import { ApiTransportError } from './errors.js';

/** kubeAPIQPS / kubeAPIBurst defaults of the kubelet. */
export const DEFAULT_QPS = 50;
export const DEFAULT_BURST = 100;

export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    readonly qps: number,
    readonly burst: number,
    private readonly clock: Clock,
  ) {
    if (!(qps > 0) || !(burst >= 1)) throw new RangeError(`token bucket needs qps > 0 and burst >= 1 (qps ${qps}, burst ${burst})`);
    this.tokens = burst;
    this.last = clock.now();
  }

  private refill(): void {
    const now = this.clock.now();
    if (now > this.last) this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
  }

  /** Takes a token if one is there now, without waiting. */
  tryAccept(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Tokens available now (fractional while refilling; negative while others wait). */
  available(): number {
    this.refill();
    return this.tokens;
  }

  /** Waits for a token: reserves it now (so callers are served in order), sleeps until it is due. */
  async accept(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw aborted(signal);
    this.refill();
    this.tokens -= 1;
    if (this.tokens >= 0) return;
    const waitMs = Math.ceil((-this.tokens / this.qps) * 1000);
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        timer.cancel();
        // The reservation is handed back, as client-go's Reservation.Cancel does.
        this.refill();
        this.tokens = Math.min(this.burst, this.tokens + 1);
        reject(aborted(signal!));
      };
      const timer = this.clock.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, waitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

function aborted(signal: AbortSignal): ApiTransportError {
  return new ApiTransportError('ERR_API_ABORTED', 'rate limiter', 'aborted while waiting for a token', { cause: signal.reason });
}
