// Both readers on this host's real cgroup mounts: v2 parsing on the cgroup2 mount, v1 on
// the controller hierarchies. Values move between reads, so the readers must agree on which
// fields are present and report plausible values, not identical ones. Read-only: creating a
// cgroup needs root (test/integration/cgroup-real-rw.test.ts).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { createNativeCgroupReader } from '../../src/stats/cgroup-native-reader.js';
import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import { cgroupRefFor, discoverCgroupMounts, type CgroupMounts } from '../../src/cgroups/index.js';
import { CGROUP_OK, type CgroupRef, type CgroupSampleBatch } from '../../src/stats/cgroup-sample.js';

const native = createNativeCgroupReader();
const fsReader = new FsCgroupReader({ clockTicksPerSecond: native.reader?.clockTicks ?? 100 });
const mounts: CgroupMounts = await discoverCgroupMounts();

async function readBoth(refs: CgroupRef[]): Promise<[CgroupSampleBatch, CgroupSampleBatch]> {
  assert.ok(native.reader, `native cgroup reader unavailable: ${native.error}`);
  const a = await native.reader.readCgroups(refs);
  const b = await fsReader.readCgroups(refs);
  assert.deepEqual(b.status, a.status, 'status');
  // PSI and usage move between reads; presence does not.
  assert.deepEqual(b.state, a.state, 'field presence');
  return [a, b];
}

const positive = (v: unknown): boolean => typeof v === 'bigint' && v > 0n;

test('a cgroup hierarchy is mounted', () => {
  assert.ok(mounts.unified || Object.keys(mounts.v1).length > 0);
});

describe('cgroup v2 parsing on the cgroup2 mount', { skip: mounts.unified ? false : 'no cgroup2 mount on this host' }, () => {
  test('root: cpu.stat and PSI present and plausible', async () => {
    const dir = mounts.unified!.mountPoint;
    const [a, b] = await readBoth([{ version: 2, dir }]);
    assert.equal(a.status[0], CGROUP_OK);
    for (const batch of [a, b]) {
      const f = batch.toObject(0).fields;
      assert.ok(positive(f['cpu.stat:usage_usec']), 'usage_usec > 0');
      assert.ok((f['cpu.stat:user_usec'] as bigint) + (f['cpu.stat:system_usec'] as bigint) > 0n);
      if (existsSync(path.join(dir, 'cpu.pressure'))) {
        assert.equal(typeof f['cpu.pressure:some_total'], 'bigint');
        assert.equal(typeof f['cpu.pressure:some_avg10'], 'bigint');
        assert.ok((f['cpu.pressure:some_avg10'] as bigint) <= 10000n, 'avg10 is at most 100.00%');
      }
      if (existsSync(path.join(dir, 'io.pressure'))) assert.equal(typeof f['io.pressure:full_total'], 'bigint');
      // Files this mount does not have are absent, not zero.
      if (!existsSync(path.join(dir, 'memory.current'))) assert.equal(f['memory.current'], undefined);
    }
  });
});

describe('cgroup v1 parsing on the controller hierarchies', { skip: mounts.v1.memory ? false : 'no v1 memory hierarchy on this host' }, () => {
  test('root: cpuacct, cpu.stat and memory present and plausible', async () => {
    const [a, b] = await readBoth([cgroupRefFor(mounts, '/')]);
    assert.equal(a.status[0], CGROUP_OK);
    for (const batch of [a, b]) {
      const f = batch.toObject(0).fields;
      if (mounts.v1.cpuacct) {
        assert.ok(positive(f['cpuacct.usage']), 'cpuacct.usage > 0');
        assert.ok(positive(f['cpuacct.stat:user_ns']), 'cpuacct.stat user > 0');
      }
      if (mounts.v1.cpu) assert.equal(typeof f['cpu.stat:nr_periods'], 'bigint');
      assert.ok(positive(f['memory.usage_in_bytes']), 'memory.usage_in_bytes > 0');
      assert.ok(positive(f['memory.stat:total_rss']) || positive(f['memory.stat:total_cache']));
      assert.equal(typeof f['memory.stat:total_inactive_file'], 'bigint');
      assert.equal(typeof f['memory.oom_control:oom_kill'], 'bigint');
      assert.ok(positive(f['memory.limit_in_bytes']));
    }
  });
});
