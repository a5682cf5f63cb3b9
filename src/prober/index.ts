// The prober: probe manager and results on the main thread; execution by a ProbeRunner.
export { ProbeManager, type ProbeManagerOptions } from './manager.js';
export { ResultsManager, type ResultUpdate } from './results.js';
export { createProberMetrics, type ProberMetrics } from './metrics.js';
export { ProbeWorker, MAX_PROBE_RETRIES } from './worker.js';
export { probeRequest, resolvePort, PROBE_USER_AGENT } from './target.js';
export { ProbeTargetError, ProbeRunError } from './errors.js';
export type * from './types.js';
