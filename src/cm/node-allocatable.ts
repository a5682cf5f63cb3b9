// Node allocatable enforcement (upstream: cm enforceNodeAllocatableCgroups with the cgroupfs
// driver): the kubepods cgroup is limited to what the pods may use. With `pods` in
// enforceNodeAllocatable that is capacity − kubeReserved − systemReserved (the hard eviction
// threshold is left inside, so the eviction manager acts before the limit does); without it,
// the machine's capacity. CPU becomes cpu.shares (v1) / cpu.weight (v2), memory the limit,
// pids pids.max.

import { access, mkdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseQuantity } from '../api/quantity.js';
import { cgroupDir, cgroupMode, type CgroupMounts } from '../cgroups/index.js';
import { cpuSharesToCpuWeight, milliCPUToShares } from '../runtime/resources.js';
import { cgroupNameToSystemd, cgroupNameToSystemdUnit, parseCgroupfsToCgroupName, parseSystemdToCgroupName } from './cgroup-name.js';
import { resourceProperties, sliceStartProperties } from './systemd/properties.js';
import type { SystemdUnits } from './systemd/units.js';
import { KubeletError } from '../util/errors.js';
import type { Logger } from '../util/log.js';

export class NodeAllocatableError extends KubeletError {
  constructor(readonly cgroupName: string, message: string, options?: { cause?: unknown }) {
    super('ERR_NODE_ALLOCATABLE', `enforcing node allocatable on ${cgroupName}: ${message}`, options);
  }
}

export interface NodeCapacity {
  memoryBytes: bigint;
  cpuMilli: bigint;
  /** The node's task limit (min of pid_max and threads-max); undefined: not limited. */
  pids?: bigint;
}

export type ReservedList = Readonly<Record<string, string>>;

export interface PodsCgroupLimits {
  memoryBytes: bigint;
  cpuShares: number;
  pids?: bigint;
}

/** What the kubepods cgroup gets (upstream getNodeAllocatableInternalAbsolute / internalCapacity). */
export function podsCgroupLimits(capacity: NodeCapacity, reserved: readonly (ReservedList | undefined)[], enforce: readonly string[]): PodsCgroupLimits {
  const enforced = enforce.includes('pods');
  const sum = (name: string, milli = false): bigint => {
    if (!enforced) return 0n;
    let v = 0n;
    for (const r of reserved) {
      const q = r?.[name];
      if (q !== undefined) v += milli ? parseQuantity(q).milliValueBig() : parseQuantity(q).valueBig();
    }
    return v;
  };
  const floor0 = (v: bigint): bigint => (v < 0n ? 0n : v);
  const memory = floor0(capacity.memoryBytes - sum('memory'));
  const cpu = floor0(capacity.cpuMilli - sum('cpu', true));
  const out: PodsCgroupLimits = { memoryBytes: memory, cpuShares: milliCPUToShares(cpu) };
  if (capacity.pids !== undefined) out.pids = floor0(capacity.pids - sum('pid'));
  return out;
}

export interface EnforceOptions {
  mounts: CgroupMounts;
  cgroupRoot: string;
  limits: PodsCgroupLimits;
  log: Logger;
  /** The systemd driver: kubepods.slice gets its limits as unit properties through these. */
  systemd?: SystemdUnits;
}

/** Creates the kubepods cgroup where missing and writes its limits; returns its name. */
export async function enforceNodeAllocatable(o: EnforceOptions): Promise<string> {
  const { mounts, limits } = o;
  let name = `${o.cgroupRoot.replace(/\/+$/, '')}/kubepods`;
  if (o.systemd) {
    const cgName = [...parseCgroupfsToCgroupName(o.cgroupRoot), 'kubepods'];
    const unit = cgroupNameToSystemdUnit(cgName);
    name = cgroupNameToSystemd(cgName);
    const props = resourceProperties({ memoryLimitBytes: limits.memoryBytes, cpuShares: limits.cpuShares, ...(limits.pids !== undefined ? { pidsLimit: limits.pids } : {}) }, cgroupMode(mounts) === 'v2' ? 2 : 1);
    try {
      if ((await o.systemd.start(unit, [...sliceStartProperties(unit), ...props])) === 'exists') await o.systemd.set(unit, props);
    } catch (err) {
      throw new NodeAllocatableError(unit, (err as Error).message, { cause: err });
    }
  }
  const writes: [string, string, string][] = [];
  if (cgroupMode(mounts) === 'v2') {
    const dir = cgroupDir(mounts.unified!, name);
    writes.push([dir, 'memory.max', String(limits.memoryBytes)], [dir, 'cpu.weight', String(cpuSharesToCpuWeight(limits.cpuShares))]);
    if (limits.pids !== undefined) writes.push([dir, 'pids.max', String(limits.pids)]);
  } else {
    const { memory, cpu, pids } = mounts.v1;
    if (memory) writes.push([cgroupDir(memory, name), 'memory.limit_in_bytes', String(limits.memoryBytes)]);
    if (cpu) writes.push([cgroupDir(cpu, name), 'cpu.shares', String(limits.cpuShares)]);
    if (pids && limits.pids !== undefined) writes.push([cgroupDir(pids, name), 'pids.max', String(limits.pids)]);
  }
  for (const [dir, file, value] of writes) {
    try {
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, file), value);
    } catch (err) {
      throw new NodeAllocatableError(name, `writing ${value} to ${join(dir, file)}: ${(err as Error).message}`, { cause: err });
    }
  }
  o.log.info('Enforced node allocatable on the pods cgroup', { cgroup: name, memory: String(limits.memoryBytes), cpuShares: limits.cpuShares, pids: limits.pids === undefined ? 'max' : String(limits.pids) });
  return name;
}

