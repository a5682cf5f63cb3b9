// The status manager (upstream: status.Manager): the latest API status of every pod, versioned.
// Standalone it is the source of truth for the read-only /pods endpoint. With an API client it
// also reports: a status that changed bumps the pod's version, and a batch (after a short
// delay, or at once with batching off) patches pods/<name>/status of every pod whose version
// is ahead of what the API has, with the pod's UID as a precondition. A 409 is retried after a
// fresh GET (a different UID: the pod was replaced, drop it). A terminal phase never goes back. A static pod's status goes to its mirror
// pod. A pod deleted in the API and terminated here gets the final DELETE (grace 0, UID
// precondition) once its last status is in. A failed patch is retried alone with backoff.
// Every sync period a reconcile pass compares each synced status with the API's copy (the pod
// manager's, from the watch) and sends it again where they differ (upstream's needsReconcile:
// another writer changed it, or a patch answered but did not stick).

import { isDeepStrictEqual } from 'node:util';
import type { Pod, PodStatus } from '../api/types.js';
import { isConflict, isNotFound } from '../client/errors.js';
import type { RestClient } from '../client/rest.js';
import { realClock, type Clock, type Timer } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import { rootLogger, type Logger } from '../util/log.js';
import { jsonEqual } from '../util/json-equal.js';

/** upstream: syncPeriod of the status manager (a full pass that retries what failed). */
export const STATUS_SYNC_PERIOD_MS = 10_000;
/** How long changes gather before one batch of patches goes out. */
export const DEFAULT_STATUS_BATCH_DELAY_MS = 500;
/** Patches in flight at once. */
const MAX_IN_FLIGHT = 16;
/** A failed patch or delete is retried after this, doubling up to the sync period. */
const RETRY_INITIAL_MS = 200;
/** Reconcile leaves a status this recently taken by the API to the watch. */
const RECONCILE_SETTLE_MS = 1_000;

export interface StatusManagerOptions {
  client?: RestClient;
  clock?: Clock;
  log?: Logger;
  /** The pod as the kubelet knows it now (the API's copy for API pods), by UID. */
  getPod?: (uid: string) => Pod | undefined;
  /** The mirror pod of a static pod, when the API has one (its status is reported there). */
  mirrorPodOf?: (pod: Pod) => Pod | undefined;
  /** A static pod (from a file or URL): reported through its mirror pod. */
  isStatic?: (pod: Pod) => boolean;
  /** Delay before a batch of patches; 0 turns batching off (every change is patched at once). */
  batchDelayMs?: number;
  syncPeriodMs?: number;
}

interface Entry {
  uid: string;
  namespace: string;
  name: string;
  status: PodStatus;
  version: number;
  /** The version the API has. */
  syncedVersion: number;
  /** The status as the API has it (the last answer), to patch only what differs. */
  apiStatus?: PodStatus;
  /** The UID the API has the status under (the mirror pod's for a static pod). */
  apiUID?: string;
  /** Terminated and deleted in the API: DELETE it once the status is in. */
  finalDelete: boolean;
  /** No retry before this (after a failure), and the delay of the next one. */
  retryAt: number;
  retryDelayMs: number;
  /** When the API last took this entry's status (reconcile leaves fresh ones to the watch). */
  syncedAt: number;
  /** Forget the entry when the API work is done (the pod left the kubelet). */
  forget: boolean;
  inFlight: boolean;
}

export { jsonEqual };

const isTerminal = (phase: string | undefined): boolean => phase === 'Succeeded' || phase === 'Failed';


export class StatusManager {
  private statuses = new Map<string, Entry>();
  private readonly o: StatusManagerOptions;
  private readonly log: Logger;
  private readonly clock: Clock;
  private batchTimer: Timer | undefined;
  private reconcileTimer: Timer | undefined;
  private readonly retryTimers = new Map<string, Timer>();
  private inFlight = 0;
  private readonly waiting: string[] = [];
  private stopped = false;
  /** Counters for tests and the API benchmark. */
  readonly stats = { patches: 0, conflicts: 0, failures: 0, deletes: 0, batches: 0, reconciles: 0 };

  constructor(o: StatusManagerOptions = {}) {
    this.o = o;
    this.clock = o.clock ?? realClock;
    this.log = o.log ?? rootLogger;
  }

  get reporting(): boolean {
    return this.o.client !== undefined;
  }

