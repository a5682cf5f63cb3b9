// CRI runtime.v1 messages as they look in JS when src/runtime/proto/api.proto is loaded with
// @grpc/proto-loader { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true }:
// snake_case names, int64/uint64 as decimal strings, enums as value names, maps as records.
//
// Two shapes:
// - Messages the runtime returns (PodSandbox, Container, ContainerStatus, stats, ...) have every
//   field present (defaults: true); a sub-message the runtime left unset is `null`.
// - Messages only sent to the runtime (configs, filters, auth) have optional fields, and their
//   int64 fields take a number or a decimal string (protobufjs accepts both).
// Messages that travel both ways (metadata, ImageSpec, Mount, LinuxContainerResources, ...) are
// declared in the returned shape; `...Input` types are what a request accepts for them.

/** int64/uint64 as the runtime returns it: a decimal string. */
export type Int64String = string;
/** int64/uint64 in a request: a number (safe range) or a decimal string. */
export type Int64Input = number | string;
export type StringMap = Record<string, string>;

// ---- enums ----

export type Protocol = 'TCP' | 'UDP' | 'SCTP';
export type MountPropagation =
  | 'PROPAGATION_PRIVATE'
  | 'PROPAGATION_HOST_TO_CONTAINER'
  | 'PROPAGATION_BIDIRECTIONAL';
export type NamespaceMode = 'POD' | 'CONTAINER' | 'NODE' | 'TARGET';
export type PodSandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';
export type ContainerState =
  | 'CONTAINER_CREATED'
  | 'CONTAINER_RUNNING'
  | 'CONTAINER_EXITED'
  | 'CONTAINER_UNKNOWN';
export type ContainerEventType =
  | 'CONTAINER_CREATED_EVENT'
  | 'CONTAINER_STARTED_EVENT'
  | 'CONTAINER_STOPPED_EVENT'
  | 'CONTAINER_DELETED_EVENT';
/** SecurityProfile.ProfileType */
export type SecurityProfileType = 'RuntimeDefault' | 'Unconfined' | 'Localhost';

// ---- shared small messages ----

export interface Int64Value {
  value: Int64String;
}
export interface Int64ValueInput {
  value: Int64Input;
}
export interface UInt64Value {
  value: Int64String;
}

export interface KeyValue {
  key: string;
  value: string;
}

export interface PodSandboxMetadata {
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
}
export type PodSandboxMetadataInput = Pick<PodSandboxMetadata, 'name' | 'uid' | 'namespace'> & {
  attempt?: number;
};

export interface ContainerMetadata {
  name: string;
  attempt: number;
}
export type ContainerMetadataInput = Pick<ContainerMetadata, 'name'> & { attempt?: number };

export interface ImageSpec {
  image: string;
  annotations: StringMap;
}
export interface ImageSpecInput {
  image: string;
  annotations?: StringMap;
}

export interface Mount {
  container_path: string;
  host_path: string;
  readonly: boolean;
  selinux_relabel: boolean;
  propagation: MountPropagation;
}
export type MountInput = Pick<Mount, 'container_path' | 'host_path'> &
  Partial<Omit<Mount, 'container_path' | 'host_path'>>;

export interface IDMapping {
  host_id: number;
  container_id: number;
  length: number;
}

export interface UserNamespace {
  mode: NamespaceMode;
  uids: IDMapping[];
  gids: IDMapping[];
}
export interface UserNamespaceInput {
  mode?: NamespaceMode;
  uids?: IDMapping[];
  gids?: IDMapping[];
}

export interface NamespaceOption {
  network: NamespaceMode;
  pid: NamespaceMode;
  ipc: NamespaceMode;
  target_id: string;
  userns_options: UserNamespace | null;
}
export interface NamespaceOptionInput {
  network?: NamespaceMode;
  pid?: NamespaceMode;
  ipc?: NamespaceMode;
  target_id?: string;
  userns_options?: UserNamespaceInput | null;
}

export interface HugepageLimit {
  page_size: string;
  limit: Int64String;
}
export interface HugepageLimitInput {
  page_size: string;
  limit: Int64Input;
}

