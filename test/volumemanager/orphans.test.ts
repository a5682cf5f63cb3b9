// After a restart: the volumes rebuilt from disk, and orphaned pod directories removed (mounts
// first, never through a symlink, never a pod another party still has).

import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../../src/util/clock.js';
import type { Mounter, MountPoint } from '../../src/volumemanager/mounter.js';
import { VolumeManager } from '../../src/volumemanager/volume-manager.js';
import { loggerDouble } from '../kubelet/doubles.js';

class FakeMounter implements Mounter {
  readonly mounts: MountPoint[] = [];
  readonly calls: string[] = [];
  failUnmount = false;
  async mountTmpfs(target: string): Promise<void> {
    this.mounts.push({ mountPoint: target, fsType: 'tmpfs' });
  }
  async unmount(target: string): Promise<void> {
    this.calls.push(`umount ${target}`);
    if (this.failUnmount) throw new Error(`umount ${target}: target is busy`);
    const i = this.mounts.findIndex((m) => m.mountPoint === target);
    if (i >= 0) this.mounts.splice(i, 1);
  }
  async list(): Promise<MountPoint[]> {
    return [...this.mounts];
  }
}

let base: string;
before(async () => { base = await mkdtemp(join(tmpdir(), 'kts-orphan-')); });
after(async () => { await rm(base, { recursive: true, force: true }); });

async function layout(name: string): Promise<{ root: string; outside: string; mounter: FakeMounter; vm: VolumeManager; lines: string[] }> {
  const root = join(base, name, 'kubelet');
  const outside = join(base, name, 'outside');
  await mkdir(outside, { recursive: true });
  await writeFile(join(outside, 'precious'), 'keep me');
  const secret = join(root, 'pods', 'orphan', 'volumes', 'kubernetes.io~secret', 's');
  await mkdir(secret, { recursive: true });
  await writeFile(join(secret, 'password'), 'pw');
  const ed = join(root, 'pods', 'orphan', 'volumes', 'kubernetes.io~empty-dir', 'x');
  await mkdir(ed, { recursive: true });
  await symlink(outside, join(ed, 'link'));
  await symlink(join(outside, 'precious'), join(ed, 'file-link'));
  await mkdir(join(root, 'pods', 'alive', 'volumes', 'kubernetes.io~configmap', 'c'), { recursive: true });
  await symlink(outside, join(root, 'pods', 'linked'));
  const mounter = new FakeMounter();
  mounter.mounts.push({ mountPoint: secret, fsType: 'tmpfs' }, { mountPoint: '/', fsType: 'ext4' });
  const lines: string[] = [];
  const vm = new VolumeManager({ rootDir: root, clock: new FakeClock(), log: loggerDouble(lines), nodeName: 'n1', hostIPs: () => [], mounter });
  return { root, outside, mounter, vm, lines };
}

describe('volume reconstruction and orphan cleanup', () => {
  it('rebuilds the volumes from disk with their tmpfs, not following a symlinked pod dir', async () => {
    const { root, vm } = await layout('recon');
    const found = await vm.reconstruct();
    assert.deepEqual([...found.keys()].sort(), ['alive', 'orphan']);
    assert.deepEqual(found.get('orphan')!.map((v) => [v.plugin, v.name, v.tmpfs]).sort(), [
      ['kubernetes.io~empty-dir', 'x', false],
      ['kubernetes.io~secret', 's', true],
    ]);
    assert.deepEqual(found.get('alive'), [{ plugin: 'kubernetes.io~configmap', name: 'c', path: join(root, 'pods', 'alive', 'volumes', 'kubernetes.io~configmap', 'c'), tmpfs: false }]);
  });

  it('unmounts an orphan\'s tmpfs, removes its directory without following links out, unlinks a symlinked pod dir, keeps the rest', async () => {
    const { root, outside, mounter, vm } = await layout('clean');
    const removed = await vm.cleanupOrphanedPodDirs(new Set(['alive']));
    assert.deepEqual(removed.sort(), ['linked', 'orphan']);
    assert.deepEqual(mounter.calls, [`umount ${join(root, 'pods', 'orphan', 'volumes', 'kubernetes.io~secret', 's')}`]);
    assert.deepEqual((await readdir(join(root, 'pods'))).sort(), ['alive']);
    assert.equal(await readFile(join(outside, 'precious'), 'utf8'), 'keep me');
    assert.ok((await lstat(outside)).isDirectory());
  });

  it('keeps an orphan whose mount cannot be removed', async () => {
    const { root, mounter, vm, lines } = await layout('busy');
    mounter.failUnmount = true;
    const removed = await vm.cleanupOrphanedPodDirs(new Set(['alive']));
    assert.deepEqual(removed, ['linked']);
    assert.ok((await lstat(join(root, 'pods', 'orphan', 'volumes', 'kubernetes.io~secret', 's', 'password'))).isFile());
    assert.ok(lines.some((l) => l.startsWith('W Orphaned pod directory not removed')), lines.join('\n'));
  });

  it('does nothing without a pods directory', async () => {
    const vm = new VolumeManager({ rootDir: join(base, 'none'), clock: new FakeClock(), log: loggerDouble(), nodeName: 'n1', hostIPs: () => [], mounter: new FakeMounter() });
    assert.deepEqual(await vm.cleanupOrphanedPodDirs(new Set()), []);
  });
});
