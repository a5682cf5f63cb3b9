// The subPath bind mounts for real (root, no runtime): where they go, reuse after a restart,
// replacement, and cleanup on teardown and of an orphaned pod directory, nothing followed
// through a symlink and nothing left mounted.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../../src/util/clock.js';
import { nativeSubpath, nativeSubPathMounter } from '../../src/volumemanager/subpath.js';
import { VolumeManager } from '../../src/volumemanager/volume-manager.js';
import { loggerDouble } from '../kubelet/doubles.js';

const mountsUnder = (dir: string): string[] =>
  readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')[4]!).filter((p) => p === dir || p.startsWith(`${dir}/`));

describe('subPath bind mounts', () => {
  const addon = nativeSubpath();
  let base: string;
  let rootDir: string;
  let outside: string;

  before(async () => {
    assert.ok(addon, 'the native addon has the subpath exports');
    base = await mkdtemp(join(tmpdir(), 'kts-subpath-mounts-'));
    rootDir = join(base, 'kubelet');
    outside = join(base, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'precious'), 'keep me');
  });

  after(async () => {
    // a failed test leaves its mounts: take them away before looking
    for (const uid of await readdir(join(rootDir, 'pods')).catch(() => [])) await addon?.subpathClean(join(rootDir, 'pods', uid)).catch(() => undefined);
    const left = mountsUnder(base);
    if (left.length === 0) await rm(base, { recursive: true, force: true });
    assert.deepEqual(left, [], 'mounts left under the test directory');
  });

  async function podWithVolume(uid: string): Promise<{ podDir: string; vol: string }> {
    const podDir = join(rootDir, 'pods', uid);
    const vol = join(podDir, 'volumes', 'kubernetes.io~empty-dir', 'data');
    await mkdir(join(vol, 'dir'), { recursive: true });
    await writeFile(join(vol, 'dir', 'in-dir'), 'dir content');
    await writeFile(join(vol, 'file'), 'file content');
    return { podDir, vol };
  }

  it('mounts a directory and a file at volume-subpaths/<volume>/<container>/<index>, of the same type as the source', async () => {
    const { podDir, vol } = await podWithVolume('p1');
    const req = { volumePath: vol, podDir, volumeName: 'data', containerName: 'app' };
    const d = await addon!.subpathBind({ ...req, subPath: 'dir', index: 0 });
    const f = await addon!.subpathBind({ ...req, subPath: 'file', index: 2 });
    assert.deepEqual([d, f], [
      { hostPath: join(podDir, 'volume-subpaths', 'data', 'app', '0'), reused: false },
      { hostPath: join(podDir, 'volume-subpaths', 'data', 'app', '2'), reused: false },
    ]);
    assert.deepEqual(mountsUnder(join(podDir, 'volume-subpaths')), [d.hostPath, f.hostPath]);
    assert.equal(await readFile(join(d.hostPath, 'in-dir'), 'utf8'), 'dir content');
    assert.equal(await readFile(f.hostPath, 'utf8'), 'file content');
    assert.equal((await stat(d.hostPath)).ino, (await stat(join(vol, 'dir'))).ino);
    // a missing subPath is made first, inside the volume
    const made = await addon!.subpathBind({ ...req, subPath: 'new/deeper', index: 3 });
    assert.ok((await stat(join(vol, 'new', 'deeper'))).isDirectory());
    assert.equal((await stat(made.hostPath)).ino, (await stat(join(vol, 'new', 'deeper'))).ino);

    const vm = new VolumeManager({ rootDir, clock: new FakeClock(), log: loggerDouble(), nodeName: 'n1', hostIPs: () => [] });
    await vm.unmountPod('p1');
    assert.deepEqual(mountsUnder(podDir), []);
    await assert.rejects(lstat(join(podDir, 'volume-subpaths')), { code: 'ENOENT' });
    assert.equal(await readFile(join(vol, 'file'), 'utf8'), 'file content', 'the volume itself is untouched');
  });

  it('reuses the mount of the same directory (a container or kubelet-ts restarted) and replaces one of another directory', async () => {
    const { podDir, vol } = await podWithVolume('p2');
    const req = { volumePath: vol, podDir, volumeName: 'data', containerName: 'app', subPath: 'dir', index: 1 };
    const first = await addon!.subpathBind(req);
    assert.deepEqual(await addon!.subpathBind(req), { hostPath: first.hostPath, reused: true });
    assert.deepEqual(mountsUnder(first.hostPath), [first.hostPath]);
    // the container put another directory under the same name
    await rename(join(vol, 'dir'), join(vol, 'old-dir'));
    await mkdir(join(vol, 'dir'));
    await writeFile(join(vol, 'dir', 'second'), '2');
    assert.deepEqual(await addon!.subpathBind(req), { hostPath: first.hostPath, reused: false });
    assert.deepEqual(mountsUnder(first.hostPath), [first.hostPath], 'the old mount was replaced, not stacked');
    assert.deepEqual(await readdir(first.hostPath), ['second']);
    // a file now where a directory was: the target becomes a file
    await rm(join(vol, 'dir'), { recursive: true });
    await writeFile(join(vol, 'dir'), 'now a file');
    await addon!.subpathBind(req);
    assert.equal(await readFile(first.hostPath, 'utf8'), 'now a file');
    assert.deepEqual(mountsUnder(first.hostPath), [first.hostPath]);
    const m = nativeSubPathMounter()!;
    assert.deepEqual(await m.clean(podDir), [first.hostPath]);
    assert.deepEqual(mountsUnder(podDir), []);
  });

  it('a subPath out of the volume mounts nothing and leaves no target', async () => {
    const { podDir, vol } = await podWithVolume('p3');
    await symlink(outside, join(vol, 'escape'));
    await symlink('/', join(vol, 'root'));
    for (const subPath of ['escape', 'root', 'escape/precious', 'dir/../../..']) {
      await assert.rejects(addon!.subpathBind({ volumePath: vol, podDir, volumeName: 'data', containerName: 'app', subPath, index: 0 }));
    }
    assert.deepEqual(mountsUnder(podDir), []);
    assert.deepEqual(await readdir(join(podDir, 'volume-subpaths', 'data', 'app')).catch(() => []), []);
    await nativeSubPathMounter()!.clean(podDir);
  });

  it('cleanup never follows a symlink put in place of a mount point and never removes a directory recursively', async () => {
    const { podDir, vol } = await podWithVolume('p4');
    const sp = join(podDir, 'volume-subpaths', 'data', 'app');
    await addon!.subpathBind({ volumePath: vol, podDir, volumeName: 'data', containerName: 'app', subPath: 'dir', index: 0 });
    await symlink(outside, join(sp, '1'));
    await mkdir(join(sp, '2'));
    await writeFile(join(sp, '2', 'not-ours'), 'x');
    const r = await addon!.subpathClean(podDir);
    assert.deepEqual(r.unmounted, [join(sp, '0')]);
    assert.equal(r.errors.length, 1, r.errors.join('\n'));
    assert.match(r.errors[0]!, /remove '.*\/app\/2': Directory not empty/);
    assert.equal(await readFile(join(outside, 'precious'), 'utf8'), 'keep me');
    await assert.rejects(lstat(join(sp, '1')), { code: 'ENOENT' }, 'the symlink itself is gone');
    assert.equal(await readFile(join(sp, '2', 'not-ours'), 'utf8'), 'x');
    await assert.rejects(nativeSubPathMounter()!.clean(podDir), /cleaning up subpath mounts of .* failed: remove/);
    await rm(join(sp, '2'), { recursive: true });
    assert.deepEqual(await addon!.subpathClean(podDir), { unmounted: [], errors: [] });
    assert.deepEqual(mountsUnder(podDir), []);
  });

  it('after a restart, an orphaned pod\'s subPath mounts are unmounted before its directory goes; a terminated pod\'s on teardown', async () => {
    const orphan = await podWithVolume('orphan');
    const kept = await podWithVolume('kept');
    for (const p of [orphan, kept]) {
      for (const [i, subPath] of ['dir', 'file'].entries()) {
        await addon!.subpathBind({ volumePath: p.vol, podDir: p.podDir, volumeName: 'data', containerName: 'app', subPath, index: i });
      }
    }
    assert.equal(mountsUnder(join(rootDir, 'pods')).length, 4);
    // a new VolumeManager: the state is what is on disk and in the mount table
    const lines: string[] = [];
    const vm = new VolumeManager({ rootDir, clock: new FakeClock(), log: loggerDouble(lines), nodeName: 'n1', hostIPs: () => [] });
    assert.deepEqual(await vm.cleanupOrphanedPodDirs(new Set(['kept', 'p1', 'p2', 'p3', 'p4'])), ['orphan']);
    await assert.rejects(lstat(orphan.podDir), { code: 'ENOENT' });
    assert.deepEqual(mountsUnder(orphan.podDir), []);
    assert.equal(lines.filter((l) => l === 'I Unmounted subPath').length, 2);
    assert.equal(mountsUnder(kept.podDir).length, 2, 'a pod still wanted keeps its mounts');
    await vm.tearDownPodVolumes('kept');
    assert.deepEqual(mountsUnder(kept.podDir), []);
    await assert.rejects(lstat(join(kept.podDir, 'volume-subpaths')), { code: 'ENOENT' });
    await rm(kept.podDir, { recursive: true });
  });
});