  setPodStatus(pod: Pod, status: PodStatus): void {
    const uid = pod.metadata.uid!;
    const prev = this.statuses.get(uid);
    let next = status;
    // Never from a terminal phase back to a running one (the API's copy counts too).
    // Never out of a terminal phase, nor from one terminal phase to the other (an evicted pod
    // stays Failed/Evicted): the phase keeps its reason and message.
    const wasStatus = prev?.status ?? (this.o.getPod?.(uid) ?? pod).status;
    const was = wasStatus?.phase;
    if (isTerminal(was) && next.phase !== was) {
      this.log.warn('Refusing to move a pod out of a terminal phase', { pod: `${pod.metadata.namespace}/${pod.metadata.name}`, from: was, to: next.phase });
      const { reason: _r, message: _m, ...rest } = next;
      next = { ...rest, phase: was };
      if (wasStatus?.reason) next.reason = wasStatus.reason;
      if (wasStatus?.message) next.message = wasStatus.message;
    }
    if (prev && jsonEqual(prev.status, next)) return;
    const e: Entry = prev ?? {
      uid, namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name ?? '', status: next, version: 0, syncedVersion: 0,
      finalDelete: false, forget: false, inFlight: false, retryAt: 0, retryDelayMs: 0, syncedAt: 0,
    };
    e.status = next;
    e.version++;
    e.forget = false;
    this.statuses.set(uid, e);
    this.dirty(uid);
  }

  getPodStatus(uid: string): PodStatus | undefined {
    return this.statuses.get(uid)?.status;
  }

  /** The version of a pod's status, and the version the API has (for tests). */
  versions(uid: string): { version: number; synced: number } | undefined {
    const e = this.statuses.get(uid);
    return e && { version: e.version, synced: e.syncedVersion };
  }

  deletePodStatus(uid: string): void {
    const e = this.statuses.get(uid);
    if (!e) return;
    // What the API still has to hear (the last status, the final delete) goes out first.
    if (this.reporting && (e.finalDelete || e.inFlight || e.version > e.syncedVersion)) e.forget = true;
    else this.statuses.delete(uid);
  }

  /** Drops statuses of pods that are no longer known. */
  removeOrphanedStatuses(known: Pick<ReadonlySet<string>, 'has'>): void {
    // deleting while iterating a Map is safe: no copy of 1000 keys every housekeeping pass
    for (const uid of this.statuses.keys()) if (!known.has(uid)) this.deletePodStatus(uid);
  }

  /**
   * The pod was deleted in the API and its containers are gone: once its last status is in,
   * DELETE it with grace 0 and its UID as a precondition (upstream's canBeDeleted).
   */
  podTerminated(pod: Pod): void {
    if (!this.reporting || !pod.metadata.deletionTimestamp || this.o.isStatic?.(pod)) return;
    const uid = pod.metadata.uid!;
    let e = this.statuses.get(uid);
    if (!e) {
      e = {
        uid, namespace: pod.metadata.namespace ?? 'default', name: pod.metadata.name ?? '', status: pod.status ?? {},
        version: 0, syncedVersion: 0, finalDelete: false, forget: true, inFlight: false, retryAt: 0, retryDelayMs: 0, syncedAt: 0,
      };
      this.statuses.set(uid, e);
    }
    e.finalDelete = true;
    this.dirty(uid);
  }

  /**
   * The mirror pods changed: a static pod whose mirror pod is a new object (recreated after a
   * delete) has its status sent again, to the new one.
   */
  mirrorPodsChanged(): void {
    if (!this.reporting) return;
    for (const e of this.statuses.values()) {
      const pod = this.o.getPod?.(e.uid);
      if (!pod || !this.o.isStatic?.(pod)) continue;
      const uid = this.o.mirrorPodOf?.(pod)?.metadata.uid;
      if (uid === undefined || uid === e.apiUID) continue;
      e.syncedVersion = 0;
      this.dirty(e.uid);
    }
  }

  /** Patches every pod whose status is ahead of the API now (tests, shutdown). */
  async flush(): Promise<void> {
    this.batchTimer?.cancel();
    this.batchTimer = undefined;
    await Promise.all([...this.statuses.keys()].filter((uid) => this.needsSync(uid)).map((uid) => this.syncPod(uid)));
  }

  /**
   * upstream's reconcile: a status the API took that the API's copy no longer shows (the pod
   * manager's pod, kept current by the watch) is sent again. Entries synced within the last
   * second are left alone: the watch may not have brought the API's answer yet.
   */
  reconcile(): void {
    if (!this.reporting || this.stopped) return;
    const now = this.clock.now();
    for (const e of this.statuses.values()) {
      if (e.inFlight || e.forget || e.finalDelete || e.version > e.syncedVersion || e.syncedVersion === 0 || now - e.syncedAt < RECONCILE_SETTLE_MS) continue;
      const t = this.target(e);
      if (!t || t.uid !== e.apiUID || t.status === undefined) continue;
      // compared as statusDiff patches (a qosClass the API server set is not ours to remove)
      if (!statusDiff((omitEmpty(t.status) ?? {}) as PodStatus, (omitEmpty(e.status) ?? {}) as PodStatus)) continue;
      this.stats.reconciles++;
      this.log.v(2).info('Pod status is inconsistent with cached status, a reconciliation is triggered', { pod: `${t.namespace}/${t.name}` });
      e.apiStatus = t.status;
      e.syncedVersion = 0;
      this.dirty(e.uid);
    }
  }

