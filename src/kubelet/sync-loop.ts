// The syncLoop's handlers (upstream: syncLoopIteration and the SyncHandler methods): pod
// updates from the sources, PLEG events through a bounded channel, and the resync tick. Each
// handler only dispatches to the pod workers; nothing here waits on I/O.

import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
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
  podWorkers: Pick<PodWorkers, 'updatePod'>;
  workQueue: WorkQueue;
  /** False while the runtime is down: no pod is synced then (upstream's runtime state check). */
  runtimeUp(): boolean;
  /** Told of every ContainerRemoved event (the OOM watcher forgets the container). */
  onContainerRemoved?(containerID: string): void;
  /** Pod admission (upstream canAdmitPod): a refused pod gets no worker; rejectPod records why. */
  admitPod?(pod: Pod): { admit: boolean; reason?: string; message?: string };
  rejectPod?(pod: Pod, reason: string, message: string): void;
  /** Runs the PLEG channel's drain after the current batch (default setImmediate). */
  schedule?: (fn: () => void) => void;
}

export class SyncLoop {
  /** When the loop last handled anything (the syncloop health check reads it). */
  lastIteration = 0;
  private readonly plegChannel: PodLifecycleEvent[] = [];
  private drainScheduled = false;
  private readonly schedule: (fn: () => void) => void;

  constructor(private readonly opts: SyncLoopOptions) {
    this.schedule = opts.schedule ?? ((fn) => void setImmediate(fn));
  }

  private touch(): void {
    this.lastIteration = this.opts.clock.now();
  }

  handlePodUpdate(u: PodUpdate): void {
    this.touch();
    const { podManager, podWorkers, log } = this.opts;
    for (const pod of u.pods) {
      switch (u.op) {
        case 'ADD':
          log.info('SyncLoop ADD', { source: u.source, pod: podFullName(pod), podUID: pod.metadata.uid });
          podManager.addPod(pod);
          if (!this.admit(pod)) break;
          podWorkers.updatePod({ updateType: 'create', pod });
          break;
        case 'UPDATE':
          log.info('SyncLoop UPDATE', { source: u.source, pod: podFullName(pod), podUID: pod.metadata.uid });
          podManager.updatePod(pod);
          podWorkers.updatePod({ updateType: 'update', pod });
          break;
        case 'REMOVE':
        case 'DELETE':
          log.info(`SyncLoop ${u.op}`, { source: u.source, pod: podFullName(pod), podUID: pod.metadata.uid });
          podManager.removePod(pod);
          this.opts.workQueue.forget(pod.metadata.uid!);
          podWorkers.updatePod({ updateType: 'kill', pod, removed: true });
          break;
        case 'RECONCILE':
          podManager.updatePod(pod);
          break;
      }
    }
  }

  private admit(pod: Pod): boolean {
    const r = this.opts.admitPod?.(pod);
    if (!r || r.admit) return true;
    this.opts.rejectPod?.(pod, r.reason ?? '', r.message ?? '');
    return false;
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
      if (this.opts.runtimeUp()) this.opts.podWorkers.updatePod({ updateType: 'sync', pod });
    }
  }

  /** upstream handleProbeSync: a probe result changed (liveness, readiness, startup): sync the pod. */
  handleProbeSync(podUID: string, probe: string, result: string): void {
    this.touch();
    const pod = this.opts.podManager.getPodByUID(podUID);
    if (!pod) return;
    this.opts.log.v(1).info(`SyncLoop (probe): ${probe}`, { pod: podFullName(pod), result });
    if (this.opts.runtimeUp()) this.opts.podWorkers.updatePod({ updateType: 'sync', pod });
  }

  /** The resync tick: pods whose next sync is due. */
  handleSyncTick(): void {
    this.touch();
    if (!this.opts.runtimeUp()) return;
    for (const uid of this.opts.workQueue.getWork()) {
      const pod = this.opts.podManager.getPodByUID(uid);
      if (pod) this.opts.podWorkers.updatePod({ updateType: 'sync', pod });
    }
  }
}
