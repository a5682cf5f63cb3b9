// Linux cgroup math for containers and pods, as the upstream kubelet does it: CPU shares from
// requests, CFS quota from limits, the memory limit, oom_score_adj per QoS class
// (pkg/kubelet/cm/helper_linux.go, kuberuntime/kuberuntime_container_linux.go,
// pkg/kubelet/qos/policy.go) and the pod-level cgroup's resources (cm.ResourceConfigForPod).

import type { Container, Pod, ResourceList, ResourceRequirements } from '../api/types.js';
import { parseQuantity, type Quantity } from '../api/quantity.js';
import { getPodQOS } from '../api/qos.js';
import type { HugepageLimitInput, Int64Input, LinuxContainerResourcesInput } from './cri-types.js';

// Taken by upstream from lmctfy; the kernel's own minimum and maximum for cpu.shares.
export const MIN_SHARES = 2;
export const MAX_SHARES = 262144;
export const SHARES_PER_CPU = 1024;
export const MILLI_CPU_TO_CPU = 1000;
/** Default CFS period: 100 ms, in microseconds. */
export const QUOTA_PERIOD_US = 100000;
/** The kernel refuses a quota under 1 ms. */
export const MIN_QUOTA_PERIOD_US = 1000;

export const POD_INFRA_OOM_ADJ = -998;
export const KUBELET_OOM_SCORE_ADJ = -999;
export const GUARANTEED_OOM_SCORE_ADJ = -997;
export const BESTEFFORT_OOM_SCORE_ADJ = 1000;

/** System-critical priority floor (scheduling.SystemCriticalPriority). */
export const SYSTEM_CRITICAL_PRIORITY = 2000000000;
const CONFIG_SOURCE_ANNOTATION = 'kubernetes.io/config.source';
const CONFIG_MIRROR_ANNOTATION = 'kubernetes.io/config.mirror';

function toBig(v: number | bigint): bigint {
  return typeof v === 'bigint' ? v : BigInt(Math.trunc(v));
}

/** int64 for a CRI request: a number when exact, else its decimal string. */
function int64(v: bigint): Int64Input {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
}

/** CPU shares for a request in millicores: 2 for none, 1024 per core, clamped to [2, 262144]. */
export function milliCPUToShares(milliCPU: number | bigint): number {
  const m = toBig(milliCPU);
  if (m === 0n) return MIN_SHARES;
  // multiply first: (m / 1000) * 1024 would lose the fraction
  const shares = (m * BigInt(SHARES_PER_CPU)) / BigInt(MILLI_CPU_TO_CPU);
  if (shares < BigInt(MIN_SHARES)) return MIN_SHARES;
  if (shares > BigInt(MAX_SHARES)) return MAX_SHARES;
  return Number(shares);
}

/** CFS quota (µs per period) for a limit in millicores: 0 for none, at least 1000. */
export function milliCPUToQuota(milliCPU: number | bigint, periodUs: number = QUOTA_PERIOD_US): number {
  const m = toBig(milliCPU);
  if (m === 0n) return 0;
  const quota = (m * toBig(periodUs)) / BigInt(MILLI_CPU_TO_CPU);
  return quota < BigInt(MIN_QUOTA_PERIOD_US) ? MIN_QUOTA_PERIOD_US : Number(quota);
}

/** cgroup v2 cpu.weight for v1 shares, the conversion runc and the kubelet use. */
export function cpuSharesToCpuWeight(shares: number): number {
  if (shares === 0) return 0;
  return 1 + Math.floor(((shares - 2) * 9999) / 262142);
}

// ---- quantities ----

function quantity(q: string | number | undefined): Quantity | undefined {
  if (q === undefined || q === '') return undefined;
  try {
    return parseQuantity(q);
  } catch {
    // validation rejects such a pod upstream; read it as unset rather than fail the sync
    return undefined;
  }
}

function milli(list: ResourceList | undefined, name: string): bigint {
  return quantity(list?.[name])?.milliValueBig() ?? 0n;
}

function value(list: ResourceList | undefined, name: string): bigint {
  return quantity(list?.[name])?.valueBig() ?? 0n;
}

