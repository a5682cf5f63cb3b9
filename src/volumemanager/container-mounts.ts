// A container's volumeMounts as CRI mounts (upstream makeMounts in kubelet_pods.go): the
// volume's host path, or a subPath inside it (subPathExpr expanded from the container's
// environment), read-only when asked or forced by the plugin, and the mount propagation.
// A subPath is opened from the volume's root with no symlink followed and bind-mounted by its
// descriptor under the pod's directory (subpath.ts); that mount, not the subPath's own path,
// is what the runtime mounts, so swapping a symlink in afterwards changes nothing.

import type { Container } from '../api/types.js';
import type { MountInput, MountPropagation } from '../runtime/cri-types.js';
import { CreateContainerConfigError, expand, type EnvKeyValue } from '../runtime/env.js';
import { rootLogger, type Logger } from '../util/log.js';
import { defaultSubPathMounter, SubPathError, type SubPathMounter, type SubPathRequest } from './subpath.js';
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

/** upstream's checks of a subPath before anything touches the disk (kubelet_pods.go makeMounts). */
export function validateSubPath(subPath: string): void {
  if (subPath.startsWith('/')) throw new CreateContainerConfigError(`error SubPath ${JSON.stringify(subPath)} must not be an absolute path`);
  if (subPath.split('/').includes('..')) throw new CreateContainerConfigError(`unable to provision SubPath \`${subPath}\`: must not contain '..'`);
}

/** Where a container's subPath mounts go and who makes them. */
export interface VolumeMountContext {
  /** <rootDir>/pods/<uid>: subPaths are bind-mounted under its volume-subpaths/. */
  podDir: string;
  /** The native mounter by default (refusing subPath without the addon). */
  subPaths?: SubPathMounter;
  log?: Logger;
}

/**
 * The subPath bind-mounted safely; the stable path under the pod directory comes back. The
 * message the pod's owner sees keeps host details out, as upstream's; the log has them.
 */
async function prepareSubPath(ctx: VolumeMountContext, req: SubPathRequest): Promise<string> {
  try {
    return await (ctx.subPaths ?? defaultSubPathMounter()).prepare(req);
  } catch (err) {
    const what = `volumeMount ${JSON.stringify(req.volumeName)} of container ${JSON.stringify(req.containerName)}`;
    const phase = err instanceof SubPathError ? err.phase : 'open';
    (ctx.log ?? rootLogger).error('Failed to prepare subPath for volumeMount of the container', { containerName: req.containerName, volumeMountName: req.volumeName, err: (err as Error).message });
    if (phase === 'unavailable') throw new CreateContainerConfigError(`failed to prepare subPath for ${what}: ${(err as Error).message}`, { cause: err });
    if (phase === 'create') throw new CreateContainerConfigError(`failed to create subPath directory for ${what}`, { cause: err });
    throw new CreateContainerConfigError(`failed to prepare subPath for ${what}`, { cause: err });
  }
}

/** The CRI mounts of a container's volumeMounts. Throws CreateContainerConfigError as upstream. */
export async function makeVolumeMounts(container: Container, volumes: PodVolumes, envs: readonly EnvKeyValue[], ctx: VolumeMountContext): Promise<MountInput[]> {
  const out: MountInput[] = [];
  const mounts = container.volumeMounts ?? [];
  for (let index = 0; index < mounts.length; index++) {
    const m = mounts[index]!;
    const vol = volumes.get(m.name);
    if (!vol) throw new CreateContainerConfigError(`cannot find volume ${JSON.stringify(m.name)} to mount into container ${JSON.stringify(container.name)}`);
    let hostPath = vol.hostPath;
    let subPath = m.subPath ?? '';
    const expr = (m as { subPathExpr?: string }).subPathExpr;
    if (expr) subPath = expandSubPathExpr(expr, envs);
    if (subPath !== '') {
      validateSubPath(subPath);
      hostPath = await prepareSubPath(ctx, { volumePath: vol.hostPath, subPath, podDir: ctx.podDir, volumeName: m.name, containerName: container.name, index });
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
