// The volume manager (upstream pkg/kubelet/volumemanager, in spirit): the desired state is the
// pod's spec.volumes, the actual state is what sits under <rootDir>/pods/<uid>/volumes/<plugin>/
// <name> (and the mount table for tmpfs), so it survives a restart of kubelet-ts without a
// journal. mountPod runs before any container of the pod starts; unmountPod after they are gone.

import type { Dirent } from 'node:fs';
import { lstat, readdir, rmdir, unlink } from 'node:fs/promises';
import { posix } from 'node:path';
import { podFullName, type Pod, type ResourceList } from '../api/types.js';
import { KubeletError } from '../util/errors.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { confinedJoin, podDir } from '../util/safe-path.js';
import { setUpDownwardAPI, DOWNWARD_API_PLUGIN } from './downward-api.js';
import { setUpEmptyDir, EMPTY_DIR_PLUGIN } from './empty-dir.js';
import { VolumeMountError, VolumeSetupError } from './errors.js';
import { setUpHostPath, HOST_PATH_PLUGIN } from './host-path.js';
import { systemMounter, type Mounter } from './mounter.js';
import { setUpConfigMap, setUpProjected, setUpSecret, CONFIGMAP_PLUGIN, PROJECTED_PLUGIN, SECRET_PLUGIN, type ApiVolumeContext } from './api-volumes.js';
import { StandaloneObjectSource, VolumeObjectError, type VolumeObjectSource } from './object-source.js';
import { TokenManager } from './token-manager.js';
import { setVolumeOwnership } from './ownership.js';
import { memoryVolumeSizeBytes } from './tmpfs.js';
import { defaultSubPathMounter, type SubPathMounter } from './subpath.js';
import { isStaticPod } from '../runtime/resources.js';

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
  /** The node's allocatable memory now (upstream's volume host GetNodeAllocatable): caps memory-backed volumes. */
  nodeAllocatableMemoryBytes?: () => number | undefined;
  mounter?: Mounter;
  /** ConfigMaps, Secrets and tokens (the API client's); undefined: standalone, every read fails as upstream. */
  objects?: VolumeObjectSource;
  /** Token refresh jitter (tests pin it). */
  tokenJitterMs?: () => number;
  /** Who unmounts the pods' subPath bind mounts (the native mounter by default). */
  subPaths?: SubPathMounter;
}

/**
 * What a static pod reads instead of the API server: nothing. Upstream's API server refuses a
 * mirror pod that references API objects and its node authorizer refuses the kubelet the object;
 * kubelet-ts refuses up front, naming the object.
 */
class StaticPodObjects implements VolumeObjectSource {
  constructor(private readonly pod: string) {}
  private refuse(kind: VolumeObjectError['kind'], namespace: string, name: string): never {
    throw new VolumeObjectError('ERR_VOLUME_OBJECT_STATIC_POD', kind, namespace, name,
      `${kind} "${namespace}/${name}": static pod ${this.pod} may not reference API objects`);
  }
  async getConfigMap(ns: string, name: string): Promise<never> { return this.refuse('configmap', ns, name); }
  async getSecret(ns: string, name: string): Promise<never> { return this.refuse('secret', ns, name); }
  async requestServiceAccountToken(ns: string, sa: string): Promise<never> { return this.refuse('serviceaccount token', ns, sa); }
}

