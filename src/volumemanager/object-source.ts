// Where the configMap, secret and projected plugins get their API objects (upstream: the
// kubelet's configmap/secret managers and the token manager's TokenRequest call). With an API
// client the objects come from core/v1 over REST; without one (standalone) every read fails
// as upstream's volume host does: "not supported due to running kubelet in standalone mode".
//
// Change detection (configMapAndSecretChangeDetectionStrategy) is the kubelet's ObjectManager
// (src/kubelet/configmap-secret.ts): the kubelet hands the volume manager a source that reads
// what the pod sync fetched there (a watch per object by default). ApiObjectSource here is the
// direct path: a GET behind a short TTL cache (none for Get), for objects no pod registered and
// for TokenRequests.

import { isNotFound, type RestClient } from '../client/index.js';
import type { Clock } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';

export interface ConfigMapObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  data?: Record<string, string>;
  /** Values base64-encoded, as on the wire. */
  binaryData?: Record<string, string>;
}

export interface SecretObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  /** Values base64-encoded, as on the wire. */
  data?: Record<string, string>;
  type?: string;
}

/** A TokenRequest's answer. */
export interface ServiceAccountToken {
  token: string;
  /** ms since the epoch. */
  expirationTimestamp: number;
  /** The lifetime asked for (the server may shorten it; upstream reads it from the spec it sent back). */
  expirationSeconds: number;
}

/** The pod a token is bound to (TokenRequest spec.boundObjectRef). */
export interface BoundPod {
  name: string;
  uid: string;
}

export interface VolumeObjectSource {
  /** Throws VolumeObjectError (`notFound` set when the object does not exist). */
  getConfigMap(namespace: string, name: string): Promise<ConfigMapObject>;
  getSecret(namespace: string, name: string): Promise<SecretObject>;
  /** POST serviceaccounts/<sa>/token; `audience` '' asks for the API server's own audiences. */
  requestServiceAccountToken(namespace: string, serviceAccount: string, audience: string, expirationSeconds: number, boundPod: BoundPod): Promise<ServiceAccountToken>;
  /** Drops what it cached that is stale (called from housekeeping). */
  prune?(): void;
}

export type ObjectKind = 'configmap' | 'secret' | 'serviceaccount token';

/** An API object a volume needs could not be read; the message names the object. */
export class VolumeObjectError extends KubeletError {
  declare readonly code: 'ERR_VOLUME_OBJECT_NOT_FOUND' | 'ERR_VOLUME_OBJECT_STANDALONE' | 'ERR_VOLUME_OBJECT_STATIC_POD' | 'ERR_VOLUME_OBJECT_FETCH';
  constructor(
    code: VolumeObjectError['code'],
    readonly kind: ObjectKind,
    readonly namespace: string,
    /** The object's name (`name` is the error class's). */
    readonly objectName: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }

  get notFound(): boolean {
    return this.code === 'ERR_VOLUME_OBJECT_NOT_FOUND';
  }
}

/** Standalone (no --kubeconfig): every object read fails as upstream's volume host does. */
export class StandaloneObjectSource implements VolumeObjectSource {
  private fail(kind: ObjectKind, namespace: string, name: string): never {
    throw new VolumeObjectError('ERR_VOLUME_OBJECT_STANDALONE', kind, namespace, name,
      `${kind} "${namespace}/${name}": not supported due to running kubelet in standalone mode`);
  }

  async getConfigMap(namespace: string, name: string): Promise<ConfigMapObject> {
    return this.fail('configmap', namespace, name);
  }

  async getSecret(namespace: string, name: string): Promise<SecretObject> {
    return this.fail('secret', namespace, name);
  }

  async requestServiceAccountToken(namespace: string, serviceAccount: string, _audience: string, _expirationSeconds: number, _boundPod: BoundPod): Promise<ServiceAccountToken> {
    return this.fail('serviceaccount token', namespace, serviceAccount);
  }
}

/** upstream configMapAndSecretChangeDetectionStrategy. */
export type ChangeDetectionStrategy = 'Get' | 'Cache' | 'Watch';

/** upstream's default TTL of the Cache strategy (without a node TTL annotation). */
export const DEFAULT_OBJECT_TTL_MS = 60_000;

export interface ApiObjectSourceOptions {
  client: RestClient;
  clock: Clock;
  /** Default Watch, served as a TTL cache (see the header). */
  strategy?: ChangeDetectionStrategy;
  ttlMs?: number;
  /** One call's deadline. */
  timeoutMs?: number;
}

