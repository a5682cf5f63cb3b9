// The syncLoop's handlers (upstream: syncLoopIteration and the SyncHandler methods): pod
// updates from the sources, PLEG events through a bounded channel, and the resync tick. Each
// handler only dispatches to the pod workers; nothing here waits on I/O.

import type { Pod, PodStatus } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { getPodQOS } from '../api/qos.js';
import { rejectedStatus, type AdmitResult } from './admission.js';
import type { PodUpdate } from '../sources/pod-config.js';
import { isSyncPodWorthy, type PodLifecycleEvent } from '../pleg/index.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { PodManager } from './pod-manager.js';
import type { PodWorkers } from './pod-workers.js';
import type { WorkQueue } from './work-queue.js';

/** upstream: plegChannelCapacity. */
export const PLEG_CHANNEL_CAPACITY = 1000;

export interface SyncLoopOptions {
  clock: Clock;
  log: Logger;
  podManager: PodManager;
  podWorkers: Pick<PodWorkers, 'updatePod'> & Partial<Pick<PodWorkers, 'isTerminated'>>;
  workQueue: WorkQueue;
  /** False while the runtime is down: no pod is synced then (upstream's runtime state check). */
  runtimeUp(): boolean;
  /** Told of every ContainerRemoved event (the OOM watcher forgets the container). */
  onContainerRemoved?(containerID: string): void;
  /** Admission of a new pod given the active pods already admitted; undefined admits all. */
  admitPod?(pod: Pod, others: Pod[]): AdmitResult;
  /** The pod's latest status (a terminal pod is not active: it no longer counts for admission). */
  podStatus?(uid: string): PodStatus | undefined;
  /** A pod admission refused: record the event and set its Failed status (upstream's rejectPod). */
  rejectPod?(pod: Pod, reason: string, message: string, status: PodStatus): void;
  /** Told after every pod update (the mirror pods follow the static pods). */
  onPodsChanged?(): void;
  /** Runs the PLEG channel's drain after the current batch (default setImmediate). */
  schedule?: (fn: () => void) => void;
}

export class SyncLoop {
  /** When the loop last handled anything (the syncloop health check reads it). */
  lastIteration = 0;
  private readonly plegChannel: PodLifecycleEvent[] = [];
  private drainScheduled = false;
  private readonly schedule: (fn: () => void) => void;
  /** Pods refused at admission: kept in the pod manager, never run. */
  private readonly rejected = new Set<string>();

  constructor(private readonly opts: SyncLoopOptions) {
    this.schedule = opts.schedule ?? ((fn) => void setImmediate(fn));
  }

  private touch(): void {
    this.lastIteration = this.opts.clock.now();
  }

  handlePodUpdate(u: PodUpdate): void {
    this.touch();
    const { podManager, podWorkers, log } = this.opts;
    // upstream admits new pods oldest first, so a later one is the one refused
    const pods = u.op === 'ADD' ? [...u.pods].sort((a, b) => creation(a) - creation(b)) : u.pods;
    for (const pod of pods) {
      const uid = pod.metadata.uid!;
      switch (u.op) {
        case 'ADD':
          log.info('SyncLoop ADD', { source: u.source, pod: podFullName(pod), podUID: uid });
          if (!this.admit(pod)) break;
          podManager.addPod(pod);
          podWorkers.updatePod({ updateType: 'create', pod });
          break;
        case 'UPDATE':
          log.info('SyncLoop UPDATE', { source: u.source, pod: podFullName(pod), podUID: uid });
          podManager.updatePod(pod);
          if (this.rejected.has(uid)) break;
          if (pod.metadata.deletionTimestamp) this.syncPod(pod);
          else podWorkers.updatePod({ updateType: 'update', pod });
          break;
        case 'DELETE':
          // Graceful deletion (the API set deletionTimestamp): the pod stays desired until the
          // final delete removes it; its containers stop within deletionGracePeriodSeconds.
          log.info('SyncLoop DELETE', { source: u.source, pod: podFullName(pod), podUID: uid });
          podManager.updatePod(pod);
          this.opts.workQueue.forget(uid);
          if (!this.rejected.has(uid)) this.killDeleted(pod);
          break;
        case 'REMOVE':
          log.info('SyncLoop REMOVE', { source: u.source, pod: podFullName(pod), podUID: uid });
          podManager.removePod(pod);
          this.rejected.delete(uid);
          this.opts.workQueue.forget(uid);
          podWorkers.updatePod({ updateType: 'kill', pod, removed: true });
          break;
        case 'RECONCILE':
          podManager.updatePod(pod);
          break;
      }
    }
    this.opts.onPodsChanged?.();
  }

