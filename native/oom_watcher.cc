#include "oom_watcher.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "oom_ebpf.h"

namespace kts {
namespace {

// epoll tags below kFirstWatchTag name the watcher's own fds; watches get serials above.
constexpr uint64_t kTagWake = 1;
constexpr uint64_t kTagInotify = 2;
constexpr uint64_t kTagEbpf = 3;
constexpr uint64_t kTagKmsg = 4;
constexpr uint64_t kFirstWatchTag = 16;

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

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// open/read/close of a small file; false with *err = errno on failure.
bool ReadSmallFile(const std::string& path, std::string* out, int* err) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  out->clear();
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      close(fd);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (1 << 20)) break;
  }
  close(fd);
  return true;
}

// The value of a "key value" line (memory.events, memory.oom_control).
bool FindKeyValue(std::string_view text, std::string_view key, uint64_t* value) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      uint64_t v = 0;
      bool digits = false;
      for (size_t i = key.size() + 1; i < line.size() && line[i] >= '0' && line[i] <= '9'; i++) {
        v = v * 10 + static_cast<uint64_t>(line[i] - '0');
        digits = true;
      }
      if (!digits) return false;
      *value = v;
      return true;
    }
  }
  return false;
}

struct Victim {
  int32_t pid = 0;
  std::string comm;
};

std::vector<int32_t> ReadPids(const std::string& file) {
  std::vector<int32_t> pids;
  std::string text;
  int err = 0;
  if (!ReadSmallFile(file, &text, &err)) return pids;
  int32_t v = 0;
  bool in = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      in = true;
    } else {
      if (in) pids.push_back(v);
      v = 0;
      in = false;
    }
  }
  if (in) pids.push_back(v);
  return pids;
}

struct ProcInfo {
  std::string comm;
  bool dying = false;
};

// Whether a process is on its way out of an OOM kill: SIGKILL pending, exiting, or a zombie.
bool ReadProcInfo(int32_t pid, ProcInfo* info) {
  std::string stat, status;
  int err = 0;
  std::string base = "/proc/" + std::to_string(pid);
  if (!ReadSmallFile(base + "/stat", &stat, &err)) return false;
  size_t lp = stat.find('('), rp = stat.rfind(')');
  if (lp == std::string::npos || rp == std::string::npos || rp < lp) return false;
  info->comm = stat.substr(lp + 1, rp - lp - 1);
  // After ") ": state, ppid, pgrp, session, tty_nr, tpgid, flags.
  char state = rp + 2 < stat.size() ? stat[rp + 2] : '?';
  unsigned long long flags = 0;
  {
    const char* p = stat.c_str() + rp + 2;
    for (int field = 0; field < 6 && *p; field++) {
      p = strchr(p, ' ');
      if (!p) break;
      p++;
    }
    if (p) flags = strtoull(p, nullptr, 10);
  }
  constexpr unsigned long long kPfExiting = 0x4, kPfSignaled = 0x400;
  bool dying = state == 'Z' || state == 'X' || (flags & (kPfExiting | kPfSignaled)) != 0;
  if (!dying && ReadSmallFile(base + "/status", &status, &err)) {
    constexpr unsigned long long kSigKillBit = 1ULL << (9 - 1);
    for (const char* key : {"ShdPnd:", "SigPnd:"}) {
      size_t at = status.find(key);
      if (at != std::string::npos && (strtoull(status.c_str() + at + strlen(key), nullptr, 16) & kSigKillBit)) dying = true;
    }
  }
  info->dying = dying;
  return true;
}

std::vector<Victim> SnapshotProcs(const std::string& dir) {
  std::vector<Victim> out;
  for (int32_t pid : ReadPids(dir + "/cgroup.procs")) {
    ProcInfo info;
    if (ReadProcInfo(pid, &info)) out.push_back({pid, info.comm});
  }
  return out;
}

// The victims of a confirmed kill: processes of the cgroup that are dying now, plus those of
// the snapshot taken when the OOM started that have left the cgroup since.
std::vector<Victim> FindVictims(const std::string& dir, const std::vector<Victim>& snapshot) {
  std::vector<Victim> out;
  std::vector<int32_t> pids = ReadPids(dir + "/cgroup.procs");
  std::unordered_set<int32_t> present(pids.begin(), pids.end());
  for (int32_t pid : pids) {
    ProcInfo info;
    if (ReadProcInfo(pid, &info) && info.dying) out.push_back({pid, info.comm});
  }
  for (const Victim& v : snapshot) {
    if (!present.count(v.pid)) out.push_back(v);
  }
  return out;
}

