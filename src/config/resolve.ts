// Resolving a decoded KubeletConfiguration into a KubeletConfig: typed reads of each field
// (Go's JSON decoding rules: a string field takes only a string, an int field only an
// integral number in range, a duration only a duration string) and upstream's v1beta1
// defaulting of what is absent or zero.

import { posix as pathPosix } from 'node:path';

import { defaultKubeletConfig, DEFAULT_EVICTION_HARD } from './defaults.js';
import { DurationError, parseDuration } from './duration.js';
import { ConfigError, showValue } from './errors.js';
import type {
  CgroupDriver,
  KubeletAuthorizationMode,
  KubeletConfig,
  OomWatcherMode,
  RawKubeletConfiguration,
  RegisterTaint,
  StatsBackend,
} from './kubelet-config.js';

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
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

  /** A list of core/v1 Taints (key, value, effect). */
  taints(path: string): RegisterTaint[] | undefined {
    const v = this.get(path);
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) this.fail(path, `expected a list of taints, got ${showValue(v)}`);
    return v.map((item, i) => {
      const at = `${path}[${i}]`;
      if (!isPlainObject(item)) this.fail(at, `expected a taint {key, value, effect}, got ${showValue(item)}`);
      for (const k of Object.keys(item)) if (!['key', 'value', 'effect', 'timeAdded'].includes(k)) this.fail(`${at}.${k}`, 'unknown field');
      const { key, value, effect } = item;
      if (typeof key !== 'string' || key === '') this.fail(`${at}.key`, `expected a non-empty string, got ${showValue(key)}`);
      if (value !== undefined && value !== null && typeof value !== 'string') this.fail(`${at}.value`, `expected a string, got ${showValue(value)}`);
      if (effect !== 'NoSchedule' && effect !== 'PreferNoSchedule' && effect !== 'NoExecute') {
        this.fail(`${at}.effect`, `must be NoSchedule, PreferNoSchedule or NoExecute, got ${showValue(effect)}`);
      }
      return typeof value === 'string' && value !== '' ? { key, value, effect } : { key, effect };
    });
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
  c.tlsCertFile = orUnset(r.str('tlsCertFile'), c.tlsCertFile);
  c.tlsPrivateKeyFile = orUnset(r.str('tlsPrivateKeyFile'), c.tlsPrivateKeyFile);
  c.rotateCertificates = orUnset(r.bool('rotateCertificates'), c.rotateCertificates);
  c.serverTLSBootstrap = orUnset(r.bool('serverTLSBootstrap'), c.serverTLSBootstrap);
  c.tlsCipherSuites = orUnset(r.strList('tlsCipherSuites'), c.tlsCipherSuites);
  c.tlsMinVersion = orUnset(r.str('tlsMinVersion'), c.tlsMinVersion);
  c.enableSystemLogHandler = orUnset(r.bool('enableSystemLogHandler'), c.enableSystemLogHandler);
  c.enableProfilingHandler = orUnset(r.bool('enableProfilingHandler'), c.enableProfilingHandler);
  c.enableDebugFlagsHandler = orUnset(r.bool('enableDebugFlagsHandler'), c.enableDebugFlagsHandler);
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
  // upstream: a pointer; an explicit "" means no host resolv.conf at all
  c.resolvConf = orUnset(r.str('resolvConf'), c.resolvConf);
  c.configMapAndSecretChangeDetectionStrategy = orDefault(r.str('configMapAndSecretChangeDetectionStrategy'), c.configMapAndSecretChangeDetectionStrategy) as KubeletConfig['configMapAndSecretChangeDetectionStrategy'];
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
  c.nodeStatusMaxImages = orUnset(r.int('nodeStatusMaxImages'), c.nodeStatusMaxImages);
  c.kubeAPIQPS = orUnset(r.int('kubeAPIQPS'), c.kubeAPIQPS);
  c.kubeAPIBurst = orDefault(r.int('kubeAPIBurst'), c.kubeAPIBurst);
  c.contentType = orDefault(r.str('contentType'), c.contentType);
  c.imageMinimumGCAge = orDefault(r.duration('imageMinimumGCAge'), c.imageMinimumGCAge);
  c.imageMaximumGCAge = orDefault(r.duration('imageMaximumGCAge'), c.imageMaximumGCAge);
  c.imageGCHighThresholdPercent = orUnset(r.int('imageGCHighThresholdPercent'), c.imageGCHighThresholdPercent);
  c.imageGCLowThresholdPercent = orUnset(r.int('imageGCLowThresholdPercent'), c.imageGCLowThresholdPercent);
  c.volumeStatsAggPeriod = orDefault(r.duration('volumeStatsAggPeriod'), c.volumeStatsAggPeriod);
  c.cgroupRoot = orUnset(r.str('cgroupRoot'), c.cgroupRoot);
  c.cgroupsPerQOS = orUnset(r.bool('cgroupsPerQOS'), c.cgroupsPerQOS);
  c.localStorageCapacityIsolation = orUnset(r.bool('localStorageCapacityIsolation'), c.localStorageCapacityIsolation);
  c.cgroupDriver = orDefault(r.str('cgroupDriver'), c.cgroupDriver) as CgroupDriver;
  c.runtimeRequestTimeout = orDefault(r.duration('runtimeRequestTimeout'), c.runtimeRequestTimeout);
  c.maxPods = orDefault(r.int('maxPods'), c.maxPods);
  c.userNamespaces = { idsPerPod: orUnset(r.int('userNamespaces.idsPerPod', 64), c.userNamespaces.idsPerPod) };
  // Upstream: unset or negative → -1 (the node allocatable pid limit applies).
  const pidsLimit = r.int('podPidsLimit', 64);
  c.podPidsLimit = pidsLimit === undefined || pidsLimit < 0 ? -1 : pidsLimit;
  c.allowedUnsafeSysctls = orUnset(r.strList('allowedUnsafeSysctls'), c.allowedUnsafeSysctls);
  c.seccompDefault = orUnset(r.bool('seccompDefault'), c.seccompDefault);
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
  c.kernelMemcgNotification = orUnset(r.bool('kernelMemcgNotification'), c.kernelMemcgNotification);
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
  c.containerLogMaxWorkers = orUnset(r.int('containerLogMaxWorkers'), c.containerLogMaxWorkers);
  c.containerLogMonitorInterval = orUnset(r.duration('containerLogMonitorInterval'), c.containerLogMonitorInterval);
  c.containerRuntimeEndpoint = orDefault(r.str('containerRuntimeEndpoint'), c.containerRuntimeEndpoint);
  c.imageServiceEndpoint = orUnset(r.str('imageServiceEndpoint'), c.imageServiceEndpoint);
  c.systemReserved = orUnset(r.strMap('systemReserved'), c.systemReserved);
  c.kubeReserved = orUnset(r.strMap('kubeReserved'), c.kubeReserved);
  c.systemReservedCgroup = orUnset(r.str('systemReservedCgroup'), c.systemReservedCgroup);
  c.kubeReservedCgroup = orUnset(r.str('kubeReservedCgroup'), c.kubeReservedCgroup);
  c.enforceNodeAllocatable = orUnset(r.strList('enforceNodeAllocatable'), c.enforceNodeAllocatable);
  c.registerNode = orUnset(r.bool('registerNode'), c.registerNode);
  c.registerWithTaints = orUnset(r.taints('registerWithTaints'), c.registerWithTaints);
  c.shutdownGracePeriod = orUnset(r.duration('shutdownGracePeriod'), c.shutdownGracePeriod);
  c.shutdownGracePeriodCriticalPods = orUnset(
    r.duration('shutdownGracePeriodCriticalPods'),
    c.shutdownGracePeriodCriticalPods,
  );
  c.protectKernelDefaults = orUnset(r.bool('protectKernelDefaults'), c.protectKernelDefaults);
  c.oomScoreAdj = orUnset(r.int('oomScoreAdj'), c.oomScoreAdj);
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
  c.tlsCertFile = abs(c.tlsCertFile);
  c.tlsPrivateKeyFile = abs(c.tlsPrivateKeyFile);
  c.podLogsDir = abs(c.podLogsDir);
}
