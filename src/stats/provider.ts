// The stats provider: maps the kubelet's pods and containers to their cgroups, reads them in
// one batch (native addon, or the pure-TS fs reader when the addon is absent), or asks the
// runtime (CRI backend), adds the node figures, and keeps one snapshot per housekeeping
// interval that every consumer (/stats/summary, /metrics/resource, eviction) shares.
import { stat } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';

import type { Pod } from '../api/types.js';
import type { StatsBackend } from '../config/kubelet-config.js';
import type { ContainerStats as CriContainerStats, ImageFsInfoResponse } from '../runtime/cri-types.js';
import { acquireWorkerPool } from '../prober/runner.js';
import type { UsageAnswer, UsageRequest } from '../../workers/fs-usage.js';
import { FS_USAGE_WORKER_URL, FsUsageCache, addFsAccounting, nativeMeasureFs, usageRequests, writableLayerOf, type MeasureFs, type WritableLayer } from './fs-usage.js';
import { realClock, type Clock, type Timer } from '../util/clock.js';
import { rootLogger, type Logger } from '../util/log.js';
import { FsCgroupReader } from './cgroup-fs-reader.js';
import { NativeCgroupReader, createNativeCgroupReader } from './cgroup-native-reader.js';
import { cgroupRefFor, discoverCgroupMounts, type CgroupMounts } from '../cgroups/index.js';
import type { CgroupReader, CgroupRef, CgroupSampleBatch, CgroupV1Ref } from './cgroup-sample.js';
import { buildCriPodStats, fetchCriStats, type CriStatsSource } from './cri-backend.js';
import { NodeStatsReader, fsStatsOf } from './node-stats.js';
import { WritableLayerReader } from './writable-layers.js';
import {
  CpuRateTracker,
  buildCgroupSummary,
  podsWorkingSetBytes,
  cgroupCpuRates,
  parseTime,
  type ContainerPlan,
  type FsStats,
  type PodPlan,
  type PodReference,
  type Summary,
  type SummaryPlan,
  type Time,
} from './summary.js';
import { KubeletError } from '../util/errors.js';

/** upstream: cAdvisor's housekeeping interval as the kubelet sets it. */
export const DEFAULT_STATS_HOUSEKEEPING_INTERVAL_MS = 10_000;
/** The longest an eviction pass waits for re-measured disk figures (a walk stuck on a hung mount must not stop eviction). */
export const DISK_ACCOUNTING_WAIT_MS = 10_000;

export type StatsBackendName = StatsBackend;

/** What the provider needs from the kubelet (the Kubelet class has all of it). */
export interface StatsHost {
  readonly nodeName: string;
  readonly config: {
    readonly statsBackend: StatsBackendName;
    readonly cgroupRoot?: string | null;
    /** How often volumes, logs and writable layers are measured; 0 turns that accounting off (upstream). */
    readonly volumeStatsAggPeriod?: number;
    readonly podLogsDir?: string;
  };
  readonly flags: { readonly rootDir: string };
  readonly cri: CriStatsSource & {
    imageFsInfo(): Promise<ImageFsInfoResponse>;
    /**
     * The runtime's endpoint and call settings (a CriClient has them): the writable layers are then
     * read lean (writable-layers.ts); without them, from the full ListContainerStats answer.
     */
    readonly runtimeEndpoint?: string;
    readonly timeoutMs?: number;
    readonly maxMessageBytes?: number;
  };
  readonly clock?: Clock;
  getPods(): Pod[];
  /** `/kubepods[/burstable|/besteffort]/pod<uid>`; a container's cgroup is `<that>/<id>`. */
  podCgroupName(pod: Pod): string;
  /** The cgroup driver's container cgroup (systemd: `<pod>/cri-containerd-<id>.scope`); default `<pod>/<id>`. */
  containerCgroupName?(podPath: string, containerID: string): string;
  /** The kubepods cgroup (systemd: `/kubepods.slice`); default `<cgroupRoot>/kubepods`. */
  podsCgroupName?(): string;
}

