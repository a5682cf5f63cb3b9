// Pod workers (upstream: podWorkers): one serialized worker per pod UID. Updates for a busy
// pod are coalesced (the newest wins; a kill is sticky). A pod moves sync → terminating →
// terminated and never back; a static pod replaced under the same full name waits until the
// old UID has terminated, so two never run at once. A pod added again under a UID whose worker
// is terminating or finished gets a fresh worker once the old one is done (upstream's
// restartRequested). A pod held back by a namesake whose termination keeps failing is told
// which pod it waits on (upstream says nothing: the replacement just stays Pending).

import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { PodCache } from '../pleg/cache.js';
import type { RuntimePodStatus } from '../runtime/types.js';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { syncErrorBackoffMs } from './pod-sync.js';

export type UpdateType = 'create' | 'update' | 'sync' | 'kill';

export interface UpdatePodOptions {
  updateType: UpdateType;
  pod: Pod;
  /** For kill: a grace period that overrides the pod's. */
  gracePeriodOverride?: number;
  /** For kill: the pod was removed from its source (clean everything up after termination). */
  removed?: boolean;
}

export interface PodWorkerHooks {
  /** Returns true when the pod reached a terminal phase (it then terminates). */
  syncPod(pod: Pod, status: RuntimePodStatus): Promise<boolean>;
  /** Kills the pod; may return the runtime's status read after the kill (handed to syncTerminatedPod). */
  syncTerminatingPod(pod: Pod, status: RuntimePodStatus, gracePeriodOverride: number | undefined): Promise<RuntimePodStatus | void>;
  /**
   * `afterKill` true: `status` is what syncTerminatingPod read after its kill, just before.
   * Otherwise it is the cache's entry as it is (no wait for a relist), and the hook must read
   * the runtime itself.
   */
  syncTerminatedPod(pod: Pod, status: RuntimePodStatus, removed: boolean, afterKill: boolean): Promise<void>;
}

type Phase = 'sync' | 'terminating' | 'terminated';

interface WorkerState {
  pod: Pod;
  fullName: string;
  phase: Phase;
  pending?: UpdatePodOptions;
  working: boolean;
  removed: boolean;
  gracePeriodOverride?: number;
  lastSyncTime: number;
  /** What syncTerminatingPod read after its kill, for the terminated step that follows it. */
  afterKill?: RuntimePodStatus;
  /** syncTerminatedPod ran for the terminal (not yet removed) pod. */
  cleanedUp: boolean;
  /** Set once syncTerminatedPod finished for a removed pod: the worker is forgotten. */
  finished: boolean;
  /** The pod was added again while it was being removed: start it afresh once finished. */
  restartWith?: Pod;
  /** A removed pod's failed step is tried again by this timer (no source sends it again). */
  retry?: Timer;
  /** Why the last step failed; cleared when a step succeeds. */
  lastError?: string;
  /** The UID of the namesake this pod was last reported waiting on (onWaiting). */
  waitingOn?: string;
  /** The runtime was searched for this pod's previous instances (previousInstances). */
  previousChecked?: boolean;
}

/** Status reason of a pod held back by a namesake whose termination keeps failing (kubelet-ts's own). */
export const PREVIOUS_POD_NOT_TERMINATED = 'PreviousPodNotTerminated';

/** What a pod held back by a namesake waits on. */
export interface WaitingOn {
  /** The namesake that has not terminated (a static pod's previous UID). */
  pod: Pod;
  /** Why its termination failed, as its last step reported it. */
  error: string;
}

