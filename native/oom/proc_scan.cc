#include "proc_scan.h"

#include "backend.h"
#include "kmsg_record.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
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
        const uint64_t d = static_cast<uint64_t>(line[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;  // not a counter the kernel prints
        v = v * 10 + d;
        digits = true;
      }
      if (!digits) return false;
      *value = v;
      return true;
    }
  }
  return false;
}

// The pids of a cgroup.procs text: decimal numbers separated by anything else; a number past
// INT32_MAX is not a pid and is skipped.
std::vector<int32_t> ParsePids(std::string_view text) {
  std::vector<int32_t> pids;
  int64_t v = 0;
  bool in = false, over = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      if (!over) {
        v = v * 10 + (c - '0');
        over = v > INT32_MAX;
      }
      in = true;
    } else {
      if (in && !over) pids.push_back(static_cast<int32_t>(v));
      v = 0;
      in = over = false;
    }
  }
  if (in && !over) pids.push_back(static_cast<int32_t>(v));
  return pids;
}

// /proc/<pid>/stat: "pid (comm) state ppid pgrp session tty_nr tpgid flags ..."; the comm may
// hold ')' and blanks, so it ends at the last ')'.
bool ParseProcStat(std::string_view stat, ProcStat* out) {
  const size_t lp = stat.find('('), rp = stat.rfind(')');
  if (lp == std::string_view::npos || rp == std::string_view::npos || rp < lp) return false;
  out->comm.assign(stat.substr(lp + 1, rp - lp - 1));
  out->state = rp + 2 < stat.size() ? stat[rp + 2] : '?';
  out->flags = 0;
  // After ") ": state, ppid, pgrp, session, tty_nr, tpgid, flags.
  size_t p = rp + 2;
  for (int field = 0; field < 6 && p < stat.size(); field++) {
    p = stat.find(' ', p);
    if (p == std::string_view::npos) return true;
    p++;
  }
  if (p >= stat.size()) return true;
  uint64_t flags = 0;
  for (; p < stat.size() && stat[p] >= '0' && stat[p] <= '9'; ++p) {
    const uint64_t d = static_cast<uint64_t>(stat[p] - '0');
    if (flags > (UINT64_MAX - d) / 10) return true;
    flags = flags * 10 + d;
  }
  out->flags = flags;
  return true;
}

// /proc/<pid>/status: whether SIGKILL is pending (ShdPnd: or SigPnd:, hexadecimal masks).
bool SigKillPending(std::string_view status) {
  constexpr uint64_t kSigKillBit = 1ULL << (9 - 1);
  for (std::string_view key : {std::string_view("ShdPnd:"), std::string_view("SigPnd:")}) {
    const size_t at = status.find(key);
    if (at == std::string_view::npos) continue;
    size_t i = at + key.size();
    while (i < status.size() && (status[i] == ' ' || status[i] == '\t')) ++i;
    // The mask is 64 bits in hexadecimal; a longer one keeps its low 64 bits.
    uint64_t mask = 0;
    for (; i < status.size() && isxdigit(static_cast<unsigned char>(status[i])); ++i) {
      const char c = status[i];
      mask = (mask << 4) | static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (mask & kSigKillBit) return true;
  }
  return false;
}

// The memory controller's cgroup path in a /proc/<pid>/cgroup text ("" if none): the v1
// line naming `memory`, else the unified (v2) line's path.
std::string MemoryCgroupFromText(std::string_view text) {
  std::string_view unified;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view ctrls = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string_view path = line.substr(c2 + 1);
    if (ctrls.empty()) {
      unified = path;
      continue;
    }
    size_t p = 0;
    while (p <= ctrls.size()) {
      size_t comma = ctrls.find(',', p);
      if (comma == std::string_view::npos) comma = ctrls.size();
      if (ctrls.substr(p, comma - p) == "memory") return std::string(path);
      p = comma + 1;
    }
  }
  return std::string(unified);
}

namespace {

std::vector<int32_t> ReadPids(const std::string& file) {
  std::string text;
  int err = 0;
  if (!ReadSmallFile(file, &text, &err)) return {};
  return ParsePids(text);
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
  ProcStat ps;
  if (!ParseProcStat(stat, &ps)) return false;
  info->comm = std::move(ps.comm);
  constexpr unsigned long long kPfExiting = 0x4, kPfSignaled = 0x400;
  bool dying = ps.state == 'Z' || ps.state == 'X' || (ps.flags & (kPfExiting | kPfSignaled)) != 0;
  if (!dying && ReadSmallFile(base + "/status", &status, &err)) dying = SigKillPending(status);
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
  Victim victim;
  for (int records = 0; records < 200000; records++) {
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0) {
      if (errno == EPIPE || errno == EINTR) continue;
      break;
    }
    if (n == 0) break;
    switch (ClassifyKmsgKillRecord(std::string_view(buf, static_cast<size_t>(n)), dir, &victim)) {
      case KmsgKill::kKilledProcess:
        if (!reportOpen) found = false;  // a kill without its report: ours cannot be told apart
        reportOpen = false;
        continue;
      case KmsgKill::kReport:
        reportOpen = true;
        continue;
      case KmsgKill::kOther:
        continue;
      case KmsgKill::kReportOfDir:
        reportOpen = true;
        *out = victim;
        break;
    }
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
  return MemoryCgroupFromText(text);
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
