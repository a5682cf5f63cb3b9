// cgroup v2 memory pressure for the eviction manager (kernelMemcgNotification where memcg
// usage thresholds do not exist): inotify on a cgroup's memory.events, whose counters (high,
// max, oom, oom_kill) are read and parsed here when the kernel raises IN_MODIFY, and PSI
// triggers on memory.pressure files, which poll EPOLLPRI when stalls pass the trigger's
// threshold within its window. It only watches: no limit is written anywhere.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend.h"

namespace kts {
namespace oom {

// "name value" lines of a counter file, in file order; false when none parses (a file caught
// mid-rewrite, or not a counter file).
bool ParseCounters(const std::string& text, std::vector<Counter>* out);

class PressureBackend : public Backend {
 public:
  using Backend::Backend;
  ~PressureBackend() override { Close(); }

  // Watches a memory.events file (or memory.events.local) under `id`, replacing the watch with
  // that id; *initial gets the counters read once the watch is armed (empty if unreadable).
  // False with *err = errno and *what = the step that failed.
  bool WatchEvents(uint32_t id, const std::string& file, std::vector<Counter>* initial, int* err, std::string* what);
  bool UnwatchEvents(uint32_t id);
  // Registers a PSI trigger ("some|full <stall us> <window us>") on a pressure file under `id`,
  // replacing the trigger with that id. Files other than cgroup2 *.pressure and
  // /proc/pressure/* are refused before anything is written (EINVAL, "not a PSI file").
  bool WatchPsi(uint32_t id, const std::string& file, const std::string& trigger, int* err, std::string* what);
  bool UnwatchPsi(uint32_t id);

  void OnReadable(uint64_t key, Batch* out) override { OnEvents(key, 0, out); }
  void OnEvents(uint64_t key, uint32_t events, Batch* out) override;
  void AddStats(WatcherStats* stats) override;
  void Close() override;

 private:
  struct EventsWatch;
  struct PsiWatch;

  void ReadInotify(Batch* out);
  void Check(const std::shared_ptr<EventsWatch>& w, Batch* out);
  void ForgetEventsLocked(const std::shared_ptr<EventsWatch>& w, bool kernelGone);

  std::mutex mu_;
  uint64_t nextSerial_ = 1;
  // memory.events: one inotify fd (epoll key 0) for every file; several ids may share a file's wd.
  int inotifyFd_ = -1;
  std::unordered_map<uint64_t, std::shared_ptr<EventsWatch>> events_;
  std::unordered_map<uint32_t, uint64_t> eventsById_;
  std::unordered_map<int, std::vector<uint64_t>> eventsByWd_;
  // PSI: one fd per trigger (the kernel allows one trigger per open file), epoll key = serial.
  std::unordered_map<uint64_t, std::shared_ptr<PsiWatch>> psi_;
  std::unordered_map<uint32_t, uint64_t> psiById_;
};

}  // namespace oom
}  // namespace kts
