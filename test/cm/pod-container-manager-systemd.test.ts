// The systemd driver's pod cgroups against a unit manager double that does what systemd does to
// the cgroup tree (a started slice is a directory at its expanded path, a stopped one is gone),
// on a generated unified hierarchy: which slices are started with which properties, what the
// driver writes after them, what it stops, and the paths it hands out. The real systemd is
// exercised in test/vm/.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import type { Pod } from '../../src/api/types.js';
import { expandSlice } from '../../src/cm/cgroup-name.js';
import { enforceNodeAllocatable } from '../../src/cm/node-allocatable.js';
import { PodCgroupError } from '../../src/cm/pod-container-manager.js';
import { SystemdPodContainerManager } from '../../src/cm/pod-container-manager-systemd.js';
import { SystemdUnitError, UINT64_MAX, type SystemdUnits, type UnitProperty } from '../../src/cm/systemd/units.js';
import { podCgroupManager } from '../../src/kubelet/dependencies.js';
import { createLogger } from '../../src/util/log.js';
import { generateCgroupHierarchies, type GeneratedHierarchies } from '../fixtures/cgroup-tree.js';

type Call = { op: 'start' | 'set' | 'stop'; unit: string; props?: Record<string, unknown> };

/** systemd as far as the driver can tell: units loaded or not, slices as directories. */
class FakeSystemd implements SystemdUnits {
  readonly calls: Call[] = [];
  readonly loaded = new Set<string>();
  failStart?: string;
  constructor(private readonly unified: string) {}
  async start(unit: string, properties: readonly UnitProperty[]): Promise<'started' | 'exists'> {
    this.calls.push({ op: 'start', unit, props: Object.fromEntries(properties.map((p) => [p.name, p.value])) });
    if (unit === this.failStart) throw new SystemdUnitError(unit, 'its start job ended "failed" (not "done")');
    if (this.loaded.has(unit)) return 'exists';
    this.loaded.add(unit);
    mkdirSync(join(this.unified, expandSlice(unit)), { recursive: true });
    return 'started';
  }
  async set(unit: string, properties: readonly UnitProperty[]): Promise<void> {
    this.calls.push({ op: 'set', unit, props: Object.fromEntries(properties.map((p) => [p.name, p.value])) });
  }
  async stop(unit: string): Promise<void> {
    this.calls.push({ op: 'stop', unit });
    this.loaded.delete(unit);
    rmSync(join(this.unified, expandSlice(unit)), { recursive: true, force: true });
  }
}

function pod(uid: string, resources: { requests?: Record<string, string>; limits?: Record<string, string> }): Pod {
  return { metadata: { name: 'p', namespace: 'default', uid }, spec: { containers: [{ name: 'c', image: 'busybox', resources }] } } as Pod;
}
const UID = '6b0d1c52-0f3e-4c1a-9d7e-2f1a3b4c5d6e';
const ESC = '6b0d1c52_0f3e_4c1a_9d7e_2f1a3b4c5d6e';

