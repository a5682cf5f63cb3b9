import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { cgroupMode, discoverCgroupMounts, forgetCgroupMounts } from '../../src/cgroups/index.js';
import { generateCgroupHierarchies } from '../fixtures/cgroup-tree.js';

const V1 = '32 31 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n';
const V2 = '25 1 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n';

test('discovery reads a mountinfo once: later callers share the first read', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-mountinfo-'));
  const file = join(dir, 'mountinfo');
  try {
    await writeFile(file, V1);
    const [a, b] = await Promise.all([discoverCgroupMounts(file), discoverCgroupMounts(file)]);
    assert.equal(a, b);
    assert.equal(cgroupMode(a), 'v1');
    // Rewritten behind its back: the process keeps what it read at start-up.
    await writeFile(file, V2);
    assert.equal(await discoverCgroupMounts(file), a);
    forgetCgroupMounts(file);
    assert.equal(cgroupMode(await discoverCgroupMounts(file)), 'v2');
  } finally {
    forgetCgroupMounts(file);
    await rm(dir, { recursive: true, force: true });
  }
});

test('a failed read is not kept: the next caller reads again', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-mountinfo-'));
  const file = join(dir, 'mountinfo');
  try {
    await assert.rejects(discoverCgroupMounts(file), { code: 'ENOENT' });
    await writeFile(file, V2);
    assert.equal(cgroupMode(await discoverCgroupMounts(file)), 'v2');
  } finally {
    forgetCgroupMounts(file);
    await rm(dir, { recursive: true, force: true });
  }
});

test('each generated layout is discovered as that layout', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-layouts-'));
  try {
    for (const layout of ['v1', 'v2', 'hybrid'] as const) {
      const h = generateCgroupHierarchies(join(dir, layout), layout);
      const file = join(dir, `${layout}.mountinfo`);
      await writeFile(file, h.mountinfo);
      const mounts = await discoverCgroupMounts(file);
      assert.equal(cgroupMode(mounts), layout);
      assert.deepEqual(mounts, h.mounts);
      forgetCgroupMounts(file);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the real /proc/self/mountinfo: one read for every caller in the process', async () => {
  const a = await discoverCgroupMounts();
  assert.equal(await discoverCgroupMounts('/proc/self/mountinfo'), a);
});