export interface StatsProviderOptions {
  host: StatsHost;
  log?: Logger;
  /** Overrides host.config.statsBackend. */
  backend?: StatsBackendName;
  housekeepingIntervalMs?: number;
  /** Default: discovered from /proc/self/mountinfo at start(). */
  mounts?: CgroupMounts;
  /** The native reader, or why there is none. Default: createNativeCgroupReader(). */
  native?: { reader?: CgroupReader; error?: string };
  /** Default: a FsCgroupReader. */
  fsReader?: CgroupReader;
  /** Where procfs is (tests). Default /proc. */
  procDir?: string;
  /** Runs the du-like walks; default: the shared worker pool (workers/fs-usage.ts). */
  measureFs?: MeasureFs;
}

export interface StatsSnapshot {
  readonly time: Date;
  /** The backend that produced the pods' figures. */
  readonly backend: StatsBackendName;
  /**
   * The Summary of this snapshot. With the cgroup backends it is built from the batch when
   * asked for and shared only by the callers of the same event-loop turn: the object tree of
   * every pod is not kept for the whole interval (long enough to be promoted into V8's old
   * generation and to cost a mark-compact), only the batch's typed arrays are.
   */
  readonly summary: Summary;
  /**
   * A Summary of the node and only these pods (built now, not shared): a consumer that needs a
   * few pods' stats does not build every pod's.
   */
  summaryOf(uids: ReadonlySet<string>): Summary;
  /** The sum of the pods' working sets, as the Summary's pods would add up (built from the batch). */
  podsWorkingSetBytes(): bigint;
  /** The cgroup batch read for it and each row's cgroup path (for consumers needing more fields). */
  cgroups: { paths: string[]; batch: CgroupSampleBatch };
  /** Wall time the snapshot took, ms. */
  readonly durationMs: number;
}

/** A snapshot whose Summary is built on demand (see StatsSnapshot.summary). */
class CollectedSnapshot implements StatsSnapshot {
  #summary?: Summary;
  #podsWorkingSet?: bigint;
  constructor(
    readonly time: Date,
    readonly backend: StatsBackendName,
    readonly cgroups: StatsSnapshot['cgroups'],
    readonly durationMs: number,
    /** The Summary, of every pod or of `only`. */
    readonly build: (only?: ReadonlySet<string>) => Summary,
    readonly sumPodsWorkingSet: () => bigint,
  ) {}

  summaryOf(uids: ReadonlySet<string>): Summary {
    return this.build(uids);
  }

