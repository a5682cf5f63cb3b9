// Authentication of kubelet API requests, as upstream's delegating authenticator builds it: x509
// client certificates verified against authentication.x509.clientCAFile (user = CN, groups = O),
// then bearer tokens (Authorization header, or the WebSocket subprotocol form) checked by a
// TokenReview sent to the API server (results cached for cacheTTL, failures too); the first that
// identifies the request wins, and authenticated users get `system:authenticated`. With no
// credentials the request is anonymous when authentication.anonymous.enabled; presented
// credentials that fail are an error (401) even then.

import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { PeerCertificate } from 'node:tls';
import type { Clock } from '../../util/clock.js';
import { KubeletError } from '../../util/errors.js';
import { tlsSocketOf } from '../server.js';
import type { UserInfo } from './attributes.js';
import { TtlCache } from './ttl-cache.js';

export const ANONYMOUS_USER = 'system:anonymous';
export const UNAUTHENTICATED_GROUP = 'system:unauthenticated';
export const AUTHENTICATED_GROUP = 'system:authenticated';

const CLIENT_AUTH_EKU = '1.3.6.1.5.5.7.3.2';
const ANY_EKU = '2.5.29.37.0';
const WEBSOCKET_TOKEN_PREFIX = 'base64url.bearer.authorization.k8s.io.';

/** A request's credentials could not be checked or were refused. */
export class AuthenticationError extends KubeletError {
  constructor(message: string, cause?: unknown) {
    super('ERR_AUTHENTICATION', message, cause === undefined ? undefined : { cause });
  }
}

/** undefined: this method found no credentials of its kind; throws when they are bad. */
export type AuthenticatorMethod = (req: IncomingMessage) => Promise<UserInfo | undefined>;

/** The API server's answer to a TokenReview. */
export interface TokenReviewStatus {
  authenticated?: boolean;
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  error?: string;
}

/** Sends a TokenReview (authentication.k8s.io/v1) and returns its status. */
export type TokenReviewer = (token: string) => Promise<TokenReviewStatus>;

/** The TokenReviewer that posts through the kubelet's API client. */
export function apiTokenReviewer(client: { create<T>(path: string, body: unknown, o?: { timeoutMs?: number; maxRetries?: number }): Promise<T> }): TokenReviewer {
  return async (token) => {
    const review = await client.create<{ status?: TokenReviewStatus }>('/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token },
    }, { timeoutMs: 10_000, maxRetries: 2 });
    return review.status ?? {};
  };
}

/** x509: the verified client certificate's subject. */
export function x509Authenticator(): AuthenticatorMethod {
  return async (req) => {
    const sock = tlsSocketOf(req);
    if (!sock) return undefined;
    const cert = sock.getPeerCertificate() as PeerCertificate & { ext_key_usage?: string[] };
    if (!cert || Object.keys(cert).length === 0 || !cert.subject) return undefined;
    if (!sock.authorized) {
      throw new AuthenticationError(`verifying certificate ${subjectText(cert)} failed: ${String(sock.authorizationError ?? 'not signed by the client CA')}`);
    }
    const eku = cert.ext_key_usage;
    if (eku !== undefined && !eku.includes(CLIENT_AUTH_EKU) && !eku.includes(ANY_EKU)) {
      throw new AuthenticationError(`verifying certificate ${subjectText(cert)} failed: not valid for client authentication`);
    }
    const name = first(cert.subject.CN);
    if (!name) throw new AuthenticationError(`certificate ${subjectText(cert)} has no common name`);
    return { name, groups: all(cert.subject.O) };
  };
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function all(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
}

function subjectText(cert: PeerCertificate): string {
  return `CN=${first(cert.subject?.CN) ?? ''}`;
}

/** The bearer token of a request: the Authorization header, or a WebSocket subprotocol token. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth !== undefined) {
    const parts = auth.trim().split(' ');
    if (parts.length >= 2 && parts[0]!.toLowerCase() === 'bearer' && parts[1] !== '') return parts[1];
    return undefined;
  }
  if (String(req.headers.upgrade ?? '').toLowerCase() === 'websocket') {
    for (const proto of String(req.headers['sec-websocket-protocol'] ?? '').split(',')) {
      const p = proto.trim();
      if (p.startsWith(WEBSOCKET_TOKEN_PREFIX)) {
        const token = Buffer.from(p.slice(WEBSOCKET_TOKEN_PREFIX.length), 'base64url').toString('utf8');
        return token === '' ? undefined : token;
      }
    }
  }
  return undefined;
}

/** Bearer tokens checked by TokenReview, cached (by token hash) for `cacheTtlMs`. */
export function webhookTokenAuthenticator(review: TokenReviewer, clock: Clock, cacheTtlMs: number): AuthenticatorMethod {
  const cache = new TtlCache<TokenReviewStatus>(clock);
  return async (req) => {
    const token = bearerToken(req);
    if (token === undefined) return undefined;
    const key = createHash('sha256').update(token).digest('hex');
    let status: TokenReviewStatus;
    try {
      status = await cache.getOrLoad(key, () => review(token), () => cacheTtlMs);
    } catch (err) {
      throw new AuthenticationError(`token review failed: ${(err as Error).message}`, err);
    }
    if (!status.authenticated || !status.user?.username) {
      throw new AuthenticationError(`invalid bearer token${status.error ? `: ${status.error}` : ''}`);
    }
    const u = status.user;
    return { name: u.username!, uid: u.uid, groups: [...(u.groups ?? [])], extra: u.extra };
  };
}

export interface Authenticator {
  /** The user, or undefined when no identity (401); throws AuthenticationError on bad credentials. */
  authenticate(req: IncomingMessage): Promise<UserInfo | undefined>;
}

/** Methods in order, then anonymous when allowed; `system:authenticated` added to real users. */
export function unionAuthenticator(methods: readonly AuthenticatorMethod[], anonymous: boolean): Authenticator {
  return {
    async authenticate(req) {
      const errors: Error[] = [];
      for (const m of methods) {
        try {
          const user = await m(req);
          if (user) {
            if (!user.groups.includes(AUTHENTICATED_GROUP) && user.name !== ANONYMOUS_USER) user.groups.push(AUTHENTICATED_GROUP);
            return user;
          }
        } catch (err) {
          errors.push(err as Error);
        }
      }
      if (errors.length > 0) throw new AuthenticationError(errors.map((e) => e.message).join('; '), errors[0]);
      return anonymous ? { name: ANONYMOUS_USER, groups: [UNAUTHENTICATED_GROUP] } : undefined;
    },
  };
}
