// The field table: every KubeletConfiguration field (and kubelet-ts flag-only setting),
// and whether kubelet-ts implements it. A setting kubelet-ts accepts either works or is
// reported at start-up, by name, as not implemented. test/config/field-readers.test.ts
// keeps this table honest: an implemented field must be read by code outside src/config,
// and a field read there must be declared implemented.

import type { KubeletFlags } from './flags.js';
import type { KubeletConfig } from './kubelet-config.js';
import { jsonEqual } from '../util/json-equal.js';

export type FieldSupport = 'implemented' | 'not-implemented';

/**
 * Every field of KubeletConfig (the compiler insists on each), with its support.
 * Not implemented: parsed, defaulted and validated as upstream, then ignored, with a
 * start-up warning when set to anything but its default.
 */
export const FIELD_SUPPORT: Readonly<Record<keyof KubeletConfig, FieldSupport>> = {
  // Static pods and the sync loop.
  staticPodPath: 'implemented',
  fileCheckFrequency: 'implemented',
  staticPodURL: 'implemented',
  staticPodURLHeader: 'implemented',
  httpCheckFrequency: 'implemented',
  syncFrequency: 'implemented',
  podLogsDir: 'implemented',
  // The runtime and images.
  containerRuntimeEndpoint: 'implemented',
  imageServiceEndpoint: 'implemented',
  runtimeRequestTimeout: 'implemented',
  serializeImagePulls: 'implemented',
  maxParallelImagePulls: 'implemented',
  cgroupRoot: 'implemented',
  featureGates: 'implemented',
  // The read-only and healthz servers.
  address: 'implemented',
  readOnlyPort: 'implemented',
  healthzBindAddress: 'implemented',
  healthzPort: 'implemented',
  // kubelet-ts's own.
  statsBackend: 'implemented',
  oomWatcher: 'implemented',

  // The secured API server (port 10250): TLS, authentication, authorization, its handlers.
  enableServer: 'implemented',
  port: 'implemented',
  tlsCertFile: 'implemented',
  tlsPrivateKeyFile: 'implemented',
  // src/certificate/manager.ts
  rotateCertificates: 'implemented',
  serverTLSBootstrap: 'implemented',
  tlsCipherSuites: 'implemented',
  tlsMinVersion: 'implemented',
  authentication: 'implemented',
  authorization: 'implemented',
  enableSystemLogHandler: 'implemented',
  enableProfilingHandler: 'implemented',
  enableDebugFlagsHandler: 'implemented',
  enableDebuggingHandlers: 'implemented',
  // the idle timeout of proxied exec/attach/port-forward streams (src/server/kubelet-host.ts)
  streamingConnectionIdleTimeout: 'implemented',
  // The API server connection (--kubeconfig): node registration, status, lease, events.
  kubeAPIQPS: 'implemented',
  kubeAPIBurst: 'implemented',
  // JSON is honoured; protobuf (the default) is spoken as JSON, which every API server accepts.
  contentType: 'implemented',
  registerNode: 'implemented',
  registerWithTaints: 'implemented',
  nodeStatusUpdateFrequency: 'implemented',
  nodeStatusReportFrequency: 'implemented',
  nodeLeaseDurationSeconds: 'implemented',
  nodeStatusMaxImages: 'implemented',
  eventRecordQPS: 'implemented',
  eventBurst: 'implemented',
  // Pod DNS.
  clusterDomain: 'implemented',
  clusterDNS: 'implemented',
  resolvConf: 'implemented',
  // Volumes: Watch is served as a TTL-cached Get (src/volumemanager/object-source.ts).
  configMapAndSecretChangeDetectionStrategy: 'implemented',
  // Node allocatable, cgroups, admission.
  cgroupsPerQOS: 'not-implemented',
  // cgroupfs (src/cm/pod-container-manager.ts) and systemd (src/cm/pod-container-manager-systemd.ts)
  cgroupDriver: 'implemented',
  // Node capacity (pods); admission by it is the pod side's.
  maxPods: 'implemented',
  // pods' user namespaces (src/kubelet/userns)
  userNamespaces: 'implemented',
  podPidsLimit: 'implemented',
  // the sysctl admit handler (src/kubelet/admission.ts) and the containers' seccomp profile
  allowedUnsafeSysctls: 'implemented',
  seccompDefault: 'implemented',
  systemReserved: 'implemented',
  kubeReserved: 'implemented',
  // enforced when enforceNodeAllocatable lists their keys (src/cm/node-allocatable.ts)
  systemReservedCgroup: 'implemented',
  kubeReservedCgroup: 'implemented',
  enforceNodeAllocatable: 'implemented',
  // checked (protected) or set at start-up, as upstream's setupKernelTunables (src/kubelet/node-setup.ts)
  protectKernelDefaults: 'implemented',
  // /proc/swaps read at start-up (src/kubelet/node-setup.ts)
  failSwapOn: 'implemented',
  // written to /proc/self/oom_score_adj at start-up (src/kubelet/node-setup.ts)
  oomScoreAdj: 'implemented',
  // Eviction.
  evictionHard: 'implemented',
  evictionSoft: 'implemented',
  evictionSoftGracePeriod: 'implemented',
  evictionMinimumReclaim: 'implemented',
  evictionPressureTransitionPeriod: 'implemented',
  evictionMaxPodGracePeriod: 'implemented',
  // v1 memcg usage thresholds, v2 memory.events + PSI (src/eviction/memory-notifier.ts).
  kernelMemcgNotification: 'implemented',
  // Garbage collection, log rotation, volume stats.
  imageMinimumGCAge: 'implemented',
  imageMaximumGCAge: 'implemented',
  imageGCHighThresholdPercent: 'implemented',
  imageGCLowThresholdPercent: 'implemented',
  containerLogMaxSize: 'implemented',
  containerLogMaxFiles: 'implemented',
  containerLogMaxWorkers: 'implemented',
  containerLogMonitorInterval: 'implemented',
  volumeStatsAggPeriod: 'implemented',
  // eviction of pods over emptyDir sizeLimit / ephemeral-storage limits; ephemeral-storage capacity
  localStorageCapacityIsolation: 'implemented',
  // Graceful node shutdown.
  shutdownGracePeriod: 'not-implemented',
  shutdownGracePeriodCriticalPods: 'not-implemented',
};

