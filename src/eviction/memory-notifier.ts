// Which kernel memory-pressure notification the eviction manager gets (kernelMemcgNotification):
// a v1 memory controller has usage thresholds (memcg-notifier.ts); a cgroup2-only host has
// memory.events and PSI on the pods cgroup (memcg-notifier-v2.ts). Hybrid hosts whose memory
// controller is on v1 take the v1 path.

import { cgroupDir, memoryHierarchy, type CgroupMounts } from '../cgroups/index.js';
import type { NativeOomExports } from '../oom/native-types.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { MemcgThresholdNotifier } from './eviction-manager.js';
import { createNativeMemcgNotifier } from './memcg-notifier.js';
import { createV2MemoryNotifier } from './memcg-notifier-v2.js';

export interface MemoryNotifierOptions {
  /** KubeletConfiguration kernelMemcgNotification: off, the manager polls alone. */
  enabled: boolean;
  /** The addon, or why it is not there. */
  native: { native?: NativeOomExports; error?: string };
  mounts: CgroupMounts;
  /** The pods cgroup's name (`/kubepods`). */
  podsCgroupName: string;
  clock: Clock;
  log: Logger;
  onCross: (key: string) => void;
}

/** The notifier for this host's cgroups, or why there is none (then the manager polls alone). */
export function createMemoryNotifier(o: MemoryNotifierOptions): { notifier?: MemcgThresholdNotifier; version?: 1 | 2; reason?: string } {
  if (!o.enabled) return { reason: 'kernelMemcgNotification is off' };
  const { native, error } = o.native;
  if (!native) return { reason: error ?? 'native addon unavailable' };
  const h = memoryHierarchy(o.mounts);
  if (!h) return { reason: 'no memory cgroup hierarchy (neither a v1 memory controller nor a cgroup2-only host)' };
  if (h.version === 1) {
    const r = createNativeMemcgNotifier({ native, mounts: o.mounts, log: o.log, onCross: o.onCross });
    return { ...r, version: 1 };
  }
  const r = createV2MemoryNotifier({ native, podsDir: cgroupDir(h.mount, o.podsCgroupName), clock: o.clock, log: o.log, onCross: o.onCross });
  return { ...r, version: 2 };
}
