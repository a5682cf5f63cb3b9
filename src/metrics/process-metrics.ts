// The process's own footprint on /metrics, for leak hunting and the soak benchmark: memory as
// client_golang's process collector and prom-client's Node.js collector name it, libuv handles
// and requests, and the timers armed through the kubelet's clock (unref'd, so Node's own
// active-resource counts never show them).

import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';
import v8 from 'node:v8';
import type { Registry } from './registry.js';

export const PROCESS_RESIDENT_MEMORY_BYTES = 'process_resident_memory_bytes';
export const PROCESS_START_TIME_SECONDS = 'process_start_time_seconds';
export const NODEJS_HEAP_SIZE_USED_BYTES = 'nodejs_heap_size_used_bytes';
export const NODEJS_HEAP_SIZE_TOTAL_BYTES = 'nodejs_heap_size_total_bytes';
export const NODEJS_HEAP_USED_AFTER_MAJOR_GC_BYTES = 'nodejs_heap_used_after_major_gc_bytes';
export const NODEJS_EXTERNAL_MEMORY_BYTES = 'nodejs_external_memory_bytes';
export const NODEJS_ACTIVE_HANDLES_TOTAL = 'nodejs_active_handles_total';
export const NODEJS_ACTIVE_REQUESTS_TOTAL = 'nodejs_active_requests_total';
export const NODEJS_ACTIVE_RESOURCES_TOTAL = 'nodejs_active_resources_total';
export const NODEJS_ACTIVE_TIMERS_TOTAL = 'nodejs_active_timers_total';
export const KUBELET_CLOCK_PENDING_TIMERS = 'kubelet_ts_clock_pending_timers';

/** What the collector reads; a test passes its own. */
export interface ProcessProbe {
  rssBytes(): number;
  heapUsedBytes(): number;
  heapTotalBytes(): number;
  externalBytes(): number;
  /** Resource type names as process.getActiveResourcesInfo() lists them (ref'd only). */
  activeResources(): readonly string[];
  /** libuv handles keeping the loop alive (sockets, servers, pipes, child processes). */
  activeHandles(): number;
  activeRequests(): number;
  startTimeSeconds(): number;
}

type NodeProcessInternals = { _getActiveHandles?: () => unknown[]; _getActiveRequests?: () => unknown[] };

export const nodeProcessProbe: ProcessProbe = {
  rssBytes: () => process.memoryUsage.rss(),
  heapUsedBytes: () => v8.getHeapStatistics().used_heap_size,
  heapTotalBytes: () => v8.getHeapStatistics().total_heap_size,
  externalBytes: () => v8.getHeapStatistics().external_memory,
  activeResources: () => process.getActiveResourcesInfo(),
  // The same undocumented calls prom-client's collector uses; no public API counts handles alone.
  activeHandles: () => (process as unknown as NodeProcessInternals)._getActiveHandles?.().length ?? NaN,
  activeRequests: () => (process as unknown as NodeProcessInternals)._getActiveRequests?.().length ?? NaN,
  startTimeSeconds: () => Math.round(performance.timeOrigin / 1000),
};

export interface ProcessMetricsOptions {
  probe?: ProcessProbe;
  /** Timers pending on the kubelet's clock (realClockPendingTimers); the family is left out without it. */
  pendingTimers?: () => number;
  /** Watch major GCs to report the heap left after them (the live set; default true). */
  observeGC?: boolean;
}

export interface ProcessMetrics {
  /** Stops watching GCs. */
  close(): void;
}

/** Registers the process families on `registry`; each is read on scrape. */
export function registerProcessMetrics(registry: Registry, opts: ProcessMetricsOptions = {}): ProcessMetrics {
  const p = opts.probe ?? nodeProcessProbe;
  const internal = { stabilityLevel: 'INTERNAL' as const };
  registry.gaugeFunc({ name: PROCESS_RESIDENT_MEMORY_BYTES, help: 'Resident memory size in bytes.', ...internal }, () => p.rssBytes());
  registry.gaugeFunc({ name: PROCESS_START_TIME_SECONDS, help: 'Start time of the process since unix epoch in seconds.', ...internal }, () => p.startTimeSeconds());
  registry.gaugeFunc({ name: NODEJS_HEAP_SIZE_USED_BYTES, help: 'Process heap size used from Node.js in bytes.', ...internal }, () => p.heapUsedBytes());
  registry.gaugeFunc({ name: NODEJS_HEAP_SIZE_TOTAL_BYTES, help: 'Process heap size from Node.js in bytes.', ...internal }, () => p.heapTotalBytes());
  registry.gaugeFunc({ name: NODEJS_EXTERNAL_MEMORY_BYTES, help: 'Node.js external memory size in bytes.', ...internal }, () => p.externalBytes());
  registry.gaugeFunc({ name: NODEJS_ACTIVE_HANDLES_TOTAL, help: 'Total number of active handles.', ...internal }, () => p.activeHandles());
  registry.gaugeFunc({ name: NODEJS_ACTIVE_REQUESTS_TOTAL, help: 'Total number of active requests.', ...internal }, () => p.activeRequests());
  registry.gaugeFunc({ name: NODEJS_ACTIVE_RESOURCES_TOTAL, help: 'Total number of active resources.', ...internal }, () => p.activeResources().length);
  registry.gaugeFunc(
    { name: NODEJS_ACTIVE_TIMERS_TOTAL, help: 'Ref\'d timers (Timeout) among the active resources.', ...internal },
    () => p.activeResources().filter((t) => t === 'Timeout').length,
  );
  const pending = opts.pendingTimers;
  if (pending) {
    registry.gaugeFunc(
      { name: KUBELET_CLOCK_PENDING_TIMERS, help: 'Timers armed through the kubelet\'s clock that have neither fired nor been cancelled.', ...internal },
      () => pending(),
    );
  }
  let observer: PerformanceObserver | undefined;
  if (opts.observeGC ?? true) {
    // Heap used sampled at random times is mostly garbage awaiting collection; right after a
    // mark-compact it is the live set, which is what grows when something leaks.
    let afterMajor = NaN;
    observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if ((e as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) afterMajor = p.heapUsedBytes();
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    registry.gaugeFunc(
      { name: NODEJS_HEAP_USED_AFTER_MAJOR_GC_BYTES, help: 'Heap used read right after the last mark-compact GC (NaN before the first).', ...internal },
      () => afterMajor,
    );
  }
  return { close: () => observer?.disconnect() };
}

/** Reads the value of an unlabelled sample from Prometheus text (what a scraper sees). */
export function sampleValue(text: string, name: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(name + ' ')) return Number(line.slice(name.length + 1));
  }
  return undefined;
}
