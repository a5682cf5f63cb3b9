#include "pressure_backend.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "inotify_drain.h"
#include "proc_scan.h"

namespace kts {
namespace oom {
namespace {

bool Fail(int* err, std::string* what, int code, const std::string& step) {
  *err = code;
  *what = step;
  return false;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A PSI file: a *.pressure file on cgroup2, or a file of /proc/pressure. Checked before the
// trigger is written, so a wrong path never gets a trigger line written into it.
bool IsPsiFile(int fd, const std::string& file) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return false;
  std::string dir = file.substr(0, file.find_last_of('/') + 1);
  if (static_cast<unsigned long>(fs.f_type) == CGROUP2_SUPER_MAGIC) return EndsWith(file, ".pressure");
  if (static_cast<unsigned long>(fs.f_type) == PROC_SUPER_MAGIC) return EndsWith(dir, "/pressure/");
  return false;
}

const Counter* FindCounter(const std::vector<Counter>& v, const std::string& name) {
  for (const Counter& c : v) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace

bool ParseCounters(const std::string& text, std::vector<Counter>* out) {
  out->clear();
  size_t pos = 0;
  // Whole lines only: a last line without its newline was caught mid-write.
  for (size_t eol; (eol = text.find('\n', pos)) != std::string::npos; pos = eol + 1) {
    size_t sp = text.find(' ', pos);
    if (sp == std::string::npos || sp >= eol || sp == pos || sp + 1 == eol) continue;
    Counter c;
    c.name = text.substr(pos, sp - pos);
    bool ok = std::all_of(c.name.begin(), c.name.end(), [](char ch) { return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'); });
    for (size_t i = sp + 1; ok && i < eol; i++) {
      if (text[i] < '0' || text[i] > '9') ok = false;
      // a value past 64 bits is not a counter the kernel prints: the line is dropped, not wrapped
      else if (__builtin_mul_overflow(c.value, 10u, &c.value) || __builtin_add_overflow(c.value, static_cast<uint64_t>(text[i] - '0'), &c.value)) ok = false;
    }
    if (ok) out->push_back(std::move(c));
  }
  return !out->empty();
}

struct PressureBackend::EventsWatch {
  uint32_t id = 0;
  uint64_t serial = 0;
  std::string file;
  int wd = -1;
  // Set by unwatch: a read in progress drops what it finds.
  std::atomic<bool> gone{false};
  // Watcher thread only, once the watch is in the table.
  bool haveLast = false;
  std::vector<Counter> last;
};

struct PressureBackend::PsiWatch {
  uint32_t id = 0;
  uint64_t serial = 0;
  std::string file;
  int fd = -1;
  std::atomic<bool> gone{false};
  // Closing the file is what removes the trigger from the kernel.
  ~PsiWatch() {
    if (fd >= 0) close(fd);
  }
};

bool PressureBackend::WatchEvents(uint32_t id, const std::string& file, std::vector<Counter>* initial, int* err, std::string* what) {
  std::lock_guard<std::mutex> lock(mu_);
  auto old = eventsById_.find(id);
  if (old != eventsById_.end()) {
    auto it = events_.find(old->second);
    if (it != events_.end()) ForgetEventsLocked(it->second, false);
  }
  if (inotifyFd_ < 0) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return Fail(err, what, errno, "inotify_init1");
    if (!poller_->AddFd(this, fd, 0)) {
      int e = errno;
      close(fd);
      return Fail(err, what, e, "epoll_ctl");
    }
    inotifyFd_ = fd;
  }
  // IN_MODIFY is what cgroupfs raises when a counter moves; IN_CLOSE_WRITE, plain files written whole.
  int wd = inotify_add_watch(inotifyFd_, file.c_str(), IN_MODIFY | IN_CLOSE_WRITE);
  if (wd < 0) return Fail(err, what, errno, "inotify_add_watch");
  auto w = std::make_shared<EventsWatch>();
  w->id = id;
  w->serial = nextSerial_++;
  w->file = file;
  w->wd = wd;
  std::string text;
  int rerr = 0;
  // Read after the watch is armed: no change can fall between the reading and the watch.
  if (ReadSmallFile(file, &text, &rerr)) w->haveLast = ParseCounters(text, &w->last);
  *initial = w->last;
  eventsByWd_[wd].push_back(w->serial);
  eventsById_[id] = w->serial;
  events_[w->serial] = w;
  return true;
}

bool PressureBackend::UnwatchEvents(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = eventsById_.find(id);
  if (it == eventsById_.end()) return false;
  auto wit = events_.find(it->second);
  if (wit != events_.end()) ForgetEventsLocked(wit->second, false);
  eventsById_.erase(id);
  return true;
}

void PressureBackend::ForgetEventsLocked(const std::shared_ptr<EventsWatch>& w, bool kernelGone) {
  std::shared_ptr<EventsWatch> keep = w;  // w may point into the table entry erased below
  if (!kernelGone) keep->gone = true;
  auto bit = eventsByWd_.find(keep->wd);
  if (bit != eventsByWd_.end()) {
    auto& v = bit->second;
    v.erase(std::remove(v.begin(), v.end(), keep->serial), v.end());
    if (v.empty()) {
      eventsByWd_.erase(bit);
      if (!kernelGone && inotifyFd_ >= 0) inotify_rm_watch(inotifyFd_, keep->wd);
    }
  }
  auto idit = eventsById_.find(keep->id);
  if (idit != eventsById_.end() && idit->second == keep->serial) eventsById_.erase(idit);
  events_.erase(keep->serial);
}

bool PressureBackend::WatchPsi(uint32_t id, const std::string& file, const std::string& trigger, int* err, std::string* what) {
  // The kernel reads at most 127 bytes of a trigger.
  if (trigger.empty() || trigger.size() > 100) return Fail(err, what, EINVAL, "trigger must be \"some|full <stall us> <window us>\"");
  auto w = std::make_shared<PsiWatch>();
  w->id = id;
  w->file = file;
  w->fd = open(file.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (w->fd < 0) return Fail(err, what, errno, "open");
  if (!IsPsiFile(w->fd, file)) return Fail(err, what, EINVAL, "not a PSI file (a *.pressure file on cgroup2, or /proc/pressure/*)");
  // With its NUL: /proc/pressure files take the last byte written as the terminator.
  ssize_t n = write(w->fd, trigger.c_str(), trigger.size() + 1);
  if (n < 0) return Fail(err, what, errno, "write trigger \"" + trigger + "\"");
  // A file without a trigger polls EPOLLERR at once: that would mean the write did not take.
  pollfd p{w->fd, POLLPRI, 0};
  if (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLNVAL))) return Fail(err, what, EIO, "trigger not armed after write");
  std::lock_guard<std::mutex> lock(mu_);
  auto old = psiById_.find(id);
  if (old != psiById_.end()) {
    auto it = psi_.find(old->second);
    if (it != psi_.end()) {
      it->second->gone = true;
      poller_->RemoveFd(it->second->fd);
      psi_.erase(it);
    }
    psiById_.erase(old);
  }
  w->serial = nextSerial_++;
  if (!poller_->AddFd(this, w->fd, w->serial, true)) return Fail(err, what, errno, "epoll_ctl");
  psi_[w->serial] = w;
  psiById_[id] = w->serial;
  return true;
}

bool PressureBackend::UnwatchPsi(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = psiById_.find(id);
  if (it == psiById_.end()) return false;
  auto wit = psi_.find(it->second);
  if (wit != psi_.end()) {
    wit->second->gone = true;
    poller_->RemoveFd(wit->second->fd);
    psi_.erase(wit);  // the fd closes once the watcher thread lets go of it too
  }
  psiById_.erase(it);
  return true;
}

void PressureBackend::OnEvents(uint64_t key, uint32_t events, Batch* out) {
  if (key == 0) {
    ReadInotify(out);
    return;
  }
  std::shared_ptr<PsiWatch> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = psi_.find(key);
    if (it == psi_.end()) return;
    w = it->second;
    if (events & (EPOLLERR | EPOLLHUP)) {
      // The file went away with its cgroup (kernfs then polls EPOLLERR for good): drop the
      // trigger, or epoll would report it on every wait.
      poller_->RemoveFd(w->fd);
      psi_.erase(it);
      auto idit = psiById_.find(w->id);
      if (idit != psiById_.end() && idit->second == w->serial) psiById_.erase(idit);
    }
  }
  if (w->gone) return;
  if (events & (EPOLLERR | EPOLLHUP)) {
    Event e = NewEvent(EventKind::kWatchLost, SourceKind::kPsi);
    e.hasId = true;
    e.id = w->id;
    e.text = "PSI trigger on " + w->file + " ended: the file reports an error (its cgroup was removed)";
    out->push_back(std::move(e));
    return;
  }
  if (events & EPOLLPRI) {
    Event e = NewEvent(EventKind::kMemoryPressure, SourceKind::kPsi);
    e.hasId = true;
    e.id = w->id;
    e.count = 1;
    out->push_back(std::move(e));
  }
}

void PressureBackend::ReadInotify(Batch* out) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fd = inotifyFd_;  // closed only by Close(), after the thread has stopped
  }
  if (fd < 0) return;
  InotifyChanges drained = DrainInotify(fd);
  std::vector<int>& changed = drained.changed;
  std::vector<int>& ignored = drained.ignored;
  const bool overflow = drained.overflow;  // events were lost: re-read every file
  std::vector<std::shared_ptr<EventsWatch>> toCheck, removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto collect = [&](int wd, std::vector<std::shared_ptr<EventsWatch>>* into) {
      auto it = eventsByWd_.find(wd);
      if (it == eventsByWd_.end()) return;
      for (uint64_t s : it->second) {
        auto wit = events_.find(s);
        if (wit != events_.end()) into->push_back(wit->second);
      }
    };
    if (overflow) {
      for (auto& [serial, w] : events_) toCheck.push_back(w);
    } else {
      for (int wd : changed) collect(wd, &toCheck);
    }
    for (int wd : ignored) collect(wd, &removed);
    for (const auto& w : removed) ForgetEventsLocked(w, true);
  }
  // A last change before the removal is still reported, then the removal.
  for (const auto& w : toCheck) Check(w, out);
  for (const auto& w : removed) {
    if (w->gone) continue;
    Event e = NewEvent(EventKind::kWatchLost, SourceKind::kInotify);
    e.hasId = true;
    e.id = w->id;
    e.text = "memory.events watch on " + w->file + " ended: the file was removed";
    out->push_back(std::move(e));
  }
}

