// The prober's metric families (upstream: prober/metrics.go), served on /metrics/probes from a
// registry of their own, as upstream's separate probe metrics endpoint.

import { Registry, type Counter, type Histogram } from '../metrics/registry.js';

export interface ProberMetrics {
  registry: Registry;
  /** prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}. */
  probeTotal: Counter;
  /** prober_probe_duration_seconds{probe_type,container,pod,namespace}. */
  probeDuration: Histogram;
}

export function createProberMetrics(registry = new Registry()): ProberMetrics {
  return {
    registry,
    probeTotal: registry.counter({
      name: 'prober_probe_total',
      help: 'Cumulative number of a liveness, readiness or startup probe for a container by result.',
      labelNames: ['probe_type', 'result', 'container', 'pod', 'namespace', 'pod_uid'],
    }),
    probeDuration: registry.histogram({
      name: 'prober_probe_duration_seconds',
      help: 'Duration in seconds for a probe response.',
      labelNames: ['probe_type', 'container', 'pod', 'namespace'],
    }),
  };
}
