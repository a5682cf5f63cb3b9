// Upstream's mapping of a kubelet API request to the authorization attributes it is checked
// against (pkg/kubelet/server/auth.go): resource `nodes`, name the node, a subresource by path,
// and a verb by method. With KubeletFineGrainedAuthz (on by default since 1.33, GA in 1.36),
// /pods, /runningpods, /healthz and /configz are checked as their own subresource first and as
// `proxy` after a denial; /stats, /metrics, /logs, /spec and /checkpoint only as their own.

export interface UserInfo {
  name: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** One SubjectAccessReview's resource attributes. */
export interface RequestAttributes {
  user: UserInfo;
  verb: string;
  namespace: '';
  apiGroup: '';
  apiVersion: 'v1';
  resource: 'nodes';
  subresource: string;
  name: string;
  path: string;
}

/** HTTP method → API verb; any other method has no verb ('' as upstream). */
export function verbFor(method: string): string {
  switch (method) {
    case 'GET': return 'get';
    case 'POST': return 'create';
    case 'PUT': return 'update';
    case 'PATCH': return 'patch';
    case 'DELETE': return 'delete';
    default: return '';
  }
}

/** `path` is `prefix` or below it (prefix given without its trailing slash). */
export function isSubpath(path: string, prefix: string): boolean {
  const p = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  return path === p || (path.startsWith(p) && path[p.length] === '/');
}

/** Paths with a subresource of their own and no proxy fallback. */
const OWN_SUBRESOURCE: ReadonlyArray<[string, string]> = [
  ['/stats', 'stats'],
  ['/metrics', 'metrics'],
  ['/logs', 'log'],
  ['/spec', 'spec'],
  ['/checkpoint', 'checkpoint'],
];

/** Fine-grained paths that fall back to nodes/proxy. */
const WITH_PROXY_FALLBACK: ReadonlyArray<[string, string]> = [
  ['/pods', 'pods'],
  ['/runningpods', 'pods'],
  ['/healthz', 'healthz'],
  ['/configz', 'configz'],
];

/** The subresources a request is checked against, in order (the first allowed admits it). */
export function subresourcesFor(path: string, fineGrained: boolean): string[] {
  for (const [prefix, sub] of OWN_SUBRESOURCE) {
    // /checkpoint became its own subresource with the fine-grained mapping.
    if (sub === 'checkpoint' && !fineGrained) continue;
    if (isSubpath(path, prefix)) return [sub];
  }
  if (fineGrained) {
    for (const [prefix, sub] of WITH_PROXY_FALLBACK) if (isSubpath(path, prefix)) return [sub, 'proxy'];
  }
  return ['proxy'];
}

/** The attributes to authorize, in order. */
export function requestAttributes(user: UserInfo, method: string, path: string, nodeName: string, fineGrained: boolean): RequestAttributes[] {
  const verb = verbFor(method);
  return subresourcesFor(path, fineGrained).map((subresource) => ({
    user, verb, namespace: '', apiGroup: '', apiVersion: 'v1', resource: 'nodes', subresource, name: nodeName, path,
  }));
}

/** Go's %v of a string slice: [a b]. */
export function goList(items: readonly string[]): string {
  return `[${items.join(' ')}]`;
}
