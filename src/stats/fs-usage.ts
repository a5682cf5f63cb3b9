// Filesystem accounting for the Summary (upstream: the volume stats calculator, the log and
// ephemeral-storage figures): du-like walks of pod volumes and container log directories run
// in the worker pool (workers/fs-usage.ts), a few paths per task and a bounded number of tasks
// at once, each path at most once per volumeStatsAggPeriod; the Summary reads the cache.

import { join } from 'node:path';

import type { Pod } from '../api/types.js';
import { containerLogsDirectory } from '../runtime/container-config.js';
import type { ContainerStats as CriContainerStats } from '../runtime/cri-types.js';
import type { WritableLayerFigures } from './writable-layers.js';
import { loadNative, type NativeAddon } from '../native.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { Usage, UsageAnswer, UsageRequest } from '../../workers/fs-usage.js';
import type { FsStats, PodStats, Summary, VolumeStats } from './summary.js';

/** The compiled task module (dist/workers/fs-usage.js from dist/src/stats/fs-usage.js). */
export const FS_USAGE_WORKER_URL = new URL('../../workers/fs-usage.js', import.meta.url);

/** Paths per pool task. */
export const FS_USAGE_BATCH = 16;
/** Accounting tasks in flight at once: the pool's threads stay free for probes. */
export const FS_USAGE_CONCURRENCY = 2;

export type MeasureFs = (reqs: UsageRequest[]) => Promise<UsageAnswer[]>;

/** A container's writable layer as the runtime's ContainerStats gives it: the figures only. */
export type WritableLayer = WritableLayerFigures;

/** The figures of a decoded ContainerStats' writable layer (what listWritableLayers gives). */
export function writableLayerOf(s: Pick<CriContainerStats, 'writable_layer'>): WritableLayer | undefined {
  const w = s.writable_layer;
  if (!w?.used_bytes) return undefined;
  const out: WritableLayer = { usedBytes: Number(w.used_bytes.value) };
  if (w.inodes_used) out.inodesUsed = Number(w.inodes_used.value);
  const ms = w.timestamp ? Number(BigInt(w.timestamp) / 1_000_000n) : 0;
  if (ms > 0) out.timeMs = ms;
  return out;
}

type DuBatchAddon = NativeAddon & { duBatch?(reqs: UsageRequest[]): Promise<UsageAnswer[]> };

/**
 * The walks in the native addon (native/du_batch.cc): a batch is one threadpool job with the
 * worker's answers, and no thread (its own V8 isolate, started again each period after it idles
 * out) nor a promise per directory entry. Undefined without the addon or on a stale build:
 * the worker pool measures then.
 */
export function nativeMeasureFs(): MeasureFs | undefined {
  const a = loadNative().addon as DuBatchAddon | undefined;
  if (typeof a?.duBatch !== 'function') return undefined;
  const du = a.duBatch.bind(a);
  return (reqs) => du(reqs);
}

/** Volume plugins whose data lives on the node's disk for the pod's lifetime (ephemeral-storage). */
export const EPHEMERAL_VOLUME_PLUGINS: ReadonlySet<string> = new Set([
  'kubernetes.io~empty-dir',
  'kubernetes.io~configmap',
  'kubernetes.io~secret',
  'kubernetes.io~downward-api',
  'kubernetes.io~projected',
]);

interface Entry {
  split: 0 | 2;
  /** When the last measurement finished (clock ms); -Infinity before the first. */
  at: number;
  measuring: boolean;
  answer?: UsageAnswer;
}

export interface FsUsageCacheOptions {
  measure: MeasureFs;
  clock: Clock;
  /** volumeStatsAggPeriod, ms. */
  periodMs: number;
  log: Logger;
  batch?: number;
  concurrency?: number;
}

export class FsUsageCache {
  private readonly entries = new Map<string, Entry>();
  private readonly queue: string[] = [];
  private active = 0;
  private idleWaiters: (() => void)[] = [];
  private warned = new Set<string>();

  constructor(private readonly opts: FsUsageCacheOptions) {}

  /** Keeps these paths measured (new ones now, the others once per period); others are forgotten. */
  track(reqs: UsageRequest[]): void {
    const now = this.opts.clock.now();
    const want = new Set<string>();
    for (const r of reqs) {
      want.add(r.path);
      let e = this.entries.get(r.path);
      if (!e) {
        e = { split: r.split ?? 0, at: -Infinity, measuring: false };
        this.entries.set(r.path, e);
      }
      if (!e.measuring && now - e.at >= this.opts.periodMs) {
        e.measuring = true;
        this.queue.push(r.path);
      }
    }
    for (const k of this.entries.keys()) if (!want.has(k)) this.entries.delete(k);
    this.pump();
  }

  /** Measures every tracked path again now, whatever its age; resolves when all are in. */
  async remeasure(): Promise<void> {
    for (const [path, e] of this.entries) {
      if (e.measuring) continue;
      e.measuring = true;
      this.queue.push(path);
    }
    this.pump();
    await this.idle();
  }

