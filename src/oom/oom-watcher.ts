// The OOM watcher: picks a source (eBPF, cgroup eventfd/inotify, /dev/kmsg) per the
// `oomWatcher` setting, keeps the watched containers, and turns native events into OomEvents
// attributed to a pod and container (by cgroup inode, then by cgroup path), counting them in
// container_oom_events_total.
import { EventEmitter } from 'node:events';
import { stat } from 'node:fs/promises';

import type { OomWatcherMode } from '../config/kubelet-config.js';
import type { Counter, Registry } from '../metrics/registry.js';
import { loadNative } from '../native.js';
import type { CgroupRef } from '../cgroups/ref.js';
import { realClock, type Clock } from '../util/clock.js';
import { KubeletError, type KubeletErrorOptions } from '../util/errors.js';
import { rootLogger, type Logger } from '../util/log.js';
import { isUnderKubepods, parsePodCgroupPath } from './attribution.js';
import { KmsgOomParser, type KmsgOomRecord } from './kmsg-parser.js';
import type { NativeOomEvent, NativeOomExports, NativeOomWatcherHandle, NativeOomWatcherStats } from './native-types.js';
import type { OomEvent, OomScope, OomSourceName, OomWatcherStatus, OomWatchResult } from './types.js';

/** cAdvisor's metric, as the kubelet's /metrics/cadvisor exposes it. */
export const CONTAINER_OOM_EVENTS_TOTAL = 'container_oom_events_total';
const CONTAINER_OOM_EVENTS_HELP = 'Count of out of memory events observed for the container';
const OOM_METRIC_LABELS = ['container', 'id', 'namespace', 'pod'] as const;

/** Unwatched containers kept for attributing late events (an OOM kill races the container's exit). */
const RECENTLY_UNWATCHED = 1024;

/** The OOM watcher cannot do what was asked (codes: OomWatcherState, OomWatcherUnavailable). */
export class OomWatcherError extends KubeletError {
  constructor(code: string, message: string, options?: KubeletErrorOptions) {
    super(code, message, options);
  }
}

export interface OomWatcherOptions {
  /** The `oomWatcher` setting (flag --oom-watcher). */
  mode: OomWatcherMode;
  /** The native addon's OOM exports; default: the addon at KTS_NATIVE_ADDON or the package build. */
  native?: NativeOomExports;
  /** Where container_oom_events_total is registered; without one, counts stay in oomCounts(). */
  registry?: Registry;
  logger?: Logger;
  clock?: Clock;
  /** Called for every event (also emitted as 'oom'). */
  onEvent?: (event: OomEvent) => void;
}

interface WatchedContainer {
  podUID: string;
  containerName: string;
  containerID: string;
  podName?: string;
  podNamespace?: string;
  inode?: number;
  watchId?: number;
  kills: number;
  /** When watchContainer was called (clock ms): a PLEG list taken after it must show the container. */
  since: number;
}

/** A watched container as housekeeping reconciles it against the runtime's. */
export interface WatchedContainerInfo {
  containerID: string;
  podUID: string;
  /** When it was watched (clock ms). */
  since: number;
}

export interface WatchContainerMeta {
  podName?: string;
  podNamespace?: string;
}

/** Loads the addon's OOM exports (KTS_NATIVE_ADDON overrides the path). */
export function loadOomNative(addonPath: string | undefined = process.env.KTS_NATIVE_ADDON): { native?: NativeOomExports; error?: string } {
  const r = loadNative(addonPath ? { path: addonPath } : {});
  if (!r.addon) return { error: r.error ?? 'native addon unavailable' };
  const native = r.addon as unknown as NativeOomExports;
  if (typeof native.OomWatcherHandle !== 'function') return { error: 'native addon has no OOM watcher (stale build: rebuild it)' };
  return { native };
}

