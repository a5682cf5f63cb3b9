// ConfigMaps and Secrets for pods from the API server (upstream pkg/kubelet/configmap,
// pkg/kubelet/secret and util/manager), as configMapAndSecretChangeDetectionStrategy says:
//   Watch (default): one list+watch per referenced object (fieldSelector metadata.name), kept
//     while a pod refers to it; reads come from what the watch last saw.
//   Cache: a GET when the cached copy is older than the TTL (upstream: one minute), or was read
//     before the pod was registered.
//   Get: a GET for every pod sync.
// A pod sync first awaits prefetch(pod); the container environment (built synchronously) and
// the configMap, secret and projected volumes then read what was fetched: env, envFrom and
// volume references all count, as upstream's managers register them.

import type { Pod } from '../api/types.js';
import { isNotFound } from '../client/errors.js';
import type { RestClient } from '../client/rest.js';
import { Reflector, type KubeObject } from '../client/reflector.js';
import type { KeyValueSource } from '../runtime/env.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { VolumeObjectError, type ApiObjectSource, type BoundPod, type ConfigMapObject, type SecretObject, type ServiceAccountToken, type VolumeObjectSource } from '../volumemanager/object-source.js';

export type ChangeDetectionStrategy = 'Watch' | 'Cache' | 'Get';
export type ObjectKind = 'configmaps' | 'secrets';

/** upstream's default TTL of the Cache strategy. */
export const DEFAULT_OBJECT_TTL_MS = 60_000;
/** How long a pod sync waits for a watch's first list before going on without it. */
const WATCH_SYNC_WAIT_MS = 10_000;

export interface ObjectManagerOptions {
  client: RestClient;
  clock: Clock;
  log: Logger;
  strategy: ChangeDetectionStrategy;
  ttlMs?: number;
  /** Watch timeouts for the Watch strategy's reflectors (tests shorten them). */
  watchTimeoutSeconds?: () => number;
}

interface ApiObject extends KubeObject {
  data?: Record<string, string>;
}

interface VolumeRefs {
  configMap?: { name?: string };
  secret?: { secretName?: string };
  projected?: { sources?: { configMap?: { name?: string }; secret?: { name?: string } }[] };
}

/** The ConfigMap and Secret names a pod reads: env and envFrom of its containers, and its volumes. */
export function referencedObjects(pod: Pod): Record<ObjectKind, Set<string>> {
  const out = { configmaps: new Set<string>(), secrets: new Set<string>() };
  for (const c of [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? []), ...((pod.spec as { ephemeralContainers?: typeof pod.spec.containers }).ephemeralContainers ?? [])]) {
    for (const f of c.envFrom ?? []) {
      if (f.configMapRef?.name) out.configmaps.add(f.configMapRef.name);
      if (f.secretRef?.name) out.secrets.add(f.secretRef.name);
    }
    for (const e of c.env ?? []) {
      const cm = e.valueFrom?.configMapKeyRef?.name;
      const s = e.valueFrom?.secretKeyRef?.name;
      if (cm) out.configmaps.add(cm);
      if (s) out.secrets.add(s);
    }
  }
  for (const v of (pod.spec.volumes ?? []) as VolumeRefs[]) {
    if (v.configMap?.name) out.configmaps.add(v.configMap.name);
    if (v.secret?.secretName) out.secrets.add(v.secret.secretName);
    for (const src of v.projected?.sources ?? []) {
      if (src?.configMap?.name) out.configmaps.add(src.configMap.name);
      if (src?.secret?.name) out.secrets.add(src.secret.name);
    }
  }
  return out;
}

interface Entry {
  kind: ObjectKind;
  namespace: string;
  name: string;
  /** Pods referring to it. */
  pods: Set<string>;
  /** The object as the API server sent it; undefined: not found (or not read yet). */
  obj?: ApiObject;
  /** Its data as env reads it (secret values decoded), computed on first use. */
  decoded?: Record<string, string>;
  /** When it was read (Cache), or whether its watch listed (Watch). */
  readAt: number;
  synced: boolean;
  reflector?: { ctl: AbortController; r: Reflector<ApiObject>; done: Promise<void> };
}

