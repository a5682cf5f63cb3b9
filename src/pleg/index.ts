// The PLEG as the kubelet wires it: one lean CRI channel (lists, single status reads, the event
// stream), the generic PLEG at upstream's 1s / 3min, and the evented PLEG on top of it when the
// EventedPLEG feature gate is on.

import type { PlegMetrics } from './metrics.js';
import type { RuntimePodStatus } from '../runtime/types.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { PodCache } from './cache.js';
import { EventedPLEG, eventedPlegEnabled } from './evented.js';
import { GENERIC_RELIST_PERIOD_MS, GENERIC_RELIST_THRESHOLD_MS, GenericPLEG } from './generic.js';
import { LeanCriLister, type StatusTransport } from './relist-source.js';
import type { PodLifecycleEvent, PodLifecycleEventGenerator } from './types.js';

export { PodCache } from './cache.js';
export { GenericPLEG } from './generic.js';
export { EventedPLEG, EVENTED_PLEG_FEATURE_GATE, eventedPlegEnabled } from './evented.js';
export { LeanCriLister } from './relist-source.js';
export { isSyncPodWorthy } from './types.js';
export type { KnownPod, PodLifecycleEvent, PodLifecycleEventGenerator, PodLifecycleEventType } from './types.js';

export interface CreatePlegOptions {
  /** The CRI endpoint (`unix:///...`); the PLEG opens a channel of its own to it. */
  runtimeEndpoint: string;
  /** Deadline of the list and status calls (upstream runtimeRequestTimeout). */
  timeoutMs: number;
  /** `containerd` for `containerd://<id>` container IDs. */
  runtimeName?: string;
  /** Whole-pod status reads (RuntimeManager.getPodStatus). */
  runtime: { getPodStatus(uid: string, name: string, namespace: string): Promise<RuntimePodStatus> };
  cache: PodCache;
  clock: Clock;
  log: Logger;
  /** The bounded channel into the syncLoop: false when full (the event is discarded and counted). */
  emit: (e: PodLifecycleEvent) => boolean;
  onDiscard?: () => void;
  metrics?: PlegMetrics;
  /** KubeletConfiguration featureGates; EventedPLEG turns the evented PLEG on. */
  featureGates?: Record<string, boolean>;
  /** How single status reads travel (LeanCriListerOptions.statusTransport; the benchmark compares). */
  statusTransport?: StatusTransport;
}

export interface Pleg {
  /** What the kubelet starts, stops and health-checks. */
  pleg: PodLifecycleEventGenerator;
  generic: GenericPLEG;
  evented?: EventedPLEG;
  /** Stops the PLEG and closes its CRI channel. */
  close(): void;
}

export function createPLEG(o: CreatePlegOptions): Pleg {
  const cri = new LeanCriLister({ runtimeEndpoint: o.runtimeEndpoint, timeoutMs: o.timeoutMs, runtimeName: o.runtimeName, statusTransport: o.statusTransport });
  const generic = new GenericPLEG({
    lister: cri,
    status: cri,
    runtime: o.runtime,
    cache: o.cache,
    clock: o.clock,
    log: o.log,
    relistPeriodMs: GENERIC_RELIST_PERIOD_MS,
    relistThresholdMs: GENERIC_RELIST_THRESHOLD_MS,
    emit: o.emit,
    onDiscard: o.onDiscard,
    metrics: o.metrics,
  });
  const evented = eventedPlegEnabled(o.featureGates) ? new EventedPLEG({ generic, events: cri, status: cri }) : undefined;
  const pleg: PodLifecycleEventGenerator = evented ?? generic;
  return {
    pleg,
    generic,
    evented,
    close(): void {
      pleg.stop();
      cri.close();
    },
  };
}
