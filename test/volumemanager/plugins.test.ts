// The volume plugins on temp dirs (no root): hostPath types, emptyDir (tmpfs through a fake
// mounter), downwardAPI, refused sources, and teardown of mounts under the pod dir.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { setUpHostPath } from '../../src/volumemanager/host-path.js';
import { setUpEmptyDir } from '../../src/volumemanager/empty-dir.js';
import { VolumeManager } from '../../src/volumemanager/volume-manager.js';
import { VolumeMountError, VolumeSetupError } from '../../src/volumemanager/errors.js';
import { parseMountInfo, type Mounter, type MountPoint } from '../../src/volumemanager/mounter.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

class FakeMounter implements Mounter {
  readonly mounts: MountPoint[] = [];
  readonly calls: string[] = [];
  async mountTmpfs(target: string, sizeBytes?: number): Promise<void> {
    this.calls.push(`tmpfs ${target} ${sizeBytes ?? '-'}`);
    this.mounts.push({ mountPoint: target, fsType: 'tmpfs' });
  }
  async unmount(target: string): Promise<void> {
    this.calls.push(`umount ${target}`);
    const i = this.mounts.findIndex((m) => m.mountPoint === target);
    if (i >= 0) this.mounts.splice(i, 1);
  }
  async list(): Promise<MountPoint[]> {
    return [...this.mounts];
  }
}

function pod(volumes: Pod['spec']['volumes'], extra: Partial<Pod['spec']> = {}): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'default', uid: 'uid-1', labels: { app: 'web', tier: 'front' }, annotations: { note: 'a "quoted" value' } },
    spec: { volumes, containers: [{ name: 'app', image: 'busybox', resources: { limits: { memory: '64Mi', cpu: '250m' } } }], ...extra },
  } as Pod;
}

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-vol-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

describe('hostPath', () => {
  it('DirectoryOrCreate makes a missing directory 0755 and accepts an existing one', async () => {
    const p = join(root, 'hp', 'a', 'b');
    assert.equal(await setUpHostPath('data', { path: p, type: 'DirectoryOrCreate' }), p);
    const st = await stat(p);
    assert.ok(st.isDirectory());
    assert.equal(st.mode & 0o777, 0o755 & ~process.umask());
    assert.equal(await setUpHostPath('data', { path: p, type: 'DirectoryOrCreate' }), p);
  });

  it('DirectoryOrCreate over a file is "not a directory"', async () => {
    const f = join(root, 'hp-file');
    await writeFile(f, 'x');
    await assert.rejects(setUpHostPath('data', { path: f, type: 'DirectoryOrCreate' }), { message: `hostPath type check failed: ${f} is not a directory` });
  });

  it('FileOrCreate makes an empty 0644 file and keeps an existing file, but not a missing parent', async () => {
    await assert.rejects(setUpHostPath('f', { path: join(root, 'no-parent', 'file'), type: 'FileOrCreate' }), /ENOENT/);
    await mkdir(join(root, 'hp2', 'sub'), { recursive: true });
    const f = join(root, 'hp2', 'sub', 'file');
    await setUpHostPath('f', { path: f, type: 'FileOrCreate' });
    const st = await stat(f);
    assert.ok(st.isFile());
    assert.equal(st.mode & 0o777, 0o644 & ~process.umask());
    await writeFile(f, 'kept');
    await setUpHostPath('f', { path: f, type: 'FileOrCreate' });
    assert.equal(await readFile(f, 'utf8'), 'kept');
  });

  const cases: [string, string][] = [
    ['Directory', 'a directory'],
    ['File', 'a file'],
    ['Socket', 'a socket file'],
    ['CharDevice', 'a character device'],
    ['BlockDevice', 'a block device'],
  ];
  for (const [type, what] of cases) {
    it(`${type} refuses a missing path with upstream's message and creates nothing`, async () => {
      const p = join(root, `missing-${type}`);
      await assert.rejects(setUpHostPath('v', { path: p, type }), (err: unknown) => {
        assert.ok(err instanceof VolumeSetupError);
        assert.equal(err.message, `hostPath type check failed: ${p} is not ${what}`);
        assert.equal(err.volume, 'v');
        return true;
      });
      await assert.rejects(stat(p));
    });
  }

  it('accepts each type on the right kind of file', async () => {
    const dir = join(root, 'kinds');
    await mkdir(dir);
    const file = join(dir, 'f');
    await writeFile(file, '');
    const sock = join(dir, 's.sock');
    const server = createServer();
    await new Promise<void>((r) => server.listen(sock, r));
    try {
      await setUpHostPath('v', { path: dir, type: 'Directory' });
      await setUpHostPath('v', { path: file, type: 'File' });
      await setUpHostPath('v', { path: sock, type: 'Socket' });
      await setUpHostPath('v', { path: '/dev/null', type: 'CharDevice' });
      await assert.rejects(setUpHostPath('v', { path: file, type: 'Directory' }), /is not a directory/);
      await assert.rejects(setUpHostPath('v', { path: dir, type: 'File' }), /is not a file/);
      await assert.rejects(setUpHostPath('v', { path: file, type: 'Socket' }), /is not a socket file/);
      await assert.rejects(setUpHostPath('v', { path: file, type: 'CharDevice' }), /is not a character device/);
      await assert.rejects(setUpHostPath('v', { path: '/dev/null', type: 'BlockDevice' }), /is not a block device/);
    } finally {
      server.close();
    }
  });

  it('an unset type checks nothing, even a missing path', async () => {
    const p = join(root, 'unset-missing');
    assert.equal(await setUpHostPath('v', { path: p, type: '' }), p);
    await assert.rejects(stat(p));
  });

  it('refuses a relative path and an unknown type', async () => {
    await assert.rejects(setUpHostPath('v', { path: 'rel/path' }), /not an absolute path/);
    await assert.rejects(setUpHostPath('v', { path: root, type: 'Weird' }), { message: 'Weird is an invalid volume type' });
  });
});

