// Batch cgroup counter reader: one call reads every file of a whole list of cgroups and
// fills flat arrays (values, state, status, device rows). The tables below mirror
// src/stats/cgroup-sample.ts; the TS loader compares fieldNames() with its own list.
// KTS_CGROUP_PARSE_ONLY: the parsers and the reader without N-API, for the fuzz harness
// (native/fuzz/), which includes this file.
#ifndef KTS_CGROUP_PARSE_ONLY
#include "cgroup_reader.h"
#endif

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kts {
namespace {

// X(id, name): the field order of a cgroup's row; names as in CGROUP_FIELD_NAMES.
#define KTS_CGROUP_FIELDS(X)                                                 \
  X(kCpuUsageUsec, "cpu.stat:usage_usec")                                    \
  X(kCpuUserUsec, "cpu.stat:user_usec")                                      \
  X(kCpuSystemUsec, "cpu.stat:system_usec")                                  \
  X(kCpuNrPeriods, "cpu.stat:nr_periods")                                    \
  X(kCpuNrThrottled, "cpu.stat:nr_throttled")                                \
  X(kCpuThrottledUsec, "cpu.stat:throttled_usec")                            \
  X(kCpuThrottledTime, "cpu.stat:throttled_time")                            \
  X(kCpuacctUsage, "cpuacct.usage")                                          \
  X(kCpuacctUserNs, "cpuacct.stat:user_ns")                                  \
  X(kCpuacctSystemNs, "cpuacct.stat:system_ns")                              \
  X(kMemCurrent, "memory.current")                                           \
  X(kMemMax, "memory.max")                                                   \
  X(kMemSwapCurrent, "memory.swap.current")                                  \
  X(kMsAnon, "memory.stat:anon")                                             \
  X(kMsFile, "memory.stat:file")                                             \
  X(kMsKernel, "memory.stat:kernel")                                         \
  X(kMsKernelStack, "memory.stat:kernel_stack")                              \
  X(kMsPagetables, "memory.stat:pagetables")                                 \
  X(kMsSock, "memory.stat:sock")                                             \
  X(kMsShmem, "memory.stat:shmem")                                           \
  X(kMsFileMapped, "memory.stat:file_mapped")                                \
  X(kMsFileDirty, "memory.stat:file_dirty")                                  \
  X(kMsFileWriteback, "memory.stat:file_writeback")                          \
  X(kMsSwapcached, "memory.stat:swapcached")                                 \
  X(kMsAnonThp, "memory.stat:anon_thp")                                      \
  X(kMsInactiveAnon, "memory.stat:inactive_anon")                            \
  X(kMsActiveAnon, "memory.stat:active_anon")                                \
  X(kMsInactiveFile, "memory.stat:inactive_file")                            \
  X(kMsActiveFile, "memory.stat:active_file")                                \
  X(kMsUnevictable, "memory.stat:unevictable")                               \
  X(kMsSlabReclaimable, "memory.stat:slab_reclaimable")                      \
  X(kMsSlabUnreclaimable, "memory.stat:slab_unreclaimable")                  \
  X(kMsSlab, "memory.stat:slab")                                             \
  X(kMsWorkingsetRefaultAnon, "memory.stat:workingset_refault_anon")         \
  X(kMsWorkingsetRefaultFile, "memory.stat:workingset_refault_file")         \
  X(kMsPgfault, "memory.stat:pgfault")                                       \
  X(kMsPgmajfault, "memory.stat:pgmajfault")                                 \
  X(kMeLow, "memory.events:low")                                             \
  X(kMeHigh, "memory.events:high")                                           \
  X(kMeMax, "memory.events:max")                                             \
  X(kMeOom, "memory.events:oom")                                             \
  X(kMeOomKill, "memory.events:oom_kill")                                    \
  X(kMemUsageInBytes, "memory.usage_in_bytes")                               \
  X(kMemLimitInBytes, "memory.limit_in_bytes")                               \
  X(kMsTotalCache, "memory.stat:total_cache")                                \
  X(kMsTotalRss, "memory.stat:total_rss")                                    \
  X(kMsTotalRssHuge, "memory.stat:total_rss_huge")                           \
  X(kMsTotalShmem, "memory.stat:total_shmem")                                \
  X(kMsTotalMappedFile, "memory.stat:total_mapped_file")                     \
  X(kMsTotalDirty, "memory.stat:total_dirty")                                \
  X(kMsTotalWriteback, "memory.stat:total_writeback")                        \
  X(kMsTotalSwap, "memory.stat:total_swap")                                  \
  X(kMsTotalPgfault, "memory.stat:total_pgfault")                            \
  X(kMsTotalPgmajfault, "memory.stat:total_pgmajfault")                      \
  X(kMsTotalInactiveAnon, "memory.stat:total_inactive_anon")                 \
  X(kMsTotalActiveAnon, "memory.stat:total_active_anon")                     \
  X(kMsTotalInactiveFile, "memory.stat:total_inactive_file")                 \
  X(kMsTotalActiveFile, "memory.stat:total_active_file")                     \
  X(kMsTotalUnevictable, "memory.stat:total_unevictable")                    \
  X(kMsHierarchicalMemoryLimit, "memory.stat:hierarchical_memory_limit")     \
  X(kOomKill, "memory.oom_control:oom_kill")                                 \
  X(kUnderOom, "memory.oom_control:under_oom")                               \
  X(kPidsCurrent, "pids.current")                                            \
  X(kPidsMax, "pids.max")                                                    \
  X(kIoRbytes, "io.stat:rbytes")                                             \
  X(kIoWbytes, "io.stat:wbytes")                                             \
  X(kIoRios, "io.stat:rios")                                                 \
  X(kIoWios, "io.stat:wios")                                                 \
  X(kIoDbytes, "io.stat:dbytes")                                             \
  X(kIoDios, "io.stat:dios")                                                 \
  X(kBlkioBytesRead, "blkio.throttle.io_service_bytes_recursive:read")       \
  X(kBlkioBytesWrite, "blkio.throttle.io_service_bytes_recursive:write")     \
  X(kBlkioServicedRead, "blkio.throttle.io_serviced_recursive:read")         \
  X(kBlkioServicedWrite, "blkio.throttle.io_serviced_recursive:write")       \
  X(kCpuPsiSomeAvg10, "cpu.pressure:some_avg10")                             \
  X(kCpuPsiSomeAvg60, "cpu.pressure:some_avg60")                             \
  X(kCpuPsiSomeAvg300, "cpu.pressure:some_avg300")                           \
  X(kCpuPsiSomeTotal, "cpu.pressure:some_total")                             \
  X(kCpuPsiFullAvg10, "cpu.pressure:full_avg10")                             \
  X(kCpuPsiFullAvg60, "cpu.pressure:full_avg60")                             \
  X(kCpuPsiFullAvg300, "cpu.pressure:full_avg300")                           \
  X(kCpuPsiFullTotal, "cpu.pressure:full_total")                             \
  X(kMemPsiSomeAvg10, "memory.pressure:some_avg10")                          \
  X(kMemPsiSomeAvg60, "memory.pressure:some_avg60")                          \
  X(kMemPsiSomeAvg300, "memory.pressure:some_avg300")                        \
  X(kMemPsiSomeTotal, "memory.pressure:some_total")                          \
  X(kMemPsiFullAvg10, "memory.pressure:full_avg10")                          \
  X(kMemPsiFullAvg60, "memory.pressure:full_avg60")                          \
  X(kMemPsiFullAvg300, "memory.pressure:full_avg300")                        \
  X(kMemPsiFullTotal, "memory.pressure:full_total")                          \
  X(kIoPsiSomeAvg10, "io.pressure:some_avg10")                               \
  X(kIoPsiSomeAvg60, "io.pressure:some_avg60")                               \
  X(kIoPsiSomeAvg300, "io.pressure:some_avg300")                             \
  X(kIoPsiSomeTotal, "io.pressure:some_total")                               \
  X(kIoPsiFullAvg10, "io.pressure:full_avg10")                               \
  X(kIoPsiFullAvg60, "io.pressure:full_avg60")                               \
  X(kIoPsiFullAvg300, "io.pressure:full_avg300")                             \
  X(kIoPsiFullTotal, "io.pressure:full_total")

enum Field : uint16_t {
#define KTS_FIELD_ID(id, name) id,
  KTS_CGROUP_FIELDS(KTS_FIELD_ID)
#undef KTS_FIELD_ID
      kFieldCount
};

constexpr const char* kFieldNames[] = {
#define KTS_FIELD_NAME(id, name) name,
    KTS_CGROUP_FIELDS(KTS_FIELD_NAME)
#undef KTS_FIELD_NAME
};
static_assert(sizeof(kFieldNames) / sizeof(kFieldNames[0]) == kFieldCount, "field table");

// Path table slots per cgroup, in CGROUP_SLOTS order.
enum Slot : uint8_t { kUnified, kCpu, kCpuacct, kMemory, kPids, kBlkio, kSlotCount };

enum State : uint8_t { kAbsent = 0, kPresent = 1, kMaxValue = 2 };
enum Status : uint8_t { kOk = 0, kMissing = 1 };
constexpr int kDeviceColumns = 4;  // rbytes, wbytes, rios, wios

enum class Parse : uint8_t { kSingle, kKeyed, kTicks, kPsi, kIoStat, kBlkio };

struct Key {
  std::string_view key;
  Field field;
};

// Open-addressing index of a key table (slot = key index + 1, 0 = empty): a keyed line whose
// key is not the one the cursor expects is found with one hash instead of a scan of the table.
constexpr size_t kKeySlots = 64;
struct KeyIndex {
  uint8_t slot[kKeySlots];
};

constexpr uint32_t KeyHash(const char* k, size_t n) {
  return (static_cast<uint32_t>(n) * 37u + static_cast<unsigned char>(k[0]) * 7u +
          static_cast<unsigned char>(k[n - 1]) * 131u + static_cast<unsigned char>(k[n / 2]) * 17u) &
         (kKeySlots - 1);
}

template <size_t N>
constexpr KeyIndex MakeKeyIndex(const Key (&keys)[N]) {
  static_assert(N < kKeySlots / 2, "key table too large for its index");
  KeyIndex index{};
  for (size_t i = 0; i < N; ++i) {
    uint32_t h = KeyHash(keys[i].key.data(), keys[i].key.size());
    while (index.slot[h] != 0) h = (h + 1) & (kKeySlots - 1);
    index.slot[h] = static_cast<uint8_t>(i + 1);
  }
  return index;
}

struct FileSpec {
  const char* name;
  Slot slot;
  Parse parse;
  Field field;  // single: the field; psi/iostat/blkio: the first of consecutive fields
  const Key* keys;
  uint8_t key_count;
  const KeyIndex* index;
  uint8_t device_column;  // blkio: column of its Read line (Write is the next)
};

constexpr Key kV2CpuStat[] = {
    {"usage_usec", kCpuUsageUsec},     {"user_usec", kCpuUserUsec},
    {"system_usec", kCpuSystemUsec},   {"nr_periods", kCpuNrPeriods},
    {"nr_throttled", kCpuNrThrottled}, {"throttled_usec", kCpuThrottledUsec},
};
// In the kernel's printing order, so the cursor lookup usually hits at once.
constexpr Key kV2MemoryStat[] = {
    {"anon", kMsAnon},
    {"file", kMsFile},
    {"kernel", kMsKernel},
    {"kernel_stack", kMsKernelStack},
    {"pagetables", kMsPagetables},
    {"sock", kMsSock},
    {"shmem", kMsShmem},
    {"file_mapped", kMsFileMapped},
    {"file_dirty", kMsFileDirty},
    {"file_writeback", kMsFileWriteback},
    {"swapcached", kMsSwapcached},
    {"anon_thp", kMsAnonThp},
    {"inactive_anon", kMsInactiveAnon},
    {"active_anon", kMsActiveAnon},
    {"inactive_file", kMsInactiveFile},
    {"active_file", kMsActiveFile},
    {"unevictable", kMsUnevictable},
    {"slab_reclaimable", kMsSlabReclaimable},
    {"slab_unreclaimable", kMsSlabUnreclaimable},
    {"slab", kMsSlab},
    {"workingset_refault_anon", kMsWorkingsetRefaultAnon},
    {"workingset_refault_file", kMsWorkingsetRefaultFile},
    {"pgfault", kMsPgfault},
    {"pgmajfault", kMsPgmajfault},
};
constexpr Key kV2MemoryEvents[] = {
    {"low", kMeLow}, {"high", kMeHigh}, {"max", kMeMax}, {"oom", kMeOom}, {"oom_kill", kMeOomKill},
};
constexpr Key kV1CpuStat[] = {
    {"nr_periods", kCpuNrPeriods},
    {"nr_throttled", kCpuNrThrottled},
    {"throttled_time", kCpuThrottledTime},
};
constexpr Key kV1CpuacctStat[] = {{"user", kCpuacctUserNs}, {"system", kCpuacctSystemNs}};
constexpr Key kV1MemoryStat[] = {
    {"hierarchical_memory_limit", kMsHierarchicalMemoryLimit},
    {"total_cache", kMsTotalCache},
    {"total_rss", kMsTotalRss},
    {"total_rss_huge", kMsTotalRssHuge},
    {"total_shmem", kMsTotalShmem},
    {"total_mapped_file", kMsTotalMappedFile},
    {"total_dirty", kMsTotalDirty},
    {"total_writeback", kMsTotalWriteback},
    {"total_swap", kMsTotalSwap},
    {"total_pgfault", kMsTotalPgfault},
    {"total_pgmajfault", kMsTotalPgmajfault},
    {"total_inactive_anon", kMsTotalInactiveAnon},
    {"total_active_anon", kMsTotalActiveAnon},
    {"total_inactive_file", kMsTotalInactiveFile},
    {"total_active_file", kMsTotalActiveFile},
    {"total_unevictable", kMsTotalUnevictable},
};
constexpr Key kV1OomControl[] = {{"under_oom", kUnderOom}, {"oom_kill", kOomKill}};

constexpr KeyIndex kV2CpuStatIndex = MakeKeyIndex(kV2CpuStat);
constexpr KeyIndex kV2MemoryStatIndex = MakeKeyIndex(kV2MemoryStat);
constexpr KeyIndex kV2MemoryEventsIndex = MakeKeyIndex(kV2MemoryEvents);
constexpr KeyIndex kV1CpuStatIndex = MakeKeyIndex(kV1CpuStat);
constexpr KeyIndex kV1CpuacctStatIndex = MakeKeyIndex(kV1CpuacctStat);
constexpr KeyIndex kV1MemoryStatIndex = MakeKeyIndex(kV1MemoryStat);
constexpr KeyIndex kV1OomControlIndex = MakeKeyIndex(kV1OomControl);

#define KTS_KEYS(table) table, static_cast<uint8_t>(sizeof(table) / sizeof(table[0])), &table##Index
#define KTS_NO_KEYS nullptr, 0, nullptr

constexpr FileSpec kV2Files[] = {
    {"cpu.stat", kUnified, Parse::kKeyed, kFieldCount, KTS_KEYS(kV2CpuStat), 0},
    {"memory.current", kUnified, Parse::kSingle, kMemCurrent, KTS_NO_KEYS, 0},
    {"memory.max", kUnified, Parse::kSingle, kMemMax, KTS_NO_KEYS, 0},
    {"memory.stat", kUnified, Parse::kKeyed, kFieldCount, KTS_KEYS(kV2MemoryStat), 0},
    {"memory.events", kUnified, Parse::kKeyed, kFieldCount, KTS_KEYS(kV2MemoryEvents), 0},
    {"memory.swap.current", kUnified, Parse::kSingle, kMemSwapCurrent, KTS_NO_KEYS, 0},
    {"pids.current", kUnified, Parse::kSingle, kPidsCurrent, KTS_NO_KEYS, 0},
    {"pids.max", kUnified, Parse::kSingle, kPidsMax, KTS_NO_KEYS, 0},
    {"io.stat", kUnified, Parse::kIoStat, kIoRbytes, KTS_NO_KEYS, 0},
    {"cpu.pressure", kUnified, Parse::kPsi, kCpuPsiSomeAvg10, KTS_NO_KEYS, 0},
    {"memory.pressure", kUnified, Parse::kPsi, kMemPsiSomeAvg10, KTS_NO_KEYS, 0},
    {"io.pressure", kUnified, Parse::kPsi, kIoPsiSomeAvg10, KTS_NO_KEYS, 0},
};

constexpr FileSpec kV1Files[] = {
    {"cpu.stat", kCpu, Parse::kKeyed, kFieldCount, KTS_KEYS(kV1CpuStat), 0},
    {"cpuacct.usage", kCpuacct, Parse::kSingle, kCpuacctUsage, KTS_NO_KEYS, 0},
    {"cpuacct.stat", kCpuacct, Parse::kTicks, kFieldCount, KTS_KEYS(kV1CpuacctStat), 0},
    {"memory.usage_in_bytes", kMemory, Parse::kSingle, kMemUsageInBytes, KTS_NO_KEYS, 0},
    {"memory.limit_in_bytes", kMemory, Parse::kSingle, kMemLimitInBytes, KTS_NO_KEYS, 0},
    {"memory.stat", kMemory, Parse::kKeyed, kFieldCount, KTS_KEYS(kV1MemoryStat), 0},
    {"memory.oom_control", kMemory, Parse::kKeyed, kFieldCount, KTS_KEYS(kV1OomControl), 0},
    {"pids.current", kPids, Parse::kSingle, kPidsCurrent, KTS_NO_KEYS, 0},
    {"pids.max", kPids, Parse::kSingle, kPidsMax, KTS_NO_KEYS, 0},
    {"blkio.throttle.io_service_bytes_recursive", kBlkio, Parse::kBlkio, kBlkioBytesRead, KTS_NO_KEYS, 0},
    {"blkio.throttle.io_serviced_recursive", kBlkio, Parse::kBlkio, kBlkioServicedRead, KTS_NO_KEYS, 2},
    {"cpu.pressure", kUnified, Parse::kPsi, kCpuPsiSomeAvg10, KTS_NO_KEYS, 0},
    {"memory.pressure", kUnified, Parse::kPsi, kMemPsiSomeAvg10, KTS_NO_KEYS, 0},
    {"io.pressure", kUnified, Parse::kPsi, kIoPsiSomeAvg10, KTS_NO_KEYS, 0},
};
#undef KTS_KEYS
#undef KTS_NO_KEYS

uint64_t g_clock_ticks = 100;

struct DeviceRow {
  uint32_t cgroup;
  uint32_t major;
  uint32_t minor;
  uint64_t v[kDeviceColumns];
};

// The baton: inputs parsed on the main thread, outputs written by the worker into
// memory owned by JS ArrayBuffers that are not visible to JS until the read is done.
struct CgroupBatch {
  uint32_t count = 0;
  std::vector<uint8_t> kinds;
  std::string paths;               // kSlotCount '\0'-terminated entries per cgroup
  std::vector<uint32_t> entry;     // offset of each entry in paths
  std::vector<uint32_t> entry_len; // its length
  uint8_t* status = nullptr;
  uint64_t* values = nullptr;
  uint8_t* state = nullptr;
  std::vector<DeviceRow> devices;
  bool keep_open = false;  // read through the kept-open descriptor table
  bool recheck_absent = false;  // open again the files the table remembers as absent
};

// Runs a batch, through the descriptor table when it asks for it.
void RunBatch(CgroupBatch& batch);

inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }
inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// [p, end) as a whole: `max` or an unsigned decimal that fits in 64 bits.
State ParseValue(const char* p, const char* end, uint64_t* out) {
  if (end - p == 3 && p[0] == 'm' && p[1] == 'a' && p[2] == 'x') {
    *out = UINT64_MAX;
    return kMaxValue;
  }
  if (p == end) return kAbsent;
  uint64_t v = 0;
  // Up to 19 digits cannot overflow 64 bits: no check per digit.
  const char* safe_end = end - p <= 19 ? end : p + 19;
  for (; p < safe_end; ++p) {
    const unsigned d = static_cast<unsigned>(static_cast<unsigned char>(*p)) - '0';
    if (d > 9) return kAbsent;
    v = v * 10 + d;
  }
  for (; p < end; ++p) {
    const unsigned d = static_cast<unsigned>(static_cast<unsigned char>(*p)) - '0';
    if (d > 9) return kAbsent;
    if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, d, &v)) return kAbsent;
  }
  *out = v;
  return kPresent;
}

