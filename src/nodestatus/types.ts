// The core/v1 Node shapes node status and registration write: the fields the kubelet owns,
// with upstream's JSON names. Quantities travel as strings, times as RFC 3339 seconds.

export type ResourceList = Record<string, string>;

export interface Taint {
  key: string;
  value?: string;
  effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
  timeAdded?: string;
}

export interface NodeCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  lastHeartbeatTime?: string;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
}

export interface NodeAddress {
  type: 'InternalIP' | 'ExternalIP' | 'Hostname' | 'InternalDNS' | 'ExternalDNS';
  address: string;
}

export interface NodeSystemInfo {
  machineID: string;
  systemUUID: string;
  bootID: string;
  kernelVersion: string;
  osImage: string;
  containerRuntimeVersion: string;
  kubeletVersion: string;
  kubeProxyVersion?: string;
  operatingSystem: string;
  architecture: string;
}

export interface ContainerImage {
  names?: string[];
  sizeBytes?: number;
}

export interface NodeStatus {
  capacity?: ResourceList;
  allocatable?: ResourceList;
  conditions?: NodeCondition[];
  addresses?: NodeAddress[];
  daemonEndpoints?: { kubeletEndpoint?: { Port: number } };
  nodeInfo?: Partial<NodeSystemInfo>;
  images?: ContainerImage[];
  [k: string]: unknown;
}

export interface Node {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  spec?: { unschedulable?: boolean; taints?: Taint[]; providerID?: string; podCIDR?: string; podCIDRs?: string[]; [k: string]: unknown };
  status?: NodeStatus;
}

/** metav1.Time: RFC 3339 in whole seconds, UTC. */
export function metaTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