/** The settings that exist only as flags; 'loader': consumed while loading the config. */
export const FLAG_SUPPORT: Readonly<Record<keyof KubeletFlags, FieldSupport | 'loader'>> = {
  configFile: 'loader',
  // Without it kubelet-ts runs standalone (static pods only).
  kubeconfig: 'implemented',
  bootstrapKubeconfig: 'implemented',
  nodeLabels: 'implemented',
  rootDir: 'implemented',
  certDirectory: 'implemented',
  hostnameOverride: 'implemented',
  nodeIP: 'implemented',
  cloudProvider: 'implemented',
  verbosity: 'implemented',
  help: 'implemented',
  imageCredentialProviderConfig: 'implemented',
  imageCredentialProviderBinDir: 'implemented',
  version: 'implemented',
  containerGCPolicy: 'implemented',
  podInfraContainerImage: 'implemented',
};

/** The KubeletConfiguration fields kubelet-ts models (parses, defaults, validates). */
export const MODELED_FIELDS: ReadonlySet<string> = new Set(Object.keys(FIELD_SUPPORT));

export function isImplemented(field: keyof KubeletConfig): boolean {
  return FIELD_SUPPORT[field] === 'implemented';
}

/** The start-up warning for a setting kubelet-ts accepts and does not act on. */
export function notImplementedMessage(what: string): string {
  return `${what} is not implemented by kubelet-ts yet; ignored`;
}

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

/** Known keys of the nested structs kubelet-ts models (anything else there is unknown). */
export const NESTED_FIELDS: Readonly<Record<string, ReadonlySet<string>>> = {
  authentication: new Set(['anonymous', 'webhook', 'x509']),
  'authentication.anonymous': new Set(['enabled']),
  'authentication.webhook': new Set(['enabled', 'cacheTTL']),
  'authentication.x509': new Set(['clientCAFile']),
  authorization: new Set(['mode', 'webhook']),
  'authorization.webhook': new Set(['cacheAuthorizedTTL', 'cacheUnauthorizedTTL']),
  userNamespaces: new Set(['idsPerPod']),
};

/** Eviction signals upstream knows (pkg/kubelet/eviction/api). */
export const EVICTION_SIGNALS: ReadonlySet<string> = new Set([
  'memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available',
  'imagefs.inodesFree', 'containerfs.available', 'containerfs.inodesFree',
  'allocatableMemory.available', 'pid.available',
]);

/** Resources that systemReserved / kubeReserved may name (upstream parseResourceList). */
export const RESERVABLE_RESOURCES: ReadonlySet<string> = new Set(['cpu', 'memory', 'ephemeral-storage', 'pid']);

export const ENFORCE_NODE_ALLOCATABLE_KEYS: readonly string[] = [
  'pods', 'system-reserved', 'system-reserved-compressible', 'kube-reserved',
  'kube-reserved-compressible', 'none',
];


function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}


/**
 * Warnings naming each not-implemented field whose value differs from `baseline` (the
 * defaults the config started from); structs (authentication, authorization) are named
 * down to the leaf that differs.
 */
export function notImplementedWarnings(config: KubeletConfig, baseline: KubeletConfig): string[] {
  const out: string[] = [];
  const walk = (path: string, value: unknown, base: unknown): void => {
    if (jsonEqual(value, base)) return;
    if (NESTED_FIELDS[path] !== undefined && isPlainObject(value) && isPlainObject(base)) {
      for (const key of Object.keys(value)) walk(`${path}.${key}`, value[key], base[key]);
      return;
    }
    out.push(notImplementedMessage(`field ${path}`));
  };
  for (const [field, support] of Object.entries(FIELD_SUPPORT)) {
    if (support !== 'not-implemented') continue;
    const key = field as keyof KubeletConfig;
    walk(field, config[key], baseline[key]);
  }
  return out;
}

/**
 * Which KubeletConfiguration settings kubelet-ts enforces, for /configz beside its
 * `kubeletconfig` section: `notImplemented` are shown in kubeletconfig with their values but not
 * acted on; `notModeled` are upstream fields kubelet-ts neither shows nor acts on (set in a file
 * or by flag, they are reported at start-up).
 */
export function enforcementReport(): { implemented: string[]; notImplemented: string[]; notModeled: string[] } {
  const implemented: string[] = [];
  const notImplemented: string[] = [];
  for (const [field, support] of Object.entries(FIELD_SUPPORT)) (support === 'implemented' ? implemented : notImplemented).push(field);
  const notModeled = [...UPSTREAM_V1BETA1_FIELDS].filter((f) => !MODELED_FIELDS.has(f));
  return { implemented: implemented.sort(), notImplemented: notImplemented.sort(), notModeled: notModeled.sort() };
}
