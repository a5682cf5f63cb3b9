// Pod ranking for eviction (upstream rankMemoryPressure, rankPIDPressure, rankDiskPressureFunc):
// a chain of comparators, the first that tells two pods apart decides. The first pod of the
// sorted list is evicted first.

import type { Pod } from '../api/types.js';
import { podRequests } from '../runtime/resources.js';
import type { PodStats } from '../stats/summary.js';
import type { Signal, StarvedResource } from './api.js';

export type StatsFunc = (pod: Pod) => PodStats | undefined;
type Cmp = (a: Pod, b: Pod) => number;

const cmpBool = (a: boolean, b: boolean): number => (a === b ? 0 : a ? 1 : -1);
const cmpBig = (a: bigint, b: bigint): number => (a === b ? 0 : a < b ? -1 : 1);

function orderedBy(...cmps: Cmp[]): (pods: Pod[]) => Pod[] {
  return (pods) => [...pods].sort((a, b) => {
    for (const c of cmps) {
      const r = c(a, b);
      if (r !== 0) return r;
    }
    return 0;
  });
}

/** Bytes (or units) of a pod's request of `resource` (milli-units rounded up). */
export function podRequest(pod: Pod, resource: string): bigint {
  const milli = podRequests(pod).get(resource) ?? 0n;
  return (milli + 999n) / 1000n;
}

export const podPriority = (pod: Pod): number => pod.spec.priority ?? 0;

/** Lower priority first. */
const priority: Cmp = (a, b) => Math.sign(podPriority(a) - podPriority(b));

/** Pods with stats first; when both have them, `then` decides. */
function withStats(stats: StatsFunc, then: (a: PodStats, b: PodStats, pa: Pod, pb: Pod) => number): Cmp {
  return (a, b) => {
    const sa = stats(a);
    const sb = stats(b);
    if (!sa || !sb) return cmpBool(!sa, !sb);
    return then(sa, sb, a, b);
  };
}

export const podMemoryUsage = (s: PodStats): bigint => s.memory?.workingSetBytes ?? 0n;

/** Pods using more memory than they request first. */
const exceedMemoryRequests = (stats: StatsFunc): Cmp =>
  withStats(stats, (sa, sb, a, b) => cmpBool(!(podMemoryUsage(sa) > podRequest(a, 'memory')), !(podMemoryUsage(sb) > podRequest(b, 'memory'))));

/** Most memory above its request first. */
const memory = (stats: StatsFunc): Cmp =>
  withStats(stats, (sa, sb, a, b) => cmpBig(podMemoryUsage(sb) - podRequest(b, 'memory'), podMemoryUsage(sa) - podRequest(a, 'memory')));

const processCount = (s: PodStats): bigint => s.process_stats?.process_count ?? 0n;
const processes = (stats: StatsFunc): Cmp => withStats(stats, (sa, sb) => cmpBig(processCount(sb), processCount(sa)));

/** A pod's local storage use: its ephemeral-storage figure, else containers' rootfs + logs + volumes. */
export function podDiskUsage(s: PodStats, what: 'bytes' | 'inodes'): bigint {
  const eph = s['ephemeral-storage'];
  const pick = (fs: { usedBytes?: bigint; inodesUsed?: bigint } | undefined): bigint =>
    (what === 'bytes' ? fs?.usedBytes : fs?.inodesUsed) ?? 0n;
  if (eph && (what === 'bytes' ? eph.usedBytes : eph.inodesUsed) !== undefined) return pick(eph);
  let sum = 0n;
  for (const c of s.containers) sum += pick(c.rootfs) + pick(c.logs);
  for (const v of s.volume ?? []) sum += pick(v);
  return sum;
}

const exceedDiskRequests = (stats: StatsFunc, what: 'bytes' | 'inodes'): Cmp =>
  withStats(stats, (sa, sb, a, b) => {
    // inodes have no request: nothing exceeds it
    const over = (s: PodStats, p: Pod): boolean => what === 'bytes' && podDiskUsage(s, what) > podRequest(p, 'ephemeral-storage');
    return cmpBool(!over(sa, a), !over(sb, b));
  });

const disk = (stats: StatsFunc, what: 'bytes' | 'inodes'): Cmp =>
  withStats(stats, (sa, sb, a, b) => {
    const req = (p: Pod): bigint => (what === 'bytes' ? podRequest(p, 'ephemeral-storage') : 0n);
    return cmpBig(podDiskUsage(sb, what) - req(b), podDiskUsage(sa, what) - req(a));
  });

/** The pods in eviction order for a starved resource. */
export function rankPods(resource: StarvedResource, pods: Pod[], stats: StatsFunc): Pod[] {
  switch (resource) {
    case 'memory':
      return orderedBy(exceedMemoryRequests(stats), priority, memory(stats))(pods);
    case 'pids':
      return orderedBy(priority, processes(stats))(pods);
    case 'ephemeral-storage':
      return orderedBy(exceedDiskRequests(stats, 'bytes'), priority, disk(stats, 'bytes'))(pods);
    case 'inodes':
      return orderedBy(exceedDiskRequests(stats, 'inodes'), priority, disk(stats, 'inodes'))(pods);
  }
}

/** Signals the manager can act on by evicting pods (upstream: signalToRankFunc has them). */
export const RANKED_SIGNALS: ReadonlySet<Signal> = new Set<Signal>([
  'memory.available', 'allocatableMemory.available', 'nodefs.available', 'nodefs.inodesFree',
  'imagefs.available', 'imagefs.inodesFree', 'containerfs.available', 'containerfs.inodesFree', 'pid.available',
]);
