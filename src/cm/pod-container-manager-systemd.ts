// The pod-level cgroups with the systemd cgroup driver (upstream: cm.PodContainerManager over
// the systemd cgroup manager): kubepods.slice, the QoS slices kubepods-burstable.slice and
// kubepods-besteffort.slice, and one transient slice per pod, kubepods[-<qos>]-pod<uid_>.slice,
// started, changed and stopped through systemd's D-Bus API. The runtime (containerd with
// SystemdCgroup = true) puts each container in a scope inside the pod's slice. The cgroup
// path, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice", is what
// the runtime gets as cgroup_parent, as upstream passes it.

import { access, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Pod } from '../api/types.js';
import { computePodQOS, getPodQOS } from '../api/qos.js';
import { cgroupDir, cgroupMode, type CgroupMounts } from '../cgroups/index.js';
import { podCgroupResources, type PodCgroupResources } from '../runtime/resources.js';
import type { Logger } from '../util/log.js';
import {
  cgroupNameToSystemd,
  cgroupNameToSystemdUnit,
  containerCgroupPath,
  parseCgroupfsToCgroupName,
  unescapeSystemdCgroupName,
  type CgroupName,
} from './cgroup-name.js';
import { PodCgroupError } from './pod-container-manager.js';
import { resourceProperties, sliceStartProperties, type SliceResources } from './systemd/properties.js';
import type { SystemdUnits } from './systemd/units.js';

const QOS_COMPONENT = { Guaranteed: '', Burstable: 'burstable', BestEffort: 'besteffort' } as const;
const POD_PREFIX = 'pod';
/** upstream MinShares: the BestEffort QoS cgroup's CPU share. */
const MIN_SHARES = 2;

export interface SystemdPodContainerManagerOptions {
  mounts: CgroupMounts;
  /** cgroupRoot in cgroupfs form ("/" or "" for the root); its components lead every slice name. */
  cgroupRoot: string;
  log: Logger;
  podPidsLimit?: number;
  units: SystemdUnits;
  /** The runtime's container scope prefix (cri-containerd, crio). */
  scopePrefix?: string;
}

interface SpecEntry {
  uid: string;
  specQos: string;
  qos: string;
  name: CgroupName;
  path: string;
  unit: string;
  res?: PodCgroupResources;
  key?: string;
}

export class SystemdPodContainerManager {
  readonly driver = 'systemd' as const;
  readonly #o: SystemdPodContainerManagerOptions;
  readonly #root: CgroupName;
  readonly #kubepods: CgroupName;
  /** unit → resources key of the slices this process started or set. */
  readonly #ensured = new Map<string, string>();
  readonly #bySpec = new WeakMap<Pod['spec'], SpecEntry>();
  #parents: Promise<void> | undefined;
  /** Told how long each cgroup operation took (upstream's kubelet_cgroup_manager_duration_seconds). */
  onOperation: ((operation: 'create' | 'update' | 'destroy', seconds: number) => void) | undefined;

  constructor(o: SystemdPodContainerManagerOptions) {
    this.#o = o;
    this.#root = parseCgroupfsToCgroupName(o.cgroupRoot);
    this.#kubepods = [...this.#root, 'kubepods'];
  }