export interface LinuxContainerResources {
  cpu_period: Int64String;
  cpu_quota: Int64String;
  cpu_shares: Int64String;
  memory_limit_in_bytes: Int64String;
  oom_score_adj: Int64String;
  cpuset_cpus: string;
  cpuset_mems: string;
  hugepage_limits: HugepageLimit[];
  unified: StringMap;
  memory_swap_limit_in_bytes: Int64String;
}
export interface LinuxContainerResourcesInput {
  cpu_period?: Int64Input;
  cpu_quota?: Int64Input;
  cpu_shares?: Int64Input;
  memory_limit_in_bytes?: Int64Input;
  oom_score_adj?: Int64Input;
  cpuset_cpus?: string;
  cpuset_mems?: string;
  hugepage_limits?: HugepageLimitInput[];
  unified?: StringMap;
  memory_swap_limit_in_bytes?: Int64Input;
}

export interface ContainerResources {
  linux: LinuxContainerResources | null;
}

// ---- sandbox config (sent only) ----

export interface DNSConfig {
  servers?: string[];
  searches?: string[];
  options?: string[];
}

export interface PortMapping {
  protocol?: Protocol;
  container_port?: number;
  host_port?: number;
  host_ip?: string;
}

export interface SELinuxOption {
  user?: string;
  role?: string;
  type?: string;
  level?: string;
}

export interface SecurityProfile {
  profile_type?: SecurityProfileType;
  localhost_ref?: string;
}

export interface LinuxSandboxSecurityContext {
  namespace_options?: NamespaceOptionInput | null;
  selinux_options?: SELinuxOption | null;
  run_as_user?: Int64ValueInput | null;
  run_as_group?: Int64ValueInput | null;
  readonly_rootfs?: boolean;
  supplemental_groups?: Int64Input[];
  privileged?: boolean;
  seccomp?: SecurityProfile | null;
  apparmor?: SecurityProfile | null;
  seccomp_profile_path?: string;
}

export interface LinuxPodSandboxConfig {
  cgroup_parent?: string;
  security_context?: LinuxSandboxSecurityContext | null;
  sysctls?: StringMap;
  overhead?: LinuxContainerResourcesInput | null;
  resources?: LinuxContainerResourcesInput | null;
}

export interface PodSandboxConfig {
  metadata: PodSandboxMetadataInput;
  hostname?: string;
  log_directory?: string;
  dns_config?: DNSConfig | null;
  port_mappings?: PortMapping[];
  labels?: StringMap;
  annotations?: StringMap;
  linux?: LinuxPodSandboxConfig | null;
}

// ---- container config (sent only) ----

export interface Capability {
  add_capabilities?: string[];
  drop_capabilities?: string[];
  add_ambient_capabilities?: string[];
}

export interface LinuxContainerSecurityContext {
  capabilities?: Capability | null;
  privileged?: boolean;
  namespace_options?: NamespaceOptionInput | null;
  selinux_options?: SELinuxOption | null;
  run_as_user?: Int64ValueInput | null;
  run_as_group?: Int64ValueInput | null;
  run_as_username?: string;
  readonly_rootfs?: boolean;
  supplemental_groups?: Int64Input[];
  no_new_privs?: boolean;
  masked_paths?: string[];
  readonly_paths?: string[];
  seccomp?: SecurityProfile | null;
  apparmor?: SecurityProfile | null;
  apparmor_profile?: string;
  seccomp_profile_path?: string;
}

export interface LinuxContainerConfig {
  resources?: LinuxContainerResourcesInput | null;
  security_context?: LinuxContainerSecurityContext | null;
}

export interface Device {
  container_path: string;
  host_path: string;
  permissions?: string;
}

export interface ContainerConfig {
  metadata: ContainerMetadataInput;
  image: ImageSpecInput;
  command?: string[];
  args?: string[];
  working_dir?: string;
  envs?: KeyValue[];
  mounts?: MountInput[];
  devices?: Device[];
  labels?: StringMap;
  annotations?: StringMap;
  log_path?: string;
  stdin?: boolean;
  stdin_once?: boolean;
  tty?: boolean;
  linux?: LinuxContainerConfig | null;
}

// ---- filters (sent only) ----

export interface PodSandboxStateValue {
  state: PodSandboxState;
}
export interface ContainerStateValue {
  state: ContainerState;
}

export interface PodSandboxFilter {
  id?: string;
  state?: PodSandboxStateValue | null;
  label_selector?: StringMap;
}

export interface ContainerFilter {
  id?: string;
  state?: ContainerStateValue | null;
  pod_sandbox_id?: string;
  label_selector?: StringMap;
}

export interface PodSandboxStatsFilter {
  id?: string;
  label_selector?: StringMap;
}

