// cgroup v1: an eventfd registered on memory.oom_control through cgroup.event_control, one fd
// per cgroup. The notification comes when an OOM starts (before the kill), so the kill is
// confirmed by re-reading oom_kill on a schedule.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend.h"

namespace kts {
namespace oom {

class EventfdBackend : public CgroupBackend {
 public:
  using CgroupBackend::CgroupBackend;
  ~EventfdBackend() override { Close(); }

  bool Watch(uint32_t id, const std::string& dir, int* err, std::string* what) override;
  bool Unwatch(uint32_t id) override;
  void OnReadable(uint64_t key, Batch* out) override;
  uint64_t NextDeadlineNs() override;
  void OnDeadline(uint64_t nowNs, Batch* out) override;
  void AddStats(WatcherStats* stats) override;
  void Close() override;

 private:
  struct V1Watch;
  using WatchPtr = std::shared_ptr<V1Watch>;

  void Check(const WatchPtr& w, bool fromNotify, Batch* out);
  // Forgets w if it is still the watch of its id (the kernel removed the cgroup).
  void Drop(const WatchPtr& w);
  void ForgetLocked(const WatchPtr& w);

  std::mutex mu_;
  uint64_t nextSerial_ = 1;
  std::unordered_map<uint64_t, WatchPtr> bySerial_;
  std::unordered_map<uint32_t, uint64_t> byId_;
  // Watcher thread only: notifications waiting for their kill to show in oom_kill.
  std::map<uint64_t, WatchPtr> pending_;
};

}  // namespace oom
}  // namespace kts