/** Sources that need a storage driver kubelet-ts lacks. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  persistentVolumeClaim: 'persistentVolumeClaim volumes are not supported (static pods may not reference API objects)',
  csi: 'csi volumes are not supported by kubelet-ts',
  ephemeral: 'ephemeral volumes create PersistentVolumeClaims; not supported by kubelet-ts',
};

export class VolumeManager {
  private readonly mounter: Mounter;
  private readonly subPaths: SubPathMounter;
  private readonly objects: VolumeObjectSource;
  private readonly standalone: boolean;
  readonly tokens: TokenManager;

  constructor(private readonly opts: VolumeManagerOptions) {
    this.mounter = opts.mounter ?? systemMounter;
    this.subPaths = opts.subPaths ?? defaultSubPathMounter();
    this.standalone = !opts.objects;
    this.objects = opts.objects ?? new StandaloneObjectSource();
    this.tokens = new TokenManager({
      source: this.objects,
      clock: opts.clock,
      jitterMs: opts.tokenJitterMs,
      onRefreshError: (key, err) => opts.log.warn("Couldn't update token", { cacheKey: key, err: (err as Error).message }),
    });
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
    const fsGroup = pod.spec.securityContext?.fsGroup ?? undefined;
    // every tmpfs of the pod is capped (upstream SizeMemoryBackedVolumes): node allocatable, then the pod's limit
    const memoryCap = (): number | undefined => memoryVolumeSizeBytes(pod, this.opts.nodeAllocatableMemoryBytes?.());
    if (v.emptyDir) {
      const cap = v.emptyDir.medium === 'Memory' ? memoryCap() : undefined;
      return { plugin: EMPTY_DIR_PLUGIN, hostPath: await setUpEmptyDir(dir, v.name, v.emptyDir, this.mounter, fsGroup, cap), readOnly: false };
    }
    // the API-data volumes are read-only: group read bits (upstream passes no change policy for them)
    const setPerms = fsGroup === undefined ? undefined : (d: string) => setVolumeOwnership(d, fsGroup, true).then(() => undefined);
    const downward = { nodeName: this.opts.nodeName, hostIPs: this.opts.hostIPs(), podIPs, nodeAllocatable: this.opts.nodeAllocatable };
    if (v.downwardAPI) {
      return { plugin: DOWNWARD_API_PLUGIN, hostPath: await setUpDownwardAPI(dir, v.name, pod, v.downwardAPI, downward, this.opts.clock, this.mounter, setPerms, memoryCap()), readOnly: true };
    }
    if (v.configMap || v.secret || v.projected) {
      // standalone: upstream's message; with an API server, static pods are still refused
      const objects = !this.standalone && isStaticPod(pod) ? new StaticPodObjects(podFullName(pod)) : this.objects;
      const ctx: ApiVolumeContext = { pod, podDirectory: dir, objects, tokens: objects === this.objects ? this.tokens : new TokenManager({ source: objects, clock: this.opts.clock }), mounter: this.mounter, clock: this.opts.clock, downward, setPerms, tmpfsSizeBytes: v.configMap ? undefined : memoryCap() };
      // upstream marks these read-only (volume.Attributes.ReadOnly): the CRI mount is read-only
      if (v.configMap) return { plugin: CONFIGMAP_PLUGIN, hostPath: await setUpConfigMap(ctx, v.name, v.configMap), readOnly: true };
      if (v.secret) return { plugin: SECRET_PLUGIN, hostPath: await setUpSecret(ctx, v.name, v.secret), readOnly: true };
      return { plugin: PROJECTED_PLUGIN, hostPath: await setUpProjected(ctx, v.name, v.projected!), readOnly: true };
    }
    const kind = Object.keys(v).find((k) => k !== 'name' && v[k] !== undefined && v[k] !== null) ?? 'unknown';
    const why = UNSUPPORTED[kind] ?? `${kind} volumes are not supported by kubelet-ts`;
    throw new VolumeSetupError(v.name, `volume "${v.name}" of pod ${podFullName(pod)}: ${why}`);
  }

  /**
   * Tears the pod's volumes down once its containers are gone: the subPath bind mounts first
   * (upstream CleanSubPaths: found on disk under volume-subpaths/, unmounted and removed without
   * following a symlink), then every other mount under the pod's directory (tmpfs emptyDirs,
   * found in the mount table, so a restart loses nothing), deepest first. The caller removes
   * the directory afterwards.
   */
  async unmountPod(uid: string): Promise<void> {
    const dir = podDir(this.opts.rootDir, uid);
    for (const p of await this.subPaths.clean(dir)) this.opts.log.info('Unmounted subPath', { podUID: uid, path: p });
    const prefix = `${dir}/`;
    const mounts = (await this.mounter.list())
      .map((m) => m.mountPoint)
      .filter((p) => p.startsWith(prefix))
      .sort((a, b) => b.length - a.length);
    for (const m of [...new Set(mounts)]) {
      await this.mounter.unmount(m);
      this.opts.log.info('Unmounted volume', { podUID: uid, path: m });
    }
    this.tokens.forgetPod(uid);
  }

  /**
   * Tears down the volumes of a pod that has terminated but is still wanted (upstream: the
   * desired state drops a terminated pod's volumes and emptyDir's TearDown removes its
   * directory), so that an evicted or finished pod stops holding the disk: mounts undone, then
   * `volumes/` removed without crossing into another filesystem. The pod directory stays.
   */
  async tearDownPodVolumes(uid: string): Promise<void> {
    await this.unmountPod(uid);
    const dir = posix.join(podDir(this.opts.rootDir, uid), 'volumes');
    try {
      await removeOneFilesystem(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      return;
    }
    this.opts.log.info('Tore down the volumes of a terminated pod', { podUID: uid, path: dir });
  }

  /**
   * The actual state as it is on disk (upstream's reconstruction after a restart): every
   * `<rootDir>/pods/<uid>/volumes/<plugin>/<name>`, and whether a tmpfs is mounted there.
   * Symlinked pod or plugin directories are not followed.
   */
  async reconstruct(): Promise<Map<string, ReconstructedVolume[]>> {
    const podsRoot = confinedJoin(this.opts.rootDir, 'pods');
    const tmpfs = new Set((await this.mounter.list()).filter((m) => m.fsType === 'tmpfs').map((m) => m.mountPoint));
    const out = new Map<string, ReconstructedVolume[]>();
    for (const uid of await dirNames(podsRoot)) {
      const vols: ReconstructedVolume[] = [];
      const volumesDir = posix.join(podsRoot, uid, 'volumes');
      for (const plugin of await dirNames(volumesDir)) {
        for (const name of await dirNames(posix.join(volumesDir, plugin))) {
          const path = posix.join(volumesDir, plugin, name);
          vols.push({ plugin, name, path, tmpfs: tmpfs.has(path) });
        }
      }
      out.set(uid, vols);
    }
    return out;
  }

  /**
   * Removes the directories of pods no source, worker or runtime has any more (upstream
   * cleanupOrphanedPodDirs): mounts under one are unmounted first, deepest first; the tree is
   * then removed without following a symlink and without crossing into another filesystem (a
   * mount left behind stops the removal). A symlink in place of a pod directory is unlinked.
   * Returns the UIDs whose directories were removed.
   */
  async cleanupOrphanedPodDirs(keep: Pick<ReadonlySet<string>, 'has'>): Promise<string[]> {
    // the caches stay bounded however many pods and objects come and go
    this.tokens.prune();
    this.objects.prune?.();
    const podsRoot = confinedJoin(this.opts.rootDir, 'pods');
    let entries: Dirent[];
    try {
      entries = await readdir(podsRoot, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const removed: string[] = [];
    for (const e of entries) {
      const uid = e.name;
      if (keep.has(uid)) continue;
      let path: string;
      try {
        path = podDir(this.opts.rootDir, uid);
      } catch {
        continue;
      }
      try {
        if (e.isSymbolicLink()) {
          await unlink(path);
        } else if (e.isDirectory()) {
          await this.unmountPod(uid);
          await removeOneFilesystem(path);
        } else {
          continue;
        }
        removed.push(uid);
        this.opts.log.info('Removed orphaned pod directory', { podUID: uid, path });
      } catch (err) {
        this.opts.log.warn('Orphaned pod directory not removed', { podUID: uid, path, err: (err as Error).message });
      }
    }
    return removed;
  }
}

export interface ReconstructedVolume {
  plugin: string;
  name: string;
  path: string;
  tmpfs: boolean;
}

/** Names of the real directories (not symlinks) in `dir`; none when it is missing. */
async function dirNames(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return [];
  }
}

export class OrphanCleanupError extends KubeletError {
  constructor(readonly path: string, message: string) {
    super('ERR_ORPHAN_CLEANUP', `${path}: ${message}`);
  }
}

/**
 * rm -r that never follows a symlink (it unlinks the link) and never descends into another
 * filesystem (upstream RemoveAllOneFilesystem): a mount point still under the tree is an error.
 */
export async function removeOneFilesystem(root: string): Promise<void> {
  const top = await lstat(root);
  if (!top.isDirectory()) {
    await unlink(root);
    return;
  }
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = posix.join(dir, e.name);
      if (!e.isDirectory()) {
        await unlink(p);
        continue;
      }
      const st = await lstat(p);
      if (st.dev !== top.dev) throw new OrphanCleanupError(p, 'is a mount point (another filesystem); not removing it');
      await walk(p);
      await rmdir(p);
    }
  };
  await walk(root);
  await rmdir(root);
}
