// Driver-neutral cgroup names (upstream cm.CgroupName): a list of components, e.g.
// ["kubepods", "burstable", "pod<uid>"], that each driver turns into its own form. cgroupfs:
// "/kubepods/burstable/pod<uid>". systemd: the slice "kubepods-burstable-pod<uid_>.slice",
// whose cgroup path is "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice"
// (systemd nests a slice under the slice its name's dash-separated prefix names; a "-" inside
// a component becomes "_", as upstream escapes it).

import { posix } from 'node:path';
import { KubeletError } from '../util/errors.js';

export type CgroupName = readonly string[];

export type CgroupDriverName = 'cgroupfs' | 'systemd';

export class CgroupNameError extends KubeletError {
  constructor(readonly cgroupName: string, message: string) {
    super('ERR_CGROUP_NAME', `cgroup name ${JSON.stringify(cgroupName)}: ${message}`);
  }
}

const SLICE = '.slice';

/** "/a/b" (cgroupRoot as given) → ["a", "b"]; "/" and "" → the root, []. */
export function parseCgroupfsToCgroupName(path: string): CgroupName {
  return path.split('/').filter((c) => c !== '');
}

export function cgroupNameToCgroupfs(name: CgroupName): string {
  return '/' + name.join('/');
}

/** systemd's escape of a name component: "-" separates slice levels, so it becomes "_". */
export function escapeSystemdCgroupName(part: string): string {
  return part.replaceAll('-', '_');
}

export function unescapeSystemdCgroupName(part: string): string {
  return part.replaceAll('_', '-');
}

/**
 * The cgroup path of a slice unit (libcontainer's ExpandSlice): "a-b-c.slice" →
 * "/a.slice/a-b.slice/a-b-c.slice"; "-.slice" is the root slice, "/".
 */
export function expandSlice(slice: string): string {
  if (slice.length <= SLICE.length || !slice.endsWith(SLICE)) throw new CgroupNameError(slice, 'not a slice name (must end with .slice)');
  if (slice.includes('/')) throw new CgroupNameError(slice, 'a slice name must not contain "/"');
  const stem = slice.slice(0, -SLICE.length);
  if (stem === '-') return '/';
  let path = '';
  let prefix = '';
  for (const part of stem.split('-')) {
    if (part === '') throw new CgroupNameError(slice, 'a slice name must not have an empty dash-separated part');
    path += `/${prefix}${part}${SLICE}`;
    prefix += `${part}-`;
  }
  return path;
}

/** The slice unit of a cgroup name: ["kubepods", "burstable"] → "kubepods-burstable.slice"; [] → "-.slice". */
export function cgroupNameToSystemdUnit(name: CgroupName): string {
  if (name.length === 0 || (name.length === 1 && name[0] === '')) return `-${SLICE}`;
  for (const c of name) {
    if (c === '' || c.includes('/') || c.includes('_')) {
      throw new CgroupNameError(name.join('/'), `component ${JSON.stringify(c)} cannot be a slice part (empty, "/" or "_")`);
    }
  }
  return name.map(escapeSystemdCgroupName).join('-') + SLICE;
}

/** The cgroup path a name has under the systemd driver (upstream CgroupName.ToSystemd). */
export function cgroupNameToSystemd(name: CgroupName): string {
  return expandSlice(cgroupNameToSystemdUnit(name));
}

/** "/kubepods.slice/kubepods-burstable.slice" or "kubepods-burstable.slice" → ["kubepods", "burstable"]. */
export function parseSystemdToCgroupName(path: string): CgroupName {
  const base = posix.basename(path);
  if (!base.endsWith(SLICE)) throw new CgroupNameError(path, 'not a slice (must end with .slice)');
  const stem = base.slice(0, -SLICE.length);
  if (stem === '-' || stem === '') return [];
  return stem.split('-').map(unescapeSystemdCgroupName);
}

/** A name in the driver's cgroup path form (upstream cgroupManager.Name). */
export function cgroupNameToPath(driver: CgroupDriverName, name: CgroupName): string {
  return driver === 'systemd' ? cgroupNameToSystemd(name) : cgroupNameToCgroupfs(name);
}

/** The scope prefix a CRI runtime gives its containers under the systemd driver (upstream SystemdPathPrefixOfRuntime). */
export function systemdScopePrefixOfRuntime(runtimeName: string): string {
  if (runtimeName === 'cri-o') return 'crio';
  if (runtimeName === 'containerd') return 'cri-containerd';
  return runtimeName;
}

/** A container's cgroup under its pod's: "<pod>/<id>" (cgroupfs), "<pod>/<prefix>-<id>.scope" (systemd). */
export function containerCgroupPath(driver: CgroupDriverName, podPath: string, containerID: string, scopePrefix = 'cri-containerd'): string {
  return driver === 'systemd' ? `${podPath}/${scopePrefix}-${containerID}.scope` : `${podPath}/${containerID}`;
}
