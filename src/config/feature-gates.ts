// Feature gates: the names upstream's kubelet accepts, and the ones kubelet-ts acts on.
// As upstream's featuregate.SetFromMap, a name it does not know is an error
// ("unrecognized feature gate: Foo"); a known gate kubelet-ts does not act on is accepted
// and reported at start-up as not implemented.

import { ConfigError } from './errors.js';
import { notImplementedMessage } from './schema.js';

/** The gates kubelet-ts acts on (each is read where it applies, e.g. src/pleg). */
export const IMPLEMENTED_FEATURE_GATES: ReadonlySet<string> = new Set(['EventedPLEG', 'KubeletCgroupDriverFromCRI', 'KubeletFineGrainedAuthz', 'RotateKubeletServerCertificate', 'UserNamespacesSupport']);

/**
 * Gate names upstream's kubelet registers (pkg/features plus the component-base and
 * client-go gates every Kubernetes binary carries), from recent releases; removed gates
 * that recent releases still accept are kept.
 */
const OLDER_KNOWN_FEATURE_GATES: readonly string[] = [
  // component-base and client-go
  'AllAlpha', 'AllBeta', 'ComponentFlagz', 'ComponentSLIs', 'ComponentStatusz', 'ContextualLogging',
  'LoggingAlphaOptions', 'LoggingBetaOptions', 'ClientsAllowCBOR', 'ClientsPreferCBOR',
  'InOrderInformers', 'InformerResourceVersion', 'WatchListClient',
  // apiserver gates registered in the same gate set
  'APIServerIdentity', 'APIServerTracing', 'AnonymousAuthConfigurableEndpoints', 'AuthorizeWithSelectors',
  'StructuredAuthenticationConfiguration', 'StructuredAuthorizationConfiguration', 'WatchList',
  // pkg/features
  'AllowDNSOnlyNodeCSR', 'AllowInsecureKubeletCertificateSigningRequests',
  'AllowOverwriteTerminationGracePeriodSeconds', 'AnyVolumeDataSource', 'AppArmor', 'AppArmorFields',
  'AuthorizeNodeWithSelectors', 'CPUManager', 'CPUManagerPolicyAlphaOptions', 'CPUManagerPolicyBetaOptions',
  'CPUManagerPolicyOptions', 'CSIMigrationPortworx', 'CSIVolumeHealth', 'ClusterTrustBundle',
  'ClusterTrustBundleProjection', 'ContainerCheckpoint', 'ContainerStopSignals', 'CoordinatedLeaderElection',
  'CronJobsScheduledAnnotation', 'CrossNamespaceVolumeDataSource', 'CustomCPUCFSQuotaPeriod',
  'DRAAdminAccess', 'DRADeviceTaints', 'DRAPartitionableDevices', 'DRAPrioritizedList',
  'DRAResourceClaimDeviceStatus', 'DevicePluginCDIDevices', 'DisableAllocatorDualWrite',
  'DisableCloudProviders', 'DisableKubeletCloudCredentialProviders', 'DisableNodeKubeProxyVersion',
  'DynamicResourceAllocation', 'ElasticIndexedJob', 'EventedPLEG', 'ExecProbeTimeout',
  'GracefulNodeShutdown', 'GracefulNodeShutdownBasedOnPodPriority', 'HPAContainerMetrics', 'HPAScaleToZero',
  'HonorPVReclaimPolicy', 'ImageMaximumGCAge', 'ImageVolume', 'InPlacePodVerticalScaling',
  'InPlacePodVerticalScalingAllocatedStatus', 'InPlacePodVerticalScalingExclusiveCPUs',
  'InTreePluginPortworxUnregister', 'JobBackoffLimitPerIndex', 'JobManagedBy', 'JobPodFailurePolicy',
  'JobPodReplacementPolicy', 'JobSuccessPolicy', 'KubeProxyDrainingTerminatingNodes',
  'KubeletCgroupDriverFromCRI', 'KubeletCrashLoopBackOffMax', 'KubeletEnsureSecretPulledImages',
  'KubeletFineGrainedAuthz', 'KubeletInUserNamespace', 'KubeletPSI', 'KubeletPodResourcesDynamicResources',
  'KubeletPodResourcesGet', 'KubeletRegistrationGetOnExistsOnly', 'KubeletSeparateDiskGC',
  'KubeletServiceAccountTokenForCredentialProviders', 'KubeletTracing', 'LoadBalancerIPMode',
  'LocalStorageCapacityIsolationFSQuotaMonitoring', 'LogarithmicScaleDown', 'MatchLabelKeysInPodAffinity',
  'MatchLabelKeysInPodTopologySpread', 'MaxUnavailableStatefulSet', 'MemoryManager', 'MemoryQoS',
  'MultiCIDRServiceAllocator', 'NFTablesProxyMode', 'NodeInclusionPolicyInPodTopologySpread', 'NodeLogQuery',
  'NodeSwap', 'PDBUnhealthyPodEvictionPolicy', 'PersistentVolumeLastPhaseTransitionTime',
  'PodAndContainerStatsFromCRI', 'PodDeletionCost', 'PodDisruptionConditions', 'PodHostIPs', 'PodIndexLabel',
  'PodLevelResources', 'PodLifecycleSleepAction', 'PodObservedGenerationTracking',
  'PodReadyToStartContainersCondition', 'PodSchedulingReadiness', 'PortForwardWebsockets', 'ProcMountType',
  'QOSReserved', 'RecoverVolumeExpansionFailure', 'RecursiveReadOnlyMounts', 'RelaxedDNSSearchValidation',
  'RelaxedEnvironmentVariableValidation', 'ReloadKubeletServerCertificateFile', 'ResourceHealthStatus',
  'RotateKubeletServerCertificate', 'RuntimeClassInImageCriApi', 'SELinuxChangePolicy', 'SELinuxMount',
  'SELinuxMountReadWriteOncePod', 'SchedulerQueueingHints', 'SeparateTaintEvictionController',
  'ServiceAccountTokenJTI', 'ServiceAccountTokenNodeBinding', 'ServiceAccountTokenNodeBindingValidation',
  'ServiceAccountTokenPodNodeInfo', 'ServiceTrafficDistribution', 'SidecarContainers',
  'SizeMemoryBackedVolumes', 'StatefulSetAutoDeletePVC', 'StatefulSetStartOrdinal', 'StorageNamespaceIndex',
  'StorageVersionMigrator', 'SupplementalGroupsPolicy', 'SystemdWatchdog', 'TopologyAwareHints',
  'TopologyManagerPolicyAlphaOptions', 'TopologyManagerPolicyBetaOptions', 'TopologyManagerPolicyOptions',
  'TranslateStreamCloseWebsocketRequests', 'UnknownVersionInteroperabilityProxy',
  'UserNamespacesPodSecurityStandards', 'UserNamespacesSupport', 'VolumeAttributesClass',
  'VolumeCapacityPriority', 'WinDSR', 'WinOverlay', 'WindowsHostNetwork',
];

