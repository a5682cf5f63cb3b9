// The downwardAPI plugin (upstream pkg/volume/downwardapi): each item's value (a pod fieldRef or
// a container resourceFieldRef) is a file, written with the atomic writer so readers never see
// a half-updated set; rewritten when a value changes (labels, annotations).

import type { Container, ObjectFieldSelector, Pod, ResourceFieldSelector, ResourceList } from '../api/types.js';
import { DefaultVolumeFileMode } from '../api/defaults.js';
import { containerResourceRuntimeValue, podFieldSelectorRuntimeValue } from '../runtime/env.js';
import type { Clock } from '../util/clock.js';
import { confinedJoin } from '../util/safe-path.js';
import { writeAtomically, type FileProjection } from './atomic-writer.js';
import { VolumeSetupError } from './errors.js';
import { ensureTmpfs } from './tmpfs.js';
import type { Mounter } from './mounter.js';

export const DOWNWARD_API_PLUGIN = 'kubernetes.io~downward-api';

export interface DownwardAPIItem {
  path: string;
  fieldRef?: ObjectFieldSelector;
  resourceFieldRef?: ResourceFieldSelector;
  mode?: number;
}

export interface DownwardAPIContext {
  nodeName: string;
  hostIPs: string[];
  podIPs: string[];
  nodeAllocatable?: ResourceList;
}

/** The files of a downwardAPI volume (upstream CollectData). */
export function collectDownwardAPIData(volumeName: string, pod: Pod, items: readonly DownwardAPIItem[], defaultMode: number | undefined, ctx: DownwardAPIContext): Map<string, FileProjection> {
  const out = new Map<string, FileProjection>();
  const errs: string[] = [];
  for (const item of items) {
    const mode = item.mode ?? defaultMode ?? DefaultVolumeFileMode;
    try {
      if (item.fieldRef) {
        out.set(item.path, { data: podFieldSelectorRuntimeValue(item.fieldRef, pod, ctx), mode });
      } else if (item.resourceFieldRef) {
        const name = item.resourceFieldRef.containerName;
        const all: Container[] = [...(pod.spec.containers ?? []), ...(pod.spec.initContainers ?? [])];
        const container = all.find((c) => c.name === name);
        if (!container) throw new VolumeSetupError(volumeName, `container ${JSON.stringify(name ?? '')} not found`);
        out.set(item.path, { data: containerResourceRuntimeValue(item.resourceFieldRef, pod, container, ctx.nodeAllocatable), mode });
      }
    } catch (err) {
      errs.push(`${item.path}: ${(err as Error).message}`);
    }
  }
  if (errs.length) {
    throw new VolumeSetupError(volumeName, `downwardAPI volume "${volumeName}": error preparing data: ${errs.join(', ')}`);
  }
  return out;
}

/**
 * Writes the volume at `<podDir>/volumes/kubernetes.io~downward-api/<name>`, on a tmpfs as
 * upstream (its wrapped emptyDir is memory-backed); returns its path.
 */
export async function setUpDownwardAPI(podDirectory: string, volumeName: string, pod: Pod, source: { items?: unknown[]; defaultMode?: number }, ctx: DownwardAPIContext, clock: Clock, mounter: Mounter, setPerms?: (dir: string) => Promise<void>, tmpfsSizeBytes?: number): Promise<string> {
  const dir = confinedJoin(podDirectory, 'volumes', DOWNWARD_API_PLUGIN, volumeName);
  const payload = collectDownwardAPIData(volumeName, pod, (source.items ?? []) as DownwardAPIItem[], source.defaultMode, ctx);
  try {
    await ensureTmpfs(dir, volumeName, mounter, tmpfsSizeBytes);
    await writeAtomically(dir, payload, clock, { setPerms });
  } catch (err) {
    if (err instanceof VolumeSetupError) throw err;
    throw new VolumeSetupError(volumeName, `downwardAPI volume "${volumeName}": ${(err as Error).message}`, { cause: err });
  }
  return dir;
}
