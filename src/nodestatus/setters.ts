// Node status as upstream's node status setters compute it (pkg/kubelet/nodestatus): pure
// functions from what the node knows (machine facts, runtime state, reservations, images) to
// the fields of Node.status. The kubelet's own copy of the Node is updated in place, so the
// transition times of conditions whose status did not change are kept.

import { isIP } from 'node:net';
import { parseQuantity, Quantity } from '../api/quantity.js';
import { KubeletError } from '../util/errors.js';
import { metaTime, type ContainerImage, type Node, type NodeAddress, type NodeCondition, type NodeStatus, type ResourceList } from './types.js';

/** What the machine is: cadvisor's MachineInfo and VersionInfo, as far as the node status uses them. */
export interface MachineInfo {
  numCores: number;
  memoryCapacityBytes: number;
  /** One entry per huge page size the kernel offers (/sys/kernel/mm/hugepages). */
  hugePages: { pageSizeKiB: number; numPages: number }[];
  machineID: string;
  systemUUID: string;
  bootID: string;
  kernelVersion: string;
  /** PRETTY_NAME of /etc/os-release ("Linux" when unknown, as cadvisor). */
  osImage: string;
  /** Size of the filesystem holding the kubelet root dir (statfs blocks × fragment size), when known. */
  rootfsCapacityBytes?: number;
  /** SwapTotal of /proc/meminfo in bytes (cadvisor's SwapCapacity), when read. */
  swapCapacityBytes?: number;
}

/** An image as the image manager lists it. */
export interface NodeImage {
  id: string;
  repoTags: string[];
  repoDigests: string[];
  sizeBytes: number;
}

export type EventRecorder = (type: 'Normal' | 'Warning', reason: string, message?: string) => void;

/** Upstream MaxNamesPerImageInNodeStatus. */
export const MAX_NAMES_PER_IMAGE = 5;
/** Upstream nodeStatusMaxImages default. */
export const DEFAULT_NODE_STATUS_MAX_IMAGES = 50;

/** A Node field the kubelet could not compute: logged, the other fields still set (as upstream). */
export class NodeStatusError extends KubeletError {
  constructor(field: string, detail: string, opts: { cause?: unknown } = {}) {
    super('ERR_NODE_STATUS', `node status ${field}: ${detail}`, opts);
  }
}

// ---- addresses ----

const unspecified = (ip: string) => ip === '0.0.0.0' || ip === '::';

/**
 * Addresses without a cloud provider, as upstream: `--node-ip` (the first, then a second of the
 * other family) else the hostname when it is an IP, else the first candidate found for the node
 * name (IPv4 first unless the node IP is "::"), then the Hostname address.
 */
export function nodeAddresses(o: { nodeIPs: string[]; hostname: string; candidates?: string[] }): NodeAddress[] {
  const [primary, secondary] = o.nodeIPs;
  let ip: string | undefined;
  if (primary && !unspecified(primary)) ip = primary;
  else if (isIP(o.hostname)) ip = o.hostname;
  else {
    const preferV6 = primary === '::';
    const c = o.candidates ?? [];
    ip = c.find((a) => (isIP(a) === 6) === preferV6) ?? c[0];
  }
  if (!ip) throw new NodeStatusError('addresses', `cannot find an IP address of node ${o.hostname}: set --node-ip`);
  const out: NodeAddress[] = [{ type: 'InternalIP', address: ip }];
  if (secondary) out.push({ type: 'InternalIP', address: secondary });
  out.push({ type: 'Hostname', address: o.hostname });
  return out;
}

// ---- capacity and allocatable ----

export function hugePageResourceName(pageSizeKiB: number): string {
  return `hugepages-${Quantity.fromValue(pageSizeKiB * 1024, 'BinarySI').toString()}`;
}

/** The machine's capacity (cadvisor CapacityFromMachineInfo + the container manager's ephemeral storage), pods from maxPods. */
export function machineCapacity(m: MachineInfo, maxPods: number, podsPerCore = 0, localStorageCapacityIsolation = true): ResourceList {
  const c: ResourceList = {
    cpu: Quantity.fromMilli(m.numCores * 1000).toString(),
    memory: Quantity.fromValue(m.memoryCapacityBytes, 'BinarySI').toString(),
  };
  for (const h of m.hugePages) {
    c[hugePageResourceName(h.pageSizeKiB)] = Quantity.fromValue(h.pageSizeKiB * 1024 * h.numPages, 'BinarySI').toString();
  }
  c.pods = String(podsPerCore > 0 ? Math.min(m.numCores * podsPerCore, maxPods) : maxPods);
  // upstream reports ephemeral-storage only with localStorageCapacityIsolation
  if (m.rootfsCapacityBytes !== undefined && localStorageCapacityIsolation) c['ephemeral-storage'] = Quantity.fromValue(m.rootfsCapacityBytes, 'BinarySI').toString();
  return c;
}

