// The Summary API (upstream: k8s.io/kubelet/pkg/apis/stats/v1alpha1) with its JSON names and
// units, and the builder that turns one cgroup snapshot into a Summary. uint64 fields are
// bigints so counters past 2^53 leave the kubelet exactly; times are Dates, written as
// metav1.Time writes them (RFC 3339, whole seconds). A field that is not measured is left
// out, never zero.
import type { CgroupSampleBatch } from './cgroup-sample.js';

/** metav1.Time; null is Go's zero time, which metav1.Time writes as JSON null. */
export type Time = Date | null;
export type Uint64 = bigint;
export type Int64 = bigint;

export interface Summary {
  node: NodeStats;
  pods: PodStats[];
}

export interface NodeStats {
  nodeName: string;
  systemContainers?: ContainerStats[];
  startTime: Time;
  cpu?: CPUStats;
  memory?: MemoryStats;
  network?: NetworkStats;
  fs?: FsStats;
  runtime?: RuntimeStats;
  rlimit?: RlimitStats;
}

export interface RlimitStats {
  time: Time;
  maxpid?: Int64;
  curproc?: Int64;
}

export interface RuntimeStats {
  imageFs?: FsStats;
  containerFs?: FsStats;
}

/** Names of upstream's system containers (NodeStats.systemContainers[].name). */
export const SYSTEM_CONTAINER_KUBELET = 'kubelet';
export const SYSTEM_CONTAINER_RUNTIME = 'runtime';
export const SYSTEM_CONTAINER_MISC = 'misc';
export const SYSTEM_CONTAINER_PODS = 'pods';

export interface ProcessStats {
  process_count?: Uint64;
}

export interface PodStats {
  podRef: PodReference;
  startTime: Time;
  containers: ContainerStats[];
  cpu?: CPUStats;
  memory?: MemoryStats;
  network?: NetworkStats;
  volume?: VolumeStats[];
  'ephemeral-storage'?: FsStats;
  process_stats?: ProcessStats;
}

export interface ContainerStats {
  name: string;
  startTime: Time;
  cpu?: CPUStats;
  memory?: MemoryStats;
  rootfs?: FsStats;
  logs?: FsStats;
}

export interface PodReference {
  name: string;
  namespace: string;
  uid: string;
}

export interface InterfaceStats {
  name: string;
  rxBytes?: Uint64;
  rxErrors?: Uint64;
  txBytes?: Uint64;
  txErrors?: Uint64;
}

/** The default interface's figures inline, plus every interface. */
export interface NetworkStats extends InterfaceStats {
  time: Time;
  interfaces?: InterfaceStats[];
}

export interface CPUStats {
  time: Time;
  usageNanoCores?: Uint64;
  usageCoreNanoSeconds?: Uint64;
}

export interface MemoryStats {
  time: Time;
  availableBytes?: Uint64;
  usageBytes?: Uint64;
  workingSetBytes?: Uint64;
  rssBytes?: Uint64;
  pageFaults?: Uint64;
  majorPageFaults?: Uint64;
}

export interface FsStats {
  time: Time;
  availableBytes?: Uint64;
  capacityBytes?: Uint64;
  usedBytes?: Uint64;
  inodesFree?: Uint64;
  inodes?: Uint64;
  inodesUsed?: Uint64;
}

export interface VolumeStats extends Omit<FsStats, 'time'> {
  time: Time;
  name: string;
}

// ---------------------------------------------------------------------------------------------
// JSON

