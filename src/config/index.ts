// The kubelet configuration: KubeletConfiguration file + command-line flags.

export { ConfigError, type ConfigIssue } from './errors.js';
export {
  DurationError,
  formatDuration,
  formatDurationNs,
  nsToMs,
  parseDuration,
  parseDurationNs,
} from './duration.js';
export {
  checkFieldNames,
  type CgroupDriver,
  DEFAULT_CONTAINER_RUNTIME_ENDPOINT,
  DEFAULT_EVICTION_HARD,
  defaultKubeletConfig,
  EVICTION_SIGNALS,
  KUBELET_CONFIG_API_VERSION,
  KUBELET_CONFIG_KIND,
  KUBELET_TS_FIELDS,
  type KubeletAuthorizationMode,
  type KubeletConfig,
  OOM_WATCHER_MODES,
  type OomWatcherMode,
  parseKubeletConfigFile,
  type RawKubeletConfiguration,
  resolveKubeletConfig,
  resolveRelativePaths,
  STATS_BACKENDS,
  type StatsBackend,
  UPSTREAM_V1BETA1_FIELDS,
  validateKubeletConfig,
} from './kubelet-config.js';
export {
  applyFlagOverrides,
  applyLegacyDefaults,
  type KubeletFlags,
  loadConfig,
  parseKubeletFlags,
  type ParsedFlags,
  type ReadFileFn,
  usage,
} from './flags.js';