describe('emptyDir', () => {
  it('is a 0777 directory under volumes/kubernetes.io~empty-dir/<name>', async () => {
    const mounter = new FakeMounter();
    const podDirectory = join(root, 'pods', 'p1');
    const dir = await setUpEmptyDir(podDirectory, 'cache', {}, mounter);
    assert.equal(dir, join(podDirectory, 'volumes', 'kubernetes.io~empty-dir', 'cache'));
    assert.equal((await stat(dir)).mode & 0o777, 0o777);
    assert.deepEqual(mounter.calls, []);
  });

  it('medium Memory mounts a tmpfs capped at sizeLimit, once', async () => {
    const mounter = new FakeMounter();
    const podDirectory = join(root, 'pods', 'p2');
    const dir = await setUpEmptyDir(podDirectory, 'shm', { medium: 'Memory', sizeLimit: '64Mi' }, mounter);
    await setUpEmptyDir(podDirectory, 'shm', { medium: 'Memory', sizeLimit: '64Mi' }, mounter);
    assert.deepEqual(mounter.calls, [`tmpfs ${dir} ${64 * 1024 * 1024}`]);
  });

  it('refuses a volume name that would leave the pod directory, and HugePages', async () => {
    const mounter = new FakeMounter();
    await assert.rejects(setUpEmptyDir(join(root, 'pods', 'p3'), '..', {}, mounter), /relative reference/);
    await assert.rejects(setUpEmptyDir(join(root, 'pods', 'p3'), 'hp', { medium: 'HugePages' }, mounter), /not supported/);
  });
});

