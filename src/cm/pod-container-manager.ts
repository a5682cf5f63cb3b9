// The pod-level cgroups (upstream: cm.PodContainerManager with the cgroupfs driver):
// /<cgroupRoot>/kubepods[/burstable|/besteffort]/pod<uid>. runc removes a container's
// cgroup but never the pod parent, so kubelet-ts creates and removes these itself, on
// cgroup v1 (one directory per controller hierarchy) and v2 (one unified directory).

import { access, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Pod, QOSClass } from '../api/types.js';
import { computePodQOS, getPodQOS } from '../api/qos.js';
import { allHierarchies, cgroupDir, cgroupDirUnder, cgroupMode, type CgroupMount, type CgroupMounts } from '../cgroups/index.js';
import { podCgroupResources, type PodCgroupResources } from '../runtime/resources.js';
import { KubeletError } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { assertPathComponent } from '../util/safe-path.js';

const QOS_DIR: Record<QOSClass, string> = { Guaranteed: '', Burstable: 'burstable', BestEffort: 'besteffort' };
const POD_PREFIX = 'pod';

export class PodCgroupError extends KubeletError {
  constructor(readonly cgroupName: string, message: string, options?: { cause?: unknown }) {
    super('ERR_POD_CGROUP', `pod cgroup ${cgroupName}: ${message}`, options);
  }
}

export interface PodContainerManagerOptions {
  mounts: CgroupMounts;
  /** kubelet's cgroupRoot ('' or '/' means the hierarchy root). */
  cgroupRoot: string;
  log: Logger;
  /** podPidsLimit: a value above 0 becomes the pod cgroup's pids.max (upstream); otherwise unset. */
  podPidsLimit?: number;
}

/** A pod spec's cgroup name and limits, for the QoS class they were computed under. */
interface SpecEntry {
  uid: string;
  /** The QoS class of the spec alone (computePodQOS). */
  specQos: string;
  /** The QoS class name, res and key were computed under. */
  qos: string;
  name: string;
  res?: ReturnType<typeof podCgroupResources>;
  key?: string;
  /** The directory whose presence stands for the cgroup (null: none). */
  probe?: string | null;
}

/** A pod cgroup name split into its QoS parent and its own `pod<uid>` component. */
interface PodCgroupPlace {
  parent: string;
  leaf: string;
}

export class PodContainerManager {
  readonly driver = 'cgroupfs' as const;
  private readonly base: string;
  private readonly parents: string[];
  /**
   * Pod cgroups this process made, with the limits it wrote (name → key). A pod resyncs every
   * syncFrequency: while its cgroup is there with the same limits, one stat replaces the mkdir
   * in every hierarchy and the limit writes (at 1000 pods, most of the kubelet's idle CPU).
   */
  private readonly ensured = new Map<string, string>();

  /**
   * Per pod spec: its cgroup name and limits as last computed (a pod's QoS and limits come from
   * its spec, or the QoS recorded in its status): a resync recomputes neither.
   */
  private readonly bySpec = new WeakMap<Pod['spec'], SpecEntry>();

  /** Told of each cgroup operation (upstream's kubelet_cgroup_manager_duration_seconds: create, update, destroy). */
  onOperation: ((operation: 'create' | 'update' | 'destroy', seconds: number) => void) | undefined;

  constructor(private readonly opts: PodContainerManagerOptions) {
    const root = opts.cgroupRoot.replace(/\/+$/, '');
    this.base = `${root}/kubepods`;
    this.parents = ['', 'burstable', 'besteffort'].map((q) => (q ? `${this.base}/${q}` : this.base));
  }

  /**
   * The cgroup name of the pod, as passed to the runtime as cgroup_parent. The UID must be one
   * plain path component: a name built from it never leaves its QoS cgroup.
   */
  podCgroupName(pod: Pod): string {
    return this.specEntry(pod).name;
  }

  /** The kubepods cgroup's name ("<cgroupRoot>/kubepods"). */
  podsCgroupName(): string {
    return this.base;
  }

  /** A container's cgroup under its pod's: runc names it by the container's id. */
  containerCgroupName(podPath: string, containerID: string): string {
    return `${podPath}/${containerID}`;
  }

  private specEntry(pod: Pod): SpecEntry {
    const uid = pod.metadata.uid ?? '';
    let e = this.bySpec.get(pod.spec);
    if (!e || e.uid !== uid) {
      e = { uid, specQos: computePodQOS(pod), qos: '', name: '' };
      this.bySpec.set(pod.spec, e);
    }
    // the QoS a pod's status records wins (getPodQOS); the stats see pods with it, the syncs without
    const qos = pod.status?.qosClass ?? e.specQos;
    if (e.qos !== qos) {
      e.qos = qos;
      e.name = this.computePodCgroupName(pod);
      e.res = undefined;
      e.key = undefined;
      e.probe = undefined;
    }
    return e;
  }

