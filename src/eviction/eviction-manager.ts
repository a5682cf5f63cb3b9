// The eviction manager (upstream: pkg/kubelet/eviction managerImpl): every monitoring period
// (or at once when a memcg threshold notification fires) it observes the signals, keeps the
// thresholds met (grace periods, min-reclaim) and the node pressure conditions (transition
// period), reclaims node-level resources first, and otherwise evicts one pod per pass: the
// first of the ranking for the starved resource.

import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { getPodQOS } from '../api/qos.js';
import { Quantity, parseQuantity } from '../api/quantity.js';
import type { Counter, Histogram, Registry } from '../metrics/registry.js';
import { isMirrorPod, SYSTEM_CRITICAL_PRIORITY } from '../runtime/resources.js';
import type { Summary, PodStats } from '../stats/summary.js';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import {
  EVICTION_REASON,
  SIGNAL_TO_RESOURCE,
  TAINT_NODE_MEMORY_PRESSURE,
  containerMessage,
  nodeConditionMessage,
  nodeLowMessage,
  thresholdMetMessage,
  thresholdQuantity,
  type NodeConditionType,
  type Signal,
  type SignalObservations,
  type StarvedResource,
  type Threshold,
} from './api.js';
import { declaresLocalStorageLimits, localStorageViolation } from './local-storage.js';
import { diskStatsToMeasure, rankPods } from './ranking.js';
import { makeSignalObservations } from './signals.js';
import {
  isHardThreshold,
  mergeThresholds,
  nodeConditionsLastObservedAt,
  nodeConditionsObservedSince,
  nodeConditionsOf,
  thresholdsFirstObservedAt,
  thresholdsMet,
  thresholdsMetGracePeriod,
} from './thresholds.js';

/** upstream: evictionMonitoringPeriod (the housekeeping interval). */
export const EVICTION_MONITORING_PERIOD_MS = 10_000;
/** upstream: podCleanupTimeout / podCleanupPollFreq. */
export const POD_CLEANUP_TIMEOUT_MS = 30_000;
export const POD_CLEANUP_POLL_MS = 1_000;
/** upstream: notifierRefreshInterval, the least time between re-armings of a memcg threshold. */
export const NOTIFIER_REFRESH_INTERVAL_MS = 10_000;
/** After a memcg notification whose pass found no memory threshold met, the one re-check's delay. */
export const NOTIFICATION_RECHECK_MS = 100;
/** upstream: immediateEvictionGracePeriodSeconds, the grace of a hard eviction. */
export const IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS = 1;

/** What EvictionHost.observe gives of one snapshot. */
export interface ObservedStats {
  /** The node, and the pods asked for. */
  summary: Summary;
  podsWorkingSetBytes: bigint;
  /** The same snapshot's Summary of every pod. */
  full(): Summary;
}

/** Node-level reclaim (upstream nodeReclaimFunc): container GC, image GC. */
export type NodeReclaimFunc = () => Promise<void>;

/** What the manager needs from the kubelet. */
export interface EvictionHost {
  /** Pods admitted and not yet terminated (upstream activePodsFunc). */
  activePods(): Pod[];
  /** A Summary: `fresh` reads now, else the housekeeping snapshot may serve. */
  summary(fresh: boolean): Promise<Summary>;
  /**
   * One snapshot (as summary(fresh) reads it) seen as a pass needs it: the node with only the
   * stats of `pods` (those a local storage limit applies to), every pod's working set summed,
   * and the whole Summary built only when asked (a ranking). At 1000 pods every pod's stats
   * every 10 s were most of a pass's cost. Absent: summary() serves.
   */
  observe?(fresh: boolean, pods: ReadonlySet<string>): Promise<ObservedStats>;
  /**
   * A Summary whose per-pod disk figures (volumes, logs, writable layers) were measured now,
   * not taken from the accounting cache: a disk ranking must not rank a pod by the empty
   * volume it had before it filled the disk. Absent: summary(true) serves.
   */
  diskSummary?(): Promise<Summary>;
  /**
   * Kills the pod with this grace (s), Failed with reason Evicted and this message, and a
   * DisruptionTarget condition unless `disruptionTarget` is false (local storage limits).
   */
  evictPod(pod: Pod, gracePeriodSeconds: number, message: string, opts?: { disruptionTarget?: boolean }): void;
  /** The evicted pod's containers are gone and its resources returned (upstream podCleanedUpFunc). */
  podCleanedUp(pod: Pod): boolean;
  recordEvent(pod: Pod, type: 'Normal' | 'Warning', reason: string, message: string): void;
}

