// cgroup v1 memory usage thresholds (upstream's kernelMemcgNotification): an eventfd registered
// through cgroup.event_control on memory.usage_in_bytes at a byte count; the kernel signals it
// when usage crosses that count (either way), which wakes the eviction manager at once instead
// of at its next housekeeping pass.
#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend.h"

namespace kts {
namespace oom {

class ThresholdBackend : public Backend {
 public:
  using Backend::Backend;
  ~ThresholdBackend() override { Close(); }

  // Arms (or re-arms, replacing the watch with the same id) a usage threshold on a v1 memory
  // cgroup directory; false with *err = errno and *what = the step that failed.
  bool Watch(uint32_t id, const std::string& memoryDir, uint64_t bytes, int* err, std::string* what);
  bool Unwatch(uint32_t id);
  void OnReadable(uint64_t key, Batch* out) override;
  void AddStats(WatcherStats* stats) override;
  void Close() override;

 private:
  struct Watch_;
  std::mutex mu_;
  uint64_t nextSerial_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Watch_>> bySerial_;
  std::unordered_map<uint32_t, uint64_t> byId_;
};

}  // namespace oom
}  // namespace kts