// ---- pod classification (pkg/kubelet/types) ----

/** A pod from a file or URL, not from the API server. */
export function isStaticPod(pod: Pod): boolean {
  const source = pod.metadata.annotations?.[CONFIG_SOURCE_ANNOTATION];
  return source !== undefined && source !== 'api';
}

export function isMirrorPod(pod: Pod): boolean {
  return pod.metadata.annotations?.[CONFIG_MIRROR_ANNOTATION] !== undefined;
}

export function isCriticalPod(pod: Pod): boolean {
  if (isStaticPod(pod) || isMirrorPod(pod)) return true;
  return typeof pod.spec.priority === 'number' && pod.spec.priority >= SYSTEM_CRITICAL_PRIORITY;
}

export function isNodeCriticalPod(pod: Pod): boolean {
  return isCriticalPod(pod) && pod.spec.priorityClassName === 'system-node-critical';
}

function isRestartableInitContainer(pod: Pod, container: Container): boolean {
  return container.restartPolicy === 'Always' && (pod.spec.initContainers ?? []).some((c) => c.name === container.name);
}

// ---- oom_score_adj ----

/**
 * The container's oom_score_adj: -997 for Guaranteed (and node-critical) pods, 1000 for
 * BestEffort, and for Burstable 1000 - 1000*memoryRequest/memoryCapacity clamped to [3, 999],
 * so a Burstable container always ranks between the two. A sidecar (restartable init
 * container) never ranks above the pod's smallest regular container.
 */
export function getContainerOOMScoreAdjust(pod: Pod, container: Container, memoryCapacityBytes: number): number {
  if (isNodeCriticalPod(pod)) return GUARANTEED_OOM_SCORE_ADJ;
  const qos = getPodQOS(pod);
  if (qos === 'Guaranteed') return GUARANTEED_OOM_SCORE_ADJ;
  if (qos === 'BestEffort') return BESTEFFORT_OOM_SCORE_ADJ;

  const capacity = toBig(memoryCapacityBytes);
  // unknown capacity (upstream would divide by zero): read the request as a negligible share
  const adjustFor = (request: bigint): bigint => (capacity > 0n ? 1000n - (1000n * request) / capacity : 1000n);
  let adj = adjustFor(value(container.resources?.requests, 'memory'));
  if (isRestartableInitContainer(pod, container) && pod.spec.containers.length > 0) {
    let min = value(pod.spec.containers[0]!.resources?.requests, 'memory');
    for (const c of pod.spec.containers.slice(1)) {
      const v = value(c.resources?.requests, 'memory');
      if (v < min) min = v;
    }
    const minAdj = adjustFor(min);
    if (adj > minAdj) adj = minAdj;
  }
  const floor = BigInt(1000 + GUARANTEED_OOM_SCORE_ADJ);
  if (adj < floor) return Number(floor);
  if (adj === BigInt(BESTEFFORT_OOM_SCORE_ADJ)) return BESTEFFORT_OOM_SCORE_ADJ - 1;
  return Number(adj);
}

// ---- container resources ----

export interface LinuxResourceOptions {
  /** Enforce CPU limits with CFS quota (KubeletConfiguration cpuCFSQuota, default true). */
  cpuCFSQuota?: boolean;
  /** CFS period in µs (cpuCFSQuotaPeriod; honoured upstream only with the CustomCPUCFSQuotaPeriod gate). */
  cpuCFSQuotaPeriodUs?: number;
  /** Node is on the cgroup v2 unified hierarchy: ask for memory.oom.group=1. */
  cgroupV2Unified?: boolean;
}

/**
 * The LinuxContainerResources for a cpu request/limit and memory limit (upstream
 * calculateLinuxResources): shares from the request (the limit when no request is given),
 * quota from the limit, memory limit when set.
 */
