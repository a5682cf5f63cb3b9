// Filesystem accounting (upstream: the kubelet's du and find walks of volumes, logs and
// writable layers), as a Piscina task module: bytes as `du -x -s -B1` counts them (allocated
// blocks), inodes as `find -xdev | wc -l`; symlinks are counted, never followed, a hard link
// once; the walk stays on the device of the path it starts from, and reaches each directory from
// its parent's descriptor (O_NOFOLLOW), so a directory swapped for a link mid-walk is not followed.

import { constants } from 'node:fs';
import { lstat, open, opendir, readdir, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

export interface UsageRequest {
  path: string;
  /** 0: the path as one figure; 2: one figure per entry two levels down (volumes/<plugin>/<name>). */
  split?: 0 | 2;
}

export interface Usage {
  bytes: number;
  inodes: number;
  /** The device of the walk's root differs from its parent's (a mount: tmpfs emptyDir). */
  mount: boolean;
}

export interface UsageAnswer {
  /** undefined when the path does not exist (or cannot be read: `error` says why). */
  usage?: Usage;
  /** split = 2: `<plugin>/<name>` → its usage. */
  children?: Record<string, Usage>;
  error?: string;
}

/** Directory descriptors one walk keeps open; deeper ones are reopened from their parent's. */
const MAX_OPEN_DIRS = 32;

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

const gone = (err: unknown): boolean => ['ENOENT', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');
const refused = (err: unknown): boolean => gone(err) || (err as NodeJS.ErrnoException).code === 'ELOOP';

/** `name` in the directory open as `fh`, resolved as openat/fstatat resolve it (no path string re-resolved). */
const at = (fh: FileHandle, name: string): string => `/proc/self/fd/${fh.fd}/${name}`;

interface Frame {
  fh?: FileHandle;
  dev: bigint;
  ino: bigint;
  name: string;
  names: string[];
  next: number;
}

/**
 * du + find of one tree; undefined when the root is gone. Each directory below the root is opened
 * from its parent's descriptor with O_NOFOLLOW and each entry lstat'ed within it, so a directory
 * swapped for a symbolic link during the walk is never followed, at any depth.
 */
export async function walk(root: string): Promise<Usage | undefined> {
  let st;
  try {
    st = await lstat(root, { bigint: true });
  } catch (err) {
    if (gone(err)) return undefined;
    throw err;
  }
  let parentDev: bigint | undefined;
  try {
    parentDev = (await lstat(join(root, '..'), { bigint: true })).dev;
  } catch { /* the root of the filesystem */ }
  const dev = st.dev;
  const seen = new Set<string>();
  let bytes = 0;
  let inodes = 0;
  const count = (s: { dev: bigint; ino: bigint; blocks: bigint; nlink: bigint }): void => {
    if (s.nlink > 1n) {
      const key = `${s.dev}:${s.ino}`;
      if (seen.has(key)) return;
      seen.add(key);
    }
    bytes += Number(s.blocks) * 512;
    inodes++;
  };
  count(st);
  const result = (): Usage => ({ bytes, inodes, mount: parentDev !== undefined && parentDev !== dev });
  if (!st.isDirectory()) return result();

  const frames: Frame[] = [];
  let openCount = 0;
  const opened = async (i: number, fh: FileHandle): Promise<void> => {
    frames[i]!.fh = fh;
    openCount++;
    for (let k = 1; openCount > MAX_OPEN_DIRS && k < frames.length; k++) {
      if (k !== i && frames[k]!.fh) await closeFrame(frames[k]!);
    }
  };
  const closeFrame = async (f: Frame): Promise<void> => {
    const fh = f.fh;
    if (!fh) return;
    f.fh = undefined;
    openCount--;
    await fh.close().catch(() => undefined);
  };
  /** Frame i's directory, reopened from its parent's if closed; undefined when it changed or went. */
  const dirOf = async (i: number): Promise<FileHandle | undefined> => {
    const f = frames[i]!;
    if (f.fh) return f.fh;
    if (i === 0) return undefined;
    const parent = await dirOf(i - 1);
    if (!parent) return undefined;
    const fh = await open(at(parent, f.name), DIR_FLAGS).catch(() => undefined);
    if (!fh) return undefined;
    const s = await fh.stat({ bigint: true }).catch(() => undefined);
    if (!s || s.dev !== f.dev || s.ino !== f.ino) {
      await fh.close().catch(() => undefined);
      return undefined;
    }
    await opened(i, fh);
    return fh;
  };
  /** Pushes the directory open as `fh` (already checked to be what was lstat'ed). */
  const push = async (fh: FileHandle, name: string, s: { dev: bigint; ino: bigint }): Promise<void> => {
    let names: string[];
    try {
      names = await readdir(`/proc/self/fd/${fh.fd}`);
    } catch (err) {
      await fh.close().catch(() => undefined);
      if (gone(err)) return;
      throw err;
    }
    frames.push({ dev: s.dev, ino: s.ino, name, names, next: 0 });
    await opened(frames.length - 1, fh);
  };

  try {
    let rootFh: FileHandle;
    try {
      rootFh = await open(root, DIR_FLAGS);
    } catch (err) {
      if (refused(err)) return result();
      throw err;
    }
    const rs = await rootFh.stat({ bigint: true });
    if (rs.dev !== st.dev || rs.ino !== st.ino) {
      // replaced between the lstat and the open: what was counted stands
      await rootFh.close();
      return result();
    }
    await push(rootFh, '', rs);
    while (frames.length > 0) {
      const top = frames.length - 1;
      const f = frames[top]!;
      if (f.next >= f.names.length) {
        await closeFrame(f);
        frames.pop();
        continue;
      }
      const name = f.names[f.next++]!;
      const dir = await dirOf(top);
      if (!dir) {
        // replaced or removed under the walk: the rest of it is not this tree's
        f.next = f.names.length;
        continue;
      }
      let s;
      try {
        s = await lstat(at(dir, name), { bigint: true });
      } catch (err) {
        if (gone(err)) continue;
        throw err;
      }
      // -x: another filesystem mounted below is not this tree's usage
      if (s.dev !== dev) continue;
      count(s);
      if (!s.isDirectory()) continue;
      let child: FileHandle;
      try {
        child = await open(at(dir, name), DIR_FLAGS);
      } catch (err) {
        if (refused(err)) continue;
        throw err;
      }
      const cs = await child.stat({ bigint: true });
      if (cs.dev !== s.dev || cs.ino !== s.ino) {
        await child.close();
        continue;
      }
      await push(child, name, cs);
    }
  } finally {
    for (const f of frames) await closeFrame(f);
  }
  return result();
}

async function measure(r: UsageRequest): Promise<UsageAnswer> {
  try {
    if (r.split !== 2) {
      const usage = await walk(r.path);
      return usage ? { usage } : {};
    }
    const children: Record<string, Usage> = {};
    let plugins;
    try {
      plugins = await opendir(r.path);
    } catch (err) {
      if (gone(err)) return {};
      throw err;
    }
    for await (const p of plugins) {
      if (!p.isDirectory()) continue;
      let names;
      try {
        names = await opendir(join(r.path, p.name));
      } catch (err) {
        if (gone(err)) continue;
        throw err;
      }
      for await (const n of names) {
        const u = await walk(join(r.path, p.name, n.name));
        if (u) children[`${p.name}/${n.name}`] = u;
      }
    }
    return { children };
  } catch (err) {
    return { error: `${r.path}: ${(err as Error).message}` };
  }
}

/** The Piscina task: the paths of one batch, measured one after the other (the pool bounds the batches). */
export default async function task(reqs: UsageRequest[]): Promise<UsageAnswer[]> {
  const out: UsageAnswer[] = [];
  for (const r of reqs) out.push(await measure(r));
  return out;
}
