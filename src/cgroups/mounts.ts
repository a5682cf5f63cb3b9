// The cgroup mounts of this host: v1 controller hierarchies, the v2 unified mount, or both on
// hybrid hosts. Discovery reads /proc/self/mountinfo once per process (per mountinfo path):
// the kubelet, the pod cgroup manager and the stats provider all ask at start-up.
import { readFile } from 'node:fs/promises';

/** The v1 controllers the readers and the pod cgroup manager use (cpu and cpuacct may share a mount). */
export const V1_CONTROLLERS = ['cpu', 'cpuacct', 'memory', 'pids', 'blkio'] as const;
export type V1Controller = (typeof V1_CONTROLLERS)[number];

export const DEFAULT_MOUNTINFO = '/proc/self/mountinfo';

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

const NOT_A_HIERARCHY = ['rw', 'ro', 'noprefix', 'clone_children', 'xattr'];

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
        else if (!NOT_A_HIERARCHY.includes(opt) && !opt.startsWith('release_agent=') && !Object.hasOwn(mounts.otherV1!, opt)) {
          // defined, not assigned: an option named __proto__ (or constructor, ...) is a key like any other
          Object.defineProperty(mounts.otherV1, opt, { value: mount, enumerable: true, writable: true, configurable: true });
        }
      }
    }
  }
  return mounts;
}

const discovered = new Map<string, Promise<CgroupMounts>>();

/**
 * The cgroup mounts of this process, read from `mountinfoPath` once: later callers share the
 * first read (mounts do not move under a running kubelet). A failed read is not kept.
 */
export function discoverCgroupMounts(mountinfoPath: string = DEFAULT_MOUNTINFO): Promise<CgroupMounts> {
  let p = discovered.get(mountinfoPath);
  if (!p) {
    p = readFile(mountinfoPath, 'utf8').then(parseMountInfo);
    p.catch(() => {
      if (discovered.get(mountinfoPath) === p) discovered.delete(mountinfoPath);
    });
    discovered.set(mountinfoPath, p);
  }
  return p;
}

/** Forgets what discovery read (tests that rewrite a mountinfo file; all paths when none is given). */
export function forgetCgroupMounts(mountinfoPath?: string): void {
  if (mountinfoPath === undefined) discovered.clear();
  else discovered.delete(mountinfoPath);
}