/** The machine's capacity: memory as read at start, one CPU = 1000m per online CPU, the task limit. */
export async function nodeCapacity(memoryCapacityBytes: number, procDir = '/proc'): Promise<NodeCapacity> {
  const read = (f: string): Promise<bigint | undefined> =>
    readFile(join(procDir, f), 'utf8').then((t) => (/^\s*\d+\s*$/.test(t) ? BigInt(t.trim()) : undefined), () => undefined);
  const [pidMax, threadsMax] = await Promise.all([read('sys/kernel/pid_max'), read('sys/kernel/threads-max')]);
  const pids = pidMax !== undefined && threadsMax !== undefined ? (pidMax < threadsMax ? pidMax : threadsMax) : pidMax;
  return { memoryBytes: BigInt(memoryCapacityBytes), cpuMilli: BigInt(availableParallelism()) * 1000n, pids };
}

/** Which enforceNodeAllocatable key names which reserved cgroup (upstream's enforcement keys). */
export const RESERVED_ENFORCEMENT_KEYS = {
  'system-reserved': { which: 'system', compressibleOnly: false },
  'system-reserved-compressible': { which: 'system', compressibleOnly: true },
  'kube-reserved': { which: 'kube', compressibleOnly: false },
  'kube-reserved-compressible': { which: 'kube', compressibleOnly: true },
} as const;

export interface ReservedCgroupOptions {
  mounts: CgroupMounts;
  /** systemReservedCgroup / kubeReservedCgroup as configured ("/system.slice", "/kube-reserved"). */
  cgroupName: string;
  reserved: ReservedList;
  /** The *-compressible keys: CPU only. */
  compressibleOnly: boolean;
  log: Logger;
  /** The systemd driver: the cgroup is a slice whose properties are set through these. */
  systemd?: SystemdUnits;
}

/**
 * Limits an existing reserved cgroup to its reservation (upstream enforceExistingCgroup): memory,
 * pids and cpu (as shares / weight), or cpu alone for the compressible keys. The cgroup must exist:
 * the kubelet does not make the cgroups of other parts of the node. Returns its cgroup path.
 */
export async function enforceReservedCgroup(o: ReservedCgroupOptions): Promise<string> {
  const { mounts, reserved } = o;
  const q = (n: string): bigint | undefined => (reserved[n] !== undefined ? (n === 'cpu' ? parseQuantity(reserved[n]!).milliValueBig() : parseQuantity(reserved[n]!).valueBig()) : undefined);
  const cpu = q('cpu');
  const memory = o.compressibleOnly ? undefined : q('memory');
  const pids = o.compressibleOnly ? undefined : q('pid');
  const cpuShares = cpu !== undefined ? milliCPUToShares(cpu) : undefined;
  let path = o.cgroupName;
  let unit: string | undefined;
  if (o.systemd) {
    const name = parseSystemdToCgroupName(o.cgroupName);
    unit = cgroupNameToSystemdUnit(name);
    path = cgroupNameToSystemd(name);
  }
  const v2 = cgroupMode(mounts) === 'v2';
  const probe = v2 ? mounts.unified : (mounts.v1.memory ?? mounts.v1.cpu);
  if (!probe) throw new NodeAllocatableError(path, 'no cgroup hierarchy to enforce it in');
  try {
    await access(cgroupDir(probe, path));
  } catch {
    throw new NodeAllocatableError(path, `"${path}" cgroup does not exist`);
  }
  if (o.systemd && unit) {
    const props = resourceProperties({
      ...(memory !== undefined ? { memoryLimitBytes: memory } : {}),
      ...(cpuShares !== undefined ? { cpuShares } : {}),
      ...(pids !== undefined ? { pidsLimit: pids } : {}),
    }, v2 ? 2 : 1);
    try {
      await o.systemd.set(unit, props);
    } catch (err) {
      throw new NodeAllocatableError(path, (err as Error).message, { cause: err });
    }
  }
  const writes: [string, string, string][] = [];
  if (v2) {
    const dir = cgroupDir(mounts.unified!, path);
    if (memory !== undefined) writes.push([dir, 'memory.max', String(memory)]);
    if (cpuShares !== undefined) writes.push([dir, 'cpu.weight', String(cpuSharesToCpuWeight(cpuShares))]);
    if (pids !== undefined) writes.push([dir, 'pids.max', String(pids)]);
  } else {
    const { memory: mem, cpu: cpuM, pids: pidsM } = mounts.v1;
    if (mem && memory !== undefined) writes.push([cgroupDir(mem, path), 'memory.limit_in_bytes', String(memory)]);
    if (cpuM && cpuShares !== undefined) writes.push([cgroupDir(cpuM, path), 'cpu.shares', String(cpuShares)]);
    if (pidsM && pids !== undefined) writes.push([cgroupDir(pidsM, path), 'pids.max', String(pids)]);
  }
  for (const [dir, file, value] of writes) {
    try {
      await writeFile(join(dir, file), value);
    } catch (err) {
      throw new NodeAllocatableError(path, `writing ${value} to ${join(dir, file)}: ${(err as Error).message}`, { cause: err });
    }
  }
  o.log.info('Enforced reserved resources on a cgroup', { cgroup: path, memory: memory === undefined ? '-' : String(memory), cpuShares: cpuShares ?? '-', pids: pids === undefined ? '-' : String(pids) });
  return path;
}
