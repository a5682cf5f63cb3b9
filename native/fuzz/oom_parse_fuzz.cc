// libFuzzer harness: the OOM watcher's text parsers (native/oom/proc_scan.cc, kmsg_record.h) on
// arbitrary input: cgroup.procs, /proc/<pid>/stat, /proc/<pid>/status, /proc/<pid>/cgroup,
// memory.events "key value" lines (both readers) and /dev/kmsg records. Input: byte 0 picks the parser, the
// rest is the text (for the kmsg victim scan: the cgroup dir, a NUL, the record). Beyond the
// sanitizers' checks: nothing parsed is longer than its input, pids are positive.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../oom/kmsg_record.h"
#include "../oom/pressure_backend.h"
#include "../oom/proc_scan.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "oom_parse_fuzz: invariant broken: %s\n", what);
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kts::oom;
  if (size < 1) return 0;
  // The text in a buffer of its own size, so a read past its end is caught.
  const size_t n = size - 1;
  char* buf = static_cast<char*>(malloc(n ? n : 1));
  if (n) memcpy(buf, data + 1, n);
  const std::string_view text(buf, n);

  switch (data[0] % 9) {
    case 0: {
      const std::vector<int32_t> pids = ParsePids(text);
      Check(pids.size() <= n, "more pids than bytes");
      for (int32_t pid : pids) Check(pid >= 0, "negative pid");
      break;
    }
    case 1: {
      ProcStat ps;
      if (ParseProcStat(text, &ps)) Check(ps.comm.size() < n, "comm longer than stat");
      break;
    }
    case 2:
      (void)SigKillPending(text);
      break;
    case 3:
      Check(MemoryCgroupFromText(text).size() <= n, "cgroup path longer than the text");
      break;
    case 4: {
      // memory.events / memory.oom_control as the eventfd and inotify backends read them: a value
      // found is the decimal digits of some "key digits" line, never wrapped past 64 bits
      const std::string lines = "\n" + std::string(text);
      for (const char* key : {"oom_kill", "oom", "max", "low"}) {
        uint64_t v = 0;
        if (!FindKeyValue(text, key, &v)) continue;
        bool found = false;
        const std::string k = "\n" + std::string(key) + " ";
        for (size_t at = lines.find(k); !found && at != std::string::npos; at = lines.find(k, at + 1)) {
          uint64_t w = 0;
          bool overflow = false;
          size_t i = at + k.size();
          for (; i < lines.size() && lines[i] >= '0' && lines[i] <= '9'; ++i) {
            overflow |= __builtin_mul_overflow(w, 10u, &w) || __builtin_add_overflow(w, static_cast<uint64_t>(lines[i] - '0'), &w);
          }
          found = !overflow && i > at + k.size() && w == v;
        }
        Check(found, "a key's value is not its line's digits (wrapped past 64 bits?)");
      }
      break;
    }
    case 5: {
      std::string msg;
      uint64_t t = 0;
      if (ParseKmsgOomRecord(text, &msg, &t)) Check(msg.size() < n, "message longer than record");
      break;
    }
    case 6: {
      const size_t nul = text.find('\0');
      const std::string_view dir = nul == std::string_view::npos ? std::string_view() : text.substr(0, nul);
      const std::string_view rec = nul == std::string_view::npos ? text : text.substr(nul + 1);
      Victim v;
      if (ClassifyKmsgKillRecord(rec, dir, &v) == KmsgKill::kReportOfDir) {
        Check(v.pid > 0, "victim pid not positive");
        Check(v.comm.size() < rec.size(), "victim comm longer than record");
      }
      break;
    }
    case 7: {
      // memory.events as the pressure backend reads it: every counter is its line's decimal value
      std::vector<Counter> counters;
      (void)ParseCounters(std::string(text), &counters);
      const std::string lines = "\n" + std::string(text);
      for (const Counter& c : counters) {
        // some whole line "name digits" whose digits are the value, without wrapping past 64 bits
        bool found = false;
        const std::string key = "\n" + c.name + " ";
        for (size_t at = lines.find(key); !found && at != std::string::npos; at = lines.find(key, at + 1)) {
          uint64_t v = 0;
          bool overflow = false;
          size_t i = at + key.size();
          for (; i < lines.size() && lines[i] >= '0' && lines[i] <= '9'; ++i) {
            overflow |= __builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, static_cast<uint64_t>(lines[i] - '0'), &v);
          }
          found = !overflow && i < lines.size() && lines[i] == '\n' && i > at + key.size() && v == c.value;
        }
        Check(found, "a counter is not its line's value (wrapped past 64 bits?)");
      }
      break;
    }
    case 8: {
      // a kill whose victim named itself: 4 bytes of pid, then up to 15 bytes of comm
      if (n < 4) break;
      const int32_t pid = 1 + static_cast<int32_t>((static_cast<uint32_t>(text[0] & 0x3f) << 16 | static_cast<uint8_t>(text[1]) << 8 | static_cast<uint8_t>(text[2])));
      std::string comm(text.substr(4, 15));
      for (char& c : comm) if (c == '\n' || c == '\0') c = '_';
      const std::string rec = "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/k/p,task_memcg=/k/p/c,task=" +
                              comm + ",pid=" + std::to_string(pid) + ",uid=0\n";
      Victim v;
      Check(ClassifyKmsgKillRecord(rec, "/sys/fs/cgroup/memory/k/p/c", &v) == KmsgKill::kReportOfDir, "a kill of the dir not found");
      Check(v.pid == pid, "the victim's pid taken from its comm");
      Check(v.comm == comm, "the victim's comm cut short");
      break;
    }
  }
  free(buf);
  return 0;
}