// The file changed; no lock held.
void PressureBackend::Check(const std::shared_ptr<EventsWatch>& w, Batch* out) {
  std::string text;
  int err = 0;
  if (!ReadSmallFile(w->file, &text, &err)) return;  // IN_IGNORED reports a removal
  std::vector<Counter> cur;
  if (!ParseCounters(text, &cur)) return;  // caught empty, mid-rewrite: wait for the next change
  if (w->haveLast) {
    // A counter of the last reading missing: a partial read, not a new file.
    for (const Counter& c : w->last) {
      if (!FindCounter(cur, c.name)) return;
    }
  }
  bool moved = false;
  for (Counter& c : cur) {
    const Counter* prev = w->haveLast ? FindCounter(w->last, c.name) : nullptr;
    // Counters only grow; a lower value (a file rewritten) is a new base, not a change.
    if (prev && c.value > prev->value) {
      c.delta = c.value - prev->value;
      moved = true;
    }
  }
  w->haveLast = true;
  w->last = cur;
  if (!moved || w->gone) return;
  Event e = NewEvent(EventKind::kMemoryEvents, SourceKind::kInotify);
  e.hasId = true;
  e.id = w->id;
  e.counters = std::move(cur);
  out->push_back(std::move(e));
}

void PressureBackend::AddStats(WatcherStats* stats) {
  std::lock_guard<std::mutex> lock(mu_);
  stats->memoryEvents += events_.size();
  stats->psiTriggers += psi_.size();
  stats->fds += psi_.size() + (inotifyFd_ >= 0 ? 1 : 0);
}

void PressureBackend::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [serial, w] : events_) w->gone = true;
  events_.clear();
  eventsById_.clear();
  eventsByWd_.clear();
  for (auto& [serial, w] : psi_) {
    w->gone = true;
    poller_->RemoveFd(w->fd);
  }
  psi_.clear();
  psiById_.clear();
  if (inotifyFd_ >= 0) {
    poller_->RemoveFd(inotifyFd_);
    close(inotifyFd_);
  }
  inotifyFd_ = -1;
}

}  // namespace oom
}  // namespace kts