describe('systemd driver: pod slices', () => {
  let dir: string;
  let h: GeneratedHierarchies;
  let unified: string;
  let sd: FakeSystemd;
  const manager = (o: { podPidsLimit?: number; cgroupRoot?: string } = {}): SystemdPodContainerManager =>
    new SystemdPodContainerManager({ mounts: h.mounts, cgroupRoot: o.cgroupRoot ?? '', log: createLogger(), units: sd, ...(o.podPidsLimit ? { podPidsLimit: o.podPidsLimit } : {}) });
  const read = (path: string, file: string): string => readFileSync(join(unified, path, file), 'utf8');

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-sd-'));
    h = generateCgroupHierarchies(join(dir, 'v2'), 'v2');
    unified = join(h.root, 'unified');
    sd = new FakeSystemd(unified);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a Burstable pod: kubepods and QoS slices first, then its own slice with its resources; the files as upstream writes them', async () => {
    const m = manager({ podPidsLimit: 100 });
    const p = pod(UID, { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '500m', memory: '128Mi' } });
    const path = await m.ensureExists(p);
    const slice = `kubepods-burstable-pod${ESC}.slice`;
    assert.equal(path, `/kubepods.slice/kubepods-burstable.slice/${slice}`);
    assert.equal(m.podCgroupName(p), path, 'the cgroup_parent the runtime gets');
    assert.equal(m.podSliceUnit(p), slice);
    assert.deepEqual(sd.calls.map((c) => `${c.op} ${c.unit}`), [
      'start kubepods.slice',
      'start kubepods-burstable.slice',
      'start kubepods-besteffort.slice',
      `start ${slice}`,
    ]);
    assert.equal(sd.calls[2]!.props!.CPUWeight, 1n, 'BestEffort gets the minimum share, weight 1');
    const props = sd.calls[3]!.props!;
    assert.deepEqual(props.Wants, ['kubepods-burstable.slice']);
    assert.equal(props.MemoryMax, 134217728n);
    assert.equal(props.CPUWeight, 4n); // 100m → 102 shares → weight 4
    assert.equal(props.CPUQuotaPerSecUSec, 500000n);
    assert.equal(props.CPUQuotaPeriodUSec, 100000n);
    assert.equal(props.TasksMax, 100n);
    assert.equal(read(path, 'memory.max'), '134217728');
    assert.equal(read(path, 'cpu.max'), '50000 100000');
    assert.equal(read(path, 'cpu.weight'), '4');
    assert.equal(read(path, 'pids.max'), '100');
    assert.equal(read('/kubepods.slice/kubepods-besteffort.slice', 'cpu.weight'), '1');
    assert.equal(m.containerCgroupName(path, 'abc'), `${path}/cri-containerd-abc.scope`);
    assert.equal(m.podsCgroupName(), '/kubepods.slice');
  });

  it('a resync with the slice there and the same limits asks systemd nothing; changed limits are set on the loaded unit', async () => {
    const m = manager();
    const p = pod(UID, { requests: { cpu: '100m' }, limits: { memory: '64Mi' } });
    await m.ensureExists(p);
    const n = sd.calls.length;
    await m.ensureExists(p);
    assert.equal(sd.calls.length, n);
    // another manager (a restarted kubelet) finds the unit loaded: properties are set, not restarted
    const p2 = pod(UID, { requests: { cpu: '100m' }, limits: { memory: '32Mi' } });
    await manager().ensureExists(p2);
    const last = sd.calls.at(-1)!;
    assert.equal(last.op, 'set');
    assert.equal(last.props!.MemoryMax, 33554432n);
  });

  it('Guaranteed and BestEffort pods live in kubepods.slice and kubepods-besteffort.slice', async () => {
    const m = manager();
    assert.equal(await m.ensureExists(pod('g-1', { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } })), '/kubepods.slice/kubepods-podg_1.slice');
    assert.equal(await m.ensureExists(pod('b-1', {})), '/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podb_1.slice');
  });

  it('remove stops the pod slice (its directory goes); listPodCgroups finds slices by UID, dashes restored', async () => {
    const m = manager();
    const a = await m.ensureExists(pod(UID, { requests: { cpu: '100m' } }));
    const b = await m.ensureExists(pod('b-1', {}));
    const found = await m.listPodCgroups();
    assert.deepEqual([...found.entries()].sort(), [[UID, a], ['b-1', b]].sort());
    await m.remove(a);
    assert.deepEqual(sd.calls.at(-1), { op: 'stop', unit: `kubepods-burstable-pod${ESC}.slice` });
    assert.equal(existsSync(join(unified, a)), false);
    assert.deepEqual([...(await m.listPodCgroups()).keys()], ['b-1']);
  });

  it('remove refuses anything but a pod slice under a QoS slice', async () => {
    const m = manager();
    for (const bad of ['/kubepods.slice', '/system.slice/kubepods-podx.slice', '/kubepods.slice/kubepods-burstable.slice', '/kubepods.slice/kubepods-pod.slice', '/kubepods.slice/kubepods-pod..slice']) {
      await assert.rejects(m.remove(bad), PodCgroupError, bad);
    }
    assert.equal(sd.calls.length, 0);
  });

  it('a UID that cannot be a slice part is refused naming it; a failed start job fails ensureExists naming the unit', async () => {
    const m = manager();
    await assert.rejects(m.ensureExists(pod('bad_uid', {})), /cannot be a slice part/);
    sd.failStart = 'kubepods-besteffort-podx.slice';
    await assert.rejects(m.ensureExists(pod('x', {})), /kubepods-besteffort-podx\.slice.*ended "failed"/);
  });

  it('cgroupRoot leads the slice names', async () => {
    const m = manager({ cgroupRoot: '/custom' });
    assert.equal(await m.ensureExists(pod('b-1', {})), '/custom.slice/custom-kubepods.slice/custom-kubepods-besteffort.slice/custom-kubepods-besteffort-podb_1.slice');
    assert.equal(sd.calls[0]!.unit, 'custom-kubepods.slice');
    assert.deepEqual(sd.calls[0]!.props!.Wants, ['custom.slice']);
  });

  it('podCgroupManager picks the driver from cgroupDriver', () => {
    assert.equal(podCgroupManager({ cgroupRoot: '', podPidsLimit: -1, cgroupDriver: 'systemd' }, h.mounts, createLogger(), 'crio', sd).driver, 'systemd');
    assert.equal(podCgroupManager({ cgroupRoot: '', podPidsLimit: -1, cgroupDriver: 'cgroupfs' }, h.mounts, createLogger()).driver, 'cgroupfs');
  });

  it('node allocatable: kubepods.slice gets MemoryMax, CPUWeight and TasksMax as properties and files', async () => {
    const name = await enforceNodeAllocatable({ mounts: h.mounts, cgroupRoot: '', limits: { memoryBytes: 1073741824n, cpuShares: 2048, pids: 4096n }, log: createLogger(), systemd: sd });
    assert.equal(name, '/kubepods.slice');
    assert.deepEqual(sd.calls[0]!.props, {
      Description: 'libcontainer container kubepods.slice',
      Wants: ['-.slice'],
      MemoryAccounting: true,
      CPUAccounting: true,
      IOAccounting: true,
      TasksAccounting: true,
      DefaultDependencies: false,
      MemoryMax: 1073741824n,
      CPUWeight: 79n,
      TasksMax: 4096n,
    });
    assert.equal(read(name, 'memory.max'), '1073741824');
    assert.equal(read(name, 'cpu.weight'), '79');
    assert.equal(read(name, 'pids.max'), '4096');
    // the slice already there (pods started first): its properties are set
    await enforceNodeAllocatable({ mounts: h.mounts, cgroupRoot: '', limits: { memoryBytes: 1n << 30n, cpuShares: 2048 }, log: createLogger(), systemd: sd });
    assert.equal(sd.calls.at(-1)!.op, 'set');
    assert.equal(sd.calls.at(-1)!.props!.TasksMax, undefined);
    assert.notEqual(UINT64_MAX, 0n);
  });
});