  /** The kubepods slice's cgroup path ("/kubepods.slice"). */
  podsCgroupName(): string {
    return cgroupNameToSystemd(this.#kubepods);
  }

  /** The QoS cgroup names: "" (Guaranteed: kubepods itself), burstable, besteffort. */
  qosCgroupNames(): CgroupName[] {
    return [this.#kubepods, [...this.#kubepods, 'burstable'], [...this.#kubepods, 'besteffort']];
  }

  /** The pod's cgroup path, the sandbox's cgroup_parent. */
  podCgroupName(pod: Pod): string {
    return this.#entry(pod).path;
  }

  /** The pod's slice unit ("kubepods-burstable-pod<uid_>.slice"). */
  podSliceUnit(pod: Pod): string {
    return this.#entry(pod).unit;
  }

  containerCgroupName(podPath: string, containerID: string): string {
    return containerCgroupPath('systemd', podPath, containerID, this.#o.scopePrefix ?? 'cri-containerd');
  }

  #entry(pod: Pod): SpecEntry {
    const uid = pod.metadata.uid ?? '';
    let e = this.#bySpec.get(pod.spec);
    if (!e || e.uid !== uid) {
      e = { uid, specQos: computePodQOS(pod), qos: '', name: [], path: '', unit: '' };
      this.#bySpec.set(pod.spec, e);
    }
    const qos = pod.status?.qosClass ?? e.specQos;
    if (e.qos !== qos) {
      const q = QOS_COMPONENT[getPodQOS(pod)];
      if (!uid) throw new PodCgroupError('(no uid)', 'a pod without a UID has no cgroup');
      const name = [...this.#kubepods, ...(q ? [q] : []), POD_PREFIX + uid];
      try {
        e.unit = cgroupNameToSystemdUnit(name);
      } catch (err) {
        throw new PodCgroupError(name.join('/'), (err as Error).message, { cause: err });
      }
      e.qos = qos;
      e.name = name;
      e.path = cgroupNameToSystemd(name);
      e.res = undefined;
      e.key = undefined;
    }
    return e;
  }

  #dir(path: string): string | undefined {
    const m = this.#o.mounts;
    const mount = cgroupMode(m) === 'v2' ? m.unified : (m.v1.memory ?? m.v1.cpu);
    return mount && cgroupDir(mount, path);
  }

  #version(): 1 | 2 {
    return cgroupMode(this.#o.mounts) === 'v2' ? 2 : 1;
  }

  /** kubepods.slice and the QoS slices (upstream's QoS container manager creates them at start). */
  ensureQosCgroups(): Promise<void> {
    if (!this.#parents) {
      const p = this.#startParents();
      this.#parents = p;
      p.catch(() => { if (this.#parents === p) this.#parents = undefined; });
    }
    return this.#parents;
  }

  async #startParents(): Promise<void> {
    const { units } = this.#o;
    const [kubepods, burstable, besteffort] = this.qosCgroupNames().map(cgroupNameToSystemdUnit) as [string, string, string];
    // kubepods first: systemd would start a parent slice on its own, without our properties
    await units.start(kubepods, sliceStartProperties(kubepods));
    await units.start(burstable, sliceStartProperties(burstable));
    const be: SliceResources = { cpuShares: MIN_SHARES };
    const beProps = resourceProperties(be, this.#version());
    if ((await units.start(besteffort, [...sliceStartProperties(besteffort), ...beProps])) === 'exists') await units.set(besteffort, beProps);
    await this.#writeFiles(cgroupNameToSystemd(this.qosCgroupNames()[2]!), be);
  }

  /** Starts the pod's slice (or sets its properties when it exists) and returns its cgroup path. */
  async ensureExists(pod: Pod): Promise<string> {
    const e = this.#entry(pod);
    const res = (e.res ??= podCgroupResources(pod));
    const key = (e.key ??= JSON.stringify(res));
    const dir = this.#dir(e.path);
    if (this.#ensured.get(e.unit) === key && dir) {
      try {
        await access(dir);
        return e.path;
      } catch {
        // stopped behind our back: start it again
      }
    }
    this.#ensured.delete(e.unit);
    await this.ensureQosCgroups();
    const start = performance.now();
    const sr = this.#sliceResources(res);
    const props = resourceProperties(sr, this.#version());
    try {
      const r = await this.#o.units.start(e.unit, [...sliceStartProperties(e.unit), ...props]);
      if (r === 'exists') await this.#o.units.set(e.unit, props);
    } catch (err) {
      throw new PodCgroupError(e.path, (err as Error).message, { cause: err });
    }
    await this.#writeFiles(e.path, sr);
    this.onOperation?.('create', (performance.now() - start) / 1000);
    this.#ensured.set(e.unit, key);
    return e.path;
  }

  #sliceResources(res: PodCgroupResources): SliceResources {
    const sr: SliceResources = {};
    if (res.cpuShares !== undefined) sr.cpuShares = res.cpuShares;
    if (res.cpuWeight !== undefined) sr.cpuWeight = res.cpuWeight;
    if (res.cpuQuotaUs !== undefined) sr.cpuQuotaUs = res.cpuQuotaUs;
    if (res.cpuPeriodUs !== undefined) sr.cpuPeriodUs = res.cpuPeriodUs;
    if (res.memoryLimitBytes !== undefined) sr.memoryLimitBytes = res.memoryLimitBytes;
    const pids = this.#o.podPidsLimit;
    if (pids !== undefined && pids > 0) sr.pidsLimit = pids;
    return sr;
  }

  /**
   * After the properties, the files themselves, as libcontainer's systemd manager writes them
   * through its fs manager: systemd rounds a CPU quota to whole percents, the kubelet's is exact.
   */
  async #writeFiles(path: string, r: SliceResources): Promise<void> {
    if (this.#version() !== 2) return;
    const dir = this.#dir(path);
    if (!dir) return;
    const writes: [string, string][] = [];
    const weight = r.cpuWeight ?? (r.cpuShares !== undefined ? 1 + Math.floor(((r.cpuShares - 2) * 9999) / 262142) : undefined);
    if (weight) writes.push(['cpu.weight', String(weight)]);
    if (r.cpuQuotaUs !== undefined) {
      const quota = r.cpuQuotaUs > 0 ? String(r.cpuQuotaUs) : 'max';
      writes.push(['cpu.max', r.cpuPeriodUs ? `${quota} ${r.cpuPeriodUs}` : quota]);
    }
    if (r.memoryLimitBytes !== undefined) writes.push(['memory.max', String(r.memoryLimitBytes)]);
    if (r.pidsLimit !== undefined) writes.push(['pids.max', Number(r.pidsLimit) < 0 ? 'max' : String(r.pidsLimit)]);
    await Promise.all(writes.map(async ([file, value]) => {
      try {
        await writeFile(join(dir, file), value);
      } catch (err) {
        this.#o.log.warn('Failed to set pod cgroup value', { cgroup: dir, file, value, err: (err as Error).message });
      }
    }));
  }

  /** Stops a pod's slice; what is left of its cgroup directory is removed. */
  async remove(cgroupPath: string): Promise<void> {
    const unit = this.#podUnitOf(cgroupPath);
    this.#ensured.delete(unit);
    const start = performance.now();
    try {
      await this.#o.units.stop(unit);
    } catch (err) {
      throw new PodCgroupError(cgroupPath, `stopping ${unit} failed: ${(err as Error).message}`, { cause: err });
    }
    const dir = this.#dir(cgroupPath);
    if (dir) await removeTree(dir).catch((err: Error) => { throw new PodCgroupError(cgroupPath, `removing ${dir} failed: ${err.message}`, { cause: err }); });
    this.onOperation?.('destroy', (performance.now() - start) / 1000);
  }

  /** A pod slice's unit from its cgroup path; refuses anything but a pod slice under a QoS slice. */
  #podUnitOf(cgroupPath: string): string {
    const parent = posix.dirname(cgroupPath);
    const unit = posix.basename(cgroupPath);
    for (const q of this.qosCgroupNames()) {
      if (cgroupNameToSystemd(q) !== parent) continue;
      const stem = cgroupNameToSystemdUnit(q).slice(0, -'.slice'.length);
      const pre = `${stem}-${POD_PREFIX}`;
      const uid = unit.startsWith(pre) && unit.endsWith('.slice') ? unit.slice(pre.length, -'.slice'.length) : '';
      if (uid && /^[A-Za-z0-9_]+$/.test(uid)) return unit;
    }
    throw new PodCgroupError(cgroupPath, `not a pod slice under ${this.podsCgroupName()}`);
  }

  /** Pod slices that exist on the node: uid → cgroup path (to find orphans). */
  async listPodCgroups(): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (const q of this.qosCgroupNames()) {
      const path = cgroupNameToSystemd(q);
      const dir = this.#dir(path);
      if (!dir) continue;
      const pre = `${cgroupNameToSystemdUnit(q).slice(0, -'.slice'.length)}-${POD_PREFIX}`;
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const d of entries) {
        if (!d.isDirectory() || !d.name.startsWith(pre) || !d.name.endsWith('.slice')) continue;
        const esc = d.name.slice(pre.length, -'.slice'.length);
        if (!esc || esc.includes('-')) continue;
        found.set(unescapeSystemdCgroupName(esc), `${path}/${d.name}`);
      }
    }
    return found;
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
  await Promise.all(entries.filter((e) => e.isDirectory()).map((e) => removeTree(join(dir, e.name))));
  try {
    await rmdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
