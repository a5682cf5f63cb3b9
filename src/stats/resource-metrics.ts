// /metrics/resource (upstream: pkg/kubelet/metrics/collectors/resource_metrics.go): the
// node's, pods' and containers' CPU and memory from the Summary, in the Prometheus text
// format the Go client writes: families sorted by name, [STABLE]/[ALPHA] in HELP, samples
// sorted by label values, the stats' own time as a millisecond timestamp.
import type { Summary } from './summary.js';

export const RESOURCE_METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type MetricType = 'counter' | 'gauge';

interface MetricDesc {
  name: string;
  help: string;
  type: MetricType;
  stability: 'STABLE' | 'ALPHA';
  deprecatedVersion?: string;
}

// upstream's descriptors (Kubernetes 1.30): names, help texts, stability.
export const NODE_CPU_USAGE: MetricDesc = {
  name: 'node_cpu_usage_seconds_total',
  help: 'Cumulative cpu time consumed by the node in core-seconds',
  type: 'counter',
  stability: 'STABLE',
};
export const NODE_MEMORY_WORKING_SET: MetricDesc = {
  name: 'node_memory_working_set_bytes',
  help: 'Current working set of the node in bytes',
  type: 'gauge',
  stability: 'STABLE',
};
export const CONTAINER_CPU_USAGE: MetricDesc = {
  name: 'container_cpu_usage_seconds_total',
  help: 'Cumulative cpu time consumed by the container in core-seconds',
  type: 'counter',
  stability: 'STABLE',
};
export const CONTAINER_MEMORY_WORKING_SET: MetricDesc = {
  name: 'container_memory_working_set_bytes',
  help: 'Current working set of the container in bytes',
  type: 'gauge',
  stability: 'STABLE',
};
export const CONTAINER_START_TIME: MetricDesc = {
  name: 'container_start_time_seconds',
  help: 'Start time of the container since unix epoch in seconds',
  type: 'gauge',
  stability: 'STABLE',
};
export const POD_CPU_USAGE: MetricDesc = {
  name: 'pod_cpu_usage_seconds_total',
  help: 'Cumulative cpu time consumed by the pod in core-seconds',
  type: 'counter',
  stability: 'STABLE',
};
export const POD_MEMORY_WORKING_SET: MetricDesc = {
  name: 'pod_memory_working_set_bytes',
  help: 'Current working set of the pod in bytes',
  type: 'gauge',
  stability: 'STABLE',
};
export const SCRAPE_ERROR: MetricDesc = {
  name: 'scrape_error',
  help: '1 if there was an error while getting container metrics, 0 otherwise',
  type: 'gauge',
  stability: 'ALPHA',
  deprecatedVersion: '1.29.0',
};
export const RESOURCE_SCRAPE_ERROR: MetricDesc = {
  name: 'resource_scrape_error',
  help: '1 if there was an error while getting container metrics, 0 otherwise',
  type: 'gauge',
  stability: 'STABLE',
};

/** HELP text as component-base annotates it: `[STABLE] help`, `[ALPHA] (Deprecated since v) help`. */
export function annotatedHelp(d: MetricDesc): string {
  const help = d.deprecatedVersion ? `(Deprecated since ${d.deprecatedVersion}) ${d.help}` : d.help;
  return `[${d.stability}] ${help}`;
}

/** A float as Go's strconv.FormatFloat(v, 'g', -1, 64), which the Prometheus text writer uses. */
export function formatFloat(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (v === 0) return '0';
  const [mantissa, expText] = v.toExponential().split('e') as [string, string];
  const exp = Number(expText);
  // Shortest 'g': exponent form when the exponent is < -4 or >= 6 (Go's precision 6 rule).
  if (exp < -4 || exp >= 6) return `${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  return String(v);
}

function escapeLabelValue(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function escapeHelp(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

interface Sample {
  /** Label pairs, in label-name order. */
  labels: Array<[string, string]>;
  value: number;
  timestampMs?: number;
}

function compareSamples(a: Sample, b: Sample): number {
  for (let i = 0; i < Math.min(a.labels.length, b.labels.length); i++) {
    const x = a.labels[i]![1];
    const y = b.labels[i]![1];
    if (x !== y) return x < y ? -1 : 1;
  }
  return (a.timestampMs ?? 0) - (b.timestampMs ?? 0);
}

/** Prometheus text of metric families (families without samples are left out, as the Go registry does). */
export function writeFamilies(families: Array<{ desc: MetricDesc; samples: Sample[] }>): string {
  const out: string[] = [];
  const sorted = families.filter((f) => f.samples.length > 0).sort((a, b) => (a.desc.name < b.desc.name ? -1 : 1));
  for (const { desc, samples } of sorted) {
    out.push(`# HELP ${desc.name} ${escapeHelp(annotatedHelp(desc))}\n# TYPE ${desc.name} ${desc.type}\n`);
    for (const s of [...samples].sort(compareSamples)) {
      const labels = s.labels.length ? `{${s.labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(',')}}` : '';
      const ts = s.timestampMs === undefined ? '' : ` ${Math.trunc(s.timestampMs)}`;
      out.push(`${desc.name}${labels} ${formatFloat(s.value)}${ts}\n`);
    }
  }
  return out.join('');
}

