// What the systemd driver asks systemd for, as libcontainer's systemd manager asks it for the
// kubelet: a transient slice nested by Wants= under its parent slice, with accounting on and
// no default dependencies; its resources as unit properties (cgroup v2: CPUWeight, MemoryMax,
// TasksMax, CPUQuotaPerSecUSec and CPUQuotaPeriodUSec; v1: CPUShares, MemoryLimit, TasksMax and
// the same quota). Delegate= is not set: systemd accepts it for services and scopes, not slices
// (libcontainer sets it on scopes only).

import { UINT64_MAX, type UnitProperty } from './units.js';
import { CgroupNameError } from '../cgroup-name.js';

const SLICE = '.slice';

/** The slice a slice nests under: "kubepods-burstable-pod1.slice" → "kubepods-burstable.slice"; "kubepods.slice" → "-.slice". */
export function parentSlice(unit: string): string {
  if (!unit.endsWith(SLICE)) throw new CgroupNameError(unit, 'not a slice name (must end with .slice)');
  const parts = unit.slice(0, -SLICE.length).split('-');
  return parts.length <= 1 ? `-${SLICE}` : parts.slice(0, -1).join('-') + SLICE;
}

/** The properties a new transient slice starts with, before its resources. */
export function sliceStartProperties(unit: string): UnitProperty[] {
  return [
    { name: 'Description', type: 's', value: `libcontainer container ${unit}` },
    { name: 'Wants', type: 'as', value: [parentSlice(unit)] },
    { name: 'MemoryAccounting', type: 'b', value: true },
    { name: 'CPUAccounting', type: 'b', value: true },
    { name: 'IOAccounting', type: 'b', value: true },
    { name: 'TasksAccounting', type: 'b', value: true },
    { name: 'DefaultDependencies', type: 'b', value: false },
  ];
}

/** A cgroup's resources as the drivers write them (the pod cgroup's, kubepods', a QoS cgroup's). */
export interface SliceResources {
  /** cpu.shares (v1); on v2 it becomes CPUWeight by upstream's conversion unless cpuWeight is given. */
  cpuShares?: number;
  cpuWeight?: number;
  /** CFS quota in µs per period; -1 or 0 with a period: no limit. */
  cpuQuotaUs?: number;
  cpuPeriodUs?: number;
  memoryLimitBytes?: number | bigint;
  /** pids.max; -1: no limit. */
  pidsLimit?: number | bigint;
}

/** Upstream's cgroup v2 conversion of cpu.shares [2, 262144] to cpu.weight [1, 10000]. */
export function cpuSharesToWeight(shares: number): number {
  if (shares === 0) return 0;
  return 1 + Math.floor(((shares - 2) * 9999) / 262142);
}

/**
 * CPUQuotaPerSecUSec for a quota and period (libcontainer addCpuQuota): µs of CPU per second,
 * rounded up to a whole 10 ms (systemd keeps the quota as a whole percent); no quota → infinity.
 */
export function cpuQuotaPerSecUSec(quotaUs: number, periodUs: number): bigint {
  if (quotaUs <= 0) return UINT64_MAX;
  const period = BigInt(periodUs > 0 ? periodUs : 100_000);
  let perSec = (BigInt(quotaUs) * 1_000_000n) / period;
  if (perSec % 10_000n !== 0n) perSec = (perSec / 10_000n + 1n) * 10_000n;
  return perSec;
}

const u64 = (v: number | bigint): bigint => (typeof v === 'bigint' ? v : BigInt(Math.trunc(v)));
/** -1 (or any negative) is "no limit" (systemd's infinity), as libcontainer passes uint64(-1). */
const limit = (v: number | bigint): bigint => (u64(v) < 0n ? UINT64_MAX : u64(v));

/** The resource properties of a slice (libcontainer genV2ResourcesProperties / genV1ResourcesProperties). */
export function resourceProperties(r: SliceResources, cgroupVersion: 1 | 2): UnitProperty[] {
  const props: UnitProperty[] = [];
  if (r.memoryLimitBytes !== undefined && u64(r.memoryLimitBytes) !== 0n) {
    props.push({ name: cgroupVersion === 2 ? 'MemoryMax' : 'MemoryLimit', type: 't', value: limit(r.memoryLimitBytes) });
  }
  if (cgroupVersion === 2) {
    const weight = r.cpuWeight ?? (r.cpuShares !== undefined ? cpuSharesToWeight(r.cpuShares) : undefined);
    if (weight) props.push({ name: 'CPUWeight', type: 't', value: BigInt(weight) });
  } else if (r.cpuShares) {
    props.push({ name: 'CPUShares', type: 't', value: BigInt(r.cpuShares) });
  }
  const period = r.cpuPeriodUs ?? 0;
  const quota = r.cpuQuotaUs ?? 0;
  if (period !== 0) props.push({ name: 'CPUQuotaPeriodUSec', type: 't', value: BigInt(period) });
  if (quota !== 0 || period !== 0) props.push({ name: 'CPUQuotaPerSecUSec', type: 't', value: cpuQuotaPerSecUSec(quota, period) });
  if (r.pidsLimit !== undefined && (u64(r.pidsLimit) > 0n || u64(r.pidsLimit) === -1n)) {
    props.push({ name: 'TasksMax', type: 't', value: limit(r.pidsLimit) });
  }
  return props;
}
