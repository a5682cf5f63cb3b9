// Pod ranking for eviction (upstream rankMemoryPressure, rankPIDPressure, rankDiskPressureFunc):
// a chain of comparators, the first that tells two pods apart decides. The first pod of the
// sorted list is evicted first.

import type { Pod } from '../api/types.js';
import { podRequests } from '../runtime/resources.js';
import type { PodStats } from '../stats/summary.js';
import type { Signal, StarvedResource } from './api.js';

export type StatsFunc = (pod: Pod) => PodStats | undefined;
type Cmp = (a: Pod, b: Pod) => number;

/** false before true. */
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

/** Pods without stats first (upstream evicts what it cannot measure first); when both have them, `then` decides. */
function withStats(stats: StatsFunc, then: (a: PodStats, b: PodStats, pa: Pod, pb: Pod) => number): Cmp {
  return (a, b) => {
    const sa = stats(a);
    const sb = stats(b);
    if (!sa || !sb) return cmpBool(sa !== undefined, sb !== undefined);
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

/** The figures a disk ranking adds up (upstream fsStatsType; images are nobody's). */
export type FsStatsType = 'root' | 'logs' | 'localVolumeSource';

const ALL_FS_STATS: readonly FsStatsType[] = ['root', 'logs', 'localVolumeSource'];

/**
 * What a disk signal's ranking measures (upstream buildSignalToRankFunc): on one filesystem
 * everything; with a dedicated image filesystem, nodefs counts logs and local volumes and
 * imagefs/containerfs the writable layers.
 */
export function diskStatsToMeasure(signal: Signal, dedicatedImageFs: boolean): readonly FsStatsType[] {
  if (!dedicatedImageFs) return ALL_FS_STATS;
  return signal === 'nodefs.available' || signal === 'nodefs.inodesFree' ? ['logs', 'localVolumeSource'] : ['root'];
}

/** Volumes whose data is on the node's disk (upstream localVolumeNames: hostPath and local ephemeral volumes). */
export function localVolumeNames(pod: Pod): Set<string> {
  const names = new Set<string>();
  for (const v of pod.spec.volumes ?? []) {
    const diskEmptyDir = v.emptyDir !== undefined && (v.emptyDir.medium ?? '') === '';
    if (v.hostPath || v.gitRepo || v.configMap || diskEmptyDir) names.add(v.name);
  }
  return names;
}

/**
 * A pod's local storage use (upstream podDiskUsage): its containers' writable layers and logs
 * and its local volumes, as `measure` selects. Figures not measured count 0, as upstream.
 */
export function podDiskUsage(s: PodStats, pod: Pod, what: 'bytes' | 'inodes', measure: readonly FsStatsType[] = ALL_FS_STATS): bigint {
  const pick = (fs: { usedBytes?: bigint; inodesUsed?: bigint } | undefined): bigint =>
    (what === 'bytes' ? fs?.usedBytes : fs?.inodesUsed) ?? 0n;
  let sum = 0n;
  for (const c of s.containers) {
    if (measure.includes('root')) sum += pick(c.rootfs);
    if (measure.includes('logs')) sum += pick(c.logs);
  }
  if (measure.includes('localVolumeSource')) {
    const local = localVolumeNames(pod);
    for (const v of s.volume ?? []) if (local.has(v.name)) sum += pick(v);
  }
  return sum;
}

const exceedDiskRequests = (stats: StatsFunc, what: 'bytes' | 'inodes', measure: readonly FsStatsType[]): Cmp =>
  withStats(stats, (sa, sb, a, b) => {
    // upstream compares with the request of the resource itself: nobody requests inodes, so any use exceeds it
    const over = (s: PodStats, p: Pod): boolean => podDiskUsage(s, p, what, measure) > podRequest(p, what === 'bytes' ? 'ephemeral-storage' : 'inodes');
    return cmpBool(!over(sa, a), !over(sb, b));
  });

const disk = (stats: StatsFunc, what: 'bytes' | 'inodes', measure: readonly FsStatsType[]): Cmp =>
  withStats(stats, (sa, sb, a, b) => {
    // upstream subtracts the ephemeral-storage request from inodes too
    const use = (s: PodStats, p: Pod): bigint => podDiskUsage(s, p, what, measure) - podRequest(p, 'ephemeral-storage');
    return cmpBig(use(sb, b), use(sa, a));
  });

/** The pods in eviction order for a starved resource. */
export function rankPods(resource: StarvedResource, pods: Pod[], stats: StatsFunc, measure: readonly FsStatsType[] = ALL_FS_STATS): Pod[] {
  switch (resource) {
    case 'memory':
      return orderedBy(exceedMemoryRequests(stats), priority, memory(stats))(pods);
    case 'pids':
      return orderedBy(priority, processes(stats))(pods);
    case 'ephemeral-storage':
      return orderedBy(exceedDiskRequests(stats, 'bytes', measure), priority, disk(stats, 'bytes', measure))(pods);
    case 'inodes':
      return orderedBy(exceedDiskRequests(stats, 'inodes', measure), priority, disk(stats, 'inodes', measure))(pods);
  }
}

/** Signals the manager can act on by evicting pods (upstream: signalToRankFunc has them). */
export const RANKED_SIGNALS: ReadonlySet<Signal> = new Set<Signal>([
  'memory.available', 'allocatableMemory.available', 'nodefs.available', 'nodefs.inodesFree',
  'imagefs.available', 'imagefs.inodesFree', 'containerfs.available', 'containerfs.inodesFree', 'pid.available',
]);
