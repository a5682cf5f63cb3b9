// Validation of a resolved KubeletConfig: upstream's ValidateKubeletConfiguration
// (pkg/kubelet/apis/config/validation) for the fields kubelet-ts models, the value checks
// upstream makes later at start-up, and kubelet-ts's own limits where a value upstream
// accepts would make kubelet-ts spin or overflow a timer.

import { isIP } from 'node:net';
import { posix as pathPosix } from 'node:path';

import { parseQuantity, type Quantity, QuantityError } from '../api/quantity.js';
import { sysctlPatternError } from '../api/sysctl.js';
import { formatDuration } from './duration.js';
import { ConfigError, type ConfigIssue, showValue } from './errors.js';
import { CONTENT_TYPE_JSON, CONTENT_TYPE_PROTOBUF, type KubeletConfig, OOM_WATCHER_MODES, STATS_BACKENDS } from './kubelet-config.js';
import { KNOWN_FEATURE_GATES, unrecognizedFeatureGate } from './feature-gates.js';
import { CIPHER_SUITES, TLS_VERSIONS } from './tls-names.js';
import { ENFORCE_NODE_ALLOCATABLE_KEYS, EVICTION_SIGNALS, RESERVABLE_RESOURCES } from './schema.js';

const SECOND = 1_000;

/** Node.js runs a timer of at most 2^31-1 ms; a longer one fires after 1 ms instead. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The periods kubelet-ts runs timers with, and the least of each: upstream sets no floor,
 * but below it a loop spins (fileCheckFrequency 1ns re-read the static pod directory every
 * millisecond). A CRI timeout only has to be positive.
 */
export const TIMER_PERIOD_MIN_MS = {
  syncFrequency: SECOND,
  fileCheckFrequency: SECOND,
  httpCheckFrequency: SECOND,
  runtimeRequestTimeout: 1,
} as const;

/** A duration in ms for a message; values beyond Go's range print as ms rather than throw. */
function showMs(ms: number): string {
  try {
    return formatDuration(ms);
  } catch {
    return `${ms}ms`;
  }
}

/** The largest quantity upstream holds in an int64 (bytes, PIDs, millicores). */
const MAX_QUANTITY = (1n << 63n) - 1n;

function isPathClean(p: string): boolean {
  return pathPosix.normalize(p).replace(/(.)\/$/, '$1') === p;
}

/**
 * Parses a quantity-valued field, or records why not: malformed, or beyond the int64
 * upstream holds it in. Returns undefined when an issue was recorded.
 */
