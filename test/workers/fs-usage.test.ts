// The du-like walk (workers/fs-usage.ts) on a temporary tree: allocated bytes at least the data
// written, every inode once (hard links too), symlinks counted but never followed, one figure
// per <plugin>/<name> for a pod's volumes dir, and nothing for a path that is gone.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import task, { walk } from '../../workers/fs-usage.js';

const KiB = 1024;

test('fs usage walk: bytes of the data written, inodes counted once, symlinks not followed', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-fsusage-'));
  try {
    const tree = join(dir, 'tree');
    await mkdir(join(tree, 'a', 'b'), { recursive: true });
    await writeFile(join(tree, 'a', 'data'), Buffer.alloc(200 * KiB, 7));
    await writeFile(join(tree, 'a', 'b', 'small'), 'x');
    await link(join(tree, 'a', 'data'), join(tree, 'hardlink'));
    // a large file outside the tree, reachable only through symlinks
    await writeFile(join(dir, 'outside'), Buffer.alloc(2048 * KiB, 1));
    await symlink(join(dir, 'outside'), join(tree, 'to-file'));
    await symlink(dir, join(tree, 'to-dir'));
    const u = await walk(tree);
    assert.ok(u);
    // tree, a, a/b, a/data (+ its hard link), a/b/small, two symlinks
    assert.equal(u.inodes, 7);
    assert.ok(u.bytes >= 200 * KiB, `bytes ${u.bytes}`);
    assert.ok(u.bytes < 2048 * KiB, `symlinks were followed: ${u.bytes}`);
    assert.equal(u.mount, false);
    assert.equal(await walk(join(dir, 'missing')), undefined);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('fs usage task: a volumes dir gives one figure per <plugin>/<name>; errors stay per path', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-fsusage-'));
  try {
    const vols = join(dir, 'volumes');
    await mkdir(join(vols, 'kubernetes.io~empty-dir', 'cache'), { recursive: true });
    await mkdir(join(vols, 'kubernetes.io~empty-dir', 'empty'), { recursive: true });
    await mkdir(join(vols, 'kubernetes.io~downward-api', 'info'), { recursive: true });
    await writeFile(join(vols, 'kubernetes.io~empty-dir', 'cache', 'blob'), Buffer.alloc(64 * KiB, 3));
    const [split, gone, file] = await task([{ path: vols, split: 2 }, { path: join(dir, 'nope'), split: 2 }, { path: join(vols, 'kubernetes.io~empty-dir', 'cache', 'blob') }]);
    assert.deepEqual(Object.keys(split!.children!).sort(), ['kubernetes.io~downward-api/info', 'kubernetes.io~empty-dir/cache', 'kubernetes.io~empty-dir/empty']);
    assert.ok(split!.children!['kubernetes.io~empty-dir/cache']!.bytes >= 64 * KiB);
    assert.equal(split!.children!['kubernetes.io~empty-dir/cache']!.inodes, 2);
    assert.equal(split!.children!['kubernetes.io~empty-dir/empty']!.inodes, 1);
    assert.deepEqual(gone, {});
    assert.equal(file!.usage!.inodes, 1);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
