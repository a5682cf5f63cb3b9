// eBPF: raw_tp/mark_victim with a ring buffer (the loader is native/oom_ebpf.cc), one record
// per OOM kill node-wide, with the victim's memcg.
#pragma once
#include <mutex>
#include <vector>

#include "../oom_ebpf.h"
#include "backend.h"

namespace kts {
namespace oom {

class EbpfBackend : public SourceBackend {
 public:
  explicit EbpfBackend(Poller* poller) : SourceBackend(poller), source_(&EbpfBackend::OnRecord, this) {}
  ~EbpfBackend() override { Close(); }

  bool Start(std::string* reason) override;
  void Stop() override;
  void OnReadable(uint64_t key, Batch* out) override;
  void AddStats(WatcherStats* stats) override;
  void Close() override { Stop(); }

 private:
  static void OnRecord(void* ctx, const kts_oom_victim& v);

  // Guards source_ (consume vs. stop); held only while the ring buffer is copied out.
  std::mutex mu_;
  EbpfOomSource source_;
  bool on_ = false;
  std::vector<kts_oom_victim> records_;
};

}  // namespace oom
}  // namespace kts