export interface PodWorkersOptions {
  hooks: PodWorkerHooks;
  cache: PodCache;
  clock: Clock;
  log: Logger;
  /** Called when a sync failed and the pod should be retried later. */
  onError?: (pod: Pod, err: Error) => void;
  /**
   * When a removed pod's failed kill or cleanup is tried again (the worker retries it itself:
   * no source or resync sends a removed pod again). Default: upstream's jittered backoff.
   */
  retryBackoffMs?: () => number;
  /** Records an event about a pod (upstream's FailedSync when its status cannot be read). */
  recordEvent?: (pod: Pod, type: 'Normal' | 'Warning', reason: string, message: string) => void;
  /**
   * A pod that cannot start because a namesake (same full name, other UID) has not terminated
   * and that namesake's last step failed: called with what it waits on (again on each update of
   * the waiting pod and each failure of the namesake), and with undefined once the pod starts.
   */
  onWaiting?: (pod: Pod, waitingOn: WaitingOn | undefined) => void;
  /**
   * Before a pod's first sync: what the runtime still runs of an earlier instance of it (a static
   * pod's previous UID, left by another kubelet). Those are killed and removed first; the pod
   * waits for them as for any namesake.
   */
  previousInstances?: (pod: Pod) => Promise<Pod[]>;
  /** Told how long each syncPod took, by the update that asked for it (upstream's kubelet_pod_worker_duration_seconds). */
  onSyncPodDuration?: (updateType: UpdateType, seconds: number) => void;
}

export class PodWorkers {
  private workers = new Map<string, WorkerState>();
  /** UIDs by full name: a sync checks its namesakes, not every worker (1000 pods: 17 syncs/s). */
  private readonly byFullName = new Map<string, Set<string>>();
  private stopped = false;
  /** Resolved when no worker is running (idle()). */
  private idleWaiters: (() => void)[] = [];
  /**
   * When the worker of a removed pod finished, until a relist has covered that time: a pod
   * re-added under the same UID (a static pod put back) first waits for a status read newer
   * than its removal, not one of its first life (the terminated step does not wait for one).
   */
  private readonly removedAt = new Map<string, number>();

  constructor(private readonly opts: PodWorkersOptions) {}

  updatePod(o: UpdatePodOptions): void {
    if (this.stopped) return;
    const uid = o.pod.metadata.uid!;
    let w = this.workers.get(uid);
    if (w && o.updateType === 'create' && (w.finished || (w.removed && w.phase !== 'sync'))) {
      // Re-added under the same UID: a finished worker is replaced now, one still terminating
      // hands over when it finishes (upstream: restartRequested).
      if (w.finished && !w.working) {
        this.forget(uid, w);
        w = undefined;
      } else {
        w.restartWith = o.pod;
        return;
      }
    }
    if (!w) {
      const lastSyncTime = this.removedAt.get(uid) ?? 0;
      this.removedAt.delete(uid);
      w = { pod: o.pod, fullName: podFullName(o.pod), phase: 'sync', working: false, removed: false, lastSyncTime, cleanedUp: false, finished: false };
      this.workers.set(uid, w);
      let names = this.byFullName.get(w.fullName);
      if (!names) this.byFullName.set(w.fullName, (names = new Set()));
      names.add(uid);
    }
    if (w.finished) return;
    if (o.updateType === 'kill') {
      w.restartWith = undefined;
      if (w.phase === 'sync') w.phase = 'terminating';
      w.removed ||= Boolean(o.removed);
      if (o.gracePeriodOverride !== undefined) w.gracePeriodOverride = o.gracePeriodOverride;
      if (w.phase === 'terminated' && w.removed) {
        // Already terminated (terminal pod): run the removal cleanup.
        w.pending = o;
      }
    }
    if (o.updateType !== 'kill' || !w.pending) w.pending = o;
    if (o.updateType !== 'kill') w.pod = o.pod;
    this.kick(uid);
  }

  /** UIDs with a live worker (not finished). */
  knownPods(): string[] {
    const out: string[] = [];
    for (const [uid, w] of this.workers) if (!w.finished) out.push(uid);
    return out;
  }

  /** Each worker not yet finished: its pod, phase and whether its pod was removed from its source. */
  workingPods(): Array<{ pod: Pod; phase: Phase; removed: boolean }> {
    const out: Array<{ pod: Pod; phase: Phase; removed: boolean }> = [];
    for (const w of this.workers.values()) if (!w.finished) out.push({ pod: w.pod, phase: w.phase, removed: w.removed });
    return out;
  }

  isTerminationRequested(uid: string): boolean {
    const w = this.workers.get(uid);
    return w !== undefined && w.phase !== 'sync';
  }