describe('VolumeManager', () => {
  const manager = (mounter: Mounter): VolumeManager =>
    new VolumeManager({ rootDir: root, clock: new FakeClock(Date.UTC(2024, 0, 2, 3, 4, 5)), log: loggerDouble(), nodeName: 'n1', hostIPs: () => ['10.0.0.1'], mounter });

  it('sets up emptyDir, hostPath and downwardAPI and reports where each is', async () => {
    const hp = join(root, 'vm-host');
    const p = pod([
      { name: 'cache', emptyDir: {} },
      { name: 'data', hostPath: { path: hp, type: 'DirectoryOrCreate' } },
      { name: 'info', downwardAPI: { defaultMode: 0o644, items: [
        { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
        { path: 'annotations', fieldRef: { fieldPath: 'metadata.annotations' } },
        { path: 'sub/name', fieldRef: { fieldPath: 'metadata.name' }, mode: 0o600 },
        { path: 'mem', resourceFieldRef: { containerName: 'app', resource: 'limits.memory', divisor: '1Mi' } },
        { path: 'cpu', resourceFieldRef: { containerName: 'app', resource: 'limits.cpu', divisor: '1m' } },
      ] } },
    ]);
    const vols = await manager(new FakeMounter()).mountPod(p);
    const podDirectory = join(root, 'pods', 'uid-1');
    assert.deepEqual(vols.get('cache'), { plugin: 'kubernetes.io~empty-dir', hostPath: join(podDirectory, 'volumes', 'kubernetes.io~empty-dir', 'cache'), readOnly: false });
    assert.deepEqual(vols.get('data'), { plugin: 'kubernetes.io~host-path', hostPath: hp, readOnly: false });
    const info = vols.get('info')!;
    assert.equal(info.hostPath, join(podDirectory, 'volumes', 'kubernetes.io~downward-api', 'info'));
    assert.equal(info.readOnly, true);
    assert.equal(await readFile(join(info.hostPath, 'labels'), 'utf8'), 'app="web"\ntier="front"');
    assert.equal(await readFile(join(info.hostPath, 'annotations'), 'utf8'), 'note="a \\"quoted\\" value"');
    assert.equal(await readFile(join(info.hostPath, 'sub', 'name'), 'utf8'), 'web');
    assert.equal((await stat(join(info.hostPath, 'sub', 'name'))).mode & 0o777, 0o600);
    assert.equal(await readFile(join(info.hostPath, 'mem'), 'utf8'), '64');
    assert.equal(await readFile(join(info.hostPath, 'cpu'), 'utf8'), '250');
    assert.equal(await readlink(join(info.hostPath, 'labels')), '..data/labels');
  });

  for (const [kind, source, why] of [
    ['persistentVolumeClaim', { claimName: 'c' }, /persistentVolumeClaim volumes are not supported/],
    ['csi', { driver: 'x' }, /csi volumes are not supported/],
    ['nfs', { server: 's', path: '/' }, /nfs volumes are not supported/],
  ] as const) {
    it(`refuses a ${kind} volume with a FailedMount naming the pod, the volume and why`, async () => {
      const p = pod([{ name: 'ok', emptyDir: {} }, { name: `v-${kind}`, [kind]: source }]);
      await assert.rejects(manager(new FakeMounter()).mountPod(p), (err: unknown) => {
        assert.ok(err instanceof VolumeMountError);
        assert.equal(err.code, 'FailedMount');
        assert.match(err.message, new RegExp(`^Unable to attach or mount volumes: unmounted volumes=\\[v-${kind}\\], unattached volumes=\\[\\], failed to process volumes=\\[v-${kind}\\]: volume "v-${kind}" of pod default/web: `));
        assert.match(err.message, why);
        return true;
      });
    });
  }

  for (const [kind, source, object] of [
    ['configMap', { name: 'cfg' }, 'configmap "default/cfg"'],
    ['secret', { secretName: 's' }, 'secret "default/s"'],
    ['projected', { sources: [{ configMap: { name: 'pc' } }] }, 'configmap "default/pc"'],
  ] as const) {
    it(`standalone: a ${kind} volume fails as upstream, naming the volume and the object`, async () => {
      const p = pod([{ name: 'ok', emptyDir: {} }, { name: `v-${kind}`, [kind]: source }]);
      await assert.rejects(manager(new FakeMounter()).mountPod(p), (err: unknown) => {
        assert.ok(err instanceof VolumeMountError);
        assert.equal(err.code, 'FailedMount');
        assert.ok(err.message.endsWith(`failed to process volumes=[v-${kind}]: MountVolume.SetUp failed for volume "v-${kind}" : ${object}: not supported due to running kubelet in standalone mode`), err.message);
        return true;
      });
    });
  }

  it('unmountPod unmounts every mount under the pod dir, deepest first, and nothing else', async () => {
    const mounter = new FakeMounter();
    const podDirectory = join(root, 'pods', 'uid-9');
    mounter.mounts.push(
      { mountPoint: `${podDirectory}/volumes/kubernetes.io~empty-dir/a`, fsType: 'tmpfs' },
      { mountPoint: `${podDirectory}/volumes/kubernetes.io~empty-dir/a/nested`, fsType: 'tmpfs' },
      { mountPoint: `${podDirectory}-other/volumes/x`, fsType: 'tmpfs' },
      { mountPoint: '/', fsType: 'ext4' },
    );
    await manager(mounter).unmountPod('uid-9');
    assert.deepEqual(mounter.calls, [
      `umount ${podDirectory}/volumes/kubernetes.io~empty-dir/a/nested`,
      `umount ${podDirectory}/volumes/kubernetes.io~empty-dir/a`,
    ]);
    assert.equal(mounter.mounts.length, 2);
  });

  it('refuses a pod UID that would leave <rootDir>/pods', async () => {
    await assert.rejects(manager(new FakeMounter()).unmountPod('../etc'), /relative reference|contains/);
  });
});

describe('parseMountInfo', () => {
  it('reads the mount point and type, unescaping spaces', () => {
    const text = '36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n'
      + '40 25 0:34 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/shm rw,relatime shared:5 - tmpfs tmpfs rw,size=65536k\n';
    assert.deepEqual(parseMountInfo(text), [
      { mountPoint: '/mnt/with space', fsType: 'ext3' },
      { mountPoint: '/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/shm', fsType: 'tmpfs' },
    ]);
  });
});


