#include "eventfd_backend.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "proc_scan.h"

namespace kts {
namespace oom {
namespace {

// v1 notifications come when an OOM starts, before the kill (which can take a few ms while
// the kernel logs its OOM report): re-read oom_kill every ms for a while, then less often,
// until the count moves or the OOM is given up on (1.5 s after the notification).
constexpr size_t kRecheckEveryMs = 40;
constexpr int kRecheckLaterMs[] = {60, 100, 250, 500, 1000, 1500};
constexpr size_t kRecheckCount = kRecheckEveryMs + sizeof(kRecheckLaterMs) / sizeof(kRecheckLaterMs[0]);

// Delay (ms since the notification) of re-check number `attempt`.
uint64_t RecheckDelayMs(size_t attempt) {
  return attempt < kRecheckEveryMs ? attempt + 1 : static_cast<uint64_t>(kRecheckLaterMs[attempt - kRecheckEveryMs]);
}

bool Fail(int* err, std::string* what, const char* step) {
  *err = errno;
  *what = step;
  return false;
}

}  // namespace

struct EventfdBackend::V1Watch {
  uint32_t id = 0;
  uint64_t serial = 0;
  std::string dir;
  int fd = -1;
  // Set by unwatch: a scan in progress drops what it finds.
  std::atomic<bool> gone{false};
  // Watcher thread only, once the watch is in the table.
  bool haveTotal = false;
  uint64_t killTotal = 0;
  bool pending = false;
  size_t attempt = 0;
  uint64_t notifiedNs = 0;
  uint64_t deadlineNs = 0;
  std::vector<Victim> snapshot;
  // The fd lives as long as the last holder (a scan may still read it after unwatch).
  ~V1Watch() {
    if (fd >= 0) close(fd);
  }
};

bool EventfdBackend::Watch(uint32_t id, const std::string& dir, int* err, std::string* what) {
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return Fail(err, what, "eventfd");
  auto w = std::make_shared<V1Watch>();
  w->fd = efd;  // closed with w on any failure below
  int ofd = open((dir + "/memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC);
  if (ofd < 0) return Fail(err, what, "open memory.oom_control");
  int cfd = open((dir + "/cgroup.event_control").c_str(), O_WRONLY | O_CLOEXEC);
  if (cfd < 0) {
    Fail(err, what, "open cgroup.event_control");
    close(ofd);
    return false;
  }
  char line[64];
  int len = snprintf(line, sizeof(line), "%d %d", efd, ofd);
  ssize_t n = write(cfd, line, static_cast<size_t>(len));
  int werr = errno;
  // The kernel only needs the control file during registration: one fd per cgroup stays.
  close(cfd);
  close(ofd);
  if (n != len) {
    errno = n < 0 ? werr : EIO;
    return Fail(err, what, "write cgroup.event_control");
  }
  w->id = id;
  w->dir = dir;
  std::string text;
  int rerr = 0;
  // The baseline is read after registering, so no kill can fall between the two.
  if (ReadSmallFile(dir + "/memory.oom_control", &text, &rerr)) w->haveTotal = FindKeyValue(text, "oom_kill", &w->killTotal);
  std::lock_guard<std::mutex> lock(mu_);
  auto old = byId_.find(id);
  if (old != byId_.end()) {
    auto it = bySerial_.find(old->second);
    if (it != bySerial_.end()) ForgetLocked(it->second);
  }
  w->serial = nextSerial_++;
  bySerial_[w->serial] = w;
  byId_[id] = w->serial;
  if (!poller_->AddFd(this, efd, w->serial)) {
    Fail(err, what, "epoll_ctl");
    ForgetLocked(w);
    return false;
  }
  return true;
}

bool EventfdBackend::Unwatch(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = byId_.find(id);
  if (it == byId_.end()) return false;
  auto wit = bySerial_.find(it->second);
  if (wit != bySerial_.end()) ForgetLocked(wit->second);
  byId_.erase(id);
  return true;
}

void EventfdBackend::ForgetLocked(const WatchPtr& w) {
  WatchPtr keep = w;  // w may point into the table entry erased below
  keep->gone = true;
  poller_->RemoveFd(keep->fd);
  auto idit = byId_.find(keep->id);
  if (idit != byId_.end() && idit->second == keep->serial) byId_.erase(idit);
  bySerial_.erase(keep->serial);
}

void EventfdBackend::Drop(const WatchPtr& w) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bySerial_.count(w->serial)) ForgetLocked(w);
}

void EventfdBackend::OnReadable(uint64_t key, Batch* out) {
  WatchPtr w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = bySerial_.find(key);
    if (it == bySerial_.end()) return;
    w = it->second;
  }
  uint64_t count;
  ssize_t ignored = read(w->fd, &count, sizeof(count));
  (void)ignored;
  Check(w, true, out);
}

uint64_t EventfdBackend::NextDeadlineNs() {
  uint64_t next = UINT64_MAX;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second->gone) {
      it = pending_.erase(it);
      continue;
    }
    next = std::min(next, it->second->deadlineNs);
    ++it;
  }
  return next;
}