  podsWorkingSetBytes(): bigint {
    return (this.#podsWorkingSet ??= this.sumPodsWorkingSet());
  }

  get summary(): Summary {
    let s = this.#summary;
    if (!s) {
      s = this.#summary = this.build();
      setImmediate(() => {
        this.#summary = undefined;
      });
    }
    return s;
  }
}

/** The container id of a `<runtime>://<id>` containerID. */
export function containerIdOf(containerID: string | undefined): string | undefined {
  if (!containerID) return undefined;
  const at = containerID.indexOf('://');
  const id = at < 0 ? containerID : containerID.slice(at + 3);
  return id === '' ? undefined : id;
}

/**
 * What the Summary needs of a cgroup: a container's CPU and memory, a pod's also its pids, the
 * node's (root, kubepods) everything. On v1 that narrows the controllers read (and so the
 * files: 6 per container instead of 11); a v2 cgroup is one directory, read whole.
 */
export type StatsCgroupScope = 'container' | 'pod' | 'node';

const V1_SCOPE: Record<StatsCgroupScope, ReadonlyArray<'cpu' | 'cpuacct' | 'memory' | 'pids' | 'blkio'>> = {
  container: ['cpuacct', 'memory'],
  pod: ['cpuacct', 'memory', 'pids'],
  node: ['cpu', 'cpuacct', 'memory', 'pids', 'blkio'],
};

/** The cgroup the provider reads for a path (hybrid hosts: without the unified dir, see below). */
export function statsCgroupRef(mounts: CgroupMounts, cgroupPath: string, scope: StatsCgroupScope = 'node'): CgroupRef {
  const ref = cgroupRefFor(mounts, cgroupPath);
  if (ref.version === 2) return ref;
  // The Summary needs no PSI, and a pod dir absent from the unified mount must not hide the pod.
  const out: { -readonly [K in keyof CgroupV1Ref]: CgroupV1Ref[K] } = { version: 1 };
  for (const c of V1_SCOPE[scope]) if (ref[c] !== undefined) out[c] = ref[c];
  return out;
}

/** One pod's rows of the plan, as #podRows computed them. */
interface PodRows {
  /** The collection that last planned the pod (entries not planned in one are dropped). */
  gen: number;
  podRef: PodReference;
  spec: Pod['spec'];
  status: Pod['status'];
  name: string | undefined;
  namespace: string | undefined;
  podPath: string;
  podKey: string;
  startTime: Time;
  containers: { name: string; id: string; startTime: Time; path: string; key: string }[];
}

export class StatsProvider {
  readonly #host: StatsHost;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #requested: StatsBackendName;
  readonly #opts: StatsProviderOptions;
  #mounts?: CgroupMounts;
  #reader?: CgroupReader;
  #oneShotReader?: CgroupReader;
  #backend?: StatsBackendName;
  #node?: NodeStatsReader;
  readonly #cgroupRates = new CpuRateTracker();
  readonly #criRates = new CpuRateTracker();
  /** Each planned cgroup's ref, with the collection that last planned it; updated in place. */
  readonly #refCache = new Map<string, { ref: CgroupRef; gen: number }>();
  readonly #podRowsCache = new Map<string, PodRows>();
  #planGen = 0;
  /** The last plan and the pod rows it was made of: reused while every pod's rows are the same objects. */
  #lastPlan?: { rows: PodRows[]; podsPath: string; plan: SummaryPlan; refs: CgroupRef[]; paths: string[] };
  #podsStart?: { path: string; time: Time };
  #current?: StatsSnapshot;
  #inflight?: Promise<StatsSnapshot>;
  #timer?: Timer;
  #running = false;
  #imageFsWarned = false;
  #initialized?: Promise<void>;
  #fsUsage?: FsUsageCache;
  #releasePool?: () => Promise<void>;
  #writable?: { at: number; byId: Map<string, WritableLayer>; inflight: boolean };
  #layerReader?: WritableLayerReader;
  #pool?: { run(task: unknown, opts: { filename: string }): Promise<unknown> };

