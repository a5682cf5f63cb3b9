// One interface for the OOM mechanisms (as @parcel/watcher's Backend): each backend owns its
// fds and its table, registers its fds with the watcher's epoll through a Poller, and is
// called on the watcher thread when one is readable or a re-check is due.
//
// Locking: a backend's mutex guards only its tables (taken briefly by watch/unwatch on the JS
// thread and by the watcher thread to look a watch up); file and /proc scans run with no lock
// held, on watches kept alive by shared_ptr, so watch/unwatch never wait for a scan.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "event.h"

namespace kts {
namespace oom {

class Backend;

// The watcher's epoll, as backends see it.
class Poller {
 public:
  virtual ~Poller() = default;
  // Adds fd (readable -> backend->OnEvents(key, ...)); `priority`: wait for EPOLLPRI instead of
  // EPOLLIN (PSI triggers, whose files always poll readable). False with errno on failure.
  virtual bool AddFd(Backend* backend, int fd, uint64_t key, bool priority = false) = 0;
  virtual void RemoveFd(int fd) = 0;
  // Makes the thread look at deadlines again (a re-check was scheduled from another thread).
  virtual void Wake() = 0;
};

struct WatcherStats {
  size_t watches = 0, v1 = 0, v2 = 0, fds = 0, thresholds = 0, memoryEvents = 0, psiTriggers = 0;
  bool ebpf = false, kmsg = false, running = false;
};

class Backend {
 public:
  explicit Backend(Poller* poller) : poller_(poller) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Watcher thread: the fd registered with `key` is readable.
  virtual void OnReadable(uint64_t key, Batch* out) = 0;
  // Watcher thread: the fd registered with `key` reported `events` (epoll bits); backends that
  // tell EPOLLPRI from EPOLLERR override it.
  virtual void OnEvents(uint64_t key, uint32_t events, Batch* out) { OnReadable(key, out); }
  // Watcher thread: earliest scheduled re-check (CLOCK_MONOTONIC ns), UINT64_MAX for none.
  virtual uint64_t NextDeadlineNs() { return UINT64_MAX; }
  // Watcher thread: re-checks due at nowNs.
  virtual void OnDeadline(uint64_t nowNs, Batch* out) {}
  virtual void AddStats(WatcherStats* stats) = 0;
  // Releases every fd; called once the watcher thread has stopped.
  virtual void Close() = 0;

 protected:
  Poller* poller_;
};

// A mechanism armed per cgroup (eventfd on v1, inotify on v2), by watch id.
class CgroupBackend : public Backend {
 public:
  using Backend::Backend;
  // Arms a watch (replacing one with the same id); false with *err = errno and *what = the step.
  virtual bool Watch(uint32_t id, const std::string& dir, int* err, std::string* what) = 0;
  virtual bool Unwatch(uint32_t id) = 0;
};

// A node-wide mechanism (eBPF, /dev/kmsg), started and stopped as a whole.
class SourceBackend : public Backend {
 public:
  using Backend::Backend;
  // False with the reason when it cannot run here.
  virtual bool Start(std::string* reason) = 0;
  virtual void Stop() = 0;
};

Event NewEvent(EventKind kind, SourceKind source);

}  // namespace oom
}  // namespace kts
