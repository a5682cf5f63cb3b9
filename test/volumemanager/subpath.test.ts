// The native safe open of a subPath (native/subpath.cc) against a volume with symlinks: what it
// opens is always inside the volume, whether the kernel's openat2 or the per-component openat
// walk resolves it, and even while a symlink is swapped in and out under it. Unprivileged: the
// bind mount itself is exercised in test/integration/subpath-mounts.test.ts.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat, symlink, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { after, before, describe, it } from 'node:test';
import { nativeSubpath } from '../../src/volumemanager/subpath.js';

const addon = nativeSubpath();

let root: string;
let vol: string;
let outside: string;
before(async () => {
  assert.ok(addon, 'the native addon has the subpath exports');
  root = await mkdtemp(join(tmpdir(), 'kts-subpath-'));
  vol = join(root, 'vol');
  outside = join(root, 'outside');
  await mkdir(join(vol, 'inner', 'deep'), { recursive: true });
  await writeFile(join(vol, 'inner', 'file'), 'in the volume');
  await mkdir(join(outside, 'sub'), { recursive: true });
  await writeFile(join(outside, 'secret'), 'host data');
  await symlink(outside, join(vol, 'escape'));
  await symlink('../..', join(vol, 'inner', 'up'));
  await symlink('inner', join(vol, 'inside-link'));
  await symlink('/', join(vol, 'root-link'));
});
after(async () => { await rm(root, { recursive: true, force: true }); });

const code = (c: string) => (err: unknown): boolean => (err as { code?: string }).code === c;

for (const openat2 of [true, false]) {
  const resolver = openat2 ? 'openat2' : 'openat';
  describe(`safe subPath open (${resolver})`, () => {
    const open = (subPath: string, opts: { create?: boolean; resolve?: boolean } = {}) => addon!.subpathOpen(vol, subPath, { ...opts, openat2 });

    it('opens an existing directory or file, and a symlink that stays inside the volume resolved first (as upstream)', async () => {
      const dir = await open('inner');
      assert.equal(dir.path, join(vol, 'inner'));
      assert.equal(dir.type, 'dir');
      assert.equal(dir.resolver, resolver);
      assert.equal((await open('inner/file')).type, 'file');
      const linked = await open('inside-link/deep');
      assert.equal(linked.path, join(vol, 'inner', 'deep'));
      assert.equal(linked.ino, (await stat(join(vol, 'inner', 'deep'))).ino);
    });

    it('refuses a symlink out of the volume: as the final component, in a middle component, through a relative "../.."', async () => {
      for (const p of ['escape', 'root-link', 'escape/secret', 'escape/sub', 'inner/up', 'inner/up/outside/secret']) {
        await assert.rejects(open(p), (err: Error & { code?: string; phase?: string }) => {
          assert.equal(err.code, 'EPERM', `${p}: ${err.message}`);
          assert.match(err.message, /not within volume path/);
          return true;
        });
      }
    });

    it('the strict walk refuses every symlink: middle component, final component, even one pointing inside', async () => {
      await assert.rejects(open('inside-link/deep', { resolve: false }), code('ELOOP'));
      await assert.rejects(open('inside-link', { resolve: false }), code('ELOOP'));
      await assert.rejects(open('escape', { resolve: false }), code('ELOOP'));
      await assert.rejects(open('escape/sub', { resolve: false }), code('ELOOP'));
      assert.equal((await open('inner/deep', { resolve: false })).path, join(vol, 'inner', 'deep'));
    });

    it('creates a missing subPath as directories with the volume root\'s mode, never through an escaping link', async () => {
      await chmod(vol, 0o2775);
      try {
        const made = await open(`made-${resolver}/a/b`, { create: true });
        assert.equal(made.path, join(vol, `made-${resolver}`, 'a', 'b'));
        for (const p of [`made-${resolver}`, `made-${resolver}/a`, `made-${resolver}/a/b`]) assert.equal((await stat(join(vol, p))).mode & 0o7777, 0o2775, p);
      } finally {
        await chmod(vol, 0o755);
      }
      await assert.rejects(open(`escape/made-${resolver}`, { create: true }), (err: Error & { phase?: string }) => err.phase === 'create');
      await assert.rejects(stat(join(outside, `made-${resolver}`)), code('ENOENT'));
      await assert.rejects(open(`missing-${resolver}`), code('ENOENT'));
    });

    it('refuses ".." and an absolute subPath', async () => {
      await assert.rejects(open('inner/../../outside'), code('EINVAL'));
      await assert.rejects(open('..'), code('EINVAL'));
      await assert.rejects(open('/etc'), code('EINVAL'));
    });

    it('a directory swapped for a symlink to outside in a tight loop: each open is refused or lands inside, never outside', async () => {
      const race = join(vol, `race-${resolver}`);
      await mkdir(race);
      // [0]: stop flag; [1]: flips done
      const stop = new Int32Array(new SharedArrayBuffer(8));
      // flips race/x between a directory (holding sub/) and a symlink to the outside directory
      const flipper = new Worker(`
        const { mkdirSync, rmdirSync, symlinkSync, unlinkSync } = require('node:fs');
        const { workerData: { dir, target, stop } } = require('node:worker_threads');
        const x = dir + '/x';
        while (Atomics.load(stop, 0) === 0) {
          for (const step of [() => rmdirSync(x + '/sub'), () => rmdirSync(x), () => symlinkSync(target, x), () => unlinkSync(x), () => mkdirSync(x), () => mkdirSync(x + '/sub')]) {
            try { step(); } catch {}
          }
          Atomics.add(stop, 1, 1);
        }
      `, { eval: true, workerData: { dir: race, target: outside, stop } });
      const outsideIds = new Set([await stat(outside), await stat(join(outside, 'sub'))].map((s) => `${s.dev}:${s.ino}`));
      const seen = { inside: 0, refused: 0 };
      try {
        // at least 1500 rounds, and on until the flipper has flipped 300 times (it starts late)
        for (let i = 0; i < 1500 || (Atomics.load(stop, 1) < 300 && i < 100_000); i++) {
          for (const sub of ['x', 'x/sub']) {
            try {
              const o = await addon!.subpathOpen(vol, `race-${resolver}/${sub}`, { openat2 });
              assert.ok(o.path.startsWith(`${race}/`), `opened ${o.path}, outside the volume`);
              assert.ok(!outsideIds.has(`${o.dev}:${o.ino}`), `opened the outside directory through ${sub}`);
              seen.inside++;
            } catch (err) {
              if (err instanceof assert.AssertionError) throw err;
              seen.refused++;
            }
          }
        }
      } finally {
        Atomics.store(stop, 0, 1);
        const flips = Atomics.load(stop, 1);
        await flipper.terminate();
        process.stdout.write(`# ${resolver}: ${seen.inside} opened inside, ${seen.refused} refused, ${flips} flips\n`);
      }
    });
  });
}
