// The pod cgroup's cpu and memory values, read and written for an in-place resize (upstream
// podContainerManager GetPodCgroupConfig / GetPodCgroupMemoryUsage / SetPodCgroupConfig), on
// cgroup v1 (cpu.cfs_quota_us, cpu.cfs_period_us, cpu.shares, memory.limit_in_bytes,
// memory.usage_in_bytes) and v2 (cpu.max, cpu.weight, memory.max, memory.current).

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod } from '../api/types.js';
import { cgroupDir, cgroupMode, type CgroupMounts } from '../cgroups/index.js';
import { cpuSharesToCpuWeight } from '../runtime/resources.js';
import type { PodCgroupResizeConfig, PodCgroupResizer } from '../runtime/resize.js';
import { PodCgroupError } from './pod-container-manager.js';

/** v2 cpu.weight back to v1 shares (the inverse of runc's conversion, as upstream's CpuWeightToCpuShares). */
function cpuWeightToCpuShares(weight: number): number {
  if (weight <= 0) return 0;
  return Math.ceil((((weight - 1) * 262142) / 9999) + 2);
}

async function readText(dir: string, file: string): Promise<string> {
  return (await readFile(join(dir, file), 'utf8')).trim();
}

export class PodCgroupResize implements PodCgroupResizer {
  constructor(private readonly mounts: CgroupMounts, private readonly podCgroupName: (pod: Pod) => string) {}

  private v2(): boolean {
    return cgroupMode(this.mounts) === 'v2';
  }

  private dir(pod: Pod, controller: 'cpu' | 'memory'): string {
    const name = this.podCgroupName(pod);
    const m = this.v2() ? this.mounts.unified : this.mounts.v1[controller];
    if (!m) throw new PodCgroupError(name, `no ${controller} cgroup hierarchy`);
    return cgroupDir(m, name);
  }

  async getPodCgroupConfig(pod: Pod): Promise<PodCgroupResizeConfig> {
    const cpu = this.dir(pod, 'cpu');
    const mem = this.dir(pod, 'memory');
    if (this.v2()) {
      const [max, weight, memMax] = await Promise.all([readText(cpu, 'cpu.max'), readText(cpu, 'cpu.weight'), readText(mem, 'memory.max')]);
      const [q, p] = max.split(/\s+/);
      return {
        cpuQuota: q === 'max' ? -1 : Number(q),
        cpuPeriod: Number(p ?? 100000),
        cpuShares: cpuWeightToCpuShares(Number(weight)),
        memoryLimit: memMax === 'max' ? Number.MAX_SAFE_INTEGER : Number(memMax),
      };
    }
    const [quota, period, shares, limit] = await Promise.all([
      readText(cpu, 'cpu.cfs_quota_us'), readText(cpu, 'cpu.cfs_period_us'), readText(cpu, 'cpu.shares'), readText(mem, 'memory.limit_in_bytes'),
    ]);
    return { cpuQuota: Number(quota), cpuPeriod: Number(period), cpuShares: Number(shares), memoryLimit: Number(limit) };
  }

  async getPodCgroupMemoryUsage(pod: Pod): Promise<number> {
    const mem = this.dir(pod, 'memory');
    if (this.v2()) return Number(await readText(mem, 'memory.current'));
    // upstream (v1): usage less the inactive file cache, as the working set
    const [usage, stat] = await Promise.all([readText(mem, 'memory.usage_in_bytes'), readText(mem, 'memory.stat')]);
    const inactive = /^total_inactive_file (\d+)$/m.exec(stat);
    const u = Number(usage) - Number(inactive?.[1] ?? 0);
    return u > 0 ? u : 0;
  }

  async setPodCgroupConfig(pod: Pod, values: Partial<PodCgroupResizeConfig>): Promise<void> {
    const cpu = this.dir(pod, 'cpu');
    const mem = this.dir(pod, 'memory');
    const name = this.podCgroupName(pod);
    const write = async (dir: string, file: string, value: string): Promise<void> => {
      try {
        await writeFile(join(dir, file), value);
      } catch (err) {
        throw new PodCgroupError(name, `setting ${file} to ${value}: ${(err as Error).message}`, { cause: err });
      }
    };
    if (this.v2()) {
      if (values.cpuQuota !== undefined) await write(cpu, 'cpu.max', `${values.cpuQuota > 0 ? values.cpuQuota : 'max'} ${values.cpuPeriod ?? 100000}`);
      if (values.cpuShares !== undefined) await write(cpu, 'cpu.weight', String(cpuSharesToCpuWeight(values.cpuShares)));
      if (values.memoryLimit !== undefined) await write(mem, 'memory.max', String(values.memoryLimit));
      return;
    }
    if (values.cpuQuota !== undefined) {
      if (values.cpuPeriod !== undefined) await write(cpu, 'cpu.cfs_period_us', String(values.cpuPeriod));
      await write(cpu, 'cpu.cfs_quota_us', String(values.cpuQuota));
    }
    if (values.cpuShares !== undefined) await write(cpu, 'cpu.shares', String(values.cpuShares));
    if (values.memoryLimit !== undefined) await write(mem, 'memory.limit_in_bytes', String(values.memoryLimit));
  }
}
