// The CRI stats backend (upstream: criStatsProvider): pod and container figures from the
// runtime's ListContainerStats and ListPodSandboxStats, named and dated from ListPodSandbox
// and ListContainers. The node part of the Summary still comes from cgroups and /proc.
import type {
  Container,
  ContainerStats as CriContainerStats,
  CpuUsage,
  FilesystemUsage,
  MemoryUsage,
  NetworkInterfaceUsage,
  NetworkUsage,
  PodSandbox,
  PodSandboxStats as CriPodSandboxStats,
  UInt64Value,
} from '../runtime/cri-types.js';
import {
  CpuRateTracker,
  type CPUStats,
  type ContainerStats,
  type FsStats,
  type InterfaceStats,
  type MemoryStats,
  type NetworkStats,
  type PodStats,
} from './summary.js';

/** The part of the CRI client this backend calls. */
export interface CriStatsSource {
  listPodSandbox(filter?: null): Promise<PodSandbox[]>;
  listContainers(filter?: null): Promise<Container[]>;
  listContainerStats(filter?: null): Promise<CriContainerStats[]>;
  listPodSandboxStats(filter?: null): Promise<CriPodSandboxStats[]>;
}

/** What the runtime answered for one snapshot. */
export interface CriStatsResponses {
  sandboxes: PodSandbox[];
  containers: Container[];
  containerStats: CriContainerStats[];
  /** undefined when the runtime does not implement ListPodSandboxStats. */
  sandboxStats?: CriPodSandboxStats[];
}

const u64 = (v: UInt64Value | null | undefined): bigint | undefined => (v ? BigInt(v.value) : undefined);

/** A CRI timestamp (ns since the epoch, as a decimal string) as a Date; `fallback` when unset. */
function nsToDate(ns: string | undefined, fallback: Date): Date {
  if (!ns || ns === '0') return fallback;
  return new Date(Number(BigInt(ns) / 1_000_000n));
}

function nsToMs(ns: string | undefined, fallback: Date): number {
  if (!ns || ns === '0') return fallback.getTime();
  return Number(BigInt(ns) / 1000n) / 1000;
}

function criCpu(cpu: CpuUsage | null | undefined, key: string, now: Date, rates: CpuRateTracker): CPUStats | undefined {
  if (!cpu) return undefined;
  const usage = u64(cpu.usage_core_nano_seconds);
  const s: CPUStats = { time: nsToDate(cpu.timestamp, now) };
  // Our own rate from the previous sample first (as upstream), the runtime's figure before we have one.
  const rate = usage === undefined ? undefined : rates.update(key, usage, nsToMs(cpu.timestamp, now));
  const nanoCores = rate ?? u64(cpu.usage_nano_cores);
  if (nanoCores !== undefined) s.usageNanoCores = nanoCores;
  if (usage !== undefined) s.usageCoreNanoSeconds = usage;
  return s.usageNanoCores === undefined && s.usageCoreNanoSeconds === undefined ? undefined : s;
}

function criMemory(m: MemoryUsage | null | undefined, now: Date): MemoryStats | undefined {
  if (!m) return undefined;
  const s: MemoryStats = { time: nsToDate(m.timestamp, now) };
  const put = (k: Exclude<keyof MemoryStats, 'time'>, v: UInt64Value | null | undefined): void => {
    const n = u64(v);
    if (n !== undefined) s[k] = n;
  };
  put('availableBytes', m.available_bytes);
  put('usageBytes', m.usage_bytes);
  put('workingSetBytes', m.working_set_bytes);
  put('rssBytes', m.rss_bytes);
  put('pageFaults', m.page_faults);
  put('majorPageFaults', m.major_page_faults);
  return Object.keys(s).length > 1 ? s : undefined;
}

function criInterface(i: NetworkInterfaceUsage): InterfaceStats {
  const s: InterfaceStats = { name: i.name };
  const put = (k: 'rxBytes' | 'rxErrors' | 'txBytes' | 'txErrors', v: UInt64Value | null): void => {
    const n = u64(v);
    if (n !== undefined) s[k] = n;
  };
  put('rxBytes', i.rx_bytes);
  put('rxErrors', i.rx_errors);
  put('txBytes', i.tx_bytes);
  put('txErrors', i.tx_errors);
  return s;
}

function criNetwork(n: NetworkUsage | null | undefined, now: Date): NetworkStats | undefined {
  if (!n || (!n.default_interface && n.interfaces.length === 0)) return undefined;
  const s: NetworkStats = { time: nsToDate(n.timestamp, now), ...(n.default_interface ? criInterface(n.default_interface) : { name: '' }) };
  if (n.interfaces.length) s.interfaces = n.interfaces.map(criInterface);
  return s;
}

/** The writable layer as upstream shows it: usage from the runtime, capacity from the image fs. */
function criRootfs(w: FilesystemUsage | null | undefined, now: Date, imageFs: FsStats | undefined): FsStats | undefined {
  if (!w) return undefined;
  const s: FsStats = { time: nsToDate(w.timestamp, now) };
  if (imageFs?.availableBytes !== undefined) s.availableBytes = imageFs.availableBytes;
  if (imageFs?.capacityBytes !== undefined) s.capacityBytes = imageFs.capacityBytes;
  const used = u64(w.used_bytes);
  if (used !== undefined) s.usedBytes = used;
  if (imageFs?.inodesFree !== undefined) s.inodesFree = imageFs.inodesFree;
  if (imageFs?.inodes !== undefined) s.inodes = imageFs.inodes;
  const inodesUsed = u64(w.inodes_used);
  if (inodesUsed !== undefined) s.inodesUsed = inodesUsed;
  return s;
}