/** metav1.Time's JSON form: RFC 3339 in UTC, whole seconds. */
export function formatTime(t: Date): string {
  return t.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function writeJSON(v: unknown, out: string[]): void {
  if (v === null) {
    out.push('null');
  } else if (typeof v === 'bigint') {
    out.push(v.toString());
  } else if (v instanceof Date) {
    out.push(Number.isNaN(v.getTime()) ? 'null' : `"${formatTime(v)}"`);
  } else if (Array.isArray(v)) {
    out.push('[');
    v.forEach((item, i) => {
      if (i > 0) out.push(',');
      writeJSON(item === undefined ? null : item, out);
    });
    out.push(']');
  } else if (typeof v === 'object') {
    out.push('{');
    let first = true;
    for (const [k, item] of Object.entries(v as Record<string, unknown>)) {
      if (item === undefined) continue;
      if (!first) out.push(',');
      first = false;
      out.push(JSON.stringify(k), ':');
      writeJSON(item, out);
    }
    out.push('}');
  } else {
    out.push(JSON.stringify(v) ?? 'null');
  }
}

/** JSON text of a Summary (or any part of one): bigints as exact integers, Dates as metav1.Time. */
export function summaryToJSON(value: unknown): string {
  const out: string[] = [];
  writeJSON(value, out);
  return out.join('');
}

/** The Summary with only CPU and memory figures (upstream: ?only_cpu_and_memory=true). */
export function cpuAndMemoryOnly(s: Summary): Summary {
  const cm = <T extends { cpu?: CPUStats; memory?: MemoryStats }>(x: T): Pick<T, 'cpu' | 'memory'> => ({ cpu: x.cpu, memory: x.memory });
  const container = (c: ContainerStats): ContainerStats => ({ name: c.name, startTime: c.startTime, ...cm(c) });
  return {
    node: {
      nodeName: s.node.nodeName,
      systemContainers: s.node.systemContainers?.map(container),
      startTime: s.node.startTime,
      ...cm(s.node),
    },
    pods: s.pods.map((p) => ({ podRef: p.podRef, startTime: p.startTime, containers: p.containers.map(container), ...cm(p) })),
  };
}

// ---------------------------------------------------------------------------------------------
// building blocks

/** Memory limits above this are "unlimited" (the v1 kernel rounds 2^63-1 down to a page). */
export const MEMORY_UNLIMITED_ABOVE = 1n << 62n;

/**
 * The previous CPU sample of each cgroup, to turn cumulative usage into usageNanoCores.
 * Keys are the caller's (container id, pod uid, ...); entries not seen in a round are dropped.
 */
export class CpuRateTracker {
  #prev = new Map<string, { usageNs: bigint; timeMs: number }>();
  #seen = new Set<string>();

  /** Records a sample and returns the rate since the previous one, or undefined without one. */
  update(key: string, usageNs: bigint, timeMs: number): bigint | undefined {
    this.#seen.add(key);
    const prev = this.#prev.get(key);
    if (!prev) {
      this.#prev.set(key, { usageNs, timeMs });
      return undefined;
    }
    const { usageNs: prevNs, timeMs: prevMs } = prev;
    // the entry is updated in place: a round over every container allocates no new entries
    prev.usageNs = usageNs;
    prev.timeMs = timeMs;
    if (timeMs <= prevMs || usageNs < prevNs) return undefined;
    // ns of CPU per ns of wall time, in billionths: delta_ns * 1e9 / (delta_ms * 1e6).
    return ((usageNs - prevNs) * 1000n) / BigInt(Math.round(timeMs - prevMs));
  }

  /** Whether a key has a previous sample. */
  has(key: string): boolean {
    return this.#prev.has(key);
  }

  /** Forgets every key not updated since the last endRound(). */
  endRound(): void {
    for (const key of this.#prev.keys()) if (!this.#seen.has(key)) this.#prev.delete(key);
    this.#seen.clear();
  }

  get size(): number {
    return this.#prev.size;
  }
}

function present(batch: CgroupSampleBatch, i: number, field: Parameters<CgroupSampleBatch['get']>[1]): bigint | undefined {
  const v = batch.get(i, field);
  return typeof v === 'bigint' ? v : undefined;
}

/** Cumulative CPU time of cgroup i in ns (v2 usage_usec, v1 cpuacct.usage), if read. */
export function cgroupCpuUsageNs(batch: CgroupSampleBatch, i: number): bigint | undefined {
  const usec = present(batch, i, 'cpu.stat:usage_usec');
  if (usec !== undefined) return usec * 1000n;
  return present(batch, i, 'cpuacct.usage');
}

export function cpuStats(time: Date, usageNs: bigint | undefined, nanoCores: bigint | undefined): CPUStats | undefined {
  if (usageNs === undefined) return undefined;
  const s: CPUStats = { time };
  if (nanoCores !== undefined) s.usageNanoCores = nanoCores;
  s.usageCoreNanoSeconds = usageNs;
  return s;
}

/** The raw memory figures a MemoryStats is made of. */
export interface MemoryFigures {
  usage?: bigint;
  inactiveFile?: bigint;
  rss?: bigint;
  pageFaults?: bigint;
  majorPageFaults?: bigint;
  /** The limit; undefined or above MEMORY_UNLIMITED_ABOVE means none. */
  limit?: bigint;
}

/** cgroup i's memory figures: v2 memory.current + memory.stat, v1 usage_in_bytes + total_* keys. */
export function cgroupMemoryFigures(batch: CgroupSampleBatch, i: number): MemoryFigures {
  const v2usage = present(batch, i, 'memory.current');
  if (v2usage !== undefined || batch.has(i, 'memory.stat:anon')) {
    const max = batch.get(i, 'memory.max');
    return {
      usage: v2usage,
      inactiveFile: present(batch, i, 'memory.stat:inactive_file'),
      rss: present(batch, i, 'memory.stat:anon'),
      pageFaults: present(batch, i, 'memory.stat:pgfault'),
      majorPageFaults: present(batch, i, 'memory.stat:pgmajfault'),
      limit: typeof max === 'bigint' ? max : undefined,
    };
  }
  const limit = batch.get(i, 'memory.limit_in_bytes');
  return {
    usage: present(batch, i, 'memory.usage_in_bytes'),
    inactiveFile: present(batch, i, 'memory.stat:total_inactive_file'),
    rss: present(batch, i, 'memory.stat:total_rss'),
    pageFaults: present(batch, i, 'memory.stat:total_pgfault'),
    majorPageFaults: present(batch, i, 'memory.stat:total_pgmajfault'),
    limit: typeof limit === 'bigint' ? limit : undefined,
  };
}

/** Working set = usage - inactive file, floored at 0 (as upstream). */
export function workingSetBytes(usage: bigint, inactiveFile: bigint | undefined): bigint {
  if (inactiveFile === undefined) return usage;
  return usage > inactiveFile ? usage - inactiveFile : 0n;
}

export function memoryStats(time: Date, m: MemoryFigures): MemoryStats | undefined {
  if (m.usage === undefined) return undefined;
  const ws = workingSetBytes(m.usage, m.inactiveFile);
  const s: MemoryStats = { time };
  if (m.limit !== undefined && m.limit <= MEMORY_UNLIMITED_ABOVE) s.availableBytes = m.limit > ws ? m.limit - ws : 0n;
  s.usageBytes = m.usage;
  s.workingSetBytes = ws;
  if (m.rss !== undefined) s.rssBytes = m.rss;
  if (m.pageFaults !== undefined) s.pageFaults = m.pageFaults;
  if (m.majorPageFaults !== undefined) s.majorPageFaults = m.majorPageFaults;
  return s;
}

/** A Date from an RFC 3339 string, or null when absent or unparsable. */
export function parseTime(s: string | undefined): Time {
  if (!s) return null;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? null : new Date(ms);
}

// ---------------------------------------------------------------------------------------------
// the Summary from one cgroup snapshot

export interface ContainerPlan {
  name: string;
  /** The runtime's container id (key of the CPU rate). */
  id: string;
  startTime: Time;
  /** Row of the container's cgroup in the batch. */
  row: number;
}

export interface PodPlan {
  podRef: PodReference;
  startTime: Time;
  /** Row of the pod cgroup, or -1 when it is not read. */
  row: number;
  containers: ContainerPlan[];
}

/** Which batch row is which: what the provider asked the reader for. */
export interface SummaryPlan {
  nodeName: string;
  nodeStartTime: Time;
  /** Row of the root cgroup, or -1. */
  rootRow: number;
  /** Row of the kubepods cgroup ("pods" system container), or -1. */
  podsRow: number;
  podsStartTime?: Time;
  pods: PodPlan[];
}

/** Node figures that do not come from cgroups (see node-stats.ts). */
export interface NodeFigures {
  /** /proc/stat: CPU time of all CPUs, ns (used when the root cgroup has none). */
  cpuUsageNs?: bigint;
  /** /proc/meminfo, bytes. */
  memTotal?: bigint;
  memFree?: bigint;
  inactiveFile?: bigint;
  anonPages?: bigint;
  rlimit?: { maxpid?: bigint; curproc?: bigint };
  /** The filesystem holding the kubelet's root dir. */
  fs?: FsStats;
  imageFs?: FsStats;
}

/**
 * The CPU rates of one snapshot (usageNanoCores), taken once when it is read: a Summary built
 * from the snapshot again later (each consumer builds its own) gives the same rates.
 */
export interface CgroupCpuRates {
  /** usageNanoCores of each batch row; NaN where there is no rate (first sample, not read). */
  readonly byRow: Float64Array;
  /** The node's (root cgroup, or /proc/stat), NaN without one. */
  readonly node: number;
}

/** Rows the Summary reports: the kubepods row, every container row, and pod rows (see buildCgroupSummary). */
export function cgroupCpuRates(plan: SummaryPlan, batch: CgroupSampleBatch, node: NodeFigures, time: Date, rates: CpuRateTracker): CgroupCpuRates {
  const timeMs = time.getTime();
  const byRow = new Float64Array(batch.count).fill(NaN);
  const ok = (row: number): boolean => row >= 0 && row < batch.count && batch.ok(row);
  const take = (key: string, row: number): void => {
    if (!ok(row)) return;
    const usage = cgroupCpuUsageNs(batch, row);
    if (usage === undefined) return;
    const r = rates.update(key, usage, timeMs);
    if (r !== undefined) byRow[row] = Number(r);
  };
  take('system/pods', plan.podsRow);
  const rootUsage = ok(plan.rootRow) ? cgroupCpuUsageNs(batch, plan.rootRow) : undefined;
  const nodeCpuNs = rootUsage ?? node.cpuUsageNs;
  const nodeRate = nodeCpuNs === undefined ? undefined : rates.update('node', nodeCpuNs, timeMs);
  for (const p of plan.pods) {
    for (const c of p.containers) take(c.id, c.row);
    take(`pod/${p.podRef.uid}`, p.row);
  }
  rates.endRound();
  return { byRow, node: nodeRate === undefined ? NaN : Number(nodeRate) };
}

/**
 * The working set of every pod the Summary would report with memory figures (its pod cgroup
 * read, with a usage), summed from the batch without building their stats.
 */
export function podsWorkingSetBytes(plan: SummaryPlan, batch: CgroupSampleBatch): bigint {
  let sum = 0n;
  for (const p of plan.pods) {
    if (p.row < 0 || p.row >= batch.count || !batch.ok(p.row)) continue;
    const m = cgroupMemoryFigures(batch, p.row);
    if (m.usage !== undefined) sum += workingSetBytes(m.usage, m.inactiveFile);
  }
  return sum;
}

/**
 * The Summary of one snapshot: node from the root cgroup (falling back to /proc figures),
 * pods from their pod cgroups, containers from theirs. Cgroups reported missing (the
 * container exited meanwhile) are left out. `rates` is the snapshot's (cgroupCpuRates), or a
 * tracker the rates are taken from now.
 */
export function buildCgroupSummary(
  plan: SummaryPlan,
  batch: CgroupSampleBatch,
  node: NodeFigures,
  time: Date,
  rates: CpuRateTracker | CgroupCpuRates,
): Summary {
  const r = rates instanceof CpuRateTracker ? cgroupCpuRates(plan, batch, node, time, rates) : rates;
  const ok = (row: number): boolean => row >= 0 && row < batch.count && batch.ok(row);
  const rate = (x: number): bigint | undefined => (Number.isNaN(x) ? undefined : BigInt(x));
  const cpuOf = (row: number): CPUStats | undefined => {
    const usage = cgroupCpuUsageNs(batch, row);
    return cpuStats(time, usage, usage === undefined ? undefined : rate(r.byRow[row]!));
  };

  const nodeStats: NodeStats = { nodeName: plan.nodeName, startTime: plan.nodeStartTime };
  if (ok(plan.podsRow)) {
    const pods: ContainerStats = { name: SYSTEM_CONTAINER_PODS, startTime: plan.podsStartTime ?? null };
    const cpu = cpuOf(plan.podsRow);
    if (cpu) pods.cpu = cpu;
    const memory = memoryStats(time, cgroupMemoryFigures(batch, plan.podsRow));
    if (memory) pods.memory = memory;
    nodeStats.systemContainers = [pods];
  }

  const rootOk = ok(plan.rootRow);
  const rootUsage = rootOk ? cgroupCpuUsageNs(batch, plan.rootRow) : undefined;
  const nodeCpuNs = rootUsage ?? node.cpuUsageNs;
  const nodeCpu = cpuStats(time, nodeCpuNs, nodeCpuNs === undefined ? undefined : rate(r.node));
  if (nodeCpu) nodeStats.cpu = nodeCpu;

  // The node's limit is its memory; v2 has no memory.current at the root, so /proc/meminfo stands in.
  let mem: MemoryFigures = rootOk ? cgroupMemoryFigures(batch, plan.rootRow) : {};
  if (mem.usage === undefined && node.memTotal !== undefined && node.memFree !== undefined) {
    mem = {
      ...mem,
      usage: node.memTotal > node.memFree ? node.memTotal - node.memFree : 0n,
      inactiveFile: node.inactiveFile,
      rss: mem.rss ?? node.anonPages,
    };
  }
  const nodeMemory = memoryStats(time, { ...mem, limit: node.memTotal });
  if (nodeMemory) nodeStats.memory = nodeMemory;
  if (node.fs) nodeStats.fs = node.fs;
  if (node.imageFs) nodeStats.runtime = { imageFs: node.imageFs };
  if (node.rlimit) {
    const rl: RlimitStats = { time };
    if (node.rlimit.maxpid !== undefined) rl.maxpid = node.rlimit.maxpid;
    if (node.rlimit.curproc !== undefined) rl.curproc = node.rlimit.curproc;
    nodeStats.rlimit = rl;
  }

  const pods: PodStats[] = [];
  for (const p of plan.pods) {
    const containers: ContainerStats[] = [];
    for (const c of p.containers) {
      if (!ok(c.row)) continue;
      const cs: ContainerStats = { name: c.name, startTime: c.startTime };
      const cpu = cpuOf(c.row);
      if (cpu) cs.cpu = cpu;
      const memory = memoryStats(time, cgroupMemoryFigures(batch, c.row));
      if (memory) cs.memory = memory;
      containers.push(cs);
    }
    const podOk = ok(p.row);
    if (!podOk && containers.length === 0) continue;
    const ps: PodStats = { podRef: p.podRef, startTime: p.startTime, containers };
    if (podOk) {
      const cpu = cpuOf(p.row);
      if (cpu) ps.cpu = cpu;
      const memory = memoryStats(time, cgroupMemoryFigures(batch, p.row));
      if (memory) ps.memory = memory;
      const procs = present(batch, p.row, 'pids.current');
      if (procs !== undefined) ps.process_stats = { process_count: procs };
    }
    pods.push(ps);
  }
  return { node: nodeStats, pods };
}