function quantityOf(issues: ConfigIssue[], field: string, value: string): Quantity | undefined {
  let q: Quantity;
  try {
    q = parseQuantity(value);
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    issues.push({ field, detail: err.message });
    return undefined;
  }
  const v = q.valueBig();
  if (v > MAX_QUANTITY || v < -MAX_QUANTITY) {
    issues.push({ field, detail: `quantity ${showValue(value)} is out of range (more than int64)` });
    return undefined;
  }
  return q;
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
  const q = quantityOf(issues, field, value);
  if (q !== undefined && (q.sign() < 0 || (!opts.allowZero && q.isZero()))) {
    issues.push({ field, detail: `eviction threshold must be positive, got ${JSON.stringify(value)}` });
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
  if (c.tlsMinVersion !== '' && !Object.hasOwn(TLS_VERSIONS, c.tlsMinVersion)) {
    bad('tlsMinVersion', `unknown tls version ${JSON.stringify(c.tlsMinVersion)}; known: ${Object.keys(TLS_VERSIONS).join(', ')}`);
  }
  c.tlsCipherSuites.forEach((name, i) => {
    if (!Object.hasOwn(CIPHER_SUITES, name)) bad(`tlsCipherSuites[${i}]`, `cipher suite ${JSON.stringify(name)} not supported or doesn't exist`);
  });
  if (c.tlsMinVersion === 'VersionTLS13' && c.tlsCipherSuites.length > 0) {
    bad('tlsCipherSuites', `${JSON.stringify(c.tlsCipherSuites)} is not configurable with tlsMinVersion VersionTLS13`);
  }
  if ((c.tlsCertFile === '') !== (c.tlsPrivateKeyFile === '')) {
    bad(c.tlsCertFile === '' ? 'tlsCertFile' : 'tlsPrivateKeyFile', 'tlsCertFile and tlsPrivateKeyFile must be given together');
  }
  c.clusterDNS.forEach((ip, i) => {
    if (isIP(ip) === 0) bad(`clusterDNS[${i}]`, `must be an IP address, got ${showValue(ip)}`);
  });
  if (!['Get', 'Cache', 'Watch'].includes(c.configMapAndSecretChangeDetectionStrategy)) {
    bad('configMapAndSecretChangeDetectionStrategy', `must be one of "Get", "Cache", "Watch", got ${showValue(c.configMapAndSecretChangeDetectionStrategy)}`);
  }
  if (c.maxPods < 0) bad('maxPods', `must not be a negative number, got ${c.maxPods}`);
  if (c.oomScoreAdj < -1000 || c.oomScoreAdj > 1000) bad('oomScoreAdj', `must be between -1000 and 1000, got ${c.oomScoreAdj}`);
  // upstream validateKubeletOSConfiguration (linux)
  const idsPerPod = c.userNamespaces.idsPerPod;
  if (idsPerPod < 65536) bad('userNamespaces.idsPerPod', `must not be less than 65536, got ${idsPerPod}`);
  else if (idsPerPod % 65536 !== 0) bad('userNamespaces.idsPerPod', `must be a multiple of 65536, got ${idsPerPod}`);
  else if (idsPerPod > 2 ** 32 - 1) bad('userNamespaces.idsPerPod', `must not be more than 4294967295, got ${idsPerPod}`);
  if (c.nodeLeaseDurationSeconds <= 0) {
    bad('nodeLeaseDurationSeconds', `must be greater than 0, got ${c.nodeLeaseDurationSeconds}`);
  }
  if (c.kubeAPIQPS < 0) bad('kubeAPIQPS', `must not be a negative number, got ${c.kubeAPIQPS}`);
  if (c.kubeAPIBurst < 0) bad('kubeAPIBurst', `must not be a negative number, got ${c.kubeAPIBurst}`);
  if (c.nodeStatusMaxImages < -1) bad('nodeStatusMaxImages', `must be -1 or greater, got ${c.nodeStatusMaxImages}`);
  if (c.contentType !== CONTENT_TYPE_JSON && c.contentType !== CONTENT_TYPE_PROTOBUF) {
    bad('contentType', `must be ${CONTENT_TYPE_JSON} or ${CONTENT_TYPE_PROTOBUF}, got ${showValue(c.contentType)}`);
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
  if (c.imageMaximumGCAge !== 0 && c.imageMinimumGCAge >= c.imageMaximumGCAge) {
    bad('imageMaximumGCAge', `${showMs(c.imageMaximumGCAge)} must be greater than imageMinimumGCAge ${showMs(c.imageMinimumGCAge)}`);
  }
  if (c.maxParallelImagePulls !== null && c.maxParallelImagePulls < 1) {
    bad('maxParallelImagePulls', `must be a positive number, got ${c.maxParallelImagePulls}`);
  }
  if (c.serializeImagePulls && c.maxParallelImagePulls !== null && c.maxParallelImagePulls > 1) {
    bad('maxParallelImagePulls', 'cannot be larger than 1 unless serializeImagePulls is set to false');
  }
  if (c.cgroupDriver !== 'systemd' && c.cgroupDriver !== 'cgroupfs') {
    bad('cgroupDriver', `must be "cgroupfs" or "systemd", got ${showValue(c.cgroupDriver)}`);
  }
  for (const name of Object.keys(c.featureGates)) {
    if (!KNOWN_FEATURE_GATES.has(name)) bad(`featureGates[${name}]`, unrecognizedFeatureGate(name));
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
    ['imageMaximumGCAge', c.imageMaximumGCAge],
    ['evictionPressureTransitionPeriod', c.evictionPressureTransitionPeriod],
    ['streamingConnectionIdleTimeout', c.streamingConnectionIdleTimeout],
    ['authentication.webhook.cacheTTL', c.authentication.webhook.cacheTTL],
    ['authorization.webhook.cacheAuthorizedTTL', c.authorization.webhook.cacheAuthorizedTTL],
    ['authorization.webhook.cacheUnauthorizedTTL', c.authorization.webhook.cacheUnauthorizedTTL],
    ['shutdownGracePeriod', c.shutdownGracePeriod],
    ['shutdownGracePeriodCriticalPods', c.shutdownGracePeriodCriticalPods],
  ];
  for (const [field, ms] of durations) {
    if (ms < 0) bad(field, `must not be negative, got ${showMs(ms)}`);
  }
  // kubelet-ts's own limits on the periods it runs timers with (upstream has none).
  for (const [field, min] of Object.entries(TIMER_PERIOD_MIN_MS) as Array<[keyof typeof TIMER_PERIOD_MIN_MS, number]>) {
    const ms = c[field];
    if (ms < 0) continue;
    if (ms < min) {
      bad(field, min === 1 ? 'must be greater than 0' : `must be at least ${showMs(min)} (kubelet-ts's minimum: a shorter period spins), got ${showMs(ms)}`);
    } else if (ms > MAX_TIMER_MS) {
      bad(field, `must be at most ${showMs(MAX_TIMER_MS)} (the longest timer Node.js runs), got ${showMs(ms)}`);
    }
  }
  for (const f of ['shutdownGracePeriod', 'shutdownGracePeriodCriticalPods'] as const) {
    if (c[f] > 0 && c[f] < SECOND) bad(f, `must be either zero or otherwise >= 1s, got ${showMs(c[f])}`);
  }
  if (c.shutdownGracePeriodCriticalPods > c.shutdownGracePeriod) {
    bad(
      'shutdownGracePeriodCriticalPods',
      `${showMs(c.shutdownGracePeriodCriticalPods)} must be <= shutdownGracePeriod ${showMs(c.shutdownGracePeriod)}`,
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
  // upstream: at least one rotation worker, and no size check more often than every 3s
  if (c.containerLogMaxWorkers < 1) bad('containerLogMaxWorkers', `must be greater than or equal to 1, got ${c.containerLogMaxWorkers}`);
  if (c.containerLogMonitorInterval < 3_000) bad('containerLogMonitorInterval', `must be a positive time duration greater than or equal to 3s, got ${showMs(c.containerLogMonitorInterval)}`);
  if (c.containerLogMaxFiles <= 1) bad('containerLogMaxFiles', `must be greater than 1, got ${c.containerLogMaxFiles}`);
  const logMaxSize = quantityOf(issues, 'containerLogMaxSize', c.containerLogMaxSize);
  if (logMaxSize !== undefined && logMaxSize.sign() <= 0) {
    bad('containerLogMaxSize', `must be positive, got ${showValue(c.containerLogMaxSize)}`);
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
      const q = quantityOf(issues, field, value);
      if (q !== undefined && q.sign() < 0) bad(field, `resource quantity cannot be negative, got ${showValue(value)}`);
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
    else if (ms < 0) bad(field, `must be a positive value, got ${showMs(ms)}`);
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
  // upstream refuses these when it builds the sysctl allowlist at start
  (c.allowedUnsafeSysctls ?? []).forEach((p, i) => {
    const err = sysctlPatternError(p);
    if (err) bad(`allowedUnsafeSysctls[${i}]`, err);
  });

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

/**
 * upstream BuildAuth: webhook authentication and webhook authorization send TokenReviews and
 * SubjectAccessReviews through the API server client, so a standalone kubelet (no --kubeconfig)
 * with either on refuses to start (upstream: "no client provided, cannot use webhook
 * authentication"). The config file's defaults have both on: a standalone config turns them off.
 */
export function validateStandaloneAuth(c: KubeletConfig, kubeconfig: string | undefined, source?: string): void {
  if (kubeconfig) return;
  const issues: ConfigIssue[] = [];
  if (c.authentication.webhook.enabled) {
    issues.push({
      field: 'authentication.webhook.enabled',
      detail: 'is true, but webhook authentication needs an API server client (--kubeconfig) to send TokenReviews with; '
        + 'standalone (no --kubeconfig), set it to false or give --kubeconfig',
    });
  }
  if (c.authorization.mode === 'Webhook') {
    issues.push({
      field: 'authorization.mode',
      detail: 'is "Webhook", but webhook authorization needs an API server client (--kubeconfig) to send SubjectAccessReviews with; '
        + 'standalone (no --kubeconfig), set it to "AlwaysAllow" or give --kubeconfig',
    });
  }
  if (issues.length > 0) throw new ConfigError(issues[0]!.field, issues[0]!.detail, source, issues);
}
