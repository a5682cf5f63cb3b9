// The evented PLEG (upstream feature gate EventedPLEG): container events from the runtime's
// GetContainerEvents stream move the records; the statuses an event carries (cri-api 0.26+,
// what every runtime implementing the RPC sends) are applied as they are, otherwise the one
// container it names is read. The generic relist stays as a slow fallback (300s), speeds up
// to 1s while the stream is down, and runs in full after every (re)connection; a runtime
// answering UNIMPLEMENTED (containerd 1.6) leaves the generic PLEG alone at 1s. Correctness
// rules upstream's alpha broke on:
//  - an event older than what a record holds (a relist or read saw later) is stale: dropped;
//    a repeated event changes no state and emits nothing (transitions are emitted once);
//  - a status enters the cache only if newer than the entry, stamped no later than the
//    event stream vouches for (not "now"), so a pod worker never takes a status older than
//    its last sync as fresh; a worker the cache cannot serve yet gets a full read on demand;
//  - events wait in the PLEG until the pod's status shows them (then they are emitted).

import { CriError } from '../runtime/cri-errors.js';
import { labeledPodIdentityError } from '../runtime/labels.js';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { PlegMetrics } from './metrics.js';
import type { CacheEntry } from './cache.js';
import type { FetchResult, PodStatusFetcher } from './deliver.js';
import type { GenericPLEG } from './generic.js';
import { NON_EXISTENT, type RecordState, type RuntimeRecord } from './records.js';
import type { ContainerEventSource } from './relist-source.js';
import type { ContainerStatusSource } from './status.js';
import { applyEventStatuses, readPartial, readWholePod, type EventStatuses, type PodRef, type StatusReadDeps } from './status-read.js';
import type { HealthResult, KnownPod, PodLifecycleEvent, PodLifecycleEventGenerator } from './types.js';
import type { ContainerEvent } from './wire-event.js';

/** upstream eventedPlegRelistPeriod / eventedPlegRelistThreshold. */
export const EVENTED_RELIST_PERIOD_MS = 300_000;
export const EVENTED_RELIST_THRESHOLD_MS = 10 * 60_000;
/** Upstream's feature gate name. */
export const EVENTED_PLEG_FEATURE_GATE = 'EventedPLEG';

export interface EventedPlegOptions {
  /** The generic PLEG it falls back on; shares its records, cache and delivery. */
  generic: GenericPLEG;
  events: ContainerEventSource;
  /** Single container / sandbox status reads (partial refreshes). */
  status: ContainerStatusSource;
  /** Generic relist while the stream is up (default 300s / 10min). */
  relistPeriodMs?: number;
  relistThresholdMs?: number;
  /** Generic relist while the stream is down (default 1s / 3min). */
  fallbackRelistPeriodMs?: number;
  fallbackRelistThresholdMs?: number;
  /** Reconnect backoff: initial and cap (default 500ms, 30s), doubling. */
  reconnectInitialMs?: number;
  reconnectMaxMs?: number;
  /** A stream that sends no headers counts as established after this long (a runtime may send none before its first event). */
  readyGraceMs?: number;
}

/** `unsupported`: the runtime does not implement GetContainerEvents (containerd 1.6); generic only. */
type StreamState = 'stopped' | 'connecting' | 'connected' | 'backoff' | 'unsupported';

interface PodWork {
  /** Ids whose status must be re-read. */
  ids: Set<string>;
  /** Statuses the events carried (newer CRI): applied without a read. */
  payloads: EventStatuses[];
  /** Read the whole pod (unknown ids, or a worker asked for freshness). */
  full: boolean;
  name: string;
  namespace: string;
}