interface CacheEntry {
  at: number;
  value?: unknown;
  error?: VolumeObjectError;
}

const seg = encodeURIComponent;

/** Objects over the API client: core/v1 GETs (TTL-cached unless strategy Get) and TokenRequest POSTs. */
export class ApiObjectSource implements VolumeObjectSource {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inflight = new Map<string, Promise<unknown>>();
  private readonly ttlMs: number;

  constructor(private readonly opts: ApiObjectSourceOptions) {
    this.ttlMs = (opts.strategy ?? 'Watch') === 'Get' ? 0 : (opts.ttlMs ?? DEFAULT_OBJECT_TTL_MS);
  }

  getConfigMap(namespace: string, name: string): Promise<ConfigMapObject> {
    return this.get('configmap', 'configmaps', namespace, name) as Promise<ConfigMapObject>;
  }

  getSecret(namespace: string, name: string): Promise<SecretObject> {
    return this.get('secret', 'secrets', namespace, name) as Promise<SecretObject>;
  }

  /** Objects (and NotFound answers) cached. */
  get cached(): number {
    return this.cache.size;
  }

  /** Drops cached objects older than the TTL (bounded memory whatever pods come and go). */
  prune(): void {
    const now = this.opts.clock.now();
    for (const [k, e] of this.cache) if (now - e.at >= this.ttlMs) this.cache.delete(k);
  }

  private async get(kind: 'configmap' | 'secret', plural: string, namespace: string, name: string): Promise<unknown> {
    const key = `${plural}/${namespace}/${name}`;
    const now = this.opts.clock.now();
    const hit = this.cache.get(key);
    if (hit && now - hit.at < this.ttlMs) {
      if (hit.error) throw hit.error;
      return hit.value;
    }
    let p = this.inflight.get(key);
    if (!p) {
      p = this.fetch(kind, plural, namespace, name, key).finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  private async fetch(kind: 'configmap' | 'secret', plural: string, namespace: string, name: string, key: string): Promise<unknown> {
    const at = this.opts.clock.now();
    try {
      const obj = await this.opts.client.get(`/api/v1/namespaces/${seg(namespace)}/${plural}/${seg(name)}`, { timeoutMs: this.opts.timeoutMs });
      if (this.ttlMs > 0) this.cache.set(key, { at, value: obj });
      return obj;
    } catch (err) {
      if (isNotFound(err)) {
        // upstream's managers name the kind in the singular: `configmap "x" not found`
        const e = new VolumeObjectError('ERR_VOLUME_OBJECT_NOT_FOUND', kind, namespace, name, `${kind} "${name}" not found`, { cause: err });
        if (this.ttlMs > 0) this.cache.set(key, { at, error: e });
        throw e;
      }
      throw new VolumeObjectError('ERR_VOLUME_OBJECT_FETCH', kind, namespace, name,
        `failed to get ${kind} "${namespace}/${name}": ${(err as Error).message}`, { cause: err });
    }
  }

  async requestServiceAccountToken(namespace: string, serviceAccount: string, audience: string, expirationSeconds: number, boundPod: BoundPod): Promise<ServiceAccountToken> {
    const body = {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        audiences: audience ? [audience] : [],
        expirationSeconds,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: boundPod.name, uid: boundPod.uid },
      },
    };
    const what = `serviceaccounts "${serviceAccount}" in namespace "${namespace}"`;
    let tr: { spec?: { expirationSeconds?: number }; status?: { token?: string; expirationTimestamp?: string } };
    try {
      tr = await this.opts.client.create(`/api/v1/namespaces/${seg(namespace)}/serviceaccounts/${seg(serviceAccount)}/token`, body, { timeoutMs: this.opts.timeoutMs });
    } catch (err) {
      const code = isNotFound(err) ? 'ERR_VOLUME_OBJECT_NOT_FOUND' : 'ERR_VOLUME_OBJECT_FETCH';
      throw new VolumeObjectError(code, 'serviceaccount token', namespace, serviceAccount, `failed to fetch token for ${what}: ${(err as Error).message}`, { cause: err });
    }
    const token = tr?.status?.token;
    const exp = Date.parse(tr?.status?.expirationTimestamp ?? '');
    if (!token || !Number.isFinite(exp)) {
      throw new VolumeObjectError('ERR_VOLUME_OBJECT_FETCH', 'serviceaccount token', namespace, serviceAccount, `TokenRequest for ${what} answered without a token or expirationTimestamp`);
    }
    return { token, expirationTimestamp: exp, expirationSeconds: tr.spec?.expirationSeconds ?? expirationSeconds };
  }
}
