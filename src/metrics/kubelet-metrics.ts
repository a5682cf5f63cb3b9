// The kubelet's metric names in one place (upstream: pkg/kubelet/metrics/metrics.go and the
// resource metrics collector), plus constructors for the families a subsystem owns.

import { DEF_BUCKETS, Registry, type Counter, type Gauge, type Histogram } from './registry.js';

export const KUBELET_SUBSYSTEM = 'kubelet';

// ---- PLEG (pkg/kubelet/metrics) ----
export const PLEG_RELIST_DURATION = 'kubelet_pleg_relist_duration_seconds';
export const PLEG_RELIST_INTERVAL = 'kubelet_pleg_relist_interval_seconds';
export const PLEG_LAST_SEEN = 'kubelet_pleg_last_seen_seconds';
export const PLEG_DISCARD_EVENTS = 'kubelet_pleg_discard_events';
export const EVENTED_PLEG_CONN_ERR = 'kubelet_evented_pleg_connection_error_count';
export const EVENTED_PLEG_CONN = 'kubelet_evented_pleg_connection_success_count';
export const EVENTED_PLEG_CONN_LATENCY = 'kubelet_evented_pleg_connection_latency_seconds';

// ---- pods and containers ----
export const RUNNING_PODS = 'kubelet_running_pods';
export const RUNNING_CONTAINERS = 'kubelet_running_containers';
export const DESIRED_PODS = 'kubelet_desired_pods';
export const ACTIVE_PODS = 'kubelet_active_pods';
export const MIRROR_PODS = 'kubelet_mirror_pods';
export const STARTED_PODS_TOTAL = 'kubelet_started_pods_total';
export const STARTED_PODS_ERRORS_TOTAL = 'kubelet_started_pods_errors_total';
export const STARTED_CONTAINERS_TOTAL = 'kubelet_started_containers_total';
export const STARTED_CONTAINERS_ERRORS_TOTAL = 'kubelet_started_containers_errors_total';
export const RESTARTED_PODS_TOTAL = 'kubelet_restarted_pods_total';
export const POD_WORKER_DURATION = 'kubelet_pod_worker_duration_seconds';
export const POD_START_DURATION = 'kubelet_pod_start_duration_seconds';
export const POD_START_SLI_DURATION = 'kubelet_pod_start_sli_duration_seconds';
export const POD_WORKER_START_DURATION = 'kubelet_pod_worker_start_duration_seconds';
export const POD_STATUS_SYNC_DURATION = 'kubelet_pod_status_sync_duration_seconds';
export const CONTAINERS_PER_POD_COUNT = 'kubelet_containers_per_pod_count';

// ---- runtime, images, node ----
export const RUNTIME_OPERATIONS_TOTAL = 'kubelet_runtime_operations_total';
export const RUNTIME_OPERATIONS_DURATION = 'kubelet_runtime_operations_duration_seconds';
export const RUNTIME_OPERATIONS_ERRORS_TOTAL = 'kubelet_runtime_operations_errors_total';
export const IMAGE_PULL_DURATION = 'kubelet_image_pull_duration_seconds';
export const NODE_NAME = 'kubelet_node_name';
export const NODE_STARTUP_DURATION = 'kubelet_node_startup_duration_seconds';
export const EVICTIONS = 'kubelet_evictions';
export const EVICTION_STATS_AGE = 'kubelet_eviction_stats_age_seconds';
export const PREEMPTIONS = 'kubelet_preemptions';
export const PROBER_PROBE_TOTAL = 'prober_probe_total';
export const PROBER_PROBE_DURATION = 'prober_probe_duration_seconds';
export const HTTP_REQUESTS_TOTAL = 'kubelet_http_requests_total';
export const HTTP_REQUESTS_DURATION = 'kubelet_http_requests_duration_seconds';
export const HTTP_INFLIGHT_REQUESTS = 'kubelet_http_inflight_requests';
export const ORPHANED_RUNTIME_PODS_TOTAL = 'kubelet_orphaned_runtime_pods_total';
export const CGROUP_MANAGER_DURATION = 'kubelet_cgroup_manager_duration_seconds';

// ---- /metrics/resource (the resource metrics collector; no kubelet_ prefix) ----
export const NODE_CPU_USAGE_SECONDS_TOTAL = 'node_cpu_usage_seconds_total';
export const NODE_MEMORY_WORKING_SET_BYTES = 'node_memory_working_set_bytes';
export const NODE_SWAP_USAGE_BYTES = 'node_swap_usage_bytes';
export const CONTAINER_CPU_USAGE_SECONDS_TOTAL = 'container_cpu_usage_seconds_total';
export const CONTAINER_MEMORY_WORKING_SET_BYTES = 'container_memory_working_set_bytes';
export const CONTAINER_SWAP_USAGE_BYTES = 'container_swap_usage_bytes';
export const CONTAINER_START_TIME_SECONDS = 'container_start_time_seconds';
export const POD_CPU_USAGE_SECONDS_TOTAL = 'pod_cpu_usage_seconds_total';
export const POD_MEMORY_WORKING_SET_BYTES = 'pod_memory_working_set_bytes';
export const POD_SWAP_USAGE_BYTES = 'pod_swap_usage_bytes';
export const RESOURCE_SCRAPE_ERROR = 'scrape_error';

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