const NS_PER_S = 1e9;
const ms = (t: Date | null): number | undefined => (t ? t.getTime() : undefined);

/**
 * /metrics/resource for a Summary; `summary` undefined means getting the stats failed
 * (only the scrape error metrics, set to 1, are written).
 */
export function renderResourceMetrics(summary: Summary | undefined): string {
  const fam = (desc: MetricDesc): { desc: MetricDesc; samples: Sample[] } => ({ desc, samples: [] });
  const nodeCpu = fam(NODE_CPU_USAGE);
  const nodeMem = fam(NODE_MEMORY_WORKING_SET);
  const cCpu = fam(CONTAINER_CPU_USAGE);
  const cMem = fam(CONTAINER_MEMORY_WORKING_SET);
  const cStart = fam(CONTAINER_START_TIME);
  const pCpu = fam(POD_CPU_USAGE);
  const pMem = fam(POD_MEMORY_WORKING_SET);
  const errorValue = summary ? 0 : 1;
  const scrape = { desc: SCRAPE_ERROR, samples: [{ labels: [], value: errorValue }] };
  const resourceScrape = { desc: RESOURCE_SCRAPE_ERROR, samples: [{ labels: [], value: errorValue }] };

  if (summary) {
    const { node } = summary;
    if (node.cpu?.usageCoreNanoSeconds !== undefined) {
      nodeCpu.samples.push({ labels: [], value: Number(node.cpu.usageCoreNanoSeconds) / NS_PER_S, timestampMs: ms(node.cpu.time) });
    }
    if (node.memory?.workingSetBytes !== undefined) {
      nodeMem.samples.push({ labels: [], value: Number(node.memory.workingSetBytes), timestampMs: ms(node.memory.time) });
    }
    for (const pod of summary.pods) {
      const { name: podName, namespace } = pod.podRef;
      for (const c of pod.containers) {
        // Label names in sorted order: container, namespace, pod.
        const labels: Array<[string, string]> = [['container', c.name], ['namespace', namespace], ['pod', podName]];
        const start = ms(c.startTime);
        // upstream leaves out start times at or before the epoch; no timestamp since 1.29.
        if (start !== undefined && Math.floor(start / 1000) > 0) cStart.samples.push({ labels, value: start / 1000 });
        if (c.cpu?.usageCoreNanoSeconds !== undefined) {
          cCpu.samples.push({ labels, value: Number(c.cpu.usageCoreNanoSeconds) / NS_PER_S, timestampMs: ms(c.cpu.time) });
        }
        if (c.memory?.workingSetBytes !== undefined) {
          cMem.samples.push({ labels, value: Number(c.memory.workingSetBytes), timestampMs: ms(c.memory.time) });
        }
      }
      const labels: Array<[string, string]> = [['namespace', namespace], ['pod', podName]];
      if (pod.cpu?.usageCoreNanoSeconds !== undefined) {
        pCpu.samples.push({ labels, value: Number(pod.cpu.usageCoreNanoSeconds) / NS_PER_S, timestampMs: ms(pod.cpu.time) });
      }
      if (pod.memory?.workingSetBytes !== undefined) {
        pMem.samples.push({ labels, value: Number(pod.memory.workingSetBytes), timestampMs: ms(pod.memory.time) });
      }
    }
  }
  return writeFamilies([nodeCpu, nodeMem, cCpu, cMem, cStart, pCpu, pMem, scrape, resourceScrape]);
}
