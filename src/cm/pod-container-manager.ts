// The pod-level cgroups (upstream: cm.PodContainerManager with the cgroupfs driver):
// /<cgroupRoot>/kubepods[/burstable|/besteffort]/pod<uid>. runc removes a container's
// cgroup but never the pod parent, so kubelet-ts creates and removes these itself.

import { mkdir, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod, QOSClass } from '../api/types.js';
import { getPodQOS } from '../api/qos.js';
import { allHierarchies, cgroupDir, cgroupMode, type CgroupMounts } from '../cgroups/index.js';
import { podCgroupResources } from '../runtime/resources.js';
import type { Logger } from '../util/log.js';

const QOS_DIR: Record<QOSClass, string> = { Guaranteed: '', Burstable: 'burstable', BestEffort: 'besteffort' };

export interface PodContainerManagerOptions {
  mounts: CgroupMounts;
  /** kubelet's cgroupRoot ('' or '/' means the hierarchy root). */
  cgroupRoot: string;
  log: Logger;
}

export class PodContainerManager {
  private readonly base: string;

  constructor(private readonly opts: PodContainerManagerOptions) {
    const root = opts.cgroupRoot.replace(/\/+$/, '');
    this.base = `${root}/kubepods`;
  }

  /** The cgroup name of the pod, as passed to the runtime as cgroup_parent. */
  podCgroupName(pod: Pod): string {
    const qos = QOS_DIR[getPodQOS(pod)];
    return qos ? `${this.base}/${qos}/pod${pod.metadata.uid}` : `${this.base}/pod${pod.metadata.uid}`;
  }

  /** Creates the pod cgroup in every hierarchy and applies its limits. Returns its name. */
  async ensureExists(pod: Pod): Promise<string> {
    const name = this.podCgroupName(pod);
    const res = podCgroupResources(pod);
    const { mounts } = this.opts;
    const writes: Promise<void>[] = [];
    if (cgroupMode(mounts) === 'v2') {
      const dir = cgroupDir(mounts.unified!, name);
      await mkdir(dir, { recursive: true });
      if (res.cpuWeight !== undefined) writes.push(this.write(dir, 'cpu.weight', String(res.cpuWeight)));
      if (res.cpuQuotaUs !== undefined) writes.push(this.write(dir, 'cpu.max', `${res.cpuQuotaUs < 0 ? 'max' : res.cpuQuotaUs} ${res.cpuPeriodUs}`));
      if (res.memoryLimitBytes !== undefined) writes.push(this.write(dir, 'memory.max', String(res.memoryLimitBytes)));
    } else {
      // cpuset is left to runc, which fills cpus/mems when it creates the container below.
      const cpusetMount = mounts.otherV1?.cpuset?.mountPoint;
      for (const m of allHierarchies(mounts)) {
        if (m.mountPoint === cpusetMount || m === mounts.unified) continue;
        await mkdir(cgroupDir(m, name), { recursive: true });
      }
      const cpu = mounts.v1.cpu && cgroupDir(mounts.v1.cpu, name);
      const memory = mounts.v1.memory && cgroupDir(mounts.v1.memory, name);
      if (cpu && res.cpuShares !== undefined) writes.push(this.write(cpu, 'cpu.shares', String(res.cpuShares)));
      if (cpu && res.cpuQuotaUs !== undefined) {
        writes.push(this.write(cpu, 'cpu.cfs_period_us', String(res.cpuPeriodUs)).then(() => this.write(cpu, 'cpu.cfs_quota_us', String(res.cpuQuotaUs))));
      }
      if (memory && res.memoryLimitBytes !== undefined) writes.push(this.write(memory, 'memory.limit_in_bytes', String(res.memoryLimitBytes)));
    }
    await Promise.all(writes);
    return name;
  }

  /** Removes a pod cgroup from every hierarchy (children first). Missing dirs are fine. */
  async remove(cgroupName: string): Promise<void> {
    const failures: string[] = [];
    await Promise.all(allHierarchies(this.opts.mounts).map(async (m) => {
      const dir = cgroupDir(m, cgroupName);
      try {
        await removeTree(dir);
      } catch (err) {
        failures.push(`${dir}: ${(err as Error).message}`);
      }
    }));
    if (failures.length) throw new Error(`removing pod cgroup ${cgroupName}: ${failures.join('; ')}`);
  }

  /** Pod cgroups that exist on the node: uid → cgroup name (to find orphans). */
  async listPodCgroups(): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    const { mounts } = this.opts;
    const mount = cgroupMode(mounts) === 'v2' ? mounts.unified : mounts.v1.memory ?? mounts.v1.cpu;
    if (!mount) return found;
    for (const qos of ['', 'burstable', 'besteffort']) {
      const parent = qos ? `${this.base}/${qos}` : this.base;
      let entries: string[];
      try {
        entries = await readdir(cgroupDir(mount, parent));
      } catch {
        continue;
      }
      for (const e of entries) if (e.startsWith('pod')) found.set(e.slice(3), `${parent}/${e}`);
    }
    return found;
  }

  private async write(dir: string, file: string, value: string): Promise<void> {
    try {
      await writeFile(join(dir, file), value);
    } catch (err) {
      this.opts.log.warn('Failed to set pod cgroup value', { cgroup: dir, file, value, err: (err as Error).message });
    }
  }
}

async function removeTree(dir: string): Promise<void> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  // A cgroup dir lists its control files as regular files; only subdirectories need removing.
  await Promise.all(entries.filter((e) => e.isDirectory()).map((e) => removeTree(join(dir, e.name))));
  try {
    await rmdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