export interface ContainerStatsFilter {
  id?: string;
  pod_sandbox_id?: string;
  label_selector?: StringMap;
}

export interface ImageFilter {
  image?: ImageSpecInput | null;
}

export interface AuthConfig {
  username?: string;
  password?: string;
  auth?: string;
  server_address?: string;
  identity_token?: string;
  registry_token?: string;
}

export interface NetworkConfig {
  pod_cidr?: string;
}
export interface RuntimeConfig {
  network_config?: NetworkConfig | null;
}

// ---- returned: sandboxes ----

export interface PodSandbox {
  id: string;
  metadata: PodSandboxMetadata | null;
  state: PodSandboxState;
  /** Nanoseconds since the epoch. */
  created_at: Int64String;
  labels: StringMap;
  annotations: StringMap;
  runtime_handler: string;
}

export interface PodIP {
  ip: string;
}

export interface PodSandboxNetworkStatus {
  ip: string;
  additional_ips: PodIP[];
}

export interface Namespace {
  options: NamespaceOption | null;
}

export interface LinuxPodSandboxStatus {
  namespaces: Namespace | null;
}

export interface PodSandboxStatus {
  id: string;
  metadata: PodSandboxMetadata | null;
  state: PodSandboxState;
  /** Nanoseconds since the epoch. */
  created_at: Int64String;
  network: PodSandboxNetworkStatus | null;
  linux: LinuxPodSandboxStatus | null;
  labels: StringMap;
  annotations: StringMap;
  runtime_handler: string;
}

// ---- returned: containers ----

export interface Container {
  id: string;
  pod_sandbox_id: string;
  metadata: ContainerMetadata | null;
  image: ImageSpec | null;
  image_ref: string;
  state: ContainerState;
  /** Nanoseconds since the epoch. */
  created_at: Int64String;
  labels: StringMap;
  annotations: StringMap;
}

export interface ContainerStatus {
  id: string;
  metadata: ContainerMetadata | null;
  state: ContainerState;
  /** Nanoseconds since the epoch; '0' when not reached. */
  created_at: Int64String;
  started_at: Int64String;
  finished_at: Int64String;
  exit_code: number;
  image: ImageSpec | null;
  image_ref: string;
  reason: string;
  message: string;
  labels: StringMap;
  annotations: StringMap;
  mounts: Mount[];
  log_path: string;
  resources: ContainerResources | null;
}

// ---- returned: images ----

export interface Image {
  id: string;
  repo_tags: string[];
  repo_digests: string[];
  size: Int64String;
  uid: Int64Value | null;
  username: string;
  spec: ImageSpec | null;
  pinned: boolean;
}

export interface FilesystemIdentifier {
  mountpoint: string;
}

export interface FilesystemUsage {
  timestamp: Int64String;
  fs_id: FilesystemIdentifier | null;
  used_bytes: UInt64Value | null;
  inodes_used: UInt64Value | null;
}

// ---- returned: runtime status ----

export interface RuntimeCondition {
  /** 'RuntimeReady' | 'NetworkReady' (upstream constants). */
  type: string;
  status: boolean;
  reason: string;
  message: string;
}

export interface RuntimeStatus {
  conditions: RuntimeCondition[];
}

// ---- returned: stats ----

export interface ContainerAttributes {
  id: string;
  metadata: ContainerMetadata | null;
  labels: StringMap;
  annotations: StringMap;
}

export interface CpuUsage {
  timestamp: Int64String;
  usage_core_nano_seconds: UInt64Value | null;
  usage_nano_cores: UInt64Value | null;
}

export interface MemoryUsage {
  timestamp: Int64String;
  working_set_bytes: UInt64Value | null;
  available_bytes: UInt64Value | null;
  usage_bytes: UInt64Value | null;
  rss_bytes: UInt64Value | null;
  page_faults: UInt64Value | null;
  major_page_faults: UInt64Value | null;
}

export interface ContainerStats {
  attributes: ContainerAttributes | null;
  cpu: CpuUsage | null;
  memory: MemoryUsage | null;
  writable_layer: FilesystemUsage | null;
}

export interface PodSandboxAttributes {
  id: string;
  metadata: PodSandboxMetadata | null;
  labels: StringMap;
  annotations: StringMap;
}

