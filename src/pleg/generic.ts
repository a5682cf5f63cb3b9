// The generic PLEG: relist the runtime every period and diff against what it held, by id,
// in place. Unchanged records are reused (the lean lister does not even build their ids), the
// diff walks a dense array without allocating, and only pods with a transition (or a failed
// inspection to retry) get a status read, with bounded parallelism. Without churn a relist
// makes no per-pod status call at all.

import type { RuntimePod } from '../runtime/runtime-manager.js';
import type { RuntimePodStatus } from '../runtime/types.js';
import type { PlegMetrics } from './metrics.js';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { PodCache } from './cache.js';
import { PlegError } from './errors.js';
import { PodDeliverer, type PodStatusFetcher } from './deliver.js';
import { NON_EXISTENT, RecordStore, type RecordState } from './records.js';
import { RuntimePodsLister, type RelistSource } from './relist-source.js';
import type { ContainerStatusSource } from './status.js';
import { readListedPod, readPartial, readWholePod, type StatusReadDeps } from './status-read.js';
import type { HealthResult, KnownPod, PodLifecycleEvent, PodLifecycleEventGenerator } from './types.js';

export type { PodLifecycleEvent, PodLifecycleEventType } from './types.js';
export { generateEvents, plegState } from './records.js';

/** upstream genericPlegRelistPeriod / genericPlegRelistThreshold. */
export const GENERIC_RELIST_PERIOD_MS = 1_000;
export const GENERIC_RELIST_THRESHOLD_MS = 3 * 60_000;
/** How long a removal is remembered, so a late event for the id is known stale. */
const TOMBSTONE_TTL_MS = 10 * 60_000;

export interface GenericPlegOptions {
  /** Per-pod status for pods that changed (upstream GetPodStatus); getPods is the fallback lister. */
  runtime: { getPodStatus(uid: string, name: string, namespace: string): Promise<RuntimePodStatus>; getPods?(): Promise<Map<string, RuntimePod>> };
  /** Where relists read from (LeanCriLister for the CRI); default: runtime.getPods(). */
  lister?: RelistSource;
  /**
   * Single container / sandbox status reads: with it, a pod the cache holds is refreshed only
   * where it changed; without it, every changed pod is read whole (upstream's way).
   */
  status?: ContainerStatusSource;
  cache: PodCache;
  clock: Clock;
  log: Logger;
  relistPeriodMs: number;
  /** Relist is unhealthy when none started within this (upstream: 3 minutes). */
  relistThresholdMs: number;
  /** Bounded channel into the syncLoop: returns false when full (the event is discarded). */
  emit: (e: PodLifecycleEvent) => boolean;
  /** Called after each relist with its duration and the interval since the previous one (ms). */
  onRelist?: (durationMs: number, intervalMs: number) => void;
  onDiscard?: () => void;
  /** Bound on concurrent per-pod status reads (default GENERIC_STATUS_CONCURRENCY). */
  statusConcurrency?: number;
  metrics?: PlegMetrics;
}

/** What one relist cost, split the way the benchmark reports it. */
export interface RelistStats {
  /** ListPodSandbox + ListContainers, wire and decode (ms). */
  listMs: number;
  /** Of listMs, decoding (ms). */
  decodeMs: number;
  /** The diff (ms). */
  diffMs: number;
  /** Per-pod status reads and delivery, wall time (ms). */
  statusMs: number;
  /** Main-thread PLEG work: diff, delivery bookkeeping, cache (ms). */
  kubeletMs: number;
  totalMs: number;
  /** Whole-pod status reads made (upstream's per-pod GetPodStatus). */
  statusCalls: number;
  /** Single container / sandbox status reads made. */
  containerReads: number;
  /** Events handed to the channel (ContainerChanged excluded). */
  events: number;
  items: number;
  created: number;
  bytes: number;
  pods: number;
}

/**
 * Pods whose status is read at once. A read is one PodSandboxStatus call per pod on a runtime
 * that sends its containers' statuses with it, 1 + one per container on containerd 1.6; 32
 * pods keep enough calls in flight for HTTP/2 to batch them (the first relist after a restart
 * reads every pod) while the runtime holds at most ~32-128 small in-memory lookups at a time.
 */
export const GENERIC_STATUS_CONCURRENCY = 32;

export class GenericPLEG implements PodLifecycleEventGenerator {
  readonly store = new RecordStore();
  readonly deliverer: PodDeliverer;
  readonly lister: RelistSource;
  lastRelistStats?: RelistStats;
  private timer?: Timer;
  private stopped = true;
  private gen = 0;
  /** Start time of the last relist whose lists succeeded (upstream relistTime); 0 before. */
  private relistTime = 0;
  private relistPeriodMs: number;
  private relistThresholdMs: number;
  private running?: Promise<void>;
  private again = false;
  private readonly statusFetch: PodStatusFetcher;
  private readonly reportedInvalid = new Set<string>();