export class ObjectManager {
  private readonly entries = new Map<string, Entry>();
  /** Pod UID → the keys it refers to, and when it was registered. */
  private readonly pods = new Map<string, { keys: Set<string>; at: number }>();
  /** Requests sent (GETs and reflector starts), for tests. */
  gets = 0;

  constructor(private readonly o: ObjectManagerOptions) {}

  /** Registers (or re-registers) a pod's references; Watch starts watches for new ones. */
  registerPod(pod: Pod): void {
    const uid = pod.metadata.uid!;
    const ns = pod.metadata.namespace ?? 'default';
    const refs = referencedObjects(pod);
    const keys = new Set<string>();
    for (const kind of ['configmaps', 'secrets'] as const) {
      for (const name of refs[kind]) {
        const key = `${kind}/${ns}/${name}`;
        keys.add(key);
        let e = this.entries.get(key);
        if (!e) {
          e = { kind, namespace: ns, name, pods: new Set(), readAt: 0, synced: false };
          this.entries.set(key, e);
          if (this.o.strategy === 'Watch') this.startWatch(e);
        }
        e.pods.add(uid);
      }
    }
    const prev = this.pods.get(uid);
    this.pods.set(uid, { keys, at: prev?.at ?? this.o.clock.now() });
    if (prev) for (const k of prev.keys) if (!keys.has(k)) this.release(k, uid);
  }

  unregisterPod(uid: string): void {
    const p = this.pods.get(uid);
    if (!p) return;
    this.pods.delete(uid);
    for (const k of p.keys) this.release(k, uid);
  }

  /** Registers the pod and makes its objects readable: waits for watches, or GETs as the strategy says. */
  async prefetch(pod: Pod): Promise<void> {
    this.registerPod(pod);
    const reg = this.pods.get(pod.metadata.uid!)!;
    await Promise.all([...reg.keys].map(async (k) => {
      const e = this.entries.get(k);
      if (!e) return;
      if (this.o.strategy === 'Watch') {
        if (e.synced || !e.reflector) return;
        let timer: { cancel(): void } | undefined;
        await Promise.race([e.reflector.r.synced, new Promise<void>((r) => { timer = this.o.clock.setTimeout(r, WATCH_SYNC_WAIT_MS); })]);
        timer?.cancel();
        return;
      }
      const ttl = this.o.ttlMs ?? DEFAULT_OBJECT_TTL_MS;
      const fresh = this.o.strategy === 'Cache' && e.synced && e.readAt >= reg.at && this.o.clock.now() - e.readAt < ttl;
      if (!fresh) await this.get(e);
    }));
  }

  /** The lookup the environment builder reads, for one kind. */
  lookup(kind: ObjectKind): KeyValueSource {
    return (namespace, name) => {
      const e = this.entries.get(`${kind}/${namespace}/${name}`);
      if (!e?.synced || !e.obj) return undefined;
      return (e.decoded ??= dataOf(kind, e.obj));
    };
  }

  /** What was fetched for an object a registered pod refers to; undefined when none is registered. */
  object(kind: ObjectKind, namespace: string, name: string): { synced: boolean; obj?: ApiObject } | undefined {
    const e = this.entries.get(`${kind}/${namespace}/${name}`);
    return e && { synced: e.synced, obj: e.obj };
  }

  stop(): void {
    for (const e of this.entries.values()) e.reflector?.ctl.abort();
    this.entries.clear();
    this.pods.clear();
  }

  /** Objects watched now (Watch strategy), for tests. */
  watched(): string[] {
    return [...this.entries.values()].filter((e) => e.reflector).map((e) => `${e.kind}/${e.namespace}/${e.name}`);
  }

