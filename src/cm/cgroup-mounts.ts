// Where the cgroup hierarchies are mounted: cgroup v1 controllers (possibly each on its own
// mount, as cpu and cpuacct are here), and the cgroup v2 unified mount.

import { readFile } from 'node:fs/promises';

export interface CgroupMounts {
  /** 2 when the unified hierarchy carries the controllers (a pure v2 node), else 1. */
  version: 1 | 2;
  /** v1: controller name (cpu, cpuacct, memory, pids, blkio, cpuset, ..., name=systemd) → mount point. */
  v1: Map<string, string>;
  /** The cgroup2 mount, if any (on a hybrid node it holds no memory controller). */
  unified?: string;
}

/** Parses /proc/self/mountinfo text. */
export function parseCgroupMounts(mountinfo: string): CgroupMounts {
  const v1 = new Map<string, string>();
  let unified: string | undefined;
  for (const line of mountinfo.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const pre = line.slice(0, sep).split(' ');
    const post = line.slice(sep + 3).split(' ');
    const mountPoint = pre[4];
    const fsType = post[0];
    if (!mountPoint) continue;
    if (fsType === 'cgroup2') {
      unified ??= mountPoint;
    } else if (fsType === 'cgroup') {
      for (const opt of (post[2] ?? '').split(',')) {
        if (opt === 'rw' || opt === 'ro' || opt.startsWith('release_agent') || opt === 'clone_children' || opt === 'noprefix' || opt === 'xattr') continue;
        if (!v1.has(opt)) v1.set(opt, mountPoint);
      }
    }
  }
  return { version: v1.size > 0 ? 1 : 2, v1, unified };
}

export async function discoverCgroupMounts(): Promise<CgroupMounts> {
  return parseCgroupMounts(await readFile('/proc/self/mountinfo', 'utf8'));
}

/** Every distinct hierarchy root (v1 mount points plus the unified mount). */
export function hierarchyRoots(m: CgroupMounts): string[] {
  const roots = new Set(m.v1.values());
  if (m.unified) roots.add(m.unified);
  return [...roots];
}
