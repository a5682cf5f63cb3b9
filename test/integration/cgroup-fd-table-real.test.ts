// Kept-open descriptors on a real cgroup this test creates and removes (needs root): after
// rmdir the kept descriptors read ENODEV; the reader reports the cgroup gone and closes them.
// On hybrid hosts the cgroup goes in the v1 memory, pids and cpuacct hierarchies, else in
// the unified one.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, rmdirSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

import { cgroupRefFor, discoverCgroupMounts } from '../../src/cgroups/index.js';
import { createNativeCgroupReader } from '../../src/stats/cgroup-native-reader.js';
import { CGROUP_MISSING, CGROUP_OK, type CgroupRef } from '../../src/stats/cgroup-sample.js';

const native = createNativeCgroupReader();
const mounts = await discoverCgroupMounts();
const made: string[] = [];
const openFds = (): number => readdirSync('/proc/self/fd').length;

function makeCgroup(name: string): CgroupRef {
  if (mounts.v1.memory) {
    const full = cgroupRefFor(mounts, `/${name}`);
    assert.equal(full.version, 1);
    const dirs: { memory?: string; pids?: string; cpuacct?: string } = {};
    for (const c of ['memory', 'pids', 'cpuacct'] as const) {
      const dir = full[c];
      if (!dir) continue;
      mkdirSync(dir);
      made.push(dir);
      dirs[c] = dir;
    }
    return { version: 1, ...dirs };
  }
  assert.ok(mounts.unified, 'no cgroup hierarchy with a memory controller');
  const dir = path.join(mounts.unified.mountPoint, name);
  mkdirSync(dir);
  made.push(dir);
  return { version: 2, dir };
}

after(() => {
  for (const dir of made.reverse()) if (existsSync(dir)) rmdirSync(dir);
});

test('a real cgroup removed while its descriptors are open: gone, descriptors released, re-opened when made again', async () => {
  assert.ok(native.reader, `native reader unavailable: ${native.error}`);
  const reader = native.reader.withKeepOpen(true);
  const keepName = `kts-fdtable-keep-${process.pid}`;
  const goneName = `kts-fdtable-gone-${process.pid}`;
  const stay = makeCgroup(keepName);
  const victim = makeCgroup(goneName);
  const before = openFds();

  const r1 = await reader.readCgroups([stay, victim]);
  assert.deepEqual([...r1.status], [CGROUP_OK, CGROUP_OK]);
  const held = reader.fdTable()!.open;
  assert.ok(held >= 2, `descriptors kept: ${held}`);
  assert.equal(openFds(), before + held);
  const r2 = await reader.readCgroups([stay, victim]);
  assert.deepEqual([...r2.status], [CGROUP_OK, CGROUP_OK]);
  assert.equal(reader.fdTable()!.open, held, 'the second read reuses the descriptors');

  const victimDirs = victim.version === 1 ? [victim.memory, victim.pids, victim.cpuacct] : [victim.dir];
  for (const dir of victimDirs) if (dir) rmdirSync(dir);
  const goneBefore = reader.fdTable()!.gone;
  const r3 = await reader.readCgroups([stay, victim]);
  assert.deepEqual([...r3.status], [CGROUP_OK, CGROUP_MISSING]);
  assert.deepEqual(r3.toObject(1).fields, {});
  assert.equal(reader.fdTable()!.open, held / 2, 'the removed cgroup holds no descriptor');
  assert.equal(openFds(), before + held / 2);
  assert.ok(reader.fdTable()!.gone > goneBefore);

  // Same name again: a new cgroup, read through new descriptors.
  for (const dir of victimDirs) if (dir) mkdirSync(dir);
  const r4 = await reader.readCgroups([stay, victim]);
  assert.deepEqual([...r4.status], [CGROUP_OK, CGROUP_OK]);
  assert.equal(reader.fdTable()!.open, held);

  reader.forget([stay, victim]);
  assert.equal(openFds(), before);
});