  private release(key: string, uid: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    e.pods.delete(uid);
    if (e.pods.size > 0) return;
    e.reflector?.ctl.abort();
    this.entries.delete(key);
  }

  private path(e: Entry): string {
    return `/api/v1/namespaces/${encodeURIComponent(e.namespace)}/${e.kind}`;
  }

  private async get(e: Entry): Promise<void> {
    this.gets++;
    try {
      e.obj = await this.o.client.get<ApiObject>(`${this.path(e)}/${encodeURIComponent(e.name)}`);
      e.decoded = undefined;
    } catch (err) {
      if (!isNotFound(err)) {
        // Unreachable: keep what was read before (the sync reports a missing object if none).
        this.o.log.warn('Reading an object for a pod failed', { object: `${e.kind}/${e.namespace}/${e.name}`, err: errorMessage(err) });
        return;
      }
      e.obj = undefined;
      e.decoded = undefined;
    }
    e.readAt = this.o.clock.now();
    e.synced = true;
  }

  private startWatch(e: Entry): void {
    const ctl = new AbortController();
    this.gets++;
    const r = new Reflector<ApiObject>({
      client: this.o.client,
      path: this.path(e),
      fieldSelector: `metadata.name=${e.name}`,
      clock: this.o.clock,
      log: this.o.log,
      ...(this.o.watchTimeoutSeconds ? { watchTimeoutSeconds: this.o.watchTimeoutSeconds } : {}),
      handler: (ev) => {
        if (ev.object.metadata?.name !== e.name) return;
        e.obj = ev.type === 'DELETED' ? undefined : ev.object;
        e.decoded = undefined;
        e.readAt = this.o.clock.now();
      },
      onSynced: () => { e.synced = true; },
    });
    e.reflector = { ctl, r, done: r.run(ctl.signal) };
  }
}

/** A ConfigMap's data, or a Secret's data decoded from base64 (what env reads). */
function dataOf(kind: ObjectKind, obj: ApiObject): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj.data ?? {})) {
    if (typeof v !== 'string') continue;
    out[k] = kind === 'secrets' ? Buffer.from(v, 'base64').toString('utf8') : v;
  }
  return out;
}

/**
 * The volume plugins' objects read from the ObjectManager (what the pod sync's prefetch fetched
 * under the change detection strategy), so volumes and env see the same copy and Watch serves
 * volumes from the watch. An object no registered pod refers to, or one never read (its GET
 * failed, its watch not listed yet), is read directly; tokens always are.
 */
export class ManagedObjectSource implements VolumeObjectSource {
  constructor(private readonly manager: ObjectManager, private readonly direct: ApiObjectSource) {}

  private read(kind: ObjectKind, namespace: string, name: string): ApiObject | undefined {
    const e = this.manager.object(kind, namespace, name);
    if (!e?.synced) return undefined;
    if (!e.obj) {
      const singular = kind === 'configmaps' ? 'configmap' : 'secret';
      throw new VolumeObjectError('ERR_VOLUME_OBJECT_NOT_FOUND', singular, namespace, name, `${singular} "${name}" not found`);
    }
    return e.obj;
  }

  async getConfigMap(namespace: string, name: string): Promise<ConfigMapObject> {
    return (this.read('configmaps', namespace, name) as ConfigMapObject | undefined) ?? this.direct.getConfigMap(namespace, name);
  }

  async getSecret(namespace: string, name: string): Promise<SecretObject> {
    return (this.read('secrets', namespace, name) as SecretObject | undefined) ?? this.direct.getSecret(namespace, name);
  }

  requestServiceAccountToken(namespace: string, serviceAccount: string, audience: string, expirationSeconds: number, boundPod: BoundPod): Promise<ServiceAccountToken> {
    return this.direct.requestServiceAccountToken(namespace, serviceAccount, audience, expirationSeconds, boundPod);
  }

  prune(): void {
    this.direct.prune();
  }
}
