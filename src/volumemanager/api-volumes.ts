// The configMap, secret and projected plugins (upstream pkg/volume/configmap, secret,
// projected): the objects come from the object source, the files are written with the atomic
// writer, and each periodic sync writes again when the data changed (upstream remounts these
// plugins on every pod sync). configMap sits on disk as upstream; secret and projected (and
// downwardAPI, in downward-api.ts) sit on a tmpfs, so secret data never reaches a disk: when the
// tmpfs is not there after mounting, nothing is written.

import { chmod, mkdir } from 'node:fs/promises';
import type { Pod } from '../api/types.js';
import { DefaultVolumeFileMode } from '../api/defaults.js';
import type { Clock } from '../util/clock.js';
import { confinedJoin } from '../util/safe-path.js';
import { writeAtomically, type FileProjection } from './atomic-writer.js';
import { collectDownwardAPIData, type DownwardAPIContext, type DownwardAPIItem } from './downward-api.js';
import { VolumePayloadError, VolumeSetupError } from './errors.js';
import type { Mounter } from './mounter.js';
import { ensureTmpfs } from './tmpfs.js';
import { VolumeObjectError, type ConfigMapObject, type SecretObject, type VolumeObjectSource } from './object-source.js';
import type { TokenManager } from './token-manager.js';

export const CONFIGMAP_PLUGIN = 'kubernetes.io~configmap';
export const SECRET_PLUGIN = 'kubernetes.io~secret';
export const PROJECTED_PLUGIN = 'kubernetes.io~projected';

export interface KeyToPath {
  key: string;
  path: string;
  mode?: number;
}

export interface ConfigMapVolumeSource {
  name?: string;
  items?: KeyToPath[];
  defaultMode?: number;
  optional?: boolean;
}

export interface SecretVolumeSource {
  secretName?: string;
  items?: KeyToPath[];
  defaultMode?: number;
  optional?: boolean;
}

export interface ProjectedVolumeSource {
  sources?: unknown[];
  defaultMode?: number;
}

interface ProjectionSource {
  configMap?: { name?: string; items?: KeyToPath[]; optional?: boolean };
  secret?: { name?: string; items?: KeyToPath[]; optional?: boolean };
  downwardAPI?: { items?: DownwardAPIItem[] };
  serviceAccountToken?: { audience?: string; expirationSeconds?: number; path: string };
  clusterTrustBundle?: unknown;
}

/** What the API-object plugins need besides the volume itself. */
export interface ApiVolumeContext {
  pod: Pod;
  /** <rootDir>/pods/<uid> */
  podDirectory: string;
  objects: VolumeObjectSource;
  tokens: TokenManager;
  mounter: Mounter;
  clock: Clock;
  downward: DownwardAPIContext;
  /** Ownership for the pod's fsGroup, run on the volume before a new payload is swapped in. */
  setPerms?: (volumeDir: string) => Promise<void>;
  /** The `size=` of the secret and projected tmpfs (memoryVolumeSizeBytes); undefined: no cap known. */
  tmpfsSizeBytes?: number;
}

/** upstream's event text for a failed SetUp. */
function setUpFailed(volumeName: string, err: unknown): VolumeSetupError {
  return new VolumeSetupError(volumeName, `MountVolume.SetUp failed for volume "${volumeName}" : ${(err as Error).message}`, { cause: err });
}

const isNotFound = (err: unknown): boolean => err instanceof VolumeObjectError && err.notFound;

/** upstream configmap.MakePayload: every key (data and binaryData) or the listed items. */
export function configMapPayload(items: readonly KeyToPath[] | undefined, cm: ConfigMapObject, defaultMode: number | undefined, optional: boolean): Map<string, FileProjection> {
  const mode = defaultMode ?? DefaultVolumeFileMode;
  const out = new Map<string, FileProjection>();
  const data = cm.data ?? {};
  const binary = cm.binaryData ?? {};
  if (!items?.length) {
    for (const [k, v] of Object.entries(data)) out.set(k, { data: v, mode });
    for (const [k, v] of Object.entries(binary)) out.set(k, { data: Buffer.from(v, 'base64'), mode });
    return out;
  }
  for (const item of items) {
    let content: Buffer | string;
    if (Object.hasOwn(data, item.key)) content = data[item.key]!;
    else if (Object.hasOwn(binary, item.key)) content = Buffer.from(binary[item.key]!, 'base64');
    else if (optional) continue;
    else throw new VolumePayloadError(`configmap references non-existent config key: ${item.key}`);
    out.set(item.path, { data: content, mode: item.mode ?? mode });
  }
  return out;
}

/** upstream secret.MakePayload (values decoded from base64). */
export function secretPayload(items: readonly KeyToPath[] | undefined, secret: SecretObject, defaultMode: number | undefined, optional: boolean): Map<string, FileProjection> {
  const mode = defaultMode ?? DefaultVolumeFileMode;
  const out = new Map<string, FileProjection>();
  const data = secret.data ?? {};
  if (!items?.length) {
    for (const [k, v] of Object.entries(data)) out.set(k, { data: Buffer.from(v, 'base64'), mode });
    return out;
  }
  for (const item of items) {
    if (!Object.hasOwn(data, item.key)) {
      if (optional) continue;
      throw new VolumePayloadError(`references non-existent secret key: ${item.key}`);
    }
    out.set(item.path, { data: Buffer.from(data[item.key]!, 'base64'), mode: item.mode ?? mode });
  }
  return out;
}

async function write(dir: string, volumeName: string, payload: Map<string, FileProjection>, ctx: ApiVolumeContext): Promise<void> {
  try {
    await writeAtomically(dir, payload, ctx.clock, { setPerms: ctx.setPerms });
  } catch (err) {
    throw setUpFailed(volumeName, err);
  }
}

