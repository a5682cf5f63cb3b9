// Decoding of static pod manifests (YAML or JSON) into defaulted, validated pods, as upstream's
// tryDecodeSinglePod / tryDecodePodList: a manifest file holds one Pod; a manifest URL serves
// a Pod or a PodList.
import { parseAllDocuments, type Tags } from 'yaml';
import { applyPodDefaults } from '../api/defaults.js';
import type { Pod } from '../api/types.js';
import { validatePod } from '../api/validation.js';
import { ManifestError } from './errors.js';
import { applyStaticPodDefaults, type StaticPodOrigin } from './static-pod.js';

/** Manifests larger than this are refused (upstream maxConfigLength, 10 MiB). */
export const MaxManifestBytes = 10 * 1024 * 1024;

// Go's YAML reader is YAML 1.1 (0644 is octal, yes/no are booleans) but keeps timestamps and
// base-60 numbers as strings; match it so a manifest means the same thing here as upstream.
function goCompatibleTags(tags: Tags): Tags {
  return tags.filter((t) => {
    const tag = (t as { tag?: string }).tag ?? '';
    const format = (t as { format?: string }).format;
    return !tag.endsWith(':timestamp') && format !== 'TIME';
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses manifest bytes (YAML 1.1 or JSON) into a plain object; only the first document counts, as upstream. */
export function parseManifest(data: string | Uint8Array, origin: StaticPodOrigin): Record<string, unknown> {
  const fail = (detail: string, field?: string, cause?: unknown): ManifestError =>
    new ManifestError(origin.source, origin.location, detail, { field, cause });
  const size = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
  if (size > MaxManifestBytes) throw fail(`manifest is ${size} bytes, more than the limit of ${MaxManifestBytes}`);
  const text = typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8');
  let value: unknown;
  try {
    const docs = parseAllDocuments(text, { version: '1.1', customTags: goCompatibleTags, uniqueKeys: false });
    if (!Array.isArray(docs)) throw new Error('unexpected YAML stream');
    const doc = docs.find((d) => d.contents !== null) ?? docs[0];
    if (doc && doc.errors.length > 0) throw doc.errors[0];
    value = doc ? doc.toJS({ maxAliasCount: 100 }) : null;
  } catch (e) {
    // the YAML parser adds a multi-line source excerpt: keep the first line
    const msg = (e instanceof Error ? e.message : String(e)).split('\n')[0]!;
    throw fail(`couldn't parse as YAML or JSON: ${msg}`, undefined, e);
  }
  if (value === null || value === undefined) throw fail("couldn't parse as pod: the manifest is empty");
  if (!isObject(value)) throw fail("couldn't parse as pod: the manifest is not an object");
  return value;
}

function checkTypeMeta(obj: Record<string, unknown>, kinds: readonly string[], origin: StaticPodOrigin, prefix = ''): string {
  const fail = (detail: string, field: string): ManifestError =>
    new ManifestError(origin.source, origin.location, `couldn't parse as pod: ${detail}`, { field });
  const { apiVersion, kind } = obj;
  if (apiVersion === undefined || apiVersion === '') throw fail(`Object 'apiVersion' is missing`, `${prefix}apiVersion`);
  if (kind === undefined || kind === '') throw fail(`Object 'Kind' is missing`, `${prefix}kind`);
  const wanted = kinds.map((k) => JSON.stringify(k)).join(' or ');
  if (apiVersion !== 'v1' || typeof kind !== 'string' || !kinds.includes(kind)) {
    const field = typeof kind === 'string' && kinds.includes(kind) ? `${prefix}apiVersion` : `${prefix}kind`;
    throw fail(`expected apiVersion "v1" and kind ${wanted}, got apiVersion ${JSON.stringify(apiVersion)} and kind ${JSON.stringify(kind)}`, field);
  }
  return kind;
}

/** Defaults, makes static, and validates one decoded Pod object; throws ManifestError. */
export function toStaticPod(obj: Record<string, unknown>, origin: StaticPodOrigin, fieldPrefix = ''): Pod {
  const pod = obj as unknown as Pod;
  if (pod.metadata !== undefined && !isObject(pod.metadata)) {
    throw new ManifestError(origin.source, origin.location, 'invalid pod: metadata: must be an object', { field: `${fieldPrefix}metadata` });
  }
  if (!isObject(pod.spec)) {
    throw new ManifestError(origin.source, origin.location, 'invalid pod: spec: Required value', { field: `${fieldPrefix}spec` });
  }
  applyPodDefaults(pod);
  applyStaticPodDefaults(pod, origin);
  const errors = validatePod(pod).map((e) => ({ field: `${fieldPrefix}${e.field}`, message: e.message }));
  if (errors.length > 0) {
    const detail = errors.map((e) => `${e.field}: ${e.message}`).join('; ');
    throw new ManifestError(origin.source, origin.location, `invalid pod: ${detail}`, { field: errors[0]!.field, fieldErrors: errors });
  }
  return pod;
}

/** Decodes a manifest file: exactly one v1 Pod (a PodList in a file is refused, as upstream). */
export function decodePodManifest(data: string | Uint8Array, origin: StaticPodOrigin): Pod {
  const obj = parseManifest(data, origin);
  checkTypeMeta(obj, ['Pod'], origin);
  return toStaticPod(obj, origin);
}

/**
 * Decodes what a manifest URL serves: a v1 Pod or a v1 PodList. One invalid pod in a list
 * refuses the whole list, as upstream.
 */
export function decodePodManifests(data: string | Uint8Array, origin: StaticPodOrigin): Pod[] {
  const obj = parseManifest(data, origin);
  const kind = checkTypeMeta(obj, ['Pod', 'PodList'], origin);
  if (kind === 'Pod') return [toStaticPod(obj, origin)];
  const items = obj.items ?? [];
  if (!Array.isArray(items)) {
    throw new ManifestError(origin.source, origin.location, "couldn't parse as pod list: items: must be a list", { field: 'items' });
  }
  return items.map((item, i) => {
    const prefix = `items[${i}].`;
    if (!isObject(item)) {
      throw new ManifestError(origin.source, origin.location, `invalid pod: items[${i}]: must be an object`, { field: `items[${i}]` });
    }
    // list items usually omit their type; when they give one it must be a v1 Pod
    if (item.apiVersion !== undefined || item.kind !== undefined) {
      checkTypeMeta({ apiVersion: item.apiVersion ?? 'v1', kind: item.kind ?? 'Pod' }, ['Pod'], origin, prefix);
    }
    return toStaticPod(item, origin, prefix);
  });
}
