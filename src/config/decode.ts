// Decoding the KubeletConfiguration file (YAML or JSON) into its raw object, within limits
// (size, nesting), checking apiVersion/kind and naming unknown and unmodeled fields.
//
// Upstream decodes the file leniently when strict decoding fails (it logs and goes
// on), so unknown fields are warnings here too, not errors. Value types are checked
// when the raw object is resolved (resolve.ts).

import { parseDocument } from 'yaml';

import { ConfigError, showValue } from './errors.js';
import { KUBELET_CONFIG_API_VERSION, KUBELET_CONFIG_KIND, type RawKubeletConfiguration } from './kubelet-config.js';
import {
  KUBELET_TS_FIELDS,
  MODELED_FIELDS,
  NESTED_FIELDS,
  notImplementedMessage,
  UPSTREAM_V1BETA1_FIELDS,
} from './schema.js';

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The largest config file kubelet-ts reads (a kubeadm-written one is about 1 KiB). */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

/** Nesting deeper than this is no KubeletConfiguration (its deepest field is 5 levels down). */
export const MAX_CONFIG_DEPTH = 32;

/** Go zero values: an upstream field holding one is unset, so ignoring it changes nothing. */
function isUnsetValue(v: unknown): boolean {
  if (v === null || v === '' || v === '0s') return true;
  if (Array.isArray(v)) return v.length === 0;
  return isPlainObject(v) && Object.keys(v).length === 0;
}

/** The path of the first value nested deeper than `max` levels, or undefined. */
function tooDeep(value: unknown, max: number): string | undefined {
  const stack: Array<{ v: unknown; path: string; depth: number }> = [{ v: value, path: '', depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return path;
    const entries: Array<[string, unknown]> = Array.isArray(v) ? v.map((x, i) => [`[${i}]`, x]) : Object.entries(v).map(([k, x]) => [path === '' ? k : `.${k}`, x]);
    for (const [suffix, x] of entries) stack.push({ v: x, path: `${path}${suffix}`, depth: depth + 1 });
  }
  return undefined;
}

/** Above this rough nesting the YAML parser is not given the text (see roughNesting). */
export const MAX_ROUGH_NESTING = 128;

/**
 * An upper-bound guess of how deeply `text` nests: per line, the indentation plus the
 * compact `- `/`? ` markers that open it; across the text, the depth of flow brackets
 * outside quotes. The YAML parser recurses per level, and near the stack's end V8 can
 * abort the process (not throw) while compiling a regular expression, so a document
 * nested hundreds deep must never reach it.
 */
function roughNesting(text: string): number {
  let max = 0;
  let flow = 0;
  let quote: string | undefined;
  let lineStart = true;
  let level = 0;
  let prev = '';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote !== undefined) {
      if (ch === '\\' && quote === '"') i++;
      else if (ch === quote) quote = undefined;
      continue;
    }
    if (ch === '\n') {
      lineStart = true;
      level = 0;
      prev = '';
      continue;
    }
    if (lineStart) {
      if (ch === ' ' || ch === '\t') level++;
      else if ((ch === '-' || ch === '?') && (text[i + 1] === ' ' || text[i + 1] === '\t')) level++;
      else lineStart = false;
      if (level > max) max = level;
      if (lineStart) continue;
    }
    if (ch === ' ' || ch === '\t') continue;
    // A quote opens a scalar only where a scalar may start; elsewhere it is plain text.
    if ((ch === '"' || ch === "'") && (prev === '' || ':[{,-?'.includes(prev))) quote = ch;
    else if (ch === '[' || ch === '{') {
      flow++;
      if (flow > max) max = flow;
    } else if ((ch === ']' || ch === '}') && flow > 0) flow--;
    prev = ch;
  }
  return max;
}

