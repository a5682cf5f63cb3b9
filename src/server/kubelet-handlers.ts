// The secure port's own endpoints beside /pods and /healthz (server.ts) and the stats routes
// (src/stats/routes.ts): /runningpods/, /configz, /metrics/cadvisor, /logs/ (node log files,
// with enableSystemLogHandler), /debug/pprof/ (Node's inspector, with enableProfilingHandler)
// and /debug/flags/v (the log verbosity, with enableDebugFlagsHandler).

import { readdir } from 'node:fs/promises';
import { Session } from 'node:inspector';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Pod, PodList } from '../api/types.js';
import { parseQuantity } from '../api/quantity.js';
import { formatDuration } from '../config/duration.js';
import type { KubeletConfig } from '../config/index.js';
import { enforcementReport } from '../config/schema.js';
import type { Clock } from '../util/clock.js';
import { heapProfileBody, type SamplingHeapProfile } from './pprof.js';
import { fdPath, openBeneath } from '../util/open-beneath.js';
import { escapePath } from './request-target.js';
import { sendJSON, withMethods, type Handler } from './server.js';

function sendText(res: ServerResponse, code: number, text: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(code, { 'Content-Type': contentType, 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

// ---- /runningpods/ ----

/** /runningpods/: the pods the runtime runs, as upstream's ToAPIPod (names, uid, container names and images). */
export function runningPodsHandler(runningPods: () => Pod[] | Promise<Pod[]>): Handler {
  return withMethods(['GET'], async (_req, res) => {
    const list: PodList = { apiVersion: 'v1', kind: 'PodList', metadata: {}, items: await runningPods() };
    sendJSON(res, 200, list);
  });
}

// ---- /configz ----

/** Fields held in ms that v1beta1 writes as Go durations. */
const DURATION_FIELDS = new Set([
  'syncFrequency', 'fileCheckFrequency', 'httpCheckFrequency', 'streamingConnectionIdleTimeout',
  'nodeStatusUpdateFrequency', 'nodeStatusReportFrequency', 'imageMinimumGCAge', 'runtimeRequestTimeout',
  'evictionPressureTransitionPeriod', 'shutdownGracePeriod', 'shutdownGracePeriodCriticalPods', 'volumeStatsAggPeriod',
  'authentication.webhook.cacheTTL', 'authorization.webhook.cacheAuthorizedTTL', 'authorization.webhook.cacheUnauthorizedTTL',
]);

function v1beta1(value: unknown, path: string): unknown {
  if (typeof value === 'number' && DURATION_FIELDS.has(path)) return formatDuration(value);
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = v1beta1(v, path === '' ? k : `${path}.${k}`);
    return out;
  }
  return value;
}

/**
 * /configz: {"kubeletconfig": <the running KubeletConfiguration>} as upstream, and beside it
 * "kubeletconfigEnforcement": which of those settings kubelet-ts enforces (enforcementReport).
 */
export function configzHandler(config: KubeletConfig): Handler {
  return withMethods(['GET'], (_req, res) => {
    const kc = { ...(v1beta1(config, '') as Record<string, unknown>), kind: 'KubeletConfiguration', apiVersion: 'kubelet.config.k8s.io/v1beta1' };
    sendJSON(res, 200, { kubeletconfig: kc, kubeletconfigEnforcement: enforcementReport() });
  });
}

// ---- /metrics/cadvisor ----

type StatsTime = Date | string | null | undefined;
interface UsageStats {
  startTime?: StatsTime;
  cpu?: { time?: StatsTime; usageCoreNanoSeconds?: bigint | number };
  memory?: { time?: StatsTime; usageBytes?: bigint | number; workingSetBytes?: bigint | number; rssBytes?: bigint | number };
}

/** The part of the stats/v1alpha1 Summary (src/stats) the cAdvisor families are made from. */
export interface Summary {
  pods: Array<UsageStats & { podRef: { name: string; namespace: string; uid: string }; containers: Array<UsageStats & { name: string }> }>;
}

export interface CadvisorSource {
  getSummary(): Promise<Summary>;
  getPods(): Pod[];
  /** `/kubepods/<qos>/pod<uid>`; a container's cgroup is `<that>/<container id>`. */
  podCgroupName(pod: Pod): string;
  /** The whole page read from the cgroups (src/stats/cadvisor-metrics.ts); the Summary's figures without it. */
  collect?(nowMs: number): Promise<string>;
}

/** Prometheus label value escaping (backslash, quote, newline). */
function lv(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

interface Family {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  lines: string[];
}

const LABELS = ['container', 'id', 'image', 'name', 'namespace', 'pod'] as const;

/**
 * The container_* families cAdvisor exports that kubelet-ts measures, with cAdvisor's names,
 * help, labels (container, id, image, name, namespace, pod; pod-level series have empty
 * container, image and name) and sample timestamps.
 */
export function renderCadvisorMetrics(summary: Summary | undefined, pods: Pod[], podCgroupName: (pod: Pod) => string, nowMs: number): string {
  const fam = (name: string, type: Family['type'], help: string): Family => ({ name, help, type, lines: [] });
  const cpu = fam('container_cpu_usage_seconds_total', 'counter', 'Cumulative cpu time consumed in seconds.');
  const usage = fam('container_memory_usage_bytes', 'gauge', 'Current memory usage in bytes, including all memory regardless of when it was accessed');
  const ws = fam('container_memory_working_set_bytes', 'gauge', 'Current working set in bytes.');
  const rss = fam('container_memory_rss', 'gauge', 'Size of RSS in bytes.');
  const limit = fam('container_spec_memory_limit_bytes', 'gauge', 'Memory limit for the container.');
  const start = fam('container_start_time_seconds', 'gauge', 'Start time of the container since unix epoch in seconds.');
  const seen = fam('container_last_seen', 'gauge', 'Last time a container was seen by the exporter');
  const scrapeErr = fam('container_scrape_error', 'gauge', '1 if there was an error while getting container metrics, 0 otherwise');
  scrapeErr.lines.push(`container_scrape_error ${summary ? 0 : 1}`);

  const byUID = new Map(pods.map((p) => [p.metadata.uid ?? '', p]));
  for (const ps of summary?.pods ?? []) {
    const pod = byUID.get(ps.podRef.uid);
    const podCgroup = pod ? podCgroupName(pod) : '';
    const series: Array<{ labels: Record<(typeof LABELS)[number], string>; s: UsageStats; limit?: number; ts: number }> = [];
    series.push({
      labels: { container: '', id: podCgroup, image: '', name: '', namespace: ps.podRef.namespace, pod: ps.podRef.name },
      s: ps,
      ts: timeOf(ps.cpu?.time ?? ps.memory?.time, nowMs),
    });
    for (const cs of ps.containers) {
      const spec = pod?.spec.containers.find((c) => c.name === cs.name);
      const status = pod?.status?.containerStatuses?.find((c) => c.name === cs.name);
      const id = status?.containerID ? status.containerID.slice(status.containerID.indexOf('://') + 3) : '';
      let memLimit = 0;
      const lim = spec?.resources?.limits?.memory;
      if (lim !== undefined) {
        try { memLimit = parseQuantity(lim).value(); } catch { memLimit = 0; }
      }
      series.push({
        labels: { container: cs.name, id: id && podCgroup ? `${podCgroup}/${id}` : '', image: status?.image ?? spec?.image ?? '', name: id, namespace: ps.podRef.namespace, pod: ps.podRef.name },
        s: cs,
        limit: memLimit,
        ts: timeOf(cs.cpu?.time ?? cs.memory?.time, nowMs),
      });
    }
    for (const { labels, s, limit: lim, ts } of series) {
      const l = LABELS.map((k) => `${k}="${lv(labels[k])}"`).join(',');
      if (s.cpu?.usageCoreNanoSeconds !== undefined) cpu.lines.push(`container_cpu_usage_seconds_total{${l},cpu="total"} ${Number(s.cpu.usageCoreNanoSeconds) / 1e9} ${ts}`);
      if (s.memory?.usageBytes !== undefined) usage.lines.push(`container_memory_usage_bytes{${l}} ${String(s.memory.usageBytes)} ${ts}`);
      if (s.memory?.workingSetBytes !== undefined) ws.lines.push(`container_memory_working_set_bytes{${l}} ${String(s.memory.workingSetBytes)} ${ts}`);
      if (s.memory?.rssBytes !== undefined) rss.lines.push(`container_memory_rss{${l}} ${String(s.memory.rssBytes)} ${ts}`);
      if (lim !== undefined) limit.lines.push(`container_spec_memory_limit_bytes{${l}} ${lim} ${ts}`);
      if (s.startTime !== undefined && s.startTime !== null) start.lines.push(`container_start_time_seconds{${l}} ${new Date(s.startTime).getTime() / 1000} ${ts}`);
      seen.lines.push(`container_last_seen{${l}} ${Math.floor(nowMs / 1000)} ${ts}`);
    }
  }
  let out = '';
  for (const f of [cpu, seen, usage, rss, ws, scrapeErr, limit, start]) {
    if (f.lines.length === 0) continue;
    out += `# HELP ${f.name} ${f.help}\n# TYPE ${f.name} ${f.type}\n${f.lines.join('\n')}\n`;
  }
  return out;
}

function timeOf(t: StatsTime, fallback: number): number {
  if (t === undefined || t === null) return fallback;
  const ms = new Date(t).getTime();
  return Number.isFinite(ms) ? ms : fallback;
}

export function cadvisorHandler(source: CadvisorSource, clock: Clock): Handler {
  return withMethods('any', async (_req, res) => {
    if (source.collect) {
      const page = await source.collect(clock.now()).catch(() => undefined);
      if (page !== undefined) return sendText(res, 200, page, 'text/plain; version=0.0.4; charset=utf-8');
    }
    const summary = await source.getSummary().catch(() => undefined);
    sendText(res, 200, renderCadvisorMetrics(summary, source.getPods(), (p) => source.podCgroupName(p), clock.now()), 'text/plain; version=0.0.4; charset=utf-8');
  });
}

// ---- /logs/ ----

/** The most of one log file /logs/ sends (a node log can be huge; the rest is cut). */
export const SYSTEM_LOG_MAX_BYTES = 64 << 20;

/**
 * /logs/<path>: a file or a directory listing under `root` (/var/log), as Go's FileServer on
 * that directory; nothing outside it is served, and no symbolic link at any component is
 * followed (each component is opened from the one before with O_NOFOLLOW; what is read is that
 * descriptor, never the path resolved again).
 */
export function systemLogsHandler(root = '/var/log'): Handler {
  return withMethods(['GET'], async (_req, res, url) => {
    const rel = decodeURIComponent(url.pathname).slice('/logs/'.length);
    const components = rel.split('/').filter((c) => c !== '' && c !== '.');
    if (components.some((c) => c === '..')) return sendText(res, 400, 'invalid path\n');
    let fh;
    try {
      fh = await openBeneath(root, components);
    } catch {
      return sendText(res, 404, '404 page not found\n');
    }
    try {
      const st = await fh.stat();
      if (st.isDirectory()) {
        // A directory without its trailing slash is redirected, as FileServer does.
        if (!url.pathname.endsWith('/')) {
          res.writeHead(301, { Location: `${url.pathname}/`, 'Content-Length': 0 });
          return void res.end();
        }
        const names = (await readdir(fdPath(fh), { withFileTypes: true })).map((d) => (d.isDirectory() ? `${d.name}/` : d.name)).sort();
        const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
        const body = `<pre>\n${names.map((n) => `<a href="${esc(escapePath(n))}">${esc(n)}</a>`).join('\n')}\n</pre>\n`;
        return sendText(res, 200, body, 'text/html; charset=utf-8');
      }
      if (!st.isFile()) return sendText(res, 404, '404 page not found\n');
      const len = Math.min(st.size, SYSTEM_LOG_MAX_BYTES);
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': len });
      const buf = Buffer.alloc(Math.min(len, 1 << 20));
      let pos = 0;
      while (pos < len) {
        const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, len - pos), pos);
        if (bytesRead === 0) break;
        pos += bytesRead;
        if (!res.write(buf.subarray(0, bytesRead))) await new Promise((r) => { res.once('drain', r); res.once('close', r); });
      }
      // a file that shrank under the read cannot fill its announced length: the connection is cut
      if (pos < len) res.destroy();
      else res.end();
    } finally {
      await fh.close();
    }
  });
}

// ---- /debug/flags/v ----

/** The most of a /debug/flags/v body read: a verbosity is a few digits. */
const MAX_FLAG_BODY = 1024;

/**
 * upstream's StringFlagPutHandler for the log verbosity: PUT with the level as the body sets it
 * ("successfully set klog.logging.verbosity to N"); a value that is not an unsigned 32-bit
 * integer is a 400; any other method is a 406 "unsupported http method".
 */
export function debugFlagsVerbosityHandler(set: (v: number) => void): Handler {
  return withMethods('any', async (req, res) => {
    if (req.method !== 'PUT') return sendText(res, 406, 'unsupported http method');
    let body = '';
    for await (const chunk of req) {
      body += String(chunk);
      if (body.length > MAX_FLAG_BODY) return sendText(res, 400, 'error reading request body: too large');
    }
    if (!/^\d+$/.test(body) || Number(body) > 0xffffffff) {
      return sendText(res, 400, `failed set klog.logging.verbosity ${body}: strconv.ParseUint: parsing ${JSON.stringify(body)}: invalid syntax`);
    }
    set(Number(body));
    sendText(res, 200, `successfully set klog.logging.verbosity to ${body}`);
  });
}

// ---- /debug/pprof/ ----

/** The longest CPU profile one request may ask for (upstream's pprof: 30 s default). */
export const MAX_PROFILE_SECONDS = 60;

/** Bytes between two sampled allocations (Go's default MemProfileRate: 512 KiB). */
export const HEAP_SAMPLING_INTERVAL = 512 * 1024;

/** The process's one sampling heap profiler (V8 runs one per isolate), started on first use. */
let sampler: Promise<Session> | undefined;
function heapSampler(post: <T>(s: Session, method: string, params?: object) => Promise<T>): Promise<Session> {
  if (!sampler) {
    const heap = new Session();
    heap.connect();
    sampler = post(heap, 'HeapProfiler.enable')
      .then(() => post(heap, 'HeapProfiler.startSampling', { samplingInterval: HEAP_SAMPLING_INTERVAL }))
      .then(() => heap);
    // a failed start is tried again by the next server that asks
    sampler.catch(() => { sampler = undefined; heap.disconnect(); });
  }
  return sampler;
}

/**
 * Profiling through Node's inspector (upstream serves Go's pprof here): /debug/pprof/profile
 * records a CPU profile for ?seconds=N (default 30, at most MAX_PROFILE_SECONDS) as a
 * .cpuprofile (Chrome DevTools JSON); /debug/pprof/heap is the sampled allocation profile (what
 * Go's heap profile is: allocation sites with counts and bytes, never memory contents) in pprof's
 * format (pprof.ts). One CPU profile at a time: a second request while one runs is a 409.
 */
export function profilingHandlers(clock: Clock): Map<string, Handler> {
  let busy = false;
  const run = async <T>(res: ServerResponse, fn: (s: Session) => Promise<T>): Promise<T | undefined> => {
    if (busy) {
      sendText(res, 409, 'a profile is already being taken\n');
      return undefined;
    }
    busy = true;
    const session = new Session();
    session.connect();
    try {
      return await fn(session);
    } finally {
      session.disconnect();
      busy = false;
    }
  };
  const post = <T>(s: Session, method: string, params?: object): Promise<T> =>
    new Promise((resolve, reject) => s.post(method, params ?? {}, (err, r) => (err ? reject(err) : resolve(r as T))));

  const routes = new Map<string, Handler>();
  routes.set('/debug/pprof/', withMethods(['GET'], (_req, res, url) => {
    if (url.pathname !== '/debug/pprof/') return sendText(res, 404, '404 page not found\n');
    sendText(res, 200, 'profiles (Node inspector):\nprofile?seconds=N  CPU profile (.cpuprofile JSON)\nheap               sampled allocations still live (pprof profile.proto, gzip)\n');
  }));
  routes.set('/debug/pprof/profile', withMethods(['GET'], async (_req: IncomingMessage, res, url) => {
    const raw = url.searchParams.get('seconds');
    const seconds = raw === null ? 30 : Number(raw);
    if (!Number.isInteger(seconds) || seconds <= 0) return sendText(res, 400, `bad seconds ${JSON.stringify(raw)}\n`);
    if (seconds > MAX_PROFILE_SECONDS) return sendText(res, 400, `profile duration exceeds ${MAX_PROFILE_SECONDS}s\n`);
    const profile = await run(res, async (s) => {
      await post(s, 'Profiler.enable');
      await post(s, 'Profiler.start');
      await clock.sleep(seconds * 1000);
      const r = await post<{ profile: unknown }>(s, 'Profiler.stop');
      return r.profile;
    });
    if (profile === undefined) return;
    const body = JSON.stringify(profile);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Disposition': 'attachment; filename="kubelet.cpuprofile"', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  }));
  // Sampling runs from here on, as Go's runtime samples allocations all along (MemProfileRate):
  // a heap profile shows what was allocated and is still live since profiling was enabled.
  const sampling = heapSampler(post);
  sampling.catch(() => undefined);
  routes.set('/debug/pprof/heap', withMethods(['GET'], async (_req, res) => {
    const heap = await sampling;
    const { profile } = await post<{ profile: SamplingHeapProfile }>(heap, 'HeapProfiler.getSamplingProfile');
    const body = heapProfileBody(profile, { timeNanos: BigInt(clock.now()) * 1_000_000n, periodBytes: HEAP_SAMPLING_INTERVAL });
    res.writeHead(200, {
      'Content-Type': 'application/octet-stream',
      'Content-Disposition': 'attachment; filename="heap"',
      'X-Content-Type-Options': 'nosniff',
      'Content-Length': body.length,
    });
    res.end(body);
  }));
  return routes;
}
