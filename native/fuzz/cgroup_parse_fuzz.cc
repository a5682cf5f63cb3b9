// libFuzzer harness: the cgroup file parsers of cgroup_reader.cc (every file of the v1 and v2
// tables) on arbitrary content. Input: byte 0 picks the version and the file, the rest is
// the file's content. Beyond the sanitizers' checks: every state is absent, present or max,
// and a parse adds no more device rows than the content has lines.
#define KTS_CGROUP_PARSE_ONLY 1
#include "../cgroup_reader.cc"

#include <cstdio>
#include <cstdlib>

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "cgroup_parse_fuzz: invariant broken: %s\n", what);
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr size_t kV1Count = sizeof(kts::kV1Files) / sizeof(kts::kV1Files[0]);
  constexpr size_t kV2Count = sizeof(kts::kV2Files) / sizeof(kts::kV2Files[0]);
  const size_t pick = data[0] % (kV1Count + kV2Count);
  const kts::FileSpec& spec = pick < kV1Count ? kts::kV1Files[pick] : kts::kV2Files[pick - kV1Count];
  // The content in a buffer of its own size, so a read past its end is caught.
  const size_t n = size - 1;
  char* content = static_cast<char*>(malloc(n ? n : 1));
  if (n) memcpy(content, data + 1, n);

  uint64_t values[kts::kFieldCount] = {};
  uint8_t state[kts::kFieldCount] = {};
  uint8_t status = 0;
  kts::CgroupBatch batch;
  batch.count = 1;
  batch.values = values;
  batch.state = state;
  batch.status = &status;
  kts::BatchReader(batch, nullptr).ParseForFuzz(spec, 0, content, content + n);

  for (size_t f = 0; f < kts::kFieldCount; ++f) Check(state[f] <= kts::kMaxValue, "state out of range");
  size_t lines = 1;
  for (size_t i = 0; i < n; ++i) lines += content[i] == '\n';
  Check(batch.devices.size() <= lines, "more device rows than lines");
  for (const kts::DeviceRow& row : batch.devices) Check(row.cgroup == 0, "device row of another cgroup");
  free(content);
  return 0;
}
