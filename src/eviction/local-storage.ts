// Local ephemeral storage limits (upstream localStorageEviction, run on every pass while
// LocalStorageCapacityIsolation is on, before any threshold): a pod is evicted when one of its
// emptyDir volumes uses more than its sizeLimit, when its ephemeral-storage figure exceeds the
// sum of its containers' ephemeral-storage limits, or when a container's logs (and writable
// layer, unless the images have their own filesystem) exceed that container's limit. The rules
// are tried in that order and the first one broken names the eviction.

import type { Pod } from '../api/types.js';
import { Quantity, parseQuantity } from '../api/quantity.js';
import { podLimits } from '../runtime/resources.js';
import type { PodStats } from '../stats/summary.js';

/** The `eviction_signal` labels of kubelet_evictions for these evictions (upstream's names). */
export const SIGNAL_EMPTY_DIR_FS_LIMIT = 'emptydirfs.limit';
export const SIGNAL_EPHEMERAL_POD_FS_LIMIT = 'ephemeralpodfs.limit';
export const SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT = 'ephemeralcontainerfs.limit';

export type LocalStorageSignal =
  | typeof SIGNAL_EMPTY_DIR_FS_LIMIT
  | typeof SIGNAL_EPHEMERAL_POD_FS_LIMIT
  | typeof SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT;

const EPHEMERAL_STORAGE = 'ephemeral-storage';

// Go's %q; JSON's quoting agrees with it for volume names (DNS labels) and quantities.
const quote = (s: string): string => JSON.stringify(s);

// upstream's messages (pkg/kubelet/eviction/helpers.go)
export const emptyDirMessage = (volume: string, limit: string): string =>
  `Usage of EmptyDir volume ${quote(volume)} exceeds the limit ${quote(limit)}. `;
export const podEphemeralStorageMessage = (limit: string): string =>
  `Pod ephemeral local storage usage exceeds the total limit of containers ${limit}. `;
export const containerEphemeralStorageMessage = (container: string, limit: string): string =>
  `Container ${container} exceeded its local ephemeral storage limit ${quote(limit)}. `;

export interface LocalStorageViolation {
  signal: LocalStorageSignal;
  message: string;
}

export interface LocalStorageOptions {
  /** Writable layers live on the image filesystem: a container's limit then counts its logs only (as upstream). */
  dedicatedImageFs: boolean;
}

/** A written quantity, or undefined when absent or unparsable (admission refuses those). */
function quantityOf(q: string | number | undefined): Quantity | undefined {
  if (q === undefined || q === '') return undefined;
  try {
    return parseQuantity(q);
  } catch {
    return undefined;
  }
}

const bytes = (n: bigint): Quantity => Quantity.fromValue(n, 'BinarySI');

/**
 * What a pod spec declares for local storage, parsed once per spec object (specs are replaced,
 * never edited, when a pod changes): every eviction pass (10 s) over unchanged pods parses nothing.
 */
interface StorageLimits {
  /** emptyDir volumes with a positive sizeLimit. */
  emptyDirs: { name: string; size: Quantity }[];
  /** The pod's ephemeral-storage limit, computed on first use (null: none). */
  pod?: Quantity | null;
  /** Regular containers' non-zero ephemeral-storage limits by name. */
  containers: Map<string, Quantity>;
}

const limitsBySpec = new WeakMap<Pod['spec'], StorageLimits>();

function storageLimits(pod: Pod): StorageLimits {
  let l = limitsBySpec.get(pod.spec);
  if (l) return l;
  l = { emptyDirs: [], containers: new Map() };
  for (const v of pod.spec.volumes ?? []) {
    if (!v.emptyDir) continue;
    const size = quantityOf(v.emptyDir.sizeLimit);
    if (size !== undefined && size.sign() === 1) l.emptyDirs.push({ name: v.name, size });
  }
  for (const c of pod.spec.containers) {
    const q = quantityOf(c.resources?.limits?.[EPHEMERAL_STORAGE]);
    if (q !== undefined && q.valueBig() !== 0n) l.containers.set(c.name, q);
  }
  limitsBySpec.set(pod.spec, l);
  return l;
}

