// The OOM watcher subsystem: sources (eBPF, cgroup eventfd/inotify, /dev/kmsg), attribution
// to pods and containers, and what the kubelet records for a kill.
export { OomWatcher, OomWatcherError, loadOomNative, CONTAINER_OOM_EVENTS_TOTAL, type OomWatcherOptions, type WatchContainerMeta } from './oom-watcher.js';
export { oomEventRecord, crossCheckTerminatedReason, SystemOOM, OOMKilling, type OomEventRecord } from './events.js';
export { parsePodCgroupPath, isUnderKubepods, type PodCgroupRef } from './attribution.js';
export { KmsgOomParser, parseOomKillFields, type KmsgOomRecord } from './kmsg-parser.js';
export { parseMemoryEvents, parseOomControl } from './memory-events.js';
export type * from './types.js';
export type * from './native-types.js';