export function calculateLinuxResources(
  cpuRequest: Quantity | undefined,
  cpuLimit: Quantity | undefined,
  memoryLimit: Quantity | undefined,
  opts: LinuxResourceOptions = {},
): LinuxContainerResourcesInput {
  const res: LinuxContainerResourcesInput = {};
  const limitMilli = cpuLimit?.milliValueBig() ?? 0n;
  // the API server defaults the request to the limit; pods created before that still need it
  const shares = cpuRequest === undefined ? milliCPUToShares(limitMilli) : milliCPUToShares(cpuRequest.milliValueBig());
  if (opts.cpuCFSQuota !== false) {
    const period = opts.cpuCFSQuotaPeriodUs ?? QUOTA_PERIOD_US;
    res.cpu_period = period;
    res.cpu_quota = milliCPUToQuota(limitMilli, period);
  }
  res.cpu_shares = shares;
  const mem = memoryLimit?.valueBig() ?? 0n;
  if (mem !== 0n) res.memory_limit_in_bytes = int64(mem);
  if (opts.cgroupV2Unified) {
    // kill the whole container on OOM, not one process in it
    res.unified = { 'memory.oom.group': '1' };
  }
  return res;
}

export interface ContainerResourceOptions extends LinuxResourceOptions {
  /** Node memory capacity in bytes, for the Burstable oom_score_adj. */
  memoryCapacityBytes: number;
  /** Huge page sizes the node supports ('2MB', '1GB'): each gets a limit, 0 unless requested. */
  hugePageSizes?: string[];
  /** A swap controller exists (v1 memory.memsw.*, v2 memory.swap.max): the container gets no swap. */
  swapControllerAvailable?: boolean;
}

/** The LinuxContainerResources upstream sends for a container (generateLinuxContainerConfig). */
export function generateLinuxContainerResources(
  pod: Pod,
  container: Container,
  opts: ContainerResourceOptions,
): LinuxContainerResourcesInput {
  const requests = container.resources?.requests;
  const limits = container.resources?.limits;
  // a request key that is present counts, even if zero; an absent one falls back to the limit
  const cpuRequest = requests && requests.cpu !== undefined ? quantity(requests.cpu) ?? parseQuantity(0) : undefined;
  const res = calculateLinuxResources(cpuRequest, quantity(limits?.cpu), quantity(limits?.memory), opts);
  res.oom_score_adj = getContainerOOMScoreAdjust(pod, container, opts.memoryCapacityBytes);
  const huge = getHugepageLimitsFromResources(container.resources ?? {}, opts.hugePageSizes ?? []);
  if (huge.length > 0) res.hugepage_limits = huge;
  if (opts.swapControllerAvailable) {
    // upstream's NoSwap: swap limit equal to the memory limit on v1, memory.swap.max=0 on v2
    if (opts.cgroupV2Unified) res.unified = { ...(res.unified ?? {}), 'memory.swap.max': '0' };
    else if (res.memory_limit_in_bytes !== undefined) res.memory_swap_limit_in_bytes = res.memory_limit_in_bytes;
  }
  return res;
}

const HUGE_SIZE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
const HUGEPAGES_PREFIX = 'hugepages-';

/** '2MB' for 2097152 (upstream HugePageUnitSizeFromByteSize); undefined when not expressible. */
export function hugePageUnitSizeFromByteSize(size: bigint): string | undefined {
  let idx = 0;
  let s = size;
  while (s % 1024n === 0n && s !== 0n && idx < HUGE_SIZE_UNITS.length - 1) {
    s /= 1024n;
    idx++;
  }
  if (s > 1024n && idx < HUGE_SIZE_UNITS.length - 1) return undefined;
  return `${s}${HUGE_SIZE_UNITS[idx]}`;
}

/** Page size in bytes of a `hugepages-<size>` resource name. */
function hugePageSizeBytes(resourceName: string): bigint | undefined {
  if (!resourceName.startsWith(HUGEPAGES_PREFIX)) return undefined;
  const q = quantity(resourceName.slice(HUGEPAGES_PREFIX.length));
  const v = q?.valueBig();
  return v !== undefined && v > 0n ? v : undefined;
}

/**
 * A limit per node huge page size: the container's hugepages-<size> limit, else its request,
 * else 0 (upstream GetHugepageLimitsFromResources).
 */
