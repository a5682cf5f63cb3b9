// What the native OOM watcher (native/oom_watcher.cc, native/oom/) exports and the events it delivers.

/** Why an eBPF build is or is not in the addon. */
export interface NativeEbpfBuild {
  compiled: boolean;
  reason?: string;
}

export type NativeStartResult = { ok: true } | { ok: false; reason: string };

export interface NativeVictimCandidate {
  pid: number;
  comm: string;
}

/**
 * memory_threshold: a v1 memory usage threshold (watchMemoryThreshold) was crossed.
 * memory_events: counters of a watched memory.events rose (watchMemoryEvents).
 * memory_pressure: a PSI trigger fired (watchPressure). watch_lost: one of those two ended with its file.
 */
export type NativeOomEventKind = 'oom_kill' | 'oom' | 'removed' | 'kmsg' | 'error' | 'memory_threshold' | 'memory_events' | 'memory_pressure' | 'watch_lost';
/** 'watcher': the native watcher itself (its thread), not one of the mechanisms. */
export type NativeOomSource = 'eventfd' | 'inotify' | 'ebpf' | 'kmsg' | 'watcher' | 'psi';

/** One event from the native thread; fields beyond kind/source depend on the source. */
export interface NativeOomEvent {
  kind: NativeOomEventKind;
  source: NativeOomSource;
  /** CLOCK_MONOTONIC ns when the native thread saw it (same clock as process.hrtime.bigint()). */
  observedTimeNs: bigint;
  /** eventfd/inotify: the watch id given to watchV1/watchV2. */
  id?: number;
  /** oom_kill: kills this event stands for (the counter's delta; 1 for eBPF). */
  count?: number;
  /** eventfd/inotify: the cgroup's oom_kill counter after this event. */
  total?: number;
  /** eventfd: when the OOM notification came (before the kill); inotify: = observedTimeNs. */
  notifiedTimeNs?: bigint;
  /** eventfd/inotify oom_kill: processes of the cgroup that were dying or gone at the kill. */
  victims?: NativeVictimCandidate[];
  // eBPF (oom/mark_victim):
  pid?: number;
  tid?: number;
  comm?: string;
  uid?: number;
  oomScoreAdj?: number;
  /** bpf_ktime_get_ns() at mark_victim (CLOCK_MONOTONIC). */
  kernelTimeNs?: bigint;
  totalVmKb?: number;
  anonRssKb?: number;
  fileRssKb?: number;
  shmemRssKb?: number;
  swapKb?: number;
  pgtablesKb?: number;
  /** Inode number of the victim's memory cgroup directory. */
  memcgInode?: number;
  memcgUsageBytes?: number;
  memcgLimitBytes?: number;
  /** The victim's memory cgroup path (from the kernel; from /proc when cgroupPathFromProc). */
  cgroupPath?: string;
  cgroupPathFromProc?: boolean;
  // memory_events:
  /** Every counter of the file after the change. */
  counters?: Record<string, number>;
  /** The counters that rose, by how much. */
  deltas?: Record<string, number>;
  // kmsg:
  line?: string;
  kernelTimeUs?: number;
  // error, watch_lost:
  message?: string;
  /** error from source 'watcher': the native thread stopped; no more events will come. */
  fatal?: boolean;
}

export interface NativeOomWatcherStats {
  watches: number;
  v1: number;
  v2: number;
  /** File descriptors the watcher holds (epoll, wake, inotify, kmsg, one eventfd per v1 cgroup); libbpf's own are not counted. */
  fds: number;
  /** v1 memory usage thresholds, v2 memory.events watches, PSI triggers (each PSI trigger holds an fd). */
  thresholds?: number;
  memoryEvents?: number;
  psiTriggers?: number;
  ebpf: boolean;
  kmsg: boolean;
  /** False once closed, or when the thread stopped on an error (then `error` says why). */
  running: boolean;
  /** Batches (and the events in them) dropped because maxQueuedBatches were waiting for the JS thread. */
  droppedBatches: number;
  droppedEvents: number;
  /** Exceptions thrown by the onEvents handler (each also reported as a process warning). */
  handlerErrors: number;
  lastHandlerError?: string;
  /** Why the native thread stopped, when it failed. */
  error?: string;
}

export interface NativeOomWatcherOptions {
  /** Batches that may wait for the JS thread before new ones are dropped (default 256). */
  maxQueuedBatches?: number;
}

/** Test hooks of the addon (not for production use). */
export interface NativeOomTestHooks {
  /** Holds (true) or releases (false) every native scan at its start. */
  holdScans(hold: boolean): void;
  /** Native scans in progress (held ones included). */
  scansInFlight(): number;
}

export interface NativeOomWatcherHandle {
  watchV1(id: number, memoryCgroupDir: string): void;
  watchV2(id: number, cgroupDir: string): void;
  unwatch(id: number): boolean;
  /** v1: eventfd on memory.usage_in_bytes at `bytes` (cgroup.event_control); memory_threshold events carry the id. */
  watchMemoryThreshold?(id: number, memoryCgroupDir: string, bytes: bigint): void;
  unwatchMemoryThreshold?(id: number): boolean;
  /** v2: inotify on a memory.events file; returns its counters now; memory_events events carry the id. */
  watchMemoryEvents?(id: number, file: string): Record<string, number>;
  unwatchMemoryEvents?(id: number): boolean;
  /** A PSI trigger ("some <stall us> <window us>") on a pressure file; memory_pressure events carry the id. */
  watchPressure?(id: number, file: string, trigger: string): void;
  unwatchPressure?(id: number): boolean;
  startEbpf(): NativeStartResult;
  stopEbpf(): void;
  startKmsg(): NativeStartResult;
  stopKmsg(): void;
  stats(): NativeOomWatcherStats;
  ref(): void;
  unref(): void;
  close(): void;
  /** Test hook: the native thread's next epoll_wait fails with this errno. */
  _testFailNextPoll?(errno: number): void;
}

export interface NativeOomExports {
  oomEbpfBuild?(): NativeEbpfBuild;
  OomWatcherHandle?: new (onEvents: (events: NativeOomEvent[]) => void, options?: NativeOomWatcherOptions) => NativeOomWatcherHandle;
  oomTestHooks?: NativeOomTestHooks;
}