  private computePodCgroupName(pod: Pod): string {
    const uid = pod.metadata.uid ?? '';
    const qos = QOS_DIR[getPodQOS(pod)];
    const parent = qos ? `${this.base}/${qos}` : this.base;
    assertPathComponent(parent, uid);
    assertPathComponent(parent, POD_PREFIX + uid);
    return `${parent}/${POD_PREFIX}${uid}`;
  }

  /** Creates the pod cgroup in every hierarchy and applies its limits. Returns its name. */
  async ensureExists(pod: Pod): Promise<string> {
    const e = this.specEntry(pod);
    const name = e.name;
    const place = this.place(name);
    const res = (e.res ??= podCgroupResources(pod));
    const v2 = cgroupMode(this.opts.mounts) === 'v2';
    const key = (e.key ??= JSON.stringify(res));
    if (e.probe === undefined) e.probe = this.probeDir(place, v2) ?? null;
    const probe = e.probe ?? undefined;
    if (this.ensured.get(name) === key && probe !== undefined) {
      try {
        await access(probe);
        return name;
      } catch {
        // removed behind our back: make it again
      }
    }
    this.ensured.delete(name);
    const start = performance.now();
    if (v2) await this.ensureV2(place, res);
    else await this.ensureV1(place, res);
    this.onOperation?.('create', (performance.now() - start) / 1000);
    this.ensured.set(name, key);
    return name;
  }

  /** The directory whose presence stands for the pod cgroup (the memory hierarchy's on v1). */
  private probeDir(place: PodCgroupPlace, v2: boolean): string | undefined {
    const { mounts } = this.opts;
    const m = v2 ? mounts.unified : (mounts.v1.memory ?? mounts.v1.cpu);
    return m && cgroupDirUnder(m, place.parent, place.leaf);
  }

  /**
   * v2 (upstream's cgroupfs driver through libcontainer's fs2): every controller the root offers
   * is enabled in cgroup.subtree_control from the root down to the pod's parent, so the pod
   * cgroup gets cpu.weight, cpu.max, memory.max and pids.max files to write.
   */
  private async ensureV2(place: PodCgroupPlace, res: PodCgroupResources): Promise<void> {
    const unified = this.opts.mounts.unified!;
    const dir = cgroupDirUnder(unified, place.parent, place.leaf);
    const controllers = await this.rootControllers(unified);
    const rel = posix.relative(unified.mountPoint, posix.dirname(dir));
    let current = unified.mountPoint;
    await this.enableControllers(current, controllers);
    for (const seg of rel ? rel.split('/') : []) {
      current = posix.join(current, seg);
      await mkdirOnce(current);
      await this.enableControllers(current, controllers);
    }
    await mkdirOnce(dir);
    const writes: Promise<void>[] = [];
    if (res.cpuWeight !== undefined) writes.push(this.write(dir, 'cpu.weight', String(res.cpuWeight)));
    if (res.cpuQuotaUs !== undefined) {
      // A quota of 0 or -1 is no limit, as runc writes it.
      const quota = res.cpuQuotaUs > 0 ? String(res.cpuQuotaUs) : 'max';
      writes.push(this.write(dir, 'cpu.max', res.cpuPeriodUs ? `${quota} ${res.cpuPeriodUs}` : quota));
    }
    if (res.memoryLimitBytes !== undefined) writes.push(this.write(dir, 'memory.max', String(res.memoryLimitBytes)));
    const pids = this.opts.podPidsLimit;
    if (pids !== undefined && pids > 0) writes.push(this.write(dir, 'pids.max', String(pids)));
    await Promise.all(writes);
  }