export function getHugepageLimitsFromResources(resources: ResourceRequirements, hugePageSizes: readonly string[]): HugepageLimitInput[] {
  const required = new Map<string, bigint>();
  const collect = (list: ResourceList | undefined): void => {
    for (const [name, amount] of Object.entries(list ?? {})) {
      const size = hugePageSizeBytes(name);
      if (size === undefined) continue;
      const unit = hugePageUnitSizeFromByteSize(size);
      if (unit === undefined || required.has(unit)) continue;
      required.set(unit, quantity(amount)?.valueBig() ?? 0n);
    }
  };
  collect(resources.limits);
  collect(resources.requests);
  return hugePageSizes.map((pageSize) => ({ page_size: pageSize, limit: int64(required.get(pageSize) ?? 0n) }));
}

// ---- pod totals (k8s.io/component-helpers resource.PodRequests / PodLimits) ----

/** Amounts per resource name, in milli-units (exact for what the kubelet enforces). */
export type ResourceTotals = Map<string, bigint>;

function addList(into: ResourceTotals, list: ResourceList | undefined): void {
  for (const name of Object.keys(list ?? {})) into.set(name, (into.get(name) ?? 0n) + milli(list, name));
}

function maxInto(into: ResourceTotals, other: ResourceTotals): void {
  for (const [name, v] of other) {
    const cur = into.get(name);
    if (cur === undefined || v > cur) into.set(name, v);
  }
}

type ResourcesOf = 'requests' | 'limits';

function podTotals(pod: Pod, which: ResourcesOf): ResourceTotals {
  const total: ResourceTotals = new Map();
  for (const c of pod.spec.containers ?? []) addList(total, c.resources?.[which]);
  // init containers run one at a time, sidecars (restartPolicy Always) keep running beside them
  const sidecars: ResourceTotals = new Map();
  const initMax: ResourceTotals = new Map();
  for (const c of pod.spec.initContainers ?? []) {
    const list = c.resources?.[which];
    let effective: ResourceTotals;
    if (c.restartPolicy === 'Always') {
      addList(total, list);
      addList(sidecars, list);
      effective = new Map(sidecars);
    } else {
      effective = new Map(sidecars);
      addList(effective, list);
    }
    maxInto(initMax, effective);
  }
  maxInto(total, initMax);
  return total;
}

/** Sum of the pod's requests, init containers taken at their peak; overhead added unless excluded. */
export function podRequests(pod: Pod, opts: { excludeOverhead?: boolean } = {}): ResourceTotals {
  const reqs = podTotals(pod, 'requests');
  if (!opts.excludeOverhead && pod.spec.overhead) addList(reqs, pod.spec.overhead);
  return reqs;
}

/** Sum of the pod's limits likewise; overhead is added only to resources that have a limit. */
export function podLimits(pod: Pod, opts: { excludeOverhead?: boolean } = {}): ResourceTotals {
  const limits = podTotals(pod, 'limits');
  if (!opts.excludeOverhead && pod.spec.overhead) {
    for (const name of Object.keys(pod.spec.overhead)) {
      const cur = limits.get(name);
      if (cur !== undefined) limits.set(name, cur + milli(pod.spec.overhead, name));
    }
  }
  return limits;
}

/** True when every container (init ones at their effective amount) sets a non-zero limit. */
function limitsDeclared(pod: Pod, name: string): boolean {
  for (const c of pod.spec.containers ?? []) if (milli(c.resources?.limits, name) === 0n) return false;
  const sidecars: ResourceTotals = new Map();
  for (const c of pod.spec.initContainers ?? []) {
    let amount: bigint;
    if (c.restartPolicy === 'Always') {
      addList(sidecars, c.resources?.limits);
      amount = sidecars.get(name) ?? 0n;
    } else {
      amount = (sidecars.get(name) ?? 0n) + milli(c.resources?.limits, name);
    }
    if (amount === 0n) return false;
  }
  return true;
}

function milliToValue(m: bigint): bigint {
  // upstream Value() rounds up
  return m >= 0n ? (m + 999n) / 1000n : m / 1000n;
}