/**
 * The gates upstream's kubelet 1.34 lists in its --feature-gates help (the ones not yet GA, nor
 * deprecated), with their 1.34 defaults. A gate left at its default is not reported; a GA or
 * deprecated gate (no entry here) is reported whenever it is set and kubelet-ts does not act on it.
 */
export const FEATURE_GATE_DEFAULTS_1_34: Readonly<Record<string, boolean>> = {
  APIResponseCompression: true, APIServerIdentity: true, APIServingWithRoutine: false, AllAlpha: false,
  AllBeta: false, AllowParsingUserUIDFromCertAuth: true, AllowUnsafeMalformedObjectDeletion: false,
  CBORServingAndStorage: false, CPUManagerPolicyAlphaOptions: false, CPUManagerPolicyBetaOptions: true,
  CSIVolumeHealth: false, ClearingNominatedNodeNameAfterBinding: false, ClientsAllowCBOR: false,
  ClientsPreferCBOR: false, CloudControllerManagerWebhook: false, ClusterTrustBundle: false,
  ClusterTrustBundleProjection: false, ComponentFlagz: false, ComponentStatusz: false,
  ConcurrentWatchObjectDecode: false, ContainerCheckpoint: true, ContainerRestartRules: false,
  ContainerStopSignals: false, ContextualLogging: true, CoordinatedLeaderElection: false,
  CrossNamespaceVolumeDataSource: false, CustomCPUCFSQuotaPeriod: false, DRAAdminAccess: true,
  DRAConsumableCapacity: false, DRADeviceBindingConditions: false, DRADeviceTaints: false,
  DRAExtendedResource: false, DRAPartitionableDevices: false, DRAPrioritizedList: true,
  DRAResourceClaimDeviceStatus: true, DRASchedulerFilterTimeout: true, DeclarativeValidation: true,
  DeclarativeValidationTakeover: false, DeploymentReplicaSetTerminatingReplicas: false,
  DetectCacheInconsistency: true, DisableCPUQuotaWithExclusiveCPUs: true, EnvFiles: false,
  EventedPLEG: false, ExternalServiceAccountTokenSigner: true, GracefulNodeShutdown: true,
  GracefulNodeShutdownBasedOnPodPriority: true, HPAConfigurableTolerance: false, HPAScaleToZero: false,
  HostnameOverride: false, ImageMaximumGCAge: true, ImageVolume: false, InOrderInformers: true,
  InPlacePodVerticalScaling: true, InPlacePodVerticalScalingExclusiveCPUs: false,
  InPlacePodVerticalScalingExclusiveMemory: false, InTreePluginPortworxUnregister: false,
  InformerResourceVersion: false, JobManagedBy: true, KubeletCrashLoopBackOffMax: false,
  KubeletEnsureSecretPulledImages: false, KubeletFineGrainedAuthz: true, KubeletInUserNamespace: false,
  KubeletPSI: true, KubeletPodResourcesDynamicResources: true, KubeletPodResourcesGet: true,
  KubeletSeparateDiskGC: true, KubeletServiceAccountTokenForCredentialProviders: true,
  ListFromCacheSnapshot: true, LocalStorageCapacityIsolationFSQuotaMonitoring: false,
  LoggingAlphaOptions: false, LoggingBetaOptions: true, MatchLabelKeysInPodTopologySpread: true,
  MatchLabelKeysInPodTopologySpreadSelectorMerge: true, MaxUnavailableStatefulSet: false, MemoryQoS: false,
  MutableCSINodeAllocatableCount: false, MutatingAdmissionPolicy: false, NodeLogQuery: false,
  NominatedNodeNameForExpectation: false, OpenAPIEnums: true, PodAndContainerStatsFromCRI: false,
  PodCertificateRequest: false, PodDeletionCost: true, PodLevelResources: true,
  PodLogsQuerySplitStreams: false, PodObservedGenerationTracking: true,
  PodReadyToStartContainersCondition: true, PodTopologyLabelsAdmission: false, PortForwardWebsockets: true,
  PreferSameTrafficDistribution: true, PreventStaticPodAPIReferences: true, ProcMountType: true,
  QOSReserved: false, ReduceDefaultCrashLoopBackOffDecay: false, RelaxedServiceNameValidation: false,
  ReloadKubeletServerCertificateFile: true, RemoteRequestHeaderUID: true, ResourceHealthStatus: false,
  RotateKubeletServerCertificate: true, RuntimeClassInImageCriApi: false, SELinuxChangePolicy: true,
  SELinuxMount: false, SELinuxMountReadWriteOncePod: true, SchedulerAsyncAPICalls: true,
  SchedulerAsyncPreemption: true, SchedulerPopFromBackoffQ: true,
  ServiceAccountNodeAudienceRestriction: true, SizeBasedListCostEstimate: true,
  StorageCapacityScoring: false, StorageVersionAPI: false, StorageVersionHash: true,
  StorageVersionMigrator: false, StrictIPCIDRValidation: false,
  StructuredAuthenticationConfigurationEgressSelector: true, SupplementalGroupsPolicy: true,
  SystemdWatchdog: true, TokenRequestServiceAccountUIDValidation: true,
  TopologyManagerPolicyAlphaOptions: false, TopologyManagerPolicyBetaOptions: true,
  TranslateStreamCloseWebsocketRequests: true, UnauthenticatedHTTP2DOSMitigation: true,
  UnknownVersionInteroperabilityProxy: false, UserNamespacesPodSecurityStandards: false,
  UserNamespacesSupport: true, WatchCacheInitializationPostStartHook: false, WatchList: true,
  WatchListClient: false, WindowsCPUAndMemoryAffinity: false, WindowsGracefulNodeShutdown: true,
};

