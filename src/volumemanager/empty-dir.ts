// The emptyDir plugin (upstream pkg/volume/emptydir): a directory under the pod's volumes dir,
// mode 0777 whatever the umask; `medium: Memory` mounts a tmpfs there, capped at sizeLimit
// (and at the node's allocatable memory and the pod's memory limit, as upstream).

import { access, chmod, mkdir, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { parseQuantity } from '../api/quantity.js';
import { confinedJoin } from '../util/safe-path.js';
import { VolumeSetupError } from './errors.js';
import type { Mounter } from './mounter.js';
import { setVolumeOwnership } from './ownership.js';
import { lowerToLimit } from './tmpfs.js';

export const EMPTY_DIR_PLUGIN = 'kubernetes.io~empty-dir';

/**
 * Sets up the emptyDir at `<podDir>/volumes/kubernetes.io~empty-dir/<name>`; returns its path.
 * Once set up it is marked ready (upstream's `<podDir>/plugins/kubernetes.io~empty-dir/<name>/ready`):
 * later syncs, and a restarted kubelet-ts, leave it as it is (a tmpfs is mounted again if gone).
 * The pod's fsGroup is applied when it is set up, without a change policy, as upstream.
 */
export async function setUpEmptyDir(podDirectory: string, volumeName: string, source: { medium?: string; sizeLimit?: string | number }, mounter: Mounter, fsGroup?: number, memoryCapBytes?: number): Promise<string> {
  const dir = confinedJoin(podDirectory, 'volumes', EMPTY_DIR_PLUGIN, volumeName);
  const readyFile = confinedJoin(podDirectory, 'plugins', EMPTY_DIR_PLUGIN, volumeName, 'ready');
  const medium = source.medium ?? '';
  if (medium !== '' && medium !== 'Memory') {
    throw new VolumeSetupError(volumeName, `emptyDir medium ${JSON.stringify(medium)} of volume "${volumeName}" is not supported (only "" and "Memory")`);
  }
  try {
    const ready = await access(readyFile).then(() => true, () => false);
    const mounted = medium === 'Memory' && (await mounter.list()).some((m) => m.mountPoint === dir && m.fsType === 'tmpfs');
    if (ready && (medium === '' || mounted)) return dir;
    await mkdir(dir, { recursive: true, mode: 0o750 });
    if (medium === 'Memory') {
      if (!mounted) {
        let size: number | undefined;
        if (source.sizeLimit !== undefined && source.sizeLimit !== '') {
          size = parseQuantity(source.sizeLimit).value();
        }
        // memoryCapBytes: node allocatable lowered to the pod's limit (memoryVolumeSizeBytes)
        await mounter.mountTmpfs(dir, lowerToLimit(memoryCapBytes, size));
      }
    }
    // upstream: the volume is 0777 so any container user can write
    await chmod(dir, 0o777);
    await setVolumeOwnership(dir, fsGroup, false);
    await mkdir(posix.dirname(readyFile), { recursive: true, mode: 0o750 });
    await writeFile(readyFile, '', { mode: 0o600 });
    return dir;
  } catch (err) {
    if (err instanceof VolumeSetupError) throw err;
    throw new VolumeSetupError(volumeName, `emptyDir volume "${volumeName}": ${(err as Error).message}`, { cause: err });
  }
}
