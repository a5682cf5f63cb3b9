// Filesystem accounting (upstream: the kubelet's du and find walks of volumes, logs and
// writable layers), as a Piscina task module: bytes as `du -x -s -B1` counts them (allocated
// blocks), inodes as `find -xdev | wc -l`; symlinks are counted, never followed, a hard link
// once; the walk stays on the device of the path it starts from.

import { lstat, opendir } from 'node:fs/promises';
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

/** Directories read at once within one walk. */
const WALK_CONCURRENCY = 8;

const gone = (err: unknown): boolean => ['ENOENT', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');

/** du + find of one tree; undefined when the root is gone. */
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
  if (!st.isDirectory()) return { bytes, inodes, mount: parentDev !== undefined && parentDev !== dev };
  const dirs: string[] = [root];
  const readDir = async (dir: string): Promise<void> => {
    let d;
    try {
      d = await opendir(dir);
    } catch (err) {
      if (gone(err)) return;
      throw err;
    }
    for await (const e of d) {
      const p = join(dir, e.name);
      let s;
      try {
        s = await lstat(p, { bigint: true });
      } catch (err) {
        if (gone(err)) continue;
        throw err;
      }
      // -x: another filesystem mounted below is not this tree's usage
      if (s.dev !== dev) continue;
      count(s);
      if (s.isDirectory()) dirs.push(p);
    }
  };
  // A work list of directories, at most WALK_CONCURRENCY read at once.
  await new Promise<void>((resolve, reject) => {
    let active = 0;
    const next = (): void => {
      while (active < WALK_CONCURRENCY && dirs.length) {
        active++;
        readDir(dirs.pop()!).then(() => {
          active--;
          if (active === 0 && dirs.length === 0) resolve();
          else next();
        }, reject);
      }
    };
    next();
  });
  return { bytes, inodes, mount: parentDev !== undefined && parentDev !== dev };
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