/** Every gate name accepted: the 1.34 help list and the GA, deprecated and 1.33 gates beside it. */
export const KNOWN_FEATURE_GATES: ReadonlySet<string> = new Set([...OLDER_KNOWN_FEATURE_GATES, ...Object.keys(FEATURE_GATE_DEFAULTS_1_34)]);

/** Upstream's message for a gate it does not know. */
export function unrecognizedFeatureGate(name: string): string {
  return `unrecognized feature gate: ${name}`;
}

/**
 * Throws ConfigError naming `field` (e.g. `featureGates[Foo]` or `--feature-gates`) for the
 * first gate upstream does not know.
 */
export function checkFeatureGateNames(gates: Readonly<Record<string, boolean>>, field: (name: string) => string, file?: string): void {
  for (const name of Object.keys(gates)) {
    if (!KNOWN_FEATURE_GATES.has(name)) throw new ConfigError(field(name), unrecognizedFeatureGate(name), file);
  }
}

/** Warnings naming each gate kubelet-ts does not act on that is set off its 1.34 default (or set at all, default unknown). */
export function featureGateWarnings(gates: Readonly<Record<string, boolean>>): string[] {
  return Object.keys(gates)
    .filter((name) => KNOWN_FEATURE_GATES.has(name) && !IMPLEMENTED_FEATURE_GATES.has(name))
    .filter((name) => !Object.hasOwn(FEATURE_GATE_DEFAULTS_1_34, name) || FEATURE_GATE_DEFAULTS_1_34[name] !== gates[name])
    .map((name) => notImplementedMessage(`feature gate ${name}`));
}
