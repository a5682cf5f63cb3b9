// OOM watcher: inotify (cgroup v2), eventfd (cgroup v1), eBPF and /dev/kmsg sources behind one
// interface, all served by one native thread (epoll) that hands batches of events to JS
// through one thread-safe function.
//
// JS API (registered on the addon's exports):
//   oomEbpfBuild(): { compiled: boolean, reason?: string }
//   new OomWatcherHandle(onEvents: (events: object[]) => void)
//     watchV1(id, memoryCgroupDir)   eventfd on memory.oom_control (one fd per cgroup); throws
//     watchV2(id, cgroupDir)         inotify on memory.events (no fd per cgroup); throws
//     unwatch(id): boolean
//     startEbpf(): { ok: true } | { ok: false, reason }   (raw_tp/mark_victim + ring buffer)
//     stopEbpf()
//     startKmsg(): { ok: true } | { ok: false, reason }   (/dev/kmsg OOM lines, unparsed)
//     stopKmsg()
//     stats(): { watches, v1, v2, fds, ebpf, kmsg, running }  (fds: the watcher's own, not libbpf's)
//     ref() / unref()      keep (or not) the event loop alive while watching
//     close()              stops the thread and closes every fd; idempotent
// Event objects: { kind: 'oom_kill' | 'oom' | 'removed' | 'kmsg' | 'error', source:
// 'eventfd' | 'inotify' | 'ebpf' | 'kmsg', observedTimeNs: bigint (CLOCK_MONOTONIC), ... }
// as src/oom/native-types.ts describes.
#pragma once
#include <napi.h>

namespace kts {
void InitOomWatcher(Napi::Env env, Napi::Object exports);
}
