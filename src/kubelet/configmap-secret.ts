// ConfigMaps and Secrets for pods from the API server (upstream pkg/kubelet/configmap,
// pkg/kubelet/secret and util/manager), as configMapAndSecretChangeDetectionStrategy says:
//   Watch (default): one list+watch per referenced object (fieldSelector metadata.name), kept
//     while a pod refers to it; reads come from what the watch last saw.
//   Cache: a GET when the cached copy is older than the TTL (upstream: one minute), or was read
//     before the pod was registered.
//   Get: a GET for every pod sync.
// The container environment is built synchronously, so a pod sync first awaits prefetch(pod);
// lookups then read what was fetched. Only env and envFrom references count here (volumes
// are the volume manager's).

import type { Pod } from '../api/types.js';
import { isNotFound } from '../client/errors.js';
import type { RestClient } from '../client/rest.js';
import { Reflector, type KubeObject } from '../client/reflector.js';
import type { KeyValueSource } from '../runtime/env.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';

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

/** The ConfigMap and Secret names a pod's containers read through env and envFrom. */
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
  return out;
}

interface Entry {
  kind: ObjectKind;
  namespace: string;
  name: string;
  /** Pods referring to it. */
  pods: Set<string>;
  /** The object's data (secret values decoded); undefined: not found (or not read yet). */
  data?: Record<string, string>;
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
      return e?.synced ? e.data : undefined;
    };
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
      const obj = await this.o.client.get<ApiObject>(`${this.path(e)}/${encodeURIComponent(e.name)}`);
      e.data = dataOf(e.kind, obj);
    } catch (err) {
      if (!isNotFound(err)) {
        // Unreachable: keep what was read before (the sync reports a missing object if none).
        this.o.log.warn('Reading an object for a pod failed', { object: `${e.kind}/${e.namespace}/${e.name}`, err: errorMessage(err) });
        return;
      }
      e.data = undefined;
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
        e.data = ev.type === 'DELETED' ? undefined : dataOf(e.kind, ev.object);
        e.readAt = this.o.clock.now();
      },
      onSynced: () => { e.synced = true; },
    });
    e.reflector = { ctl, r, done: r.run(ctl.signal) };
  }
}

/** A ConfigMap's data, or a Secret's data decoded from base64 (what env reads). */
function dataOf(kind: ObjectKind, obj: ApiObject | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj?.data ?? {})) {
    if (typeof v !== 'string') continue;
    out[k] = kind === 'secrets' ? Buffer.from(v, 'base64').toString('utf8') : v;
  }
  return out;
}
