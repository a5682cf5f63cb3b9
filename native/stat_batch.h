// Batched stat(2): one libuv threadpool job for a whole list of paths, so a periodic pass over
// N files (log rotation, the static pod directory) costs one promise, not N.
//
// JS API (registered on the addon's exports):
//   statBatch(paths: string[] | Uint8Array): Promise<Float64Array>
//                 paths: an array of strings, or UTF-8 bytes holding NUL-terminated paths
//                 (the cgroup reader's encoding). stat(2) follows symlinks, as fs.stat does.
//                 Resolves with kStatBatchRow numbers per path, in order (see below);
//                 a failed stat leaves errno (positive) in the row's first slot, the rest 0.
//                 Bad arguments throw a TypeError naming the argument.
//   statBatchFields(): string[]  the row's field names, so the TS side can refuse a mismatch.
#pragma once
#include <napi.h>

namespace kts {
// Row: errno, mode, size, ino, dev, mtimeSec, mtimeNsec, ctimeSec, ctimeNsec.
constexpr size_t kStatBatchRow = 9;
void InitStatBatch(Napi::Env env, Napi::Object exports);
}  // namespace kts
