// cgroup names → directories per hierarchy, and the refs the readers and watchers take. Names
// built from outside identifiers (pod UIDs) go through cgroupDirUnder, which keeps them inside
// a given parent cgroup.
import path from 'node:path';

import { KubeletError } from '../util/errors.js';
import { assertPathComponent } from '../util/safe-path.js';
import { cgroupMode, V1_CONTROLLERS, type CgroupMount, type CgroupMounts } from './mounts.js';
import type { CgroupV1Ref, CgroupRef } from './ref.js';

export class NoCgroupMountError extends KubeletError {
  constructor() {
    super('ERR_NO_CGROUP_MOUNT', 'no cgroup hierarchy is mounted (neither cgroup v1 controllers nor cgroup2 in mountinfo)');
  }
}

/** The directory of an absolute cgroup path in a hierarchy, honouring the mount's root. */
export function cgroupDir(mount: CgroupMount, cgroupPath: string): string {
  const abs = path.posix.normalize('/' + cgroupPath);
  let rel = abs;
  if (mount.root !== '/' && (abs === mount.root || abs.startsWith(mount.root + '/'))) rel = abs.slice(mount.root.length);
  return path.posix.join(mount.mountPoint, rel);
}

/**
 * The directory of `<parent>/<c1>/<c2>...` in a hierarchy, every component checked to be one
 * plain name, so the result lies strictly inside the parent cgroup's directory.
 */
export function cgroupDirUnder(mount: CgroupMount, parent: string, ...components: string[]): string {
  const base = cgroupDir(mount, parent);
  for (const c of components) assertPathComponent(base, c);
  return path.posix.join(base, ...components);
}

/**
 * The ref for a cgroup path. Any v1 controller mounted → a v1 ref (controller dirs, plus
 * the unified dir on hybrid hosts for PSI); only cgroup2 → a v2 ref.
 */
export function cgroupRefFor(mounts: CgroupMounts, cgroupPath: string): CgroupRef {
  const mode = cgroupMode(mounts);
  if (mode === 'none') throw new NoCgroupMountError();
  if (mode === 'v2') return { version: 2, dir: cgroupDir(mounts.unified!, cgroupPath) };
  const ref: { -readonly [K in keyof CgroupV1Ref]: CgroupV1Ref[K] } = { version: 1 };
  for (const c of V1_CONTROLLERS) {
    const m = mounts.v1[c];
    if (m) ref[c] = cgroupDir(m, cgroupPath);
  }
  if (mounts.unified) ref.unified = cgroupDir(mounts.unified, cgroupPath);
  return ref;
}

/** The hierarchy that holds a cgroup's memory controller: v1 memory, else the unified one. */
export function memoryHierarchy(mounts: CgroupMounts): { mount: CgroupMount; version: 1 | 2 } | undefined {
  if (mounts.v1.memory) return { mount: mounts.v1.memory, version: 1 };
  if (cgroupMode(mounts) === 'v2') return { mount: mounts.unified!, version: 2 };
  return undefined;
}