  /** A sync for a pod; one deleted in the API is (still) killed instead, never started again. */
  private syncPod(pod: Pod): void {
    const uid = pod.metadata.uid!;
    if (this.rejected.has(uid)) return;
    if (pod.metadata.deletionTimestamp) this.killDeleted(pod);
    else this.opts.podWorkers.updatePod({ updateType: 'sync', pod });
  }

  /** A pod deleted in the API: killed within its deletion grace period, then cleaned up. */
  private killDeleted(pod: Pod): void {
    const grace = pod.metadata.deletionGracePeriodSeconds;
    this.opts.podWorkers.updatePod({ updateType: 'kill', pod, removed: true, ...(grace !== undefined ? { gracePeriodOverride: grace } : {}) });
  }

  /** upstream's canAdmitPod + rejectPod: a refused pod is kept (and reported Failed), never run. */
  private admit(pod: Pod): boolean {
    const { admitPod, podManager } = this.opts;
    if (!admitPod) return true;
    const uid = pod.metadata.uid!;
    const others = podManager.getPods().filter((p) => p.metadata.uid !== uid && this.isActive(p));
    const r = admitPod(pod, others);
    if (r.admit) return true;
    const reason = r.reason ?? 'UnknownReason';
    const message = r.message ?? '';
    this.opts.log.info('Pod admission denied', { pod: podFullName(pod), podUID: uid, reason, message });
    this.rejected.add(uid);
    podManager.addPod(pod);
    this.opts.rejectPod?.(pod, reason, message, rejectedStatus(pod, reason, message, getPodQOS(pod)));
    return false;
  }

  /** upstream's filterOutInactivePods: not refused, not terminal, not terminated. */
  private isActive(pod: Pod): boolean {
    const uid = pod.metadata.uid!;
    if (this.rejected.has(uid)) return false;
    const phase = this.opts.podStatus?.(uid)?.phase ?? pod.status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') return false;
    const w = this.opts.podWorkers as Partial<Pick<PodWorkers, 'isTerminated'>>;
    return !w.isTerminated?.(uid);
  }

  /** The PLEG's emit: false when the channel is full (the event is discarded and counted). */
  enqueuePlegEvent(e: PodLifecycleEvent): boolean {
    if (this.plegChannel.length >= PLEG_CHANNEL_CAPACITY) return false;
    this.plegChannel.push(e);
    if (!this.drainScheduled) {
      this.drainScheduled = true;
      this.schedule(() => this.drainPlegChannel());
    }
    return true;
  }

  /** One sync per pod for a batch of events; events that need no sync are dropped. */
  drainPlegChannel(): void {
    this.drainScheduled = false;
    this.touch();
    const events = this.plegChannel.splice(0);
    const seen = new Set<string>();
    for (const e of events) {
      // Removed by anyone (the kubelet, the runtime's own GC, a restart behind our back).
      if (e.type === 'ContainerRemoved' && e.data) this.opts.onContainerRemoved?.(e.data);
      if (!isSyncPodWorthy(e) || seen.has(e.id)) continue;
      seen.add(e.id);
      const pod = this.opts.podManager.getPodByUID(e.id);
      if (!pod) continue;
      this.opts.log.v(2).info('SyncLoop (PLEG): event for pod', { pod: podFullName(pod), event: e });
      if (this.opts.runtimeUp()) this.syncPod(pod);
    }
  }

  /** upstream handleProbeSync: a probe result changed (liveness, readiness, startup): sync the pod. */
  handleProbeSync(podUID: string, probe: string, result: string): void {
    this.touch();
    const pod = this.opts.podManager.getPodByUID(podUID);
    if (!pod) return;
    this.opts.log.v(1).info(`SyncLoop (probe): ${probe}`, { pod: podFullName(pod), result });
    if (this.opts.runtimeUp()) this.syncPod(pod);
  }

  /** The resync tick: pods whose next sync is due. */
  handleSyncTick(): void {
    this.touch();
    if (!this.opts.runtimeUp()) return;
    for (const uid of this.opts.workQueue.getWork()) {
      const pod = this.opts.podManager.getPodByUID(uid);
      if (pod) this.syncPod(pod);
    }
  }
}

function creation(pod: Pod): number {
  const t = Date.parse(pod.metadata.creationTimestamp ?? '');
  return Number.isNaN(t) ? 0 : t;
}
