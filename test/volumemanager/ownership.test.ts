// fsGroup ownership (upstream SetVolumeOwnership): group and group bits on every entry, setgid
// directories, links changed but never followed, and OnRootMismatch skipping a done volume.

import assert from 'node:assert/strict';
import { chmod, lstat, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { FakeClock } from '../../src/util/clock.js';
import type { Mounter, MountPoint } from '../../src/volumemanager/mounter.js';
import { requiresPermissionChange, setVolumeOwnership } from '../../src/volumemanager/ownership.js';
import { VolumeManager } from '../../src/volumemanager/volume-manager.js';
import { loggerDouble } from '../kubelet/doubles.js';

// unprivileged, only the own group can be given; as root any
const GID = process.getuid?.() === 0 ? 4242 : process.getgid!();

const fakeMounter = (): Mounter => {
  const mounts: MountPoint[] = [];
  return {
    mountTmpfs: async (t) => void mounts.push({ mountPoint: t, fsType: 'tmpfs' }),
    unmount: async () => undefined,
    list: async () => [...mounts],
  };
};

let base: string;
before(async () => { base = await mkdtemp(join(tmpdir(), 'kts-own-')); });
after(async () => { await rm(base, { recursive: true, force: true }); });

async function tree(name: string): Promise<{ dir: string; outside: string }> {
  const dir = join(base, name, 'vol');
  const outside = join(base, name, 'outside');
  await mkdir(join(dir, 'sub'), { recursive: true, mode: 0o755 });
  await chmod(dir, 0o755);
  await writeFile(join(dir, 'a'), 'a', { mode: 0o644 });
  await chmod(join(dir, 'a'), 0o644);
  await writeFile(join(dir, 'sub', 'b'), 'b');
  await chmod(join(dir, 'sub', 'b'), 0o400);
  await writeFile(outside, 'x');
  await chmod(outside, 0o600);
  await symlink(outside, join(dir, 'link'));
  return { dir, outside };
}

const perm = async (p: string): Promise<number> => (await stat(p)).mode & 0o7777;

describe('setVolumeOwnership', () => {
  it('gives every entry the group and group read/write bits; directories setgid and x; links not followed', async () => {
    const { dir, outside } = await tree('always');
    const outsideBefore = await stat(outside);
    assert.equal(await setVolumeOwnership(dir, GID, false), true);
    assert.equal(await perm(dir), 0o2775);
    assert.equal(await perm(join(dir, 'sub')), 0o2775);
    assert.equal(await perm(join(dir, 'a')), 0o664);
    assert.equal(await perm(join(dir, 'sub', 'b')), 0o660);
    for (const p of [dir, join(dir, 'a'), join(dir, 'sub', 'b')]) assert.equal((await stat(p)).gid, GID, p);
    assert.equal((await lstat(join(dir, 'link'))).gid, GID);
    const outsideAfter = await stat(outside);
    assert.deepEqual([outsideAfter.gid, outsideAfter.mode], [outsideBefore.gid, outsideBefore.mode]);
  });

  it('read-only volumes get group read only: a 0600 token becomes 0640', async () => {
    const dir = join(base, 'ro');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'token'), 't');
    await chmod(join(dir, 'token'), 0o600);
    await setVolumeOwnership(dir, GID, true);
    assert.equal(await perm(join(dir, 'token')), 0o640);
  });

  it('OnRootMismatch skips a volume whose root is done, and walks one whose root is not; Always always walks', async () => {
    const { dir } = await tree('policy');
    assert.equal(await requiresPermissionChange(dir, GID, false), true);
    await setVolumeOwnership(dir, GID, false, 'OnRootMismatch');
    assert.equal(await requiresPermissionChange(dir, GID, false), false);
    await writeFile(join(dir, 'late'), 'l');
    await chmod(join(dir, 'late'), 0o600);
    assert.equal(await setVolumeOwnership(dir, GID, false, 'OnRootMismatch'), false);
    assert.equal(await perm(join(dir, 'late')), 0o600);
    await chmod(dir, 0o755);
    assert.equal(await setVolumeOwnership(dir, GID, false, 'OnRootMismatch'), true);
    assert.equal(await perm(join(dir, 'late')), 0o660);
    await chmod(join(dir, 'late'), 0o600);
    assert.equal(await setVolumeOwnership(dir, GID, false, 'Always'), true);
    assert.equal(await perm(join(dir, 'late')), 0o660);
  });

  it('does nothing without an fsGroup', async () => {
    const { dir } = await tree('none');
    assert.equal(await setVolumeOwnership(dir, undefined, false), false);
    assert.equal(await perm(join(dir, 'a')), 0o644);
  });
});

describe('fsGroup through the volume manager', () => {
  const podWith = (volumes: Pod['spec']['volumes'], uid: string): Pod => ({
    metadata: { name: 'web', namespace: 'default', uid, labels: { a: 'b' } },
    spec: { volumes, containers: [{ name: 'app' }], securityContext: { fsGroup: GID } },
  }) as Pod;

  it('an emptyDir is given to the fsGroup when set up, once (ready marker), and left alone after', async () => {
    const rootDir = join(base, 'vm-ed');
    const vm = new VolumeManager({ rootDir, clock: new FakeClock(), log: loggerDouble(), nodeName: 'n1', hostIPs: () => [], mounter: fakeMounter() });
    const p = podWith([{ name: 'cache', emptyDir: {} }], 'u-ed');
    const dir = (await vm.mountPod(p)).get('cache')!.hostPath;
    assert.equal((await stat(dir)).gid, GID);
    assert.equal(await perm(dir), 0o2777);
    assert.ok((await stat(join(rootDir, 'pods', 'u-ed', 'plugins', 'kubernetes.io~empty-dir', 'cache', 'ready'))).isFile());
    await chmod(dir, 0o700);
    await vm.mountPod(p);
    assert.equal(await perm(dir), 0o700, 'a ready emptyDir is not set up again');
  });

  it('downwardAPI files get the group and group read', async () => {
    const vm = new VolumeManager({ rootDir: join(base, 'vm-dw'), clock: new FakeClock(), log: loggerDouble(), nodeName: 'n1', hostIPs: () => [], mounter: fakeMounter() });
    const p = podWith([{ name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' }, mode: 0o600 }] } }], 'u-dw');
    const dir = (await vm.mountPod(p)).get('info')!.hostPath;
    assert.equal(await perm(join(dir, 'labels')), 0o640);
    assert.equal((await stat(join(dir, 'labels'))).gid, GID);
  });
});
