// The KubeletConfiguration file (kubelet.config.k8s.io/v1beta1): parse, default,
// validate. Field names, defaults and validation rules are upstream's
// (pkg/kubelet/apis/config/v1beta1/defaults.go, .../validation/validation.go).
//
// Upstream decodes the file leniently when strict decoding fails (it logs and goes
// on), so unknown fields are warnings here too, not errors. Upstream fields kubelet-ts
// does not implement are accepted and reported as ignored.

import { isIP } from 'node:net';
import { posix as pathPosix } from 'node:path';
import { parseDocument } from 'yaml';

import { parseQuantity, QuantityError } from '../api/quantity.js';
import { DurationError, formatDuration, parseDuration } from './duration.js';
import { ConfigError, type ConfigIssue, showValue } from './errors.js';

export const KUBELET_CONFIG_API_VERSION = 'kubelet.config.k8s.io/v1beta1';
export const KUBELET_CONFIG_KIND = 'KubeletConfiguration';

/** kubelet-ts's cgroup statistics backends (not an upstream field). */
export type StatsBackend = 'native' | 'fs' | 'cri';
export const STATS_BACKENDS: readonly StatsBackend[] = ['native', 'fs', 'cri'];

/** kubelet-ts's OOM event sources (not an upstream field). */
export type OomWatcherMode = 'auto' | 'ebpf' | 'cgroup' | 'kmsg' | 'off';
export const OOM_WATCHER_MODES: readonly OomWatcherMode[] = ['auto', 'ebpf', 'cgroup', 'kmsg', 'off'];

export type CgroupDriver = 'cgroupfs' | 'systemd';
export type KubeletAuthorizationMode = 'AlwaysAllow' | 'Webhook';

/**
 * The resolved kubelet configuration: upstream's v1beta1 field names, defaults applied.
 * Durations are integer milliseconds (`...Ms` is NOT appended to names, to keep
 * upstream's); quantities stay strings; `*Seconds` fields stay in seconds as upstream.
 */
