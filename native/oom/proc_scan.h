// File and /proc reading shared by the OOM backends: small cgroup files, the processes of a
// cgroup and whether they are dying, and the kernel log's last word on a cgroup's victim.
// Scans run on the watcher thread with no lock held (a kmsg scan reads up to 200k records).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "event.h"

namespace kts {
namespace oom {

uint64_t MonoNs();

// open/read/close of a small file; false with *err = errno on failure.
bool ReadSmallFile(const std::string& path, std::string* out, int* err);

// The value of a "key value" line (memory.events, memory.oom_control).
bool FindKeyValue(std::string_view text, std::string_view key, uint64_t* value);

// Parsers of the /proc and cgroup texts below, pure (fuzzed by native/fuzz/).
std::vector<int32_t> ParsePids(std::string_view text);
struct ProcStat {
  std::string comm;
  char state = '?';
  uint64_t flags = 0;
};
bool ParseProcStat(std::string_view stat, ProcStat* out);
bool SigKillPending(std::string_view status);
std::string MemoryCgroupFromText(std::string_view text);

// The processes of a cgroup dir (cgroup.procs) with their comm.
std::vector<Victim> SnapshotProcs(const std::string& dir);

// The victims of a confirmed kill: processes of the cgroup dying now, plus those of the
// snapshot taken when the OOM started that have left the cgroup since.
std::vector<Victim> FindVictims(const std::string& dir, const std::vector<Victim>& snapshot);

// The newest kernel-log kill naming this cgroup, when nothing later makes it ambiguous.
bool FindVictimInKmsg(const std::string& dir, Victim* out);

// The memory controller's cgroup path of a process from /proc/<pid>/cgroup ("" if unknown).
std::string MemoryCgroupOf(int32_t pid);

std::string ErrnoName(int err);

// Marks a scan (file and /proc reads for one event) for the test hooks: while scans are held,
// a scan waits here, so a test can act while one is in progress.
class ScanScope {
 public:
  ScanScope();
  ~ScanScope();
  ScanScope(const ScanScope&) = delete;
  ScanScope& operator=(const ScanScope&) = delete;
};

// Test hooks: hold (or release) every scan at its start; scans in progress.
void HoldScans(bool hold);
uint32_t ScansInFlight();

}  // namespace oom
}  // namespace kts
