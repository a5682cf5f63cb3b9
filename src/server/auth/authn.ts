// Authentication of kubelet API requests, as upstream's delegating authenticator builds it: x509
// client certificates verified against authentication.x509.clientCAFile (user = the last CN,
// groups = O, extended key usage checked along the chain as Go does),
// then bearer tokens (Authorization header, or the WebSocket subprotocol form) checked by a
// TokenReview sent to the API server (results cached for cacheTTL, failures too); the first that
// identifies the request wins, and authenticated users get `system:authenticated`. With no
// credentials the request is anonymous when authentication.anonymous.enabled; presented
// credentials that fail are an error (401) even then.

import { createHash, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
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

/** A certificate of the peer's chain as node's getPeerCertificate(true) links it. */
type ChainCert = PeerCertificate & { ext_key_usage?: string[]; issuerCertificate?: ChainCert };

/** The peer's chain, leaf first, as node built it (the certificates sent, then the CA store's issuers). */
function peerChain(leaf: ChainCert): ChainCert[] {
  const chain: ChainCert[] = [];
  for (let c: ChainCert | undefined = leaf; c && chain.length < 16; c = c.issuerCertificate) {
    chain.push(c);
    if (c.issuerCertificate === c) break;
  }
  return chain;
}

/** The certificates of a PEM bundle. */
function parseBundle(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new X509Certificate(b));
}

/**
 * Go's chain check where OpenSSL's differs: OpenSSL refuses a chain with anyExtendedKeyUsage in
 * place of clientAuth (INVALID_PURPOSE) before it checks signatures, and Go accepts it. Each
 * certificate signed by the next, each valid now, every issuer a CA, the last one a certificate
 * of the client CA file.
 */
function verifyChainAsGo(chain: ChainCert[], roots: X509Certificate[], now: number): string | undefined {
  const certs = chain.map((c) => new X509Certificate(c.raw));
  const last = certs[certs.length - 1]!;
  if (!roots.some((r) => r.fingerprint256 === last.fingerprint256)) return 'certificate signed by unknown authority';
  for (let i = 0; i < certs.length; i++) {
    const c = certs[i]!;
    if (now < Date.parse(c.validFrom) || now > Date.parse(c.validTo)) return `certificate has expired or is not yet valid: ${c.subject.replace(/\n/g, ',')}`;
    const issuer = certs[i + 1] ?? c;
    if (i + 1 < certs.length && !issuer.ca) return `x509: certificate ${issuer.subject.replace(/\n/g, ',')} is not authorized to sign other certificates`;
    if (!c.checkIssued(issuer) || !c.verify(issuer.publicKey)) return 'certificate signed by unknown authority';
  }
  return undefined;
}

/**
 * Go's x509 Verify with ExtKeyUsageClientAuth: every certificate of the chain (root included)
 * that lists extended key usages must list clientAuth or anyExtendedKeyUsage.
 */
function chainAllowsClientAuth(chain: ChainCert[]): boolean {
  return chain.every((c) => c.ext_key_usage === undefined || c.ext_key_usage.includes(CLIENT_AUTH_EKU) || c.ext_key_usage.includes(ANY_EKU));
}

/**
 * x509: the client certificate verified against the client CA file, its identity as Kubernetes
 * derives it from Go's pkix.Name: user = the subject's CommonName (the last CN attribute when
 * there are several), groups = the Organization values.
 */
export function x509Authenticator(clientCAFile = ''): AuthenticatorMethod {
  let roots: Promise<X509Certificate[]> | undefined;
  return async (req) => {
    const sock = tlsSocketOf(req);
    if (!sock) return undefined;
    const cert = sock.getPeerCertificate(true) as ChainCert;
    if (!cert || Object.keys(cert).length === 0 || !cert.subject) return undefined;
    const chain = peerChain(cert);
    if (!sock.authorized) {
      let reason = String(sock.authorizationError ?? 'not signed by the client CA');
      if (reason === 'INVALID_PURPOSE' && clientCAFile !== '') {
        roots ??= readFile(clientCAFile, 'utf8').then(parseBundle);
        // Wall time, as OpenSSL's own check of the same chain.
        const why = verifyChainAsGo(chain, await roots, Date.now());
        if (why === undefined && chainAllowsClientAuth(chain)) reason = '';
        else reason = why ?? 'x509: certificate specifies an incompatible key usage';
      }
      if (reason !== '') throw new AuthenticationError(`verifying certificate ${subjectText(cert)} failed: ${reason}`);
    }
    if (!chainAllowsClientAuth(chain)) {
      throw new AuthenticationError(`verifying certificate ${subjectText(cert)} failed: x509: certificate specifies an incompatible key usage`);
    }
    const name = lastOf(cert.subject.CN);
    if (!name) throw new AuthenticationError(`certificate ${subjectText(cert)} has no common name`);
    return { name, groups: all(cert.subject.O) };
  };
}

/** Go's pkix.Name keeps the last value of a single-valued attribute such as CN. */
function lastOf(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[v.length - 1] : v;
}

function all(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
}

function subjectText(cert: PeerCertificate): string {
  return `CN=${lastOf(cert.subject?.CN) ?? ''}`;
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
