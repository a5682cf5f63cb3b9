// The container hash written to io.kubernetes.container.hash (upstream:
// kubecontainer.HashContainer, pkg/kubelet/container/helpers.go), as upstream 1.31-1.34 compute
// it, so that a container started by the upstream kubelet is adopted rather than restarted:
//   - only two fields are hashed, through a map {"name": container.Name, "image": container.Image}
//     (pickFieldsToHash: a pod update may change only the image; resources change by a resize,
//     which restarts nothing; a static pod edited in its file gets a new UID, so a new pod);
//   - the map goes through Go's json.Marshal: keys sorted ("image" before "name"), strings
//     escaped as encoding/json does (HTML characters too), an absent image is "";
//   - those JSON bytes, a []byte, go to hashutil.DeepHashObject, which writes go-spew's "%#v"
//     rendering of the value (ConfigState Indent " ", SortKeys, DisableMethods, SpewKeys) into
//     FNV-32a. For a []byte that rendering is the type then the bytes in decimal:
//     ([]uint8)[123 34 105 ...] - it is that text, not the JSON, which is hashed;
//   - the 32-bit sum is written in lowercase hex without padding (strconv.FormatUint(h, 16)).
// Upstream 1.31 dropped the second label (io.kubernetes.container.hashWithoutResources); it is
// neither written nor read here.
//
// Older kubelet-ts releases wrote a hash of the whole container spec (legacyKubeletTsHash below);
// containerHashMatches accepts it too, so upgrading kubelet-ts does not restart what it started.

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

/** Go's encoding/json string encoding (HTML-safe, as json.Marshal uses it; Go 1.22+ escapes). */
export function goJSONString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp === 0x22) out += '\\"';
    else if (cp === 0x5c) out += '\\\\';
    else if (cp === 0x0a) out += '\\n';
    else if (cp === 0x0d) out += '\\r';
    else if (cp === 0x09) out += '\\t';
    else if (cp === 0x08) out += '\\b';
    else if (cp === 0x0c) out += '\\f';
    else if (cp < 0x20 || cp === 0x3c || cp === 0x3e || cp === 0x26 || cp === 0x2028 || cp === 0x2029) {
      out += `\\u${cp.toString(16).padStart(4, '0')}`;
    } else if (cp >= 0xd800 && cp <= 0xdfff) {
      // a lone surrogate cannot come from valid UTF-8; Go writes the escaped replacement character
      out += '\\ufffd';
    } else out += ch;
  }
  return `${out}"`;
}

/** go-spew's "%#v" rendering of a []byte: the type, then each byte in decimal. */
export function spewByteSlice(bytes: Uint8Array): string {
  return `([]uint8)[${Array.from(bytes).join(' ')}]`;
}

/** The JSON upstream hashes: json.Marshal(map[string]string{"name", "image"}), keys sorted. */
export function upstreamHashedJSON(c: Container): string {
  const image = typeof c.image === 'string' ? c.image : '';
  const name = typeof c.name === 'string' ? c.name : '';
  return `{"image":${goJSONString(image)},"name":${goJSONString(name)}}`;
}

/**
 * Hashes by container object: a pod's spec is replaced, never edited in place, when it changes,
 * and every resync (1000 pods: ~17 a second) hashes each of its containers again.
 */
const hashes = new WeakMap<Container, string>();
const legacyHashes = new WeakMap<Container, string>();

/** The hash of a container spec, as the io.kubernetes.container.hash annotation carries it. */
export function hashContainer(c: Container): string {
  let h = hashes.get(c);
  if (h === undefined) {
    h = fnv32a(spewByteSlice(Buffer.from(upstreamHashedJSON(c), 'utf8'))).toString(16);
    hashes.set(c, h);
  }
  return h;
}

/**
 * The hash older kubelet-ts releases wrote: FNV-32a of a canonical JSON of the whole spec
 * (see canonicalContainerJSON). Only read, to keep the containers they started.
 */
export function legacyKubeletTsHash(c: Container): string {
  let h = legacyHashes.get(c);
  if (h === undefined) {
    h = fnv32a(canonicalContainerJSON(c)).toString(16);
    legacyHashes.set(c, h);
  }
  return h;
}

/**
 * kubelet-ts's own annotation: the hash of the resources a container was created with. A resize
 * is applied in place (runtime/resize.ts) from the actuated-resources checkpoint; the annotation
 * only tells, for a container started before that checkpoint existed, whether it still runs
 * what it was created with. Containers without it (started by the upstream kubelet) are not compared.
 */
export const RESOURCES_HASH_ANNOTATION = 'kubelet-ts.io/resources-hash';

const resourcesHashes = new WeakMap<Container, string>();

/** FNV-32a of the canonical JSON of the container's resources (quantities by their exact amount). */
export function resourcesHash(c: Container): string {
  let h = resourcesHashes.get(c);
  if (h === undefined) {
    h = fnv32a(canonicalContainerJSON({ name: '', resources: c.resources } as Container)).toString(16);
    resourcesHashes.set(c, h);
  }
  return h;
}

/** True when the container was created with other resources than spec `c` asks for (by our annotation; none recorded: false). */
export function resourcesChanged(c: Container, annotations: Record<string, string> | undefined): boolean {
  const recorded = annotations?.[RESOURCES_HASH_ANNOTATION];
  return recorded !== undefined && recorded !== resourcesHash(c);
}

/**
 * True when a running container's recorded hash says it runs spec `c`: the upstream hash
 * (what we write, and what the upstream kubelet wrote) or the legacy kubelet-ts hash of the
 * same spec (containers started before kubelet-ts switched to upstream's hash).
 */
export function containerHashMatches(c: Container, recorded: string | undefined): boolean {
  return recorded === hashContainer(c) || recorded === legacyKubeletTsHash(c);
}

/**
 * The canonical JSON the legacy hash is taken over: keys sorted; absent, null, '', [] and {}
 * dropped; false and 0 kept; resources.limits/requests quantities replaced by their exact amount;
 * array order kept.
 */
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
