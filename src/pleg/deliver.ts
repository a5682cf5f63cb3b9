// Delivery of a pod's lifecycle events: refresh its status in the cache first, then hand the
// events to the syncLoop, so a pod worker woken by an event always finds a status that shows
// it. One delivery per pod at a time (a second request waits and then covers whatever changed
// meanwhile), a bounded number across pods, and an overflowing channel drops (and counts)
// instead of blocking. Both PLEGs deliver through one PodDeliverer, so a transition seen by a
// relist and by an event is delivered once.

import type { RuntimePodStatus } from '../runtime/types.js';
import type { PlegMetrics } from './metrics.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { CacheEntry, PodCache } from './cache.js';
import type { DirtyPod, RecordStore } from './records.js';
import { preservePodIPs } from './status.js';
import type { PodLifecycleEvent } from './types.js';

export interface FetchResult {
  /** The pod's status; undefined when the pod is gone from the runtime (its entry is dropped). */
  status?: RuntimePodStatus;
  /** When the status is true of the runtime (ms): the cache entry's time. */
  at: number;
  /** Transitions the fetch itself observed (delivered with this status). */
  events?: PodLifecycleEvent[];
  /** Whole-pod status reads (GetPodStatus) and single container/sandbox reads it made. */
  podReads?: number;
  containerReads?: number;
}

/**
 * Reads a pod's status for delivery; `prev` is what the cache holds, `events` the transitions
 * being delivered (the containers a partial read must cover).
 */
export type PodStatusFetcher = (
  pod: { uid: string; name: string; namespace: string },
  prev: CacheEntry,
  events: readonly PodLifecycleEvent[],
) => Promise<FetchResult>;

export interface PodDelivererOptions {
  store: RecordStore;
  cache: PodCache;
  clock: Clock;
  log: Logger;
  /** The bounded channel into the syncLoop: false when full (the event is discarded). */
  emit: (e: PodLifecycleEvent) => boolean;
  onDiscard?: () => void;
  metrics?: PlegMetrics;
  /** Concurrent status fetches across pods (default 8). */
  concurrency?: number;
}

interface PodSlot {
  running: Promise<void>;
  next?: { promise: Promise<void>; resolve: () => void; fetcher: PodStatusFetcher; full: boolean };
}

export class PodDeliverer {
  /** Pods whose last status fetch failed: retried (and synced with PodSync) by the next relist. */
  readonly reinspect = new Set<string>();
  /** Whole-pod status reads (upstream's per-pod GetPodStatus calls). */
  podReads = 0;
  /** Single container or sandbox status reads (the evented PLEG's partial refreshes). */
  containerReads = 0;
  /** Main-thread time spent on delivery bookkeeping (ms), excluding waits on the runtime. */
  syncMs = 0;
  emitted = 0;
  discarded = 0;
  /** Whether the most recent emit found the channel full (evented health). */
  lastEmitFailed = false;
  private readonly slots = new Map<string, PodSlot>();
  private active = 0;
  private readonly queue: (() => void)[] = [];
  private readonly limit: number;

  constructor(private readonly opts: PodDelivererOptions) {
    this.limit = Math.max(1, opts.concurrency ?? 8);
  }

  /**
   * Delivers the pod's pending events (refreshing its status with `fetcher` first); resolves
   * when done. `full` marks a fetcher that reads the whole pod: it wins over a partial one
   * when requests for a pod queue up behind a running delivery.
   */
  request(uid: string, fetcher: PodStatusFetcher, full: boolean): Promise<void> {
    const slot = this.slots.get(uid);
    if (!slot) return this.start(uid, fetcher);
    if (slot.next) {
      if (full || !slot.next.full) {
        slot.next.fetcher = fetcher;
        slot.next.full ||= full;
      }
      return slot.next.promise;
    }
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    slot.next = { promise, resolve, fetcher, full };
    return promise;
  }

  /** Pods with a delivery running or queued. */
  get inFlight(): number {
    return this.slots.size;
  }

  private start(uid: string, fetcher: PodStatusFetcher): Promise<void> {
    const running = this.run(uid, fetcher).finally(() => this.advance(uid));
    this.slots.set(uid, { running });
    return running;
  }

  private advance(uid: string): void {
    const next = this.slots.get(uid)?.next;
    if (!next) {
      this.slots.delete(uid);
      return;
    }
    void this.start(uid, next.fetcher).then(next.resolve, next.resolve);
  }

  private async acquire(): Promise<void> {
    if (this.active < this.limit) {
      this.active++;
      return;
    }
    await new Promise<void>((r) => this.queue.push(r));
  }

  private release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.active--;
  }

  private async run(uid: string, fetcher: PodStatusFetcher): Promise<void> {
    await this.acquire();
    try {
      await this.deliver(uid, fetcher);
    } finally {
      this.release();
    }
  }

  private async deliver(uid: string, fetcher: PodStatusFetcher): Promise<void> {
    const { store, cache, log } = this.opts;
    let t = performance.now();
    const d: DirtyPod | undefined = store.dirty.get(uid);
    store.dirty.delete(uid);
    const events = d ? d.events : [];
    const wasReinspect = this.reinspect.has(uid);
    const pod = store.pods.get(uid);
    const name = pod?.name || d?.name || '';
    const namespace = pod?.namespace || d?.namespace || '';
    cache.markPending(uid);
    const prev = cache.get(uid);
    this.syncMs += performance.now() - t;
    let res: FetchResult;
    try {
      res = await fetcher({ uid, name, namespace }, prev, events);
    } catch (err) {
      t = performance.now();
      log.warn('PLEG: failed to get pod status; will retry on the next relist', { pod: `${namespace}/${name}`, podUID: uid, err: (err as Error).message });
      this.reinspect.add(uid);
      if (!cache.set(uid, undefined, err as Error, this.opts.clock.now())) cache.clearPending(uid);
      // The events wait for a status that shows them.
      const back = store.markDirty(uid);
      back.events.unshift(...events);
      this.syncMs += performance.now() - t;
      return;
    }
    t = performance.now();
    this.podReads += res.podReads ?? 0;
    this.containerReads += res.containerReads ?? 0;
    this.reinspect.delete(uid);
    if (res.events) for (const e of res.events) events.push(e);
    if (!res.status) {
      // Gone from the runtime: readers fall back to an empty status.
      cache.delete(uid);
    } else if (!cache.set(uid, preservePodIPs(res.status, prev.status), undefined, res.at)) {
      cache.clearPending(uid);
    }
    // A pod inspected for no container event (a retry) still gets a sync.
    if (events.length === 0 && wasReinspect && res.status) events.push({ id: uid, type: 'PodSync' });
    this.emitAll(events);
    this.syncMs += performance.now() - t;
  }

  private emitAll(events: readonly PodLifecycleEvent[]): void {
    for (const e of events) {
      // upstream filters ContainerChanged: not reliable, and nothing consumes it
      if (e.type === 'ContainerChanged') continue;
      if (this.opts.emit(e)) {
        this.emitted++;
        this.lastEmitFailed = false;
        continue;
      }
      this.discarded++;
      this.lastEmitFailed = true;
      this.opts.metrics?.discardEvents.inc();
      this.opts.onDiscard?.();
      this.opts.log.error('Event channel is full, discard this relist() cycle event', { podUID: e.id, event: e.type });
    }
  }
}