  private armReconcile(): void {
    if (this.reconcileTimer || this.stopped || !this.reporting) return;
    this.reconcileTimer = this.clock.setTimeout(() => {
      this.reconcileTimer = undefined;
      this.reconcile();
      if (this.statuses.size) this.armReconcile();
    }, this.o.syncPeriodMs ?? STATUS_SYNC_PERIOD_MS);
  }

  stop(): void {
    this.stopped = true;
    this.batchTimer?.cancel();
    this.reconcileTimer?.cancel();
    this.reconcileTimer = undefined;
    for (const t of this.retryTimers.values()) t.cancel();
    this.retryTimers.clear();
  }

  private needsSync(uid: string): boolean {
    const e = this.statuses.get(uid);
    return !!e && !e.inFlight && (e.version > e.syncedVersion || e.finalDelete) && this.clock.now() >= e.retryAt;
  }

  /** A failed patch or delete: retried alone after a backoff (200 ms doubling to the sync period). */
  private retryLater(e: Entry): void {
    e.retryDelayMs = Math.min(e.retryDelayMs ? e.retryDelayMs * 2 : RETRY_INITIAL_MS, this.o.syncPeriodMs ?? STATUS_SYNC_PERIOD_MS);
    e.retryAt = this.clock.now() + e.retryDelayMs;
    if (this.retryTimers.has(e.uid) || this.stopped) return;
    this.retryTimers.set(e.uid, this.clock.setTimeout(() => {
      this.retryTimers.delete(e.uid);
      if (this.statuses.get(e.uid) === e) this.enqueue(e.uid);
    }, e.retryDelayMs));
  }

  private succeeded(e: Entry): void {
    e.retryAt = 0;
    e.retryDelayMs = 0;
  }

  private dirty(uid: string): void {
    if (!this.reporting || this.stopped) return;
    this.armReconcile();
    const delay = this.o.batchDelayMs ?? DEFAULT_STATUS_BATCH_DELAY_MS;
    if (delay <= 0) {
      this.enqueue(uid);
      return;
    }
    this.batchTimer ??= this.clock.setTimeout(() => {
      this.batchTimer = undefined;
      this.stats.batches++;
      for (const u of this.statuses.keys()) if (this.needsSync(u)) this.enqueue(u);
    }, delay);
  }

  private enqueue(uid: string): void {
    if (this.waiting.includes(uid)) return;
    this.waiting.push(uid);
    this.pump();
  }

