// The eviction API (upstream: pkg/kubelet/eviction/api): signals, thresholds and the
// observations they are compared with. Byte, inode and pid amounts are bigints.

/** The signals kubelet-ts observes (upstream names). */
export type Signal =
  | 'memory.available'
  | 'allocatableMemory.available'
  | 'nodefs.available'
  | 'nodefs.inodesFree'
  | 'imagefs.available'
  | 'imagefs.inodesFree'
  | 'containerfs.available'
  | 'containerfs.inodesFree'
  | 'pid.available';

export const SIGNALS: readonly Signal[] = [
  'memory.available', 'allocatableMemory.available', 'nodefs.available', 'nodefs.inodesFree',
  'imagefs.available', 'imagefs.inodesFree', 'containerfs.available', 'containerfs.inodesFree', 'pid.available',
];

export function isSignal(s: string): s is Signal {
  return (SIGNALS as readonly string[]).includes(s);
}

/** A threshold's value: an absolute amount, or a fraction (0..1] of the signal's capacity. */
export type ThresholdValue = { quantity: bigint; text: string } | { percentage: number };

export interface Threshold {
  signal: Signal;
  /** Every threshold upstream knows is LessThan. */
  operator: 'LessThan';
  value: ThresholdValue;
  /** 0 for a hard threshold. */
  gracePeriodMs: number;
  minReclaim?: ThresholdValue;
}

/** What the node has of a signal's resource now. */
export interface SignalObservation {
  available: bigint;
  capacity: bigint;
  /** When the figure was measured (ms). */
  time: number;
}

export type SignalObservations = Map<Signal, SignalObservation>;

export type NodeConditionType = 'MemoryPressure' | 'DiskPressure' | 'PIDPressure';

/** The resource a signal starves (upstream signalToResource). */
export type StarvedResource = 'memory' | 'ephemeral-storage' | 'inodes' | 'pids';

export const SIGNAL_TO_RESOURCE: Readonly<Record<Signal, StarvedResource>> = {
  'memory.available': 'memory',
  'allocatableMemory.available': 'memory',
  'nodefs.available': 'ephemeral-storage',
  'imagefs.available': 'ephemeral-storage',
  'containerfs.available': 'ephemeral-storage',
  'nodefs.inodesFree': 'inodes',
  'imagefs.inodesFree': 'inodes',
  'containerfs.inodesFree': 'inodes',
  'pid.available': 'pids',
};

export const SIGNAL_TO_NODE_CONDITION: Readonly<Record<Signal, NodeConditionType>> = {
  'memory.available': 'MemoryPressure',
  'allocatableMemory.available': 'MemoryPressure',
  'nodefs.available': 'DiskPressure',
  'nodefs.inodesFree': 'DiskPressure',
  'imagefs.available': 'DiskPressure',
  'imagefs.inodesFree': 'DiskPressure',
  'containerfs.available': 'DiskPressure',
  'containerfs.inodesFree': 'DiskPressure',
  'pid.available': 'PIDPressure',
};

// upstream's reason and message formats (pkg/kubelet/eviction/helpers.go, eviction_manager.go)
export const EVICTION_REASON = 'Evicted';
export const nodeLowMessage = (resource: string): string => `The node was low on resource: ${resource}. `;
export const thresholdMetMessage = (quantity: string, available: string): string => `Threshold quantity: ${quantity}, available: ${available}. `;
export const containerMessage = (name: string, usage: string, request: string, resource: string): string =>
  `Container ${name} was using ${usage}, request is ${request}, has larger consumption of ${resource}. `;
export const nodeConditionMessage = (conditions: readonly string[]): string => `The node had condition: [${conditions.join(' ')}]. `;
/** The DisruptionTarget condition's reason for a pod the kubelet terminates. */
export const TERMINATION_BY_KUBELET = 'TerminationByKubelet';
/** upstream: the memory-pressure taint a BestEffort pod may tolerate to be admitted anyway. */
export const TAINT_NODE_MEMORY_PRESSURE = 'node.kubernetes.io/memory-pressure';

/** The amount a threshold value stands for against a capacity (upstream GetThresholdQuantity). */
export function thresholdQuantity(v: ThresholdValue, capacity: bigint): bigint {
  if ('quantity' in v) return v.quantity;
  // upstream: int64(float64(capacity.Value()) * float64(percentage))
  return BigInt(Math.trunc(Number(capacity) * v.percentage));
}

/** A stable key of a threshold (signal, operator, value, grace): the first-observed table's key. */
export function thresholdKey(t: Threshold): string {
  const v = 'quantity' in t.value ? `q${t.value.quantity}` : `p${t.value.percentage}`;
  return `${t.signal}|${t.operator}|${v}|${t.gracePeriodMs}`;
}
