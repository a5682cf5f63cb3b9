// The runtime's view of a pod, as the PLEG caches it and the status generator reads it
// (upstream: kubecontainer.PodStatus). Times are milliseconds since the epoch; the CRI's
// nanosecond timestamps are converted once, in the runtime layer.

export type ContainerRuntimeState = 'created' | 'running' | 'exited' | 'unknown';
export type SandboxRuntimeState = 'ready' | 'notready';

export interface ContainerRuntimeStatus {
  /** CRI container id (no runtime prefix). */
  id: string;
  /** `containerd://<id>`: the form the API's containerID takes. */
  containerID: string;
  name: string;
  state: ContainerRuntimeState;
  createdAt: number;
  startedAt: number;
  finishedAt: number;
  exitCode: number;
  /** The image as the spec named it (from the kubelet's annotation, else the runtime's). */
  image: string;
  /** The image reference the runtime resolved (digest form). */
  imageRef: string;
  /** Hash of the container spec it was created from (upstream's io.kubernetes.container.hash). */
  hash: string;
  /** The attempt number from the container's metadata: the restart count. */
  restartCount: number;
  reason: string;
  message: string;
  /** Grace period recorded when the container was created (for adopting terminations). */
  terminationGracePeriodSeconds?: number;
  /** preStop handler recorded when the container was created (runs even if the spec is gone). */
  preStopHandler?: import('../api/types.js').LifecycleHandler;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** What the runtime reports the container runs with (CRI ContainerStatus.resources.linux), when it does. */
  resources?: { cpuQuota: number; cpuPeriod: number; cpuShares: number; memoryLimit: number };
}

export interface SandboxRuntimeStatus {
  id: string;
  state: SandboxRuntimeState;
  createdAt: number;
  attempt: number;
  ip: string;
  additionalIps: string[];
  /** True when the sandbox shares the host's network namespace. */
  hostNetwork: boolean;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export interface RuntimePodStatus {
  uid: string;
  name: string;
  namespace: string;
  /** Pod IPs from the newest ready sandbox. */
  ips: string[];
  /** Newest first. */
  sandboxStatuses: SandboxRuntimeStatus[];
  /** Every container the runtime still holds for this pod, newest attempt first per name. */
  containerStatuses: ContainerRuntimeStatus[];
  /** When this status was read (ms since epoch). */
  timestamp: number;
}

/** Reasons the runtime layer records for a container it could not start (kept for status). */
export interface ContainerStartFailure {
  /** Stable reason string upstream uses (`ErrImagePull`, `CreateContainerConfigError`, ...). */
  reason: string;
  message: string;
}

/** What relist sees of a pod: ids and states only, from two list calls. */
export interface RuntimePod {
  uid: string;
  name: string;
  namespace: string;
  sandboxes: { id: string; state: import('./cri-types.js').PodSandboxState; createdAt: number }[];
  containers: { id: string; name: string; state: import('./cri-types.js').ContainerState; createdAt: number }[];
}

export interface PodSyncResult {
  /** Per container name: why it could not be started this time. */
  startFailures: Map<string, ContainerStartFailure>;
  /** When the pod should be synced again for a pending backoff (ms from now). */
  requeueAfterMs?: number;
  errors: string[];
}

/** What the kubelet adds to one sync of a pod: its resolver config and its containers' mounts. */
export interface PodSyncExtras {
  /** The sandbox's DNS config (upstream: the DNS configurer's GetPodDNS). */
  dns?: import('./cri-types.js').DNSConfig;
  /** For setHostnameAsFQDN. */
  clusterDomain?: string;
  /**
   * The container's volume mounts and /etc/hosts (upstream makeMounts), given its environment
   * (for subPathExpr) and the pod's IPs. A throw is the container's CreateContainerConfigError.
   */
  /** ConfigMap and Secret data for env and envFrom (read after the pod's objects were fetched). */
  getConfigMap?: import('./env.js').KeyValueSource;
  getSecret?: import('./env.js').KeyValueSource;
  containerMounts?: (container: import('../api/types.js').Container, envs: readonly { key: string; value: string }[], podIPs: string[]) => Promise<import('./cri-types.js').MountInput[]>;
}

/**
 * The container runtime as the kubelet drives it (upstream: kubecontainer.Runtime). The
 * RuntimeManager implements it over the CRI; tests hand the kubelet a double.
 */
export interface KubeletRuntime {
  /** The full runtime status of one pod. */
  getPodStatus(uid: string, name: string, namespace: string): Promise<RuntimePodStatus>;
  /** Brings the pod to what its spec asks, as far as one pass can. */
  syncPod(pod: import('../api/types.js').Pod, status: RuntimePodStatus, extras?: PodSyncExtras): Promise<PodSyncResult>;
  /** Stops every container of the pod and its sandboxes (the pod is undefined for orphans). */
  killPod(pod: import('../api/types.js').Pod | undefined, status: RuntimePodStatus, gracePeriodOverride: number | undefined): Promise<void>;
  /** Removes every container and sandbox the runtime holds for the pod. */
  removePod(status: RuntimePodStatus): Promise<void>;
  /** Removes one dead container (garbage collection of old attempts). */
  removeContainer(containerID: string): Promise<void>;
  /** Abandons in-flight work (hooks, pulls, CRI calls) for shutdown; later calls fail. */
  stop(): void;
  /** Forgets restart and image pull backoff entries quiet for twice their cap (upstream: backOff.GC in housekeeping). */
  gcBackoff(): void;
}