// [p, end) as `digits[.digits]` in hundredths (PSI averages print two decimals).
bool ParseHundredths(const char* p, const char* end, uint64_t* out) {
  const char* dot = static_cast<const char*>(memchr(p, '.', end - p));
  const char* int_end = dot ? dot : end;
  uint64_t whole;
  if (ParseValue(p, int_end, &whole) != kPresent) return false;
  uint64_t frac = 0;
  if (dot) {
    const char* f = dot + 1;
    if (f == end) return false;
    for (const char* q = f; q < end; ++q)
      if (static_cast<unsigned>(static_cast<unsigned char>(*q) - '0') > 9u) return false;
    frac = static_cast<uint64_t>(f[0] - '0') * 10 + (f + 1 < end ? static_cast<uint64_t>(f[1] - '0') : 0);
  }
  if (whole > (UINT64_MAX - frac) / 100) return false;
  *out = whole * 100 + frac;
  return true;
}

// `MAJ:MIN` with both parts fitting in 32 bits.
bool ParseDevice(const char* p, const char* end, uint32_t* major, uint32_t* minor) {
  const char* colon = static_cast<const char*>(memchr(p, ':', end - p));
  if (!colon) return false;
  uint64_t a, b;
  if (ParseValue(p, colon, &a) != kPresent || ParseValue(colon + 1, end, &b) != kPresent) return false;
  if (a > UINT32_MAX || b > UINT32_MAX) return false;
  *major = static_cast<uint32_t>(a);
  *minor = static_cast<uint32_t>(b);
  return true;
}

