// A container's volumeMounts as CRI mounts (upstream makeMounts in kubelet_pods.go): the
// volume's host path, or a subPath inside it (subPathExpr expanded from the container's
// environment), read-only when asked or forced by the plugin, and the mount propagation.
// A subPath must stay inside its volume: it is resolved with realpath, symlinks included, and
// refused when it lands outside; the resolved path is what the runtime mounts.

import { lstat, mkdir, realpath, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Container } from '../api/types.js';
import type { MountInput, MountPropagation } from '../runtime/cri-types.js';
import { CreateContainerConfigError, expand, type EnvKeyValue } from '../runtime/env.js';
import type { PodVolumes } from './volume-manager.js';

/** upstream translateMountPropagation. */
export function translateMountPropagation(mode: string | undefined): MountPropagation {
  switch (mode ?? '') {
    case '':
    case 'None':
      return 'PROPAGATION_PRIVATE';
    case 'HostToContainer':
      return 'PROPAGATION_HOST_TO_CONTAINER';
    case 'Bidirectional':
      return 'PROPAGATION_BIDIRECTIONAL';
    default:
      throw new CreateContainerConfigError(`invalid MountPropagation mode: ${JSON.stringify(mode)}`);
  }
}

/** subPathExpr with $(VAR) from the container's environment; a variable without a value is an error (upstream ExpandContainerVolumeMounts). */
export function expandSubPathExpr(expr: string, envs: readonly EnvKeyValue[]): string {
  const env = new Map(envs.map((e) => [e.key, e.value]));
  const missing = new Set<string>();
  const out = expand(expr, (k) => {
    const v = env.get(k);
    if (!v) missing.add(k);
    return v ?? '';
  });
  if (missing.size) throw new CreateContainerConfigError(`missing value for ${[...missing].sort().join(', ')}`);
  return out;
}

function isInside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/**
 * Resolves `subPath` inside `volumePath`: creates it as a directory (with the volume's mode)
 * when missing, then checks its real path stays inside the volume's real path.
 */
export async function resolveSubPath(volumePath: string, subPath: string, what: string): Promise<string> {
  if (subPath.startsWith('/')) throw new CreateContainerConfigError(`error SubPath ${JSON.stringify(subPath)} must not be an absolute path`);
  if (subPath.split('/').includes('..')) throw new CreateContainerConfigError(`unable to provision SubPath \`${subPath}\`: must not contain '..'`);
  const refuse = (cause?: unknown): never => {
    // upstream keeps host details out of the message the pod's owner sees
    throw new CreateContainerConfigError(`failed to prepare subPath for volumeMount ${what}`, cause ? { cause } : undefined);
  };
  const root = await realpath(volumePath).catch(refuse);
  const target = posix.join(volumePath, subPath);
  // a dangling symlink is not "missing": creating through it would write outside the volume
  const present = await lstat(target).then(() => true, () => false);
  if (!present) {
    const mode = (await stat(root).catch(refuse)).mode & 0o7777;
    // create component by component, each parent checked first, so no link is followed out
    let cur = root;
    for (const part of subPath.split('/').filter((p) => p !== '' && p !== '.')) {
      const next = posix.join(cur, part);
      const real = await realpath(next).catch(() => undefined);
      if (real === undefined) {
        if (await lstat(next).then(() => true, () => false)) refuse();
        await mkdir(next, { mode }).catch(refuse);
        cur = next;
      } else {
        if (!isInside(root, real)) refuse();
        cur = real;
      }
    }
  }
  const resolved = await realpath(target).catch(refuse);
  if (!isInside(root, resolved)) refuse();
  return resolved;
}

/** The CRI mounts of a container's volumeMounts. Throws CreateContainerConfigError as upstream. */
export async function makeVolumeMounts(container: Container, volumes: PodVolumes, envs: readonly EnvKeyValue[]): Promise<MountInput[]> {
  const out: MountInput[] = [];
  for (const m of container.volumeMounts ?? []) {
    const vol = volumes.get(m.name);
    if (!vol) throw new CreateContainerConfigError(`cannot find volume ${JSON.stringify(m.name)} to mount into container ${JSON.stringify(container.name)}`);
    let hostPath = vol.hostPath;
    let subPath = m.subPath ?? '';
    const expr = (m as { subPathExpr?: string }).subPathExpr;
    if (expr) subPath = expandSubPathExpr(expr, envs);
    if (subPath !== '') {
      hostPath = await resolveSubPath(vol.hostPath, subPath, `${JSON.stringify(m.name)} of container ${JSON.stringify(container.name)}`);
    }
    out.push({
      container_path: m.mountPath,
      host_path: hostPath,
      readonly: m.readOnly === true || vol.readOnly,
      selinux_relabel: false,
      propagation: translateMountPropagation(m.mountPropagation),
    });
  }
  return out;
}