export interface KubeletConfig {
  /** Serve the secured kubelet API on address:port. Default true. */
  enableServer: boolean;
  /** Directory (or single file) of static pod manifests; '' = none. */
  staticPodPath: string;
  /** ms between static pod directory checks. Default 20s. */
  fileCheckFrequency: number;
  /** URL of static pod manifests; '' = none. */
  staticPodURL: string;
  /** HTTP headers sent when fetching staticPodURL. */
  staticPodURLHeader: Record<string, string[]>;
  /** ms between staticPodURL checks. Default 20s. */
  httpCheckFrequency: number;
  /** ms, max period between syncing running containers and config. Default 1m. */
  syncFrequency: number;
  /** IP the kubelet API serves on. Default 0.0.0.0. */
  address: string;
  /** Kubelet API port. Default 10250. */
  port: number;
  /** Unauthenticated read-only port; 0 = disabled. Default 0. */
  readOnlyPort: number;
  /** healthz IP. Default 127.0.0.1. */
  healthzBindAddress: string;
  /** healthz port; 0 = disabled. Default 10248. */
  healthzPort: number;
  authentication: {
    anonymous: { enabled: boolean };
    /** cacheTTL in ms (default 2m). */
    webhook: { enabled: boolean; cacheTTL: number };
    x509: { clientCAFile: string };
  };
  authorization: {
    mode: KubeletAuthorizationMode;
    /** TTLs in ms (defaults 5m / 30s). */
    webhook: { cacheAuthorizedTTL: number; cacheUnauthorizedTTL: number };
  };
  /** Event creations per second; 0 = unlimited. Default 50. */
  eventRecordQPS: number;
  /** Event burst. Default 100. */
  eventBurst: number;
  /** Serve exec/attach/logs/portforward and friends. Default true. */
  enableDebuggingHandlers: boolean;
  clusterDomain: string;
  clusterDNS: string[];
  /** ms. Default 4h (upstream: deprecated, no effect). */
  streamingConnectionIdleTimeout: number;
  /** ms between node status computations. Default 10s. */
  nodeStatusUpdateFrequency: number;
  /** ms between unchanged node status posts. Default 5m, or nodeStatusUpdateFrequency when that is set. */
  nodeStatusReportFrequency: number;
  /** Seconds, the node Lease duration. Default 40. */
  nodeLeaseDurationSeconds: number;
  /** ms, minimum age of an unused image before GC. Default 2m. */
  imageMinimumGCAge: number;
  /** Percent 0..100. Default 85. */
  imageGCHighThresholdPercent: number;
  /** Percent 0..100. Default 80. */
  imageGCLowThresholdPercent: number;
  /** ms between volume usage computations. Default 1m. */
  volumeStatsAggPeriod: number;
  cgroupRoot: string;
  /** Default true. */
  cgroupsPerQOS: boolean;
  /** Default cgroupfs. */
  cgroupDriver: CgroupDriver;
  /** ms, timeout of CRI calls except long-running ones. Default 2m. */
  runtimeRequestTimeout: number;
  /** Default 110. */
  maxPods: number;
  /** Max PIDs per pod; -1 = node allocatable limit. Default -1. */
  podPidsLimit: number;
  /** Pull one image at a time. Default true (false when maxParallelImagePulls >= 2). */
  serializeImagePulls: boolean;
  /** null = no limit. Default null. */
  maxParallelImagePulls: number | null;
  /** Signal → quantity or percent ("100Mi", "10%"). */
  evictionHard: Record<string, string>;
  evictionSoft: Record<string, string>;
  /** Signal → grace period in ms (upstream holds duration strings here). */
  evictionSoftGracePeriod: Record<string, number>;
  /** Signal → quantity or percent. */
  evictionMinimumReclaim: Record<string, string>;
  /** ms before leaving a pressure condition. Default 5m. */
  evictionPressureTransitionPeriod: number;
  /** Seconds, cap on pod grace period for soft evictions. Default 0. */
  evictionMaxPodGracePeriod: number;
  featureGates: Record<string, boolean>;
  /** Default true. */
  failSwapOn: boolean;
  /** Quantity string. Default "10Mi". */
  containerLogMaxSize: string;
  /** Default 5. */
  containerLogMaxFiles: number;
  containerRuntimeEndpoint: string;
  /** '' = use containerRuntimeEndpoint. */
  imageServiceEndpoint: string;
  /** Resource name → quantity string. */
  systemReserved: Record<string, string>;
  kubeReserved: Record<string, string>;
  systemReservedCgroup: string;
  kubeReservedCgroup: string;
  /** Default ["pods"]. */
  enforceNodeAllocatable: string[];
  /** Default true. */
  registerNode: boolean;
  /** ms; 0 = graceful node shutdown disabled. Default 0. */
  shutdownGracePeriod: number;
  /** ms. Default 0. */
  shutdownGracePeriodCriticalPods: number;
  /** Default false. */
  protectKernelDefaults: boolean;
  /** Default /var/log/pods. */
  podLogsDir: string;
  /** kubelet-ts only: where cgroup statistics come from. Default 'native'. */
  statsBackend: StatsBackend;
  /** kubelet-ts only: how OOM kills are observed. Default 'auto'. */
  oomWatcher: OomWatcherMode;
}

/** The file as decoded, before defaulting (upstream field names, Go duration strings). */
export interface RawKubeletConfiguration {
  apiVersion?: string;
  kind?: string;
  [field: string]: unknown;
}

/** Upstream's default hard eviction thresholds on Linux. */
export const DEFAULT_EVICTION_HARD: Readonly<Record<string, string>> = Object.freeze({
  'memory.available': '100Mi',
  'nodefs.available': '10%',
  'nodefs.inodesFree': '5%',
  'imagefs.available': '15%',
});

export const DEFAULT_CONTAINER_RUNTIME_ENDPOINT = 'unix:///run/containerd/containerd.sock';

