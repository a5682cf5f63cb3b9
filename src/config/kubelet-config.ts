// The kubelet configuration's shape: upstream's KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
// field names, as kubelet-ts holds them once defaulted. The jobs around it live beside it:
// schema.ts (which fields kubelet-ts implements), defaults.ts, decode.ts (the file),
// validation.ts, flags.ts and load.ts (file + flags).

export const KUBELET_CONFIG_API_VERSION = 'kubelet.config.k8s.io/v1beta1';
export const KUBELET_CONFIG_KIND = 'KubeletConfiguration';

/** kubelet-ts's cgroup statistics backends (not an upstream field). */
export type StatsBackend = 'native' | 'fs' | 'cri';
export const STATS_BACKENDS: readonly StatsBackend[] = ['native', 'fs', 'cri'];

/** kubelet-ts's OOM event sources (not an upstream field). */
export type OomWatcherMode = 'auto' | 'ebpf' | 'cgroup' | 'kmsg' | 'off';
export const OOM_WATCHER_MODES: readonly OomWatcherMode[] = ['auto', 'ebpf', 'cgroup', 'kmsg', 'off'];

/** A core/v1 Taint as registerWithTaints holds it. */
export interface RegisterTaint {
  key: string;
  value?: string;
  effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
}

export const CONTENT_TYPE_JSON = 'application/json';
export const CONTENT_TYPE_PROTOBUF = 'application/vnd.kubernetes.protobuf';

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
  /** The serving certificate (with intermediates); '' = a self-signed one in the cert directory. */
  tlsCertFile: string;
  /** Renew the client certificate through the certificates API as it nears expiry (src/certificate). Default false. */
  rotateCertificates: boolean;
  /** Ask the certificates API for the serving certificate (signer kubernetes.io/kubelet-serving) instead of a self-signed one. Default false. */
  serverTLSBootstrap: boolean;
  /** The serving certificate's key; '' with tlsCertFile ''. */
  tlsPrivateKeyFile: string;
  /** Go cipher suite names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...); [] = the TLS library's defaults. */
  tlsCipherSuites: string[];
  /** VersionTLS10..VersionTLS13; '' = TLS 1.2 (Go's server default). */
  tlsMinVersion: string;
  /** Serve the node's log files (/var/log) at /logs/. Default true. */
  enableSystemLogHandler: boolean;
  /** Serve profiling (CPU profile, heap snapshot) at /debug/pprof/. Default true. */
  enableProfilingHandler: boolean;
  /** upstream (default true): PUT /debug/flags/v sets the log verbosity (with enableDebuggingHandlers). */
  enableDebugFlagsHandler: boolean;
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
  /** The resolver config host-DNS pods inherit; '' = none (the node's loopback resolver). Default /etc/resolv.conf. */
  resolvConf: string;
  /** How configMap and secret volumes notice changes: Get, Cache or Watch (default; served as a TTL-cached Get). */
  configMapAndSecretChangeDetectionStrategy: 'Get' | 'Cache' | 'Watch';
  /** ms. Default 4h (upstream: deprecated, no effect). */
  streamingConnectionIdleTimeout: number;
  /** ms between node status computations. Default 10s. */
  nodeStatusUpdateFrequency: number;
  /** ms between unchanged node status posts. Default 5m, or nodeStatusUpdateFrequency when that is set. */
  nodeStatusReportFrequency: number;
  /** Seconds, the node Lease duration. Default 40. */
  nodeLeaseDurationSeconds: number;
  /** Most images reported in the node status; -1 = all. Default 50. */
  nodeStatusMaxImages: number;
  /** API server requests per second (client-side limit); 0 = no limit. Default 50. */
  kubeAPIQPS: number;
  /** API server request burst. Default 100. */
  kubeAPIBurst: number;
  /** Content type of requests to the API server. Default application/vnd.kubernetes.protobuf. */
  contentType: string;
  /** ms, minimum age of an unused image before GC. Default 2m. */
  imageMinimumGCAge: number;
  /** ms an image may stay unused before GC removes it whatever the disk; 0 = no limit. Default 0. */
  imageMaximumGCAge: number;
  /** Percent 0..100. Default 85. */
  imageGCHighThresholdPercent: number;
  /** Percent 0..100. Default 80. */
  imageGCLowThresholdPercent: number;
  /** ms between volume usage computations. Default 1m. */
  volumeStatsAggPeriod: number;
  cgroupRoot: string;
  /** Default true. */
  cgroupsPerQOS: boolean;
  /** upstream (default true): emptyDir sizeLimit and ephemeral-storage limits enforced, ephemeral-storage in the node's capacity. */
  localStorageCapacityIsolation: boolean;
  /** Default cgroupfs. */
  cgroupDriver: CgroupDriver;
  /** ms, timeout of CRI calls except long-running ones. Default 2m. */
  runtimeRequestTimeout: number;
  /** Default 110. */
  maxPods: number;
  /** Pods' user namespaces: host IDs per pod (a multiple of 65536). Default 65536. */
  userNamespaces: { idsPerPod: number };
  /** Max PIDs per pod; -1 = node allocatable limit. Default -1. */
  podPidsLimit: number;
  /** Unsafe sysctls (or `prefix*` patterns) pods may set besides the safe set. Default []. */
  allowedUnsafeSysctls: string[];
  /** RuntimeDefault seccomp for containers that set no profile. Default false. */
  seccompDefault: boolean;
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
  /**
   * Wake the eviction manager from the kernel instead of waiting for its next pass: cgroup v1
   * memcg usage thresholds; cgroup v2 memory.events and a PSI trigger on the pods cgroup. Default false.
   */
  kernelMemcgNotification: boolean;
  featureGates: Record<string, boolean>;
  /** Default true. */
  failSwapOn: boolean;
  /** Quantity string. Default "10Mi". */
  containerLogMaxSize: string;
  /** Default 5. */
  containerLogMaxFiles: number;
  /** Workers rotating container logs concurrently. Default 1. */
  containerLogMaxWorkers: number;
  /** ms between checks of container log sizes. Default 10s. */
  containerLogMonitorInterval: number;
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
  /** Taints the Node is registered with (only at registration, as upstream). */
  registerWithTaints: RegisterTaint[];
  /** ms; 0 = graceful node shutdown disabled. Default 0. */
  shutdownGracePeriod: number;
  /** ms. Default 0. */
  shutdownGracePeriodCriticalPods: number;
  /** Default false. */
  protectKernelDefaults: boolean;
  /** The kubelet process's own oom_score_adj, in [-1000, 1000]. Default -999. */
  oomScoreAdj: number;
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

