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
  type CgroupDriver,
  CONTENT_TYPE_JSON,
  CONTENT_TYPE_PROTOBUF,
  KUBELET_CONFIG_API_VERSION,
  KUBELET_CONFIG_KIND,
  type KubeletAuthorizationMode,
  type KubeletConfig,
  OOM_WATCHER_MODES,
  type OomWatcherMode,
  type RawKubeletConfiguration,
  type RegisterTaint,
  STATS_BACKENDS,
  type StatsBackend,
} from './kubelet-config.js';
export {
  EVICTION_SIGNALS,
  FIELD_SUPPORT,
  type FieldSupport,
  FLAG_SUPPORT,
  KUBELET_TS_FIELDS,
  UPSTREAM_V1BETA1_FIELDS,
} from './schema.js';
export {
  applyLegacyDefaults,
  DEFAULT_CONTAINER_RUNTIME_ENDPOINT,
  DEFAULT_EVICTION_HARD,
  defaultKubeletConfig,
} from './defaults.js';
export {
  checkFieldNames,
  MAX_CONFIG_FILE_BYTES,
  parseKubeletConfigFile,
} from './decode.js';
export { resolveKubeletConfig, resolveRelativePaths } from './resolve.js';
export { validateKubeletConfig, validateStandaloneAuth } from './validation.js';
export { IMPLEMENTED_FEATURE_GATES, KNOWN_FEATURE_GATES } from './feature-gates.js';
export {
  applyFlagOverrides,
  type KubeletFlags,
  parseKubeletFlags,
  type ParsedFlags,
  usage,
  classifyFlag,
  flagNames,
} from './flags.js';
export { loadConfig, type ReadFileFn } from './load.js';
