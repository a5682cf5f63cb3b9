// Node registration, node status and the node lease (not wired into the kubelet yet).

export { DEFAULT_NODE_LEASE_DURATION_SECONDS, NODE_LEASE_NAMESPACE, NodeLeaseController, type NodeLeaseOptions } from './lease.js';
export { nodeIPCandidates, readMachineInfo, type MachineInfoOptions } from './machine-info.js';
export { nodeStatusPatch } from './node-patch.js';
export { initialNode, NodeRegistration, type InitialNodeOptions, type NodeRegistrationOptions } from './registration.js';
export { RuntimeState, RUNTIME_SYNC_THRESHOLD_MS, type HealthCheck, type RuntimeConditionLike } from './runtime-state.js';
export { NodeStatusError, type EventRecorder, type MachineInfo, type NodeImage } from './setters.js';
export { NODE_STATUS_UPDATE_RETRY, NodeStatusManager, type NodeStatusManagerOptions, type NodeStatusSource } from './status-manager.js';
export type { Node, NodeCondition, NodeStatus, Taint } from './types.js';
