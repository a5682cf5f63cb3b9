import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import fc from 'fast-check';

import type { Pod } from '../../src/api/types.js';
import { PodCgroupError, PodContainerManager } from '../../src/cm/pod-container-manager.js';
import { PathEscapeError } from '../../src/util/safe-path.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { generateCgroupHierarchies, V2_ROOT_CONTROLLERS, type CgroupLayout, type GeneratedHierarchies } from '../fixtures/cgroup-tree.js';

type Res = { requests?: Record<string, string>; limits?: Record<string, string> };

function pod(uid: string, resources: Res[]): Pod {
  return {
    metadata: { name: 'p', namespace: 'default', uid },
    spec: { containers: resources.map((r, i) => ({ name: `c${i}`, image: 'busybox', resources: r })) },
  } as Pod;
}

const guaranteed = (uid: string): Pod => pod(uid, [{ requests: { cpu: '500m', memory: '64Mi' }, limits: { cpu: '500m', memory: '64Mi' } }]);
const burstable = (uid: string): Pod => pod(uid, [{ requests: { cpu: '100m' } }]);
const bestEffort = (uid: string): Pod => pod(uid, [{}]);

const read = (f: string): string => readFileSync(f, 'utf8');
const ALL_ON = V2_ROOT_CONTROLLERS.map((c) => `+${c}`).join(' ');

