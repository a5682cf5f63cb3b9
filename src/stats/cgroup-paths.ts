// Where cgroups live: the cgroup mounts of this host (v1 controller hierarchies, the v2
// unified mount, or both on hybrid hosts) and, for a cgroup path such as
// /kubepods/burstable/pod<uid>/<container-id>, the directories and files to read.
import { readFile } from 'node:fs/promises';
import path from 'node:path';

import { filesOfRef, type CgroupRef, type CgroupV1Ref } from './cgroup-sample.js';

/** The v1 controllers the readers use (cpu and cpuacct may be mounted apart or together). */
export const V1_CONTROLLERS = ['cpu', 'cpuacct', 'memory', 'pids', 'blkio'] as const;
export type V1Controller = (typeof V1_CONTROLLERS)[number];

export interface CgroupMount {
  /** Where the hierarchy is mounted, e.g. /sys/fs/cgroup/memory. */
  mountPoint: string;
  /** The cgroup the mount shows as its root (`/` on a host, deeper inside a container). */
  root: string;
}

export interface CgroupMounts {
  /** The cgroup2 mount, if any. */
  unified?: CgroupMount;
  /** The v1 hierarchy of each controller, if mounted. */
  v1: Partial<Record<V1Controller, CgroupMount>>;
  /** Every other v1 hierarchy (cpuset, devices, freezer, name=systemd, ...), by mount option. */
  otherV1?: Record<string, CgroupMount>;
}

/** Every distinct hierarchy mount (v1 ones and the unified one): where a cgroup dir may exist. */
export function allHierarchies(mounts: CgroupMounts): CgroupMount[] {
  const seen = new Map<string, CgroupMount>();
  for (const m of [...Object.values(mounts.v1), ...Object.values(mounts.otherV1 ?? {}), mounts.unified]) {
    if (m && !seen.has(m.mountPoint)) seen.set(m.mountPoint, m);
  }
  return [...seen.values()];
}

/** v2: only cgroup2; hybrid: v1 controllers plus a cgroup2 mount; v1: no cgroup2 mount. */
export type CgroupMode = 'v1' | 'v2' | 'hybrid' | 'none';

export function cgroupMode(mounts: CgroupMounts): CgroupMode {
  const v1 = Object.keys(mounts.v1).length > 0;
  if (v1) return mounts.unified ? 'hybrid' : 'v1';
  return mounts.unified ? 'v2' : 'none';
}

/** Undoes mountinfo's octal escapes (\040 for a space, ...). */
function unescapeMountField(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The cgroup mounts in /proc/<pid>/mountinfo text. The first mount of a hierarchy wins. */
export function parseMountInfo(text: string): CgroupMounts {
  const mounts: CgroupMounts = { v1: {}, otherV1: {} };
  for (const line of text.split('\n')) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const right = line.slice(sep + 3).split(' ');
    if (left.length < 5 || right.length < 3) continue;
    const mount: CgroupMount = { root: unescapeMountField(left[3]!), mountPoint: unescapeMountField(left[4]!) };
    const fstype = right[0];
    if (fstype === 'cgroup2') {
      mounts.unified ??= mount;
    } else if (fstype === 'cgroup') {
      for (const opt of right[2]!.split(',')) {
        if ((V1_CONTROLLERS as readonly string[]).includes(opt)) mounts.v1[opt as V1Controller] ??= mount;
        else if (!['rw', 'ro', 'noprefix', 'clone_children', 'xattr'].includes(opt) && !opt.startsWith('release_agent=')) mounts.otherV1![opt] ??= mount;
      }
    }
  }
  return mounts;
}

/** Reads and parses this process's mountinfo. */
export async function discoverCgroupMounts(mountinfoPath = '/proc/self/mountinfo'): Promise<CgroupMounts> {
  return parseMountInfo(await readFile(mountinfoPath, 'utf8'));
}

/** The directory of an absolute cgroup path in a hierarchy, honouring the mount's root. */
export function cgroupDir(mount: CgroupMount, cgroupPath: string): string {
  const abs = path.posix.normalize('/' + cgroupPath);
  let rel = abs;
  if (mount.root !== '/' && (abs === mount.root || abs.startsWith(mount.root + '/'))) rel = abs.slice(mount.root.length);
  return path.posix.join(mount.mountPoint, rel);
}

/**
 * The ref for a cgroup path. Any v1 controller mounted → a v1 ref (controller dirs, plus
 * the unified dir on hybrid hosts for PSI); only cgroup2 → a v2 ref.
 */
export function cgroupRefFor(mounts: CgroupMounts, cgroupPath: string): CgroupRef {
  const mode = cgroupMode(mounts);
  if (mode === 'none') throw new Error('no cgroup hierarchy is mounted');
  if (mode === 'v2') return { version: 2, dir: cgroupDir(mounts.unified!, cgroupPath) };
  const ref: { -readonly [K in keyof CgroupV1Ref]: CgroupV1Ref[K] } = { version: 1 };
  for (const c of V1_CONTROLLERS) {
    const m = mounts.v1[c];
    if (m) ref[c] = cgroupDir(m, cgroupPath);
  }
  if (mounts.unified) ref.unified = cgroupDir(mounts.unified, cgroupPath);
  return ref;
}

/** The files the readers open for a ref, in reading order. */
export function cgroupFilesFor(ref: CgroupRef): string[] {
  return filesOfRef(ref).map(([spec, dir]) => `${dir}/${spec.name}`);
}
