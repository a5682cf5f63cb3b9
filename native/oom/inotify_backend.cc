#include "inotify_backend.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "inotify_drain.h"
#include "proc_scan.h"

namespace kts {
namespace oom {

struct InotifyBackend::V2Watch {
  uint32_t id = 0;
  uint64_t serial = 0;
  std::string dir;
  int wd = -1;
  // Set by unwatch: a scan in progress drops what it finds.
  std::atomic<bool> gone{false};
  // Watcher thread only, once the watch is in the table.
  bool haveTotal = false;
  uint64_t killTotal = 0;
};

bool InotifyBackend::Watch(uint32_t id, const std::string& dir, int* err, std::string* what) {
  std::lock_guard<std::mutex> lock(mu_);
  auto old = byId_.find(id);
  if (old != byId_.end()) {
    auto it = bySerial_.find(old->second);
    if (it != bySerial_.end()) ForgetLocked(it->second, false);
  }
  if (fd_ < 0) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
      *err = errno;
      *what = "inotify_init1";
      return false;
    }
    if (!poller_->AddFd(this, fd, 0)) {
      *err = errno;
      *what = "epoll_ctl";
      close(fd);
      return false;
    }
    fd_ = fd;
  }
  std::string file = dir + "/memory.events";
  // IN_MODIFY is what cgroupfs sends; IN_CLOSE_WRITE catches plain files written whole.
  int wd = inotify_add_watch(fd_, file.c_str(), IN_MODIFY | IN_CLOSE_WRITE);
  if (wd < 0) {
    *err = errno;
    *what = "inotify_add_watch memory.events";
    return false;
  }
  auto w = std::make_shared<V2Watch>();
  w->id = id;
  w->serial = nextSerial_++;
  w->dir = dir;
  w->wd = wd;
  std::string text;
  int rerr = 0;
  // One small read on the caller's thread, after the watch is armed (no change can fall between).
  if (ReadSmallFile(file, &text, &rerr)) w->haveTotal = FindKeyValue(text, "oom_kill", &w->killTotal);
  byWd_[wd].push_back(w->serial);
  byId_[id] = w->serial;
  bySerial_[w->serial] = w;
  return true;
}

bool InotifyBackend::Unwatch(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = byId_.find(id);
  if (it == byId_.end()) return false;
  auto wit = bySerial_.find(it->second);
  if (wit != bySerial_.end()) ForgetLocked(wit->second, false);
  byId_.erase(id);
  return true;
}

void InotifyBackend::ForgetLocked(const WatchPtr& w, bool kernelGone) {
  WatchPtr keep = w;  // w may point into the table entry erased below
  // Unwatched: drop what a scan in progress finds. Removed by the kernel: its last change still counts.
  if (!kernelGone) keep->gone = true;
  auto bit = byWd_.find(keep->wd);
  if (bit != byWd_.end()) {
    auto& v = bit->second;
    v.erase(std::remove(v.begin(), v.end(), keep->serial), v.end());
    if (v.empty()) {
      byWd_.erase(bit);
      if (!kernelGone && fd_ >= 0) inotify_rm_watch(fd_, keep->wd);
    }
  }
  auto idit = byId_.find(keep->id);
  if (idit != byId_.end() && idit->second == keep->serial) byId_.erase(idit);
  bySerial_.erase(keep->serial);
}

void InotifyBackend::OnReadable(uint64_t, Batch* out) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fd = fd_;  // closed only by Close(), after the thread has stopped
  }
  if (fd < 0) return;
  InotifyChanges drained = DrainInotify(fd);
  std::vector<int>& changed = drained.changed;
  std::vector<int>& ignored = drained.ignored;
  const bool overflow = drained.overflow;  // events were lost: re-read every watch
  std::vector<WatchPtr> toCheck, removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto collect = [&](int wd, std::vector<WatchPtr>* into) {
      auto it = byWd_.find(wd);
      if (it == byWd_.end()) return;
      for (uint64_t s : it->second) {
        auto wit = bySerial_.find(s);
        if (wit != bySerial_.end()) into->push_back(wit->second);
      }
    };
    if (overflow) {
      for (auto& [serial, w] : bySerial_) toCheck.push_back(w);
    } else {
      for (int wd : changed) collect(wd, &toCheck);
    }
    for (int wd : ignored) collect(wd, &removed);
    for (const WatchPtr& w : removed) ForgetLocked(w, true);
  }
  // A last change before the removal is still reported, then the removal.
  for (const WatchPtr& w : toCheck) Check(w, out);
  for (const WatchPtr& w : removed) {
    Event e = NewEvent(EventKind::kRemoved, SourceKind::kInotify);
    e.hasId = true;
    e.id = w->id;
    e.total = w->killTotal;
    out->push_back(std::move(e));
  }
}

// memory.events changed; no lock held.
void InotifyBackend::Check(const WatchPtr& w, Batch* out) {
  ScanScope scan;
  std::string text;
  int err = 0;
  if (!ReadSmallFile(w->dir + "/memory.events", &text, &err)) return;  // IN_IGNORED reports removal
  uint64_t total = 0;
  // A file caught mid-write has no oom_kill line yet: wait for the next change.
  if (!FindKeyValue(text, "oom_kill", &total)) return;
  if (!w->haveTotal) {
    w->haveTotal = true;
    w->killTotal = total;
    return;
  }
  if (total > w->killTotal) {
    Event e = NewEvent(EventKind::kOomKill, SourceKind::kInotify);
    e.hasId = true;
    e.id = w->id;
    e.count = total - w->killTotal;
    e.total = total;
    e.victims = FindVictims(w->dir, {});
    Victim logged;
    if (e.victims.empty() && FindVictimInKmsg(w->dir, &logged)) e.victims.push_back(logged);
    e.notifiedNs = e.observedNs;
    // Unwatched while this scan ran: nobody asks for it any more.
    if (!w->gone) out->push_back(std::move(e));
  }
  w->killTotal = total;
}

void InotifyBackend::AddStats(WatcherStats* stats) {
  std::lock_guard<std::mutex> lock(mu_);
  stats->v2 += bySerial_.size();
  stats->watches += bySerial_.size();
  if (fd_ >= 0) stats->fds++;
}

void InotifyBackend::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [serial, w] : bySerial_) w->gone = true;
  bySerial_.clear();
  byId_.clear();
  byWd_.clear();
  if (fd_ >= 0) {
    poller_->RemoveFd(fd_);
    close(fd_);
  }
  fd_ = -1;
}

}  // namespace oom
}  // namespace kts