  private pump(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.waiting.length) {
      const uid = this.waiting.shift()!;
      if (!this.needsSync(uid)) continue;
      this.inFlight++;
      void this.syncPod(uid).finally(() => {
        this.inFlight--;
        const e = this.statuses.get(uid);
        // Changed while the patch was out: at once with batching off, else with the next batch.
        if (e && this.needsSync(uid)) this.dirty(uid);
        this.pump();
      });
    }
  }

  /** One pod: the patch if its status is ahead, then the final delete if asked. */
  private async syncPod(uid: string): Promise<void> {
    const e = this.statuses.get(uid);
    const client = this.o.client;
    if (!e || !client || e.inFlight) return;
    e.inFlight = true;
    try {
      if (e.version > e.syncedVersion) {
        const done = await this.patchStatus(e, client);
        if (!done) return;
      }
      if (e.finalDelete) await this.deletePod(e, client);
    } finally {
      e.inFlight = false;
      if (e.forget && !e.finalDelete && e.version <= e.syncedVersion && this.statuses.get(uid) === e) this.statuses.delete(uid);
    }
  }

  /** Where the status goes: the pod itself, or a static pod's mirror pod; undefined: nowhere yet. */
  private target(e: Entry): { namespace: string; name: string; uid: string; status?: PodStatus } | undefined {
    const pod = this.o.getPod?.(e.uid);
    if (pod && this.o.isStatic?.(pod)) {
      const mirror = this.o.mirrorPodOf?.(pod);
      if (!mirror?.metadata.uid) return undefined;
      return { namespace: mirror.metadata.namespace ?? e.namespace, name: mirror.metadata.name ?? e.name, uid: mirror.metadata.uid, status: mirror.status };
    }
    return { namespace: e.namespace, name: e.name, uid: e.uid, status: pod?.status };
  }

  /** True when the API has this version (patched, or nothing to patch); false: try again later. */
  private async patchStatus(e: Entry, client: RestClient): Promise<boolean> {
    const t = this.target(e);
    if (!t) return true; // a static pod without a mirror pod yet: its mirror gets it when created
    if (e.apiUID !== t.uid) {
      e.apiUID = t.uid;
      e.apiStatus = t.status;
    }
    const version = e.version;
    const diff = statusDiff(e.apiStatus ?? {}, e.status);
    if (!diff) {
      e.syncedVersion = version;
      return true;
    }
    const path = `/api/v1/namespaces/${encodeURIComponent(t.namespace)}/pods/${encodeURIComponent(t.name)}/status`;
    try {
      this.stats.patches++;
      const res = await client.patch<Pod>(path, 'merge', { metadata: { uid: t.uid }, status: diff }, { maxRetries: 0 });
      e.apiStatus = res?.status ?? e.status;
      e.syncedVersion = version;
      e.syncedAt = this.clock.now();
      this.succeeded(e);
      this.log.v(3).info('Status for pod updated successfully', { pod: `${t.namespace}/${t.name}`, version });
      return true;
    } catch (err) {
      if (isNotFound(err)) {
        // Gone from the API: nothing to report to.
        this.log.v(2).info('Pod not found in the API; dropping its status update', { pod: `${t.namespace}/${t.name}` });
        e.syncedVersion = version;
        e.finalDelete = false;
        return true;
      }
      if (isConflict(err)) {
        this.stats.conflicts++;
        return this.afterConflict(e, t, client, path);
      }
      this.stats.failures++;
      this.log.warn('Failed to update status for pod', { pod: `${t.namespace}/${t.name}`, err: errorMessage(err) });
      this.retryLater(e);
      return false;
    }
  }

  /** A 409: read the pod; the same UID is retried (next pass), another UID means it was replaced. */
  private async afterConflict(e: Entry, t: { namespace: string; name: string; uid: string }, client: RestClient, path: string): Promise<boolean> {
    try {
      const fresh = await client.get<Pod>(path.replace(/\/status$/, ''));
      if (fresh?.metadata?.uid !== t.uid) {
        this.log.info('Pod was replaced in the API; dropping its status update', { pod: `${t.namespace}/${t.name}` });
        e.syncedVersion = e.version;
        e.finalDelete = false;
        return true;
      }
      e.apiStatus = fresh.status;
    } catch (err) {
      if (isNotFound(err)) {
        e.syncedVersion = e.version;
        e.finalDelete = false;
        return true;
      }
    }
    // Retried with the fresh status as the base, after a backoff.
    this.retryLater(e);
    return false;
  }

  private async deletePod(e: Entry, client: RestClient): Promise<void> {
    const path = `/api/v1/namespaces/${encodeURIComponent(e.namespace)}/pods/${encodeURIComponent(e.name)}`;
    try {
      this.stats.deletes++;
      await client.delete(path, { body: { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0, preconditions: { uid: e.uid } }, maxRetries: 0 });
      this.log.info('Pod fully terminated and removed from the API', { pod: `${e.namespace}/${e.name}`, podUID: e.uid });
      e.finalDelete = false;
      this.succeeded(e);
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) {
        // Already gone, or another pod under that name now: nothing of ours to delete.
        e.finalDelete = false;
        return;
      }
      this.stats.failures++;
      this.log.warn('Failed to delete pod from the API', { pod: `${e.namespace}/${e.name}`, err: errorMessage(err) });
      this.retryLater(e);
    }
  }
}

/** A JSON merge patch of status fields: what differs from the API's copy (null removes). */
export function statusDiff(api: PodStatus, next: PodStatus): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  const a = api as Record<string, unknown>;
  const n = next as Record<string, unknown>;
  for (const k of new Set([...Object.keys(a), ...Object.keys(n)])) {
    if (n[k] === undefined) {
      if (a[k] !== undefined && k !== 'qosClass') out[k] = null;
    } else if (!isDeepStrictEqual(a[k], n[k])) {
      out[k] = n[k];
    }
  }
  return Object.keys(out).length ? out : undefined;
}

/**
 * A status as the API server would serialize it for comparison: empty strings, zeros, false,
 * null and empty lists/objects dropped (Go's omitempty), so fields the server leaves out are
 * not taken for a difference.
 */
export function omitEmpty(v: unknown): unknown {
  if (Array.isArray(v)) {
    const out = v.map(omitEmpty).filter((x) => x !== undefined);
    return out.length ? out : undefined;
  }
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const y = omitEmpty(x);
      if (y !== undefined) out[k] = y;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return v === '' || v === 0 || v === false || v === null ? undefined : v;
}