/** Every top-level field of upstream's v1beta1 KubeletConfiguration (recent releases). */
export const UPSTREAM_V1BETA1_FIELDS: ReadonlySet<string> = new Set([
  'enableServer', 'staticPodPath', 'podLogsDir', 'syncFrequency', 'fileCheckFrequency',
  'httpCheckFrequency', 'staticPodURL', 'staticPodURLHeader', 'address', 'port', 'readOnlyPort',
  'tlsCertFile', 'tlsPrivateKeyFile', 'tlsCipherSuites', 'tlsCurvePreferences', 'tlsMinVersion',
  'rotateCertificates', 'serverTLSBootstrap', 'authentication', 'authorization',
  'registryPullQPS', 'registryBurst', 'imagePullCredentialsVerificationPolicy',
  'preloadedImagesVerificationAllowlist', 'eventRecordQPS', 'eventBurst',
  'enableDebuggingHandlers', 'enableContentionProfiling', 'healthzPort', 'healthzBindAddress',
  'oomScoreAdj', 'clusterDomain', 'clusterDNS', 'streamingConnectionIdleTimeout',
  'nodeStatusUpdateFrequency', 'nodeStatusReportFrequency', 'nodeLeaseDurationSeconds',
  'imageMinimumGCAge', 'imageMaximumGCAge', 'imageGCHighThresholdPercent',
  'imageGCLowThresholdPercent', 'volumeStatsAggPeriod', 'kubeletCgroups', 'systemCgroups',
  'cgroupRoot', 'cgroupsPerQOS', 'cgroupDriver', 'cpuManagerPolicy', 'singleProcessOOMKill',
  'cpuManagerPolicyOptions', 'cpuManagerReconcilePeriod', 'draManagerReconcilePeriod',
  'memoryManagerPolicy', 'topologyManagerPolicy', 'topologyManagerScope',
  'topologyManagerPolicyOptions', 'qosReserved', 'runtimeRequestTimeout', 'hairpinMode',
  'maxPods', 'podCIDR', 'podPidsLimit', 'resolvConf', 'runOnce', 'cpuCFSQuota',
  'cpuCFSQuotaPeriod', 'nodeStatusMaxImages', 'maxOpenFiles', 'contentType', 'kubeAPIQPS',
  'kubeAPIBurst', 'serializeImagePulls', 'maxParallelImagePulls', 'evictionHard',
  'evictionSoft', 'evictionSoftGracePeriod', 'evictionPressureTransitionPeriod',
  'evictionMaxPodGracePeriod', 'evictionMinimumReclaim', 'mergeDefaultEvictionSettings',
  'podsPerCore', 'enableControllerAttachDetach', 'protectKernelDefaults',
  'makeIPTablesUtilChains', 'iptablesMasqueradeBit', 'iptablesDropBit', 'featureGates',
  'failSwapOn', 'memorySwap', 'containerLogMaxSize', 'containerLogMaxFiles',
  'containerLogMaxWorkers', 'containerLogMonitorInterval',
  'configMapAndSecretChangeDetectionStrategy', 'systemReserved', 'kubeReserved',
  'reservedSystemCPUs', 'showHiddenMetricsForVersion', 'systemReservedCgroup',
  'kubeReservedCgroup', 'enforceNodeAllocatable', 'allowedUnsafeSysctls', 'volumePluginDir',
  'providerID', 'kernelMemcgNotification', 'logging', 'enableSystemLogHandler',
  'enableSystemLogQuery', 'shutdownGracePeriod', 'shutdownGracePeriodCriticalPods',
  'shutdownGracePeriodByPodPriority', 'crashLoopBackOff', 'reservedMemory',
  'enableProfilingHandler', 'enableDebugFlagsHandler', 'seccompDefault',
  'memoryThrottlingFactor', 'memoryReservationPolicy', 'registerWithTaints', 'registerNode',
  'tracing', 'localStorageCapacityIsolation', 'containerRuntimeEndpoint',
  'imageServiceEndpoint', 'failCgroupV1', 'userNamespaces', 'podHousekeepingPeriod',
]);

/** kubelet-ts's own top-level fields (accepted in the file, not upstream). */
export const KUBELET_TS_FIELDS: ReadonlySet<string> = new Set(['statsBackend', 'oomWatcher']);