// Kept-open descriptors of cgroup files, shared by every batch that asks for them.
//
// A cgroup file re-read with pread at offset 0 regenerates its content, so a descriptor kept
// open gives fresh figures for a third of the cost of open/read/close. Entries are per
// directory (one per cgroup dir and version), in least-recently-used order.
//
// Budget: descriptors kept = min(budget, what fits under the high-water mark), where
//   reserve    = max(1024, soft RLIMIT_NOFILE / 4)   (sockets, OOM watches, files of the agent)
//   high_water = soft RLIMIT_NOFILE - reserve       (no kept descriptor numbered at or past it)
//   budget     = max(0, high_water)                  (e.g. soft 20000 -> 15000 kept at most)
// Linux hands out the lowest free number, so a new descriptor numbered past high_water means
// the whole process holds that many: the table then sheds its least recently used entries
// instead of keeping more. Past the budget, an entry not used by the current batch is
// evicted (least recently used first); when every entry belongs to the current batch, the
// rest of the batch is read with open/read/close, so a batch larger than the budget keeps
// its first part open and does not thrash.
//
// A descriptor is dropped when its cgroup goes away: a read failing with ENODEV/ENOENT
// (cgroupfs), or, on other filesystems (synthetic trees), a file whose link count fell to 0
// (checked once per cgroup and snapshot, on its first dir holding descriptors). The next read
// of that path opens it again if it exists. A file that does not exist in a dir that does is
// remembered as absent and not opened again until a batch asks for a re-check (the TS reader
// does once per ABSENT_RECHECK_MS) or the dir is forgotten. Batches using the table run one
// at a time (its mutex is held for the whole batch).
constexpr size_t kMaxDirFiles = 16;
static_assert(sizeof(kV1Files) / sizeof(kV1Files[0]) <= kMaxDirFiles, "v1 file table");
static_assert(sizeof(kV2Files) / sizeof(kV2Files[0]) <= kMaxDirFiles, "v2 file table");

