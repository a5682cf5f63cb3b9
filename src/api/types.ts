// The core/v1 API objects kubelet-ts reads and writes, with upstream's JSON field names.
// Only the fields kubelet-ts uses are declared; unknown fields pass through untouched.

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
}

export type ResourceList = Record<string, string | number>;

export interface ResourceRequirements {
  limits?: ResourceList;
  requests?: ResourceList;
}

export interface ObjectFieldSelector {
  apiVersion?: string;
  fieldPath: string;
}

export interface ResourceFieldSelector {
  containerName?: string;
  resource: string;
  divisor?: string | number;
}

export interface KeySelector {
  name?: string;
  key: string;
  optional?: boolean;
}

export interface EnvVarSource {
  fieldRef?: ObjectFieldSelector;
  resourceFieldRef?: ResourceFieldSelector;
  configMapKeyRef?: KeySelector;
  secretKeyRef?: KeySelector;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: EnvVarSource;
}

export interface EnvFromSource {
  prefix?: string;
  configMapRef?: { name?: string; optional?: boolean };
  secretRef?: { name?: string; optional?: boolean };
}

export interface ContainerPort {
  name?: string;
  hostPort?: number;
  containerPort: number;
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  hostIP?: string;
}

export interface VolumeMount {
  name: string;
  readOnly?: boolean;
  mountPath: string;
  subPath?: string;
  mountPropagation?: string;
}

export interface ExecAction {
  command?: string[];
}

export interface HTTPHeader {
  name: string;
  value: string;
}

export interface HTTPGetAction {
  path?: string;
  port: number | string;
  host?: string;
  scheme?: 'HTTP' | 'HTTPS';
  httpHeaders?: HTTPHeader[];
}

export interface TCPSocketAction {
  port: number | string;
  host?: string;
}

export interface GRPCAction {
  port: number;
  service?: string;
}

export interface LifecycleHandler {
  exec?: ExecAction;
  httpGet?: HTTPGetAction;
  tcpSocket?: TCPSocketAction;
  sleep?: { seconds: number };
}

export interface Lifecycle {
  postStart?: LifecycleHandler;
  preStop?: LifecycleHandler;
}

export interface Probe {
  exec?: ExecAction;
  httpGet?: HTTPGetAction;
  tcpSocket?: TCPSocketAction;
  grpc?: GRPCAction;
  initialDelaySeconds?: number;
  timeoutSeconds?: number;
  periodSeconds?: number;
  successThreshold?: number;
  failureThreshold?: number;
  terminationGracePeriodSeconds?: number;
}

export interface Capabilities {
  add?: string[];
  drop?: string[];
}

export interface SecurityContext {
  capabilities?: Capabilities;
  privileged?: boolean;
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  readOnlyRootFilesystem?: boolean;
  allowPrivilegeEscalation?: boolean;
  procMount?: string;
  seccompProfile?: { type: string; localhostProfile?: string };
  appArmorProfile?: { type: string; localhostProfile?: string };
}

export interface PodSecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  supplementalGroups?: number[];
  fsGroup?: number;
  sysctls?: { name: string; value: string }[];
  seccompProfile?: { type: string; localhostProfile?: string };
  appArmorProfile?: { type: string; localhostProfile?: string };
  supplementalGroupsPolicy?: string;
}

export type PullPolicy = 'Always' | 'IfNotPresent' | 'Never';

/** How a resize of one resource is applied: in place (NotRequired, PreferNoRestart) or by a restart. */
export interface ContainerResizePolicy {
  resourceName: string;
  restartPolicy: string;
}

export interface Container {
  name: string;
  resizePolicy?: ContainerResizePolicy[];
  image?: string;
  command?: string[];
  args?: string[];
  workingDir?: string;
  ports?: ContainerPort[];
  envFrom?: EnvFromSource[];
  env?: EnvVar[];
  resources?: ResourceRequirements;
  restartPolicy?: 'Always';
  volumeMounts?: VolumeMount[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: Lifecycle;
  terminationMessagePath?: string;
  terminationMessagePolicy?: 'File' | 'FallbackToLogsOnError';
  imagePullPolicy?: PullPolicy;
  securityContext?: SecurityContext;
  stdin?: boolean;
  stdinOnce?: boolean;
  tty?: boolean;
}

export interface Volume {
  name: string;
  hostPath?: { path: string; type?: string };
  emptyDir?: { medium?: string; sizeLimit?: string };
  configMap?: { name?: string; items?: { key: string; path: string; mode?: number }[]; defaultMode?: number; optional?: boolean };
  secret?: { secretName?: string; items?: { key: string; path: string; mode?: number }[]; defaultMode?: number; optional?: boolean };
  downwardAPI?: { items?: unknown[]; defaultMode?: number };
  projected?: { sources?: unknown[]; defaultMode?: number };
  [other: string]: unknown;
}

export interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  tolerationSeconds?: number;
}

