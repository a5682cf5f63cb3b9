// Both cgroup readers on a cgroup this test creates and removes on the host's real mounts
// (needs root: mkdir under the cgroup root). The cgroup goes where the memory controller is:
// the v1 memory hierarchy (with pids and cpuacct beside it) on hybrid hosts like the ones these
// tests run on, else the unified hierarchy; the assertions follow whichever was used.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { createNativeCgroupReader } from '../../src/stats/cgroup-native-reader.js';
import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import { cgroupRefFor, discoverCgroupMounts, type CgroupMounts } from '../../src/cgroups/index.js';
import { CGROUP_MISSING, CGROUP_OK, type CgroupRef, type CgroupSampleBatch } from '../../src/stats/cgroup-sample.js';

const native = createNativeCgroupReader();
const fsReader = new FsCgroupReader({ clockTicksPerSecond: native.reader?.clockTicks ?? 100 });
const mounts: CgroupMounts = await discoverCgroupMounts();

async function readBoth(refs: CgroupRef[]): Promise<[CgroupSampleBatch, CgroupSampleBatch]> {
  assert.ok(native.reader, `native cgroup reader unavailable: ${native.error}`);
  const a = await native.reader.readCgroups(refs);
  const b = await fsReader.readCgroups(refs);
  assert.deepEqual(b.status, a.status, 'status');
  assert.deepEqual(b.state, a.state, 'field presence');
  return [a, b];
}

describe('a cgroup created here, then removed', () => {
  const name = `kts-reader-test-${process.pid}`;
  const made: string[] = [];
  let ref: CgroupRef;

  before(() => {
    assert.ok(mounts.v1.memory || mounts.unified, 'no memory cgroup hierarchy on this host');
    if (mounts.v1.memory) {
      const full = cgroupRefFor(mounts, `/${name}`);
      assert.equal(full.version, 1);
      const dirs: { memory?: string; pids?: string; cpuacct?: string } = {};
      for (const c of ['memory', 'pids', 'cpuacct'] as const) {
        const dir = full.version === 1 ? full[c] : undefined;
        if (!dir) continue;
        mkdirSync(dir);
        made.push(dir);
        dirs[c] = dir;
      }
      ref = { version: 1, ...dirs };
    } else {
      const dir = path.join(mounts.unified!.mountPoint, name);
      mkdirSync(dir);
      made.push(dir);
      ref = { version: 2, dir };
    }
  });
  after(() => {
    for (const dir of made) if (existsSync(dir)) rmdirSync(dir);
  });

  test('an empty cgroup reads ok: pids.max is `max`, counters present', async () => {
    const [a] = await readBoth([ref]);
    assert.equal(a.status[0], CGROUP_OK);
    if (ref.version === 1) {
      if (ref.pids) {
        assert.equal(a.get(0, 'pids.max'), 'max');
        assert.equal(a.get(0, 'pids.current'), 0n);
      }
      assert.equal(typeof a.get(0, 'memory.usage_in_bytes'), 'bigint');
      assert.equal(typeof a.get(0, 'memory.limit_in_bytes'), 'bigint');
    } else {
      if (existsSync(path.join(ref.dir, 'pids.max'))) assert.equal(a.get(0, 'pids.max'), 'max');
      if (existsSync(path.join(ref.dir, 'memory.current'))) assert.equal(typeof a.get(0, 'memory.current'), 'bigint');
      assert.equal(typeof a.get(0, 'cpu.stat:usage_usec'), 'bigint');
    }
  });

  test('after rmdir it is reported missing, never an error', async () => {
    rmdirSync(ref.version === 1 ? ref.memory! : ref.dir);
    const [a, b] = await readBoth([ref]);
    assert.equal(a.status[0], CGROUP_MISSING);
    assert.deepEqual(a.toObject(0).fields, {});
    assert.deepEqual(b.toObject(0), a.toObject(0));
  });
});
