// cgroup v2: inotify on memory.events, one shared inotify fd and one watch descriptor per file
// (no fd per cgroup); a kill shows as oom_kill moving.
#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend.h"

namespace kts {
namespace oom {

class InotifyBackend : public CgroupBackend {
 public:
  using CgroupBackend::CgroupBackend;
  ~InotifyBackend() override { Close(); }

  bool Watch(uint32_t id, const std::string& dir, int* err, std::string* what) override;
  bool Unwatch(uint32_t id) override;
  void OnReadable(uint64_t key, Batch* out) override;
  void AddStats(WatcherStats* stats) override;
  void Close() override;

 private:
  struct V2Watch;
  using WatchPtr = std::shared_ptr<V2Watch>;

  void Check(const WatchPtr& w, Batch* out);
  void ForgetLocked(const WatchPtr& w, bool kernelGone);

  std::mutex mu_;
  int fd_ = -1;
  uint64_t nextSerial_ = 1;
  std::unordered_map<uint64_t, WatchPtr> bySerial_;
  std::unordered_map<uint32_t, uint64_t> byId_;
  // Several ids may watch one file: the kernel gives them one watch descriptor.
  std::unordered_map<int, std::vector<uint64_t>> byWd_;
};

}  // namespace oom
}  // namespace kts