/** Arms memcg usage thresholds; the owner's callback runs when usage crosses one. */
export interface MemcgThresholdNotifier {
  /** `cgroup` '' is the root cgroup (memory.available), else the pods cgroup's name (allocatableMemory.available). */
  setThreshold(key: string, cgroup: string, usageBytes: bigint): void;
  close(): void;
}

export interface EvictionManagerOptions {
  host: EvictionHost;
  clock: Clock;
  log: Logger;
  thresholds: Threshold[];
  /** ms, upstream evictionPressureTransitionPeriod. */
  pressureTransitionPeriodMs: number;
  /** s, upstream evictionMaxPodGracePeriod (soft evictions). */
  maxPodGracePeriodSeconds: number;
  /** For allocatableMemory.available: node memory capacity and the allocatable reservation. */
  allocatableMemory?: { capacity: bigint; reserved: bigint };
  /** The pods cgroup's name (`/kubepods`), where allocatableMemory.available's notifier goes. */
  podsCgroupName?: string;
  /** Whether the images live on their own filesystem (decides which reclaim runs for which signal). */
  dedicatedImageFs?: boolean;
  containerGC?: NodeReclaimFunc;
  imageGC?: NodeReclaimFunc;
  /** Builds the memcg notifier; its callback is the manager's trigger. Undefined: polling only. */
  memcgNotifier?: (onCross: (key: string) => void) => MemcgThresholdNotifier | undefined;
  registry?: Registry;
  monitoringPeriodMs?: number;
  /** Pods the manager must never evict (default: system-critical priority, mirror pods). */
  isCritical?: (pod: Pod) => boolean;
  /** upstream localStorageCapacityIsolation (default true): enforce emptyDir sizeLimit and ephemeral-storage limits. */
  localStorageCapacityIsolation?: boolean;
}

export interface AdmitResult {
  admit: boolean;
  reason?: string;
  message?: string;
}

/** The outcome of one pass (tests and the benchmark read it). */
export interface SynchronizeResult {
  evicted?: Pod;
  /** Every pod the pass evicted (local storage limits may evict several). */
  evictedPods?: Pod[];
  signal?: Signal;
  reclaimedNodeLevel?: boolean;
  /** Why the pass ended (observation, threshold met, ...). */
  thresholdsMet: Threshold[];
}

/**
 * upstream's criticality without its static-pod clause: upstream's documentation lets the
 * kubelet evict static pods (self healing), and a standalone kubelet runs nothing else.
 */
export function defaultIsCritical(pod: Pod): boolean {
  return isMirrorPod(pod) || (typeof pod.spec.priority === 'number' && pod.spec.priority >= SYSTEM_CRITICAL_PRIORITY);
}

const bytesQ = (v: bigint): string => Quantity.fromValue(v, 'BinarySI').toString();
const countQ = (v: bigint): string => Quantity.fromValue(v, 'DecimalSI').toString();

/** Memory first, then the rest; signals without a resource last (upstream byEvictionPriority). */
function byEvictionPriority(ts: Threshold[]): Threshold[] {
  const rank = (t: Threshold): number => (t.signal === 'memory.available' || t.signal === 'allocatableMemory.available' ? 0 : 1);
  return [...ts].sort((a, b) => rank(a) - rank(b));
}