constexpr long kCgroupSuperMagic = 0x27e0eb;
constexpr long kCgroup2SuperMagic = 0x63677270;

struct KeptDir {
  std::string key;  // version digit + dir
  int fds[kMaxDirFiles];
  uint32_t open = 0;
  // Files of this dir found absent (bit = index in the version's file table): not opened again
  // until a batch asks for a re-check, or the entry is forgotten (a v2 cgroup without a memory
  // controller, a v1 cgroup outside the unified hierarchy cost nothing per snapshot).
  uint16_t absent = 0;
  bool kernfs = false;  // cgroupfs: removal shows as ENODEV on read
  bool kernfs_known = false;
  uint64_t gen = 0;  // batch that last used it
  std::list<KeptDir>::iterator self;
};
static_assert(kMaxDirFiles <= 16, "absent mask");

// The table's entries of the last batch by path-table entry: the next batch with the same list
// (the usual case: the same cgroups every snapshot) takes them from here instead of hashing
// every directory again. Valid while no entry has been erased since it was filled.
struct LookupMemo {
  std::string paths;
  std::vector<uint8_t> kinds;
  std::vector<KeptDir*> dirs;
  uint64_t erased = UINT64_MAX;  // the table's erase count it is valid for
};

struct FdTableStats {
  uint64_t kept_reads = 0;   // reads through a kept descriptor (pread)
  uint64_t opens = 0;        // descriptors opened and kept
  uint64_t fallbacks = 0;    // reads done with open/read/close past the budget
  uint64_t evictions = 0;    // descriptors closed to make room (least recently used)
  uint64_t gone = 0;         // descriptors dropped because their cgroup went away
  uint64_t forgotten = 0;    // descriptors closed by forgetCgroups
};

class FdTable {
 public:
  FdTable() {
    struct rlimit rl;
    long soft = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
      soft = rl.rlim_cur == RLIM_INFINITY ? (1L << 20) : static_cast<long>(rl.rlim_cur);
    }
    const long reserve = std::max(1024L, soft / 4);
    high_water_ = std::max(0L, soft - reserve);
    budget_ = static_cast<size_t>(high_water_);
    soft_limit_ = soft;
  }

  std::mutex mu;

  size_t budget() const { return budget_; }
  long high_water() const { return high_water_; }
  long soft_limit() const { return soft_limit_; }
  size_t open() const { return open_; }
  size_t dirs() const { return lru_.size(); }
  const FdTableStats& stats() const { return stats_; }
  FdTableStats& mutable_stats() { return stats_; }

  // Sets the budget (tests, config); sheds descriptors past it at once.
  void SetBudget(size_t budget) {
    budget_ = budget;
    while (open_ > budget_ && !lru_.empty()) EvictBack();
  }

  uint64_t BeginBatch() { return ++gen_; }

  // Entries erased so far (pointers to entries stay valid while this does not move).
  uint64_t erased() const { return erased_; }
  LookupMemo& memo() { return memo_; }

  // Marks `d` used by the current batch (most recently used).
  void Touch(KeptDir* d) {
    lru_.splice(lru_.begin(), lru_, d->self);
    d->gen = gen_;
  }

  // The entry of (kind, dir), created when there is room; nullptr = read without keeping.
  KeptDir* Get(uint8_t kind, const char* dir, size_t dlen) {
    key_.assign(1, static_cast<char>('0' + kind));
    key_.append(dir, dlen);
    auto it = index_.find(key_);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      it->second->gen = gen_;
      return &*it->second;
    }
    if (!MakeRoom(1)) return nullptr;
    lru_.emplace_front();
    KeptDir& d = lru_.front();
    d.self = lru_.begin();
    d.key = key_;
    for (int& fd : d.fds) fd = -1;
    d.gen = gen_;
    index_.emplace(d.key, lru_.begin());
    return &d;
  }

  // Whether a just-opened descriptor may be kept in `d` (else the caller closes it).
  bool Keep(KeptDir* d, size_t slot, int fd) {
    if (fd >= high_water_) {
      // The process as a whole is past the mark: give back what this table holds, oldest first.
      size_t excess = static_cast<size_t>(fd - high_water_) + 1;
      while (excess > 0 && EvictStale(d)) excess = excess > 1 ? excess - 1 : 0;
      return false;
    }
    if (!MakeRoom(1)) return false;
    d->fds[slot] = fd;
    ++d->open;
    ++open_;
    ++stats_.opens;
    return true;
  }

  // Closes one descriptor of `d` (its file is gone or unreadable).
  void Drop(KeptDir* d, size_t slot) {
    if (d->fds[slot] < 0) return;
    close(d->fds[slot]);
    d->fds[slot] = -1;
    --d->open;
    --open_;
  }

  void DropAll(KeptDir* d, uint64_t* counter) {
    for (size_t s = 0; s < kMaxDirFiles; ++s) {
      if (d->fds[s] < 0) continue;
      Drop(d, s);
      if (counter) ++*counter;
    }
  }

  // Closes the descriptors of every entry for `dir` (both versions).
  void Forget(const char* dir, size_t dlen, uint64_t* counter) {
    for (char kind : {'1', '2'}) {
      key_.assign(1, kind);
      key_.append(dir, dlen);
      auto it = index_.find(key_);
      if (it == index_.end()) continue;
      DropAll(&*it->second, counter);
      Erase(it->second);
    }
  }

  // Removes entries left with no descriptor and no absent file (dropped as gone, or never kept).
  void Release(KeptDir* d) {
    if (d->open != 0 || d->absent != 0) return;
    auto it = index_.find(d->key);
    if (it != index_.end()) Erase(it->second);
  }

 private:
  void Erase(std::list<KeptDir>::iterator it) {
    index_.erase(it->key);
    lru_.erase(it);
    ++erased_;
  }

  // Evicts the least recently used entry if it was not used by the current batch.
  bool EvictStale(const KeptDir* keep) {
    if (lru_.empty()) return false;
    auto last = std::prev(lru_.end());
    if (last->gen == gen_ || &*last == keep) return false;
    DropAll(&*last, &stats_.evictions);
    Erase(last);
    return true;
  }

  void EvictBack() {
    auto last = std::prev(lru_.end());
    DropAll(&*last, &stats_.evictions);
    Erase(last);
  }

  bool MakeRoom(size_t n) {
    while (open_ + n > budget_) {
      if (!EvictStale(nullptr)) return false;
    }
    return true;
  }

  std::list<KeptDir> lru_;  // front = most recently used
  std::unordered_map<std::string, std::list<KeptDir>::iterator> index_;
  std::string key_;
  size_t open_ = 0;
  size_t budget_ = 0;
  long high_water_ = 0;
  long soft_limit_ = 0;
  uint64_t gen_ = 0;
  uint64_t erased_ = 0;
  LookupMemo memo_;
  FdTableStats stats_;
};

