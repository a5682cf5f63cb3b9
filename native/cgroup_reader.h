// Batch cgroup counter reader (cgroup v1 and v2).
//
// JS API (registered on the addon's exports):
//   fieldNames(): string[]                       field order of the values/state arrays
//   clockTicks(): number                         sysconf(_SC_CLK_TCK) used for cpuacct.stat
//   readCgroupsSync(kinds: Uint8Array, paths: string | Uint8Array, keepOpen?, recheckAbsent?): RawBatch
//   readCgroupsAsync(kinds: Uint8Array, paths: string | Uint8Array, keepOpen?, recheckAbsent?): Promise<RawBatch>
//   forgetCgroups(dirs: string): void        close kept descriptors of NUL-terminated dirs
//   cgroupFdTable(): { softLimit, highWater, budget, open, dirs, keptReads, opens,
//                      fallbacks, evictions, gone, forgotten }
//   setCgroupFdBudget(n: number): number     cap the kept descriptors (tests, config)
// keepOpen reads through descriptors kept open between calls (pread at offset 0), within
// the budget described in cgroup_reader.cc; files it finds absent are not opened again until
// a batch passes recheckAbsent (or the dir is forgotten).
// kinds[i] is 1 or 2 (cgroup version); paths (a string, or its UTF-8 bytes) holds kSlotCount '\0'-terminated entries per
// cgroup (unified, cpu, cpuacct, memory, pids, blkio; "" = none). RawBatch is
// { status: Uint8Array, values: BigUint64Array, state: Uint8Array,
//   devIds: Uint32Array, devValues: BigUint64Array } as src/stats/cgroup-sample.ts describes.
#pragma once
#include <napi.h>

namespace kts {
void InitCgroupReader(Napi::Env env, Napi::Object exports);
}
