// The tmpfs under the volumes that must never reach a disk (secret, projected, downwardAPI).

import { mkdir } from 'node:fs/promises';
import { VolumeSetupError } from './errors.js';
import type { Mounter } from './mounter.js';

/**
 * Mounts a tmpfs at `dir` unless one is there already, then checks it is: secret data is
 * written only onto a tmpfs (the mount is the injected Mounter's, so unit tests run unprivileged).
 */
export async function ensureTmpfs(dir: string, volumeName: string, mounter: Mounter): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o750 });
  const isTmpfs = async () => (await mounter.list()).some((m) => m.mountPoint === dir && m.fsType === 'tmpfs');
  if (await isTmpfs()) return;
  await mounter.mountTmpfs(dir);
  if (!(await isTmpfs())) {
    throw new VolumeSetupError(volumeName, `MountVolume.SetUp failed for volume "${volumeName}" : ${dir} is not a tmpfs after mounting one; refusing to write its data to disk`);
  }
}
