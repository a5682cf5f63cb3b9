// The container spec hash written to io.kubernetes.container.hash (upstream:
// kubecontainer.HashContainer). A running container whose recorded hash differs from the
// hash of its current spec is restarted, so the hash must be stable for an unchanged spec
// (across key order, restarts of kubelet-ts and Node versions) and change on any edit.
//
// Covered: the whole v1.Container object as upstream 1.30 hashes it (its JSON form, every
// field, unknown pass-through fields included). Upstream hashes Go's json.Marshal output with
// FNV-32a; we cannot reproduce Go's field order and omitempty rules for every field, so we
// hash a canonical JSON instead:
//   - object keys sorted (code-unit order), so key order never matters;
//   - absent, null, '' , [] and {} dropped (what Go's omitempty drops for nil/empty), so an
//     explicit empty value hashes like a missing one;
//   - false and 0 kept (they are meaningful for pointer fields such as privileged);
//   - resource quantities under resources.limits / resources.requests replaced by their exact
//     amount ("0.5", "500m" and 0.5 are the same CPU), as upstream's canonical Quantity JSON;
//   - array order kept (env, ports, args are ordered).
// The result is FNV-32a over the UTF-8 bytes, in lowercase hex without padding, as upstream
// formats it (strconv.FormatUint(h, 16)).

import type { Container } from '../api/types.js';
import { parseQuantity } from '../api/quantity.js';

const FNV32_OFFSET = 0x811c9dc5;
const FNV32_PRIME = 0x01000193;

/** FNV-1a, 32 bits, over the UTF-8 encoding of `s`. */
export function fnv32a(s: string): number {
  const bytes = Buffer.from(s, 'utf8');
  let h = FNV32_OFFSET;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i]!;
    h = Math.imul(h, FNV32_PRIME) >>> 0;
  }
  return h >>> 0;
}

/**
 * Hashes by container object: a pod's spec is replaced, never edited in place, when it changes,
 * and every resync (1000 pods: ~17 a second) hashes each of its containers again.
 */
const hashes = new WeakMap<Container, string>();

/** The hash of a container spec, as the io.kubernetes.container.hash annotation carries it. */
export function hashContainer(c: Container): string {
  let h = hashes.get(c);
  if (h === undefined) {
    h = fnv32a(canonicalContainerJSON(c)).toString(16);
    hashes.set(c, h);
  }
  return h;
}

/** The canonical JSON text the hash is taken over (exported for tests and debugging). */
export function canonicalContainerJSON(c: Container): string {
  return canonicalJSON(normalize(c as unknown, []) ?? {});
}

/** True for the container's own resources.limits / resources.requests maps. */
function isResourceListPath(path: readonly string[]): boolean {
  return path.length === 2 && path[0] === 'resources' && (path[1] === 'limits' || path[1] === 'requests');
}

function canonicalQuantity(v: unknown): unknown {
  if (typeof v !== 'string' && typeof v !== 'number') return v;
  try {
    // nano-units are exact: two spellings of one amount hash alike
    return `q:${parseQuantity(v).nanos.toString()}`;
  } catch {
    return v;
  }
}

/** Drops empty values, canonicalizes quantities; returns undefined for "omit this". */
function normalize(v: unknown, path: readonly string[] | null): unknown {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v === '' ? undefined : v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'bigint') return v.toString();
  if (Array.isArray(v)) {
    if (v.length === 0) return undefined;
    // keep positions: an empty element is still an element
    return v.map((x) => normalize(x, null) ?? null);
  }
  if (typeof v === 'object') {
    const out: Record<string, unknown> = {};
    const quantities = path !== null && isResourceListPath(path);
    for (const key of Object.keys(v as object).sort()) {
      const raw = (v as Record<string, unknown>)[key];
      // only the first two levels below the container can lead to its resource lists
      const childPath = path !== null && path.length < 2 ? [...path, key] : null;
      const n = quantities ? canonicalQuantity(raw) : normalize(raw, childPath);
      if (n !== undefined) out[key] = n;
    }
    return Object.keys(out).length === 0 ? undefined : out;
  }
  return undefined;
}

function canonicalJSON(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonicalJSON).join(',')}]`;
  const obj = v as Record<string, unknown>;
  // keys are already sorted by normalize(); sort again so this function stands alone
  return `{${Object.keys(obj)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJSON(obj[k])}`)
    .join(',')}}`;
}
