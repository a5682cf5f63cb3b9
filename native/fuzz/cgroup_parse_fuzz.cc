// libFuzzer harness: the cgroup file parsers of cgroup_reader.cc (every file of the v1 and v2
// tables) on arbitrary content. Input: byte 0 picks the version and the file, the rest is
// the file's content. Beyond the sanitizers' checks: every state is absent, present or max,
// and a parse adds no more device rows than the content has lines. With the top bit of byte 0
// set, the content is also written to a file (under .cache/fuzz-native/) and read by a whole
// batch, plain and through the kept-descriptor table (files past the 16 KiB first read
// included): the figures read equal the figures parsed.
#define KTS_CGROUP_PARSE_ONLY 1
#include "../cgroup_reader.cc"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "cgroup_parse_fuzz: invariant broken: %s\n", what);
    abort();
  }
}

// A cgroup-like dir of this process's own under .cache/fuzz-native (the script's working dir is
// the repository), removed at exit.
const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = ".cache/fuzz-native/cgroup_parse.files.XXXXXX";
    const char* d = mkdtemp(tmpl);
    Check(d != nullptr, "cannot make the files dir");
    std::string out = d;
    static std::string cleanup = out;
    atexit([] {
      for (const kts::FileSpec& f : kts::kV1Files) unlink((cleanup + "/" + f.name).c_str());
      for (const kts::FileSpec& f : kts::kV2Files) unlink((cleanup + "/" + f.name).c_str());
      rmdir(cleanup.c_str());
    });
    return out;
  }();
  return dir;
}

// Reads `spec`'s file (holding `content`) as a batch of one cgroup would; the row into values/state.
void ReadBack(const kts::FileSpec& spec, bool v2, const char* content, size_t n, bool keep_open, uint64_t* values, uint8_t* state) {
  const std::string& dir = Dir();
  // only this file in the dir: the others are absent
  for (const kts::FileSpec& f : kts::kV1Files) unlink((dir + "/" + f.name).c_str());
  for (const kts::FileSpec& f : kts::kV2Files) unlink((dir + "/" + f.name).c_str());
  FILE* fp = fopen((dir + "/" + spec.name).c_str(), "wb");
  Check(fp != nullptr, "cannot write the file");
  Check(fwrite(content, 1, n, fp) == n, "short write");
  fclose(fp);
  kts::CgroupBatch batch;
  batch.count = 1;
  batch.kinds = {static_cast<uint8_t>(v2 ? 2 : 1)};
  for (int s = 0; s < kts::kSlotCount; ++s) {
    batch.entry.push_back(static_cast<uint32_t>(batch.paths.size()));
    const bool mine = s == spec.slot;
    batch.entry_len.push_back(mine ? static_cast<uint32_t>(dir.size()) : 0);
    if (mine) batch.paths += dir;
    batch.paths.push_back('\0');
  }
  uint8_t status = 0;
  batch.values = values;
  batch.state = state;
  batch.status = &status;
  batch.keep_open = keep_open;
  batch.recheck_absent = true;
  kts::RunBatch(batch);
  Check(status == kts::kOk, "the cgroup read as missing");
  if (keep_open) {
    kts::FdTable& table = kts::Table();
    std::lock_guard<std::mutex> lock(table.mu);
    uint64_t forgotten = 0;
    table.Forget(dir.data(), dir.size(), &forgotten);
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

  if (data[0] & 0x80) {
    for (const bool keep_open : {false, true}) {
      uint64_t read_values[kts::kFieldCount] = {};
      uint8_t read_state[kts::kFieldCount] = {};
      ReadBack(spec, pick >= kV1Count, content, n, keep_open, read_values, read_state);
      for (size_t f = 0; f < kts::kFieldCount; ++f) {
        Check(read_state[f] == state[f], "a state read differs from the one parsed");
        Check(read_state[f] == kts::kAbsent || read_values[f] == values[f], "a figure read differs from the one parsed");
      }
    }
  }
  free(content);
  return 0;
}