/** What a record's state becomes on an event of this type. */
function stateOnEvent(rec: RuntimeRecord, type: ContainerEvent['type']): RecordState | undefined {
  switch (type) {
    case 'CONTAINER_CREATED_EVENT':
      return rec.sandbox ? undefined : 'CONTAINER_CREATED';
    case 'CONTAINER_STARTED_EVENT':
      return rec.sandbox ? 'SANDBOX_READY' : 'CONTAINER_RUNNING';
    case 'CONTAINER_STOPPED_EVENT':
      return rec.sandbox ? 'SANDBOX_NOTREADY' : 'CONTAINER_EXITED';
    case 'CONTAINER_DELETED_EVENT':
      return NON_EXISTENT;
  }
}

export class EventedPLEG implements PodLifecycleEventGenerator {
  readonly stats = { events: 0, stale: 0, duplicate: 0, ignored: 0, connects: 0, disconnects: 0, reconnectRelists: 0 };
  private state: StreamState = 'stopped';
  private stream?: { cancel(): void };
  private backoffMs: number;
  private reconnectTimer?: Timer;
  private readyTimer?: Timer;
  private everConnected = false;
  /** created_at of the newest event received (ms): the stream vouches for everything before it. */
  private watermark = 0;
  private readonly work = new Map<string, PodWork>();
  private readonly toDeliver = new Set<string>();
  private flushScheduled = false;
  private readonly fetcher: PodStatusFetcher;
  private readonly deps: StatusReadDeps;

  constructor(private readonly opts: EventedPlegOptions) {
    this.backoffMs = opts.reconnectInitialMs ?? 500;
    this.fetcher = (pod, prev, events) => this.fetch(pod, prev, events);
    const g = opts.generic;
    this.deps = { store: g.store, clock: g.clock, runtime: g.runtime, status: opts.status };
  }

  private get g(): GenericPLEG {
    return this.opts.generic;
  }

  private get clock(): Clock {
    return this.g.clock;
  }

  private get log(): Logger {
    return this.g.log;
  }

  private get metrics(): PlegMetrics | undefined {
    return this.g.metrics;
  }

  get streamState(): StreamState {
    return this.state;
  }

  start(): void {
    if (this.state !== 'stopped') return;
    this.g.cache.setStaleReadHook((uid, minTime) => this.onStaleRead(uid, minTime));
    // Until the stream is up, the generic relist runs at its normal pace.
    this.g.setRelistDuration(this.opts.fallbackRelistPeriodMs ?? 1_000, this.opts.fallbackRelistThresholdMs ?? 3 * 60_000);
    this.g.start();
    this.state = 'connecting';
    this.connect();
  }

