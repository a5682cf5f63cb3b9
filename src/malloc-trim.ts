// Returns malloc's freed pages to the kernel on a slow timer. glibc keeps what a burst (a
// thousand pods starting, a relist of everything) freed inside its heaps, and only gives back
// the top of the main heap by itself: at rest that is tens of MiB of RSS nobody uses.

import type { NativeAddon } from './native.js';
import type { Clock, Timer } from './util/clock.js';

/** How often the free malloc memory is checked (a mallinfo2 call: microseconds). */
export const MALLOC_TRIM_INTERVAL_MS = 30_000;
/** Free bytes held by malloc worth a malloc_trim (which walks every arena's free chunks). */
export const MALLOC_TRIM_MIN_FREE_BYTES = 4 * 2 ** 20;

export interface MallocTrimOptions {
  clock: Clock;
  addon: Pick<NativeAddon, 'mallocTrim' | 'mallocInfo'> | undefined;
  intervalMs?: number;
  minFreeBytes?: number;
}

export interface MallocTrimmer {
  stop(): void;
  /** malloc_trim calls made so far. */
  trims(): number;
}

/** Starts the timer; a no-op when the addon (or glibc's mallinfo2) is unavailable. */
export function startMallocTrim(opts: MallocTrimOptions): MallocTrimmer {
  const { clock, addon } = opts;
  const intervalMs = opts.intervalMs ?? MALLOC_TRIM_INTERVAL_MS;
  const minFree = opts.minFreeBytes ?? MALLOC_TRIM_MIN_FREE_BYTES;
  let trims = 0;
  let timer: Timer | undefined;
  let stopped = false;
  const tick = (): void => {
    timer = undefined;
    if (stopped) return;
    const free = addon?.mallocInfo?.().freeBytes;
    if (free !== undefined && free >= minFree) {
      addon!.mallocTrim!();
      trims++;
    }
    timer = clock.setTimeout(tick, intervalMs);
  };
  if (addon?.mallocTrim && addon.mallocInfo?.().freeBytes !== undefined) timer = clock.setTimeout(tick, intervalMs);
  return {
    stop() {
      stopped = true;
      timer?.cancel();
      timer = undefined;
    },
    trims: () => trims,
  };
}
