// Node-level figures that do not come from cgroups: /proc/stat (boot time, CPU time),
// /proc/meminfo, the task limits and count (rlimit), and statfs of a directory's filesystem.
// Everything is read with fs.promises; a file that cannot be read leaves its fields out.
import { readFile, statfs } from 'node:fs/promises';
import path from 'node:path';

import type { FsStats, NodeFigures } from './summary.js';

/** USER_HZ: Linux fixes it at 100 on every mainstream architecture. */
const USER_HZ = 100n;

export interface ProcStat {
  /** Boot time, seconds since the epoch. */
  bootTimeSeconds?: number;
  /** Busy CPU time of all CPUs (user, nice, system, irq, softirq, steal), ns. */
  cpuUsageNs?: bigint;
}

export function parseProcStat(text: string, ticksPerSecond = USER_HZ): ProcStat {
  const out: ProcStat = {};
  for (const line of text.split('\n')) {
    if (line.startsWith('cpu ')) {
      const f = line.trim().split(/\s+/).slice(1);
      if (f.length < 3 || !f.every((x) => /^\d+$/.test(x))) continue;
      const n = f.map((x) => BigInt(x));
      // user nice system idle iowait irq softirq steal (guest is inside user already)
      const busy = [0, 1, 2, 5, 6, 7].reduce((sum, k) => sum + (n[k] ?? 0n), 0n);
      out.cpuUsageNs = (busy * 1_000_000_000n) / ticksPerSecond;
    } else if (line.startsWith('btime ')) {
      // decimal digits only (Number() also takes "1e3" and "0x10")
      const t = line.slice(6).trim();
      const v = Number(t);
      if (/^\d+$/.test(t) && Number.isSafeInteger(v) && v > 0) out.bootTimeSeconds = v;
    }
  }
  return out;
}

/** /proc/meminfo as bytes (the `kB` lines scaled; unitless lines as they are). */
export function parseMeminfo(text: string): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const line of text.split('\n')) {
    const m = /^([^:]+):\s+(\d+)(?:\s+kB)?\s*$/.exec(line);
    if (!m) continue;
    const v = BigInt(m[2]!);
    out.set(m[1]!, line.trimEnd().endsWith('kB') ? v * 1024n : v);
  }
  return out;
}

/** The task count of /proc/loadavg ("0.00 0.01 0.05 1/123 4567" → 123). */
export function parseLoadavgTasks(text: string): bigint | undefined {
  const m = /^\S+\s+\S+\s+\S+\s+\d+\/(\d+)\s/.exec(text);
  return m ? BigInt(m[1]!) : undefined;
}

async function readText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'latin1');
  } catch {
    return undefined;
  }
}

/** FsStats of the filesystem holding `dir` (capacity, available, used, inodes), or undefined. */
export async function fsStatsOf(dir: string, time: Date): Promise<FsStats | undefined> {
  let s;
  try {
    s = await statfs(dir, { bigint: true });
  } catch {
    return undefined;
  }
  const fs: FsStats = {
    time,
    availableBytes: s.bavail * s.bsize,
    capacityBytes: s.blocks * s.bsize,
    usedBytes: (s.blocks - s.bfree) * s.bsize,
  };
  // Filesystems without inodes (some overlay/virtual ones) report 0 files: leave inodes out.
  if (s.files > 0n) {
    fs.inodesFree = s.ffree;
    fs.inodes = s.files;
    fs.inodesUsed = s.files > s.ffree ? s.files - s.ffree : 0n;
  }
  return fs;
}

export interface NodeStatsReaderOptions {
  /** Where procfs is mounted (tests point it at a fixture). Default /proc. */
  procDir?: string;
  /** The kubelet's root dir: node.fs is its filesystem. */
  rootDir: string;
}

export interface NodeSample {
  figures: NodeFigures;
  bootTime?: Date;
}

/** Reads the node figures of one snapshot (all files in parallel). */
export class NodeStatsReader {
  readonly #proc: string;
  readonly #rootDir: string;

  constructor(opts: NodeStatsReaderOptions) {
    this.#proc = opts.procDir ?? '/proc';
    this.#rootDir = opts.rootDir;
  }

  async read(time: Date): Promise<NodeSample> {
    const p = (...parts: string[]): string => path.join(this.#proc, ...parts);
    const [stat, meminfo, pidMax, threadsMax, loadavg, fs] = await Promise.all([
      readText(p('stat')),
      readText(p('meminfo')),
      readText(p('sys', 'kernel', 'pid_max')),
      readText(p('sys', 'kernel', 'threads-max')),
      readText(p('loadavg')),
      fsStatsOf(this.#rootDir, time),
    ]);
    const figures: NodeFigures = {};
    let bootTime: Date | undefined;
    if (stat !== undefined) {
      const s = parseProcStat(stat);
      if (s.cpuUsageNs !== undefined) figures.cpuUsageNs = s.cpuUsageNs;
      if (s.bootTimeSeconds !== undefined) bootTime = new Date(s.bootTimeSeconds * 1000);
    }
    if (meminfo !== undefined) {
      const m = parseMeminfo(meminfo);
      figures.memTotal = m.get('MemTotal');
      figures.memFree = m.get('MemFree');
      figures.inactiveFile = m.get('Inactive(file)');
      figures.anonPages = m.get('AnonPages');
    }
    // upstream: the task limit is the smaller of pid_max and threads-max, when both are known.
    const limits = [pidMax, threadsMax].map((t) => (t !== undefined && /^\s*\d+\s*$/.test(t) ? BigInt(t.trim()) : undefined));
    const rlimit: { maxpid?: bigint; curproc?: bigint } = {};
    if (limits[0] !== undefined && limits[1] !== undefined) rlimit.maxpid = limits[0] < limits[1] ? limits[0] : limits[1];
    const tasks = loadavg === undefined ? undefined : parseLoadavgTasks(loadavg);
    if (tasks !== undefined) rlimit.curproc = tasks;
    if (rlimit.maxpid !== undefined || rlimit.curproc !== undefined) figures.rlimit = rlimit;
    if (fs) figures.fs = fs;
    return { figures, bootTime };
  }
}