export interface NetworkInterfaceUsage {
  name: string;
  rx_bytes: UInt64Value | null;
  rx_errors: UInt64Value | null;
  tx_bytes: UInt64Value | null;
  tx_errors: UInt64Value | null;
}

export interface NetworkUsage {
  timestamp: Int64String;
  default_interface: NetworkInterfaceUsage | null;
  interfaces: NetworkInterfaceUsage[];
}

export interface ProcessUsage {
  timestamp: Int64String;
  process_count: UInt64Value | null;
}

export interface LinuxPodSandboxStats {
  cpu: CpuUsage | null;
  memory: MemoryUsage | null;
  network: NetworkUsage | null;
  process: ProcessUsage | null;
  containers: ContainerStats[];
}

export interface PodSandboxStats {
  attributes: PodSandboxAttributes | null;
  linux: LinuxPodSandboxStats | null;
}

// ---- returned: events ----

/**
 * One GetContainerEvents message. The containerd on these machines (CRI as of cri-api 0.25)
 * carries the sandbox's metadata in field 4; newer cri-api replaced it with the sandbox status
 * and added the containers' statuses (fields 4 and 5), which that containerd never sends, so an
 * evented PLEG must read the statuses itself.
 */
export interface ContainerEventResponse {
  container_id: string;
  container_event_type: ContainerEventType;
  /** Nanoseconds since the epoch. */
  created_at: Int64String;
  pod_sandbox_metadata: PodSandboxMetadata | null;
}

// ---- responses ----

export interface VersionResponse {
  version: string;
  runtime_name: string;
  runtime_version: string;
  runtime_api_version: string;
}

export interface RunPodSandboxResponse {
  pod_sandbox_id: string;
}

export interface PodSandboxStatusResponse {
  status: PodSandboxStatus | null;
  /** Filled only for verbose requests: runtime-specific JSON strings. */
  info: StringMap;
}

export interface ListPodSandboxResponse {
  items: PodSandbox[];
}

export interface CreateContainerResponse {
  container_id: string;
}

export interface ListContainersResponse {
  containers: Container[];
}

export interface ContainerStatusResponse {
  status: ContainerStatus | null;
  info: StringMap;
}

export interface ExecSyncResponse {
  stdout: Buffer;
  stderr: Buffer;
  exit_code: number;
}

export interface StatusResponse {
  status: RuntimeStatus | null;
  info: StringMap;
  /** Newer runtimes only (field 3), decoded by hand: see runtime-handlers.ts. */
  runtime_handlers?: RuntimeHandler[];
  /** Newer runtimes only (field 4). */
  features?: RuntimeFeatures | null;
}

export interface RuntimeHandlerFeatures {
  recursive_read_only_mounts: boolean;
  user_namespaces: boolean;
}

/** A runtime handler the runtime offers ('' is the default one), with what it supports. */
export interface RuntimeHandler {
  name: string;
  features: RuntimeHandlerFeatures | null;
}

export interface RuntimeFeatures {
  supplemental_groups_policy: boolean;
}

export interface ContainerStatsResponse {
  stats: ContainerStats | null;
}

export interface ListContainerStatsResponse {
  stats: ContainerStats[];
}

export interface PodSandboxStatsResponse {
  stats: PodSandboxStats | null;
}

export interface ListPodSandboxStatsResponse {
  stats: PodSandboxStats[];
}

export interface ListImagesResponse {
  images: Image[];
}

export interface ImageStatusResponse {
  /** null when the image is not present (not an error, as upstream). */
  image: Image | null;
  info: StringMap;
}

export interface PullImageResponse {
  image_ref: string;
}

export interface ImageFsInfoResponse {
  image_filesystems: FilesystemUsage[];
}

// ---- requests whose shape callers may build themselves ----

export interface UpdateContainerResourcesRequest {
  container_id: string;
  linux?: LinuxContainerResourcesInput | null;
  annotations?: StringMap;
}

/** Condition types a runtime reports in StatusResponse (upstream constants). */
export const RuntimeReady = 'RuntimeReady';
export const NetworkReady = 'NetworkReady';

/** ExecRequest (streaming exec through the runtime's streaming server). */
export interface ExecRequest {
  container_id: string;
  cmd: string[];
  tty: boolean;
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
}

export interface AttachRequest {
  container_id: string;
  stdin: boolean;
  tty: boolean;
  stdout: boolean;
  stderr: boolean;
}

export interface PortForwardRequest {
  pod_sandbox_id: string;
  port: number[];
}