/** A hard eviction threshold's amount: a quantity, or a percentage of the capacity (truncated, bytes). */
function thresholdQuantity(value: string, capacity: string | undefined): Quantity {
  const pct = /^(\d+(?:\.\d+)?)%$/.exec(value.trim());
  if (!pct) return parseQuantity(value);
  const cap = capacity === undefined ? 0 : parseQuantity(capacity).value();
  return Quantity.fromValue(Math.floor(cap * (Number(pct[1]) / 100)), 'BinarySI');
}

/**
 * The node allocatable reservation (container manager GetNodeAllocatableReservation): per
 * capacity resource, the reservations (systemReserved, kubeReserved) + the hard eviction threshold of
 * memory.available (memory) and nodefs.available (ephemeral-storage).
 */
export function allocatableReservation(capacity: ResourceList, reserved: (ResourceList | undefined)[], evictionHard: Record<string, string> = {}): ResourceList {
  const eviction: Record<string, Quantity> = {};
  for (const [signal, value] of Object.entries(evictionHard)) {
    const resource = signal === 'memory.available' ? 'memory' : signal === 'nodefs.available' ? 'ephemeral-storage' : undefined;
    if (resource) eviction[resource] = thresholdQuantity(value, capacity[resource]);
  }
  const out: ResourceList = {};
  for (const k of Object.keys(capacity)) {
    let v = new Quantity(0n);
    for (const r of reserved) if (r?.[k] !== undefined) v = v.add(parseQuantity(r[k]!));
    if (eviction[k]) v = v.add(eviction[k]!);
    if (!v.isZero()) out[k] = v.toString();
  }
  return out;
}

/** Allocatable = capacity − reservation (never negative), and memory less every huge page pool. */
export function allocatable(capacity: ResourceList, reservation: ResourceList): ResourceList {
  const out: ResourceList = {};
  for (const [k, v] of Object.entries(capacity)) {
    let q = parseQuantity(v);
    if (reservation[k] !== undefined) q = q.sub(parseQuantity(reservation[k]!));
    if (q.sign() < 0) q = new Quantity(0n, q.format);
    out[k] = q.toString();
  }
  for (const [k, v] of Object.entries(capacity)) {
    if (!k.startsWith('hugepages-') || out.memory === undefined) continue;
    let mem = parseQuantity(out.memory).sub(parseQuantity(v));
    if (mem.sign() < 0) mem = new Quantity(0n, mem.format);
    out.memory = mem.toString();
  }
  return out;
}

const isExtendedResource = (k: string) => k.includes('/') && !k.startsWith('kubernetes.io/') && !k.startsWith('requests.');

/** Upstream's MachineInfo setter: capacity, allocatable, machineID, systemUUID, bootID (a Rebooted event when it changed). */
export function setMachineInfo(node: Node, m: MachineInfo | Error, o: { maxPods: number; podsPerCore?: number; localStorageCapacityIsolation?: boolean; reserved: (capacity: ResourceList) => ResourceList; recordEvent?: EventRecorder }): void {
  const status = (node.status ??= {});
  const capacity: ResourceList = { ...(status.capacity ?? {}) };
  if (m instanceof Error) {
    // As upstream: zero cpu and memory rather than no capacity at all.
    Object.assign(capacity, { cpu: '0', memory: '0', pods: String(o.maxPods) });
  } else {
    const info = (status.nodeInfo ??= {});
    info.machineID = m.machineID;
    info.systemUUID = m.systemUUID;
    Object.assign(capacity, machineCapacity(m, o.maxPods, o.podsPerCore, o.localStorageCapacityIsolation !== false));
    if (o.localStorageCapacityIsolation === false) delete capacity['ephemeral-storage'];
    if (info.bootID && info.bootID !== m.bootID) {
      o.recordEvent?.('Warning', 'Rebooted', `Node ${node.metadata.name} has been rebooted, boot id: ${m.bootID}`);
    }
    info.bootID = m.bootID;
  }
  status.capacity = capacity;
  const alloc: ResourceList = { ...(status.allocatable ?? {}) };
  for (const k of Object.keys(alloc)) if (!(k in capacity) && isExtendedResource(k)) delete alloc[k];
  status.allocatable = { ...alloc, ...allocatable(capacity, o.reserved(capacity)) };
}

// ---- node info ----