/** An object that may be absent: an optional reference to a missing one reads as empty. */
async function getOptional<T extends object>(get: () => Promise<T>, optional: boolean): Promise<T> {
  try {
    return await get();
  } catch (err) {
    if (!(isNotFound(err) && optional)) throw err;
    return {} as T;
  }
}

/**
 * The steps every API-object volume takes: build the payload (an error names the volume), make
 * its directory (on disk, or on a tmpfs for secret data), write the files atomically.
 */
async function setUpPayloadVolume(ctx: ApiVolumeContext, volumeName: string, plugin: string, medium: 'disk' | 'tmpfs', build: () => Promise<Map<string, FileProjection>>): Promise<string> {
  const dir = confinedJoin(ctx.podDirectory, 'volumes', plugin, volumeName);
  let payload: Map<string, FileProjection>;
  try {
    payload = await build();
  } catch (err) {
    throw setUpFailed(volumeName, err);
  }
  try {
    if (medium === 'tmpfs') {
      await ensureTmpfs(dir, volumeName, ctx.mounter, ctx.tmpfsSizeBytes);
    } else {
      await mkdir(dir, { recursive: true, mode: 0o750 });
      // upstream wraps a disk emptyDir: 0777 whatever the umask
      await chmod(dir, 0o777);
    }
  } catch (err) {
    throw err instanceof VolumeSetupError ? err : setUpFailed(volumeName, err);
  }
  await write(dir, volumeName, payload, ctx);
  return dir;
}

/** Sets up (or refreshes) a configMap volume; returns its path. */
export function setUpConfigMap(ctx: ApiVolumeContext, volumeName: string, source: ConfigMapVolumeSource): Promise<string> {
  const optional = source.optional === true;
  return setUpPayloadVolume(ctx, volumeName, CONFIGMAP_PLUGIN, 'disk', async () => {
    const cm = await getOptional(() => ctx.objects.getConfigMap(ctx.pod.metadata.namespace ?? '', source.name ?? ''), optional);
    return configMapPayload(source.items, cm, source.defaultMode, optional);
  });
}

/** Sets up (or refreshes) a secret volume on its tmpfs; returns its path. */
export function setUpSecret(ctx: ApiVolumeContext, volumeName: string, source: SecretVolumeSource): Promise<string> {
  const optional = source.optional === true;
  return setUpPayloadVolume(ctx, volumeName, SECRET_PLUGIN, 'tmpfs', async () => {
    const secret = await getOptional(() => ctx.objects.getSecret(ctx.pod.metadata.namespace ?? '', source.secretName ?? ''), optional);
    return secretPayload(source.items, secret, source.defaultMode, optional);
  });
}

/** upstream projected collectData: every source's files in one payload; all errors together. */
export async function projectedPayload(ctx: ApiVolumeContext, volumeName: string, source: ProjectedVolumeSource): Promise<Map<string, FileProjection>> {
  const { pod } = ctx;
  const namespace = pod.metadata.namespace ?? '';
  const defaultMode = source.defaultMode ?? DefaultVolumeFileMode;
  const fsGroupSet = typeof pod.spec.securityContext?.fsGroup === 'number';
  const payload = new Map<string, FileProjection>();
  const errs: string[] = [];
  for (const raw of source.sources ?? []) {
    const s = raw as ProjectionSource;
    try {
      if (s.configMap) {
        const optional = s.configMap.optional === true;
        const cm = await getOptional(() => ctx.objects.getConfigMap(namespace, s.configMap!.name ?? ''), optional);
        for (const [k, v] of configMapPayload(s.configMap.items, cm, defaultMode, optional)) payload.set(k, v);
      } else if (s.secret) {
        const optional = s.secret.optional === true;
        const secret = await getOptional(() => ctx.objects.getSecret(namespace, s.secret!.name ?? ''), optional);
        for (const [k, v] of secretPayload(s.secret.items, secret, defaultMode, optional)) payload.set(k, v);
      } else if (s.downwardAPI) {
        for (const [k, v] of collectDownwardAPIData(volumeName, pod, s.downwardAPI.items ?? [], defaultMode, ctx.downward)) payload.set(k, v);
      } else if (s.serviceAccountToken) {
        const tp = s.serviceAccountToken;
        const account = pod.spec.serviceAccountName || (pod.spec.serviceAccount as string | undefined) || 'default';
        const token = await ctx.tokens.getServiceAccountToken(namespace, account, tp.audience ?? '', tp.expirationSeconds ?? 3600, { name: pod.metadata.name ?? '', uid: pod.metadata.uid ?? '' });
        // upstream: 0600 when an fsGroup is set; the ownership step then makes it 0640
        payload.set(tp.path, { data: token.token, mode: fsGroupSet ? 0o600 : defaultMode });
      } else if (s.clusterTrustBundle) {
        throw new VolumePayloadError('clusterTrustBundle projections are not supported by kubelet-ts');
      }
    } catch (err) {
      errs.push((err as Error).message);
    }
  }
  // upstream's aggregate: one error as is, several in brackets
  if (errs.length === 1) throw new VolumePayloadError(errs[0]);
  if (errs.length > 1) throw new VolumePayloadError(`[${errs.join(', ')}]`);
  return payload;
}

/** Sets up (or refreshes, tokens rotated) a projected volume on its tmpfs; returns its path. */
export function setUpProjected(ctx: ApiVolumeContext, volumeName: string, source: ProjectedVolumeSource): Promise<string> {
  return setUpPayloadVolume(ctx, volumeName, PROJECTED_PLUGIN, 'tmpfs', () => projectedPayload(ctx, volumeName, source));
}
