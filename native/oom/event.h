// What every OOM backend hands to the watcher thread: events, collected in batches that the
// watcher posts to JS through its thread-safe function.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../bpf/oom_victim.h"

namespace kts {
namespace oom {

struct Victim {
  int32_t pid = 0;
  std::string comm;
};

// kMemoryThreshold: a memory usage threshold was crossed (threshold_backend.h).
// kMemoryEvents: memory.events counters moved; kMemoryPressure: a PSI trigger fired;
// kWatchLost: one of those two watches ended on the kernel's side (pressure_backend.h).
enum class EventKind : uint8_t { kOomKill, kOom, kRemoved, kKmsg, kError, kMemoryThreshold, kMemoryEvents, kMemoryPressure, kWatchLost };
// kWatcher: the watcher itself (its thread failed), not one of the mechanisms.
enum class SourceKind : uint8_t { kEventfd, kInotify, kEbpf, kKmsg, kWatcher, kPsi };

// One "name value" line of a counter file (memory.events); delta: its rise since the last reading.
struct Counter {
  std::string name;
  uint64_t value = 0;
  uint64_t delta = 0;
};

const char* KindName(EventKind k);
const char* SourceName(SourceKind s);

struct Event {
  EventKind kind = EventKind::kError;
  SourceKind source = SourceKind::kWatcher;
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
  bool fatal = false;
  uint64_t kernelTimeUs = 0;
  uint64_t notifiedNs = 0;
  uint64_t observedNs = 0;
  std::vector<Counter> counters;
};

using Batch = std::vector<Event>;

}  // namespace oom
}  // namespace kts