void EventfdBackend::OnDeadline(uint64_t nowNs, Batch* out) {
  std::vector<WatchPtr> due;
  for (auto& [serial, w] : pending_) {
    if (w->gone || w->deadlineNs <= nowNs) due.push_back(w);
  }
  for (const WatchPtr& w : due) {
    if (w->gone) {
      pending_.erase(w->serial);
      continue;
    }
    Check(w, false, out);
  }
}

// After a notification (fromNotify) or a scheduled re-check; no lock held.
void EventfdBackend::Check(const WatchPtr& w, bool fromNotify, Batch* out) {
  ScanScope scan;
  auto event = [&](EventKind kind) {
    Event e = NewEvent(kind, SourceKind::kEventfd);
    e.hasId = true;
    e.id = w->id;
    e.total = w->killTotal;
    return e;
  };
  auto emit = [&](Event e) {
    // Unwatched while this scan ran: nobody asks for it any more.
    if (!w->gone) out->push_back(std::move(e));
  };
  std::string text;
  int err = 0;
  if (!ReadSmallFile(w->dir + "/memory.oom_control", &text, &err)) {
    if (err == ENOENT || err == ENODEV || err == ESTALE) {
      // The notification the kernel sends when the cgroup goes away.
      emit(event(EventKind::kRemoved));
      pending_.erase(w->serial);
      Drop(w);
    } else {
      Event e = event(EventKind::kError);
      e.text = "read " + w->dir + "/memory.oom_control: " + strerror(err);
      emit(std::move(e));
    }
    return;
  }
  uint64_t total = 0;
  if (!FindKeyValue(text, "oom_kill", &total)) {
    // Kernels before 4.13 do not count kills: report the OOM unconfirmed.
    if (fromNotify) emit(event(EventKind::kOom));
    return;
  }
  if (!w->haveTotal) {
    w->haveTotal = true;
    w->killTotal = total;
  }
  if (total > w->killTotal) {
    Event e = event(EventKind::kOomKill);
    e.count = total - w->killTotal;
    e.total = total;
    e.victims = FindVictims(w->dir, w->snapshot);
    Victim logged;
    if (e.victims.empty() && FindVictimInKmsg(w->dir, &logged)) e.victims.push_back(logged);
    e.notifiedNs = w->pending ? w->notifiedNs : e.observedNs;
    emit(std::move(e));
    w->killTotal = total;
    w->pending = false;
    w->snapshot.clear();
    pending_.erase(w->serial);
    return;
  }
  if (total < w->killTotal) w->killTotal = total;
  if (fromNotify) {
    if (!w->pending) {
      w->pending = true;
      w->notifiedNs = MonoNs();
      w->snapshot = SnapshotProcs(w->dir);
    }
    w->attempt = 0;
  } else {
    w->attempt++;
  }
  if (w->attempt >= kRecheckCount) {
    // The OOM ended without a kill here (reclaim won, or oom_kill_disable is set).
    Event e = event(EventKind::kOom);
    e.notifiedNs = w->notifiedNs;
    emit(std::move(e));
    w->pending = false;
    w->snapshot.clear();
    pending_.erase(w->serial);
    return;
  }
  w->deadlineNs = w->notifiedNs + RecheckDelayMs(w->attempt) * 1000000ULL;
  pending_[w->serial] = w;
}

void EventfdBackend::AddStats(WatcherStats* stats) {
  std::lock_guard<std::mutex> lock(mu_);
  stats->v1 += bySerial_.size();
  stats->watches += bySerial_.size();
  stats->fds += bySerial_.size();
}

void EventfdBackend::Close() {
  pending_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [serial, w] : bySerial_) {
    w->gone = true;
    poller_->RemoveFd(w->fd);
  }
  bySerial_.clear();
  byId_.clear();
}

}  // namespace oom
}  // namespace kts