FdTable& Table() {
  static FdTable* table = new FdTable();  // lives as long as the process (worker threads use it)
  return *table;
}

class BatchReader {
 public:
  // `table`: read through kept-open descriptors (its mutex held by the caller), or nullptr.
  BatchReader(CgroupBatch& batch, FdTable* table) : b_(batch), table_(table) {}

#ifdef KTS_CGROUP_PARSE_ONLY
  // The fuzz harness's entry: one file's content parsed into row `i` as a read would.
  void ParseForFuzz(const FileSpec& spec, uint32_t i, const char* p, const char* end) {
    dev_start_ = b_.devices.size();
    cgroup_ = i;
    ParseFile(spec, p, end, b_.values + static_cast<size_t>(i) * kFieldCount,
              b_.state + static_cast<size_t>(i) * kFieldCount);
  }
#endif

  void Run() {
    if (!table_) {
      for (uint32_t i = 0; i < b_.count; ++i) ReadCgroup(i);
      return;
    }
    table_->BeginBatch();
    LookupMemo& memo = table_->memo();
    start_erased_ = table_->erased();
    const bool same = memo.erased == start_erased_ && memo.kinds == b_.kinds && memo.paths == b_.paths;
    if (!same) memo.dirs.assign(b_.entry.size(), nullptr);
    memo_ = &memo;
    for (uint32_t i = 0; i < b_.count; ++i) ReadCgroup(i);
    if (!same) {
      memo.paths = b_.paths;
      memo.kinds = b_.kinds;
    }
    // An entry erased during this batch may be one the memo points at: fill it again next time.
    memo.erased = table_->erased() == start_erased_ ? start_erased_ : UINT64_MAX;
  }

 private:
  static constexpr size_t kStackBuf = 16384;

  // Reads a whole file from `fd` (at offset 0 when `positional`); length or -errno.
  ssize_t ReadFd(int fd, bool positional, char* buf, const char** out) {
    ssize_t n;
    do n = positional ? pread(fd, buf, kStackBuf, 0) : read(fd, buf, kStackBuf);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    size_t len = static_cast<size_t>(n);
    *out = buf;
    // A short read is the whole file (seq_file and tmpfs fill the buffer); a full one may not be.
    if (len == kStackBuf) {
      if (spill_.size() < kStackBuf * 2) spill_.resize(kStackBuf * 2);
      memcpy(spill_.data(), buf, len);
      for (;;) {
        if (len == spill_.size()) spill_.resize(spill_.size() * 2);
        const ssize_t m = positional ? pread(fd, spill_.data() + len, spill_.size() - len, static_cast<off_t>(len))
                                     : read(fd, spill_.data() + len, spill_.size() - len);
        if (m < 0) {
          if (errno == EINTR) continue;
          return -errno;
        }
        if (m == 0) break;
        len += static_cast<size_t>(m);
      }
      *out = spill_.data();
    }
    return static_cast<ssize_t>(len);
  }

  // dir + '/' + name into path (NUL-terminated); false when it does not fit.
  static bool MakePath(const char* dir, size_t dlen, const char* name, char* path, size_t cap) {
    const size_t nlen = strlen(name);
    if (dlen + 1 + nlen + 1 > cap) return false;
    memcpy(path, dir, dlen);
    path[dlen] = '/';
    memcpy(path + dlen + 1, name, nlen + 1);
    return true;
  }

  // Opens dir/name (built only here: a kept descriptor needs no path); fd or -errno.
  static int OpenFile(const char* dir, size_t dlen, const char* name) {
    char path[4096 + 64];
    if (!MakePath(dir, dlen, name, path, sizeof(path))) return -ENAMETOOLONG;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
  }

  // open/read/close; returns its length (data in *out) or -errno.
  ssize_t ReadFile(const char* dir, size_t dlen, const char* name, char* buf, const char** out) {
    const int fd = OpenFile(dir, dlen, name);
    if (fd < 0) return fd;
    const ssize_t n = ReadFd(fd, false, buf, out);
    close(fd);
    return n;
  }

  static bool GoneErrno(ssize_t n) { return n == -ENODEV || n == -ENOENT || n == -ESTALE; }

  // Through the table: pread on the kept descriptor, else open (and keep when the budget allows).
  ssize_t ReadKept(KeptDir* d, size_t slot, const char* dir, size_t dlen, const char* name, char* buf,
                   const char** out) {
    if (d->fds[slot] >= 0) {
      const ssize_t n = ReadFd(d->fds[slot], true, buf, out);
      if (n >= 0) {
        ++table_->mutable_stats().kept_reads;
        return n;
      }
      // The cgroup (or this file) went away: release the descriptor and look at the path again.
      table_->Drop(d, slot);
      if (GoneErrno(n)) ++table_->mutable_stats().gone;
    }
    const int fd = OpenFile(dir, dlen, name);
    if (fd < 0) return fd;
    const ssize_t n = ReadFd(fd, false, buf, out);
    if (n < 0 || !table_->Keep(d, slot, fd)) {
      if (n >= 0) ++table_->mutable_stats().fallbacks;
      close(fd);
      return n;
    }
    if (!d->kernfs_known) {
      struct statfs sfs;
      d->kernfs = fstatfs(fd, &sfs) == 0 && (static_cast<long>(sfs.f_type) == kCgroupSuperMagic ||
                                            static_cast<long>(sfs.f_type) == kCgroup2SuperMagic);
      d->kernfs_known = true;
    }
    return n;
  }

  // Outside cgroupfs a removed file stays readable through its descriptor: check its link count.
  // True when the dir's descriptors were dropped for it.
  bool DropIfUnlinked(KeptDir* d) {
    for (size_t s = 0; s < kMaxDirFiles; ++s) {
      if (d->fds[s] < 0) continue;
      struct stat st;
      if (fstat(d->fds[s], &st) == 0 && st.st_nlink > 0) return false;
      table_->DropAll(d, &table_->mutable_stats().gone);
      return true;
    }
    return false;
  }

  // The table's entry for path-table entry e: the memo's while nothing was erased, else hashed.
  KeptDir* Lookup(size_t e, uint8_t kind, const char* dir, size_t dlen) {
    KeptDir*& slot = memo_->dirs[e];
    if (slot && table_->erased() == start_erased_) {
      table_->Touch(slot);
      return slot;
    }
    slot = table_->Get(kind, dir, dlen);
    return slot;
  }

  static bool DirGone(const char* dir) {
    return access(dir, F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR);
  }

