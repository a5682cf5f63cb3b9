// fsGroup ownership of a volume (upstream pkg/volume/volume_linux.go SetVolumeOwnership): every
// entry under the volume, symlinks themselves included (never followed), gets the pod's fsGroup
// as its group and the group read/write bits (read only for read-only volumes), directories
// also setgid and the execute bits. fsGroupChangePolicy OnRootMismatch skips the walk when the
// root already looks done.
//
// Upstream's emptyDir, configMap, secret, downwardAPI and projected plugins call this without a
// policy (the API documents fsGroupChangePolicy as having no effect on those ephemeral types):
// the policy argument is for plugins that honour it.

import { lchown, lstat, readdir, stat, chmod } from 'node:fs/promises';
import { posix } from 'node:path';

export type FSGroupChangePolicy = 'Always' | 'OnRootMismatch';

const RW_MASK = 0o660;
const RO_MASK = 0o440;
const EXEC_MASK = 0o110;
const SETGID = 0o2000;

/** upstream requiresPermissionChange: the root's group, setgid bit and group permissions. */
export async function requiresPermissionChange(dir: string, fsGroup: number, readOnly: boolean): Promise<boolean> {
  const st = await stat(dir);
  if (st.gid !== fsGroup) return true;
  if ((st.mode & SETGID) === 0) return true;
  const want = (readOnly ? RO_MASK : RW_MASK) | EXEC_MASK;
  return (st.mode & want) !== want;
}

/**
 * Gives the volume at `dir` to `fsGroup`. Returns false when nothing was done (no fsGroup, or
 * OnRootMismatch with a root already right).
 */
export async function setVolumeOwnership(dir: string, fsGroup: number | undefined, readOnly: boolean, policy?: FSGroupChangePolicy): Promise<boolean> {
  if (fsGroup === undefined || fsGroup === null) return false;
  if (policy === 'OnRootMismatch' && !(await requiresPermissionChange(dir, fsGroup, readOnly))) return false;
  const fileMask = readOnly ? RO_MASK : RW_MASK;
  const change = async (p: string): Promise<void> => {
    const st = await lstat(p);
    await lchown(p, -1, fsGroup);
    if (st.isSymbolicLink()) return;
    const mask = st.isDirectory() ? fileMask | SETGID | EXEC_MASK : fileMask;
    await chmod(p, (st.mode & 0o7777) | mask);
    if (st.isDirectory()) {
      for (const name of await readdir(p)) await change(posix.join(p, name));
    }
  };
  await change(dir);
  return true;
}
