// Decoding the KubeletConfiguration file (YAML or JSON) into a defaulted KubeletConfig.
//
// Upstream decodes the file leniently when strict decoding fails (it logs and goes
// on), so unknown fields are warnings here too, not errors. Value types follow Go's JSON
// decoding: a string field takes only a string, an int field only an integral number in
// range, a duration only a duration string.

import { posix as pathPosix } from 'node:path';
import { parseDocument } from 'yaml';

import { defaultKubeletConfig, DEFAULT_EVICTION_HARD } from './defaults.js';
import { DurationError, parseDuration } from './duration.js';
import { ConfigError, showValue } from './errors.js';
import {
  type CgroupDriver,
  type KubeletAuthorizationMode,
  type KubeletConfig,
  KUBELET_CONFIG_API_VERSION,
  KUBELET_CONFIG_KIND,
  type OomWatcherMode,
  type RawKubeletConfiguration,
  type StatsBackend,
} from './kubelet-config.js';
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

// ---------------------------------------------------------------------------------
// Typed reads of the raw object (Go's JSON decoding rules: a string field takes only a
// string, an int field only an integral number, a duration only a duration string).

class RawReader {
  constructor(
    private readonly raw: Record<string, unknown>,
    private readonly file: string | undefined,
  ) {}

  fail(field: string, detail: string): never {
    throw new ConfigError(field, detail, this.file);
  }

  /** The value at a dotted path; undefined when absent or null (Go: zero value). */
  get(path: string): unknown {
    const parts = path.split('.');
    let cur: unknown = this.raw;
    for (let i = 0; i < parts.length; i++) {
      if (cur === undefined || cur === null) return undefined;
      if (!isPlainObject(cur)) this.fail(parts.slice(0, i).join('.'), `expected an object, got ${showValue(cur)}`);
      cur = cur[parts[i]!];
    }
    return cur === null ? undefined : cur;
  }

  str(path: string): string | undefined {
    const v = this.get(path);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') this.fail(path, `expected a string, got ${showValue(v)}`);
    return v;
  }

  bool(path: string): boolean | undefined {
    const v = this.get(path);
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') this.fail(path, `expected a boolean, got ${showValue(v)}`);
    return v;
  }

  int(path: string, bits: 32 | 64 = 32): number | undefined {
    const v = this.get(path);
    if (v === undefined) return undefined;
    return checkInt(v, bits, (d) => this.fail(path, d));
  }

  /** A Go duration string, as integer ms. */
  duration(path: string): number | undefined {
    const v = this.get(path);
    if (v === undefined) return undefined;
    return checkDuration(v, (d) => this.fail(path, d));
  }

  strList(path: string): string[] | undefined {
    const v = this.get(path);
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) this.fail(path, `expected a list of strings, got ${showValue(v)}`);
    return v.map((item, i) => {
      if (typeof item !== 'string') this.fail(`${path}[${i}]`, `expected a string, got ${showValue(item)}`);
      return item;
    });
  }

  map<T>(path: string, what: string, check: (v: unknown, fail: (d: string) => never) => T): Record<string, T> | undefined {
    const v = this.get(path);
    if (v === undefined) return undefined;
    if (!isPlainObject(v)) this.fail(path, `expected a map of ${what}, got ${showValue(v)}`);
    const out: Record<string, T> = {};
    for (const [k, item] of Object.entries(v)) {
      // defineProperty: a "__proto__" key must stay a plain key.
      const value = check(item, (d) => this.fail(`${path}[${k}]`, d));
      Object.defineProperty(out, k, { value, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }

  strMap(path: string): Record<string, string> | undefined {
    return this.map(path, 'strings', (v, fail) => {
      if (typeof v !== 'string') return fail(`expected a string, got ${showValue(v)}`);
      return v;
    });
  }
}

function checkInt(v: unknown, bits: 32 | 64, fail: (detail: string) => never): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) fail(`expected an integer, got ${showValue(v)}`);
  const limit = bits === 32 ? 2 ** 31 : 2 ** 63;
  if (v < -limit || v >= limit || (bits === 64 && !Number.isSafeInteger(v))) {
    fail(`integer ${v} out of range for int${bits}`);
  }
  return v;
}

