// Decoding of static pod manifests (YAML or JSON) into defaulted, validated pods, as upstream's
// tryDecodeSinglePod / tryDecodePodList: a manifest file holds one Pod; a manifest URL serves
// a Pod or a PodList.
import { parseAllDocuments, type Tags } from 'yaml';
import { applyPodDefaults } from '../api/defaults.js';
import type { Pod } from '../api/types.js';
import { checkPodTypes, validatePod, type FieldError } from '../api/validation.js';
import { assertPathComponent, PathEscapeError } from '../util/safe-path.js';
import { ManifestError } from './errors.js';
import { KubeletError } from '../util/errors.js';
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

/** Deeper nesting than this is refused: a pod is about a dozen levels deep. */
export const MaxManifestDepth = 100;

/** Nesting depth of a decoded value, without recursion (a hostile document may be deep). */
function depthExceeds(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (d > limit) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof x === 'object' && x !== null) stack.push([x, d + 1]);
    }
  }
  return false;
}

/**
 * The YAML reader costs about 20 µs and a few hundred bytes per node, and far more on deep
 * nesting (a million `[` exhaust the heap): a YAML manifest may hold at most this many
 * structural characters (`-` `:` `?` `,` `[` `{` and newlines, each at most one node), about
 * 150 KB of ordinary pod YAML. Larger manifests can be written as JSON, read natively.
 */
export const MaxYAMLStructure = 20_000;

/** An upper bound of the nodes a YAML text can hold, counted without parsing it. */
function yamlStructure(text: string, limit: number): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // - : ? , [ { \n
    if (c === 45 || c === 58 || c === 63 || c === 44 || c === 91 || c === 123 || c === 10) {
      if (++n > limit) return n;
    }
  }
  return n;
}

/** True when JSON text nests deeper than `limit` (JSON.parse takes seconds on millions of levels). */
function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > limit) return true;
    } else if (c === 93 || c === 125) depth--;
  }
  return false;
}

/** The first document of a YAML 1.1 stream, as plain data. */
function parseYAML(text: string): unknown {
  const docs = parseAllDocuments(text, { version: '1.1', customTags: goCompatibleTags, uniqueKeys: false });
  if (!Array.isArray(docs)) throw new KubeletError('ERR_YAML_STREAM', 'unexpected YAML stream: no document list');
  const doc = docs.find((d) => d.contents !== null) ?? docs[0];
  if (doc && doc.errors.length > 0) throw doc.errors[0];
  return doc ? doc.toJS({ maxAliasCount: 100 }) : null;
}

/**
 * Parses manifest bytes (JSON, or YAML 1.1) into a plain object; only the first YAML document
 * counts, as upstream. Size, nesting and YAML structure are bounded before any parser runs.
 */
