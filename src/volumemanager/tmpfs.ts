// The tmpfs under the volumes that must never reach a disk (secret, projected, downwardAPI).

import { mkdir } from 'node:fs/promises';
import type { Pod } from '../api/types.js';
import { podCgroupResources } from '../runtime/resources.js';
import { VolumeSetupError } from './errors.js';
import type { Mounter } from './mounter.js';

/** upstream: a limit replaces the size when it is above 0 and not above the size. */
export function lowerToLimit(size: number | undefined, limit: number | undefined): number | undefined {
  if (limit === undefined || !(limit > 0)) return size;
  return size === undefined || limit <= size ? limit : size;
}

/**
 * The size of a memory-backed volume's tmpfs (upstream calculateEmptyDirMemorySize, with
 * SizeMemoryBackedVolumes on as by default): the node's allocatable memory, lowered to the
 * pod's memory limit (its pod cgroup's) and then to the volume's own sizeLimit. Secret,
 * projected and downwardAPI volumes wrap a memory emptyDir without sizeLimit, so they get the
 * first two: a pod cannot fill the node's memory through them. Undefined: no cap known.
 */
export function memoryVolumeSizeBytes(pod: Pod, nodeAllocatableMemoryBytes: number | undefined, volumeSizeLimitBytes?: number): number | undefined {
  const node = nodeAllocatableMemoryBytes !== undefined && nodeAllocatableMemoryBytes > 0 ? nodeAllocatableMemoryBytes : undefined;
  return lowerToLimit(lowerToLimit(node, podCgroupResources(pod).memoryLimitBytes), volumeSizeLimitBytes);
}

/**
 * Mounts a tmpfs at `dir` (`size=` sizeBytes when given) unless one is there already, then checks
 * it is: secret data is written only onto a tmpfs (the mount is the injected Mounter's, so unit
 * tests run unprivileged).
 */
export async function ensureTmpfs(dir: string, volumeName: string, mounter: Mounter, sizeBytes?: number): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o750 });
  const isTmpfs = async () => (await mounter.list()).some((m) => m.mountPoint === dir && m.fsType === 'tmpfs');
  if (await isTmpfs()) return;
  await mounter.mountTmpfs(dir, sizeBytes);
  if (!(await isTmpfs())) {
    throw new VolumeSetupError(volumeName, `MountVolume.SetUp failed for volume "${volumeName}" : ${dir} is not a tmpfs after mounting one; refusing to write its data to disk`);
  }
}