  isTerminated(uid: string): boolean {
    const w = this.workers.get(uid);
    return w !== undefined && w.phase === 'terminated';
  }

  has(uid: string): boolean {
    return this.workers.has(uid);
  }

  /** A worker holds the pod and has not finished (what knownPods() lists). */
  isKnown(uid: string): boolean {
    const w = this.workers.get(uid);
    return w !== undefined && !w.finished;
  }

  /** Forgets finished workers whose pods are no longer desired. */
  forgetFinished(): void {
    this.workers.forEach((w, uid) => {
      if (w.finished && !w.working) this.forget(uid, w);
    });
    // a relist since covers the removal: a new worker's first read is newer anyway
    const relisted = this.opts.cache.globalTimestamp();
    this.removedAt.forEach((t, uid) => {
      if (t <= relisted) this.removedAt.delete(uid);
    });
  }

  /** Resolves when no worker has work in flight or pending (for orderly shutdown and tests). */
  idle(): Promise<void> {
    if (!this.busy()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** No new work starts after this; work in flight finishes or is abandoned by its owner's signal. */
  stop(): void {
    this.stopped = true;
    for (const w of this.workers.values()) {
      w.pending = undefined;
      w.retry?.cancel();
      w.retry = undefined;
    }
    this.notifyIdle();
  }

  private busy(): boolean {
    for (const w of this.workers.values()) if (w.working || (w.pending && !this.stopped)) return true;
    return false;
  }

  private notifyIdle(): void {
    if (this.busy()) return;
    for (const r of this.idleWaiters.splice(0)) r();
  }

  private forget(uid: string, w: WorkerState): void {
    w.retry?.cancel();
    w.retry = undefined;
    this.workers.delete(uid);
    const names = this.byFullName.get(w.fullName);
    names?.delete(uid);
    if (names?.size === 0) this.byFullName.delete(w.fullName);
  }

  /** The other UIDs with a worker under this full name. */
  private namesakes(uid: string, fullName: string): string[] {
    const names = this.byFullName.get(fullName);
    if (!names || names.size < 2) return [];
    return [...names].filter((other) => other !== uid);
  }

  /** The namesake this pod must wait for: one terminating, or removed and not yet terminated. */
  private blockedByOtherUID(uid: string, w: WorkerState): string | undefined {
    if (w.phase !== 'sync') return undefined;
    for (const other of this.namesakes(uid, w.fullName)) {
      const o = this.workers.get(other)!;
      if (!o.finished && o.phase !== 'terminated') {
        if (o.phase === 'terminating' || o.removed) return other;
      }
    }
    return undefined;
  }

  /** Tells the owner what a held-back pod waits on when the namesake's last step failed. */
  private reportWaiting(w: WorkerState, blocker: string): void {
    const o = this.workers.get(blocker);
    if (!o?.lastError || !this.opts.onWaiting) return;
    w.waitingOn = blocker;
    this.opts.onWaiting(w.pod, { pod: o.pod, error: o.lastError });
  }

  private kick(uid: string): void {
    const w = this.workers.get(uid);
    if (this.stopped || !w || w.working || !w.pending) return;
    const blocker = this.blockedByOtherUID(uid, w);
    if (blocker !== undefined) {
      this.reportWaiting(w, blocker);
      return;
    }
    if (w.waitingOn !== undefined) {
      w.waitingOn = undefined;
      this.opts.onWaiting?.(w.pod, undefined);
    }
    w.working = true;
    void this.run(uid, w).finally(() => {
      w.working = false;
      if (w.finished) {
        const again = w.restartWith;
        if (again && this.workers.get(uid) === w) {
          this.forget(uid, w);
          this.updatePod({ updateType: 'create', pod: again });
        }
        // Release any pod waiting on this full name.
        for (const other of this.namesakes(uid, w.fullName)) this.kick(other);
      }
      this.kick(uid);
      this.notifyIdle();
    });
  }

  /** A removed pod's kill or cleanup failed: its worker tries the step again after a backoff. */
  private retryLater(uid: string, w: WorkerState): void {
    if (this.stopped || w.retry) return;
    w.retry = this.opts.clock.setTimeout(() => {
      w.retry = undefined;
      if (this.workers.get(uid) !== w || w.finished) return;
      w.pending ??= { updateType: 'kill', pod: w.pod, removed: true };
      this.kick(uid);
    }, (this.opts.retryBackoffMs ?? syncErrorBackoffMs)());
  }

  private async run(uid: string, w: WorkerState): Promise<void> {
    const updateType = w.pending?.updateType ?? 'sync';
    w.pending = undefined;
    const log = this.opts.log.with({ pod: w.fullName, podUID: uid });
    let failed = false;
    try {
      // A terminated pod's sync reads the runtime itself (it must see every container stopped),
      // so it neither waits for the next relist (a relist period on every delete) nor fails on
      // the cache's last read error.
      const entry = w.phase === 'terminated' ? this.opts.cache.get(uid) : await this.opts.cache.getNewerThan(uid, w.lastSyncTime);
      if (entry.error && w.phase !== 'terminated') {
        this.opts.recordEvent?.(w.pod, 'Warning', 'FailedSync', `error determining status: ${entry.error.message}`);
        throw entry.error;
      }
      const status = entry.status ?? emptyStatus(w.pod);
      if (w.phase === 'sync') {
        if (!w.previousChecked && this.opts.previousInstances) {
          w.previousChecked = true;
          const previous = await this.opts.previousInstances(w.pod);
          if (previous.length > 0 && w.phase === 'sync') {
            for (const p of previous) {
              log.info('Stopping the previous instance of the pod before it starts', { previousUID: p.metadata.uid });
              this.updatePod({ updateType: 'kill', pod: p, removed: true });
            }
            w.pending ??= { updateType: 'sync', pod: w.pod };
            return;
          }
        }
        const start = performance.now();
        const terminal = await this.opts.hooks.syncPod(w.pod, status).finally(() => this.opts.onSyncPodDuration?.(updateType, (performance.now() - start) / 1000));
        if (terminal && w.phase === 'sync') {
          log.info('Pod reached a terminal phase; terminating it');
          w.phase = 'terminating';
          w.pending ??= { updateType: 'sync', pod: w.pod };
        }
        return;
      }
      if (w.phase === 'terminating') {
        w.afterKill = (await this.opts.hooks.syncTerminatingPod(w.pod, status, w.gracePeriodOverride)) ?? undefined;
        w.phase = 'terminated';
        w.pending ??= { updateType: 'sync', pod: w.pod };
        return;
      }
      // Terminated: clean up once, and once more (fully) when the pod is removed.
      if (!w.cleanedUp || (w.removed && !w.finished)) {
        const afterKill = w.afterKill;
        w.afterKill = undefined;
        await this.opts.hooks.syncTerminatedPod(w.pod, afterKill ?? status, w.removed, afterKill !== undefined);
        w.cleanedUp = true;
        if (w.removed) {
          w.finished = true;
          this.removedAt.set(uid, this.opts.clock.now());
        }
      }
    } catch (err) {
      failed = true;
      w.lastError = (err as Error).message;
      log.error('Error syncing pod, skipping', { err: (err as Error).message });
      this.opts.onError?.(w.pod, err as Error);
      if (w.removed) this.retryLater(uid, w);
      // the namesakes held back by this pod learn why they still wait
      if (w.phase !== 'sync' || w.removed) {
        for (const other of this.namesakes(uid, w.fullName)) {
          const ow = this.workers.get(other)!;
          if (ow.pending && !ow.working && this.blockedByOtherUID(other, ow) === uid) this.reportWaiting(ow, uid);
        }
      }
    } finally {
      if (!failed) w.lastError = undefined;
      // As upstream: the next sync waits for a status read after this one finished, so it
      // sees what this sync did (a read taken mid-sync would not).
      w.lastSyncTime = this.opts.clock.now();
    }
  }
}

function emptyStatus(pod: Pod): RuntimePodStatus {
  return {
    uid: pod.metadata.uid!,
    name: pod.metadata.name ?? '',
    namespace: pod.metadata.namespace ?? '',
    ips: [],
    sandboxStatuses: [],
    containerStatuses: [],
    timestamp: 0,
  };
}