export class OomWatcher extends EventEmitter {
  readonly mode: OomWatcherMode;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly counter?: Counter;
  private readonly counts = new Map<string, number>();
  private readonly onEvent?: (event: OomEvent) => void;
  private native?: NativeOomExports;
  private nativeError?: string;
  private handle?: NativeOomWatcherHandle;
  private readonly containers = new Map<string, WatchedContainer>();
  private readonly byInode = new Map<number, WatchedContainer>();
  private readonly byWatchId = new Map<number, WatchedContainer>();
  private readonly recent = new Map<string, WatchedContainer>();
  private readonly cgroupRefs = new Map<string, CgroupRef>();
  private nextWatchId = 1;
  private readonly kmsgParser = new KmsgOomParser();
  private state: 'new' | 'running' | 'stopped' = 'new';
  private current: OomWatcherStatus;
  /** Native watches are armed per cgroup (eventfd/inotify). */
  private perCgroup = false;
  /** kmsg only reports victims outside the watched containers (auto's companion to cgroup). */
  private kmsgSystemOnly = false;

  constructor(opts: OomWatcherOptions) {
    super();
    this.mode = opts.mode;
    this.log = (opts.logger ?? rootLogger).with({ component: 'oom-watcher' });
    this.clock = opts.clock ?? realClock;
    this.onEvent = opts.onEvent;
    this.native = opts.native;
    this.current = { mode: opts.mode, sources: [] };
    if (opts.registry) {
      const existing = opts.registry.get(CONTAINER_OOM_EVENTS_TOTAL);
      this.counter = existing && existing.type === 'counter'
        ? (existing as Counter)
        : opts.registry.counter({ name: CONTAINER_OOM_EVENTS_TOTAL, help: CONTAINER_OOM_EVENTS_HELP, labelNames: [...OOM_METRIC_LABELS] });
    }
  }

  /**
   * Starts the sources the mode asks for. `auto` takes eBPF when it loads, else the cgroup
   * sources plus /dev/kmsg for victims outside pods, and says why in ebpfUnavailableReason.
   * Rejects when an explicitly chosen source (ebpf, cgroup, kmsg) cannot run.
   */
  async start(): Promise<OomWatcherStatus> {
    if (this.state !== 'new') throw new OomWatcherError('OomWatcherState', `oom watcher already ${this.state}`);
    this.state = 'running';
    const status: OomWatcherStatus = { mode: this.mode, sources: [] };
    this.current = status;
    if (this.mode === 'off') return status;
    if (!this.native) {
      const loaded = loadOomNative();
      this.native = loaded.native;
      this.nativeError = loaded.error;
    }
    const Handle = this.native?.OomWatcherHandle;
    if (!Handle) {
      status.nativeUnavailableReason = this.nativeError ?? 'native addon has no OOM watcher';
      if (this.mode === 'auto') {
        status.ebpfUnavailableReason = status.nativeUnavailableReason;
        this.log.warn('OOM watcher off: native addon unavailable', { reason: status.nativeUnavailableReason });
        return status;
      }
      this.state = 'stopped';
      throw new OomWatcherError('OomWatcherUnavailable', `oom watcher ${this.mode}: ${status.nativeUnavailableReason}`);
    }
    const handle = new Handle((events) => this.handleNative(events));
    this.handle = handle;
    try {
      if (this.mode === 'ebpf' || this.mode === 'auto') {
        const r = handle.startEbpf();
        if (r.ok) {
          status.sources.push('ebpf');
        } else {
          status.ebpfUnavailableReason = r.reason;
          if (this.mode === 'ebpf') throw new OomWatcherError('OomWatcherUnavailable', `oom watcher ebpf: ${r.reason}`);
          this.log.info('eBPF OOM source unavailable, using cgroup notifications', { reason: r.reason });
        }
      }
      if (this.mode === 'cgroup' || (this.mode === 'auto' && !status.sources.includes('ebpf'))) {
        this.perCgroup = true;
        status.sources.push('eventfd', 'inotify');
      }
      if (this.mode === 'kmsg' || (this.mode === 'auto' && this.perCgroup)) {
        const r = handle.startKmsg();
        if (r.ok) {
          status.sources.push('kmsg');
          this.kmsgSystemOnly = this.mode === 'auto';
        } else {
          status.kmsgUnavailableReason = r.reason;
          if (this.mode === 'kmsg') throw new OomWatcherError('OomWatcherUnavailable', `oom watcher kmsg: ${r.reason}`);
        }
      }
    } catch (err) {
      handle.close();
      this.handle = undefined;
      this.state = 'stopped';
      throw err;
    }
    // Arm containers registered before start.
    for (const c of this.containers.values()) await this.arm(c, undefined);
    this.log.info('OOM watcher started', { mode: this.mode, sources: status.sources.join(','), ebpfUnavailableReason: status.ebpfUnavailableReason });
    return status;
  }