export class EvictionManager {
  readonly #o: EvictionManagerOptions;
  readonly #period: number;
  readonly #isCritical: (pod: Pod) => boolean;
  #thresholdsMet: Threshold[] = [];
  #firstObservedAt = new Map<string, number>();
  #conditions: NodeConditionType[] = [];
  #conditionsLastObservedAt = new Map<NodeConditionType, number>();
  #lastObservations: SignalObservations = new Map();
  #notifier?: MemcgThresholdNotifier;
  #notifierArmedAt = -Infinity;
  #timer?: Timer;
  #recheck?: Timer;
  #running = false;
  #busy?: Promise<SynchronizeResult | undefined>;
  #rerun?: { fresh: boolean };
  #waitingCleanup?: Pod[];
  readonly #evictions?: Counter;
  readonly #statsAge?: Histogram;
  /** Observers of each pass (the benchmark times decisions with it). */
  onSynchronize?: (r: SynchronizeResult, reason: string) => void;

  constructor(opts: EvictionManagerOptions) {
    this.#o = opts;
    this.#period = opts.monitoringPeriodMs ?? EVICTION_MONITORING_PERIOD_MS;
    this.#isCritical = opts.isCritical ?? defaultIsCritical;
    if (opts.registry) {
      this.#evictions = opts.registry.counter({
        name: 'kubelet_evictions',
        help: 'Cumulative number of pod evictions by eviction signal',
        labelNames: ['eviction_signal'],
      });
      this.#statsAge = opts.registry.histogram({
        name: 'kubelet_eviction_stats_age_seconds',
        help: 'Time between when stats are collected, and when pod is evicted based on those stats by eviction signal',
        labelNames: ['eviction_signal'],
      });
    }
  }

  /** Starts the monitoring loop (and the memcg notifier when one is given). */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#notifier = this.#o.memcgNotifier?.((key) => this.trigger(`${key} memcg threshold crossed`));
    this.#o.log.info('Eviction manager: starting control loop', {
      thresholds: this.#o.thresholds.length,
      memcgNotification: this.#notifier !== undefined,
    });
    this.#schedule(0);
  }

  stop(): void {
    this.#running = false;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#recheck?.cancel();
    this.#recheck = undefined;
    this.#notifier?.close();
    this.#notifier = undefined;
  }

  /** The node pressure conditions now (the node-status setters read them). */
  nodeConditions(): readonly NodeConditionType[] {
    return this.#conditions;
  }

  /** The three node pressure flags (the node status manager's `pressure` source). */
  pressure(): { memory: boolean; disk: boolean; pid: boolean } {
    return { memory: this.isUnderMemoryPressure(), disk: this.isUnderDiskPressure(), pid: this.isUnderPIDPressure() };
  }

  isUnderMemoryPressure(): boolean {
    return this.#conditions.includes('MemoryPressure');
  }

  isUnderDiskPressure(): boolean {
    return this.#conditions.includes('DiskPressure');
  }

  isUnderPIDPressure(): boolean {
    return this.#conditions.includes('PIDPressure');
  }

  /** The signals of the last pass. */
  observations(): SignalObservations {
    return this.#lastObservations;
  }

  /** upstream Admit: under pressure only critical pods (and, under memory pressure alone, non-BestEffort ones) are admitted. */
  admit(pod: Pod): AdmitResult {
    const conds = this.#conditions;
    if (conds.length === 0) return { admit: true };
    if (this.#isCritical(pod)) return { admit: true };
    if (conds.length === 1 && conds[0] === 'MemoryPressure') {
      if (getPodQOS(pod) !== 'BestEffort') return { admit: true };
      const tolerates = (pod.spec.tolerations ?? []).some((t) =>
        (t.effect === undefined || t.effect === '' || t.effect === 'NoSchedule') &&
        ((t.operator === 'Exists' && (t.key === undefined || t.key === '' || t.key === TAINT_NODE_MEMORY_PRESSURE)) ||
          (t.key === TAINT_NODE_MEMORY_PRESSURE && (t.operator === undefined || t.operator === 'Equal') && (t.value ?? '') === '')));
      if (tolerates) return { admit: true };
    }
    return { admit: false, reason: EVICTION_REASON, message: nodeConditionMessage(conds) };
  }

  /** Runs a pass now (a memcg notification); a pass in flight is followed by one more. */
  trigger(reason: string): void {
    if (!this.#running) return;
    this.#o.log.v(2).info('Eviction manager: notification', { reason });
    void this.#run(true, reason).then((r) => {
      // The kernel signals on its charge counter, which runs a per-CPU batch ahead of the pages
      // in use: a pass right at the crossing can read usage a little short. Look once more.
      if (!this.#running || r?.thresholdsMet.some((t) => SIGNAL_TO_RESOURCE[t.signal] === 'memory')) return;
      this.#recheck?.cancel();
      this.#recheck = this.#o.clock.setTimeout(() => {
        this.#recheck = undefined;
        void this.#run(true, `${reason} (recheck)`);
      }, NOTIFICATION_RECHECK_MS);
    });
  }

  #schedule(ms: number): void {
    this.#timer?.cancel();
    if (!this.#running) return;
    this.#timer = this.#o.clock.setTimeout(() => void this.#tick(), ms);
  }

  async #tick(): Promise<void> {
    this.#timer = undefined;
    await this.#run(false, 'housekeeping');
    this.#schedule(this.#period);
  }

  /**
   * One pass at a time; a request during a pass runs once after it. A pass that evicted holds
   * every other one (the loop's, a notification's) until the evicted pods are cleaned up: until
   * then the stats still count what they hold, and a pass would evict the next pod for it.
   */
  #run(fresh: boolean, reason: string): Promise<SynchronizeResult | undefined> {
    if (this.#busy) {
      this.#rerun = { fresh: fresh || (this.#rerun?.fresh ?? false) };
      return this.#busy;
    }
    this.#busy = this.synchronize(fresh, reason)
      .catch((err: unknown) => {
        this.#o.log.error('Eviction manager: failed to synchronize', { err: (err as Error).message });
        return undefined;
      })
      .then(async (r) => {
        if (r?.evicted && this.#running) await this.#waitForPodCleanup(r.evictedPods ?? [r.evicted]);
        return r;
      })
      .finally(() => {
        this.#busy = undefined;
        const again = this.#rerun;
        this.#rerun = undefined;
        if (again && this.#running) void this.#run(again.fresh, 'rerun');
      });
    return this.#busy;
  }

  async #waitForPodCleanup(pods: Pod[]): Promise<void> {
    this.#waitingCleanup = pods;
    const deadline = this.#o.clock.now() + POD_CLEANUP_TIMEOUT_MS;
    try {
      while (this.#running && this.#o.clock.now() < deadline) {
        if (pods.every((p) => this.#o.host.podCleanedUp(p))) {
          this.#o.log.info('Eviction manager: pods successfully cleaned up', { pods: pods.map(podFullName) });
          return;
        }
        await this.#o.clock.sleep(POD_CLEANUP_POLL_MS);
      }
      this.#o.log.warn('Eviction manager: timed out waiting for pods to be cleaned up', { pods: pods.map(podFullName) });
    } finally {
      this.#waitingCleanup = undefined;
    }
  }

  /** One upstream synchronize pass; returns what it decided. */
  async synchronize(fresh = true, reason = 'manual'): Promise<SynchronizeResult> {
    const { host, clock, log } = this.#o;
    const configured = this.#o.thresholds;
    const localStorage = this.#o.localStorageCapacityIsolation !== false;
    if (configured.length === 0 && !localStorage) return { thresholdsMet: [] };
    // the pods a local storage rule can evict: only they declare a limit one checks
    const storagePods = localStorage ? host.activePods().filter(declaresLocalStorageLimits) : [];
    let summary: Summary;
    let full: () => Summary;
    let podsWorkingSetBytes: bigint | undefined;
    if (host.observe) {
      const observed = await host.observe(fresh, new Set(storagePods.map((p) => p.metadata.uid!)));
      summary = observed.summary;
      podsWorkingSetBytes = observed.podsWorkingSetBytes;
      let whole: Summary | undefined;
      full = () => (whole ??= observed.full());
    } else {
      summary = await host.summary(fresh);
      full = () => summary;
    }
    const now = clock.now();
    const observations = makeSignalObservations({ summary, now, allocatableMemory: this.#o.allocatableMemory, podsWorkingSetBytes });
    const statsFunc = podStatsFunc(summary);
    this.#armNotifiers(summary, now);

    let met = thresholdsMet(configured, observations, false);
    // thresholds met before stay met until min-reclaim is reclaimed too
    if (this.#thresholdsMet.length) met = mergeThresholds(met, thresholdsMet(this.#thresholdsMet, observations, true));
    const firstObserved = thresholdsFirstObservedAt(met, this.#firstObservedAt, now);
    const current = nodeConditionsOf(met);
    if (current.length) log.v(3).info('Eviction manager: node conditions - observed', { conditions: current });
    const lastObserved = nodeConditionsLastObservedAt(current, this.#conditionsLastObservedAt, now);
    const conditions = nodeConditionsObservedSince(lastObserved, this.#o.pressureTransitionPeriodMs, now);
    const due = thresholdsMetGracePeriod(met, firstObserved, now);

    this.#conditions = conditions;
    this.#conditionsLastObservedAt = lastObserved;
    this.#firstObservedAt = firstObserved;
    this.#thresholdsMet = due;
    this.#lastObservations = observations;
    const result: SynchronizeResult = { thresholdsMet: due };
    const done = (r: SynchronizeResult): SynchronizeResult => {
      this.onSynchronize?.(r, reason);
      return r;
    };
    // upstream: local storage limits come first, and an eviction for them ends the pass
    if (localStorage) {
      const evicted = this.#localStorageEviction(storagePods, statsFunc);
      if (evicted.length > 0) return done({ ...result, evicted: evicted[0], evictedPods: evicted });
    }
    if (due.length === 0) return done(result);

    const toReclaim = byEvictionPriority(due).find((t) => SIGNAL_TO_RESOURCE[t.signal] !== undefined);
    if (!toReclaim) return done(result);
    const resource = SIGNAL_TO_RESOURCE[toReclaim.signal];
    result.signal = toReclaim.signal;
    log.warn('Eviction manager: attempting to reclaim', { resourceName: resource, signal: toReclaim.signal });

    if (await this.#reclaimNodeLevelResources(toReclaim.signal, resource)) {
      log.info('Eviction manager: able to reduce resource pressure without evicting pods.', { resourceName: resource });
      result.reclaimedNodeLevel = true;
      return done(result);
    }

    const active = host.activePods();
    if (active.length === 0) {
      log.error('Eviction manager: eviction thresholds have been met, but no pods are active to evict');
      return done(result);
    }
    // disk: rank on figures measured now (the accounting cache may predate the pod that filled it)
    const rankStats = (resource === 'ephemeral-storage' || resource === 'inodes') && host.diskSummary ? podStatsFunc(await host.diskSummary()) : podStatsFunc(full());
    const ranked = rankPods(resource, active, rankStats, diskStatsToMeasure(toReclaim.signal, this.#o.dedicatedImageFs ?? false));
    log.info('Eviction manager: pods ranked for eviction', { pods: ranked.map(podFullName) });
    for (const pod of ranked) {
      let grace = IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS;
      if (!isHardThreshold(toReclaim)) {
        grace = this.#o.maxPodGracePeriodSeconds;
        const own = pod.spec.terminationGracePeriodSeconds;
        if (typeof own === 'number') grace = Math.min(grace, own);
      }
      const message = evictionMessage(resource, pod, rankStats(pod), due, observations);
      if (!this.#evict(pod, grace, message)) continue;
      this.#evictions?.withLabelValues(toReclaim.signal).inc();
      const obs = observations.get(toReclaim.signal);
      if (obs) this.#statsAge?.withLabelValues(toReclaim.signal).observe(Math.max(0, now - obs.time) / 1000);
      result.evicted = pod;
      return done(result);
    }
    log.info('Eviction manager: unable to evict any pods from the node');
    return done(result);
  }

  /** upstream localStorageEviction: every pod over a local storage limit goes, with the immediate grace and no DisruptionTarget. */
  #localStorageEviction(pods: Pod[], statsFunc: (pod: Pod) => PodStats | undefined): Pod[] {
    const evicted: Pod[] = [];
    for (const pod of pods) {
      const stats = statsFunc(pod);
      if (!stats) continue;
      const v = localStorageViolation(pod, stats, { dedicatedImageFs: this.#o.dedicatedImageFs ?? false });
      if (!v || !this.#evict(pod, IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS, v.message, false)) continue;
      this.#evictions?.withLabelValues(v.signal).inc();
      evicted.push(pod);
    }
    return evicted;
  }

  #evict(pod: Pod, grace: number, message: string, disruptionTarget = true): boolean {
    const { host, log } = this.#o;
    if (this.#isCritical(pod)) {
      log.error('Eviction manager: cannot evict a critical pod', { pod: podFullName(pod) });
      return false;
    }
    host.recordEvent(pod, 'Warning', EVICTION_REASON, message);
    try {
      host.evictPod(pod, grace, message, { disruptionTarget });
      log.info('Eviction manager: pod is evicted successfully', { pod: podFullName(pod) });
    } catch (err) {
      log.error('Eviction manager: pod failed to evict', { pod: podFullName(pod), err: (err as Error).message });
    }
    return true;
  }

  /** The reclaim functions for a signal (upstream buildSignalToNodeReclaimFuncs). */
  #reclaimFuncs(signal: Signal): NodeReclaimFunc[] {
    const { containerGC, imageGC, dedicatedImageFs } = this.#o;
    const both = [containerGC, imageGC].filter((f): f is NodeReclaimFunc => f !== undefined);
    switch (signal) {
      case 'nodefs.available':
      case 'nodefs.inodesFree':
        // with its own image filesystem, nodefs holds no images: nothing to reclaim node-wide
        return dedicatedImageFs ? [] : both;
      case 'imagefs.available':
      case 'imagefs.inodesFree':
      case 'containerfs.available':
      case 'containerfs.inodesFree':
        return both;
      default:
        return [];
    }
  }

  /** Runs the node-level reclaim for the signal; true when no threshold is met (with min-reclaim) afterwards. */
  async #reclaimNodeLevelResources(signal: Signal, resource: StarvedResource): Promise<boolean> {
    const funcs = this.#reclaimFuncs(signal);
    if (funcs.length === 0) return false;
    for (const f of funcs) {
      try {
        await f();
      } catch (err) {
        this.#o.log.warn('Eviction manager: unexpected error when attempting to reduce resource pressure', { resourceName: resource, err: (err as Error).message });
      }
    }
    const summary = await this.#o.host.summary(true);
    const observations = makeSignalObservations({ summary, now: this.#o.clock.now(), allocatableMemory: this.#o.allocatableMemory });
    return thresholdsMet(this.#o.thresholds, observations, true).length === 0;
  }

  /**
   * Re-arms the memcg usage thresholds from the latest figures (upstream UpdateThreshold):
   * usage is notified at capacity − threshold + inactive file, i.e. when the working set
   * reaches the eviction threshold.
   */
  #armNotifiers(summary: Summary, now: number): void {
    const n = this.#notifier;
    if (!n || now - this.#notifierArmedAt < NOTIFIER_REFRESH_INTERVAL_MS) return;
    this.#notifierArmedAt = now;
    const seen = new Set<string>();
    for (const t of this.#o.thresholds) {
      if (t.signal !== 'memory.available' && t.signal !== 'allocatableMemory.available') continue;
      const key = `${t.signal}/${isHardThreshold(t) ? 'hard' : 'soft'}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const mem = t.signal === 'memory.available'
        ? summary.node.memory
        : summary.node.systemContainers?.find((c) => c.name === 'pods')?.memory;
      const usage = memcgUsageThreshold(t, mem);
      if (usage === undefined) continue;
      const cgroup = t.signal === 'memory.available' ? '' : (this.#o.podsCgroupName ?? '/kubepods');
      try {
        n.setThreshold(key, cgroup, usage);
      } catch (err) {
        // polling still covers it; the next refresh tries again
        this.#o.log.warn('Eviction manager: failed to arm a memcg threshold', { key, err: (err as Error).message });
      }
    }
  }

  /** The pod the loop waits for after its last eviction, if any. */
  get waitingForCleanup(): Pod | undefined {
    return this.#waitingCleanup?.[0];
  }
}

/** The usage at which the memcg notifies for a memory threshold; undefined without the figures. */
export function memcgUsageThreshold(t: Threshold, mem: { usageBytes?: bigint; workingSetBytes?: bigint; availableBytes?: bigint } | undefined): bigint | undefined {
  if (mem?.usageBytes === undefined || mem.workingSetBytes === undefined || mem.availableBytes === undefined) return undefined;
  const inactiveFile = mem.usageBytes - mem.workingSetBytes;
  const capacity = mem.availableBytes + mem.workingSetBytes;
  // +1: the kernel signals at usage >= threshold while the threshold is met only strictly
  // below it; usage moves in whole charge batches, so equality is common and would be missed
  const usage = capacity - thresholdQuantity(t.value, capacity) + inactiveFile + 1n;
  return usage > 1n ? usage : undefined;
}

/** Per summary object: the stats snapshot is reused until the next housekeeping, so is its index. */
const podStatsIndex = new WeakMap<Summary, Map<string, PodStats>>();

function podStatsFunc(summary: Summary): (pod: Pod) => PodStats | undefined {
  let byUid = podStatsIndex.get(summary);
  if (!byUid) {
    byUid = new Map();
    for (const p of summary.pods) byUid.set(p.podRef.uid, p);
    podStatsIndex.set(summary, byUid);
  }
  const index = byUid;
  return (pod) => index.get(pod.metadata.uid ?? '');
}

/** upstream evictionMessage: the starved resource, the threshold and what is left, and each container over its request. */
export function evictionMessage(resource: StarvedResource, pod: Pod, stats: PodStats | undefined, thresholds: Threshold[], obs: SignalObservations): string {
  let message = nodeLowMessage(resource);
  const t = thresholds.find((x) => SIGNAL_TO_RESOURCE[x.signal] === resource && obs.has(x.signal));
  if (t) {
    const o = obs.get(t.signal)!;
    const fmt = resource === 'memory' || resource === 'ephemeral-storage' ? bytesQ : countQ;
    const q = 'quantity' in t.value ? t.value.text : fmt(thresholdQuantity(t.value, o.capacity));
    message += thresholdMetMessage(q, fmt(o.available));
  }
  if (!stats || (resource !== 'memory' && resource !== 'ephemeral-storage')) return message;
  for (const cs of stats.containers) {
    const spec = pod.spec.containers.find((c) => c.name === cs.name);
    if (!spec) continue;
    const written = spec.resources?.requests?.[resource];
    const requestQ = written === undefined ? undefined : parseQuantity(written);
    const request = requestQ ? requestQ.valueBig() : 0n;
    let usage: bigint | undefined;
    if (resource === 'memory') usage = cs.memory?.workingSetBytes;
    else if (cs.rootfs?.usedBytes !== undefined && cs.logs?.usedBytes !== undefined) usage = cs.rootfs.usedBytes + cs.logs.usedBytes;
    if (usage !== undefined && usage > request) {
      message += containerMessage(cs.name, bytesQ(usage), requestQ ? requestQ.toString() : '0', resource);
    }
  }
  return message;
}