// Last resort when the victim left the cgroup before the watcher thread looked (it was kept off
// the CPU): the kernel logged the kill ("oom-kill:...,task_memcg=<path>,task=<comm>,pid=<pid>")
// before it counted it, so the newest such record naming this cgroup is the victim. But that
// line belongs to the OOM report, which the kernel rate-limits, while "Killed process N" is
// always logged: a later kill logged without its report may be this cgroup's, so then the
// answer is unknown rather than a stale pid. Reads the whole kernel log: fallback only.
bool FindVictimInKmsg(const std::string& dir, Victim* out) {
  int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  bool found = false;
  bool reportOpen = false;  // an "oom-kill:" line waits for its "Killed process" line
  char buf[8192];
  for (int records = 0; records < 200000; records++) {
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0) {
      if (errno == EPIPE || errno == EINTR) continue;
      break;
    }
    if (n == 0) break;
    std::string_view rec(buf, static_cast<size_t>(n));
    size_t semi = rec.find(';');
    if (semi == std::string_view::npos) continue;
    std::string_view line = rec.substr(semi + 1);
    line = line.substr(0, line.find('\n'));
    if (line.find("Killed process ") != std::string_view::npos) {
      if (!reportOpen) found = false;  // a kill without its report: ours cannot be told apart
      reportOpen = false;
      continue;
    }
    size_t at = line.find("oom-kill:");
    if (at == std::string_view::npos) continue;
    reportOpen = true;
    line = line.substr(at);
    size_t m = line.find(",task_memcg=");
    size_t t = line.find(",task=", m == std::string_view::npos ? 0 : m);
    size_t p = line.find(",pid=", t == std::string_view::npos ? 0 : t);
    if (m == std::string_view::npos || t == std::string_view::npos || p == std::string_view::npos) continue;
    std::string_view memcg = line.substr(m + 12, t - m - 12);
    // The record names the cgroup by its path in the hierarchy; dir is that path under a mount.
    if (memcg.size() < 2 || dir.size() < memcg.size() || dir.compare(dir.size() - memcg.size(), memcg.size(), memcg) != 0) continue;
    out->comm.assign(line.substr(t + 6, p - t - 6));
    out->pid = static_cast<int32_t>(strtol(std::string(line.substr(p + 5)).c_str(), nullptr, 10));
    found = true;
  }
  close(fd);
  return found;
}

// The memory controller's cgroup path of a process from /proc/<pid>/cgroup ("" if unknown).
std::string MemoryCgroupOf(int32_t pid) {
  std::string text;
  int err = 0;
  if (!ReadSmallFile("/proc/" + std::to_string(pid) + "/cgroup", &text, &err)) return "";
  std::string unified;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string ctrls = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path = line.substr(c2 + 1);
    if (ctrls.empty()) {
      unified = path;
      continue;
    }
    size_t p = 0;
    while (p <= ctrls.size()) {
      size_t comma = ctrls.find(',', p);
      if (comma == std::string::npos) comma = ctrls.size();
      if (ctrls.compare(p, comma - p, "memory") == 0) return path;
      p = comma + 1;
    }
  }
  return unified;
}

enum class EventKind : uint8_t { kOomKill, kOom, kRemoved, kKmsg, kError };
enum class SourceKind : uint8_t { kEventfd, kInotify, kEbpf, kKmsg };

const char* KindName(EventKind k) {
  switch (k) {
    case EventKind::kOomKill: return "oom_kill";
    case EventKind::kOom: return "oom";
    case EventKind::kRemoved: return "removed";
    case EventKind::kKmsg: return "kmsg";
    case EventKind::kError: return "error";
  }
  return "error";
}

const char* SourceName(SourceKind s) {
  switch (s) {
    case SourceKind::kEventfd: return "eventfd";
    case SourceKind::kInotify: return "inotify";
    case SourceKind::kEbpf: return "ebpf";
    case SourceKind::kKmsg: return "kmsg";
  }
  return "eventfd";
}

struct Event {
  EventKind kind;
  SourceKind source;
  bool hasId = false;
  uint32_t id = 0;
  uint64_t count = 0;
  uint64_t total = 0;
  std::vector<Victim> victims;
  bool hasRecord = false;
  kts_oom_victim record{};
  std::string cgroupPath;
  bool cgroupPathFromProc = false;
  std::string text;
  uint64_t kernelTimeUs = 0;
  uint64_t notifiedNs = 0;
  uint64_t observedNs = 0;
};

using Batch = std::vector<Event>;

enum class WatchKind : uint8_t { kV1, kV2 };

struct Watch {
  uint32_t id = 0;
  WatchKind kind = WatchKind::kV1;
  uint64_t serial = 0;
  std::string dir;
  int fd = -1;  // v1: the eventfd
  int wd = -1;  // v2: the inotify watch
  bool haveTotal = false;
  uint64_t killTotal = 0;
  // v1: an OOM notification waiting for its kill to show in oom_kill.
  bool pending = false;
  size_t attempt = 0;
  uint64_t notifiedNs = 0;
  uint64_t deadlineNs = 0;
  std::vector<Victim> snapshot;
};

std::string ErrnoName(int err) {
  switch (err) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOSPC: return "ENOSPC";
    case EINVAL: return "EINVAL";
    case ENOTDIR: return "ENOTDIR";
    case ENODEV: return "ENODEV";
    default: return "E" + std::to_string(err);
  }
}

class WatcherCore {
 public:
  explicit WatcherCore(Napi::ThreadSafeFunction tsfn) : tsfn_(std::move(tsfn)), ebpf_(&WatcherCore::OnEbpf, this) {}

