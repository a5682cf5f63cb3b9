// /dev/kmsg: the kernel's OOM lines as they are logged (unparsed; src/oom/kmsg-parser.ts
// reads them), for victims no cgroup watch covers.
#pragma once
#include <memory>
#include <mutex>

#include "backend.h"

namespace kts {
namespace oom {

class KmsgBackend : public SourceBackend {
 public:
  using SourceBackend::SourceBackend;
  ~KmsgBackend() override { Close(); }

  bool Start(std::string* reason) override;
  void Stop() override;
  void OnReadable(uint64_t key, Batch* out) override;
  void AddStats(WatcherStats* stats) override;
  void Close() override { Stop(); }

 private:
  struct Fd;
  std::mutex mu_;
  // Shared with a drain in progress, so stop() never closes the fd under it.
  std::shared_ptr<Fd> fd_;
};

}  // namespace oom
}  // namespace kts