/**
 * Whether the pod declares a limit any rule here checks (an emptyDir sizeLimit, an
 * ephemeral-storage limit): a pod without one is never evicted here, and needs no stats.
 */
export function declaresLocalStorageLimits(pod: Pod): boolean {
  const l = storageLimits(pod);
  if (l.pod === undefined) l.pod = podEphemeralStorageLimit(pod) ?? null;
  return l.emptyDirs.length > 0 || l.containers.size > 0 || l.pod !== null;
}

/** An emptyDir (any medium) whose measured usage is above a positive sizeLimit. */
function emptyDirOverLimit(pod: Pod, stats: PodStats): LocalStorageViolation | undefined {
  const { emptyDirs } = storageLimits(pod);
  if (emptyDirs.length === 0) return undefined;
  const used = new Map<string, bigint>();
  for (const v of stats.volume ?? []) if (v.usedBytes !== undefined) used.set(v.name, v.usedBytes);
  for (const { name, size } of emptyDirs) {
    const u = used.get(name);
    if (u === undefined) continue;
    if (bytes(u).cmp(size) > 0) return { signal: SIGNAL_EMPTY_DIR_FS_LIMIT, message: emptyDirMessage(name, size.toString()) };
  }
  return undefined;
}

/**
 * The pod's ephemeral-storage limit (upstream PodLimits): the containers' limits summed (those
 * without one add nothing), init containers at their peak, plus overhead; undefined when no
 * container declares one. It keeps the written format of the first declared limit.
 */
export function podEphemeralStorageLimit(pod: Pod): Quantity | undefined {
  const milli = podLimits(pod).get(EPHEMERAL_STORAGE);
  if (milli === undefined) return undefined;
  const first = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])]
    .map((c) => quantityOf(c.resources?.limits?.[EPHEMERAL_STORAGE]))
    .find((q) => q !== undefined);
  return Quantity.fromMilli(milli, first?.format ?? 'BinarySI');
}

/** The pod's ephemeral-storage figure (0 when unmeasured, as upstream) above the pod's limit. */
function podOverLimit(pod: Pod, stats: PodStats): LocalStorageViolation | undefined {
  const l = storageLimits(pod);
  if (l.pod === undefined) l.pod = podEphemeralStorageLimit(pod) ?? null;
  const limit = l.pod;
  if (limit === null) return undefined;
  const used = bytes(stats['ephemeral-storage']?.usedBytes ?? 0n);
  if (used.cmp(limit) <= 0) return undefined;
  return { signal: SIGNAL_EPHEMERAL_POD_FS_LIMIT, message: podEphemeralStorageMessage(limit.toString()) };
}

/** A regular container whose logs (+ writable layer on a shared filesystem) are above its own non-zero limit. */
function containerOverLimit(pod: Pod, stats: PodStats, dedicatedImageFs: boolean): LocalStorageViolation | undefined {
  const limits = storageLimits(pod).containers;
  if (limits.size === 0) return undefined;
  for (const cs of stats.containers) {
    const limit = limits.get(cs.name);
    if (!limit) continue;
    let used = cs.logs?.usedBytes ?? 0n;
    if (!dedicatedImageFs) used += cs.rootfs?.usedBytes ?? 0n;
    if (limit.cmp(bytes(used)) < 0) {
      return { signal: SIGNAL_EPHEMERAL_CONTAINER_FS_LIMIT, message: containerEphemeralStorageMessage(cs.name, limit.toString()) };
    }
  }
  return undefined;
}

/** The first local storage limit the pod breaks, in upstream's order, or undefined. */
export function localStorageViolation(pod: Pod, stats: PodStats, opts: LocalStorageOptions): LocalStorageViolation | undefined {
  return emptyDirOverLimit(pod, stats) ?? podOverLimit(pod, stats) ?? containerOverLimit(pod, stats, opts.dedicatedImageFs);
}
