// Batch cgroup counter reader (cgroup v1 and v2).
//
// JS API (registered on the addon's exports):
//   fieldNames(): string[]                       field order of the values/state arrays
//   clockTicks(): number                         sysconf(_SC_CLK_TCK) used for cpuacct.stat
//   readCgroupsSync(kinds: Uint8Array, paths: string): RawBatch
//   readCgroupsAsync(kinds: Uint8Array, paths: string): Promise<RawBatch>
// kinds[i] is 1 or 2 (cgroup version); paths holds kSlotCount '\0'-terminated entries per
// cgroup (unified, cpu, cpuacct, memory, pids, blkio; "" = none). RawBatch is
// { status: Uint8Array, values: BigUint64Array, state: Uint8Array,
//   devIds: Uint32Array, devValues: BigUint64Array } as src/stats/cgroup-sample.ts describes.
#pragma once
#include <napi.h>

namespace kts {
void InitCgroupReader(Napi::Env env, Napi::Object exports);
}