export function parseManifest(data: string | Uint8Array, origin: StaticPodOrigin): Record<string, unknown> {
  const fail = (detail: string, field?: string, cause?: unknown): ManifestError =>
    new ManifestError(origin.source, origin.location, detail, { field, cause });
  const size = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
  if (size > MaxManifestBytes) throw fail(`manifest is ${size} bytes, more than the limit of ${MaxManifestBytes} bytes`);
  const text = typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8');
  const tooDeep = (): ManifestError => fail(`couldn't parse as pod: nested more than ${MaxManifestDepth} levels deep`);
  let value: unknown;
  let parsed = false;
  // JSON (a YAML subset) is read natively: fast on large manifests, and the same values
  if (/^\s*\{/.test(text)) {
    if (jsonDepthExceeds(text, MaxManifestDepth)) throw tooDeep();
    try {
      value = JSON.parse(text);
      parsed = true;
    } catch {
      // not strict JSON: a YAML flow mapping, read below
    }
  }
  if (!parsed) {
    const structure = yamlStructure(text, MaxYAMLStructure);
    if (structure > MaxYAMLStructure) {
      throw fail(`couldn't parse as YAML: more than the limit of ${MaxYAMLStructure} structural characters (- : ? , [ { newline); write a manifest this large as JSON`);
    }
    try {
      value = parseYAML(text);
    } catch (e) {
      // the YAML parser adds a multi-line source excerpt: keep the first line
      const msg = (e instanceof Error ? e.message : String(e)).split('\n')[0]!;
      throw fail(`couldn't parse as YAML or JSON: ${msg}`, undefined, e);
    }
  }
  if (value === null || value === undefined) throw fail("couldn't parse as pod: the manifest is empty");
  if (!isObject(value)) throw fail("couldn't parse as pod: the manifest is not an object");
  if (depthExceeds(value, MaxManifestDepth)) throw tooDeep();
  return value;
}

function checkTypeMeta(obj: Record<string, unknown>, kinds: readonly string[], origin: StaticPodOrigin, prefix = ''): string {
  const fail = (detail: string, field: string): ManifestError =>
    new ManifestError(origin.source, origin.location, `couldn't parse as pod: ${detail}`, { field });
  const { apiVersion, kind } = obj;
  if (apiVersion === undefined || apiVersion === null || apiVersion === '') {
    throw fail(`${prefix}apiVersion: Required value: Object 'apiVersion' is missing`, `${prefix}apiVersion`);
  }
  if (kind === undefined || kind === null || kind === '') throw fail(`${prefix}kind: Required value: Object 'Kind' is missing`, `${prefix}kind`);
  const wanted = kinds.map((k) => JSON.stringify(k)).join(' or ');
  if (apiVersion !== 'v1' || typeof kind !== 'string' || !kinds.includes(kind)) {
    const field = typeof kind === 'string' && kinds.includes(kind) ? `${prefix}apiVersion` : `${prefix}kind`;
    throw fail(`${field}: expected apiVersion "v1" and kind ${wanted}, got apiVersion ${JSON.stringify(apiVersion)} and kind ${JSON.stringify(kind)}`, field);
  }
  return kind;
}

function invalid(origin: StaticPodOrigin, fieldPrefix: string, found: FieldError[]): ManifestError {
  const errors = found.map((e) => ({ field: `${fieldPrefix}${e.field}`, message: e.message }));
  const detail = errors.map((e) => `${e.field}: ${e.message}`).join('; ');
  return new ManifestError(origin.source, origin.location, `invalid pod: ${detail}`, { field: errors[0]!.field, fieldErrors: errors });
}

/** Longest file name: the pod log directory `<namespace>_<name>_<uid>` must fit in one. */
const MaxFileNameBytes = 255;

/**
 * Every identifier of an accepted pod names directories (pod dir, pod log dir, container dirs):
 * check each is one plain path component, as a last guard behind validation.
 */
function pathIdentityErrors(pod: Pod): FieldError[] {
  const out: FieldError[] = [];
  const m = pod.metadata;
  const component = (field: string, c: string): void => {
    try {
      assertPathComponent('/', c);
    } catch (e) {
      if (!(e instanceof PathEscapeError)) throw e;
      out.push({ field, message: `Invalid value: ${JSON.stringify(c)}: ${e.message}` });
    }
  };
  component('metadata.uid', m.uid ?? '');
  component('metadata.namespace', m.namespace ?? '');
  component('metadata.name', m.name ?? '');
  const logDir = `${m.namespace ?? ''}_${m.name ?? ''}_${m.uid ?? ''}`;
  const bytes = Buffer.byteLength(logDir);
  if (bytes > MaxFileNameBytes) {
    out.push({ field: 'metadata.name', message: `Invalid value: ${JSON.stringify(m.name)}: the pod log directory name "${logDir}" would be ${bytes} bytes, more than the ${MaxFileNameBytes} a file name may have` });
  }
  for (const key of ['initContainers', 'containers'] as const) {
    (pod.spec[key] ?? []).forEach((c, i) => component(`spec.${key}[${i}].name`, c.name));
  }
  return out;
}

/** Type-checks, defaults, makes static, and validates one decoded Pod object; throws ManifestError. */
export function toStaticPod(obj: Record<string, unknown>, origin: StaticPodOrigin, fieldPrefix = ''): Pod {
  // wrong types first: defaulting and validation read a field of the wrong type as unset
  const typeErrors = checkPodTypes(obj);
  if (typeErrors.length > 0) throw invalid(origin, fieldPrefix, typeErrors);
  const pod = obj as unknown as Pod;
  if (!isObject(pod.spec)) {
    throw new ManifestError(origin.source, origin.location, `invalid pod: ${fieldPrefix}spec: Required value`, { field: `${fieldPrefix}spec` });
  }
  applyPodDefaults(pod);
  applyStaticPodDefaults(pod, origin);
  const errors = validatePod(pod);
  if (errors.length > 0) throw invalid(origin, fieldPrefix, errors);
  const pathErrors = pathIdentityErrors(pod);
  if (pathErrors.length > 0) throw invalid(origin, fieldPrefix, pathErrors);
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
