// OOM watcher: inotify (cgroup v2), eventfd (cgroup v1), eBPF and /dev/kmsg backends behind one
// interface (native/oom/backend.h), all served by one native thread (native/oom/watcher.cc,
// epoll) that hands batches of events to JS through one thread-safe function.
//
// JS API (registered on the addon's exports):
//   oomEbpfBuild(): { compiled: boolean, reason?: string }
//   new OomWatcherHandle(onEvents: (events: object[]) => void, { maxQueuedBatches?: number })
//                                  batches beyond maxQueuedBatches (default 256) waiting for
//                                  the JS thread are dropped and counted
//     watchV1(id, memoryCgroupDir)   eventfd on memory.oom_control (one fd per cgroup); throws
//     watchV2(id, cgroupDir)         inotify on memory.events (no fd per cgroup); throws
//     unwatch(id): boolean
//     watchMemoryThreshold(id, memoryCgroupDir, bytes)  v1: eventfd on memory.usage_in_bytes at
//                                  bytes (cgroup.event_control); events { kind: 'memory_threshold',
//                                  id, count, thresholdBytes }; throws
//     unwatchMemoryThreshold(id): boolean
//     watchMemoryEvents(id, file)  v2: inotify on a memory.events file; returns its counters;
//                                  events { kind: 'memory_events', id, counters, deltas } when
//                                  counters rise; throws naming the file
//     unwatchMemoryEvents(id): boolean
//     watchPressure(id, file, trigger)  PSI trigger ("some <stall us> <window us>") on a pressure
//                                  file, polled for EPOLLPRI; events { kind: 'memory_pressure',
//                                  id }; throws naming the file (EINVAL: refused trigger or not
//                                  a PSI file, ENOENT: PSI off or no such cgroup)
//     unwatchPressure(id): boolean   (either watch ending with its file: { kind: 'watch_lost', id })
//     startEbpf(): { ok: true } | { ok: false, reason }   (raw_tp/mark_victim + ring buffer)
//     stopEbpf()
//     startKmsg(): { ok: true } | { ok: false, reason }   (/dev/kmsg OOM lines, unparsed)
//     stopKmsg()
//     stats(): { watches, v1, v2, fds, thresholds, memoryEvents, psiTriggers, ebpf, kmsg, running, droppedBatches, droppedEvents,
//                handlerErrors, lastHandlerError?, error? }  (fds: the watcher's own, not libbpf's;
//                error: why the thread stopped, when it failed)
//     ref() / unref()      keep (or not) the event loop alive while watching
//     close()              stops the thread and closes every fd; idempotent
//     _testFailNextPoll(errno)  test hook: the thread's next epoll_wait fails with errno
//   oomTestHooks: { holdScans(hold: boolean), scansInFlight(): number }
// Event objects: { kind: 'oom_kill' | 'oom' | 'removed' | 'kmsg' | 'error', source:
// 'eventfd' | 'inotify' | 'ebpf' | 'kmsg' | 'watcher', observedTimeNs: bigint (CLOCK_MONOTONIC),
// ... } as src/oom/native-types.ts describes; { kind: 'error', source: 'watcher', fatal: true }
// says the thread stopped (stats().running is false from then on).
// A handler that throws is counted (handlerErrors) and reported as a process warning.
#pragma once
#include <napi.h>

namespace kts {
void InitOomWatcher(Napi::Env env, Napi::Object exports);
}
