// Parsing of one /dev/kmsg record ("priority,sequence,timestamp_us,flags;message\n..."), pure
// (no I/O), shared by the kmsg backend and the kernel-log victim scan, and fuzzed by
// native/fuzz/.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "event.h"

namespace kts {
namespace oom {

// The message of a record (its first line after ';'); false when the record has no ';'.
inline bool KmsgMessage(std::string_view rec, std::string_view* msg) {
  const size_t semi = rec.find(';');
  if (semi == std::string_view::npos) return false;
  std::string_view m = rec.substr(semi + 1);
  const size_t nl = m.find('\n');
  if (nl != std::string_view::npos) m = m.substr(0, nl);
  *msg = m;
  return true;
}

// A record the kmsg backend passes on: one of the kernel's OOM lines. *text = its message,
// *time_us = the prefix's timestamp (0 when the prefix has none).
inline bool ParseKmsgOomRecord(std::string_view rec, std::string* text, uint64_t* time_us) {
  std::string_view msg;
  if (!KmsgMessage(rec, &msg)) return false;
  if (msg.find("oom-kill:") == std::string_view::npos && msg.find("Killed process") == std::string_view::npos &&
      msg.find("invoked oom-killer") == std::string_view::npos) {
    return false;
  }
  text->assign(msg.data(), msg.size());
  // Prefix: priority,sequence,timestamp_us,flags
  const std::string_view head = rec.substr(0, rec.find(';'));
  const size_t c1 = head.find(',');
  const size_t c2 = c1 == std::string_view::npos ? c1 : head.find(',', c1 + 1);
  uint64_t t = 0;
  if (c2 != std::string_view::npos) {
    for (size_t i = c2 + 1; i < head.size() && head[i] >= '0' && head[i] <= '9'; ++i) {
      const uint64_t d = static_cast<uint64_t>(head[i] - '0');
      if (t > (UINT64_MAX - d) / 10) {
        t = 0;  // not a timestamp the kernel prints
        break;
      }
      t = t * 10 + d;
    }
  }
  *time_us = t;
  return true;
}

enum class KmsgKill : uint8_t {
  kOther,          // not a line of an OOM kill
  kKilledProcess,  // "Killed process N": the end of a kill (logged even when its report is not)
  kReport,         // an "oom-kill:" report line that does not name `dir`'s cgroup (or is malformed)
  kReportOfDir,    // an "oom-kill:" report naming `dir`'s cgroup: *victim holds its task and pid
};

// Classifies a record for the kernel-log victim scan: "oom-kill:...,task_memcg=<path>,task=<comm>,
// pid=<pid>" names the cgroup by its path in the hierarchy, `dir` is that path under a mount.
inline KmsgKill ClassifyKmsgKillRecord(std::string_view rec, std::string_view dir, Victim* victim) {
  std::string_view line;
  if (!KmsgMessage(rec, &line)) return KmsgKill::kOther;
  // Both lines hold the victim's comm, which any process may set to "Killed process " or
  // "oom-kill:": a report is a line that starts with "oom-kill:", a kill one that says
  // "Killed process " before its comm's '('.
  if (line.substr(0, 9) != "oom-kill:") {
    const size_t kp = line.find("Killed process ");
    return kp != std::string_view::npos && kp < line.find('(') ? KmsgKill::kKilledProcess : KmsgKill::kOther;
  }
  const size_t m = line.find(",task_memcg=");
  const size_t t = line.find(",task=", m == std::string_view::npos ? 0 : m);
  // The task is the victim's comm, which any process may set to ",pid=1": the pid is the last
  // ",pid=" of the line (the kernel prints ",pid=<pid>,uid=<uid>" last).
  const size_t p = line.rfind(",pid=");
  if (m == std::string_view::npos || t == std::string_view::npos || p == std::string_view::npos || p < t + 6) return KmsgKill::kReport;
  const std::string_view memcg = line.substr(m + 12, t - m - 12);
  if (memcg.size() < 2 || dir.size() < memcg.size() || dir.substr(dir.size() - memcg.size()) != memcg) {
    return KmsgKill::kReport;
  }
  // The pid: decimal digits up to the next ',' or the end, 1..INT32_MAX.
  int64_t pid = 0;
  size_t i = p + 5;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
    pid = pid * 10 + (line[i] - '0');
    if (pid > INT32_MAX) return KmsgKill::kReport;
  }
  if (i == p + 5 || pid == 0 || (i < line.size() && line[i] != ',')) return KmsgKill::kReport;
  victim->comm.assign(line.substr(t + 6, p - t - 6));
  victim->pid = static_cast<int32_t>(pid);
  return KmsgKill::kReportOfDir;
}

}  // namespace oom
}  // namespace kts
