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
export const KNOWN_FEATURE_GATES: ReadonlySet<string> = new Set([
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
]);

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

/** Warnings naming each gate that is set and that kubelet-ts does not act on. */
export function featureGateWarnings(gates: Readonly<Record<string, boolean>>): string[] {
  return Object.keys(gates)
    .filter((name) => KNOWN_FEATURE_GATES.has(name) && !IMPLEMENTED_FEATURE_GATES.has(name))
    .map((name) => notImplementedMessage(`feature gate ${name}`));
}