/** Upstream top-level fields kubelet-ts reads; nested objects list their known keys. */
const SUPPORTED_FIELDS: ReadonlySet<string> = new Set([
  'enableServer', 'staticPodPath', 'podLogsDir', 'syncFrequency', 'fileCheckFrequency',
  'httpCheckFrequency', 'staticPodURL', 'staticPodURLHeader', 'address', 'port', 'readOnlyPort',
  'authentication', 'authorization', 'eventRecordQPS', 'eventBurst', 'enableDebuggingHandlers',
  'healthzPort', 'healthzBindAddress', 'clusterDomain', 'clusterDNS',
  'streamingConnectionIdleTimeout', 'nodeStatusUpdateFrequency', 'nodeStatusReportFrequency',
  'nodeLeaseDurationSeconds', 'imageMinimumGCAge', 'imageGCHighThresholdPercent',
  'imageGCLowThresholdPercent', 'volumeStatsAggPeriod', 'cgroupRoot', 'cgroupsPerQOS',
  'cgroupDriver', 'runtimeRequestTimeout', 'maxPods', 'podPidsLimit', 'serializeImagePulls',
  'maxParallelImagePulls', 'evictionHard', 'evictionSoft', 'evictionSoftGracePeriod',
  'evictionPressureTransitionPeriod', 'evictionMaxPodGracePeriod', 'evictionMinimumReclaim',
  'featureGates', 'failSwapOn', 'containerLogMaxSize', 'containerLogMaxFiles',
  'systemReserved', 'kubeReserved', 'systemReservedCgroup', 'kubeReservedCgroup',
  'enforceNodeAllocatable', 'registerNode', 'shutdownGracePeriod',
  'shutdownGracePeriodCriticalPods', 'protectKernelDefaults', 'containerRuntimeEndpoint',
  'imageServiceEndpoint',
]);

/** Known keys of the nested objects kubelet-ts reads (anything else there is unknown). */
const NESTED_FIELDS: Readonly<Record<string, ReadonlySet<string>>> = {
  authentication: new Set(['anonymous', 'webhook', 'x509']),
  'authentication.anonymous': new Set(['enabled']),
  'authentication.webhook': new Set(['enabled', 'cacheTTL']),
  'authentication.x509': new Set(['clientCAFile']),
  authorization: new Set(['mode', 'webhook']),
  'authorization.webhook': new Set(['cacheAuthorizedTTL', 'cacheUnauthorizedTTL']),
};

/** Eviction signals upstream knows (pkg/kubelet/eviction/api). */
export const EVICTION_SIGNALS: ReadonlySet<string> = new Set([
  'memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available',
  'imagefs.inodesFree', 'containerfs.available', 'containerfs.inodesFree',
  'allocatableMemory.available', 'pid.available',
]);

/** Resources that systemReserved / kubeReserved may name (upstream parseResourceList). */
const RESERVABLE_RESOURCES: ReadonlySet<string> = new Set(['cpu', 'memory', 'ephemeral-storage', 'pid']);

const ENFORCE_NODE_ALLOCATABLE_KEYS = [
  'pods', 'system-reserved', 'system-reserved-compressible', 'kube-reserved',
  'kube-reserved-compressible', 'none',
];

const MINUTE = 60_000;
const SECOND = 1_000;

/** A fresh KubeletConfig holding upstream's defaults (plus kubelet-ts's own). */
export function defaultKubeletConfig(): KubeletConfig {
  return {
    enableServer: true,
    staticPodPath: '',
    fileCheckFrequency: 20 * SECOND,
    staticPodURL: '',
    staticPodURLHeader: {},
    httpCheckFrequency: 20 * SECOND,
    syncFrequency: MINUTE,
    address: '0.0.0.0',
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true, cacheTTL: 2 * MINUTE },
      x509: { clientCAFile: '' },
    },
    authorization: {
      mode: 'Webhook',
      webhook: { cacheAuthorizedTTL: 5 * MINUTE, cacheUnauthorizedTTL: 30 * SECOND },
    },
    eventRecordQPS: 50,
    eventBurst: 100,
    enableDebuggingHandlers: true,
    clusterDomain: '',
    clusterDNS: [],
    streamingConnectionIdleTimeout: 4 * 60 * MINUTE,
    nodeStatusUpdateFrequency: 10 * SECOND,
    nodeStatusReportFrequency: 5 * MINUTE,
    nodeLeaseDurationSeconds: 40,
    imageMinimumGCAge: 2 * MINUTE,
    imageGCHighThresholdPercent: 85,
    imageGCLowThresholdPercent: 80,
    volumeStatsAggPeriod: MINUTE,
    cgroupRoot: '',
    cgroupsPerQOS: true,
    cgroupDriver: 'cgroupfs',
    runtimeRequestTimeout: 2 * MINUTE,
    maxPods: 110,
    podPidsLimit: -1,
    serializeImagePulls: true,
    maxParallelImagePulls: null,
    evictionHard: { ...DEFAULT_EVICTION_HARD },
    evictionSoft: {},
    evictionSoftGracePeriod: {},
    evictionMinimumReclaim: {},
    evictionPressureTransitionPeriod: 5 * MINUTE,
    evictionMaxPodGracePeriod: 0,
    featureGates: {},
    failSwapOn: true,
    containerLogMaxSize: '10Mi',
    containerLogMaxFiles: 5,
    containerRuntimeEndpoint: DEFAULT_CONTAINER_RUNTIME_ENDPOINT,
    imageServiceEndpoint: '',
    systemReserved: {},
    kubeReserved: {},
    systemReservedCgroup: '',
    kubeReservedCgroup: '',
    enforceNodeAllocatable: ['pods'],
    registerNode: true,
    shutdownGracePeriod: 0,
    shutdownGracePeriodCriticalPods: 0,
    protectKernelDefaults: false,
    podLogsDir: '/var/log/pods',
    statsBackend: 'native',
    oomWatcher: 'auto',
  };
}