  void ReadCgroup(uint32_t i) {
    char buf[kStackBuf];
    const bool v2 = b_.kinds[i] == 2;
    const FileSpec* files = v2 ? kV2Files : kV1Files;
    const size_t nfiles = v2 ? sizeof(kV2Files) / sizeof(kV2Files[0]) : sizeof(kV1Files) / sizeof(kV1Files[0]);
    uint64_t* vals = b_.values + static_cast<size_t>(i) * kFieldCount;
    uint8_t* st = b_.state + static_cast<size_t>(i) * kFieldCount;
    dev_start_ = b_.devices.size();
    cgroup_ = i;
    bool missing = false;
    KeptDir* kept = nullptr;
    int kept_slot = -1;
    // Outside cgroupfs, one link-count check per cgroup (its first dir holding descriptors);
    // once one dir is found unlinked the cgroup is going away: check every other dir too.
    bool check_unlinked = true;
    bool unlinked = false;

    for (size_t f = 0; f < nfiles; ++f) {
      const FileSpec& spec = files[f];
      const size_t e = static_cast<size_t>(i) * kSlotCount + spec.slot;
      const uint32_t dlen = b_.entry_len[e];
      if (dlen == 0) continue;
      const char* dir = b_.paths.data() + b_.entry[e];

      if (table_ && kept_slot != spec.slot) {
        // Files of one slot are consecutive in the tables: one lookup per directory.
        if (kept) table_->Release(kept);
        kept = Lookup(e, b_.kinds[i], dir, dlen);
        kept_slot = spec.slot;
        if (kept && !kept->kernfs && kept->open > 0 && (check_unlinked || unlinked)) {
          check_unlinked = false;
          if (DropIfUnlinked(kept)) unlinked = true;
        }
      }

      const uint16_t bit = static_cast<uint16_t>(1u << f);
      if (kept && (kept->absent & bit)) {
        if (!b_.recheck_absent) continue;
        kept->absent &= static_cast<uint16_t>(~bit);
      }

      const char* data = nullptr;
      const ssize_t n = kept ? ReadKept(kept, f, dir, dlen, spec.name, buf, &data)
                             : ReadFile(dir, dlen, spec.name, buf, &data);
      if (n < 0) {
        // A missing file is an absent field unless its whole directory is gone; a v1 cgroup's
        // unified dir only adds PSI, so its absence does not make the cgroup missing.
        if ((n == -ENOENT || n == -ENODEV) && (v2 || spec.slot != kUnified) && DirGone(dir)) {
          missing = true;
          break;
        }
        if (kept && n == -ENOENT) kept->absent |= bit;
        continue;
      }
      ParseFile(spec, data, data + n, vals, st);
    }
    if (kept) table_->Release(kept);

    if (missing) {
      // A cgroup gone from one hierarchy is gone: release what its other dirs still hold.
      if (table_) ForgetCgroup(i);
      memset(vals, 0, sizeof(uint64_t) * kFieldCount);
      memset(st, 0, kFieldCount);
      b_.devices.resize(dev_start_);
      b_.status[i] = kMissing;
    } else {
      b_.status[i] = kOk;
    }
  }

  void ForgetCgroup(uint32_t i) {
    for (size_t s = 0; s < kSlotCount; ++s) {
      const size_t e = static_cast<size_t>(i) * kSlotCount + s;
      if (b_.entry_len[e] == 0) continue;
      table_->Forget(b_.paths.data() + b_.entry[e], b_.entry_len[e], &table_->mutable_stats().gone);
    }
  }

  DeviceRow& Device(uint32_t major, uint32_t minor) {
    for (size_t r = dev_start_; r < b_.devices.size(); ++r) {
      DeviceRow& row = b_.devices[r];
      if (row.major == major && row.minor == minor) return row;
    }
    b_.devices.push_back(DeviceRow{cgroup_, major, minor, {0, 0, 0, 0}});
    return b_.devices.back();
  }

  static void Set(uint64_t* vals, uint8_t* st, int field, uint64_t v, State s) {
    vals[field] = v;
    st[field] = s;
  }

  static void Add(uint64_t* vals, uint8_t* st, int field, uint64_t v) {
    vals[field] = st[field] == kPresent ? vals[field] + v : v;
    st[field] = kPresent;
  }

  void ParseFile(const FileSpec& spec, const char* p, const char* end, uint64_t* vals, uint8_t* st) {
    if (spec.parse == Parse::kSingle) {
      while (p < end && IsSpace(*p)) ++p;
      while (end > p && IsSpace(end[-1])) --end;
      uint64_t v;
      const State s = ParseValue(p, end, &v);
      if (s != kAbsent) Set(vals, st, spec.field, v, s);
      return;
    }
    if (spec.parse == Parse::kKeyed || spec.parse == Parse::kTicks) {
      ParseKeyed(spec, p, end, vals, st);
      return;
    }
    size_t cursor = 0;
    while (p < end) {
      const char* nl = static_cast<const char*>(memchr(p, '\n', end - p));
      const char* line_end = nl ? nl : end;
      ParseLine(spec, p, line_end, vals, st, &cursor);
      p = nl ? nl + 1 : end;
    }
  }

  static bool IsTokenEnd(char c) { return c == ' ' || c == '\t' || c == '\n'; }

