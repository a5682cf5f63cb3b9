#include "threshold_backend.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <ctime>

namespace kts {
namespace oom {
namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

bool Fail(int* err, std::string* what, const char* step) {
  *err = errno;
  *what = step;
  return false;
}

}  // namespace

struct ThresholdBackend::Watch_ {
  uint32_t id = 0;
  uint64_t serial = 0;
  uint64_t bytes = 0;
  int fd = -1;
  ~Watch_() {
    if (fd >= 0) close(fd);
  }
};

bool ThresholdBackend::Watch(uint32_t id, const std::string& dir, uint64_t bytes, int* err, std::string* what) {
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return Fail(err, what, "eventfd");
  auto w = std::make_shared<Watch_>();
  w->fd = efd;
  w->id = id;
  w->bytes = bytes;
  int ufd = open((dir + "/memory.usage_in_bytes").c_str(), O_RDONLY | O_CLOEXEC);
  if (ufd < 0) return Fail(err, what, "open memory.usage_in_bytes");
  int cfd = open((dir + "/cgroup.event_control").c_str(), O_WRONLY | O_CLOEXEC);
  if (cfd < 0) {
    Fail(err, what, "open cgroup.event_control");
    close(ufd);
    return false;
  }
  char line[96];
  int len = snprintf(line, sizeof(line), "%d %d %" PRIu64, efd, ufd, bytes);
  ssize_t n = write(cfd, line, static_cast<size_t>(len));
  int werr = errno;
  // The kernel keeps its own reference: only the eventfd stays open per threshold.
  close(cfd);
  close(ufd);
  if (n != len) {
    errno = n < 0 ? werr : EIO;
    return Fail(err, what, "write cgroup.event_control");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto old = byId_.find(id);
  if (old != byId_.end()) {
    auto it = bySerial_.find(old->second);
    if (it != bySerial_.end()) {
      poller_->RemoveFd(it->second->fd);
      bySerial_.erase(it);
    }
    byId_.erase(old);
  }
  w->serial = nextSerial_++;
  if (!poller_->AddFd(this, efd, w->serial)) return Fail(err, what, "epoll_ctl");
  bySerial_[w->serial] = w;
  byId_[id] = w->serial;
  return true;
}

bool ThresholdBackend::Unwatch(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = byId_.find(id);
  if (it == byId_.end()) return false;
  auto wit = bySerial_.find(it->second);
  if (wit != bySerial_.end()) {
    // Closing the eventfd makes the kernel drop the registration.
    poller_->RemoveFd(wit->second->fd);
    bySerial_.erase(wit);
  }
  byId_.erase(it);
  return true;
}

void ThresholdBackend::OnReadable(uint64_t key, Batch* out) {
  std::shared_ptr<Watch_> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = bySerial_.find(key);
    if (it == bySerial_.end()) return;
    w = it->second;
  }
  uint64_t count = 0;
  if (read(w->fd, &count, sizeof(count)) != sizeof(count)) return;
  Event e = NewEvent(EventKind::kMemoryThreshold, SourceKind::kEventfd);
  e.hasId = true;
  e.id = w->id;
  e.count = count;
  e.total = w->bytes;
  e.observedNs = NowNs();
  out->push_back(std::move(e));
}

void ThresholdBackend::AddStats(WatcherStats* stats) {
  std::lock_guard<std::mutex> lock(mu_);
  stats->thresholds += bySerial_.size();
  stats->fds += bySerial_.size();
}

void ThresholdBackend::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& kv : bySerial_) poller_->RemoveFd(kv.second->fd);
  bySerial_.clear();
  byId_.clear();
}

}  // namespace oom
}  // namespace kts
