// The du-like walk (workers/fs-usage.ts) on a temporary tree: allocated bytes at least the data
// written, every inode once (hard links too), symlinks counted but never followed, one figure
// per <plugin>/<name> for a pod's volumes dir, and nothing for a path that is gone.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import task, { walk } from '../../workers/fs-usage.js';
import { nativeMeasureFs } from '../../src/stats/fs-usage.js';
import { loadNative } from '../../src/native.js';

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

const nativeDu = nativeMeasureFs();

test('native walks (duBatch) answer as the worker task does: one figure, per <plugin>/<name>, gone and file paths, hard links and symlinks', { skip: !nativeDu && 'native addon not built' }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-fsusage-'));
  try {
    const tree = join(dir, 'tree');
    await mkdir(join(tree, 'a', 'b', 'c'), { recursive: true });
    await writeFile(join(tree, 'a', 'data'), Buffer.alloc(300 * KiB, 7));
    await writeFile(join(tree, 'a', 'b', 'c', 'small'), 'x');
    await writeFile(join(tree, 'empty'), '');
    await link(join(tree, 'a', 'data'), join(tree, 'hardlink'));
    await link(join(tree, 'a', 'data'), join(tree, 'a', 'b', 'hardlink2'));
    await writeFile(join(dir, 'outside'), Buffer.alloc(1024 * KiB, 1));
    await symlink(join(dir, 'outside'), join(tree, 'to-file'));
    await symlink(dir, join(tree, 'a', 'to-dir'));
    const vols = join(dir, 'volumes');
    await mkdir(join(vols, 'kubernetes.io~empty-dir', 'cache', 'sub'), { recursive: true });
    await mkdir(join(vols, 'kubernetes.io~configmap', 'cfg'), { recursive: true });
    await writeFile(join(vols, 'kubernetes.io~empty-dir', 'cache', 'sub', 'blob'), Buffer.alloc(64 * KiB, 3));
    await writeFile(join(vols, 'kubernetes.io~configmap', 'cfg', 'key'), 'value');
    // a plain file beside the plugin dirs is not a plugin
    await writeFile(join(vols, 'stray'), 'x');
    const reqs = [
      { path: tree },
      { path: vols, split: 2 as const },
      { path: join(dir, 'missing') },
      { path: join(dir, 'missing'), split: 2 as const },
      { path: join(tree, 'a', 'data') },
      { path: join(tree, 'a', 'data', 'below-a-file') },
      { path: join(tree, 'to-file') },
    ];
    const native = await nativeDu!(reqs);
    assert.deepEqual(native, await task(reqs));
    // the figures themselves, not only the agreement
    assert.equal(native[0]!.usage!.inodes, 9);
    assert.ok(native[0]!.usage!.bytes >= 300 * KiB && native[0]!.usage!.bytes < 1024 * KiB, `bytes ${native[0]!.usage!.bytes}`);
    assert.deepEqual(Object.keys(native[1]!.children!).sort(), ['kubernetes.io~configmap/cfg', 'kubernetes.io~empty-dir/cache']);
    assert.equal(native[1]!.children!['kubernetes.io~empty-dir/cache']!.inodes, 3);
    assert.deepEqual(native[2], {});
    assert.deepEqual(native[5], {});
    assert.equal(native[6]!.usage!.inodes, 1);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('native walks refuse bad requests with a TypeError naming the request, never crashing', { skip: !nativeDu && 'native addon not built' }, () => {
  const du = (loadNative().addon as unknown as { duBatch(r: unknown): Promise<unknown> }).duBatch;
  assert.throws(() => du('/tmp'), { name: 'TypeError', message: /requests must be an array/ });
  assert.throws(() => du([{ path: '/tmp' }, { path: 'relative' }]), { name: 'TypeError', message: /requests\[1\]\.path is not an absolute path/ });
  assert.throws(() => du([{ path: '/tmp\0x' }]), { name: 'TypeError', message: /requests\[0\]\.path contains a NUL byte/ });
  assert.throws(() => du([{ path: '/tmp', split: 1 }]), { name: 'TypeError', message: /requests\[0\]\.split is not 0 or 2/ });
  assert.throws(() => du([7]), { name: 'TypeError', message: /requests\[0\] is not an object/ });
});

test('a deep tree (more levels than descriptors kept open) is walked whole, natively and in the worker alike', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-fsusage-deep-'));
  try {
    const tree = join(dir, 'tree');
    let p = tree;
    let expected = 1;
    // 80 levels, each with a file and a sibling dir with a file: going back up reopens closed levels
    for (let i = 0; i < 80; i++) {
      p = join(p, `d${i}`);
      await mkdir(join(p, 'side'), { recursive: true });
      await writeFile(join(p, 'f'), 'x');
      await writeFile(join(p, 'side', 'g'), 'y');
      expected += 4;
    }
    const u = await walk(tree);
    assert.equal(u!.inodes, expected);
    if (nativeDu) assert.deepEqual((await nativeDu([{ path: tree }]))[0], { usage: u });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a directory swapped for a symbolic link during the walks is never followed, at any depth', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-fsusage-race-'));
  const { spawn } = await import('node:child_process');
  let flipper: import('node:child_process').ChildProcess | undefined;
  try {
    // what only a walk that followed a link could count: 4 MiB of data blocks
    const outside = join(dir, 'outside');
    await mkdir(join(outside, 'y'), { recursive: true });
    await writeFile(join(outside, 'y', 'host-data'), Buffer.alloc(4096 * KiB, 1));
    // a small tree for the worker's walk; for the quicker native one, tree/x holds many empty
    // files beside y, so a walk spends a while in x before reaching y
    const small = join(dir, 'small');
    const large = join(dir, 'large');
    for (const t of [small, large]) {
      await mkdir(join(t, 'x', 'y'), { recursive: true });
      await writeFile(join(t, 'x', 'y', 'mine'), '');
    }
    for (let i = 0; i < 1000; i++) await writeFile(join(large, 'x', `f${i}`), '');
    // flips <tree>/x between the directory and a link to the outside, as a pod racing the walk would
    const script = `const fs = require('fs'); const [out, ...trees] = process.argv.slice(1);
      for (;;) for (const t of trees) { try { fs.renameSync(t + '/x', t + '/x.real'); fs.symlinkSync(out, t + '/x'); fs.unlinkSync(t + '/x'); fs.renameSync(t + '/x.real', t + '/x'); } catch {} }`;
    flipper = spawn(process.execPath, ['-e', script, outside, small, large], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 100));
    let worker = 0;
    let native = 0;
    for (let i = 0; i < 300; i++) {
      const u = await walk(small);
      worker = Math.max(worker, u?.bytes ?? 0);
    }
    for (let i = 0; nativeDu && i < 100; i++) {
      for (const n of await nativeDu(Array.from({ length: 5 }, () => ({ path: large })))) {
        assert.equal(n.error, undefined, n.error);
        native = Math.max(native, n.usage?.bytes ?? 0);
      }
    }
    // the trees' own figures are a few directories' blocks
    assert.ok(worker < 1024 * KiB, `the worker's walk counted ${worker} bytes: it followed the link out of the tree`);
    assert.ok(native < 1024 * KiB, `the native walk counted ${native} bytes: it followed the link out of the tree`);
  } finally {
    flipper?.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 50));
    await rm(dir, { recursive: true, force: true });
  }
});