  /** The last measurement of a path and when it finished. */
  get(path: string): { answer: UsageAnswer; time: Date } | undefined {
    const e = this.entries.get(path);
    return e?.answer ? { answer: e.answer, time: new Date(e.at) } : undefined;
  }

  /** Resolves when nothing is queued or in flight. */
  idle(): Promise<void> {
    if (this.active === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  private pump(): void {
    const batchSize = this.opts.batch ?? FS_USAGE_BATCH;
    while (this.active < (this.opts.concurrency ?? FS_USAGE_CONCURRENCY) && this.queue.length) {
      const paths = this.queue.splice(0, batchSize).filter((p) => this.entries.has(p));
      if (!paths.length) continue;
      this.active++;
      const reqs = paths.map((path) => ({ path, split: this.entries.get(path)!.split }));
      void this.opts.measure(reqs)
        .then(
          (answers) => {
            const at = this.opts.clock.now();
            paths.forEach((p, i) => {
              const a = answers[i] ?? {};
              if (a.error && !this.warned.has(p)) {
                this.warned.add(p);
                this.opts.log.warn('Filesystem accounting failed; leaving the figure out', { path: p, err: a.error });
              }
              const e = this.entries.get(p);
              if (!e) return;
              e.measuring = false;
              e.at = at;
              if (!a.error) e.answer = a;
            });
          },
          (err: unknown) => {
            const at = this.opts.clock.now();
            this.opts.log.warn('Filesystem accounting task failed', { paths: paths.length, err: (err as Error).message });
            for (const p of paths) {
              const e = this.entries.get(p);
              if (e) { e.measuring = false; e.at = at; }
            }
          },
        )
        .finally(() => {
          this.active--;
          this.pump();
          if (this.active === 0 && this.queue.length === 0) for (const w of this.idleWaiters.splice(0)) w();
        });
    }
  }
}

/** The id of a `<runtime>://<id>` containerID. */
function containerIdOf(containerID: string | undefined): string | undefined {
  if (!containerID) return undefined;
  const at = containerID.indexOf('://');
  return (at < 0 ? containerID : containerID.slice(at + 3)) || undefined;
}

/** `<rootDir>/pods/<uid>/volumes`: one figure per `<plugin>/<name>` below it. */
export function podVolumesDir(rootDir: string, uid: string): string {
  return join(rootDir, 'pods', uid, 'volumes');
}

/**
 * A pod's accounting paths, built once per pod spec (every snapshot asks for all of them: 1000
 * pods, every 10 s); valid while the pod's identity and the directories are the same.
 */
interface PodPaths {
  uid: string;
  namespace: string | undefined;
  name: string | undefined;
  rootDir: string;
  podLogsDir: string | undefined;
  volumes: string;
  logs: Map<string, string | undefined>;
}
const podPaths = new WeakMap<Pod['spec'], PodPaths>();

function pathsOf(pod: Pod, rootDir: string, podLogsDir: string | undefined): PodPaths {
  const m = pod.metadata;
  let p = podPaths.get(pod.spec);
  if (!p || p.uid !== m.uid || p.namespace !== m.namespace || p.name !== m.name || p.rootDir !== rootDir || p.podLogsDir !== podLogsDir) {
    p = { uid: m.uid ?? '', namespace: m.namespace, name: m.name, rootDir, podLogsDir, volumes: podVolumesDir(rootDir, m.uid ?? ''), logs: new Map() };
    podPaths.set(pod.spec, p);
  }
  return p;
}

function logsDirOf(pod: Pod, name: string, podLogsDir: string | undefined, rootDir: string): string | undefined {
  const paths = pathsOf(pod, rootDir, podLogsDir);
  if (paths.logs.has(name)) return paths.logs.get(name);
  let dir: string | undefined;
  try {
    dir = containerLogsDirectory(pod, { name } as Parameters<typeof containerLogsDirectory>[1], podLogsDir);
  } catch {
    // a name that cannot form a path under the logs dir has no logs there
    dir = undefined;
  }
  paths.logs.set(name, dir);
  return dir;
}

/** What the walks need for these pods: each pod's volumes, each container's log directory. */
export function usageRequests(pods: Pod[], rootDir: string, podLogsDir: string | undefined): UsageRequest[] {
  const out: UsageRequest[] = [];
  for (const pod of pods) {
    const uid = pod.metadata.uid;
    if (!uid || /[/\\]|^\.\.?$/.test(uid)) continue;
    out.push({ path: pathsOf(pod, rootDir, podLogsDir).volumes, split: 2 });
    for (const c of pod.spec.initContainers ?? []) {
      const dir = logsDirOf(pod, c.name, podLogsDir, rootDir);
      if (dir) out.push({ path: dir });
    }
    for (const c of pod.spec.containers) {
      const dir = logsDirOf(pod, c.name, podLogsDir, rootDir);
      if (dir) out.push({ path: dir });
    }
  }
  return out;
}

/** Capacity, availability and inode totals of the filesystem holding a figure. */
function withFs(base: FsStats | undefined, time: Date, used: bigint | undefined, inodesUsed: bigint | undefined): FsStats {
  const s: FsStats = { time };
  if (base?.availableBytes !== undefined) s.availableBytes = base.availableBytes;
  if (base?.capacityBytes !== undefined) s.capacityBytes = base.capacityBytes;
  if (used !== undefined) s.usedBytes = used;
  if (base?.inodesFree !== undefined) s.inodesFree = base.inodesFree;
  if (base?.inodes !== undefined) s.inodes = base.inodes;
  if (inodesUsed !== undefined) s.inodesUsed = inodesUsed;
  return s;
}

export interface FsAccountingInputs {
  pods: Pod[];
  rootDir: string;
  podLogsDir?: string;
  cache: FsUsageCache;
  /** The runtime's writable-layer figures by container id (CRI ContainerStats), if taken. */
  writableLayers?: ReadonlyMap<string, WritableLayer>;
  /** The node's root filesystem (logs and disk-backed volumes live there) and the image fs. */
  nodeFs?: FsStats;
  imageFs?: FsStats;
}

/**
 * Adds what accounting measured to the Summary, as upstream shows it: containers' `rootfs`
 * (writable layer; capacity of the image fs) and `logs`, pods' `volume` list and
 * `ephemeral-storage` (writable layers + logs + disk-backed ephemeral volumes), and
 * `node.runtime.containerFs` (the image fs: containers' layers live there).
 */
export function addFsAccounting(summary: Summary, inp: FsAccountingInputs): void {
  if (summary.node.runtime?.imageFs && !summary.node.runtime.containerFs) summary.node.runtime.containerFs = summary.node.runtime.imageFs;
  if (summary.pods.length === 0) return;
  const byUid = new Map(inp.pods.map((p) => [p.metadata.uid, p]));
  for (const ps of summary.pods) {
    const pod = byUid.get(ps.podRef.uid);
    if (pod) addPod(ps, pod, inp);
  }
}

function addPod(ps: PodStats, pod: Pod, inp: FsAccountingInputs): void {
  let bytes = 0n;
  let inodes = 0n;
  let measured = false;
  let last: Date | undefined;
  const add = (s: FsStats | undefined): void => {
    if (!s || s.usedBytes === undefined) return;
    measured = true;
    bytes += s.usedBytes;
    inodes += s.inodesUsed ?? 0n;
    if (s.time && (!last || s.time > last)) last = s.time;
  };
  const byName = (name: string): string | undefined =>
    (pod.status?.initContainerStatuses?.find((s) => s.name === name) ?? pod.status?.containerStatuses?.find((s) => s.name === name))?.containerID;
  for (const cs of ps.containers) {
    const id = !cs.rootfs && inp.writableLayers ? containerIdOf(byName(cs.name)) : undefined;
    const w = id ? inp.writableLayers?.get(id) : undefined;
    if (!cs.rootfs && w) {
      const t = w.timeMs !== undefined ? new Date(w.timeMs) : new Date();
      cs.rootfs = withFs(inp.imageFs, t, BigInt(w.usedBytes), w.inodesUsed !== undefined ? BigInt(w.inodesUsed) : undefined);
    }
    add(cs.rootfs);
    const dir = logsDirOf(pod, cs.name, inp.podLogsDir, inp.rootDir);
    const logs = dir ? inp.cache.get(dir) : undefined;
    if (logs?.answer.usage) {
      cs.logs = withFs(inp.nodeFs, logs.time, BigInt(logs.answer.usage.bytes), BigInt(logs.answer.usage.inodes));
      add(cs.logs);
    }
  }
  const vols = inp.cache.get(ps.podRef.uid === pod.metadata.uid ? pathsOf(pod, inp.rootDir, inp.podLogsDir).volumes : podVolumesDir(inp.rootDir, ps.podRef.uid));
  if (vols?.answer.children) {
    const list: VolumeStats[] = [];
    for (const [key, u] of Object.entries(vols.answer.children).sort(([a], [b]) => a.localeCompare(b))) {
      const slash = key.indexOf('/');
      const plugin = key.slice(0, slash);
      const v = volumeStats(key.slice(slash + 1), u, vols.time, inp.nodeFs);
      list.push(v);
      // A volume on a mount of its own (tmpfs emptyDir) is memory, not the node's disk.
      if (EPHEMERAL_VOLUME_PLUGINS.has(plugin) && !u.mount) add(v);
    }
    if (list.length) ps.volume = list;
  }
  if (measured) ps['ephemeral-storage'] = withFs(inp.nodeFs, last ?? new Date(), bytes, inodes);
}

function volumeStats(name: string, u: Usage, time: Date, nodeFs: FsStats | undefined): VolumeStats {
  const fs = withFs(u.mount ? undefined : nodeFs, time, BigInt(u.bytes), BigInt(u.inodes));
  return { ...fs, time, name };
}
