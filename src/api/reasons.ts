// The reason strings and condition types the upstream kubelet writes into pod status.
// Clients (kubectl, controllers, alerting) match on these exact strings.
import type { Pod } from './types.js';

// Container waiting reasons before the first attempt (kubelet_pods.go).
export const ContainerCreating = 'ContainerCreating';
export const PodInitializing = 'PodInitializing';

// Start failures and back-off (pkg/kubelet/container/sync_result.go).
export const CrashLoopBackOff = 'CrashLoopBackOff';
export const RunContainerError = 'RunContainerError';
export const KillContainerError = 'KillContainerError';
export const CreatePodSandboxError = 'CreatePodSandboxError';
export const ConfigPodSandboxError = 'ConfigPodSandboxError';
export const KillPodSandboxError = 'KillPodSandboxError';

// Image failures (pkg/kubelet/images/types.go).
export const ImagePullBackOff = 'ImagePullBackOff';
export const ImageInspectError = 'ImageInspectError';
export const ErrImagePull = 'ErrImagePull';
export const ErrImageNeverPull = 'ErrImageNeverPull';
export const RegistryUnavailable = 'RegistryUnavailable';
export const InvalidImageName = 'InvalidImageName';
export const SignatureValidationFailed = 'SignatureValidationFailed';

// Container creation failures (pkg/kubelet/kuberuntime/kuberuntime_container.go).
export const CreateContainerConfigError = 'CreateContainerConfigError';
export const PreCreateHookError = 'PreCreateHookError';
export const CreateContainerError = 'CreateContainerError';
export const PreStartHookError = 'PreStartHookError';
export const PostStartHookError = 'PostStartHookError';

// Terminated reasons: what containerd's CRI reports for an exited container, and the
// kubelet's own for a container that vanished (kubecontainer.ContainerReasonStatusUnknown).
export const Completed = 'Completed';
/** The reason string `Error` (named so it does not shadow the global Error). */
export const ErrorReason = 'Error';
export const OOMKilled = 'OOMKilled';
export const ContainerStatusUnknown = 'ContainerStatusUnknown';
export const ContainerStatusUnknownTerminatedMessage =
  'The container could not be located when the pod was terminated';
// Two spaces after "deleted." exactly as upstream writes it.
export const ContainerStatusUnknownDeletedMessage =
  'The container could not be located when the pod was deleted.  The container used to be Running';

// Pod-level reasons (eviction manager, active deadline handler).
export const Evicted = 'Evicted';
export const DeadlineExceeded = 'DeadlineExceeded';
export const DeadlineExceededMessage = 'Pod was active on the node longer than the specified deadline';

// Pod condition types (core/v1).
export const PodReadyToStartContainers = 'PodReadyToStartContainers';
export const PodInitialized = 'Initialized';
export const ContainersReady = 'ContainersReady';
export const PodReady = 'Ready';
export const PodScheduled = 'PodScheduled';
export const DisruptionTarget = 'DisruptionTarget';

// Condition reasons (pkg/kubelet/status/generate.go).
export const UnknownContainerStatuses = 'UnknownContainerStatuses';
export const PodCompleted = 'PodCompleted';
export const PodFailed = 'PodFailed';
export const ContainersNotReady = 'ContainersNotReady';
export const ContainersNotInitialized = 'ContainersNotInitialized';
export const ReadinessGatesNotReady = 'ReadinessGatesNotReady';

/** Every container and pod reason above under its upstream name (`Reasons.Error` is `'Error'`). */
export const Reasons = Object.freeze({
  ContainerCreating,
  PodInitializing,
  CrashLoopBackOff,
  RunContainerError,
  KillContainerError,
  CreatePodSandboxError,
  ConfigPodSandboxError,
  KillPodSandboxError,
  ImagePullBackOff,
  ImageInspectError,
  ErrImagePull,
  ErrImageNeverPull,
  RegistryUnavailable,
  InvalidImageName,
  SignatureValidationFailed,
  CreateContainerConfigError,
  PreCreateHookError,
  CreateContainerError,
  PreStartHookError,
  PostStartHookError,
  Completed,
  Error: ErrorReason,
  OOMKilled,
  ContainerStatusUnknown,
  Evicted,
  DeadlineExceeded,
} as const);

/** Conditions the kubelet owns and regenerates on every status (upstream PodConditionsByKubelet). */
export const PodConditionsByKubelet: readonly string[] = [
  PodScheduled,
  PodReady,
  PodInitialized,
  ContainersReady,
  'PodResizeInProgress',
  'PodResizePending',
  PodReadyToStartContainers,
];

export function podConditionByKubelet(type: string): boolean {
  return PodConditionsByKubelet.includes(type);
}

/** Conditions the kubelet shares with other writers (upstream PodConditionSharedByKubelet). */
export function podConditionSharedByKubelet(type: string): boolean {
  return type === DisruptionTarget;
}

/** Go's `%s` of a []string: `[a b]`. */
export function goStringList(names: readonly string[]): string {
  return `[${names.join(' ')}]`;
}

/** Go's time.Duration String() for a whole number of milliseconds: `10s`, `2m40s`, `5m0s`, `1h0m0s`. */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return '0s';
  const neg = ms < 0;
  let rest = Math.abs(ms);
  if (rest < 1000) return `${neg ? '-' : ''}${rest}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = rest / 1000;
  const sec = Number.isInteger(s) ? `${s}s` : `${s.toFixed(3).replace(/0+$/, '')}s`;
  let out = sec;
  if (h > 0) out = `${h}h${m}m${sec}`;
  else if (m > 0) out = `${m}m${sec}`;
  return neg ? `-${out}` : out;
}

/** upstream format.Pod: `name_namespace(uid)`. */
export function formatPod(pod: Pod): string {
  return `${pod.metadata.name ?? ''}_${pod.metadata.namespace ?? ''}(${pod.metadata.uid ?? ''})`;
}

/** The waiting message of a container in crash-loop back-off, as the runtime manager words it. */
export function crashLoopBackOffMessage(backoffMs: number, containerName: string, pod: Pod): string {
  return `back-off ${formatGoDuration(backoffMs)} restarting failed container=${containerName} pod=${formatPod(pod)}`;
}
