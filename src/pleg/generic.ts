// The generic PLEG: relist the runtime every period, diff against the last relist by
// container id, and for the pods that changed refresh the status cache and emit events.

import type { RuntimeManager, RuntimePod } from '../runtime/runtime-manager.js';
import type { PodCache } from './cache.js';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';

export type PodLifecycleEventType = 'ContainerStarted' | 'ContainerDied' | 'ContainerRemoved' | 'ContainerChanged' | 'PodSync';

export interface PodLifecycleEvent {
  /** Pod UID. */
  id: string;
  type: PodLifecycleEventType;
  /** Container (or sandbox) id for container events. */
  data?: string;
}

type PlegState = 'running' | 'exited' | 'unknown' | 'non-existent';

export interface GenericPlegOptions {
  runtime: Pick<RuntimeManager, 'getPods' | 'getPodStatus'>;
  cache: PodCache;
  clock: Clock;
  log: Logger;
  relistPeriodMs: number;
  /** Relist is unhealthy when none completed within this (upstream: 3 minutes). */
  relistThresholdMs: number;
  /** Bounded channel into the syncLoop: returns false when full (the event is discarded). */
  emit: (e: PodLifecycleEvent) => boolean;
  /** Called after each relist with its duration (ms), for metrics. */
  onRelist?: (durationMs: number, intervalMs: number) => void;
  onDiscard?: () => void;
  /** Bound on concurrent per-pod status queries. */
  statusConcurrency?: number;
}

function plegState(state: string): PlegState {
  switch (state) {
    case 'CONTAINER_RUNNING': case 'SANDBOX_READY': return 'running';
    case 'CONTAINER_EXITED': case 'CONTAINER_CREATED': case 'SANDBOX_NOTREADY': return 'exited';
    default: return 'unknown';
  }
}

/** Container (and sandbox) id → state for one pod. */
function podStates(p: RuntimePod | undefined): Map<string, PlegState> {
  const m = new Map<string, PlegState>();
  if (!p) return m;
  for (const s of p.sandboxes) m.set(s.id, plegState(s.state));
  for (const c of p.containers) m.set(c.id, plegState(c.state));
  return m;
}

/** Events for one container moving from `oldS` to `newS` (upstream's generateEvents). */
export function generateEvents(uid: string, id: string, oldS: PlegState, newS: PlegState): PodLifecycleEvent[] {
  if (oldS === newS) return [];
  switch (newS) {
    case 'running': return [{ id: uid, type: 'ContainerStarted', data: id }];
    case 'exited': return [{ id: uid, type: 'ContainerDied', data: id }];
    case 'unknown': return [{ id: uid, type: 'ContainerChanged', data: id }];
    case 'non-existent':
      if (oldS === 'exited') return [{ id: uid, type: 'ContainerRemoved', data: id }];
      return [{ id: uid, type: 'ContainerDied', data: id }, { id: uid, type: 'ContainerRemoved', data: id }];
  }
}

/** Events for a pod between two relists. */
export function computePodEvents(uid: string, oldPod: RuntimePod | undefined, newPod: RuntimePod | undefined): PodLifecycleEvent[] {
  const oldStates = podStates(oldPod);
  const newStates = podStates(newPod);
  const events: PodLifecycleEvent[] = [];
  for (const [id, s] of newStates) events.push(...generateEvents(uid, id, oldStates.get(id) ?? 'non-existent', s));
  for (const [id, s] of oldStates) if (!newStates.has(id)) events.push(...generateEvents(uid, id, s, 'non-existent'));
  return events;
}

export class GenericPLEG {
  private pods = new Map<string, RuntimePod>();
  private timer?: Timer;
  private stopped = true;
  private lastRelistStart = 0;
  private lastRelistEnd = 0;
  /** Pods whose status query failed: retried on the next relist. */
  private reinspect = new Set<string>();

  constructor(private readonly opts: GenericPlegOptions) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.lastRelistEnd = this.opts.clock.now();
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
  }

  /** upstream's Healthy(): the last relist finished within the threshold. */
  healthy(): { ok: boolean; message: string } {
    const since = this.opts.clock.now() - this.lastRelistEnd;
    if (since > this.opts.relistThresholdMs) {
      return { ok: false, message: `pleg was last seen active ${Math.round(since / 1000)}s ago; threshold is ${Math.round(this.opts.relistThresholdMs / 1000)}s` };
    }
    return { ok: true, message: 'ok' };
  }

  /** The pods the last relist saw (housekeeping finds orphans here without another list call). */
  knownPods(): ReadonlyMap<string, RuntimePod> {
    return this.pods;
  }

  lastSeen(): number {
    return this.lastRelistEnd;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = this.opts.clock.setTimeout(() => {
      void this.relist().catch((err) => this.opts.log.error('PLEG relist failed', { err: (err as Error).message }))
        .finally(() => this.schedule(this.opts.relistPeriodMs));
    }, ms);
  }

  /** One relist: list, diff, refresh the cache for changed pods, emit their events. */
  async relist(): Promise<void> {
    const start = this.opts.clock.now();
    const interval = this.lastRelistStart ? start - this.lastRelistStart : 0;
    this.lastRelistStart = start;
    const current = await this.opts.runtime.getPods();

    const changed = new Map<string, PodLifecycleEvent[]>();
    for (const [uid, p] of current) {
      const ev = computePodEvents(uid, this.pods.get(uid), p);
      if (ev.length || this.reinspect.has(uid)) changed.set(uid, ev);
    }
    for (const [uid, p] of this.pods) {
      if (current.has(uid)) continue;
      changed.set(uid, computePodEvents(uid, p, undefined));
    }

    const entries = [...changed];
    const limit = Math.max(1, this.opts.statusConcurrency ?? 8);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < entries.length) {
        const [uid, events] = entries[next++]!;
        const pod = current.get(uid);
        if (!pod) {
          // Gone from the runtime: readers fall back to an empty status once the cache time passes.
          this.opts.cache.delete(uid);
          this.reinspect.delete(uid);
        } else {
          try {
            const status = await this.opts.runtime.getPodStatus(uid, pod.name, pod.namespace);
            this.opts.cache.set(uid, status, undefined, start);
            this.reinspect.delete(uid);
          } catch (err) {
            this.opts.log.warn('PLEG: failed to get pod status; will retry', { podUID: uid, err: (err as Error).message });
            this.reinspect.add(uid);
            this.opts.cache.set(uid, undefined, err as Error, start);
          }
        }
        for (const e of events) {
          // Removal of a container is housekeeping's business, not a reason to sync.
          if (e.type === 'ContainerRemoved') continue;
          if (!this.opts.emit(e)) this.opts.onDiscard?.();
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(limit, entries.length) }, worker));

    this.pods = current;
    this.opts.cache.updateTime(start);
    const end = this.opts.clock.now();
    this.lastRelistEnd = end;
    this.opts.onRelist?.(end - start, interval);
  }
}