describe('pod cgroups', () => {
  let dir: string;
  const warnings: string[] = [];
  const manager = (h: GeneratedHierarchies, podPidsLimit?: number): PodContainerManager =>
    new PodContainerManager({ mounts: h.mounts, cgroupRoot: '', log: createLogger(), podPidsLimit });
  const layout = (l: CgroupLayout): GeneratedHierarchies => generateCgroupHierarchies(join(dir, l), l);

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-cm-'));
    warnings.length = 0;
    setLogSink((line) => warnings.push(line));
  });
  afterEach(async () => {
    setLogSink((line) => process.stderr.write(line + '\n'));
    await rm(dir, { recursive: true, force: true });
  });

  describe('cgroup v2 (unified)', () => {
    it('enables the root controllers down to the parent and writes cpu.weight, cpu.max, memory.max', async () => {
      const h = layout('v2');
      const unified = join(h.root, 'unified');
      const name = await manager(h).ensureExists(guaranteed('u-1'));
      assert.equal(name, '/kubepods/podu-1');
      assert.equal(read(join(unified, 'cgroup.subtree_control')), ALL_ON);
      assert.equal(read(join(unified, 'kubepods', 'cgroup.subtree_control')), ALL_ON);
      const pd = join(unified, 'kubepods', 'podu-1');
      // The pod's own subtree_control is runc's to fill when it creates the containers below.
      assert.equal(existsSync(join(pd, 'cgroup.subtree_control')), false);
      // 500m → 512 shares → weight 1 + (510 * 9999) / 262142 = 20.
      assert.equal(read(join(pd, 'cpu.weight')), '20');
      assert.equal(read(join(pd, 'cpu.max')), '50000 100000');
      assert.equal(read(join(pd, 'memory.max')), String(64 * 1024 * 1024));
      assert.equal(existsSync(join(pd, 'pids.max')), false, 'no podPidsLimit, no pids.max');
      // Nothing v1 is written on a v2 host.
      assert.equal(existsSync(join(pd, 'cpu.shares')), false);
      assert.equal(existsSync(join(pd, 'memory.limit_in_bytes')), false);
      assert.deepEqual(readdirSync(h.root), ['unified']);
    });

    it('gives a Burstable pod its weight and pids.max under kubepods/burstable, without limits it lacks', async () => {
      const h = layout('v2');
      const unified = join(h.root, 'unified');
      const name = await manager(h, 1024).ensureExists(burstable('u-2'));
      assert.equal(name, '/kubepods/burstable/podu-2');
      for (const d of [unified, join(unified, 'kubepods'), join(unified, 'kubepods', 'burstable')]) {
        assert.equal(read(join(d, 'cgroup.subtree_control')), ALL_ON, d);
      }
      const pd = join(unified, 'kubepods', 'burstable', 'podu-2');
      // 100m → 102 shares → weight 1 + (100 * 9999) / 262142 = 4.
      assert.equal(read(join(pd, 'cpu.weight')), '4');
      assert.equal(read(join(pd, 'pids.max')), '1024');
      assert.equal(existsSync(join(pd, 'cpu.max')), false);
      assert.equal(existsSync(join(pd, 'memory.max')), false);
    });

    it('gives a BestEffort pod the minimum weight', async () => {
      const h = layout('v2');
      await manager(h).ensureExists(bestEffort('u-3'));
      assert.equal(read(join(h.root, 'unified', 'kubepods', 'besteffort', 'podu-3', 'cpu.weight')), '1');
    });

    it('falls back to enabling controllers one by one when the kernel refuses the whole list', async () => {
      const h = layout('v2');
      const unified = join(h.root, 'unified');
      // A directory where the file should be makes every write fail: each controller is then tried alone.
      mkdirSync(join(unified, 'kubepods', 'cgroup.subtree_control'), { recursive: true });
      await manager(h).ensureExists(guaranteed('u-4'));
      const refused = warnings.filter((l) => l.includes('Failed to enable a cgroup controller'));
      assert.equal(refused.length, V2_ROOT_CONTROLLERS.length);
      assert.equal(read(join(unified, 'kubepods', 'podu-4', 'cpu.weight')), '20');
    });

    it('lists and removes pod cgroups, children first', async () => {
      const h = layout('v2');
      const m = manager(h);
      const unified = join(h.root, 'unified');
      // cgroupfs lets rmdir take a directory of control files; a plain fs does not, so no files here.
      mkdirSync(join(unified, 'kubepods', 'burstable', 'poda', 'container-1'), { recursive: true });
      mkdirSync(join(unified, 'kubepods', 'podb'), { recursive: true });
      writeFileSync(join(unified, 'kubepods', 'pods-file-not-a-cgroup'), '');
      assert.deepEqual([...(await m.listPodCgroups())].sort(), [['a', '/kubepods/burstable/poda'], ['b', '/kubepods/podb']]);
      await m.remove('/kubepods/burstable/poda');
      assert.equal(existsSync(join(unified, 'kubepods', 'burstable', 'poda')), false);
      assert.equal(existsSync(join(unified, 'kubepods', 'burstable')), true, 'the QoS cgroup stays');
      await m.remove('/kubepods/burstable/poda'); // already gone: fine
    });
  });

  describe('cgroup v1 and hybrid', () => {
    for (const l of ['v1', 'hybrid'] as const) {
      it(`${l}: one directory per hierarchy (not cpuset) and each controller's own files`, async () => {
        const h = layout(l);
        const name = await manager(h, 512).ensureExists(guaranteed('u-5'));
        assert.equal(name, '/kubepods/podu-5');
        const at = (ctl: string): string => join(h.root, ctl, 'kubepods', 'podu-5');
        for (const ctl of ['cpu', 'cpuacct', 'memory', 'pids', 'blkio', 'devices', 'freezer', 'name=systemd']) assert.ok(existsSync(at(ctl)), ctl);
        assert.equal(existsSync(at('cpuset')), false, 'cpuset is left to runc');
        assert.equal(read(join(at('cpu'), 'cpu.shares')), '512');
        assert.equal(read(join(at('cpu'), 'cpu.cfs_period_us')), '100000');
        assert.equal(read(join(at('cpu'), 'cpu.cfs_quota_us')), '50000');
        assert.equal(read(join(at('memory'), 'memory.limit_in_bytes')), String(64 * 1024 * 1024));
        assert.equal(read(join(at('pids'), 'pids.max')), '512');
        assert.equal(existsSync(join(at('cpu'), 'cpu.weight')), false);
        if (l === 'hybrid') {
          // The hybrid cgroup2 mount holds no controllers: kubelet-ts leaves it alone.
          assert.equal(existsSync(join(h.root, 'unified', 'kubepods')), false);
          assert.equal(read(join(h.root, 'unified', 'cgroup.subtree_control')), '');
        }
      });
    }

    it('removes a pod cgroup from every hierarchy', async () => {
      const h = layout('hybrid');
      for (const ctl of ['memory', 'cpu', 'cpuset', 'unified']) mkdirSync(join(h.root, ctl, 'kubepods', 'besteffort', 'podz', 'c1'), { recursive: true });
      const m = manager(h);
      assert.deepEqual([...(await m.listPodCgroups())], [['z', '/kubepods/besteffort/podz']]);
      await m.remove('/kubepods/besteffort/podz');
      for (const ctl of ['memory', 'cpu', 'cpuset', 'unified']) assert.equal(existsSync(join(h.root, ctl, 'kubepods', 'besteffort', 'podz')), false, ctl);
    });
  });

  describe('resyncs', () => {
    for (const l of ['v2', 'hybrid'] as const) {
      it(`${l}: an unchanged pod's cgroup is not rewritten on resync; a removed one, or new limits, are applied again`, async () => {
        const h = layout(l);
        const m = manager(h);
        const name = await m.ensureExists(guaranteed('u-r'));
        const memDir = l === 'v2' ? join(h.root, 'unified', 'kubepods', 'podu-r') : join(h.root, 'memory', 'kubepods', 'podu-r');
        const memFile = join(memDir, l === 'v2' ? 'memory.max' : 'memory.limit_in_bytes');
        assert.equal(read(memFile), String(64 * 2 ** 20));
        // A marker in place of the limit: a resync that rewrote the file would replace it.
        writeFileSync(memFile, 'marker');
        assert.equal(await m.ensureExists(guaranteed('u-r')), name);
        assert.equal(read(memFile), 'marker', 'the resync did not write the limit again');
        // Other limits (a resize): written.
        const bigger = pod('u-r', [{ requests: { cpu: '500m', memory: '128Mi' }, limits: { cpu: '500m', memory: '128Mi' } }]);
        await m.ensureExists(bigger);
        assert.equal(read(memFile), String(128 * 2 ** 20));
        // Removed behind its back (plain files here: rmdir would refuse them): made again.
        await rm(memDir, { recursive: true, force: true });
        await m.ensureExists(bigger);
        assert.equal(read(memFile), String(128 * 2 ** 20));
      });
    }
  });

  describe('names from outside stay under the cgroup root', () => {
    for (const l of ['v1', 'v2', 'hybrid'] as const) {
      it(`${l}: uid "../../x" is refused before any mkdir`, async () => {
        const h = layout(l);
        const m = manager(h);
        for (const make of [guaranteed, burstable, bestEffort]) {
          await assert.rejects(m.ensureExists(make('../../x')), (e: unknown) => e instanceof PathEscapeError && e.code === 'ERR_PATH_ESCAPE');
          assert.throws(() => m.podCgroupName(make('../../x')), PathEscapeError);
        }
        for (const uid of ['..', '.', '', 'a/b', 'x\0y']) await assert.rejects(m.ensureExists(guaranteed(uid)), PathEscapeError, JSON.stringify(uid));
        // Nothing was created: no kubepods, and nothing beside the hierarchies.
        for (const hier of readdirSync(h.root)) {
          assert.deepEqual(readdirSync(join(h.root, hier)).filter((e) => !e.startsWith('cgroup.')), [], hier);
        }
        assert.equal(existsSync(join(dir, 'x')), false);
      });
    }

    it('remove refuses a name that is not a pod cgroup and leaves what it names in place', async () => {
      const h = layout('v1');
      const m = manager(h);
      const victim = join(h.root, 'memory', 'victim');
      mkdirSync(victim);
      for (const bad of ['/kubepods/burstable/../../victim', '/kubepods/pod../../victim', '/victim', '/kubepods/burstable/pod', '/kubepods/pod..', 'podx']) {
        await assert.rejects(m.remove(bad), (e: unknown) => e instanceof PodCgroupError || e instanceof PathEscapeError, bad);
      }
      assert.ok(existsSync(victim), 'the directory outside kubepods is still there');
    });

    it('honours cgroupRoot: pods live under <cgroupRoot>/kubepods', async () => {
      const h = layout('v2');
      const m = new PodContainerManager({ mounts: h.mounts, cgroupRoot: '/kts/', log: createLogger() });
      assert.equal(await m.ensureExists(bestEffort('u-6')), '/kts/kubepods/besteffort/podu-6');
      assert.equal(read(join(h.root, 'unified', 'kts', 'cgroup.subtree_control')), ALL_ON);
      assert.ok(existsSync(join(h.root, 'unified', 'kts', 'kubepods', 'besteffort', 'podu-6', 'cpu.weight')));
      await assert.rejects(m.remove('/kubepods/besteffort/podu-6'), PodCgroupError);
    });
  });
});