// ---------------------------------------------------------------------------------
// Parsing the file

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Decodes a KubeletConfiguration file (YAML or JSON). Checks apiVersion/kind and reports
 * upstream fields kubelet-ts ignores and unknown fields as warnings. Value types are
 * checked later, by resolveKubeletConfig. Throws ConfigError.
 */
export function parseKubeletConfigFile(
  text: string,
  fileName: string,
): { config: RawKubeletConfiguration; warnings: string[] } {
  if (text.trim() === '') throw new ConfigError('', 'the file is empty', fileName);
  let data: unknown;
  let jsonError: Error | undefined;
  if (text.trimStart().startsWith('{')) {
    try {
      data = JSON.parse(text);
    } catch (err) {
      // Could still be a YAML flow mapping; report the JSON error if YAML fails too.
      jsonError = err as Error;
    }
  }
  if (data === undefined) {
    // YAML 1.2 core schema: `yes`/`on` are strings, not booleans (go-yaml v2 differs).
    // Duplicate keys are tolerated (last wins) as upstream's lenient decoding does.
    const doc = parseDocument(text, { uniqueKeys: false, prettyErrors: true });
    if (doc.errors.length > 0) {
      const detail = jsonError !== undefined ? `invalid JSON: ${jsonError.message}` : `invalid YAML: ${doc.errors[0]!.message}`;
      throw new ConfigError('', detail, fileName);
    }
    data = doc.toJS({ maxAliasCount: 100 });
  }
  if (!isPlainObject(data)) {
    throw new ConfigError('', `expected a ${KUBELET_CONFIG_KIND} object, got ${showValue(data)}`, fileName);
  }
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

/** Warnings for unsupported and unknown fields (without a file prefix). */
export function checkFieldNames(raw: RawKubeletConfiguration): string[] {
  const warnings: string[] = [];
  for (const key of Object.keys(raw)) {
    if (key === 'apiVersion' || key === 'kind') continue;
    if (SUPPORTED_FIELDS.has(key) || KUBELET_TS_FIELDS.has(key)) continue;
    if (UPSTREAM_V1BETA1_FIELDS.has(key)) {
      warnings.push(`field ${key} is not supported by kubelet-ts, ignored`);
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

// ---------------------------------------------------------------------------------
// Validation

function isPathClean(p: string): boolean {
  return pathPosix.normalize(p).replace(/(.)\/$/, '$1') === p;
}

function checkThresholdValue(
  issues: ConfigIssue[],
  field: string,
  signal: string,
  value: string,
  opts: { allowZero: boolean },
): void {
  if (!EVICTION_SIGNALS.has(signal)) {
    issues.push({ field, detail: `unsupported eviction signal ${JSON.stringify(signal)}` });
    return;
  }
  if (value.endsWith('%')) {
    const num = value.slice(0, -1);
    const pct = Number(num);
    if (num.trim() === '' || !Number.isFinite(pct)) {
      issues.push({ field, detail: `invalid percentage ${JSON.stringify(value)}` });
    } else if (pct < 0) {
      issues.push({ field, detail: `eviction percentage threshold must be >= 0%, got ${JSON.stringify(value)}` });
    } else if (pct > 100) {
      issues.push({ field, detail: `eviction percentage threshold must be <= 100%, got ${JSON.stringify(value)}` });
    }
    return;
  }
  try {
    const q = parseQuantity(value);
    if (q.sign() < 0 || (!opts.allowZero && q.isZero())) {
      issues.push({ field, detail: `eviction threshold must be positive, got ${JSON.stringify(value)}` });
    }
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    issues.push({ field, detail: err.message });
  }
}

/**
 * Validates a resolved config as upstream's ValidateKubeletConfiguration does, for the
 * fields kubelet-ts supports, plus the value checks upstream makes later at startup
 * (eviction thresholds, reserved resources, cgroup driver, addresses). Collects every
 * problem and throws one ConfigError listing them (its `field` is the first one's).
 */
export function validateKubeletConfig(c: KubeletConfig, source?: string): void {
  const issues: ConfigIssue[] = [];
  const bad = (field: string, detail: string): void => {
    issues.push({ field, detail });
  };
  const portInRange = (p: number): boolean => Number.isInteger(p) && p >= 1 && p <= 65535;

  if (!portInRange(c.port)) bad('port', `must be between 1 and 65535, inclusive, got ${c.port}`);
  if (c.readOnlyPort !== 0 && !portInRange(c.readOnlyPort)) {
    bad('readOnlyPort', `must be between 0 and 65535, inclusive, got ${c.readOnlyPort}`);
  }
  if (c.healthzPort !== 0 && !portInRange(c.healthzPort)) {
    bad('healthzPort', `must be between 0 and 65535, inclusive, got ${c.healthzPort}`);
  }
  if (isIP(c.address) === 0) bad('address', `must be an IP address, got ${showValue(c.address)}`);
  if (isIP(c.healthzBindAddress) === 0) {
    bad('healthzBindAddress', `must be an IP address, got ${showValue(c.healthzBindAddress)}`);
  }
  c.clusterDNS.forEach((ip, i) => {
    if (isIP(ip) === 0) bad(`clusterDNS[${i}]`, `must be an IP address, got ${showValue(ip)}`);
  });
  if (c.maxPods < 0) bad('maxPods', `must not be a negative number, got ${c.maxPods}`);
  if (c.nodeLeaseDurationSeconds <= 0) {
    bad('nodeLeaseDurationSeconds', `must be greater than 0, got ${c.nodeLeaseDurationSeconds}`);
  }
  if (c.eventBurst < 0) bad('eventBurst', `must not be a negative number, got ${c.eventBurst}`);
  if (c.eventRecordQPS < 0) bad('eventRecordQPS', `must not be a negative number, got ${c.eventRecordQPS}`);
  for (const f of ['imageGCHighThresholdPercent', 'imageGCLowThresholdPercent'] as const) {
    if (c[f] < 0 || c[f] > 100) bad(f, `must be between 0 and 100, inclusive, got ${c[f]}`);
  }
  // Upstream requires low strictly below high.
  if (c.imageGCLowThresholdPercent >= c.imageGCHighThresholdPercent) {
    bad(
      'imageGCLowThresholdPercent',
      `${c.imageGCLowThresholdPercent} must be less than imageGCHighThresholdPercent ${c.imageGCHighThresholdPercent}`,
    );
  }
  if (c.maxParallelImagePulls !== null && c.maxParallelImagePulls < 1) {
    bad('maxParallelImagePulls', `must be a positive number, got ${c.maxParallelImagePulls}`);
  }
  if (c.serializeImagePulls && c.maxParallelImagePulls !== null && c.maxParallelImagePulls > 1) {
    bad('maxParallelImagePulls', 'cannot be larger than 1 unless serializeImagePulls is set to false');
  }
  if (c.cgroupDriver !== 'cgroupfs' && c.cgroupDriver !== 'systemd') {
    bad('cgroupDriver', `must be "cgroupfs" or "systemd", got ${showValue(c.cgroupDriver)}`);
  }
  if (c.authorization.mode !== 'AlwaysAllow' && c.authorization.mode !== 'Webhook') {
    bad('authorization.mode', `must be "AlwaysAllow" or "Webhook", got ${showValue(c.authorization.mode)}`);
  }

  const durations: Array<[string, number]> = [
    ['syncFrequency', c.syncFrequency],
    ['fileCheckFrequency', c.fileCheckFrequency],
    ['httpCheckFrequency', c.httpCheckFrequency],
    ['runtimeRequestTimeout', c.runtimeRequestTimeout],
    ['nodeStatusUpdateFrequency', c.nodeStatusUpdateFrequency],
    ['nodeStatusReportFrequency', c.nodeStatusReportFrequency],
    ['volumeStatsAggPeriod', c.volumeStatsAggPeriod],
    ['imageMinimumGCAge', c.imageMinimumGCAge],
    ['evictionPressureTransitionPeriod', c.evictionPressureTransitionPeriod],
    ['streamingConnectionIdleTimeout', c.streamingConnectionIdleTimeout],
    ['authentication.webhook.cacheTTL', c.authentication.webhook.cacheTTL],
    ['authorization.webhook.cacheAuthorizedTTL', c.authorization.webhook.cacheAuthorizedTTL],
    ['authorization.webhook.cacheUnauthorizedTTL', c.authorization.webhook.cacheUnauthorizedTTL],
    ['shutdownGracePeriod', c.shutdownGracePeriod],
    ['shutdownGracePeriodCriticalPods', c.shutdownGracePeriodCriticalPods],
  ];
  // A zero period (only reachable through flags: the file defaults "0s") would spin a loop.
  const mustBePositive = new Set([
    'syncFrequency', 'fileCheckFrequency', 'httpCheckFrequency', 'runtimeRequestTimeout',
    'nodeStatusUpdateFrequency', 'nodeStatusReportFrequency',
  ]);
  for (const [field, ms] of durations) {
    if (ms < 0) bad(field, `must not be negative, got ${formatDuration(ms)}`);
    else if (ms === 0 && mustBePositive.has(field)) bad(field, 'must be greater than 0');
  }
  for (const f of ['shutdownGracePeriod', 'shutdownGracePeriodCriticalPods'] as const) {
    if (c[f] > 0 && c[f] < SECOND) bad(f, `must be either zero or otherwise >= 1s, got ${formatDuration(c[f])}`);
  }
  if (c.shutdownGracePeriodCriticalPods > c.shutdownGracePeriod) {
    bad(
      'shutdownGracePeriodCriticalPods',
      `${formatDuration(c.shutdownGracePeriodCriticalPods)} must be <= shutdownGracePeriod ${formatDuration(c.shutdownGracePeriod)}`,
    );
  }
  if (c.evictionMaxPodGracePeriod < 0) {
    bad('evictionMaxPodGracePeriod', `must not be a negative number, got ${c.evictionMaxPodGracePeriod}`);
  }

  if (c.staticPodURL !== '') {
    let ok = false;
    try {
      const u = new URL(c.staticPodURL);
      ok = (u.protocol === 'http:' || u.protocol === 'https:') && u.host !== '';
    } catch {
      ok = false;
    }
    if (!ok) bad('staticPodURL', `must be an http(s) URL, got ${showValue(c.staticPodURL)}`);
  }
  if (c.containerRuntimeEndpoint === '') bad('containerRuntimeEndpoint', 'was not specified or empty');
  if (c.containerLogMaxFiles <= 1) bad('containerLogMaxFiles', `must be greater than 1, got ${c.containerLogMaxFiles}`);
  try {
    if (parseQuantity(c.containerLogMaxSize).sign() <= 0) {
      bad('containerLogMaxSize', `must be positive, got ${showValue(c.containerLogMaxSize)}`);
    }
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    bad('containerLogMaxSize', err.message);
  }
  if (c.podLogsDir === '') bad('podLogsDir', 'was not specified');
  else if (!c.podLogsDir.startsWith('/')) bad('podLogsDir', `pod logs path ${showValue(c.podLogsDir)} must be absolute path`);
  else if (!isPathClean(c.podLogsDir)) bad('podLogsDir', `pod logs path ${showValue(c.podLogsDir)} must be normalized`);
  else if (/[^\x00-\x7f]/.test(c.podLogsDir)) {
    bad('podLogsDir', `pod logs path ${showValue(c.podLogsDir)} must contain ASCII characters only`);
  }

  for (const f of ['systemReserved', 'kubeReserved'] as const) {
    for (const [name, value] of Object.entries(c[f])) {
      const field = `${f}[${name}]`;
      if (!RESERVABLE_RESOURCES.has(name)) {
        bad(field, `cannot reserve ${JSON.stringify(name)} resource`);
        continue;
      }
      try {
        if (parseQuantity(value).sign() < 0) bad(field, `resource quantity cannot be negative, got ${showValue(value)}`);
      } catch (err) {
        if (!(err instanceof QuantityError)) throw err;
        bad(field, err.message);
      }
    }
  }
  validateEnforceNodeAllocatable(c, bad);

  for (const [signal, value] of Object.entries(c.evictionHard)) {
    // Upstream skips "0%" and "100%" (the documented way to disable a signal).
    if (value === '0%' || value === '100%') continue;
    checkThresholdValue(issues, `evictionHard[${signal}]`, signal, value, { allowZero: false });
  }
  for (const [signal, value] of Object.entries(c.evictionSoft)) {
    if (value === '0%' || value === '100%') continue;
    checkThresholdValue(issues, `evictionSoft[${signal}]`, signal, value, { allowZero: false });
    if (!(signal in c.evictionSoftGracePeriod)) {
      bad(`evictionSoftGracePeriod[${signal}]`, `grace period must be specified for the soft eviction threshold ${signal}`);
    }
  }
  for (const [signal, ms] of Object.entries(c.evictionSoftGracePeriod)) {
    const field = `evictionSoftGracePeriod[${signal}]`;
    if (!EVICTION_SIGNALS.has(signal)) bad(field, `unsupported eviction signal ${JSON.stringify(signal)}`);
    else if (ms < 0) bad(field, `must be a positive value, got ${formatDuration(ms)}`);
  }
  for (const [signal, value] of Object.entries(c.evictionMinimumReclaim)) {
    checkThresholdValue(issues, `evictionMinimumReclaim[${signal}]`, signal, value, { allowZero: true });
  }

  if (!STATS_BACKENDS.includes(c.statsBackend)) {
    bad('statsBackend', `must be one of ${STATS_BACKENDS.map((s) => `"${s}"`).join(', ')}, got ${showValue(c.statsBackend)}`);
  }
  if (!OOM_WATCHER_MODES.includes(c.oomWatcher)) {
    bad('oomWatcher', `must be one of ${OOM_WATCHER_MODES.map((s) => `"${s}"`).join(', ')}, got ${showValue(c.oomWatcher)}`);
  }

  if (issues.length > 0) {
    throw new ConfigError(issues[0]!.field, issues[0]!.detail, source, issues);
  }
}

function validateEnforceNodeAllocatable(c: KubeletConfig, bad: (field: string, detail: string) => void): void {
  const field = 'enforceNodeAllocatable';
  const list = c.enforceNodeAllocatable;
  const has = new Set(list);
  if (has.has('system-reserved') && has.has('system-reserved-compressible')) {
    bad(field, 'both "system-reserved" and "system-reserved-compressible" cannot be specified together');
  }
  if (has.has('kube-reserved') && has.has('kube-reserved-compressible')) {
    bad(field, 'both "kube-reserved" and "kube-reserved-compressible" cannot be specified together');
  }
  const seen = new Set<string>();
  for (const val of list) {
    if (seen.has(val)) {
      bad(field, `duplicated enforcements ${JSON.stringify(val)}`);
      continue;
    }
    seen.add(val);
    switch (val) {
      case 'pods':
        break;
      case 'system-reserved':
      case 'system-reserved-compressible':
        if (c.systemReservedCgroup === '') bad('systemReservedCgroup', `must be specified when ${JSON.stringify(val)} is in enforceNodeAllocatable`);
        break;
      case 'kube-reserved':
      case 'kube-reserved-compressible':
        if (c.kubeReservedCgroup === '') bad('kubeReservedCgroup', `must be specified when ${JSON.stringify(val)} is in enforceNodeAllocatable`);
        break;
      case 'none':
        if (list.length > 1) bad(field, 'may not contain additional enforcements when "none" is specified');
        continue;
      default:
        bad(field, `option ${JSON.stringify(val)} is not valid; valid options are ${ENFORCE_NODE_ALLOCATABLE_KEYS.map((k) => `"${k}"`).join(', ')}`);
        continue;
    }
    if (!c.cgroupsPerQOS) bad('cgroupsPerQOS', `must be set to true when ${JSON.stringify(val)} is in enforceNodeAllocatable`);
  }
}