  /** v1: the directory in every hierarchy but cpuset, and each controller's own files. */
  private async ensureV1(place: PodCgroupPlace, res: PodCgroupResources): Promise<void> {
    const { mounts } = this.opts;
    // cpuset is left to runc, which fills cpus/mems when it creates the container below.
    const cpusetMount = mounts.otherV1?.cpuset?.mountPoint;
    for (const m of allHierarchies(mounts)) {
      if (m.mountPoint === cpusetMount || m === mounts.unified) continue;
      await mkdir(cgroupDirUnder(m, place.parent, place.leaf), { recursive: true });
    }
    const dirIn = (m: CgroupMount | undefined): string | undefined => m && cgroupDirUnder(m, place.parent, place.leaf);
    const cpu = dirIn(mounts.v1.cpu);
    const memory = dirIn(mounts.v1.memory);
    const pidsDir = dirIn(mounts.v1.pids);
    const writes: Promise<void>[] = [];
    if (cpu && res.cpuShares !== undefined) writes.push(this.write(cpu, 'cpu.shares', String(res.cpuShares)));
    if (cpu && res.cpuQuotaUs !== undefined) {
      writes.push(this.write(cpu, 'cpu.cfs_period_us', String(res.cpuPeriodUs)).then(() => this.write(cpu, 'cpu.cfs_quota_us', String(res.cpuQuotaUs))));
    }
    if (memory && res.memoryLimitBytes !== undefined) writes.push(this.write(memory, 'memory.limit_in_bytes', String(res.memoryLimitBytes)));
    const pids = this.opts.podPidsLimit;
    if (pidsDir && pids !== undefined && pids > 0) writes.push(this.write(pidsDir, 'pids.max', String(pids)));
    await Promise.all(writes);
  }

  /** Removes a pod cgroup from every hierarchy (children first). Missing dirs are fine. */
  async remove(cgroupName: string): Promise<void> {
    const place = this.place(cgroupName);
    this.ensured.delete(cgroupName);
    const start = performance.now();
    const failures: string[] = [];
    let cause: unknown;
    await Promise.all(allHierarchies(this.opts.mounts).map(async (m) => {
      const dir = cgroupDirUnder(m, place.parent, place.leaf);
      try {
        await removeTree(dir);
      } catch (err) {
        cause ??= err;
        failures.push(`${dir}: ${(err as Error).message}`);
      }
    }));
    this.onOperation?.('destroy', (performance.now() - start) / 1000);
    if (failures.length) throw new PodCgroupError(cgroupName, `removing it failed: ${failures.join('; ')}`, { cause });
  }

  /** Pod cgroups that exist on the node: uid → cgroup name (to find orphans). */
  async listPodCgroups(): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    const { mounts } = this.opts;
    const mount = cgroupMode(mounts) === 'v2' ? mounts.unified : mounts.v1.memory ?? mounts.v1.cpu;
    if (!mount) return found;
    for (const parent of this.parents) {
      let entries;
      try {
        entries = await readdir(cgroupDir(mount, parent), { withFileTypes: true });
      } catch {
        continue;
      }
      for (const e of entries) {
        if (e.isDirectory() && e.name.startsWith(POD_PREFIX) && e.name.length > POD_PREFIX.length) found.set(e.name.slice(POD_PREFIX.length), `${parent}/${e.name}`);
      }
    }
    return found;
  }

  /** Splits a pod cgroup name; refuses anything but `<kubepods>[/<qos>]/pod<uid>` with a plain uid. */
  private place(cgroupName: string): PodCgroupPlace {
    const cut = cgroupName.lastIndexOf('/');
    const parent = cgroupName.slice(0, cut);
    const leaf = cgroupName.slice(cut + 1);
    if (cut < 0 || !this.parents.includes(parent) || !leaf.startsWith(POD_PREFIX)) {
      throw new PodCgroupError(cgroupName, `not a pod cgroup under ${this.base}`);
    }
    assertPathComponent(parent, leaf.slice(POD_PREFIX.length));
    return { parent, leaf };
  }

  /** The controllers the unified root offers (cgroup.controllers), e.g. ['cpu', 'memory', 'pids']. */
  private async rootControllers(unified: CgroupMount): Promise<string[]> {
    try {
      return (await readFile(join(unified.mountPoint, 'cgroup.controllers'), 'utf8')).split(/\s+/).filter(Boolean);
    } catch (err) {
      this.opts.log.warn('Cannot read the cgroup v2 controllers', { cgroup: unified.mountPoint, err: (err as Error).message });
      return [];
    }
  }

  /** Enables the controllers for a cgroup's children: all at once, else one by one (as runc does). */
  private async enableControllers(dir: string, controllers: string[]): Promise<void> {
    if (controllers.length === 0) return;
    const file = join(dir, 'cgroup.subtree_control');
    try {
      await writeFile(file, controllers.map((c) => `+${c}`).join(' '));
    } catch {
      for (const c of controllers) {
        await writeFile(file, `+${c}`).catch((err: Error) =>
          this.opts.log.warn('Failed to enable a cgroup controller', { cgroup: dir, controller: c, err: err.message }));
      }
    }
  }

  private async write(dir: string, file: string, value: string): Promise<void> {
    try {
      await writeFile(join(dir, file), value);
    } catch (err) {
      this.opts.log.warn('Failed to set pod cgroup value', { cgroup: dir, file, value, err: (err as Error).message });
    }
  }
}

async function mkdirOnce(dir: string): Promise<void> {
  try {
    await mkdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
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