describe('pod cgroup names from any UID', () => {
  it('either refuse the UID or stay one component below the QoS cgroup (fast-check)', () => {
    const m = new PodContainerManager({ mounts: { v1: {}, unified: { mountPoint: '/sys/fs/cgroup', root: '/' } }, cgroupRoot: '', log: createLogger() });
    const pieces = fc.constantFrom('/', '..', '.', '\0', 'a', '-', '%2e', '\\', ' ');
    const uid = fc.oneof(fc.string(), fc.array(pieces, { maxLength: 8 }).map((a) => a.join('')));
    fc.assert(fc.property(uid, (u) => {
      let name: string;
      try {
        name = m.podCgroupName(bestEffort(u));
      } catch (e) {
        return e instanceof PathEscapeError;
      }
      return name === `/kubepods/besteffort/pod${u}` && !u.includes('/') && u !== '.' && u !== '..' && u !== '';
    }), { numRuns: 5000 });
  });
});

describe('pod cgroup names of one spec seen with and without a recorded QoS class', () => {
  it('follow the QoS class the pod object carries each time (the stats see pods with their status, the syncs without)', () => {
    const m = new PodContainerManager({ mounts: { v1: {}, unified: { mountPoint: '/sys/fs/cgroup', root: '/' } }, cgroupRoot: '', log: createLogger() });
    const p = bestEffort('u1');
    const withStatus = { ...p, status: { qosClass: 'Burstable' } } as Pod;
    for (let i = 0; i < 2; i++) {
      assert.equal(m.podCgroupName(p), '/kubepods/besteffort/podu1');
      assert.equal(m.podCgroupName(withStatus), '/kubepods/burstable/podu1');
    }
    // another pod object with the same spec but another UID is not mistaken for the first
    assert.equal(m.podCgroupName({ ...p, metadata: { ...p.metadata, uid: 'u2' } }), '/kubepods/besteffort/podu2');
  });
});
