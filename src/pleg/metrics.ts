// The PLEG's metric families (upstream: pkg/kubelet/metrics), declared here where they are
// registered: what the generic and the evented PLEG record, plus the running pod and container
// gauges the relist sets.

import { DEF_BUCKETS, Registry, type Counter, type Gauge, type Histogram } from '../metrics/registry.js';

export const PLEG_RELIST_DURATION = 'kubelet_pleg_relist_duration_seconds';
export const PLEG_RELIST_INTERVAL = 'kubelet_pleg_relist_interval_seconds';
export const PLEG_LAST_SEEN = 'kubelet_pleg_last_seen_seconds';
export const PLEG_DISCARD_EVENTS = 'kubelet_pleg_discard_events';
export const EVENTED_PLEG_CONN_ERR = 'kubelet_evented_pleg_connection_error_count';
export const EVENTED_PLEG_CONN = 'kubelet_evented_pleg_connection_success_count';
export const EVENTED_PLEG_CONN_LATENCY = 'kubelet_evented_pleg_connection_latency_seconds';
export const RUNNING_PODS = 'kubelet_running_pods';
export const RUNNING_CONTAINERS = 'kubelet_running_containers';

/** The PLEG's families: what the generic and the evented PLEG record. */
export interface PlegMetrics {
  relistDuration: Histogram;
  relistInterval: Histogram;
  /** Seconds since the epoch of the last completed relist (upstream sets it in Healthy()). */
  lastSeen: Gauge;
  discardEvents: Counter;
  /** Pods with a running sandbox, and containers by state, as the last relist saw them. */
  runningPods: Gauge;
  runningContainers: Gauge;
  eventedConnErrors: Counter;
  eventedConnSuccess: Counter;
  eventedConnLatency: Histogram;
}

/** Registers the PLEG families (help texts and buckets as upstream) on `registry`. */
export function createPlegMetrics(registry: Registry = new Registry()): PlegMetrics {
  return {
    relistDuration: registry.histogram({
      name: PLEG_RELIST_DURATION,
      help: 'Duration in seconds for relisting pods in PLEG.',
      buckets: DEF_BUCKETS,
    }),
    relistInterval: registry.histogram({
      name: PLEG_RELIST_INTERVAL,
      help: 'Interval in seconds between relisting in PLEG.',
      buckets: DEF_BUCKETS,
    }),
    lastSeen: registry.gauge({ name: PLEG_LAST_SEEN, help: 'Timestamp in seconds when PLEG was last seen active.' }),
    discardEvents: registry.counter({ name: PLEG_DISCARD_EVENTS, help: 'The number of discard events in PLEG.' }),
    runningPods: registry.gauge({ name: RUNNING_PODS, help: 'Number of pods that have a running pod sandbox' }),
    runningContainers: registry.gauge({
      name: RUNNING_CONTAINERS,
      help: 'Number of containers currently running',
      labelNames: ['container_state'],
    }),
    eventedConnErrors: registry.counter({
      name: EVENTED_PLEG_CONN_ERR,
      help: 'The number of errors encountered during the establishment of streaming connection with the CRI runtime.',
    }),
    eventedConnSuccess: registry.counter({
      name: EVENTED_PLEG_CONN,
      help: 'The number of times a streaming client was obtained to receive CRI Events.',
    }),
    eventedConnLatency: registry.histogram({
      name: EVENTED_PLEG_CONN_LATENCY,
      help: 'The latency of streaming connection with the CRI runtime, measured in seconds.',
      buckets: DEF_BUCKETS,
    }),
  };
}
