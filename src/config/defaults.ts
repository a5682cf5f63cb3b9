// Defaults of the KubeletConfiguration fields: upstream's v1beta1 defaults
// (pkg/kubelet/apis/config/v1beta1/defaults.go) plus kubelet-ts's own, and upstream's
// legacy command-line defaults used when no --config file is given.

import type { KubeletConfig } from './kubelet-config.js';

/** Upstream's default hard eviction thresholds on Linux. */
export const DEFAULT_EVICTION_HARD: Readonly<Record<string, string>> = Object.freeze({
  'memory.available': '100Mi',
  'nodefs.available': '10%',
  'nodefs.inodesFree': '5%',
  'imagefs.available': '15%',
});

export const DEFAULT_CONTAINER_RUNTIME_ENDPOINT = 'unix:///run/containerd/containerd.sock';

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
    tlsCertFile: '',
    tlsPrivateKeyFile: '',
    rotateCertificates: false,
    serverTLSBootstrap: false,
    tlsCipherSuites: [],
    tlsMinVersion: '',
    enableSystemLogHandler: true,
    enableProfilingHandler: true,
    enableDebugFlagsHandler: true,
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
    resolvConf: '/etc/resolv.conf',
    configMapAndSecretChangeDetectionStrategy: 'Watch',
    streamingConnectionIdleTimeout: 4 * 60 * MINUTE,
    nodeStatusUpdateFrequency: 10 * SECOND,
    nodeStatusReportFrequency: 5 * MINUTE,
    nodeLeaseDurationSeconds: 40,
    nodeStatusMaxImages: 50,
    kubeAPIQPS: 50,
    kubeAPIBurst: 100,
    contentType: 'application/vnd.kubernetes.protobuf',
    imageMinimumGCAge: 2 * MINUTE,
    imageMaximumGCAge: 0,
    imageGCHighThresholdPercent: 85,
    imageGCLowThresholdPercent: 80,
    volumeStatsAggPeriod: MINUTE,
    cgroupRoot: '',
    cgroupsPerQOS: true,
    localStorageCapacityIsolation: true,
    cgroupDriver: 'cgroupfs',
    runtimeRequestTimeout: 2 * MINUTE,
    maxPods: 110,
    userNamespaces: { idsPerPod: 65536 },
    podPidsLimit: -1,
    allowedUnsafeSysctls: [],
    seccompDefault: false,
    serializeImagePulls: true,
    maxParallelImagePulls: null,
    evictionHard: { ...DEFAULT_EVICTION_HARD },
    evictionSoft: {},
    evictionSoftGracePeriod: {},
    evictionMinimumReclaim: {},
    evictionPressureTransitionPeriod: 5 * MINUTE,
    evictionMaxPodGracePeriod: 0,
    kernelMemcgNotification: false,
    featureGates: {},
    failSwapOn: true,
    containerLogMaxSize: '10Mi',
    containerLogMaxFiles: 5,
    containerLogMaxWorkers: 1,
    containerLogMonitorInterval: 10_000,
    containerRuntimeEndpoint: DEFAULT_CONTAINER_RUNTIME_ENDPOINT,
    imageServiceEndpoint: '',
    systemReserved: {},
    kubeReserved: {},
    systemReservedCgroup: '',
    kubeReservedCgroup: '',
    enforceNodeAllocatable: ['pods'],
    registerNode: true,
    registerWithTaints: [],
    shutdownGracePeriod: 0,
    shutdownGracePeriodCriticalPods: 0,
    protectKernelDefaults: false,
    oomScoreAdj: -999,
    podLogsDir: '/var/log/pods',
    statsBackend: 'native',
    oomWatcher: 'auto',
  };
}

/**
 * Upstream's legacy command-line defaults, used when no --config file is given:
 * anonymous authentication on, webhook authentication off, authorization AlwaysAllow,
 * read-only port 10255. (The config file's v1beta1 defaults are the secure ones.)
 */
export function applyLegacyDefaults(c: KubeletConfig): void {
  c.authentication.anonymous.enabled = true;
  c.authentication.webhook.enabled = false;
  c.authorization.mode = 'AlwaysAllow';
  c.readOnlyPort = 10255;
}
