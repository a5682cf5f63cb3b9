// The volume manager (upstream pkg/kubelet/volumemanager, in spirit): the desired state is the
// pod's spec.volumes, the actual state is what sits under <rootDir>/pods/<uid>/volumes/<plugin>/
// <name> (and the mount table for tmpfs), so it survives a restart of kubelet-ts without a
// journal. mountPod runs before any container of the pod starts; unmountPod after they are gone.

import { podFullName, type Pod, type ResourceList } from '../api/types.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { podDir } from '../util/safe-path.js';
import { setUpDownwardAPI, DOWNWARD_API_PLUGIN } from './downward-api.js';
import { setUpEmptyDir, EMPTY_DIR_PLUGIN } from './empty-dir.js';
import { VolumeMountError, VolumeSetupError } from './errors.js';
import { setUpHostPath, HOST_PATH_PLUGIN } from './host-path.js';
import { systemMounter, type Mounter } from './mounter.js';

/** One set-up volume: where it is on the host and how the plugin wants it mounted. */
export interface MountedVolume {
  plugin: string;
  hostPath: string;
  /** The plugin forces read-only mounts (upstream: API data volumes such as downwardAPI). */
  readOnly: boolean;
}

/** A pod's set-up volumes by name. */
export type PodVolumes = ReadonlyMap<string, MountedVolume>;

export interface VolumeManagerOptions {
  rootDir: string;
  clock: Clock;
  log: Logger;
  nodeName: string;
  hostIPs: () => string[];
  nodeAllocatable?: ResourceList;
  mounter?: Mounter;
}

/** Sources that need objects of the API server (or a storage driver) standalone kubelet-ts lacks. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  configMap: 'configMap volumes read ConfigMap objects from the API server; static pods may not reference API objects',
  secret: 'secret volumes read Secret objects from the API server; static pods may not reference API objects',
  projected: 'projected volumes read ConfigMap, Secret and ServiceAccount token objects from the API server; static pods may not reference API objects',
  persistentVolumeClaim: 'persistentVolumeClaim volumes are not supported (static pods may not reference API objects)',
  csi: 'csi volumes are not supported by kubelet-ts',
  ephemeral: 'ephemeral volumes create PersistentVolumeClaims; not supported by kubelet-ts',
};

export class VolumeManager {
  private readonly mounter: Mounter;

  constructor(private readonly opts: VolumeManagerOptions) {
    this.mounter = opts.mounter ?? systemMounter;
  }

  /**
   * Sets up every volume of the pod (idempotent: run on each sync). Throws VolumeMountError
   * naming every volume that failed and why; the pod's containers must not start then.
   */
  async mountPod(pod: Pod, podIPs: string[] = []): Promise<PodVolumes> {
    const uid = pod.metadata.uid!;
    const dir = podDir(this.opts.rootDir, uid);
    const out = new Map<string, MountedVolume>();
    const failed: VolumeSetupError[] = [];
    for (const v of pod.spec.volumes ?? []) {
      try {
        out.set(v.name, await this.setUp(pod, dir, v, podIPs));
      } catch (err) {
        failed.push(err instanceof VolumeSetupError ? err : new VolumeSetupError(v.name, (err as Error).message, { cause: err }));
      }
    }
    if (failed.length) throw new VolumeMountError(podFullName(pod), failed);
    return out;
  }

  private async setUp(pod: Pod, dir: string, v: NonNullable<Pod['spec']['volumes']>[number], podIPs: string[]): Promise<MountedVolume> {
    if (v.hostPath) return { plugin: HOST_PATH_PLUGIN, hostPath: await setUpHostPath(v.name, v.hostPath), readOnly: false };
    if (v.emptyDir) return { plugin: EMPTY_DIR_PLUGIN, hostPath: await setUpEmptyDir(dir, v.name, v.emptyDir, this.mounter), readOnly: false };
    if (v.downwardAPI) {
      const ctx = { nodeName: this.opts.nodeName, hostIPs: this.opts.hostIPs(), podIPs, nodeAllocatable: this.opts.nodeAllocatable };
      return { plugin: DOWNWARD_API_PLUGIN, hostPath: await setUpDownwardAPI(dir, v.name, pod, v.downwardAPI, ctx, this.opts.clock), readOnly: true };
    }
    const kind = Object.keys(v).find((k) => k !== 'name' && v[k] !== undefined && v[k] !== null) ?? 'unknown';
    const why = UNSUPPORTED[kind] ?? `${kind} volumes are not supported by kubelet-ts`;
    throw new VolumeSetupError(v.name, `volume "${v.name}" of pod ${podFullName(pod)}: ${why}`);
  }

  /**
   * Tears the pod's volumes down once its containers are gone: every mount under the pod's
   * directory (tmpfs emptyDirs, found in the mount table, so a restart loses nothing) is
   * unmounted, deepest first. The caller removes the directory afterwards.
   */
  async unmountPod(uid: string): Promise<void> {
    const dir = podDir(this.opts.rootDir, uid);
    const prefix = `${dir}/`;
    const mounts = (await this.mounter.list())
      .map((m) => m.mountPoint)
      .filter((p) => p.startsWith(prefix))
      .sort((a, b) => b.length - a.length);
    for (const m of [...new Set(mounts)]) {
      await this.mounter.unmount(m);
      this.opts.log.info('Unmounted volume', { podUID: uid, path: m });
    }
  }
}
