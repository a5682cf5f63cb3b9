#include "ebpf_backend.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "proc_scan.h"

namespace kts {
namespace oom {

bool EbpfBackend::Start(std::string* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (on_) return true;
  if (!source_.Start(reason)) return false;
  if (!poller_->AddFd(this, source_.PollFd(), 0)) {
    *reason = std::string("epoll_ctl on the ring buffer failed: ") + strerror(errno);
    source_.Stop();
    return false;
  }
  on_ = true;
  return true;
}

void EbpfBackend::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!on_) return;
  poller_->RemoveFd(source_.PollFd());
  source_.Stop();
  on_ = false;
}

void EbpfBackend::OnRecord(void* ctx, const kts_oom_victim& v) { static_cast<EbpfBackend*>(ctx)->records_.push_back(v); }

void EbpfBackend::OnReadable(uint64_t, Batch* out) {
  std::vector<kts_oom_victim> records;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_) return;
    source_.Consume();
    records.swap(records_);
  }
  for (const kts_oom_victim& v : records) {
    Event e = NewEvent(EventKind::kOomKill, SourceKind::kEbpf);
    e.hasRecord = true;
    e.record = v;
    e.count = 1;
    if (v.flags & KTS_OOM_HAVE_MEMCG) {
      e.cgroupPath = (v.flags & KTS_OOM_CGROUP_TRUNCATED) ? "/..." : "";
      uint32_t levels = std::min<uint32_t>(v.cgroup_levels, KTS_OOM_CGROUP_LEVELS);
      for (uint32_t i = levels; i-- > 0;) {
        e.cgroupPath += '/';
        e.cgroupPath.append(v.cgroup_names[i], strnlen(v.cgroup_names[i], KTS_OOM_CGROUP_NAME_LEN));
      }
      if (e.cgroupPath.empty()) e.cgroupPath = "/";
    } else {
      // Old kernels give only the pid: read /proc now, while the victim is being torn down
      // (v1 shows an exiting task in "/", so this is a hint, not proof).
      ScanScope scan;
      e.cgroupPath = MemoryCgroupOf(static_cast<int32_t>(v.pid));
      e.cgroupPathFromProc = true;
    }
    out->push_back(std::move(e));
  }
}

void EbpfBackend::AddStats(WatcherStats* stats) {
  std::lock_guard<std::mutex> lock(mu_);
  stats->ebpf = on_;
}

}  // namespace oom
}  // namespace kts