export interface HostAlias {
  ip: string;
  hostnames?: string[];
}

export interface PodDNSConfig {
  nameservers?: string[];
  searches?: string[];
  options?: { name: string; value?: string }[];
}

export type RestartPolicy = 'Always' | 'OnFailure' | 'Never';

export interface PodSpec {
  volumes?: Volume[];
  initContainers?: Container[];
  containers: Container[];
  restartPolicy?: RestartPolicy;
  terminationGracePeriodSeconds?: number;
  activeDeadlineSeconds?: number;
  dnsPolicy?: string;
  nodeSelector?: Record<string, string>;
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  nodeName?: string;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  shareProcessNamespace?: boolean;
  securityContext?: PodSecurityContext;
  hostname?: string;
  subdomain?: string;
  tolerations?: Toleration[];
  hostAliases?: HostAlias[];
  priorityClassName?: string;
  priority?: number;
  dnsConfig?: PodDNSConfig;
  runtimeClassName?: string;
  enableServiceLinks?: boolean;
  overhead?: ResourceList;
  os?: { name: string };
  /** Added through the pods/ephemeralcontainers subresource only (kubectl debug). */
  ephemeralContainers?: EphemeralContainer[];
  [other: string]: unknown;
}

/** A debugging container added to a running pod: never restarted, no probes, ports or resources. */
export interface EphemeralContainer extends Container {
  /** Shares this container's process namespace (CRI NamespaceMode TARGET). */
  targetContainerName?: string;
}

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface PodCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  lastProbeTime?: string | null;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
  /** The pod's metadata.generation the condition was set for (1.34 PodObservedGenerationTracking). */
  observedGeneration?: number;
}

export interface ContainerStateWaiting {
  reason?: string;
  message?: string;
}

export interface ContainerStateRunning {
  startedAt?: string;
}

export interface ContainerStateTerminated {
  exitCode: number;
  signal?: number;
  reason?: string;
  message?: string;
  startedAt?: string;
  finishedAt?: string;
  containerID?: string;
}

export interface ContainerState {
  waiting?: ContainerStateWaiting;
  running?: ContainerStateRunning;
  terminated?: ContainerStateTerminated;
}

export interface ContainerStatus {
  name: string;
  state: ContainerState;
  lastState: ContainerState;
  ready: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  containerID?: string;
  started?: boolean;
  /** The resources the container runs with (in-place resize: actual, or allocated when not running). */
  resources?: ResourceRequirements;
  /** The requests the kubelet allocated to the container. */
  allocatedResources?: ResourceList;
}

export interface PodIP {
  ip: string;
}

export interface PodStatus {
  phase?: PodPhase;
  conditions?: PodCondition[];
  message?: string;
  reason?: string;
  hostIP?: string;
  hostIPs?: PodIP[];
  podIP?: string;
  podIPs?: PodIP[];
  startTime?: string;
  initContainerStatuses?: ContainerStatus[];
  containerStatuses?: ContainerStatus[];
  qosClass?: QOSClass;
  ephemeralContainerStatuses?: ContainerStatus[];
}

export type QOSClass = 'Guaranteed' | 'Burstable' | 'BestEffort';

export interface Pod {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: PodSpec;
  status?: PodStatus;
}

export interface PodList {
  apiVersion: 'v1';
  kind: 'PodList';
  metadata: { resourceVersion?: string };
  items: Pod[];
}

/** `namespace/name`, the way the kubelet names a pod in logs and errors. */
export function podFullName(pod: Pod): string {
  return `${pod.metadata.namespace ?? 'default'}/${pod.metadata.name ?? ''}`;
}