function checkDuration(v: unknown, fail: (detail: string) => never): number {
  if (typeof v !== 'string') fail(`expected a duration string like "20s", got ${showValue(v)}`);
  try {
    return parseDuration(v);
  } catch (err) {
    if (err instanceof DurationError) fail(err.message);
    throw err;
  }
}

// ---------------------------------------------------------------------------------
// Defaulting

/**
 * Turns a decoded file into a KubeletConfig with upstream's v1beta1 defaulting: absent
 * or zero-valued fields ("0s", 0, "") take the default, except the fields upstream
 * holds as pointers (healthzPort, eventRecordQPS, imageGC thresholds,
 * containerLogMaxFiles, booleans), where an explicit 0/false is kept. Throws
 * ConfigError naming the field on a wrongly typed value. `warnings` is appended to.
 */
export function resolveKubeletConfig(
  raw: RawKubeletConfiguration,
  warnings: string[] = [],
  fileName?: string,
): KubeletConfig {
  const r = new RawReader(raw, fileName);
  const c = defaultKubeletConfig();
  // Go zero value (absent, 0, "", "0s") → default.
  const orDefault = <T>(v: T | undefined, d: T): T => (v === undefined || v === 0 || v === '' ? d : v);
  // Pointer field: only absent → default.
  const orUnset = <T>(v: T | undefined, d: T): T => (v === undefined ? d : v);

  c.enableServer = orUnset(r.bool('enableServer'), c.enableServer);
  c.staticPodPath = orUnset(r.str('staticPodPath'), c.staticPodPath);
  c.podLogsDir = orDefault(r.str('podLogsDir'), c.podLogsDir);
  c.syncFrequency = orDefault(r.duration('syncFrequency'), c.syncFrequency);
  c.fileCheckFrequency = orDefault(r.duration('fileCheckFrequency'), c.fileCheckFrequency);
  c.httpCheckFrequency = orDefault(r.duration('httpCheckFrequency'), c.httpCheckFrequency);
  c.staticPodURL = orUnset(r.str('staticPodURL'), c.staticPodURL);
  c.staticPodURLHeader = orUnset(
    r.map('staticPodURLHeader', 'string lists', (v, fail) => {
      if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) fail(`expected a list of strings, got ${showValue(v)}`);
      return [...(v as string[])];
    }),
    c.staticPodURLHeader,
  );
  c.address = orDefault(r.str('address'), c.address);
  c.port = orDefault(r.int('port'), c.port);
  c.readOnlyPort = orUnset(r.int('readOnlyPort'), c.readOnlyPort);
  c.healthzBindAddress = orDefault(r.str('healthzBindAddress'), c.healthzBindAddress);
  c.healthzPort = orUnset(r.int('healthzPort'), c.healthzPort);

  const auth = c.authentication;
  auth.anonymous.enabled = orUnset(r.bool('authentication.anonymous.enabled'), auth.anonymous.enabled);
  auth.webhook.enabled = orUnset(r.bool('authentication.webhook.enabled'), auth.webhook.enabled);
  auth.webhook.cacheTTL = orDefault(r.duration('authentication.webhook.cacheTTL'), auth.webhook.cacheTTL);
  auth.x509.clientCAFile = orUnset(r.str('authentication.x509.clientCAFile'), auth.x509.clientCAFile);
  const authz = c.authorization;
  authz.mode = orDefault(r.str('authorization.mode'), authz.mode) as KubeletAuthorizationMode;
  authz.webhook.cacheAuthorizedTTL = orDefault(
    r.duration('authorization.webhook.cacheAuthorizedTTL'),
    authz.webhook.cacheAuthorizedTTL,
  );
  authz.webhook.cacheUnauthorizedTTL = orDefault(
    r.duration('authorization.webhook.cacheUnauthorizedTTL'),
    authz.webhook.cacheUnauthorizedTTL,
  );

  c.eventRecordQPS = orUnset(r.int('eventRecordQPS'), c.eventRecordQPS);
  c.eventBurst = orDefault(r.int('eventBurst'), c.eventBurst);
  c.enableDebuggingHandlers = orUnset(r.bool('enableDebuggingHandlers'), c.enableDebuggingHandlers);
  c.clusterDomain = orUnset(r.str('clusterDomain'), c.clusterDomain);
  c.clusterDNS = orUnset(r.strList('clusterDNS'), c.clusterDNS);
  c.streamingConnectionIdleTimeout = orDefault(
    r.duration('streamingConnectionIdleTimeout'),
    c.streamingConnectionIdleTimeout,
  );
  // Upstream: an explicit nodeStatusUpdateFrequency also becomes the report frequency's default.
  const updateFreq = r.duration('nodeStatusUpdateFrequency');
  const reportFreq = r.duration('nodeStatusReportFrequency');
  c.nodeStatusReportFrequency = orDefault(reportFreq, orDefault(updateFreq, c.nodeStatusReportFrequency));
  c.nodeStatusUpdateFrequency = orDefault(updateFreq, c.nodeStatusUpdateFrequency);
  c.nodeLeaseDurationSeconds = orDefault(r.int('nodeLeaseDurationSeconds'), c.nodeLeaseDurationSeconds);
  c.imageMinimumGCAge = orDefault(r.duration('imageMinimumGCAge'), c.imageMinimumGCAge);
  c.imageGCHighThresholdPercent = orUnset(r.int('imageGCHighThresholdPercent'), c.imageGCHighThresholdPercent);
  c.imageGCLowThresholdPercent = orUnset(r.int('imageGCLowThresholdPercent'), c.imageGCLowThresholdPercent);
  c.volumeStatsAggPeriod = orDefault(r.duration('volumeStatsAggPeriod'), c.volumeStatsAggPeriod);
  c.cgroupRoot = orUnset(r.str('cgroupRoot'), c.cgroupRoot);
  c.cgroupsPerQOS = orUnset(r.bool('cgroupsPerQOS'), c.cgroupsPerQOS);
  c.cgroupDriver = orDefault(r.str('cgroupDriver'), c.cgroupDriver) as CgroupDriver;
  c.runtimeRequestTimeout = orDefault(r.duration('runtimeRequestTimeout'), c.runtimeRequestTimeout);
  c.maxPods = orDefault(r.int('maxPods'), c.maxPods);
  // Upstream: unset or negative → -1 (the node allocatable pid limit applies).
  const pidsLimit = r.int('podPidsLimit', 64);
  c.podPidsLimit = pidsLimit === undefined || pidsLimit < 0 ? -1 : pidsLimit;
  const maxParallel = r.int('maxParallelImagePulls');
  c.maxParallelImagePulls = maxParallel ?? null;
  // Upstream: serial pulls by default, unless parallel pulls were asked for.
  c.serializeImagePulls = orUnset(r.bool('serializeImagePulls'), maxParallel === undefined || maxParallel < 2);
  // Upstream defaults evictionHard only when absent: an explicit {} disables hard eviction.
  c.evictionHard = orUnset(r.strMap('evictionHard'), c.evictionHard);
  c.evictionSoft = orUnset(r.strMap('evictionSoft'), c.evictionSoft);
  c.evictionSoftGracePeriod = orUnset(
    r.map('evictionSoftGracePeriod', 'duration strings', (v, fail) => checkDuration(v, fail)),
    c.evictionSoftGracePeriod,
  );
  c.evictionMinimumReclaim = orUnset(r.strMap('evictionMinimumReclaim'), c.evictionMinimumReclaim);
  c.evictionPressureTransitionPeriod = orDefault(
    r.duration('evictionPressureTransitionPeriod'),
    c.evictionPressureTransitionPeriod,
  );
  c.evictionMaxPodGracePeriod = orUnset(r.int('evictionMaxPodGracePeriod'), c.evictionMaxPodGracePeriod);
  c.featureGates = orUnset(
    r.map('featureGates', 'booleans', (v, fail) => {
      if (typeof v !== 'boolean') return fail(`expected a boolean, got ${showValue(v)}`);
      return v;
    }),
    c.featureGates,
  );
  c.failSwapOn = orUnset(r.bool('failSwapOn'), c.failSwapOn);
  c.containerLogMaxSize = orDefault(r.str('containerLogMaxSize'), c.containerLogMaxSize);
  c.containerLogMaxFiles = orUnset(r.int('containerLogMaxFiles'), c.containerLogMaxFiles);
  c.containerRuntimeEndpoint = orDefault(r.str('containerRuntimeEndpoint'), c.containerRuntimeEndpoint);
  c.imageServiceEndpoint = orUnset(r.str('imageServiceEndpoint'), c.imageServiceEndpoint);
  c.systemReserved = orUnset(r.strMap('systemReserved'), c.systemReserved);
  c.kubeReserved = orUnset(r.strMap('kubeReserved'), c.kubeReserved);
  c.systemReservedCgroup = orUnset(r.str('systemReservedCgroup'), c.systemReservedCgroup);
  c.kubeReservedCgroup = orUnset(r.str('kubeReservedCgroup'), c.kubeReservedCgroup);
  c.enforceNodeAllocatable = orUnset(r.strList('enforceNodeAllocatable'), c.enforceNodeAllocatable);
  c.registerNode = orUnset(r.bool('registerNode'), c.registerNode);
  c.shutdownGracePeriod = orUnset(r.duration('shutdownGracePeriod'), c.shutdownGracePeriod);
  c.shutdownGracePeriodCriticalPods = orUnset(
    r.duration('shutdownGracePeriodCriticalPods'),
    c.shutdownGracePeriodCriticalPods,
  );
  c.protectKernelDefaults = orUnset(r.bool('protectKernelDefaults'), c.protectKernelDefaults);
  c.statsBackend = orDefault(r.str('statsBackend'), c.statsBackend) as StatsBackend;
  c.oomWatcher = orDefault(r.str('oomWatcher'), c.oomWatcher) as OomWatcherMode;

  // Upstream does not merge the default hard thresholds into an explicit evictionHard:
  // signals left out get no hard threshold, which surprises people, so say so.
  if (raw.evictionHard !== undefined && raw.evictionHard !== null) {
    const missing = Object.keys(DEFAULT_EVICTION_HARD).filter((s) => !(s in c.evictionHard));
    if (missing.length > 0 && Object.keys(c.evictionHard).length > 0) {
      warnings.push(
        `${fileName !== undefined ? `kubelet config ${fileName}: ` : ''}field evictionHard is set without ${missing.join(', ')}: ` +
          'those signals get no hard eviction threshold (defaults are not merged)',
      );
    }
  }
  return c;
}

/**
 * Resolves relative paths of the file's path fields against the file's directory, as
 * upstream does (staticPodPath, authentication.x509.clientCAFile, podLogsDir).
 */
export function resolveRelativePaths(c: KubeletConfig, baseDir: string): void {
  const abs = (p: string): string => (p === '' || pathPosix.isAbsolute(p) ? p : pathPosix.join(baseDir, p));
  c.staticPodPath = abs(c.staticPodPath);
  c.authentication.x509.clientCAFile = abs(c.authentication.x509.clientCAFile);
  c.podLogsDir = abs(c.podLogsDir);
}