  /** Stops every source and closes every fd. Idempotent. */
  stop(): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.handle?.close();
    this.handle = undefined;
    this.byWatchId.clear();
    for (const c of this.containers.values()) c.watchId = undefined;
  }

  status(): OomWatcherStatus {
    return { ...this.current, sources: [...this.current.sources] };
  }

  /** The native watcher's counters (fds, watches), or undefined when no native source runs. */
  nativeStats(): NativeOomWatcherStats | undefined {
    return this.handle?.stats();
  }

  /** Lets the process exit while the watcher runs (tests, tools); ref() undoes it. */
  unref(): void {
    this.handle?.unref();
  }

  ref(): void {
    this.handle?.ref();
  }

  /**
   * Watches a container's cgroup: records its inode for attribution and, with the cgroup
   * sources, arms eventfd (v1 memory dir) or inotify (v2 dir). Call it when the container has
   * started. Never rejects: a cgroup that is already gone is reported in the result.
   */
  async watchContainer(podUID: string, containerName: string, containerID: string, cgroup: CgroupRef, meta: WatchContainerMeta = {}): Promise<OomWatchResult> {
    const prev = this.containers.get(containerID);
    if (prev) this.disarm(prev);
    const c: WatchedContainer = { podUID, containerName, containerID, podName: meta.podName, podNamespace: meta.podNamespace, kills: prev?.kills ?? 0, since: this.clock.now() };
    this.containers.set(containerID, c);
    this.recent.delete(containerID);
    this.cgroupRefs.set(containerID, cgroup);
    if (this.state !== 'running') return { watch: 'none' };
    return this.arm(c, cgroup);
  }

  /** Forgets a container. Call it when the container is removed (not when it exits), so its count stays exported until then. */
  unwatch(containerID: string): void {
    const c = this.containers.get(containerID);
    if (!c) return;
    this.containers.delete(containerID);
    this.disarm(c);
    this.recent.set(containerID, c);
    if (this.recent.size > RECENTLY_UNWATCHED) this.recent.delete(this.recent.keys().next().value as string);
    this.counter?.deleteLabelValues(c.containerName, c.containerID, c.podNamespace ?? '', c.podName ?? '');
    this.counts.delete(containerID);
  }

  /** The watched containers (housekeeping unwatches those the runtime no longer has). */
  watched(): WatchedContainerInfo[] {
    const out: WatchedContainerInfo[] = [];
    for (const c of this.containers.values()) out.push({ containerID: c.containerID, podUID: c.podUID, since: c.since });
    return out;
  }

  /** OOM kills seen per watched container id (what container_oom_events_total exports). */
  oomCounts(): Map<string, number> {
    return new Map(this.counts);
  }

  /** OOM kills seen in one container (also recently unwatched ones). */
  oomKills(containerID: string): number {
    return (this.containers.get(containerID) ?? this.recent.get(containerID))?.kills ?? 0;
  }

  private async arm(c: WatchedContainer, cgroup: CgroupRef | undefined): Promise<OomWatchResult> {
    const ref = cgroup ?? this.cgroupRefs.get(c.containerID);
    if (!ref) return { watch: 'none' };
    // v1: the memory controller's dir; v2: the unified dir (the one eBPF's memcg inode names).
    const dir = ref.version === 2 ? ref.dir : ref.memory;
    if (!dir) return { watch: 'none', error: 'no memory cgroup directory for the container' };
    let inode: number;
    try {
      inode = (await stat(dir)).ino;
    } catch (err) {
      return { watch: 'none', error: `stat ${dir}: ${(err as Error).message}` };
    }
    // The container may have been unwatched or replaced while stat ran.
    if (this.containers.get(c.containerID) !== c || this.state !== 'running') return { watch: 'none' };
    c.inode = inode;
    this.byInode.set(inode, c);
    if (!this.perCgroup || !this.handle) return { inode, watch: 'none' };
    const id = this.nextWatchId++;
    try {
      if (ref.version === 2) this.handle.watchV2(id, dir);
      else this.handle.watchV1(id, dir);
    } catch (err) {
      return { inode, watch: 'none', error: (err as Error).message };
    }
    c.watchId = id;
    this.byWatchId.set(id, c);
    return { inode, watch: ref.version === 2 ? 'inotify' : 'eventfd' };
  }

  private disarm(c: WatchedContainer): void {
    if (c.watchId !== undefined) {
      this.handle?.unwatch(c.watchId);
      this.byWatchId.delete(c.watchId);
      c.watchId = undefined;
    }
    if (c.inode !== undefined && this.byInode.get(c.inode) === c) this.byInode.delete(c.inode);
    this.cgroupRefs.delete(c.containerID);
  }

  private handleNative(events: NativeOomEvent[]): void {
    if (this.state !== 'running') return;
    const delivered = process.hrtime.bigint();
    for (const e of events) {
      try {
        this.handleOne(e, delivered);
      } catch (err) {
        this.log.error('OOM event handling failed', { err: err as Error, source: e.source, kind: e.kind });
      }
    }
  }

  private handleOne(e: NativeOomEvent, delivered: bigint): void {
    switch (e.kind) {
      case 'oom_kill':
        if (e.source === 'ebpf') this.fromEbpf(e, delivered);
        else this.fromCgroup(e, delivered);
        return;
      case 'kmsg': {
        const record = e.line === undefined ? undefined : this.kmsgParser.feed(e.line);
        if (record) this.fromKmsg(record, e, delivered);
        return;
      }
      case 'removed': {
        // The kernel dropped the watch with the cgroup; the container stays known until unwatch().
        const c = e.id === undefined ? undefined : this.byWatchId.get(e.id);
        if (c) {
          this.byWatchId.delete(e.id!);
          c.watchId = undefined;
        }
        this.log.v(4).info('OOM watch ended: cgroup removed', { containerID: c?.containerID, source: e.source });
        return;
      }
      case 'oom': {
        const c = e.id === undefined ? undefined : this.byWatchId.get(e.id);
        this.log.v(2).info('memory cgroup under OOM without a kill', { containerID: c?.containerID, source: e.source });
        return;
      }
      case 'error':
        if (e.fatal) {
          // The native thread is gone: say so once, loudly, and in status().
          this.current.nativeFailure = e.message ?? 'native OOM watcher thread stopped';
          this.log.error('OOM watcher stopped: no more OOM events from native sources', { message: e.message, source: e.source });
          return;
        }
        this.log.warn('OOM watcher error', { message: e.message, source: e.source });
        return;
    }
  }

  private fromCgroup(e: NativeOomEvent, delivered: bigint): void {
    const c = e.id === undefined ? undefined : this.byWatchId.get(e.id);
    if (!c) return;
    const victims = e.victims ?? [];
    const first = victims[0];
    this.deliver(
      {
        source: e.source as OomSourceName,
        time: new Date(this.clock.now()),
        count: e.count ?? 1,
        scope: 'container',
        pid: first?.pid,
        comm: first?.comm,
        victims,
        cgroupInode: c.inode,
        observedTimeNs: e.observedTimeNs,
        deliveredTimeNs: delivered,
      },
      c,
    );
  }

  private fromEbpf(e: NativeOomEvent, delivered: bigint): void {
    let c = e.memcgInode === undefined ? undefined : this.byInode.get(e.memcgInode);
    // A kernel path is exact; a /proc one shows "/" for an exiting task on v1: not evidence.
    const path = e.cgroupPathFromProc && e.cgroupPath === '/' ? undefined : e.cgroupPath;
    if (!c && path) c = this.byPath(path);
    if (!c && e.memcgInode !== undefined) {
      for (const r of this.recent.values()) if (r.inode === e.memcgInode) c = r;
    }
    const event: OomEvent = {
      source: 'ebpf',
      time: new Date(this.clock.now()),
      count: 1,
      scope: 'unknown',
      pid: e.pid,
      tid: e.tid,
      comm: e.comm,
      uid: e.uid,
      oomScoreAdj: e.oomScoreAdj,
      cgroupInode: e.memcgInode,
      cgroupPath: path,
      memory: {
        totalVmKb: e.totalVmKb,
        anonRssKb: e.anonRssKb,
        fileRssKb: e.fileRssKb,
        shmemRssKb: e.shmemRssKb,
        swapKb: e.swapKb,
        pgtablesKb: e.pgtablesKb,
        cgroupUsageBytes: e.memcgUsageBytes,
        cgroupLimitBytes: e.memcgLimitBytes,
      },
      kernelTimeNs: e.kernelTimeNs,
      observedTimeNs: e.observedTimeNs,
      deliveredTimeNs: delivered,
    };
    this.deliverByPath(event, c, path);
  }

  private fromKmsg(r: KmsgOomRecord, e: NativeOomEvent, delivered: bigint): void {
    const path = r.taskMemcg;
    const c = path ? this.byPath(path) : undefined;
    const event: OomEvent = {
      source: 'kmsg',
      time: new Date(this.clock.now()),
      count: 1,
      scope: 'unknown',
      pid: r.pid,
      comm: r.comm,
      uid: r.uid,
      oomScoreAdj: r.oomScoreAdj,
      cgroupPath: path,
      memory: { totalVmKb: r.totalVmKb, anonRssKb: r.anonRssKb, fileRssKb: r.fileRssKb, shmemRssKb: r.shmemRssKb, pgtablesKb: r.pgtablesKb },
      observedTimeNs: e.observedTimeNs,
      deliveredTimeNs: delivered,
    };
    // Beside the cgroup sources, kmsg is only there for victims outside pods.
    if (this.kmsgSystemOnly && (c || (path !== undefined && isUnderKubepods(path)))) return;
    this.deliverByPath(event, c, path);
  }

  /** Attributes an event to container c, else by its cgroup path (pod, or outside any pod). */
  private deliverByPath(event: OomEvent, c: WatchedContainer | undefined, path: string | undefined): void {
    if (c) {
      this.deliver({ ...event, scope: 'container' }, c);
      return;
    }
    let scope: OomScope = 'unknown';
    if (path !== undefined) {
      const ref = parsePodCgroupPath(path);
      if (ref) {
        scope = 'pod';
        event.podUID = ref.podUID;
        event.containerID = ref.containerID;
      } else if (!isUnderKubepods(path)) {
        scope = 'system';
      }
    }
    this.deliver({ ...event, scope }, undefined);
  }

  private byPath(path: string): WatchedContainer | undefined {
    const ref = parsePodCgroupPath(path);
    if (!ref?.containerID) return undefined;
    return this.containers.get(ref.containerID) ?? this.recent.get(ref.containerID);
  }

  private deliver(event: OomEvent, c: WatchedContainer | undefined): void {
    if (c) {
      event.podUID = c.podUID;
      event.containerName = c.containerName;
      event.containerID = c.containerID;
      if (c.podName !== undefined) event.podName = c.podName;
      if (c.podNamespace !== undefined) event.podNamespace = c.podNamespace;
      c.kills += event.count;
      if (this.containers.get(c.containerID) === c) {
        this.counts.set(c.containerID, (this.counts.get(c.containerID) ?? 0) + event.count);
        this.counter?.withLabelValues(c.containerName, c.containerID, c.podNamespace ?? '', c.podName ?? '').inc(event.count);
      }
    }
    this.log.info('OOM kill observed', {
      source: event.source,
      scope: event.scope,
      pod: event.podNamespace && event.podName ? `${event.podNamespace}/${event.podName}` : event.podUID,
      container: event.containerName,
      pid: event.pid,
      comm: event.comm,
    });
    this.onEvent?.(event);
    this.emit('oom', event);
  }
}