  ~WatcherCore() { Close(); }

  // Creates the epoll and wake fds and starts the thread; false with errno on failure.
  bool Start(int* err) {
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) {
      *err = errno;
      return false;
    }
    wakefd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wakefd_ < 0 || !AddToEpoll(wakefd_, kTagWake)) {
      *err = errno;
      return false;
    }
    running_ = true;
    thread_ = std::thread([this] { Loop(); });
    return true;
  }

  bool closed() const { return closed_; }

  void Close() {
    if (closed_) return;
    closed_ = true;
    if (running_) {
      stopping_ = true;
      uint64_t one = 1;
      ssize_t ignored = write(wakefd_, &one, sizeof(one));
      (void)ignored;
      thread_.join();
      running_ = false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [serial, w] : watches_) {
      if (w.fd >= 0) close(w.fd);
    }
    watches_.clear();
    byId_.clear();
    byWd_.clear();
    pending_.clear();
    ebpf_.Stop();
    ebpfOn_ = false;
    if (kmsgfd_ >= 0) close(kmsgfd_);
    kmsgfd_ = -1;
    if (inotifyfd_ >= 0) close(inotifyfd_);
    inotifyfd_ = -1;
    if (wakefd_ >= 0) close(wakefd_);
    wakefd_ = -1;
    if (epfd_ >= 0) close(epfd_);
    epfd_ = -1;
    tsfn_.Release();
  }

  // v1: eventfd registered on memory.oom_control through cgroup.event_control.
  bool WatchV1(uint32_t id, const std::string& dir, int* err, std::string* what) {
    std::lock_guard<std::mutex> lock(mu_);
    UnwatchLocked(id);
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) return Fail(err, what, "eventfd");
    int ofd = open((dir + "/memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC);
    if (ofd < 0) {
      Fail(err, what, "open memory.oom_control");
      close(efd);
      return false;
    }
    int cfd = open((dir + "/cgroup.event_control").c_str(), O_WRONLY | O_CLOEXEC);
    if (cfd < 0) {
      Fail(err, what, "open cgroup.event_control");
      close(ofd);
      close(efd);
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
      Fail(err, what, "write cgroup.event_control");
      close(efd);
      return false;
    }
    Watch w;
    w.id = id;
    w.kind = WatchKind::kV1;
    w.serial = nextSerial_++;
    w.dir = dir;
    w.fd = efd;
    std::string text;
    int rerr = 0;
    // The baseline is read after registering, so no kill can fall between the two.
    if (ReadSmallFile(dir + "/memory.oom_control", &text, &rerr)) w.haveTotal = FindKeyValue(text, "oom_kill", &w.killTotal);
    if (!AddToEpoll(efd, w.serial)) {
      Fail(err, what, "epoll_ctl");
      close(efd);
      return false;
    }
    byId_[id] = w.serial;
    watches_.emplace(w.serial, std::move(w));
    return true;
  }

  // v2: inotify on memory.events (shared inotify fd, one watch descriptor per file).
  bool WatchV2(uint32_t id, const std::string& dir, int* err, std::string* what) {
    std::lock_guard<std::mutex> lock(mu_);
    UnwatchLocked(id);
    if (inotifyfd_ < 0) {
      inotifyfd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      if (inotifyfd_ < 0) return Fail(err, what, "inotify_init1");
      if (!AddToEpoll(inotifyfd_, kTagInotify)) {
        Fail(err, what, "epoll_ctl");
        close(inotifyfd_);
        inotifyfd_ = -1;
        return false;
      }
    }
    std::string file = dir + "/memory.events";
    // IN_MODIFY is what cgroupfs sends; IN_CLOSE_WRITE catches plain files written whole.
    int wd = inotify_add_watch(inotifyfd_, file.c_str(), IN_MODIFY | IN_CLOSE_WRITE);
    if (wd < 0) return Fail(err, what, "inotify_add_watch memory.events");
    Watch w;
    w.id = id;
    w.kind = WatchKind::kV2;
    w.serial = nextSerial_++;
    w.dir = dir;
    w.wd = wd;
    std::string text;
    int rerr = 0;
    if (ReadSmallFile(file, &text, &rerr)) w.haveTotal = FindKeyValue(text, "oom_kill", &w.killTotal);
    byWd_[wd].push_back(w.serial);
    byId_[id] = w.serial;
    watches_.emplace(w.serial, std::move(w));
    return true;
  }

  bool Unwatch(uint32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return UnwatchLocked(id);
  }

  bool StartEbpf(std::string* reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ebpfOn_) return true;
    if (!ebpf_.Start(reason)) return false;
    if (!AddToEpoll(ebpf_.PollFd(), kTagEbpf)) {
      *reason = std::string("epoll_ctl on the ring buffer failed: ") + strerror(errno);
      ebpf_.Stop();
      return false;
    }
    ebpfOn_ = true;
    return true;
  }

  void StopEbpf() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ebpfOn_) return;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, ebpf_.PollFd(), nullptr);
    ebpf_.Stop();
    ebpfOn_ = false;
  }

  bool StartKmsg(std::string* reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (kmsgfd_ >= 0) return true;
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      *reason = std::string("cannot open /dev/kmsg: ") + strerror(errno);
      return false;
    }
    // Only what the kernel logs from now on.
    lseek(fd, 0, SEEK_END);
    if (!AddToEpoll(fd, kTagKmsg)) {
      *reason = std::string("epoll_ctl on /dev/kmsg failed: ") + strerror(errno);
      close(fd);
      return false;
    }
    kmsgfd_ = fd;
    return true;
  }

  void StopKmsg() {
    std::lock_guard<std::mutex> lock(mu_);
    if (kmsgfd_ < 0) return;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, kmsgfd_, nullptr);
    close(kmsgfd_);
    kmsgfd_ = -1;
  }

  struct Stats {
    size_t watches = 0, v1 = 0, v2 = 0, fds = 0;
    bool ebpf = false, kmsg = false, running = false;
  };

  Stats GetStats() {
    std::lock_guard<std::mutex> lock(mu_);
    Stats s;
    s.watches = watches_.size();
    for (auto& [serial, w] : watches_) (w.kind == WatchKind::kV1 ? s.v1 : s.v2)++;
    s.fds = s.v1 + (epfd_ >= 0) + (wakefd_ >= 0) + (inotifyfd_ >= 0) + (kmsgfd_ >= 0);
    s.ebpf = ebpfOn_;
    s.kmsg = kmsgfd_ >= 0;
    s.running = running_ && !stopping_;
    return s;
  }

  Napi::ThreadSafeFunction& tsfn() { return tsfn_; }

 private:
  static bool Fail(int* err, std::string* what, const char* step) {
    *err = errno;
    *what = step;
    return false;
  }

  bool AddToEpoll(int fd, uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    return epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) == 0;
  }

  // Caller holds mu_.
  bool UnwatchLocked(uint32_t id) {
    auto it = byId_.find(id);
    if (it == byId_.end()) return false;
    uint64_t serial = it->second;
    byId_.erase(it);
    auto wit = watches_.find(serial);
    if (wit != watches_.end()) DropWatchLocked(wit->second, /*kernelGone=*/false);
    return true;
  }

  // Forgets a watch and releases its fd or watch descriptor. Caller holds mu_.
  void DropWatchLocked(Watch& w, bool kernelGone) {
    if (w.fd >= 0) {
      epoll_ctl(epfd_, EPOLL_CTL_DEL, w.fd, nullptr);
      close(w.fd);
      w.fd = -1;
    }
    if (w.wd >= 0) {
      auto bit = byWd_.find(w.wd);
      if (bit != byWd_.end()) {
        auto& v = bit->second;
        v.erase(std::remove(v.begin(), v.end(), w.serial), v.end());
        if (v.empty()) {
          byWd_.erase(bit);
          if (!kernelGone) inotify_rm_watch(inotifyfd_, w.wd);
        }
      }
      w.wd = -1;
    }
    // Copied: erasing by a key that lives inside the node being erased is asking for trouble.
    const uint64_t serial = w.serial;
    auto idit = byId_.find(w.id);
    if (idit != byId_.end() && idit->second == serial) byId_.erase(idit);
    pending_.erase(serial);
    watches_.erase(serial);  // w is gone after this
  }

  Event NewEvent(EventKind kind, SourceKind source, const Watch* w) {
    Event e;
    e.kind = kind;
    e.source = source;
    if (w) {
      e.hasId = true;
      e.id = w->id;
      e.total = w->killTotal;
    }
    e.observedNs = MonoNs();
    return e;
  }

  // v1: after a notification (fromNotify) or a scheduled re-check. Caller holds mu_.
  void CheckV1Locked(Watch& w, bool fromNotify, Batch* out) {
    std::string text;
    int err = 0;
    if (!ReadSmallFile(w.dir + "/memory.oom_control", &text, &err)) {
      if (err == ENOENT || err == ENODEV || err == ESTALE) {
        // The notification the kernel sends when the cgroup goes away.
        out->push_back(NewEvent(EventKind::kRemoved, SourceKind::kEventfd, &w));
        DropWatchLocked(w, true);
      } else {
        Event e = NewEvent(EventKind::kError, SourceKind::kEventfd, &w);
        e.text = "read " + w.dir + "/memory.oom_control: " + strerror(err);
        out->push_back(std::move(e));
      }
      return;
    }
    uint64_t total = 0;
    if (!FindKeyValue(text, "oom_kill", &total)) {
      // Kernels before 4.13 do not count kills: report the OOM unconfirmed.
      if (fromNotify) out->push_back(NewEvent(EventKind::kOom, SourceKind::kEventfd, &w));
      return;
    }
    if (!w.haveTotal) {
      w.haveTotal = true;
      w.killTotal = total;
    }
    if (total > w.killTotal) {
      Event e = NewEvent(EventKind::kOomKill, SourceKind::kEventfd, &w);
      e.count = total - w.killTotal;
      e.total = total;
      e.victims = FindVictims(w.dir, w.snapshot);
      Victim logged;
      if (e.victims.empty() && FindVictimInKmsg(w.dir, &logged)) e.victims.push_back(logged);
      e.notifiedNs = w.pending ? w.notifiedNs : e.observedNs;
      out->push_back(std::move(e));
      w.killTotal = total;
      w.pending = false;
      w.snapshot.clear();
      pending_.erase(w.serial);
      return;
    }
    if (total < w.killTotal) w.killTotal = total;
    if (fromNotify) {
      if (!w.pending) {
        w.pending = true;
        w.notifiedNs = MonoNs();
        w.snapshot = SnapshotProcs(w.dir);
      }
      w.attempt = 0;
    } else {
      w.attempt++;
    }
    if (w.attempt >= kRecheckCount) {
      // The OOM ended without a kill here (reclaim won, or oom_kill_disable is set).
      Event e = NewEvent(EventKind::kOom, SourceKind::kEventfd, &w);
      e.notifiedNs = w.notifiedNs;
      out->push_back(std::move(e));
      w.pending = false;
      w.snapshot.clear();
      pending_.erase(w.serial);
      return;
    }
    w.deadlineNs = w.notifiedNs + RecheckDelayMs(w.attempt) * 1000000ULL;
    pending_.insert(w.serial);
  }

  // v2: memory.events changed. Caller holds mu_.
  void CheckV2Locked(Watch& w, Batch* out) {
    std::string text;
    int err = 0;
    if (!ReadSmallFile(w.dir + "/memory.events", &text, &err)) return;  // IN_IGNORED reports removal
    uint64_t total = 0;
    // A file caught mid-write has no oom_kill line yet: wait for the next change.
    if (!FindKeyValue(text, "oom_kill", &total)) return;
    if (!w.haveTotal) {
      w.haveTotal = true;
      w.killTotal = total;
      return;
    }
    if (total > w.killTotal) {
      Event e = NewEvent(EventKind::kOomKill, SourceKind::kInotify, &w);
      e.count = total - w.killTotal;
      e.total = total;
      e.victims = FindVictims(w.dir, {});
      Victim logged;
      if (e.victims.empty() && FindVictimInKmsg(w.dir, &logged)) e.victims.push_back(logged);
      e.notifiedNs = e.observedNs;
      out->push_back(std::move(e));
    }
    w.killTotal = total;
  }

  void DrainInotifyLocked(Batch* out) {
    alignas(inotify_event) char buf[16384];
    std::vector<int> changed;
    std::vector<int> ignored;
    for (;;) {
      ssize_t n = read(inotifyfd_, buf, sizeof(buf));
      if (n <= 0) break;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        if (ev->mask & IN_IGNORED) {
          ignored.push_back(ev->wd);
        } else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
          if (std::find(changed.begin(), changed.end(), ev->wd) == changed.end()) changed.push_back(ev->wd);
        } else if (ev->mask & IN_Q_OVERFLOW) {
          // Events were lost: re-read every v2 watch.
          for (auto& [wd, serials] : byWd_) changed.push_back(wd);
        }
        p += sizeof(inotify_event) + ev->len;
      }
    }
    for (int wd : changed) {
      auto it = byWd_.find(wd);
      if (it == byWd_.end()) continue;
      std::vector<uint64_t> serials = it->second;
      for (uint64_t s : serials) {
        auto wit = watches_.find(s);
        if (wit != watches_.end()) CheckV2Locked(wit->second, out);
      }
    }
    for (int wd : ignored) {
      auto it = byWd_.find(wd);
      if (it == byWd_.end()) continue;
      std::vector<uint64_t> serials = it->second;
      for (uint64_t s : serials) {
        auto wit = watches_.find(s);
        if (wit == watches_.end()) continue;
        out->push_back(NewEvent(EventKind::kRemoved, SourceKind::kInotify, &wit->second));
        DropWatchLocked(wit->second, true);
      }
    }
  }

  void DrainKmsgLocked(Batch* out) {
    char buf[8192];
    for (;;) {
      ssize_t n = read(kmsgfd_, buf, sizeof(buf) - 1);
      if (n < 0) {
        if (errno == EPIPE || errno == EINTR) continue;  // EPIPE: records were overwritten
        break;
      }
      if (n == 0) break;
      std::string_view rec(buf, static_cast<size_t>(n));
      size_t semi = rec.find(';');
      if (semi == std::string_view::npos) continue;
      std::string_view msg = rec.substr(semi + 1);
      size_t nl = msg.find('\n');
      if (nl != std::string_view::npos) msg = msg.substr(0, nl);
      if (msg.find("oom-kill:") == std::string_view::npos && msg.find("Killed process") == std::string_view::npos &&
          msg.find("invoked oom-killer") == std::string_view::npos) {
        continue;
      }
      Event e = NewEvent(EventKind::kKmsg, SourceKind::kKmsg, nullptr);
      e.text.assign(msg.data(), msg.size());
      // Prefix: priority,sequence,timestamp_us,flags
      std::string_view head = rec.substr(0, semi);
      size_t c1 = head.find(','), c2 = c1 == std::string_view::npos ? c1 : head.find(',', c1 + 1);
      if (c2 != std::string_view::npos) e.kernelTimeUs = strtoull(std::string(head.substr(c2 + 1)).c_str(), nullptr, 10);
      out->push_back(std::move(e));
    }
  }

  static void OnEbpf(void* ctx, const kts_oom_victim& v) {
    auto* self = static_cast<WatcherCore*>(ctx);
    Event e = self->NewEvent(EventKind::kOomKill, SourceKind::kEbpf, nullptr);
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
      e.cgroupPath = MemoryCgroupOf(static_cast<int32_t>(v.pid));
      e.cgroupPathFromProc = true;
    }
    self->ebpfBatch_->push_back(std::move(e));
  }

  void Loop() {
    // Named so tools and the benchmark can find the watcher's thread in /proc/<pid>/task.
    pthread_setname_np(pthread_self(), "kts-oom-watch");
    epoll_event evs[64];
    while (!stopping_) {
      int timeout = -1;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!pending_.empty()) {
          uint64_t now = MonoNs(), next = UINT64_MAX;
          for (uint64_t s : pending_) {
            auto it = watches_.find(s);
            if (it != watches_.end()) next = std::min(next, it->second.deadlineNs);
          }
          timeout = next <= now ? 0 : static_cast<int>((next - now + 999999) / 1000000);
        }
      }
      int n = epoll_wait(epfd_, evs, 64, timeout);
      if (n < 0 && errno != EINTR) break;
      auto batch = std::make_unique<Batch>();
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (int i = 0; i < n; i++) {
          uint64_t tag = evs[i].data.u64;
          if (tag == kTagWake) {
            uint64_t v;
            ssize_t ignored = read(wakefd_, &v, sizeof(v));
            (void)ignored;
          } else if (tag == kTagInotify) {
            if (inotifyfd_ >= 0) DrainInotifyLocked(batch.get());
          } else if (tag == kTagEbpf) {
            ebpfBatch_ = batch.get();
            if (ebpfOn_) ebpf_.Consume();
            ebpfBatch_ = nullptr;
          } else if (tag == kTagKmsg) {
            if (kmsgfd_ >= 0) DrainKmsgLocked(batch.get());
          } else {
            auto it = watches_.find(tag);
            if (it == watches_.end()) continue;
            uint64_t count;
            ssize_t ignored = read(it->second.fd, &count, sizeof(count));
            (void)ignored;
            CheckV1Locked(it->second, true, batch.get());
          }
        }
        if (!pending_.empty()) {
          uint64_t now = MonoNs();
          std::vector<uint64_t> due;
          for (uint64_t s : pending_) {
            auto it = watches_.find(s);
            if (it == watches_.end() || it->second.deadlineNs <= now) due.push_back(s);
          }
          for (uint64_t s : due) {
            auto it = watches_.find(s);
            if (it == watches_.end()) {
              pending_.erase(s);
              continue;
            }
            CheckV1Locked(it->second, false, batch.get());
          }
        }
      }
      if (!batch->empty()) {
        Batch* raw = batch.release();
        napi_status st = tsfn_.NonBlockingCall(raw, &WatcherCore::Deliver);
        if (st != napi_ok) delete raw;
      }
    }
  }

  static void Deliver(Napi::Env env, Napi::Function callback, Batch* batch);

  Napi::ThreadSafeFunction tsfn_;
  std::mutex mu_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool running_ = false;
  bool closed_ = false;
  int epfd_ = -1;
  int wakefd_ = -1;
  int inotifyfd_ = -1;
  int kmsgfd_ = -1;
  uint64_t nextSerial_ = kFirstWatchTag;
  std::unordered_map<uint64_t, Watch> watches_;
  std::unordered_map<uint32_t, uint64_t> byId_;
  std::unordered_map<int, std::vector<uint64_t>> byWd_;
  std::set<uint64_t> pending_;
  EbpfOomSource ebpf_;
  bool ebpfOn_ = false;
  Batch* ebpfBatch_ = nullptr;
};