/** Go's GOARCH for node's process.arch. */
export function goArch(arch: string = process.arch): string {
  return ({ x64: 'amd64', ia32: '386', arm: 'arm', arm64: 'arm64', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64', mips: 'mips', mipsel: 'mipsle' } as Record<string, string>)[arch] ?? arch;
}

/** Go's GOOS for node's process.platform. */
export function goOS(platform: string = process.platform): string {
  return platform === 'win32' ? 'windows' : platform;
}

/** Upstream's VersionInfo and GoRuntime setters. `runtime` is the CRI Version answer (undefined when it failed). */
export function setVersionInfo(node: Node, o: { kernelVersion: string; osImage: string; runtime?: { runtimeName: string; runtimeVersion: string }; kubeletVersion: string; os?: string; arch?: string }): void {
  const info = ((node.status ??= {}).nodeInfo ??= {});
  info.kernelVersion = o.kernelVersion;
  info.osImage = o.osImage;
  // "Unknown" version when CRI Version fails, as upstream; the name is the runtime's as last known.
  info.containerRuntimeVersion = o.runtime ? `${o.runtime.runtimeName}://${o.runtime.runtimeVersion}` : `${info.containerRuntimeVersion?.split('://')[0] || 'unknown'}://Unknown`;
  info.kubeletVersion = o.kubeletVersion;
  info.operatingSystem = o.os ?? goOS();
  info.architecture = o.arch ?? goArch();
}

// ---- images and endpoints ----

/** The images with the most bytes first (ties by id), at most `max` (-1 = all), up to 5 names each (digests first). */
export function nodeImages(images: NodeImage[], max: number): ContainerImage[] | undefined {
  const sorted = [...images].sort((a, b) => b.sizeBytes - a.sizeBytes || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const kept = max > -1 && max < sorted.length ? sorted.slice(0, max) : sorted;
  if (kept.length === 0) return undefined;
  return kept.map((i) => ({ names: [...i.repoDigests, ...i.repoTags].slice(0, MAX_NAMES_PER_IMAGE), sizeBytes: i.sizeBytes }));
}

export function setDaemonEndpoints(node: Node, kubeletPort: number): void {
  (node.status ??= {}).daemonEndpoints = { kubeletEndpoint: { Port: kubeletPort } };
}

// ---- conditions ----

interface PressureText { type: string; trueReason: string; trueMessage: string; trueEvent: string; falseReason: string; falseMessage: string; falseEvent: string }

export const MEMORY_PRESSURE: PressureText = {
  type: 'MemoryPressure', trueReason: 'KubeletHasInsufficientMemory', trueMessage: 'kubelet has insufficient memory available', trueEvent: 'NodeHasInsufficientMemory',
  falseReason: 'KubeletHasSufficientMemory', falseMessage: 'kubelet has sufficient memory available', falseEvent: 'NodeHasSufficientMemory',
};
export const DISK_PRESSURE: PressureText = {
  type: 'DiskPressure', trueReason: 'KubeletHasDiskPressure', trueMessage: 'kubelet has disk pressure', trueEvent: 'NodeHasDiskPressure',
  falseReason: 'KubeletHasNoDiskPressure', falseMessage: 'kubelet has no disk pressure', falseEvent: 'NodeHasNoDiskPressure',
};
export const PID_PRESSURE: PressureText = {
  type: 'PIDPressure', trueReason: 'KubeletHasInsufficientPID', trueMessage: 'kubelet has insufficient PID available', trueEvent: 'NodeHasInsufficientPID',
  falseReason: 'KubeletHasSufficientPID', falseMessage: 'kubelet has sufficient PID available', falseEvent: 'NodeHasSufficientPID',
};

/** A pressure condition: heartbeat now; status, reason, message and transition time only when it flips. */
export function setPressureCondition(node: Node, text: PressureText, underPressure: boolean, now: number, recordEvent?: EventRecorder): void {
  const conds = ((node.status ??= {}).conditions ??= []);
  let c = conds.find((x) => x.type === text.type);
  if (!c) {
    c = { type: text.type, status: 'Unknown' };
    conds.push(c);
  }
  const t = metaTime(now);
  c.lastHeartbeatTime = t;
  const want = underPressure ? 'True' : 'False';
  if (c.status === want) return;
  Object.assign(c, underPressure
    ? { status: 'True', reason: text.trueReason, message: text.trueMessage }
    : { status: 'False', reason: text.falseReason, message: text.falseMessage });
  c.lastTransitionTime = t;
  recordEvent?.('Normal', underPressure ? text.trueEvent : text.falseEvent);
}

/** errors.NewAggregate(...).Error(): one message alone, several deduplicated in brackets. */
export function aggregateMessage(messages: string[]): string {
  const seen = [...new Set(messages)];
  return seen.length === 1 ? seen[0]! : `[${seen.join(', ')}]`;
}

const requiredCapacities = ['cpu', 'memory', 'pods', 'ephemeral-storage'];

/**
 * The Ready condition (kept last): True "KubeletReady" unless the runtime, network or a health
 * check reports errors or a required capacity is missing, then False "KubeletNotReady" with
 * their messages. A NodeReady / NodeNotReady event when it flips.
 */
export function setReadyCondition(node: Node, errors: string[], now: number, recordEvent?: EventRecorder, o: { localStorageCapacityIsolation?: boolean } = {}): void {
  const status = (node.status ??= {});
  const all = [...errors];
  const missing = requiredCapacities
    .filter((r) => r !== 'ephemeral-storage' || o.localStorageCapacityIsolation !== false)
    .filter((r) => status.capacity?.[r] === undefined);
  if (missing.length) all.push(`missing node capacity for resources: ${missing.join(', ')}`);
  const t = metaTime(now);
  const next: NodeCondition = all.length
    ? { type: 'Ready', status: 'False', lastHeartbeatTime: t, reason: 'KubeletNotReady', message: aggregateMessage(all) }
    : { type: 'Ready', status: 'True', lastHeartbeatTime: t, reason: 'KubeletReady', message: 'kubelet is posting ready status' };
  const conds = (status.conditions ??= []);
  const i = conds.findIndex((c) => c.type === 'Ready');
  if (i < 0) {
    next.lastTransitionTime = t;
    conds.push(next);
    return;
  }
  const flipped = conds[i]!.status !== next.status;
  next.lastTransitionTime = flipped ? t : conds[i]!.lastTransitionTime ?? t;
  conds[i] = orderedCondition(next);
  if (flipped) recordEvent?.('Normal', next.status === 'True' ? 'NodeReady' : 'NodeNotReady');
}

/** Field order as the API writes a NodeCondition, so stored and computed copies compare alike. */
function orderedCondition(c: NodeCondition): NodeCondition {
  return { type: c.type, status: c.status, lastHeartbeatTime: c.lastHeartbeatTime, lastTransitionTime: c.lastTransitionTime, reason: c.reason, message: c.message } as NodeCondition;
}

// ---- change detection ----

/** Semantic form of a status for comparison: quantities by value, no heartbeats, conditions by type, empty = absent. */
function comparable(status: NodeStatus | undefined): unknown {
  const s: Record<string, unknown> = structuredClone(status ?? {});
  for (const f of ['capacity', 'allocatable']) {
    const list = s[f] as ResourceList | undefined;
    if (list) s[f] = Object.fromEntries(Object.entries(list).map(([k, v]) => [k, quantityKey(v)]));
  }
  const conds = (s.conditions as NodeCondition[] | undefined)?.map((c) => ({ ...c, lastHeartbeatTime: undefined }));
  if (conds) s.conditions = conds.sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
  return prune(s);
}

function quantityKey(v: string): string {
  try {
    return String(parseQuantity(v).nanos);
  } catch {
    return v;
  }
}

/** Drops undefined, empty arrays and empty objects (Go's semantic equality treats nil and empty alike). */
function prune(v: unknown): unknown {
  if (Array.isArray(v)) return v.length ? v.map(prune) : undefined;
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) {
      const p = prune((v as Record<string, unknown>)[k]);
      if (p !== undefined) out[k] = p;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return v;
}

/** A runtime handler as the CRI Status reports it ('' is the default handler). */
export interface NodeRuntimeHandlerInfo {
  name: string;
  supportsRecursiveReadOnlyMounts: boolean;
  supportsUserNamespaces: boolean;
}

/**
 * Upstream's RuntimeHandlers setter: status.runtimeHandlers from the runtime's last ready
 * Status, each with both features set (name "" for the default handler); none reported (a
 * runtime without handlers, or none seen yet) leaves the field out. Neither gate on: unchanged.
 */
export function setRuntimeHandlers(node: Node, handlers: readonly NodeRuntimeHandlerInfo[] | undefined, gates: { recursiveReadOnlyMounts: boolean; userNamespaces: boolean } = { recursiveReadOnlyMounts: true, userNamespaces: true }): void {
  if (!gates.recursiveReadOnlyMounts && !gates.userNamespaces) return;
  const status = (node.status ??= {});
  if (!handlers || handlers.length === 0) {
    delete status.runtimeHandlers;
    return;
  }
  status.runtimeHandlers = handlers.map((h) => ({
    name: h.name,
    features: { recursiveReadOnlyMounts: h.supportsRecursiveReadOnlyMounts, userNamespaces: h.supportsUserNamespaces },
  }));
}

/** Upstream nodeStatusHasChanged: any difference but the conditions' heartbeat times. */
export function nodeStatusHasChanged(original: NodeStatus | undefined, current: NodeStatus | undefined): boolean {
  return JSON.stringify(comparable(original)) !== JSON.stringify(comparable(current));
}
