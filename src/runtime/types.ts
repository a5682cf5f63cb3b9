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
