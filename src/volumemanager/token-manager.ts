// Service account tokens for projected volumes (upstream pkg/kubelet/token): one cached
// TokenRequest answer per (namespace, account, audience, lifetime, bound pod), refreshed once
// 80% of its lifetime has passed or it is older than 24 hours (less a jitter of up to 10 s), as
// upstream. A failed refresh keeps serving the cached token until it expires.

import type { Clock } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';
import type { BoundPod, ServiceAccountToken, VolumeObjectSource } from './object-source.js';

/** upstream maxTTL: a token is refreshed at the latest this long after it was issued. */
export const TOKEN_MAX_TTL_MS = 24 * 60 * 60_000;
/** upstream maxJitter. */
export const TOKEN_MAX_JITTER_MS = 10_000;

export class TokenExpiredError extends KubeletError {
  constructor(readonly key: string, options?: { cause?: unknown }) {
    super('ERR_TOKEN_EXPIRED', `token ${key} expired and refresh failed: ${(options?.cause as Error | undefined)?.message ?? 'unknown error'}`, options);
  }
}

interface Cached {
  token: ServiceAccountToken;
  podUID: string;
}

export interface TokenManagerOptions {
  source: VolumeObjectSource;
  clock: Clock;
  /** ms taken off the refresh deadlines; upstream draws it in [0, 10 s). */
  jitterMs?: () => number;
  onRefreshError?: (key: string, err: unknown) => void;
}

export class TokenManager {
  private readonly cache = new Map<string, Cached>();
  private readonly jitter: () => number;

  constructor(private readonly opts: TokenManagerOptions) {
    this.jitter = opts.jitterMs ?? (() => Math.floor(Math.random() * (TOKEN_MAX_JITTER_MS / 1000)) * 1000);
  }

  async getServiceAccountToken(namespace: string, serviceAccount: string, audience: string, expirationSeconds: number, pod: BoundPod): Promise<ServiceAccountToken> {
    const key = `"${serviceAccount}"/"${namespace}"/[${audience}]/${expirationSeconds}/${pod.name}/${pod.uid}`;
    const cached = this.cache.get(key);
    if (cached && !this.requiresRefresh(cached.token)) return cached.token;
    let token: ServiceAccountToken;
    try {
      token = await this.opts.source.requestServiceAccountToken(namespace, serviceAccount, audience, expirationSeconds, pod);
    } catch (err) {
      if (!cached) throw err;
      if (this.expired(cached.token)) throw new TokenExpiredError(key, { cause: err });
      this.opts.onRefreshError?.(key, err);
      return cached.token;
    }
    this.cache.set(key, { token, podUID: pod.uid });
    return token;
  }

  /** upstream requiresRefresh: past 80% of the lifetime, or 24 h after issue (each less the jitter). */
  requiresRefresh(t: ServiceAccountToken): boolean {
    const now = this.opts.clock.now();
    const lifetimeMs = t.expirationSeconds * 1000;
    const issuedAt = t.expirationTimestamp - lifetimeMs;
    const jitter = this.jitter();
    if (now > issuedAt + TOKEN_MAX_TTL_MS - jitter) return true;
    return now > t.expirationTimestamp - Math.floor(lifetimeMs * 0.2) - jitter;
  }

  private expired(t: ServiceAccountToken): boolean {
    return this.opts.clock.now() > t.expirationTimestamp;
  }

  /** Drops the tokens bound to a pod that is gone (upstream DeleteServiceAccountToken). */
  forgetPod(podUID: string): void {
    for (const [k, c] of this.cache) if (c.podUID === podUID) this.cache.delete(k);
  }

  /** Drops expired tokens (upstream's periodic cleanup). */
  prune(): void {
    for (const [k, c] of this.cache) if (this.expired(c.token)) this.cache.delete(k);
  }

  get size(): number {
    return this.cache.size;
  }
}