function sumBig(values: Array<bigint | undefined>): bigint | undefined {
  let sum: bigint | undefined;
  for (const v of values) if (v !== undefined) sum = (sum ?? 0n) + v;
  return sum;
}

/** upstream (without pod cgroup figures): a pod's CPU and memory are its containers' sums. */
function sumContainers(containers: ContainerStats[], now: Date): { cpu?: CPUStats; memory?: MemoryStats } {
  const out: { cpu?: CPUStats; memory?: MemoryStats } = {};
  const cpus = containers.map((c) => c.cpu).filter((c): c is CPUStats => c !== undefined);
  if (cpus.length) {
    const cpu: CPUStats = { time: now };
    const nano = sumBig(cpus.map((c) => c.usageNanoCores));
    const usage = sumBig(cpus.map((c) => c.usageCoreNanoSeconds));
    if (nano !== undefined) cpu.usageNanoCores = nano;
    if (usage !== undefined) cpu.usageCoreNanoSeconds = usage;
    out.cpu = cpu;
  }
  const mems = containers.map((c) => c.memory).filter((m): m is MemoryStats => m !== undefined);
  if (mems.length) {
    const memory: MemoryStats = { time: now };
    for (const k of ['usageBytes', 'workingSetBytes', 'rssBytes', 'pageFaults', 'majorPageFaults'] as const) {
      const v = sumBig(mems.map((m) => m[k]));
      if (v !== undefined) memory[k] = v;
    }
    out.memory = memory;
  }
  return out;
}

/**
 * Pod stats from the runtime's answers: one entry per pod UID with a ready sandbox (the
 * newest if several), its running containers, pod figures from ListPodSandboxStats when the
 * runtime has them, else the sums of its containers.
 */
export function buildCriPodStats(r: CriStatsResponses, now: Date, rates: CpuRateTracker, imageFs?: FsStats): PodStats[] {
  const byUid = new Map<string, PodSandbox>();
  for (const s of r.sandboxes) {
    if (s.state !== 'SANDBOX_READY' || !s.metadata) continue;
    const prev = byUid.get(s.metadata.uid);
    if (!prev || BigInt(s.created_at || '0') > BigInt(prev.created_at || '0')) byUid.set(s.metadata.uid, s);
  }
  const kept = new Map<string, PodSandbox>();
  for (const s of byUid.values()) kept.set(s.id, s);

  const statsById = new Map<string, CriContainerStats>();
  for (const cs of r.containerStats) if (cs.attributes) statsById.set(cs.attributes.id, cs);
  const sandboxStatsById = new Map<string, CriPodSandboxStats>();
  for (const ss of r.sandboxStats ?? []) if (ss.attributes) sandboxStatsById.set(ss.attributes.id, ss);

  const containersBySandbox = new Map<string, ContainerStats[]>();
  for (const c of r.containers) {
    if (c.state !== 'CONTAINER_RUNNING' || !kept.has(c.pod_sandbox_id) || !c.metadata) continue;
    const cs: ContainerStats = { name: c.metadata.name, startTime: nsToDate(c.created_at, now) };
    const st = statsById.get(c.id);
    const cpu = criCpu(st?.cpu, c.id, now, rates);
    if (cpu) cs.cpu = cpu;
    const memory = criMemory(st?.memory, now);
    if (memory) cs.memory = memory;
    const rootfs = criRootfs(st?.writable_layer, now, imageFs);
    if (rootfs) cs.rootfs = rootfs;
    let list = containersBySandbox.get(c.pod_sandbox_id);
    if (!list) containersBySandbox.set(c.pod_sandbox_id, (list = []));
    list.push(cs);
  }

  const pods: PodStats[] = [];
  for (const s of kept.values()) {
    const md = s.metadata!;
    const containers = containersBySandbox.get(s.id) ?? [];
    const ps: PodStats = {
      podRef: { name: md.name, namespace: md.namespace, uid: md.uid },
      startTime: nsToDate(s.created_at, now),
      containers,
    };
    const linux = sandboxStatsById.get(s.id)?.linux;
    const cpu = linux ? criCpu(linux.cpu, `pod/${md.uid}`, now, rates) : undefined;
    const memory = linux ? criMemory(linux.memory, now) : undefined;
    const summed = cpu && memory ? {} : sumContainers(containers, now);
    if (cpu ?? summed.cpu) ps.cpu = cpu ?? summed.cpu;
    if (memory ?? summed.memory) ps.memory = memory ?? summed.memory;
    const network = criNetwork(linux?.network, now);
    if (network) ps.network = network;
    const procs = u64(linux?.process?.process_count);
    if (procs !== undefined) ps.process_stats = { process_count: procs };
    pods.push(ps);
  }
  rates.endRound();
  return pods;
}

/** Runs the four CRI calls of one snapshot in parallel. */
export async function fetchCriStats(cri: CriStatsSource): Promise<CriStatsResponses> {
  const [sandboxes, containers, containerStats, sandboxStats] = await Promise.all([
    cri.listPodSandbox(null),
    cri.listContainers(null),
    cri.listContainerStats(null),
    // A runtime without ListPodSandboxStats still gives container figures; pods get their sums.
    cri.listPodSandboxStats(null).catch((err: unknown) => {
      if ((err as { code?: unknown }).code === 'CRI_UNIMPLEMENTED') return undefined;
      throw err;
    }),
  ]);
  return { sandboxes, containers, containerStats, sandboxStats };
}