Napi::Value BigNs(Napi::Env env, uint64_t ns) { return Napi::BigInt::New(env, ns); }

Napi::Object ToJs(Napi::Env env, const Event& e) {
  static const long kPageSize = sysconf(_SC_PAGESIZE);
  Napi::Object o = Napi::Object::New(env);
  o.Set("kind", KindName(e.kind));
  o.Set("source", SourceName(e.source));
  o.Set("observedTimeNs", BigNs(env, e.observedNs));
  if (e.hasId) o.Set("id", Napi::Number::New(env, e.id));
  if (e.kind == EventKind::kOomKill || e.kind == EventKind::kOom || e.kind == EventKind::kRemoved) {
    if (e.source != SourceKind::kEbpf) o.Set("total", Napi::Number::New(env, static_cast<double>(e.total)));
  }
  if (e.notifiedNs) o.Set("notifiedTimeNs", BigNs(env, e.notifiedNs));
  if (e.kind == EventKind::kOomKill) o.Set("count", Napi::Number::New(env, static_cast<double>(e.count)));
  if (e.source == SourceKind::kEventfd || e.source == SourceKind::kInotify) {
    if (e.kind == EventKind::kOomKill) {
      Napi::Array arr = Napi::Array::New(env, e.victims.size());
      for (size_t i = 0; i < e.victims.size(); i++) {
        Napi::Object v = Napi::Object::New(env);
        v.Set("pid", Napi::Number::New(env, e.victims[i].pid));
        v.Set("comm", e.victims[i].comm);
        arr.Set(static_cast<uint32_t>(i), v);
      }
      o.Set("victims", arr);
    }
  }
  if (e.hasRecord) {
    const kts_oom_victim& r = e.record;
    auto kb = [](uint64_t pages) { return static_cast<double>(pages) * static_cast<double>(kPageSize) / 1024.0; };
    o.Set("pid", Napi::Number::New(env, r.pid));
    o.Set("tid", Napi::Number::New(env, r.tid));
    o.Set("kernelTimeNs", BigNs(env, r.ktime_ns));
    if (r.flags & KTS_OOM_HAVE_TASK) {
      std::string comm(r.comm, strnlen(r.comm, sizeof(r.comm)));
      o.Set("comm", comm);
      o.Set("uid", Napi::Number::New(env, r.uid));
      o.Set("oomScoreAdj", Napi::Number::New(env, r.oom_score_adj));
    }
    if (r.flags & KTS_OOM_HAVE_MM) {
      o.Set("totalVmKb", Napi::Number::New(env, kb(r.total_vm_pages)));
      o.Set("anonRssKb", Napi::Number::New(env, kb(r.anon_rss_pages)));
      o.Set("fileRssKb", Napi::Number::New(env, kb(r.file_rss_pages)));
      o.Set("shmemRssKb", Napi::Number::New(env, kb(r.shmem_rss_pages)));
      o.Set("swapKb", Napi::Number::New(env, kb(r.swap_ents)));
      o.Set("pgtablesKb", Napi::Number::New(env, static_cast<double>(r.pgtables_bytes) / 1024.0));
    }
    if (r.flags & KTS_OOM_HAVE_MEMCG) {
      o.Set("memcgInode", Napi::Number::New(env, static_cast<double>(r.memcg_ino)));
      o.Set("memcgUsageBytes", Napi::Number::New(env, static_cast<double>(r.memcg_usage_pages) * kPageSize));
      // PAGE_COUNTER_MAX means no limit.
      if (r.memcg_limit_pages < (1ULL << 50)) {
        o.Set("memcgLimitBytes", Napi::Number::New(env, static_cast<double>(r.memcg_limit_pages) * kPageSize));
      }
    }
  }
  if (!e.cgroupPath.empty()) o.Set("cgroupPath", e.cgroupPath);
  if (e.cgroupPathFromProc) o.Set("cgroupPathFromProc", true);
  if (e.kind == EventKind::kKmsg) {
    o.Set("line", e.text);
    o.Set("kernelTimeUs", Napi::Number::New(env, static_cast<double>(e.kernelTimeUs)));
  }
  if (e.kind == EventKind::kError) o.Set("message", e.text);
  return o;
}