  // "key value" lines in one pass: the key up to the first blank, looked up; the value token
  // scanned only for a key of the table; the rest of the line skipped with memchr.
  void ParseKeyed(const FileSpec& spec, const char* p, const char* end, uint64_t* vals, uint8_t* st) {
    size_t cursor = 0;
    while (p < end) {
      const char* key = p;
      while (p < end && !IsTokenEnd(*p)) ++p;
      if (p < end && *p != '\n' && p > key) {
        const int field = FindKey(spec, std::string_view(key, static_cast<size_t>(p - key)), &cursor);
        if (field >= 0) {
          while (p < end && IsBlank(*p)) ++p;
          const char* tok = p;
          while (p < end && !IsTokenEnd(*p)) ++p;
          uint64_t v;
          State s = p > tok ? ParseValue(tok, p, &v) : kAbsent;
          if (s == kPresent && spec.parse == Parse::kTicks) {
            const unsigned __int128 ns = static_cast<unsigned __int128>(v) * 1000000000u / g_clock_ticks;
            if (ns > UINT64_MAX) s = kAbsent;
            v = static_cast<uint64_t>(ns);
          }
          if (s != kAbsent) Set(vals, st, field, v, s);
        }
      }
      if (p < end && *p == '\n') {
        ++p;
        continue;
      }
      const char* nl = p < end ? static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(end - p))) : nullptr;
      p = nl ? nl + 1 : end;
    }
  }

  // The field of key `k` (not empty), or -1: the key after the last one found first (the
  // kernel prints keys in a fixed order), else the key table's hash index.
  static int FindKey(const FileSpec& spec, std::string_view k, size_t* cursor) {
    if (*cursor < spec.key_count && spec.keys[*cursor].key == k) return spec.keys[(*cursor)++].field;
    uint32_t h = KeyHash(k.data(), k.size());
    for (uint8_t s; (s = spec.index->slot[h]) != 0; h = (h + 1) & (kKeySlots - 1)) {
      if (spec.keys[s - 1].key == k) {
        *cursor = s;
        return spec.keys[s - 1].field;
      }
    }
    return -1;
  }

  // Splits the next blank-separated token of [*p, end); false at the end of the line.
  static bool NextToken(const char** p, const char* end, const char** tok, const char** tok_end) {
    const char* q = *p;
    while (q < end && IsBlank(*q)) ++q;
    if (q == end) return false;
    *tok = q;
    while (q < end && !IsBlank(*q)) ++q;
    *tok_end = q;
    *p = q;
    return true;
  }

  void ParseLine(const FileSpec& spec, const char* p, const char* end, uint64_t* vals, uint8_t* st,
                 size_t* cursor) {
    const char* tok;
    const char* tok_end;
    switch (spec.parse) {
      case Parse::kPsi: {
        if (!NextToken(&p, end, &tok, &tok_end)) return;
        const std::string_view kind(tok, static_cast<size_t>(tok_end - tok));
        int base;
        if (kind == "some") base = spec.field;
        else if (kind == "full") base = spec.field + 4;
        else return;
        while (NextToken(&p, end, &tok, &tok_end)) {
          const char* eq = static_cast<const char*>(memchr(tok, '=', tok_end - tok));
          if (!eq) continue;
          const std::string_view k(tok, static_cast<size_t>(eq - tok));
          uint64_t v;
          int off;
          if (k == "avg10") off = 0;
          else if (k == "avg60") off = 1;
          else if (k == "avg300") off = 2;
          else if (k == "total") off = 3;
          else continue;
          if (off < 3) {
            if (!ParseHundredths(eq + 1, tok_end, &v)) continue;
          } else if (ParseValue(eq + 1, tok_end, &v) != kPresent) {
            continue;
          }
          Set(vals, st, base + off, v, kPresent);
        }
        return;
      }
      case Parse::kIoStat: {
        uint32_t major, minor;
        if (!NextToken(&p, end, &tok, &tok_end) || !ParseDevice(tok, tok_end, &major, &minor)) return;
        DeviceRow& row = Device(major, minor);
        while (NextToken(&p, end, &tok, &tok_end)) {
          const char* eq = static_cast<const char*>(memchr(tok, '=', tok_end - tok));
          if (!eq) continue;
          const std::string_view k(tok, static_cast<size_t>(eq - tok));
          int off;
          if (k == "rbytes") off = 0;
          else if (k == "wbytes") off = 1;
          else if (k == "rios") off = 2;
          else if (k == "wios") off = 3;
          else if (k == "dbytes") off = 4;
          else if (k == "dios") off = 5;
          else continue;
          uint64_t v;
          if (ParseValue(eq + 1, tok_end, &v) != kPresent) continue;
          Add(vals, st, spec.field + off, v);
          if (off < kDeviceColumns) row.v[off] += v;
        }
        return;
      }
      case Parse::kBlkio: {
        uint32_t major, minor;
        if (!NextToken(&p, end, &tok, &tok_end) || !ParseDevice(tok, tok_end, &major, &minor)) return;
        if (!NextToken(&p, end, &tok, &tok_end)) return;
        const std::string_view op(tok, static_cast<size_t>(tok_end - tok));
        int off;
        if (op == "Read") off = 0;
        else if (op == "Write") off = 1;
        else return;
        uint64_t v;
        if (!NextToken(&p, end, &tok, &tok_end) || ParseValue(tok, tok_end, &v) != kPresent) return;
        Add(vals, st, spec.field + off, v);
        Device(major, minor).v[spec.device_column + off] += v;
        return;
      }
      case Parse::kSingle:
      case Parse::kKeyed:
      case Parse::kTicks:  // ParseFile / ParseKeyed
        return;
    }
  }

  CgroupBatch& b_;
  FdTable* table_;
  LookupMemo* memo_ = nullptr;
  uint64_t start_erased_ = 0;
  std::vector<char> spill_;
  size_t dev_start_ = 0;
  uint32_t cgroup_ = 0;
};

void RunBatch(CgroupBatch& batch) {
  if (!batch.keep_open) {
    BatchReader(batch, nullptr).Run();
    return;
  }
  FdTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mu);
  BatchReader(batch, &table).Run();
}

#ifndef KTS_CGROUP_PARSE_ONLY
// Output arrays allocated on the main thread before the read; the worker fills them.
struct BatchBuffers {
  Napi::ArrayBuffer status;
  Napi::ArrayBuffer values;
  Napi::ArrayBuffer state;
};

// Validates (kinds, paths) and fills a baton; throws a JS TypeError on bad input.
std::unique_ptr<CgroupBatch> ParseArgs(const Napi::CallbackInfo& info, BatchBuffers* out) {
  Napi::Env env = info.Env();
  const bool paths_bytes = info.Length() >= 2 && info[1].IsTypedArray() &&
                           info[1].As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array;
  if (info.Length() < 2 || !info[0].IsTypedArray() || !(info[1].IsString() || paths_bytes)) {
    throw Napi::TypeError::New(env, "readCgroups(kinds: Uint8Array, paths: string | Uint8Array)");
  }
  Napi::TypedArray kinds_arr = info[0].As<Napi::TypedArray>();
  if (kinds_arr.TypedArrayType() != napi_uint8_array) {
    throw Napi::TypeError::New(env, "readCgroups: kinds must be a Uint8Array");
  }
  Napi::Uint8Array kinds = kinds_arr.As<Napi::Uint8Array>();
  auto batch = std::make_unique<CgroupBatch>();
  if (info.Length() >= 3 && !info[2].IsUndefined()) {
    if (!info[2].IsBoolean()) throw Napi::TypeError::New(env, "readCgroups: keepOpen must be a boolean");
    batch->keep_open = info[2].As<Napi::Boolean>().Value();
  }
  if (info.Length() >= 4 && !info[3].IsUndefined()) {
    if (!info[3].IsBoolean()) throw Napi::TypeError::New(env, "readCgroups: recheckAbsent must be a boolean");
    batch->recheck_absent = info[3].As<Napi::Boolean>().Value();
  }
  batch->count = static_cast<uint32_t>(kinds.ElementLength());
  batch->kinds.assign(kinds.Data(), kinds.Data() + kinds.ElementLength());
  for (uint8_t k : batch->kinds) {
    if (k != 1 && k != 2) throw Napi::TypeError::New(env, "readCgroups: kinds must be 1 or 2");
  }
  if (paths_bytes) {
    // UTF-8 bytes the caller encoded once for a list it reads again and again: copied, not transcoded.
    const Napi::Uint8Array bytes = info[1].As<Napi::Uint8Array>();
    batch->paths.assign(reinterpret_cast<const char*>(bytes.Data()), bytes.ElementLength());
  } else {
    batch->paths = info[1].As<Napi::String>().Utf8Value();
  }
  const size_t entries = static_cast<size_t>(batch->count) * kSlotCount;
  batch->entry.reserve(entries);
  batch->entry_len.reserve(entries);
  const char* const base = batch->paths.data();
  const char* const end = base + batch->paths.size();
  const char* p = base;
  while (p < end && batch->entry.size() < entries) {
    const char* nul = static_cast<const char*>(memchr(p, '\0', static_cast<size_t>(end - p)));
    if (!nul) break;
    batch->entry.push_back(static_cast<uint32_t>(p - base));
    batch->entry_len.push_back(static_cast<uint32_t>(nul - p));
    p = nul + 1;
  }
  const size_t start = static_cast<size_t>(p - base);
  if (batch->entry.size() != entries || start != batch->paths.size()) {
    throw Napi::TypeError::New(env, "readCgroups: paths must hold 6 NUL-terminated entries per cgroup");
  }
  const size_t cells = static_cast<size_t>(batch->count) * kFieldCount;
  out->status = Napi::ArrayBuffer::New(env, batch->count);
  out->values = Napi::ArrayBuffer::New(env, cells * sizeof(uint64_t));
  out->state = Napi::ArrayBuffer::New(env, cells);
  batch->devices.reserve(batch->count);
  batch->status = static_cast<uint8_t*>(out->status.Data());
  batch->values = static_cast<uint64_t*>(out->values.Data());
  batch->state = static_cast<uint8_t*>(out->state.Data());
  return batch;
}

