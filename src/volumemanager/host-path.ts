// The hostPath plugin (upstream pkg/volume/hostpath): the host path itself is mounted, nothing
// is made under the pod directory. `type` asks for a check (and, for the *OrCreate types, a
// creation) before the mount; the messages are upstream's.

import { mkdir, open, stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { isAbsolute, posix } from 'node:path';
import { VolumeSetupError } from './errors.js';

export const HOST_PATH_PLUGIN = 'kubernetes.io~host-path';

export type HostPathType = '' | 'DirectoryOrCreate' | 'Directory' | 'FileOrCreate' | 'File' | 'Socket' | 'CharDevice' | 'BlockDevice';

async function statOrUndefined(p: string): Promise<Stats | undefined> {
  try {
    return await stat(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Checks (and for the *OrCreate types makes) the host path; returns it, cleaned. */
export async function setUpHostPath(volumeName: string, source: { path: string; type?: string }): Promise<string> {
  const path = source.path;
  if (typeof path !== 'string' || !isAbsolute(path)) {
    throw new VolumeSetupError(volumeName, `hostPath ${JSON.stringify(path)} of volume "${volumeName}" is not an absolute path`);
  }
  const clean = posix.normalize(path);
  const type = (source.type ?? '') as HostPathType;
  const fail = (what: string): never => {
    throw new VolumeSetupError(volumeName, `hostPath type check failed: ${clean} is not ${what}`);
  };
  let st: Stats | undefined;
  try {
    st = await statOrUndefined(clean);
    switch (type) {
      case '':
        return clean;
      case 'DirectoryOrCreate':
        if (!st) {
          await mkdir(clean, { recursive: true, mode: 0o755 });
          st = await stat(clean);
        }
        if (!st.isDirectory()) fail('a directory');
        return clean;
      case 'Directory':
        if (!st?.isDirectory()) fail('a directory');
        return clean;
      case 'FileOrCreate':
        if (!st) {
          // O_CREAT without O_EXCL, as upstream; the parent is not created (documented upstream)
          const fh = await open(clean, 'a', 0o644);
          await fh.close();
          st = await stat(clean);
        }
        if (!st.isFile()) fail('a file');
        return clean;
      case 'File':
        if (!st?.isFile()) fail('a file');
        return clean;
      case 'Socket':
        if (!st?.isSocket()) fail('a socket file');
        return clean;
      case 'CharDevice':
        if (!st?.isCharacterDevice()) fail('a character device');
        return clean;
      case 'BlockDevice':
        if (!st?.isBlockDevice()) fail('a block device');
        return clean;
      default:
        throw new VolumeSetupError(volumeName, `${String(type)} is an invalid volume type`);
    }
  } catch (err) {
    if (err instanceof VolumeSetupError) throw err;
    throw new VolumeSetupError(volumeName, `hostPath ${clean} of volume "${volumeName}": ${(err as Error).message}`, { cause: err });
  }
}
