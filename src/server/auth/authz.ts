// Authorization of kubelet API requests: AlwaysAllow, or Webhook, which asks the API server with
// a SubjectAccessReview (authorization.k8s.io/v1) per attribute set, caching allowed answers for
// cacheAuthorizedTTL and denied ones for cacheUnauthorizedTTL (errors are not cached).

import type { Clock } from '../../util/clock.js';
import type { RequestAttributes } from './attributes.js';
import { TtlCache } from './ttl-cache.js';

export type Decision = 'allow' | 'deny' | 'no-opinion';

export interface Authorizer {
  /** Throws when no decision could be had (the webhook failed). */
  authorize(attrs: RequestAttributes): Promise<Decision>;
}

export const alwaysAllow: Authorizer = { authorize: () => Promise.resolve('allow') };

/** A SubjectAccessReview's spec, as sent. */
export interface SubjectAccessReviewSpec {
  resourceAttributes: { namespace: string; verb: string; group: string; version: string; resource: string; subresource: string; name: string };
  user: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export interface SubjectAccessReviewStatus {
  allowed?: boolean;
  denied?: boolean;
  reason?: string;
  evaluationError?: string;
}

export type AccessReviewer = (spec: SubjectAccessReviewSpec) => Promise<SubjectAccessReviewStatus>;

/** The AccessReviewer that posts through the kubelet's API client. */
export function apiAccessReviewer(client: { create<T>(path: string, body: unknown, o?: { timeoutMs?: number; maxRetries?: number }): Promise<T> }): AccessReviewer {
  return async (spec) => {
    const review = await client.create<{ status?: SubjectAccessReviewStatus }>('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec,
    }, { timeoutMs: 10_000, maxRetries: 2 });
    return review.status ?? {};
  };
}

export function reviewSpec(a: RequestAttributes): SubjectAccessReviewSpec {
  const spec: SubjectAccessReviewSpec = {
    resourceAttributes: { namespace: a.namespace, verb: a.verb, group: a.apiGroup, version: a.apiVersion, resource: a.resource, subresource: a.subresource, name: a.name },
    user: a.user.name,
    groups: [...a.user.groups],
  };
  if (a.user.uid) spec.uid = a.user.uid;
  if (a.user.extra && Object.keys(a.user.extra).length > 0) spec.extra = a.user.extra;
  return spec;
}

export function webhookAuthorizer(review: AccessReviewer, clock: Clock, ttl: { authorizedMs: number; unauthorizedMs: number }): Authorizer {
  const cache = new TtlCache<Decision>(clock);
  return {
    authorize(attrs) {
      const spec = reviewSpec(attrs);
      return cache.getOrLoad(JSON.stringify(spec), async () => {
        const status = await review(spec);
        return status.allowed ? 'allow' : status.denied ? 'deny' : 'no-opinion';
      }, (d) => (d === 'allow' ? ttl.authorizedMs : ttl.unauthorizedMs));
    },
  };
}