/** The pod-level cgroup's settings (upstream cm.ResourceConfig for ResourceConfigForPod). */
export interface PodCgroupResources {
  /** cgroup v1 cpu.shares. */
  cpuShares?: number;
  /** cgroup v2 cpu.weight (from cpuShares). */
  cpuWeight?: number;
  /** CFS quota in µs; -1 means unlimited (cpuCFSQuota off). Set together with cpuPeriodUs. */
  cpuQuotaUs?: number;
  cpuPeriodUs?: number;
  /** Memory limit in bytes. */
  memoryLimitBytes?: number;
  /** Huge page size in bytes → limit in bytes, from the pod's hugepages requests. */
  hugePageLimits: Map<number, number>;
}

export interface PodCgroupOptions {
  /** cpuCFSQuota (default true). */
  enforceCPULimits?: boolean;
  cpuPeriodUs?: number;
}

/**
 * The pod cgroup's resources: Guaranteed pods get shares, quota and memory limit; Burstable
 * pods get shares, plus quota / memory limit only when every container sets that limit;
 * BestEffort pods get the minimum shares only. Overhead is included.
 */
export function podCgroupResources(pod: Pod, opts: PodCgroupOptions = {}): PodCgroupResources {
  const reqs = podRequests(pod);
  const limits = podLimits(pod);
  const period = opts.cpuPeriodUs ?? QUOTA_PERIOD_US;
  const cpuShares = milliCPUToShares(reqs.get('cpu') ?? 0n);
  const cpuQuota = opts.enforceCPULimits === false ? -1 : milliCPUToQuota(limits.get('cpu') ?? 0n, period);
  const memoryLimit = Number(milliToValue(limits.get('memory') ?? 0n));

  const hugePageLimits = new Map<number, number>();
  for (const [name, m] of reqs) {
    const size = hugePageSizeBytes(name);
    if (size === undefined) continue;
    const key = Number(size);
    hugePageLimits.set(key, (hugePageLimits.get(key) ?? 0) + Number(milliToValue(m)));
  }

  const result: PodCgroupResources = { hugePageLimits };
  const qos = getPodQOS(pod);
  if (qos === 'Guaranteed') {
    result.cpuShares = cpuShares;
    result.cpuQuotaUs = cpuQuota;
    result.cpuPeriodUs = period;
    result.memoryLimitBytes = memoryLimit;
  } else if (qos === 'Burstable') {
    result.cpuShares = cpuShares;
    if (limitsDeclared(pod, 'cpu')) {
      result.cpuQuotaUs = cpuQuota;
      result.cpuPeriodUs = period;
    }
    if (limitsDeclared(pod, 'memory')) result.memoryLimitBytes = memoryLimit;
  } else {
    result.cpuShares = MIN_SHARES;
  }
  result.cpuWeight = cpuSharesToCpuWeight(result.cpuShares);
  return result;
}

// ---- sandbox resources ----

function quantityFromMilli(m: bigint | undefined): Quantity | undefined {
  return m === undefined ? undefined : parseQuantity(`${m}m`);
}

/** Pod-wide resources the sandbox carries (upstream calculateSandboxResources): overhead excluded. */
export function calculateSandboxResources(pod: Pod, opts: LinuxResourceOptions = {}): LinuxContainerResourcesInput {
  const req = podRequests(pod, { excludeOverhead: true });
  const lim = podLimits(pod, { excludeOverhead: true });
  return calculateLinuxResources(quantityFromMilli(req.get('cpu')), quantityFromMilli(lim.get('cpu')), quantityFromMilli(lim.get('memory')), opts);
}

/** The pod's overhead as resources, requests equal to limits (upstream convertOverheadToLinuxResources). */
export function convertOverheadToLinuxResources(pod: Pod, opts: LinuxResourceOptions = {}): LinuxContainerResourcesInput {
  const overhead = pod.spec.overhead;
  if (!overhead) return {};
  const cpu = quantity(overhead.cpu) ?? parseQuantity(0);
  return calculateLinuxResources(cpu, cpu, quantity(overhead.memory), opts);
}
