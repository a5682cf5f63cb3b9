// Filesystem accounting walks (du -x -s -B1 and find -xdev | wc -l of each tree) for a batch of
// paths in one libuv threadpool job: the Summary's volume and log figures for every pod, once
// per volumeStatsAggPeriod, without a worker thread or a promise per directory entry.
//
// JS API (registered on the addon's exports):
//   duBatch(requests: { path: string; split?: 0 | 2 }[]): Promise<UsageAnswer[]>
//     split 0: the tree at `path` as one figure: { usage: { bytes, inodes, mount } }, or {} when
//              the path does not exist (ENOENT, ENOTDIR).
//     split 2: one figure per entry two levels down (volumes/<plugin>/<name>):
//              { children: { "<plugin>/<name>": usage } }, or {} when the path does not exist.
//     bytes: allocated blocks x 512 (du's count); inodes: entries, the root included; a hard link
//     is counted once per tree, a symlink is counted and never followed, the walk stays on the
//     device of its root; mount: the root's device differs from its parent's (a tmpfs emptyDir).
//     Entries that vanish during the walk are skipped; any other failure answers
//     { error: "<path>: <CODE>: <message>, <call> '<file>'" } for that request alone.
//     Bad arguments throw a TypeError naming the argument.
#pragma once
#include <napi.h>

namespace kts {
void InitDuBatch(Napi::Env env, Napi::Object exports);
}  // namespace kts