function decodeText(text: string, fileName: string): unknown {
  let jsonError: unknown;
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text);
    } catch (err) {
      // Could still be a YAML flow mapping; report the JSON error if YAML fails too.
      jsonError = err;
    }
  }
  if (roughNesting(text) > MAX_ROUGH_NESTING) {
    throw new ConfigError('', `${jsonError !== undefined ? 'invalid JSON' : 'invalid YAML'}: nested deeper than ${MAX_ROUGH_NESTING} levels`, fileName);
  }
  try {
    // YAML 1.2 core schema: `yes`/`on` are strings, not booleans (go-yaml v2 differs).
    // Duplicate keys are tolerated (last wins) as upstream's lenient decoding does.
    // logLevel error: the parser must not print to the process's stderr (e.g. about complex keys).
    const doc = parseDocument(text, { uniqueKeys: false, prettyErrors: true, logLevel: 'error' });
    if (doc.errors.length > 0) {
      const detail = jsonError !== undefined ? `invalid JSON: ${errorText(jsonError)}` : `invalid YAML: ${doc.errors[0]!.message}`;
      throw new ConfigError('', detail, fileName);
    }
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    // The parser's own limits (alias expansion, nesting beyond the stack) end here too.
    throw new ConfigError('', `invalid YAML: ${errorText(err)}`, fileName, undefined, { cause: err });
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Decodes a KubeletConfiguration file (YAML or JSON). Checks apiVersion/kind and reports
 * upstream fields kubelet-ts does not implement and unknown fields as warnings. Value
 * types are checked later, by resolveKubeletConfig. Throws ConfigError.
 */
export function parseKubeletConfigFile(
  text: string,
  fileName: string,
): { config: RawKubeletConfiguration; warnings: string[] } {
  if (Buffer.byteLength(text, 'utf8') > MAX_CONFIG_FILE_BYTES) {
    throw new ConfigError('', `the file is larger than the limit of ${MAX_CONFIG_FILE_BYTES} bytes`, fileName);
  }
  if (text.trim() === '') throw new ConfigError('', 'the file is empty', fileName);
  const data = decodeText(text, fileName);
  if (!isPlainObject(data)) {
    throw new ConfigError('', `expected a ${KUBELET_CONFIG_KIND} object, got ${showValue(data)}`, fileName);
  }
  const deep = tooDeep(data, MAX_CONFIG_DEPTH);
  if (deep !== undefined) throw new ConfigError(deep, `nested deeper than ${MAX_CONFIG_DEPTH} levels`, fileName);
  if (data.apiVersion !== KUBELET_CONFIG_API_VERSION) {
    const got = data.apiVersion === undefined ? 'none' : showValue(data.apiVersion);
    throw new ConfigError('apiVersion', `expected "${KUBELET_CONFIG_API_VERSION}", got ${got}`, fileName);
  }
  if (data.kind !== KUBELET_CONFIG_KIND) {
    const got = data.kind === undefined ? 'none' : showValue(data.kind);
    throw new ConfigError('kind', `expected "${KUBELET_CONFIG_KIND}", got ${got}`, fileName);
  }
  const warnings = checkFieldNames(data).map((w) => `kubelet config ${fileName}: ${w}`);
  return { config: data as RawKubeletConfiguration, warnings };
}

/**
 * Warnings for upstream fields kubelet-ts does not model (when set) and unknown fields,
 * without a file prefix. Modeled fields that kubelet-ts does not implement are reported
 * once the config is resolved (notImplementedWarnings), against their defaults.
 */
export function checkFieldNames(raw: RawKubeletConfiguration): string[] {
  const warnings: string[] = [];
  for (const key of Object.keys(raw)) {
    if (key === 'apiVersion' || key === 'kind') continue;
    if (MODELED_FIELDS.has(key) || KUBELET_TS_FIELDS.has(key)) continue;
    if (UPSTREAM_V1BETA1_FIELDS.has(key)) {
      if (!isUnsetValue(raw[key])) warnings.push(notImplementedMessage(`field ${key}`));
    } else {
      warnings.push(`unknown field ${JSON.stringify(key)} (not a ${KUBELET_CONFIG_KIND} v1beta1 field), ignored`);
    }
  }
  for (const [path, known] of Object.entries(NESTED_FIELDS)) {
    const obj = getPath(raw, path);
    if (!isPlainObject(obj)) continue;
    for (const key of Object.keys(obj)) {
      if (!known.has(key)) warnings.push(`unknown field ${JSON.stringify(`${path}.${key}`)}, ignored`);
    }
  }
  return warnings;
}

function getPath(raw: Record<string, unknown>, path: string): unknown {
  let cur: unknown = raw;
  for (const part of path.split('.')) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[part];
  }
  return cur;
}