Napi::Object BuildResult(Napi::Env env, const CgroupBatch& batch, const BatchBuffers& buffers) {
  const size_t cells = static_cast<size_t>(batch.count) * kFieldCount;
  const size_t rows = batch.devices.size();
  Napi::Uint32Array dev_ids = Napi::Uint32Array::New(env, rows * 3);
  Napi::BigUint64Array dev_values = Napi::BigUint64Array::New(env, rows * kDeviceColumns);
  for (size_t r = 0; r < rows; ++r) {
    const DeviceRow& row = batch.devices[r];
    dev_ids[r * 3] = row.cgroup;
    dev_ids[r * 3 + 1] = row.major;
    dev_ids[r * 3 + 2] = row.minor;
    memcpy(dev_values.Data() + r * kDeviceColumns, row.v, sizeof(row.v));
  }
  Napi::Object result = Napi::Object::New(env);
  result.Set("status", Napi::Uint8Array::New(env, batch.count, buffers.status, 0));
  result.Set("values", Napi::BigUint64Array::New(env, cells, buffers.values, 0));
  result.Set("state", Napi::Uint8Array::New(env, cells, buffers.state, 0));
  result.Set("devIds", dev_ids);
  result.Set("devValues", dev_values);
  return result;
}

class ReadCgroupsWorker : public Napi::AsyncWorker {
 public:
  ReadCgroupsWorker(Napi::Env env, std::unique_ptr<CgroupBatch> batch, const BatchBuffers& buffers)
      : Napi::AsyncWorker(env, "kts:readCgroups"),
        deferred_(Napi::Promise::Deferred::New(env)),
        batch_(std::move(batch)),
        status_(Napi::Persistent(buffers.status)),
        values_(Napi::Persistent(buffers.values)),
        state_(Napi::Persistent(buffers.state)) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override {
    try {
      RunBatch(*batch_);
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }

  void OnOK() override {
    const BatchBuffers buffers{status_.Value(), values_.Value(), state_.Value()};
    deferred_.Resolve(BuildResult(Env(), *batch_, buffers));
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::unique_ptr<CgroupBatch> batch_;
  Napi::Reference<Napi::ArrayBuffer> status_;
  Napi::Reference<Napi::ArrayBuffer> values_;
  Napi::Reference<Napi::ArrayBuffer> state_;
};

Napi::Value ReadCgroupsSync(const Napi::CallbackInfo& info) {
  BatchBuffers buffers;
  std::unique_ptr<CgroupBatch> batch = ParseArgs(info, &buffers);
  try {
    RunBatch(*batch);
  } catch (const std::exception& e) {
    throw Napi::Error::New(info.Env(), e.what());
  }
  return BuildResult(info.Env(), *batch, buffers);
}

Napi::Value ReadCgroupsAsync(const Napi::CallbackInfo& info) {
  BatchBuffers buffers;
  std::unique_ptr<CgroupBatch> batch = ParseArgs(info, &buffers);
  auto* worker = new ReadCgroupsWorker(info.Env(), std::move(batch), buffers);
  Napi::Promise promise = worker->Promise();
  worker->Queue();  // the worker deletes itself after OnOK/OnError
  return promise;
}

// forgetCgroups(dirs: string): closes the kept descriptors of each NUL-terminated dir.
Napi::Value ForgetCgroups(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsString()) {
    throw Napi::TypeError::New(info.Env(), "forgetCgroups(dirs: string)");
  }
  const std::string dirs = info[0].As<Napi::String>().Utf8Value();
  FdTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mu);
  size_t start = 0;
  for (size_t at = 0; at < dirs.size(); ++at) {
    if (dirs[at] != '\0') continue;
    if (at > start) table.Forget(dirs.data() + start, at - start, &table.mutable_stats().forgotten);
    start = at + 1;
  }
  return info.Env().Undefined();
}

// cgroupFdTable(): the table's budget, what it holds and its counters.
// Takes the table's lock: it waits for a batch in progress.
Napi::Value CgroupFdTable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  FdTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mu);
  Napi::Object o = Napi::Object::New(env);
  const FdTableStats& s = table.stats();
  o.Set("softLimit", Napi::Number::New(env, static_cast<double>(table.soft_limit())));
  o.Set("highWater", Napi::Number::New(env, static_cast<double>(table.high_water())));
  o.Set("budget", Napi::Number::New(env, static_cast<double>(table.budget())));
  o.Set("open", Napi::Number::New(env, static_cast<double>(table.open())));
  o.Set("dirs", Napi::Number::New(env, static_cast<double>(table.dirs())));
  o.Set("keptReads", Napi::Number::New(env, static_cast<double>(s.kept_reads)));
  o.Set("opens", Napi::Number::New(env, static_cast<double>(s.opens)));
  o.Set("fallbacks", Napi::Number::New(env, static_cast<double>(s.fallbacks)));
  o.Set("evictions", Napi::Number::New(env, static_cast<double>(s.evictions)));
  o.Set("gone", Napi::Number::New(env, static_cast<double>(s.gone)));
  o.Set("forgotten", Napi::Number::New(env, static_cast<double>(s.forgotten)));
  return o;
}

// setCgroupFdBudget(n): caps the descriptors kept (below the derived one only); returns it.
Napi::Value SetCgroupFdBudget(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(env, "setCgroupFdBudget(n: number)");
  const double n = info[0].As<Napi::Number>().DoubleValue();
  if (!(n >= 0)) throw Napi::TypeError::New(env, "setCgroupFdBudget: n must be >= 0");
  FdTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mu);
  const double cap = static_cast<double>(std::max(0L, table.high_water()));
  table.SetBudget(static_cast<size_t>(std::min(n, cap)));
  return Napi::Number::New(env, static_cast<double>(table.budget()));
}

Napi::Value FieldNames(const Napi::CallbackInfo& info) {
  Napi::Array names = Napi::Array::New(info.Env(), kFieldCount);
  for (uint32_t i = 0; i < kFieldCount; ++i) names.Set(i, Napi::String::New(info.Env(), kFieldNames[i]));
  return names;
}

Napi::Value ClockTicks(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(g_clock_ticks));
}

}  // namespace

void InitCgroupReader(Napi::Env env, Napi::Object exports) {
  const long ticks = sysconf(_SC_CLK_TCK);
  if (ticks > 0) g_clock_ticks = static_cast<uint64_t>(ticks);
  exports.Set("fieldNames", Napi::Function::New(env, FieldNames, "fieldNames"));
  exports.Set("clockTicks", Napi::Function::New(env, ClockTicks, "clockTicks"));
  exports.Set("readCgroupsSync", Napi::Function::New(env, ReadCgroupsSync, "readCgroupsSync"));
  exports.Set("readCgroupsAsync", Napi::Function::New(env, ReadCgroupsAsync, "readCgroupsAsync"));
  exports.Set("forgetCgroups", Napi::Function::New(env, ForgetCgroups, "forgetCgroups"));
  exports.Set("cgroupFdTable", Napi::Function::New(env, CgroupFdTable, "cgroupFdTable"));
  exports.Set("setCgroupFdBudget", Napi::Function::New(env, SetCgroupFdBudget, "setCgroupFdBudget"));
}

#else
}  // namespace
#endif  // KTS_CGROUP_PARSE_ONLY
}  // namespace kts