  constructor(opts: StatsProviderOptions) {
    this.#opts = opts;
    this.#host = opts.host;
    this.#log = opts.log ?? rootLogger;
    this.#clock = opts.host.clock ?? realClock;
    this.#intervalMs = opts.housekeepingIntervalMs ?? DEFAULT_STATS_HOUSEKEEPING_INTERVAL_MS;
    this.#requested = opts.backend ?? opts.host.config.statsBackend;
    if (!(this.#intervalMs > 0)) throw new RangeError('housekeepingIntervalMs must be > 0');
  }

  /** The backend in use (known after start()). */
  get backend(): StatsBackendName | undefined {
    return this.#backend;
  }

  /** The ref of a cgroup path, with every controller (/metrics/cadvisor). */
  cgroupRef(path: string): CgroupRef {
    if (!this.#mounts) throw new KubeletError('ERR_STATS_NOT_STARTED', 'stats provider not started');
    return cgroupRefFor(this.#mounts, path);
  }

  /**
   * Reads these cgroup paths now, every controller, for /metrics/cadvisor: through the same
   * reader, without kept-open descriptors (the snapshot's descriptors stay the snapshot's).
   */
  async readCgroupPaths(paths: readonly string[]): Promise<{ batch: CgroupSampleBatch; refs: CgroupRef[] }> {
    await this.#init();
    const refs = paths.map((p) => cgroupRefFor(this.#mounts!, p));
    const r = this.#reader!;
    const reader = (this.#oneShotReader ??= r instanceof NativeCgroupReader ? r.withKeepOpen(false) : r);
    return { batch: await reader.readCgroups(refs), refs };
  }

  /** The cgroup reader in use: 'native' or 'fs' (node figures use it with the CRI backend too). */
  get readerBackend(): 'native' | 'fs' | undefined {
    return this.#reader?.backend;
  }

  /** Chooses the backend, then takes a snapshot every housekeeping interval. */
  async start(): Promise<void> {
    await this.#init();
    if (this.#running) return;
    this.#running = true;
    this.#log.info('Started stats provider', {
      backend: this.#backend,
      cgroupReader: this.#reader!.backend,
      housekeepingInterval: `${this.#intervalMs}ms`,
    });
    this.#tick();
  }

  stop(): void {
    this.#running = false;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#layerReader?.close();
    this.#layerReader = undefined;
    const release = this.#releasePool;
    this.#releasePool = undefined;
    void release?.().catch((err: unknown) => this.#log.warn('Releasing the worker pool failed', { err: (err as Error).message }));
  }

  /** The accounting cache (undefined while volumeStatsAggPeriod is 0). */
  get fsUsage(): FsUsageCache | undefined {
    return this.#fsUsage;
  }

  #measureFs(): MeasureFs {
    if (this.#opts.measureFs) return this.#opts.measureFs;
    const native = nativeMeasureFs();
    if (native) return native;
    return async (reqs: UsageRequest[]) => {
      if (!this.#releasePool) {
        const shared = acquireWorkerPool();
        this.#releasePool = shared.release;
        this.#pool = shared.pool;
      }
      return (await this.#pool!.run(reqs, { filename: FS_USAGE_WORKER_URL.href })) as UsageAnswer[];
    };
  }

  /** Writable layers from the runtime's ContainerStats, refreshed at most once per period. */
  #writableLayers(periodMs: number): Map<string, WritableLayer> | undefined {
    const w = (this.#writable ??= { at: -Infinity, byId: new Map(), inflight: false });
    if (!w.inflight && this.#clock.now() - w.at >= periodMs) {
      w.inflight = true;
      const cri = this.#host.cri;
      if (!this.#layerReader && cri.runtimeEndpoint && cri.timeoutMs && cri.maxMessageBytes) {
        this.#layerReader = new WritableLayerReader({ runtimeEndpoint: cri.runtimeEndpoint, timeoutMs: cri.timeoutMs, maxMessageBytes: cri.maxMessageBytes, clock: this.#clock });
      }
      const read = this.#layerReader
        ? this.#layerReader.read()
        : cri.listContainerStats(null).then((stats) => {
            // kept for a period: only the layer figures, not each container's labels, cpu and memory
            const byId = new Map<string, WritableLayer>();
            for (const s of stats) {
              const layer = s.attributes?.id ? writableLayerOf(s) : undefined;
              if (layer) byId.set(s.attributes!.id, layer);
            }
            return byId;
          });
      void read.then(
        (byId) => {
          w.byId = byId;
          w.at = this.#clock.now();
        },
        (err: unknown) => {
          w.at = this.#clock.now();
          this.#log.warn('Container writable layer stats unavailable', { err: (err as Error).message });
        },
      ).finally(() => { w.inflight = false; });
    }
    return w.at === -Infinity ? undefined : w.byId;
  }

  #init(): Promise<void> {
    // A failed start (mountinfo unreadable) is retried by the next caller rather than kept.
    this.#initialized ??= this.#doInit().catch((err: unknown) => {
      this.#initialized = undefined;
      throw err;
    });
    return this.#initialized;
  }

  async #doInit(): Promise<void> {
    this.#mounts = this.#opts.mounts ?? (await discoverCgroupMounts());
    const native = this.#opts.native ?? createNativeCgroupReader(undefined, { clock: this.#clock });
    // The addon knows USER_HZ; the fs reader then converts cpuacct.stat ticks the same way.
    const ticks = (native.reader as { clockTicks?: unknown } | undefined)?.clockTicks;
    const fsReader = this.#opts.fsReader ?? new FsCgroupReader(typeof ticks === 'number' ? { clockTicksPerSecond: ticks } : {});
    if (this.#requested === 'fs') {
      this.#reader = fsReader;
    } else if (native.reader) {
      this.#reader = native.reader;
    } else {
      this.#reader = fsReader;
      const what = this.#requested === 'cri' ? 'reading node cgroups with the fs reader' : 'using the fs stats backend';
      this.#log.warn(`Native cgroup reader unavailable; ${what}`, {
        requested: this.#requested,
        reason: native.error,
      });
    }
    this.#backend = this.#requested === 'cri' ? 'cri' : this.#reader.backend;
    this.#node = new NodeStatsReader({ procDir: this.#opts.procDir, rootDir: this.#host.flags.rootDir });
  }

  #tick(): void {
    if (!this.#running) return;
    void this.snapshot()
      .catch((err: unknown) => this.#log.error('Stats housekeeping failed', { err: (err as Error).message }))
      .finally(() => {
        if (this.#running) this.#timer = this.#clock.setTimeout(() => this.#tick(), this.#intervalMs);
      });
  }

  /** The latest snapshot without waiting, if any. */
  latest(): StatsSnapshot | undefined {
    return this.#current;
  }

  /**
   * The snapshot of this housekeeping interval: the cached one while younger than the
   * interval, else a new read; concurrent callers share the read in flight.
   */
  async snapshot(): Promise<StatsSnapshot> {
    const cur = this.#current;
    if (cur && this.#clock.now() - cur.time.getTime() < this.#intervalMs) return cur;
    return this.refresh();
  }

  /** A new read now (or the one in flight). */
  refresh(): Promise<StatsSnapshot> {
    if (!this.#inflight) {
      this.#inflight = this.#collect().then(
        (snap) => {
          this.#current = snap;
          this.#inflight = undefined;
          return snap;
        },
        (err: unknown) => {
          this.#inflight = undefined;
          throw err;
        },
      );
    }
    return this.#inflight;
  }

  /**
   * A new read after every pod's volumes, logs and writable layers were measured again (the
   * eviction manager ranks disk pressure on it); a plain refresh without accounting.
   */
  async refreshDiskAccounting(): Promise<StatsSnapshot> {
    await this.refresh();
    if (this.#fsUsage) {
      // bounded: past the wait the ranking takes what the cache has
      let timer: { cancel(): void } | undefined;
      await Promise.race([this.#fsUsage.remeasure(), new Promise<void>((r) => { timer = this.#clock.setTimeout(r, DISK_ACCOUNTING_WAIT_MS); })]);
      timer?.cancel();
    }
    // a read that began before the measurements ended would carry the old figures
    await this.#inflight?.catch(() => undefined);
    return this.refresh();
  }

  async getSummary(): Promise<Summary> {
    return (await this.snapshot()).summary;
  }

  #ref(cgroupPath: string, scope: StatsCgroupScope, refKey?: string): CgroupRef {
    const key = refKey ?? `${scope}:${cgroupPath}`;
    const kept = this.#refCache.get(key);
    if (kept) {
      kept.gen = this.#planGen;
      return kept.ref;
    }
    const ref = statsCgroupRef(this.#mounts!, cgroupPath, scope);
    this.#refCache.set(key, { ref, gen: this.#planGen });
    return ref;
  }

  /**
   * A pod's cgroup rows as its spec and status give them, reused while both are the same objects
   * (the status manager keeps an unchanged status): a snapshot of 1000 unchanged pods builds no
   * paths, keys or times.
   */
  #podRows(pod: Pod, uid: string): PodRows {
    const prev = this.#podRowsCache.get(uid);
    if (prev && prev.spec === pod.spec && prev.status === pod.status && prev.name === pod.metadata.name && prev.namespace === pod.metadata.namespace) {
      prev.gen = this.#planGen;
      return prev;
    }
    const podPath = this.#host.podCgroupName(pod);
    const containers: PodRows['containers'] = [];
    for (const list of [pod.status?.initContainerStatuses, pod.status?.containerStatuses]) {
      for (const cs of list ?? []) {
        const id = containerIdOf(cs.containerID);
        if (!id || !cs.state.running) continue;
        const path = this.#host.containerCgroupName?.(podPath, id) ?? `${podPath}/${id}`;
        containers.push({ name: cs.name, id, startTime: parseTime(cs.state.running.startedAt), path, key: `container:${path}` });
      }
    }
    const rows: PodRows = {
      gen: this.#planGen,
      podRef: { name: pod.metadata.name ?? '', namespace: pod.metadata.namespace ?? 'default', uid },
      spec: pod.spec,
      status: pod.status,
      name: pod.metadata.name,
      namespace: pod.metadata.namespace,
      podPath,
      podKey: `pod:${podPath}`,
      startTime: parseTime(pod.status?.startTime),
      containers,
    };
    this.#podRowsCache.set(uid, rows);
    return rows;
  }

  /**
   * The cgroup plan of the pods the kubelet knows: pod cgroup + running containers. While no
   * pod changed, the last plan is used again: a collection at rest makes no plan objects (they
   * live as long as a snapshot, long enough to be promoted into the old generation).
   */
  #plan(withPods: boolean): { plan: SummaryPlan; refs: CgroupRef[]; paths: string[] } {
    const host = this.#host;
    const gen = ++this.#planGen;
    const podsPath = host.podsCgroupName?.() ?? `${(host.config.cgroupRoot ?? '').replace(/\/+$/, '')}/kubepods`;
    const rows: PodRows[] = [];
    if (withPods) {
      for (const pod of host.getPods()) {
        const uid = pod.metadata.uid;
        if (uid) rows.push(this.#podRows(pod, uid));
      }
    }
    const last = this.#lastPlan;
    if (last && last.podsPath === podsPath && last.plan.nodeName === host.nodeName && last.rows.length === rows.length && rows.every((r, i) => r === last.rows[i])) {
      // the same rows: every ref they name is still wanted
      for (const kept of this.#refCache.values()) kept.gen = gen;
      return last;
    }
    const refs: CgroupRef[] = [];
    const paths: string[] = [];
    const row = (p: string, scope: StatsCgroupScope, key?: string): number => {
      refs.push(this.#ref(p, scope, key));
      paths.push(p);
      return refs.length - 1;
    };
    const plan: SummaryPlan = {
      nodeName: host.nodeName,
      nodeStartTime: null,
      rootRow: row('/', 'node'),
      podsRow: row(podsPath, 'node'),
      podsStartTime: this.#podsStart?.path === podsPath ? this.#podsStart.time : undefined,
      pods: [],
    };
    for (const r of rows) {
      const containers: ContainerPlan[] = [];
      plan.pods.push({ podRef: r.podRef, startTime: r.startTime, row: row(r.podPath, 'pod', r.podKey), containers });
      for (const c of r.containers) containers.push({ name: c.name, id: c.id, startTime: c.startTime, row: row(c.path, 'container', c.key) });
    }
    for (const [uid, r] of this.#podRowsCache) if (r.gen !== gen) this.#podRowsCache.delete(uid);
    // Containers gone from the plan: their kept-open cgroup descriptors go with them.
    const dropped: CgroupRef[] = [];
    for (const [key, kept] of this.#refCache) {
      if (kept.gen === gen) continue;
      this.#refCache.delete(key);
      dropped.push(kept.ref);
    }
    if (dropped.length > 0) this.#reader?.forget?.(dropped);
    this.#lastPlan = { rows, podsPath, plan, refs, paths };
    return this.#lastPlan;
  }

  async #collect(): Promise<StatsSnapshot> {
    await this.#init();
    const started = performance.now();
    const backend = this.#backend!;
    const cri = backend === 'cri';
    const { plan, refs, paths } = this.#plan(!cri);
    const before = new Date(this.#clock.now());
    const [batch, node, imageFs, criResponses] = await Promise.all([
      this.#reader!.readCgroups(refs),
      this.#node!.read(before),
      this.#imageFs(before),
      cri ? fetchCriStats(this.#host.cri) : undefined,
    ]);
    const time = new Date(this.#clock.now());
    plan.nodeStartTime = node.bootTime ?? null;
    if (plan.podsStartTime === undefined && batch.ok(plan.podsRow)) {
      plan.podsStartTime = await this.#podsStartTime(paths[plan.podsRow]!, refs[plan.podsRow]!);
    }
    if (imageFs) node.figures.imageFs = imageFs;
    // the rates are taken now, once: every Summary built from this snapshot shows the same
    const rates = cgroupCpuRates(plan, batch, node.figures, time, this.#cgroupRates);
    const criPods = criResponses ? buildCriPodStats(criResponses, time, this.#criRates, imageFs) : undefined;
    const account = this.#account(cri);
    const nodeFs = node.figures.fs;
    const build = (only?: ReadonlySet<string>): Summary => {
      const of = only ? { ...plan, pods: plan.pods.filter((p) => only.has(p.podRef.uid)) } : plan;
      const summary = buildCgroupSummary(of, batch, node.figures, time, rates);
      if (criPods) summary.pods = only ? criPods.filter((p) => only.has(p.podRef.uid)) : criPods;
      account?.(summary, nodeFs, imageFs);
      return summary;
    };
    const sumPodsWorkingSet = (): bigint => {
      if (!criPods) return podsWorkingSetBytes(plan, batch);
      let sum = 0n;
      for (const p of criPods) sum += p.memory?.workingSetBytes ?? 0n;
      return sum;
    };
    return new CollectedSnapshot(time, backend, { paths, batch }, performance.now() - started, build, sumPodsWorkingSet);
  }

  /**
   * Volumes, logs, writable layers and ephemeral storage from the accounting cache (refreshed in
   * the background): what the snapshot asks to be measured is tracked now, and its Summaries
   * take the cache's figures when built.
   */
  #account(cri: boolean): ((summary: Summary, nodeFs: FsStats | undefined, imageFs: FsStats | undefined) => void) | undefined {
    const periodMs = this.#host.config.volumeStatsAggPeriod;
    if (periodMs === undefined || !(periodMs > 0)) return undefined;
    const cache = (this.#fsUsage ??= new FsUsageCache({ measure: this.#measureFs(), clock: this.#clock, periodMs, log: this.#log }));
    const pods = this.#host.getPods();
    const rootDir = this.#host.flags.rootDir;
    const podLogsDir = this.#host.config.podLogsDir;
    cache.track(usageRequests(pods, rootDir, podLogsDir));
    // the CRI backend took the writable layers with the rest of its figures
    const writableLayers = cri ? undefined : this.#writableLayers(periodMs);
    return (summary, nodeFs, imageFs) => addFsAccounting(summary, { pods, rootDir, podLogsDir, cache, writableLayers, nodeFs, imageFs });
  }

  /** The kubepods cgroup's creation time (its directory's birth or change time), looked up once. */
  async #podsStartTime(cgroupPath: string, ref: CgroupRef): Promise<Time> {
    const dir = ref.version === 2 ? ref.dir : (ref.memory ?? ref.cpuacct ?? ref.cpu ?? ref.pids ?? ref.blkio);
    let time: Time = null;
    if (dir) {
      try {
        const st = await stat(dir);
        time = new Date(st.birthtimeMs > 0 ? st.birthtimeMs : st.ctimeMs);
      } catch {
        return null;
      }
    }
    this.#podsStart = { path: cgroupPath, time };
    return time;
  }

  /** runtime.imageFs: usage from the runtime's ImageFsInfo, capacity from statfs of its mountpoint. */
  async #imageFs(time: Date): Promise<FsStats | undefined> {
    try {
      const info = await this.#host.cri.imageFsInfo();
      const usage = info.image_filesystems[0];
      const mountpoint = usage?.fs_id?.mountpoint;
      if (!usage || !mountpoint) return undefined;
      const fs = (await fsStatsOf(mountpoint, time)) ?? { time };
      if (usage.used_bytes) fs.usedBytes = BigInt(usage.used_bytes.value);
      if (usage.inodes_used) fs.inodesUsed = BigInt(usage.inodes_used.value);
      return fs;
    } catch (err) {
      if (!this.#imageFsWarned) {
        this.#imageFsWarned = true;
        this.#log.warn('Image filesystem stats unavailable; leaving runtime.imageFs out', { err: (err as Error).message });
      }
      return undefined;
    }
  }
}
