// The eviction manager the configuration asks for: thresholds from evictionHard/evictionSoft
// (+ grace periods, min-reclaim), the transition period, the soft-eviction grace cap, and the
// allocatable reservation that allocatableMemory.available is measured against.

import { stat } from 'node:fs/promises';
import type { KubeletConfig } from '../config/index.js';
import { parseQuantity } from '../api/quantity.js';
import { allocatableReservation } from '../nodestatus/setters.js';
import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { StatsSnapshot } from '../stats/provider.js';
import type { Summary } from '../stats/summary.js';
import { EvictionManager, type EvictionHost, type EvictionManagerOptions } from './eviction-manager.js';
import { parseThresholdConfig } from './thresholds.js';

export type EvictionConfig = Pick<KubeletConfig,
  'evictionHard' | 'evictionSoft' | 'evictionSoftGracePeriod' | 'evictionMinimumReclaim' |
  'evictionPressureTransitionPeriod' | 'evictionMaxPodGracePeriod' | 'enforceNodeAllocatable' |
  'systemReserved' | 'kubeReserved' | 'localStorageCapacityIsolation'>;

/** The memory the kubelet holds back from pods: kube + system reserved + the memory.available hard threshold. */
export function memoryReservationBytes(config: EvictionConfig, memoryCapacityBytes: number): bigint {
  const r = allocatableReservation({ memory: String(memoryCapacityBytes) }, [config.systemReserved, config.kubeReserved], config.evictionHard);
  return r.memory === undefined ? 0n : parseQuantity(r.memory).valueBig();
}

export function createEvictionManager(config: EvictionConfig, memoryCapacityBytes: number, rest: Omit<EvictionManagerOptions, 'thresholds' | 'pressureTransitionPeriodMs' | 'maxPodGracePeriodSeconds' | 'allocatableMemory' | 'localStorageCapacityIsolation'>): EvictionManager {
  return new EvictionManager({
    ...rest,
    thresholds: parseThresholdConfig(config),
    pressureTransitionPeriodMs: config.evictionPressureTransitionPeriod,
    maxPodGracePeriodSeconds: config.evictionMaxPodGracePeriod,
    localStorageCapacityIsolation: config.localStorageCapacityIsolation,
    allocatableMemory: config.enforceNodeAllocatable.includes('pods')
      ? { capacity: BigInt(memoryCapacityBytes), reserved: memoryReservationBytes(config, memoryCapacityBytes) }
      : undefined,
  });
}

/** The kubelet and stats provider as the manager's host. */
/** What the eviction host reads of a stats snapshot (StatsSnapshot). */
type EvictionSnapshot = Pick<StatsSnapshot, 'summary' | 'summaryOf' | 'podsWorkingSetBytes'>;

export function evictionHost(
  kubelet: {
    activePods(): Pod[];
    evictPod(pod: Pod, gracePeriodSeconds: number, message: string, opts?: { disruptionTarget?: boolean }): void;
    podTerminated(uid: string): boolean;
    events: { record(object: string, type: 'Normal' | 'Warning', reason: string, message: string): void };
  },
  stats: {
    refresh(): Promise<EvictionSnapshot>;
    snapshot(): Promise<EvictionSnapshot>;
    refreshDiskAccounting?(): Promise<{ summary: Summary }>;
  },
): EvictionHost {
  return {
    activePods: () => kubelet.activePods(),
    summary: async (fresh) => (fresh ? await stats.refresh() : await stats.snapshot()).summary,
    observe: async (fresh, pods) => {
      const snap = fresh ? await stats.refresh() : await stats.snapshot();
      return { summary: snap.summaryOf(pods), podsWorkingSetBytes: snap.podsWorkingSetBytes(), full: () => snap.summary };
    },
    ...(stats.refreshDiskAccounting ? { diskSummary: async () => (await stats.refreshDiskAccounting!()).summary } : {}),
    evictPod: (pod, grace, message, opts) => kubelet.evictPod(pod, grace, message, opts),
    podCleanedUp: (pod) => kubelet.podTerminated(pod.metadata.uid!),
    recordEvent: (pod, type, reason, message) => kubelet.events.record(`Pod ${podFullName(pod)}`, type, reason, message),
  };
}

/** Whether the runtime's images live on another filesystem than the root dir (upstream: a dedicated imagefs). */
export async function dedicatedImageFs(cri: { imageFsInfo(): Promise<{ image_filesystems: { fs_id: { mountpoint: string } | null }[] }> }, rootDir: string): Promise<boolean> {
  try {
    const mountpoint = (await cri.imageFsInfo()).image_filesystems[0]?.fs_id?.mountpoint;
    if (!mountpoint) return false;
    const [a, b] = await Promise.all([stat(mountpoint), stat(rootDir)]);
    return a.dev !== b.dev;
  } catch {
    return false;
  }
}