  stop(): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.reconnectTimer?.cancel();
    this.readyTimer?.cancel();
    this.stream?.cancel();
    this.stream = undefined;
    this.g.cache.setStaleReadHook(undefined);
    this.g.stop();
  }

  /** Unhealthy when the generic fallback is (its threshold follows the stream state) or the channel overflowed. */
  healthy(): HealthResult {
    if (this.g.deliverer.lastEmitFailed) return { ok: false, message: 'EventedPLEG: pleg event channel capacity is full' };
    return this.g.healthy();
  }

  knownPods(): ReadonlyMap<string, KnownPod> {
    return this.g.knownPods();
  }

  lastSeen(): number {
    return this.g.lastSeen();
  }

  relist(): Promise<void> {
    return this.g.relist();
  }

  private connect(): void {
    if (this.state === 'stopped') return;
    this.state = 'connecting';
    let ready = false;
    const onReady = (): void => {
      if (ready || this.state !== 'connecting') return;
      ready = true;
      this.readyTimer?.cancel();
      this.onConnected();
    };
    this.stream = this.opts.events.openContainerEvents({
      onReady,
      onEvent: (e) => {
        onReady();
        this.onEvent(e);
      },
      onEnd: (err) => {
        this.readyTimer?.cancel();
        if (err) this.onDisconnected(err, ready);
      },
    });
    this.readyTimer = this.clock.setTimeout(onReady, this.opts.readyGraceMs ?? 250);
  }

  private onConnected(): void {
    this.state = 'connected';
    this.stats.connects++;
    this.metrics?.eventedConnSuccess.inc();
    this.backoffMs = this.opts.reconnectInitialMs ?? 500;
    this.g.setRelistDuration(this.opts.relistPeriodMs ?? EVENTED_RELIST_PERIOD_MS, this.opts.relistThresholdMs ?? EVENTED_RELIST_THRESHOLD_MS);
    // Whatever happened while no stream was open is found by a full relist.
    if (this.everConnected) {
      this.stats.reconnectRelists++;
      this.log.info('Evented PLEG: reconnected to the runtime event stream; relisting');
    }
    this.everConnected = true;
    void this.g.relist();
  }

  private onDisconnected(err: Error, wasReady: boolean): void {
    if (this.state === 'stopped') return;
    this.stream = undefined;
    this.stats.disconnects++;
    this.metrics?.eventedConnErrors.inc();
    if (err instanceof CriError && err.code === 'CRI_UNIMPLEMENTED') {
      // Retrying cannot help (upstream falls back to the generic PLEG after its retries too).
      this.state = 'unsupported';
      this.log.warn('Evented PLEG: the runtime does not implement GetContainerEvents; using the generic PLEG alone', { err: err.message });
      this.g.cache.setStaleReadHook(undefined);
      this.g.setRelistDuration(this.opts.fallbackRelistPeriodMs ?? 1_000, this.opts.fallbackRelistThresholdMs ?? 3 * 60_000);
      if (wasReady) void this.g.relist();
      return;
    }
    this.log.warn('Evented PLEG: container event stream failed; falling back to relisting until it reconnects', {
      err: err.message,
      retryIn: `${this.backoffMs}ms`,
    });
    // The generic relist carries the node until the stream is back (upstream relists on every failure).
    this.g.setRelistDuration(this.opts.fallbackRelistPeriodMs ?? 1_000, this.opts.fallbackRelistThresholdMs ?? 3 * 60_000);
    if (wasReady) void this.g.relist();
    this.state = 'backoff';
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.opts.reconnectMaxMs ?? 30_000);
    this.reconnectTimer = this.clock.setTimeout(() => this.connect(), delay);
  }

  /** One runtime event: move the record, queue the refresh, deliver once the status shows it. */
  onEvent(e: ContainerEvent): void {
    this.stats.events++;
    const now = this.clock.now();
    this.metrics?.eventedConnLatency.observe(Math.max(0, now - e.createdAt) / 1000);
    if (e.createdAt > this.watermark) this.watermark = e.createdAt;
    const pod = e.pod;
    if (!pod) {
      // upstream ignores these too: the sandbox was gone when the runtime built the event
      this.stats.ignored++;
      this.log.v(4).info('Evented PLEG: event without pod sandbox metadata; ignored', { containerID: e.containerId, type: e.type });
      return;
    }
    const bad = labeledPodIdentityError(pod.uid, pod.name, pod.namespace);
    if (bad !== undefined) {
      // not a pod kubelet-ts could have made: its identity must never reach a path or a cgroup
      this.stats.ignored++;
      this.log.warn('Evented PLEG: event for a sandbox with invalid pod identity; ignored', { containerID: e.containerId, why: bad });
      return;
    }
    const store = this.g.store;
    const rec = store.get(e.containerId);
    // A runtime on cri-api 0.26+ sends the pod's statuses with the event: no read needed.
    const carried: EventStatuses | undefined = e.containerStatuses
      ? { at: e.createdAt, eventId: e.containerId, sandbox: e.sandboxStatus, containers: e.containerStatuses }
      : undefined;
    if (!rec) {
      if (store.removedSince(e.containerId, e.createdAt) || e.type === 'CONTAINER_DELETED_EVENT') {
        this.stats.stale++;
        return;
      }
      if (carried) {
        this.queue(pod.uid, pod.name, pod.namespace, undefined, false, carried);
        return;
      }
      // An id never seen: a pod the cache holds reads just that id (container, else sandbox); a new pod is read whole.
      const known = this.g.cache.get(pod.uid).status !== undefined;
      this.queue(pod.uid, pod.name, pod.namespace, known ? e.containerId : undefined, !known);
      return;
    }
    if (e.createdAt < rec.observedAt) {
      this.stats.stale++;
      return;
    }
    const next = stateOnEvent(rec, e.type);
    if (next === undefined || next === rec.state) {
      this.stats.duplicate++;
      return;
    }
    store.observe(rec, next, e.createdAt);
    this.queue(pod.uid, pod.name, pod.namespace, carried || next === NON_EXISTENT ? undefined : rec.id, false, carried);
  }

  private queue(uid: string, name: string, namespace: string, id: string | undefined, full: boolean, carried?: EventStatuses): void {
    let w = this.work.get(uid);
    if (!w) this.work.set(uid, (w = { ids: new Set(), payloads: [], full: false, name, namespace }));
    if (id) w.ids.add(id);
    if (carried) w.payloads.push(carried);
    w.full ||= full;
    this.g.cache.markPending(uid);
    // Deliveries start on the next turn of the loop, so the events already read off the socket
    // (a restart's created/started/deleted come together) share one status read.
    this.toDeliver.add(uid);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        const uids = [...this.toDeliver];
        this.toDeliver.clear();
        if (this.state === 'stopped') return;
        for (const u of uids) void this.g.deliverer.request(u, this.fetcher, false);
      });
    }
  }

  /** A pod worker waits for a status newer than the cache has: read the pod now. */
  private onStaleRead(uid: string, _minTime: number): void {
    if (this.state === 'stopped' || this.state === 'unsupported') return;
    const p = this.g.store.pods.get(uid);
    this.queue(uid, p?.name ?? '', p?.namespace ?? '', undefined, true);
  }

  private async fetch(pod: PodRef, prev: CacheEntry, events: readonly PodLifecycleEvent[]): Promise<FetchResult> {
    const work = this.work.get(pod.uid);
    this.work.delete(pod.uid);
    const ref = { uid: pod.uid, name: pod.name || work?.name || '', namespace: pod.namespace || work?.namespace || '' };
    const watermark = this.watermark;
    const payloads = work?.payloads ?? [];
    if (work?.full || (!prev.status && payloads.length === 0)) return readWholePod(this.deps, ref, true);

    // What the events carried first, then a read for each id they did not cover.
    const out: PodLifecycleEvent[] = [];
    const base = prev.status ?? { uid: ref.uid, name: ref.name, namespace: ref.namespace, ips: [], sandboxStatuses: [], containerStatuses: [], timestamp: 0 };
    const applied = applyEventStatuses(this.g.store, ref, base, payloads, out);
    const ids = new Set<string>();
    for (const id of work?.ids ?? []) if (!applied.covered.has(id)) ids.add(id);
    for (const e of events) if (e.data && !applied.covered.has(e.data)) ids.add(e.data);
    const r = ids.size
      ? await readPartial(this.deps, ref, applied.status, ids, true)
      : { status: applied.status, at: this.clock.now(), events: [], reads: 0 };
    for (const e of r.events) out.push(e);
    if (!this.g.store.pods.has(pod.uid)) return { at: r.at, events: out, containerReads: r.reads };
    // What the reads did not touch is as the stream left it: true up to its watermark, unless
    // more events for the pod are already waiting.
    const vouched = this.work.has(pod.uid) ? prev.modified : Math.max(prev.modified, watermark);
    return { status: r.status, at: Math.min(r.at, vouched), events: out, containerReads: r.reads };
  }
}

/** True when the kubelet's feature gates turn the evented PLEG on. */
export function eventedPlegEnabled(featureGates: Record<string, boolean> | undefined): boolean {
  return featureGates?.[EVENTED_PLEG_FEATURE_GATE] === true;
}
