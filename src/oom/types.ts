// The OOM watcher's public types.
import type { OomWatcherMode } from '../config/kubelet-config.js';

export type { OomWatcherMode };

/** Where an event came from: eBPF (oom/mark_victim), v1 eventfd, v2 inotify, or /dev/kmsg. */
export type OomSourceName = 'ebpf' | 'eventfd' | 'inotify' | 'kmsg';

/**
 * Whom the victim belongs to: a watched container; a pod whose container is not (or no longer)
 * watched; the node (outside any pod: upstream's SystemOOM); or unknown (no cgroup information).
 */
export type OomScope = 'container' | 'pod' | 'system' | 'unknown';

export interface OomMemoryFigures {
  totalVmKb?: number;
  anonRssKb?: number;
  fileRssKb?: number;
  shmemRssKb?: number;
  swapKb?: number;
  pgtablesKb?: number;
  /** The victim's memory cgroup usage and limit at the kill (eBPF only). */
  cgroupUsageBytes?: number;
  cgroupLimitBytes?: number;
}

export interface OomEvent {
  source: OomSourceName;
  /** When kubelet-ts learned of it (the injected clock). */
  time: Date;
  /** Kills this event stands for (a cgroup counter can move by more than one). */
  count: number;
  scope: OomScope;
  podUID?: string;
  containerName?: string;
  containerID?: string;
  podName?: string;
  podNamespace?: string;
  /** The victim process (eventfd/inotify: the process found dying in the cgroup, if any). */
  pid?: number;
  tid?: number;
  comm?: string;
  uid?: number;
  oomScoreAdj?: number;
  /** Every dying process found in the cgroup (eventfd/inotify). */
  victims?: { pid: number; comm: string }[];
  /** Inode of the victim's memory cgroup directory. */
  cgroupInode?: number;
  /** The victim's memory cgroup path, when the source knows it. */
  cgroupPath?: string;
  memory?: OomMemoryFigures;
  /** CLOCK_MONOTONIC ns (process.hrtime.bigint() clock): kill in the kernel (eBPF), seen by the native thread, handed to JS. */
  kernelTimeNs?: bigint;
  observedTimeNs?: bigint;
  deliveredTimeNs: bigint;
}

export interface OomWatcherStatus {
  mode: OomWatcherMode;
  /** Sources in use. */
  sources: OomSourceName[];
  /** Why eBPF is not in use (auto/ebpf modes), e.g. "not root", "no BTF", "missing libbpf". */
  ebpfUnavailableReason?: string;
  /** Why /dev/kmsg is not in use, when it was wanted. */
  kmsgUnavailableReason?: string;
  /** Why the native addon could not be used. */
  nativeUnavailableReason?: string;
  /** Why the native watcher stopped while running (its thread failed): no native events since. */
  nativeFailure?: string;
}

export interface OomWatchResult {
  /** The cgroup inode used for attribution (eBPF), if the cgroup could be stat'ed. */
  inode?: number;
  /** The per-cgroup mechanism armed for it ('none' when the active source needs none). */
  watch: 'eventfd' | 'inotify' | 'none';
  /** Why the cgroup could not be watched or stat'ed. */
  error?: string;
}