  constructor(private readonly opts: GenericPlegOptions) {
    this.relistPeriodMs = opts.relistPeriodMs;
    this.relistThresholdMs = opts.relistThresholdMs;
    if (opts.lister) this.lister = opts.lister;
    else if (opts.runtime.getPods) this.lister = new RuntimePodsLister(() => opts.runtime.getPods!());
    else throw new PlegError('ERR_PLEG_NO_LISTER', 'GenericPLEG needs a lister or a runtime with getPods()');
    this.deliverer = new PodDeliverer({
      store: this.store,
      cache: opts.cache,
      clock: opts.clock,
      log: opts.log,
      emit: opts.emit,
      onDiscard: opts.onDiscard,
      metrics: opts.metrics,
      concurrency: opts.statusConcurrency ?? GENERIC_STATUS_CONCURRENCY,
    });
    const deps: StatusReadDeps = { store: this.store, clock: opts.clock, runtime: opts.runtime, status: opts.status };
    this.statusFetch = async (pod, prev, events) => {
      if (!this.store.pods.has(pod.uid)) return { at: this.opts.clock.now() };
      // A cached pod is refreshed where its records moved; a new pod, or a retry, is read whole.
      if (!deps.status) return readWholePod(deps, pod, false);
      // The reads below cover only the ids this relist listed, so a container created since
      // the list is missing: the entry is true as of the list, not the read (else a sync that
      // finished in between would take it as fresh and create that container again).
      const listedAt = this.relistTime;
      if (prev.status && events.length > 0) {
        const ids = new Set<string>();
        for (const e of events) if (e.data) ids.add(e.data);
        const r = await readPartial(deps, pod, prev.status, ids, false);
        return { status: r.status, at: Math.min(r.at, listedAt), containerReads: r.reads };
      }
      // Not cached (or a retry): the relist just listed the pod's ids, read each of them (no list calls).
      const p = this.store.pods.get(pod.uid)!;
      const r = await readListedPod(
        deps,
        pod,
        p.sandboxes.map((rec) => rec.id),
        p.containers.map((rec) => rec.id),
      );
      return { status: r.status, at: Math.min(r.at, listedAt), podReads: 1, containerReads: r.reads };
    };
  }

  get cache(): PodCache {
    return this.opts.cache;
  }

  get clock(): Clock {
    return this.opts.clock;
  }

  get log(): Logger {
    return this.opts.log;
  }

  get metrics(): PlegMetrics | undefined {
    return this.opts.metrics;
  }

  get runtime(): GenericPlegOptions['runtime'] {
    return this.opts.runtime;
  }

  /** The status reader relists deliver with. */
  get statusFetcher(): PodStatusFetcher {
    return this.statusFetch;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
  }

  get isRunning(): boolean {
    return !this.stopped;
  }

  /** Changes the period and threshold (upstream Update); takes effect from the next schedule. */
  setRelistDuration(periodMs: number, thresholdMs: number): void {
    const sooner = periodMs < this.relistPeriodMs;
    this.relistPeriodMs = periodMs;
    this.relistThresholdMs = thresholdMs;
    if (sooner && !this.stopped && !this.running) {
      this.timer?.cancel();
      this.schedule(periodMs);
    }
  }

  get relistDuration(): { periodMs: number; thresholdMs: number } {
    return { periodMs: this.relistPeriodMs, thresholdMs: this.relistThresholdMs };
  }

  /** upstream Healthy(): a relist started within the threshold. */
  healthy(): HealthResult {
    if (this.relistTime === 0) return { ok: false, message: 'pleg has yet to be successful' };
    this.opts.metrics?.lastSeen.set(Math.floor(this.relistTime / 1000));
    const elapsed = this.opts.clock.now() - this.relistTime;
    if (elapsed > this.relistThresholdMs) {
      return {
        ok: false,
        message: `pleg was last seen active ${formatGoDuration(elapsed)} ago; threshold is ${formatGoDuration(this.relistThresholdMs)}`,
      };
    }
    return { ok: true, message: 'ok' };
  }

  knownPods(): ReadonlyMap<string, KnownPod> {
    return this.store.pods;
  }

  lastSeen(): number {
    return this.relistTime;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = this.opts.clock.setTimeout(() => {
      this.timer = undefined;
      void this.relist().finally(() => {
        if (!this.timer) this.schedule(this.relistPeriodMs);
      });
    }, ms);
  }

  /** One relist; a call during a running relist runs once more after it (upstream relistLock). */
  relist(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    const run = async (): Promise<void> => {
      try {
        do {
          this.again = false;
          await this.relistOnce();
        } while (this.again);
      } finally {
        this.running = undefined;
      }
    };
    this.running = run();
    return this.running;
  }

  /** Logs once per object that the lists skipped for invalid pod identity labels. */
  private reportInvalidIdentity(why: string): void {
    if (this.reportedInvalid.has(why)) return;
    if (this.reportedInvalid.size >= 1000) this.reportedInvalid.clear();
    this.reportedInvalid.add(why);
    this.opts.log.warn('PLEG: skipping a runtime object whose pod identity labels kubelet-ts could not have written', { why });
  }

