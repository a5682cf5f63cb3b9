// The stats endpoints of the kubelet HTTP server: /stats/summary (stats/v1alpha1 Summary JSON)
// and /metrics/resource (Prometheus text). Both read the provider's shared snapshot.
import { withMethods, type Handler } from '../server/server.js';
import { RESOURCE_METRICS_CONTENT_TYPE, renderResourceMetrics } from './resource-metrics.js';
import { cpuAndMemoryOnly, summaryToJSON, type Summary } from './summary.js';

/** The part of the StatsProvider the routes use. */
export interface SummarySource {
  getSummary(): Promise<Summary>;
}

export const STATS_SUMMARY_PATH = '/stats/summary';
export const METRICS_RESOURCE_PATH = '/metrics/resource';

export function statsRoutes(provider: SummarySource): Map<string, Handler> {
  const routes = new Map<string, Handler>();

  // upstream: GET and POST on /stats/summary; the metrics handlers answer any method.
  routes.set(STATS_SUMMARY_PATH, withMethods(['GET', 'POST'], async (_req, res, url) => {
    let summary: Summary;
    try {
      summary = await provider.getSummary();
    } catch (err) {
      const text = `Internal Error: failed to get stats summary: ${(err as Error).message}\n`;
      res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(text);
      return;
    }
    // upstream: exactly one only_cpu_and_memory=true trims the Summary to CPU and memory.
    const only = url.searchParams.getAll('only_cpu_and_memory');
    const body = summaryToJSON(only.length === 1 && only[0] === 'true' ? cpuAndMemoryOnly(summary) : summary);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }));

  routes.set(METRICS_RESOURCE_PATH, withMethods('any', async (_req, res) => {
    // A failed read is reported in the metrics themselves (scrape_error 1), with status 200.
    const summary = await provider.getSummary().catch(() => undefined);
    const body = renderResourceMetrics(summary);
    res.writeHead(200, { 'Content-Type': RESOURCE_METRICS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }));

  return routes;
}