void WatcherCore::Deliver(Napi::Env env, Napi::Function callback, Batch* batch) {
  std::unique_ptr<Batch> owned(batch);
  if (env == nullptr || callback.IsEmpty()) return;
  Napi::Array arr = Napi::Array::New(env, owned->size());
  for (size_t i = 0; i < owned->size(); i++) arr.Set(static_cast<uint32_t>(i), ToJs(env, (*owned)[i]));
  try {
    callback.Call({arr});
  } catch (const Napi::Error& err) {
    // A throwing JS handler must not take the watcher down: surface it as uncaught.
    err.ThrowAsJavaScriptException();
  }
}

Napi::Object Result(Napi::Env env, bool ok, const std::string& reason) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("ok", ok);
  if (!ok) o.Set("reason", reason);
  return o;
}

class OomWatcherHandle : public Napi::ObjectWrap<OomWatcherHandle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "OomWatcherHandle",
                       {
                           InstanceMethod<&OomWatcherHandle::WatchV1>("watchV1"),
                           InstanceMethod<&OomWatcherHandle::WatchV2>("watchV2"),
                           InstanceMethod<&OomWatcherHandle::Unwatch>("unwatch"),
                           InstanceMethod<&OomWatcherHandle::StartEbpf>("startEbpf"),
                           InstanceMethod<&OomWatcherHandle::StopEbpf>("stopEbpf"),
                           InstanceMethod<&OomWatcherHandle::StartKmsg>("startKmsg"),
                           InstanceMethod<&OomWatcherHandle::StopKmsg>("stopKmsg"),
                           InstanceMethod<&OomWatcherHandle::Stats>("stats"),
                           InstanceMethod<&OomWatcherHandle::Ref>("ref"),
                           InstanceMethod<&OomWatcherHandle::Unref>("unref"),
                           InstanceMethod<&OomWatcherHandle::Close>("close"),
                       });
  }

  explicit OomWatcherHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<OomWatcherHandle>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsFunction()) {
      Napi::TypeError::New(env, "OomWatcherHandle(onEvents): onEvents must be a function").ThrowAsJavaScriptException();
      return;
    }
    auto tsfn = Napi::ThreadSafeFunction::New(env, info[0].As<Napi::Function>(), "kts-oom-watcher", 0, 1);
    core_ = std::make_unique<WatcherCore>(std::move(tsfn));
    int err = 0;
    if (!core_->Start(&err)) {
      core_->Close();
      Napi::Error::New(env, std::string("oom watcher: cannot start: ") + strerror(err)).ThrowAsJavaScriptException();
      return;
    }
    // Registered after the TSFN, so it runs before the TSFN's own teardown (hooks run in
    // reverse order): the thread is stopped while the TSFN is still valid.
    env_ = env;
    if (napi_add_env_cleanup_hook(env, &OomWatcherHandle::OnEnvCleanup, this) == napi_ok) hooked_ = true;
  }

  ~OomWatcherHandle() override {
    if (hooked_) napi_remove_env_cleanup_hook(env_, &OomWatcherHandle::OnEnvCleanup, this);
    if (core_) core_->Close();
  }

 private:
  bool Usable(Napi::Env env) {
    if (!core_ || core_->closed()) {
      Napi::Error::New(env, "oom watcher is closed").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  template <bool (WatcherCore::*Add)(uint32_t, const std::string&, int*, std::string*)>
  Napi::Value DoWatch(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsString()) {
      Napi::TypeError::New(env, "watch(id: number, dir: string)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    uint32_t id = info[0].As<Napi::Number>().Uint32Value();
    std::string dir = info[1].As<Napi::String>().Utf8Value();
    int err = 0;
    std::string what;
    if (!((*core_).*Add)(id, dir, &err, &what)) {
      Napi::Error e = Napi::Error::New(env, "oom watch " + dir + ": " + what + ": " + strerror(err));
      e.Set("code", ErrnoName(err));
      e.Set("errno", Napi::Number::New(env, err));
      e.ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value WatchV1(const Napi::CallbackInfo& info) { return DoWatch<&WatcherCore::WatchV1>(info); }
  Napi::Value WatchV2(const Napi::CallbackInfo& info) { return DoWatch<&WatcherCore::WatchV2>(info); }

  Napi::Value Unwatch(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!core_ || core_->closed() || info.Length() < 1 || !info[0].IsNumber()) return Napi::Boolean::New(env, false);
    return Napi::Boolean::New(env, core_->Unwatch(info[0].As<Napi::Number>().Uint32Value()));
  }

  Napi::Value StartEbpf(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    std::string reason;
    bool ok = core_->StartEbpf(&reason);
    return Result(env, ok, reason);
  }

  Napi::Value StopEbpf(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->StopEbpf();
    return info.Env().Undefined();
  }

  Napi::Value StartKmsg(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    std::string reason;
    bool ok = core_->StartKmsg(&reason);
    return Result(env, ok, reason);
  }

  Napi::Value StopKmsg(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->StopKmsg();
    return info.Env().Undefined();
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    WatcherCore::Stats s;
    if (core_ && !core_->closed()) s = core_->GetStats();
    Napi::Object o = Napi::Object::New(env);
    o.Set("watches", Napi::Number::New(env, static_cast<double>(s.watches)));
    o.Set("v1", Napi::Number::New(env, static_cast<double>(s.v1)));
    o.Set("v2", Napi::Number::New(env, static_cast<double>(s.v2)));
    o.Set("fds", Napi::Number::New(env, static_cast<double>(s.fds)));
    o.Set("ebpf", s.ebpf);
    o.Set("kmsg", s.kmsg);
    o.Set("running", s.running);
    return o;
  }

  Napi::Value Ref(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->tsfn().Ref(info.Env());
    return info.Env().Undefined();
  }

  Napi::Value Unref(const Napi::CallbackInfo& info) {
    if (core_ && !core_->closed()) core_->tsfn().Unref(info.Env());
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (core_) core_->Close();
    return info.Env().Undefined();
  }

  static void OnEnvCleanup(void* arg) {
    auto* self = static_cast<OomWatcherHandle*>(arg);
    self->hooked_ = false;
    if (self->core_) self->core_->Close();
  }

  std::unique_ptr<WatcherCore> core_;
  napi_env env_ = nullptr;
  bool hooked_ = false;
};

Napi::Value OomEbpfBuild(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string reason;
  bool compiled = EbpfCompiledIn(&reason);
  Napi::Object o = Napi::Object::New(env);
  o.Set("compiled", compiled);
  if (!compiled) o.Set("reason", reason);
  return o;
}

}  // namespace

void InitOomWatcher(Napi::Env env, Napi::Object exports) {
  exports.Set("oomEbpfBuild", Napi::Function::New(env, OomEbpfBuild, "oomEbpfBuild"));
  exports.Set("OomWatcherHandle", OomWatcherHandle::Define(env));
}

}  // namespace kts