    private async relistOnce(): Promise<void> {
    const { clock, cache, metrics, log } = this.opts;
    const p0 = performance.now();
    const t0 = clock.now();
    const interval = this.relistTime ? t0 - this.relistTime : 0;
    if (this.relistTime) metrics?.relistInterval.observe(interval / 1000);
    const gen = ++this.gen;
    const store = this.store;
    let listStats;
    try {
      listStats = await this.lister.list(store, gen);
    } catch (err) {
      log.error('GenericPLEG: Unable to retrieve pods', { err: (err as Error).message });
      metrics?.relistDuration.observe((performance.now() - p0) / 1000);
      return;
    }
    const p1 = performance.now();
    this.relistTime = t0;
    for (const why of listStats.invalid) this.reportInvalidIdentity(why);

    // The diff: walk every record once; removals swap the last record into the slot, which
    // walking backwards has already visited.
    const all = store.all;
    let runningPods = 0;
    let created = 0;
    let running = 0;
    let exited = 0;
    let unknown = 0;
    for (let i = all.length - 1; i >= 0; i--) {
      const rec = all[i]!;
      if (rec.listGen === gen) {
        if (rec.state === NON_EXISTENT && store.removedSince(rec.id, t0)) {
          // removed (by an event) after this relist started: the list was older
          store.discard(rec);
          continue;
        }
        if (rec.listState !== rec.state) store.observe(rec, rec.listState, t0);
      } else if (rec.state !== NON_EXISTENT) {
        // gone from the runtime (unless an event newer than this relist says otherwise)
        store.observe(rec, NON_EXISTENT, t0);
        if (rec.state === NON_EXISTENT) continue;
      } else if (rec.observedAt < t0) {
        store.discard(rec);
        continue;
      }
      const s: RecordState = rec.state;
      if (rec.sandbox) {
        if (s === 'SANDBOX_READY') runningPods++;
      } else if (s === 'CONTAINER_RUNNING') running++;
      else if (s === 'CONTAINER_EXITED') exited++;
      else if (s === 'CONTAINER_CREATED') created++;
      else if (s === 'CONTAINER_UNKNOWN') unknown++;
    }
    if (metrics) {
      metrics.runningPods.set(runningPods);
      metrics.runningContainers.withLabelValues('running').set(running);
      metrics.runningContainers.withLabelValues('exited').set(exited);
      metrics.runningContainers.withLabelValues('created').set(created);
      metrics.runningContainers.withLabelValues('unknown').set(unknown);
    }
    const p2 = performance.now();

    // Status reads and delivery, for changed pods and pods to reinspect only.
    const reads0 = this.deliverer.podReads;
    const creads0 = this.deliverer.containerReads;
    const sync0 = this.deliverer.syncMs;
    const emitted0 = this.deliverer.emitted + this.deliverer.discarded;
    let pending: Promise<void>[] | undefined;
    const deliver = (uid: string): void => {
      (pending ??= []).push(this.deliverer.request(uid, this.statusFetch, true));
    };
    for (const uid of store.dirty.keys()) deliver(uid);
    for (const uid of this.deliverer.reinspect) if (!store.dirty.has(uid)) deliver(uid);
    if (pending) await Promise.all(pending);
    const p3 = performance.now();

    // Every pod is now as fresh as this relist (after the updates above, as upstream).
    cache.updateTime(t0);
    store.pruneTombstones(t0 - TOMBSTONE_TTL_MS);
    metrics?.lastSeen.set(Math.floor(t0 / 1000));
    const p4 = performance.now();
    const totalMs = p4 - p0;
    metrics?.relistDuration.observe(totalMs / 1000);
    this.lastRelistStats = {
      listMs: p1 - p0,
      decodeMs: listStats.decodeMs,
      diffMs: p2 - p1,
      statusMs: p3 - p2,
      kubeletMs: p2 - p1 + (this.deliverer.syncMs - sync0) + (p4 - p3),
      totalMs,
      statusCalls: this.deliverer.podReads - reads0,
      containerReads: this.deliverer.containerReads - creads0,
      events: this.deliverer.emitted + this.deliverer.discarded - emitted0,
      items: listStats.items,
      created: listStats.created,
      bytes: listStats.bytes,
      pods: store.pods.size,
    };
    this.opts.onRelist?.(totalMs, interval);
  }
}

/** Go's time.Duration String() for the health message, e.g. 3m0s, 1m30.5s. */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return '0s';
  const neg = ms < 0;
  let rest = Math.abs(ms);
  if (rest < 1000) return `${neg ? '-' : ''}${+rest.toFixed(3)}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = +(rest / 1000).toFixed(9);
  return `${neg ? '-' : ''}${h ? `${h}h` : ''}${h || m ? `${m}m` : ''}${s}s`;
}
