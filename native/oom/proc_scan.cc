#include "proc_scan.h"

#include "backend.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

namespace kts {
namespace oom {

const char* KindName(EventKind k) {
  switch (k) {
    case EventKind::kOomKill: return "oom_kill";
    case EventKind::kOom: return "oom";
    case EventKind::kRemoved: return "removed";
    case EventKind::kKmsg: return "kmsg";
    case EventKind::kError: return "error";
    case EventKind::kMemoryThreshold: return "memory_threshold";
    case EventKind::kMemoryEvents: return "memory_events";
    case EventKind::kMemoryPressure: return "memory_pressure";
    case EventKind::kWatchLost: return "watch_lost";
  }
  return "error";
}

const char* SourceName(SourceKind s) {
  switch (s) {
    case SourceKind::kEventfd: return "eventfd";
    case SourceKind::kInotify: return "inotify";
    case SourceKind::kEbpf: return "ebpf";
    case SourceKind::kKmsg: return "kmsg";
    case SourceKind::kWatcher: return "watcher";
    case SourceKind::kPsi: return "psi";
  }
  return "watcher";
}

Event NewEvent(EventKind kind, SourceKind source) {
  Event e;
  e.kind = kind;
  e.source = source;
  e.observedNs = MonoNs();
  return e;
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

namespace {

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

}  // namespace

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

namespace {
std::mutex g_scanMu;
std::condition_variable g_scanCv;
bool g_scansHeld = false;
std::atomic<uint32_t> g_scansInFlight{0};
}  // namespace

ScanScope::ScanScope() {
  g_scansInFlight++;
  std::unique_lock<std::mutex> lock(g_scanMu);
  g_scanCv.wait(lock, [] { return !g_scansHeld; });
}

ScanScope::~ScanScope() { g_scansInFlight--; }

void HoldScans(bool hold) {
  {
    std::lock_guard<std::mutex> lock(g_scanMu);
    g_scansHeld = hold;
  }
  g_scanCv.notify_all();
}

uint32_t ScansInFlight() { return g_scansInFlight.load(); }

}  // namespace oom
}  // namespace kts
