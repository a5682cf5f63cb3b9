// The few mount operations the volume manager needs (tmpfs for memory-backed emptyDirs), behind
// an interface so plugin tests run unprivileged. The real one shells out to mount(8)/umount(8)
// and reads /proc/self/mountinfo.

import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { KubeletError } from '../util/errors.js';

const run = promisify(execFile);

export interface MountPoint {
  mountPoint: string;
  fsType: string;
}

export interface Mounter {
  /** Mounts a tmpfs at `target`, `sizeBytes` capped when given. */
  mountTmpfs(target: string, sizeBytes?: number): Promise<void>;
  unmount(target: string): Promise<void>;
  /** Every mount point of this mount namespace. */
  list(): Promise<MountPoint[]>;
}

export class MountError extends KubeletError {
  constructor(readonly target: string, message: string, options?: { cause?: unknown }) {
    super('ERR_MOUNT', `${message} (${target})`, options);
  }
}

/** Decodes mountinfo's octal escapes (`\040` for a space). */
function unescapeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Mount points from /proc/self/mountinfo text: field 5 is the mount point, the type follows " - ". */
export function parseMountInfo(text: string): MountPoint[] {
  const out: MountPoint[] = [];
  for (const line of text.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const right = line.slice(sep + 3).split(' ');
    if (left.length < 5 || !right[0]) continue;
    out.push({ mountPoint: unescapeMountPath(left[4]!), fsType: right[0] });
  }
  return out;
}

export const systemMounter: Mounter = {
  async mountTmpfs(target, sizeBytes) {
    const args = ['-t', 'tmpfs'];
    if (sizeBytes !== undefined) args.push('-o', `size=${sizeBytes}`);
    try {
      await run('mount', [...args, 'tmpfs', target]);
    } catch (err) {
      throw new MountError(target, `mount -t tmpfs failed: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`, { cause: err });
    }
  },
  async unmount(target) {
    try {
      await run('umount', [target]);
    } catch (err) {
      throw new MountError(target, `umount failed: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`, { cause: err });
    }
  },
  async list() {
    return parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8'));
  },
};
