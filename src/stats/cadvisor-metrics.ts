// /metrics/cadvisor: the container_* and machine_* families the upstream kubelet's embedded
// cAdvisor serves, with cAdvisor's names, help, types and labels as the kubelet exposes them
// (container, id, image, name, namespace, pod; plus cpu, device or interface), for the node
// root (id="/"), each pod cgroup (container="", id = the pod cgroup), each pod's sandbox
// (network, read in the pod's network namespace) and each container. Read on scrape from the
// cgroups (the stats provider's reader, without kept-open descriptors), /proc and /sys.

import { readdir, readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import type { Pod } from '../api/types.js';
import { formatFloat } from '../metrics/registry.js';
import type { CgroupRef, CgroupSampleBatch } from './cgroup-sample.js';

/** What the renderer reads; the kubelet and stats provider have all of it. */
export interface CadvisorCollectSource {
  getPods(): Pod[];
  /** `/kubepods[/<qos>]/pod<uid>`; a container's cgroup is `<that>/<container id>`. */
  podCgroupName(pod: Pod): string;
  /** The ref of a cgroup path (every controller). */
  refFor(path: string): CgroupRef;
  /** Reads these cgroup paths now, with every controller; refs in the same order. */
  readCgroupPaths(paths: readonly string[]): Promise<{ batch: CgroupSampleBatch; refs: CgroupRef[] }>;
  /** The node's memory capacity in bytes. */
  memoryCapacityBytes: number;
  /** Where procfs and sysfs are (tests). */
  procDir?: string;
  sysDir?: string;
}

type LabelSet = Record<string, string>;

interface Fam {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  lines: string[];
}

function lv(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}


class Families {
  readonly #fams = new Map<string, Fam>();
  add(name: string, type: Fam['type'], help: string, labels: LabelSet, value: number, ts?: number): void {
    let f = this.#fams.get(name);
    if (!f) {
      f = { name, type, help, lines: [] };
      this.#fams.set(name, f);
    }
    const l = Object.keys(labels).sort().map((k) => `${k}="${lv(labels[k]!)}"`).join(',');
    f.lines.push(`${name}${l ? `{${l}}` : ''} ${formatFloat(value)}${ts !== undefined ? ` ${ts}` : ''}`);
  }
  render(): string {
    let out = '';
    for (const name of [...this.#fams.keys()].sort()) {
      const f = this.#fams.get(name)!;
      out += `# HELP ${f.name} ${f.help}\n# TYPE ${f.name} ${f.type}\n${f.lines.join('\n')}\n`;
    }
    return out;
  }
}

/** One cgroup the page reports, with its cAdvisor labels. */
interface Target {
  path: string;
  labels: { container: string; id: string; image: string; name: string; namespace: string; pod: string };
  /** The pod's sandbox: its network is read from one of its processes. */
  sandbox?: boolean;
  startTime?: number;
}

async function readText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
}

async function readNumber(file: string): Promise<number | undefined> {
  const t = (await readText(file))?.trim();
  if (t === undefined || t === '') return undefined;
  if (t === 'max') return Infinity;
  const n = Number(t.split(/\s+/)[0]);
  return Number.isFinite(n) ? n : undefined;
}

/** The pids of a cgroup directory itself (cgroup.procs), as cAdvisor's process stats count them. */
async function procsOf(dir: string | undefined): Promise<number[]> {
  if (!dir) return [];
  const t = await readText(`${dir}/cgroup.procs`);
  return t ? t.split('\n').filter((l) => l !== '').map(Number) : [];
}

/** cAdvisor leaves these interfaces out of network stats. */
const IGNORED_IFACE = /^(lo|veth|docker|nerdctl)/;

interface NetDev {
  iface: string;
  rxBytes: number; rxPackets: number; rxErrs: number; rxDrop: number;
  txBytes: number; txPackets: number; txErrs: number; txDrop: number;
}

/** /proc/<pid>/net/dev: the interfaces of that process's network namespace. */
export function parseNetDev(text: string): NetDev[] {
  const out: NetDev[] = [];
  for (const line of text.split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const iface = line.slice(0, colon).trim();
    const f = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    if (f.length < 16) continue;
    out.push({ iface, rxBytes: f[0]!, rxPackets: f[1]!, rxErrs: f[2]!, rxDrop: f[3]!, txBytes: f[8]!, txPackets: f[9]!, txErrs: f[10]!, txDrop: f[11]! });
  }
  return out;
}

/** Block device names by major:minor, as cAdvisor names the `device` label (/dev/<name>). */
async function deviceName(sysDir: string, major: number, minor: number, cache: Map<string, string>): Promise<string> {
  const key = `${major}:${minor}`;
  let name = cache.get(key);
  if (name === undefined) {
    const uevent = await readText(`${sysDir}/dev/block/${key}/uevent`);
    const dev = /^DEVNAME=(.*)$/m.exec(uevent ?? '')?.[1];
    name = dev ? `/dev/${dev}` : key;
    cache.set(key, name);
  }
  return name;
}

function dirOf(ref: CgroupRef, controller: 'cpu' | 'memory' | 'pids' | 'cpuacct'): string | undefined {
  return ref.version === 2 ? ref.dir : ref[controller];
}

/** cAdvisor reports an unlimited memory figure (above 2^62) as 0. */
function specMemory(v: number | undefined): number {
  return v === undefined || v === Infinity || v > 2 ** 62 ? 0 : v;
}

const deviceNames = new Map<string, string>();

/** The page: every family for the node root, the pods, their sandboxes and containers. */
export async function collectCadvisorMetrics(src: CadvisorCollectSource, nowMs: number): Promise<string> {
  const procDir = src.procDir ?? '/proc';
  const sysDir = src.sysDir ?? '/sys';
  const f = new Families();
  const empty = { container: '', id: '', image: '', name: '', namespace: '', pod: '' };
  const targets: Target[] = [{ path: '/', labels: { ...empty, id: '/' } }];
  for (const pod of src.getPods()) {
    const podCgroup = src.podCgroupName(pod);
    const ns = pod.metadata.namespace ?? '';
    const podName = pod.metadata.name ?? '';
    const podStart = Date.parse(pod.status?.startTime ?? '');
    targets.push({ path: podCgroup, labels: { ...empty, id: podCgroup, namespace: ns, pod: podName }, ...(Number.isFinite(podStart) ? { startTime: podStart } : {}) });
    const known = new Set<string>();
    const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? []), ...((pod.status as { ephemeralContainerStatuses?: NonNullable<Pod['status']>['containerStatuses'] } | undefined)?.ephemeralContainerStatuses ?? [])];
    for (const st of statuses) {
      const at = st.containerID?.indexOf('://') ?? -1;
      const id = st.containerID && at >= 0 ? st.containerID.slice(at + 3) : '';
      if (!id || !st.state?.running) continue;
      known.add(id);
      const started = Date.parse(st.state.running.startedAt ?? '');
      targets.push({
        path: `${podCgroup}/${id}`,
        labels: { container: st.name, id: `${podCgroup}/${id}`, image: st.image ?? '', name: id, namespace: ns, pod: podName },
        ...(Number.isFinite(started) ? { startTime: started } : {}),
      });
    }
    // the sandbox: the pod cgroup's child that is none of its containers (its network lives there)
    if (!pod.spec.hostNetwork) {
      let dir: string | undefined;
      try {
        dir = dirOf(src.refFor(podCgroup), 'memory');
      } catch {
        dir = undefined;
      }
      const children = dir ? await readdir(dir, { withFileTypes: true }).catch(() => []) : [];
      for (const d of children) {
        if (!d.isDirectory() || known.has(d.name) || !/^[0-9a-f]{16,}$/.test(d.name)) continue;
        targets.push({ path: `${podCgroup}/${d.name}`, labels: { ...empty, id: `${podCgroup}/${d.name}`, name: d.name, namespace: ns, pod: podName }, sandbox: true });
      }
    }
  }

  const { batch, refs } = await src.readCgroupPaths(targets.map((t) => t.path));
  const ts = nowMs;
  for (let i = 0; i < targets.length; i++) {
    const t = targets[i]!;
    if (!batch.ok(i)) continue;
    const ref = refs[i]!;
    const L = t.labels;
    const n = (field: Parameters<CgroupSampleBatch['number']>[1]) => batch.number(i, field);
    const v2 = ref.version === 2;
    // spec: cpu and memory limits as the cgroup holds them
    let hasQuota = false;
    const cpuDir = dirOf(ref, 'cpu');
    if (cpuDir) {
      let period: number | undefined, quota: number | undefined, shares: number | undefined;
      if (v2) {
        const max = (await readText(`${cpuDir}/cpu.max`))?.trim().split(/\s+/);
        if (max) {
          period = Number(max[1]);
          quota = max[0] === 'max' ? undefined : Number(max[0]);
        }
        const weight = await readNumber(`${cpuDir}/cpu.weight`);
        // cAdvisor converts the v2 weight back to shares (runc's formula inverted)
        if (weight !== undefined) shares = Math.round(2 + ((weight - 1) * 262142) / 9999);
      } else {
        period = await readNumber(`${cpuDir}/cpu.cfs_period_us`);
        const q = await readNumber(`${cpuDir}/cpu.cfs_quota_us`);
        quota = q !== undefined && q > 0 ? q : undefined;
        shares = await readNumber(`${cpuDir}/cpu.shares`);
      }
      if (period) f.add('container_spec_cpu_period', 'gauge', 'CPU period of the container.', L, period, ts);
      if (quota) f.add('container_spec_cpu_quota', 'gauge', 'CPU quota of the container.', L, quota, ts);
      if (shares !== undefined) f.add('container_spec_cpu_shares', 'gauge', 'CPU share of the container.', L, shares, ts);
      hasQuota = quota !== undefined && quota > 0;
    }
    // cpu
    const usageS = v2 ? n('cpu.stat:usage_usec') : n('cpuacct.usage');
    if (usageS !== undefined) {
      const userS = v2 ? n('cpu.stat:user_usec') : n('cpuacct.stat:user_ns');
      const sysS = v2 ? n('cpu.stat:system_usec') : n('cpuacct.stat:system_ns');
      const unit = v2 ? 1e6 : 1e9;
      f.add('container_cpu_usage_seconds_total', 'counter', 'Cumulative cpu time consumed in seconds.', { ...L, cpu: 'total' }, usageS / unit, ts);
      if (userS !== undefined) f.add('container_cpu_user_seconds_total', 'counter', 'Cumulative user cpu time consumed in seconds.', L, userS / unit, ts);
      if (sysS !== undefined) f.add('container_cpu_system_seconds_total', 'counter', 'Cumulative system cpu time consumed in seconds.', L, sysS / unit, ts);
    }
    // cAdvisor reports CFS figures for a cgroup with a quota
    if (hasQuota) {
      f.add('container_cpu_cfs_periods_total', 'counter', 'Number of elapsed enforcement period intervals.', L, n('cpu.stat:nr_periods') ?? 0, ts);
      f.add('container_cpu_cfs_throttled_periods_total', 'counter', 'Number of throttled period intervals.', L, n('cpu.stat:nr_throttled') ?? 0, ts);
      const thr = v2 ? (n('cpu.stat:throttled_usec') ?? 0) / 1e6 : (n('cpu.stat:throttled_time') ?? 0) / 1e9;
      f.add('container_cpu_cfs_throttled_seconds_total', 'counter', 'Total time duration the container has been throttled.', L, thr, ts);
    }
    // memory
    const usage = v2 ? n('memory.current') : n('memory.usage_in_bytes');
    const inactiveFile = v2 ? n('memory.stat:inactive_file') : n('memory.stat:total_inactive_file');
    const rss = v2 ? n('memory.stat:anon') : n('memory.stat:total_rss');
    const cache = v2 ? n('memory.stat:file') : n('memory.stat:total_cache');
    const swap = v2 ? n('memory.swap.current') : n('memory.stat:total_swap');
    const mapped = v2 ? n('memory.stat:file_mapped') : n('memory.stat:total_mapped_file');
    if (usage !== undefined) {
      const ws = inactiveFile !== undefined && inactiveFile < usage ? usage - inactiveFile : inactiveFile === undefined ? usage : 0;
      f.add('container_memory_usage_bytes', 'gauge', 'Current memory usage in bytes, including all memory regardless of when it was accessed', L, usage, ts);
      f.add('container_memory_working_set_bytes', 'gauge', 'Current working set in bytes.', L, ws, ts);
      f.add('container_memory_rss', 'gauge', 'Size of RSS in bytes.', L, rss ?? 0, ts);
      f.add('container_memory_cache', 'gauge', 'Number of bytes of page cache memory.', L, cache ?? 0, ts);
      f.add('container_memory_swap', 'gauge', 'Container swap usage in bytes.', L, swap ?? 0, ts);
      f.add('container_memory_mapped_file', 'gauge', 'Size of memory mapped files in bytes.', L, mapped ?? 0, ts);
      const failcnt = v2 ? n('memory.events:max') : undefined;
      if (failcnt !== undefined) f.add('container_memory_failcnt', 'counter', 'Number of memory usage hits limits', L, failcnt, ts);
      const fault = v2 ? n('memory.stat:pgfault') : n('memory.stat:total_pgfault');
      const major = v2 ? n('memory.stat:pgmajfault') : n('memory.stat:total_pgmajfault');
      // v1's total_* count the hierarchy; v2's memory.stat is hierarchical and cAdvisor gives it for both scopes
      for (const scope of v2 ? ['container', 'hierarchy'] : ['hierarchy']) {
        f.add('container_memory_failures_total', 'counter', 'Cumulative count of memory allocation failures.', { ...L, failure_type: 'pgfault', scope }, fault ?? 0, ts);
        f.add('container_memory_failures_total', 'counter', 'Cumulative count of memory allocation failures.', { ...L, failure_type: 'pgmajfault', scope }, major ?? 0, ts);
      }
    }
    // block I/O per device
    for (const r of batch.deviceRows(i)) {
      const dev = await deviceName(sysDir, batch.devIds[r * 3 + 1]!, batch.devIds[r * 3 + 2]!, deviceNames);
      const DL = { ...L, device: dev };
      f.add('container_fs_reads_bytes_total', 'counter', 'Cumulative count of bytes read', DL, Number(batch.devValues[r * 4]), ts);
      f.add('container_fs_writes_bytes_total', 'counter', 'Cumulative count of bytes written', DL, Number(batch.devValues[r * 4 + 1]), ts);
      f.add('container_fs_reads_total', 'counter', 'Cumulative count of reads completed', DL, Number(batch.devValues[r * 4 + 2]), ts);
      f.add('container_fs_writes_total', 'counter', 'Cumulative count of writes completed', DL, Number(batch.devValues[r * 4 + 3]), ts);
    }
    const memDir = dirOf(ref, 'memory');
    if (memDir) {
      const limit = v2 ? n('memory.max') : n('memory.limit_in_bytes');
      const reservation = await readNumber(v2 ? `${memDir}/memory.low` : `${memDir}/memory.soft_limit_in_bytes`);
      const swapLimit = await readNumber(v2 ? `${memDir}/memory.swap.max` : `${memDir}/memory.memsw.limit_in_bytes`);
      f.add('container_spec_memory_limit_bytes', 'gauge', 'Memory limit for the container.', L, specMemory(limit), ts);
      f.add('container_spec_memory_reservation_limit_bytes', 'gauge', 'Memory reservation limit for the container.', L, specMemory(reservation), ts);
      f.add('container_spec_memory_swap_limit_bytes', 'gauge', 'Memory swap limit for the container.', L, specMemory(swapLimit), ts);
    }
    // processes and threads of the cgroup itself (cgroup.procs), as cAdvisor counts them
    // (the root's are the host's own processes: left out, as they are no container's)
    const procs = t.path === '/' ? [] : await procsOf(dirOf(ref, 'pids') ?? dirOf(ref, 'cpuacct') ?? dirOf(ref, 'memory'));
    let threads = 0;
    let fds = 0;
    for (const pid of procs) {
      const status = await readText(`${procDir}/${pid}/status`);
      threads += Number(/^Threads:\s+(\d+)/m.exec(status ?? '')?.[1] ?? 0);
      fds += (await readdir(`${procDir}/${pid}/fd`).catch(() => [])).length;
    }
    f.add('container_processes', 'gauge', 'Number of processes running inside the container.', L, procs.length, ts);
    f.add('container_threads', 'gauge', 'Number of threads running inside the container', L, threads, ts);
    f.add('container_file_descriptors', 'gauge', 'Number of open file descriptors for the container.', L, fds, ts);
    const pidsMax = n('pids.max');
    f.add('container_threads_max', 'gauge', 'Maximum number of threads allowed inside the container, infinity if value is zero', L, pidsMax === undefined || pidsMax === Infinity ? 0 : pidsMax, ts);
    if (t.startTime !== undefined) f.add('container_start_time_seconds', 'gauge', 'Start time of the container since unix epoch in seconds.', L, t.startTime / 1000, ts);
    f.add('container_last_seen', 'gauge', 'Last time a container was seen by the exporter', L, Math.floor(nowMs / 1000), ts);
    // network: the sandbox's namespace, through one of its processes
    if (t.sandbox && procs.length > 0) {
      const dev = await readText(`${procDir}/${procs[0]}/net/dev`);
      for (const d of parseNetDev(dev ?? '')) {
        if (IGNORED_IFACE.test(d.iface)) continue;
        const IL = { ...L, interface: d.iface };
        f.add('container_network_receive_bytes_total', 'counter', 'Cumulative count of bytes received', IL, d.rxBytes, ts);
        f.add('container_network_receive_packets_total', 'counter', 'Cumulative count of packets received', IL, d.rxPackets, ts);
        f.add('container_network_receive_errors_total', 'counter', 'Cumulative count of errors encountered while receiving', IL, d.rxErrs, ts);
        f.add('container_network_receive_packets_dropped_total', 'counter', 'Cumulative count of packets dropped while receiving', IL, d.rxDrop, ts);
        f.add('container_network_transmit_bytes_total', 'counter', 'Cumulative count of bytes transmitted', IL, d.txBytes, ts);
        f.add('container_network_transmit_packets_total', 'counter', 'Cumulative count of packets transmitted', IL, d.txPackets, ts);
        f.add('container_network_transmit_errors_total', 'counter', 'Cumulative count of errors encountered while transmitting', IL, d.txErrs, ts);
        f.add('container_network_transmit_packets_dropped_total', 'counter', 'Cumulative count of packets dropped while transmitting', IL, d.txDrop, ts);
      }
    }
  }
  // the node root also reports the host's network namespace, as cAdvisor's root container does
  const hostDev = await readText(`${procDir}/1/net/dev`);
  for (const d of parseNetDev(hostDev ?? '')) {
    if (IGNORED_IFACE.test(d.iface)) continue;
    const IL = { ...empty, id: '/', interface: d.iface };
    f.add('container_network_receive_bytes_total', 'counter', 'Cumulative count of bytes received', IL, d.rxBytes, ts);
    f.add('container_network_transmit_bytes_total', 'counter', 'Cumulative count of bytes transmitted', IL, d.txBytes, ts);
    f.add('container_network_receive_packets_total', 'counter', 'Cumulative count of packets received', IL, d.rxPackets, ts);
    f.add('container_network_transmit_packets_total', 'counter', 'Cumulative count of packets transmitted', IL, d.txPackets, ts);
    f.add('container_network_receive_errors_total', 'counter', 'Cumulative count of errors encountered while receiving', IL, d.rxErrs, ts);
    f.add('container_network_transmit_errors_total', 'counter', 'Cumulative count of errors encountered while transmitting', IL, d.txErrs, ts);
    f.add('container_network_receive_packets_dropped_total', 'counter', 'Cumulative count of packets dropped while receiving', IL, d.rxDrop, ts);
    f.add('container_network_transmit_packets_dropped_total', 'counter', 'Cumulative count of packets dropped while transmitting', IL, d.txDrop, ts);
  }
  // machine
  const machineLabels = {
    boot_id: ((await readText(`${procDir}/sys/kernel/random/boot_id`)) ?? '').trim(),
    machine_id: ((await readText('/etc/machine-id')) ?? '').trim(),
    system_uuid: ((await readText(`${sysDir}/class/dmi/id/product_uuid`)) ?? '').trim(),
  };
  f.add('machine_cpu_cores', 'gauge', 'Number of logical CPU cores.', machineLabels, cpus().length);
  f.add('machine_memory_bytes', 'gauge', 'Amount of memory installed on the machine.', machineLabels, src.memoryCapacityBytes);
  f.add('container_scrape_error', 'gauge', '1 if there was an error while getting container metrics, 0 otherwise', {}, 0);
  return f.render();
}
