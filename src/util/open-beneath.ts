// Opens a path beneath a root without following a symbolic link at any component: each component
// is opened relative to the descriptor of the one before (through /proc/self/fd/<n>/<name>, which
// resolves <name> in that directory as openat does) with O_NOFOLLOW, so a link swapped in at any
// step is refused (ELOOP) rather than followed, and no step is re-resolved from a path string.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { KubeletError } from './errors.js';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_CLOEXEC } = constants as typeof constants & { O_CLOEXEC?: number };

/** A path that is not beneath its root, names a symbolic link, or does not exist (`errno`: why). */
export class BeneathError extends KubeletError {
  constructor(readonly path: string, readonly errno: string, message: string) {
    super('ERR_OPEN_BENEATH', `${path}: ${message}`);
  }
}

/** The descriptor's own path (for reading a directory opened this way). */
export function fdPath(fh: FileHandle): string {
  return `/proc/self/fd/${fh.fd}`;
}

/**
 * Opens `components` (clean names: no '', '.', '..' or '/') beneath the directory `root`, read
 * only; the last one may be a directory or anything else (opened non-blocking: a FIFO does not
 * hang the open). Throws BeneathError naming the path on a link, a missing name or a bad name.
 */
export async function openBeneath(root: string, components: readonly string[]): Promise<FileHandle> {
  const shown = [root, ...components].join('/');
  for (const c of components) {
    if (c === '' || c === '.' || c === '..' || c.includes('/') || c.includes('\0')) throw new BeneathError(shown, 'EINVAL', `invalid path component ${JSON.stringify(c)}`);
  }
  let cur: FileHandle;
  try {
    cur = await open(root, O_RDONLY | O_DIRECTORY | (O_CLOEXEC ?? 0));
  } catch (err) {
    throw new BeneathError(root, (err as NodeJS.ErrnoException).code ?? 'EIO', (err as Error).message);
  }
  for (let i = 0; i < components.length; i++) {
    const last = i === components.length - 1;
    const flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | (O_CLOEXEC ?? 0) | (last ? 0 : O_DIRECTORY);
    let next: FileHandle;
    try {
      next = await open(`${fdPath(cur)}/${components[i]}`, flags);
    } catch (err) {
      await cur.close().catch(() => undefined);
      const code = (err as NodeJS.ErrnoException).code ?? 'EIO';
      const why = code === 'ELOOP' ? 'a symbolic link is not followed' : (err as Error).message.replace(/, open '.*'$/, '');
      throw new BeneathError([root, ...components.slice(0, i + 1)].join('/'), code, why);
    }
    await cur.close().catch(() => undefined);
    cur = next;
  }
  return cur;
}
