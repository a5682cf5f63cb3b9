// Both cgroup readers (native addon, pure-TS fs) on generated v1 and v2 trees: every file
// kind, missing files, `max`, empty and malformed values, counters past 2^53, vanished
// cgroups. They must agree with each other and with what the generator wrote.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { createNativeCgroupReader, type NativeCgroupReader } from '../../src/stats/cgroup-native-reader.js';
import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import {
  CGROUP_FIELD,
  CGROUP_FIELD_COUNT,
  CGROUP_MISSING,
  CGROUP_OK,
  FIELD_ABSENT,
  FIELD_MAX,
  UNLIMITED,
  type CgroupRef,
  type CgroupSampleBatch,
} from '../../src/stats/cgroup-sample.js';
import { cgroupFilePath, generateCgroupTree, type GeneratedCgroupTree } from '../fixtures/cgroup-tree.js';

const native = createNativeCgroupReader();
// The generator and the fs reader use the tick rate the addon converts cpuacct.stat with.
const clockTicks = native.reader?.clockTicks ?? 100;
const fsReader = new FsCgroupReader({ concurrency: 4, clockTicksPerSecond: clockTicks });

function nativeReader(): NativeCgroupReader {
  assert.ok(native.reader, `native cgroup reader unavailable: ${native.error}`);
  return native.reader;
}

/** Reads with every backend, asserts identical raw arrays, returns one batch. */
async function readAll(refs: readonly CgroupRef[]): Promise<CgroupSampleBatch> {
  const reader = nativeReader();
  const a = await reader.readCgroups(refs);
  const b = reader.readCgroupsSync(refs);
  const c = await fsReader.readCgroups(refs);
  for (const [name, other] of [
    ['native sync', b],
    ['fs', c],
  ] as const) {
    assert.deepEqual(other.status, a.status, `${name}: status`);
    assert.deepEqual(other.state, a.state, `${name}: state`);
    assert.deepEqual(other.values, a.values, `${name}: values`);
    assert.deepEqual(other.devIds, a.devIds, `${name}: devIds`);
    assert.deepEqual(other.devValues, a.devValues, `${name}: devValues`);
  }
  return a;
}

let scratch: string;
before(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'kts-cgroup-readers-'));
});
after(() => rmSync(scratch, { recursive: true, force: true }));

test('the native reader is available (addon built, field table matches)', () => {
  assert.equal(native.error, undefined);
  assert.ok(native.reader);
});

for (const version of [2, 1] as const) {
  describe(`cgroup v${version} generated tree`, () => {
    let tree: GeneratedCgroupTree;
    before(() => {
      tree = generateCgroupTree({ root: path.join(scratch, `v${version}`), version, containers: 24, seed: version, clockTicks });
    });

    test('both readers report exactly what the generator wrote', async () => {
      const batch = await readAll(tree.refs);
      assert.equal(batch.count, 24);
      for (let i = 0; i < tree.cgroups.length; i++) {
        const got = batch.toObject(i);
        assert.equal(got.status, 'ok');
        assert.deepEqual(got.fields, tree.cgroups[i]!.expected, `cgroup ${i}`);
        assert.deepEqual(got.devices, tree.cgroups[i]!.expectedDevices, `cgroup ${i} devices`);
      }
    });

    test('concurrent async batches do not share state', async () => {
      const reader = nativeReader();
      const half = tree.refs.slice(0, 12);
      const [a, b, c] = await Promise.all([reader.readCgroups(tree.refs), reader.readCgroups(half), reader.readCgroups(tree.refs)]);
      assert.deepEqual(c.values, a.values);
      assert.deepEqual(b.values, a.values.subarray(0, 12 * CGROUP_FIELD_COUNT));
      assert.deepEqual(b.toObject(11).fields, tree.cgroups[11]!.expected);
    });

    test('counters past 2^53 are exact', async () => {
      const i = 3; // hugeEvery 7 → container 3 is huge
      const batch = await readAll([tree.refs[i]!]);
      const field = version === 2 ? 'cpu.stat:user_usec' : 'cpuacct.usage';
      const v = batch.get(0, field);
      assert.equal(typeof v, 'bigint');
      assert.ok((v as bigint) > 2n ** 53n);
      assert.equal(v, tree.cgroups[i]!.expected[field]);
      assert.notEqual(BigInt(Number(v)), v, 'the value is one a double cannot hold');
    });

    test('an empty list gives an empty batch', async () => {
      const batch = await readAll([]);
      assert.equal(batch.count, 0);
      assert.equal(batch.values.length, 0);
      assert.equal(batch.devIds.length, 0);
    });
  });
}

describe('v2 edge cases', () => {
  let tree: GeneratedCgroupTree;
  let batch: CgroupSampleBatch;
  let refs: CgroupRef[];
  const put = (i: number, name: string, content: string): void =>
    writeFileSync(cgroupFilePath(tree.refs[i]!, name), content);

  before(async () => {
    tree = generateCgroupTree({ root: path.join(scratch, 'v2-edge'), version: 2, containers: 10, seed: 42, clockTicks });
    unlinkSync(cgroupFilePath(tree.refs[0]!, 'memory.swap.current'));
    put(1, 'memory.max', 'max\n');
    put(1, 'pids.max', 'max');
    put(2, 'memory.current', '');
    put(2, 'memory.stat', '');
    put(2, 'io.stat', '');
    put(3, 'memory.current', '18446744073709551615\n');
    put(3, 'pids.current', '18446744073709551616\n');
    put(3, 'cpu.stat', 'usage_usec 9007199254740993\nuser_usec\t12\nsystem_usec  13  trailing\n');
    rmSync(path.dirname(cgroupFilePath(tree.refs[4]!, 'cpu.stat')), { recursive: true });
    put(5, 'memory.current', '12abc\n');
    put(5, 'memory.events', 'low 1\n high 2\noom\noom_kill -1\nmax 3\nmax 4');
    put(5, 'cpu.pressure', 'some avg10=1.5 avg60=abc avg300=2 total=77\nfull avg10=0.123 bogus avg60=.5 total=max\nnone avg10=9.00\n');
    put(6, 'io.stat', '8:0 rbytes=10 wbytes=20 rios=1 wios=2\n8:0 rbytes=5 dbytes=7\n253:x rbytes=100\n9:1 rbytes=18446744073709551615\n9:2 rbytes=2\n');
    put(7, 'memory.max', '  4096 \n');
    refs = [...tree.refs, { version: 2, dir: path.join(tree.root, 'never-created') }];
    batch = await readAll(refs);
  });

  test('a missing file → field absent, the rest of the cgroup is read', () => {
    assert.equal(batch.status[0], CGROUP_OK);
    assert.equal(batch.get(0, 'memory.swap.current'), undefined);
    assert.equal(batch.has(0, 'memory.swap.current'), false);
    assert.equal(batch.get(0, 'memory.current'), tree.cgroups[0]!.expected['memory.current']);
  });

  test('`max` → unlimited marker', () => {
    assert.equal(batch.get(1, 'memory.max'), 'max');
    assert.equal(batch.get(1, 'pids.max'), 'max');
    const at = 1 * CGROUP_FIELD_COUNT + CGROUP_FIELD['memory.max'];
    assert.equal(batch.state[at], FIELD_MAX);
    assert.equal(batch.values[at], UNLIMITED);
    assert.equal(batch.number(1, 'memory.max'), Infinity);
  });

  test('empty files → fields absent (no zeros), no device rows', () => {
    assert.equal(batch.get(2, 'memory.current'), undefined);
    assert.equal(batch.get(2, 'memory.stat:anon'), undefined);
    assert.equal(batch.get(2, 'memory.stat:inactive_file'), undefined);
    assert.equal(batch.get(2, 'io.stat:rbytes'), undefined);
    assert.deepEqual(batch.toObject(2).devices, []);
    assert.equal(batch.status[2], CGROUP_OK);
  });

  test('64-bit limits: 2^64-1 kept, 2^64 rejected, 2^53+1 exact', () => {
    assert.equal(batch.get(3, 'memory.current'), 18446744073709551615n);
    assert.equal(batch.get(3, 'pids.current'), undefined);
    assert.equal(batch.get(3, 'cpu.stat:usage_usec'), 9007199254740993n);
    assert.equal(batch.get(3, 'cpu.stat:user_usec'), 12n, 'tab separator');
    assert.equal(batch.get(3, 'cpu.stat:system_usec'), 13n, 'extra tokens ignored');
    assert.equal(batch.get(3, 'cpu.stat:nr_periods'), undefined, 'key not printed → absent');
  });

  test('a cgroup removed before the read → missing, all fields absent', () => {
    assert.equal(batch.status[4], CGROUP_MISSING);
    assert.equal(batch.ok(4), false);
    const row = batch.state.subarray(4 * CGROUP_FIELD_COUNT, 5 * CGROUP_FIELD_COUNT);
    assert.ok(row.every((s) => s === FIELD_ABSENT));
    assert.ok(batch.values.subarray(4 * CGROUP_FIELD_COUNT, 5 * CGROUP_FIELD_COUNT).every((v) => v === 0n));
    assert.deepEqual(batch.toObject(4), { status: 'missing', fields: {}, devices: [] });
    // Its neighbours are unaffected.
    assert.equal(batch.toObject(8).status, 'ok');
    assert.deepEqual(batch.toObject(8).fields, tree.cgroups[8]!.expected);
  });

  test('a directory that never existed → missing', () => {
    assert.equal(batch.status[10], CGROUP_MISSING);
  });

  test('malformed values are absent; keyed lines: key at line start, last valid wins', () => {
    assert.equal(batch.get(5, 'memory.current'), undefined);
    const f = batch.toObject(5).fields;
    assert.equal(f['memory.events:low'], 1n);
    assert.equal(f['memory.events:high'], undefined, 'leading blank → not a key');
    assert.equal(f['memory.events:oom'], undefined, 'no value');
    assert.equal(f['memory.events:oom_kill'], undefined, 'negative');
    assert.equal(f['memory.events:max'], 4n, 'last wins, no trailing newline');
  });

  test('PSI: averages in hundredths, malformed tokens skipped', () => {
    const f = batch.toObject(5).fields;
    assert.equal(f['cpu.pressure:some_avg10'], 150n);
    assert.equal(f['cpu.pressure:some_avg60'], undefined);
    assert.equal(f['cpu.pressure:some_avg300'], 200n);
    assert.equal(f['cpu.pressure:some_total'], 77n);
    assert.equal(f['cpu.pressure:full_avg10'], 12n, 'extra decimals truncated');
    assert.equal(f['cpu.pressure:full_avg60'], undefined, 'no integer part');
    assert.equal(f['cpu.pressure:full_total'], undefined, 'total must be a number');
  });

  test('io.stat: summed over devices, one row per device, sums wrap at 2^64', () => {
    const o = batch.toObject(6);
    assert.deepEqual(o.devices, [
      { major: 8, minor: 0, rbytes: 15n, wbytes: 20n, rios: 1n, wios: 2n },
      { major: 9, minor: 1, rbytes: 18446744073709551615n, wbytes: 0n, rios: 0n, wios: 0n },
      { major: 9, minor: 2, rbytes: 2n, wbytes: 0n, rios: 0n, wios: 0n },
    ]);
    assert.equal(o.fields['io.stat:rbytes'], (15n + 18446744073709551615n + 2n) % 2n ** 64n);
    assert.equal(o.fields['io.stat:dbytes'], 7n);
    assert.equal(o.fields['io.stat:dios'], undefined);
  });

  test('blanks around a single value are ignored', () => {
    assert.equal(batch.get(7, 'memory.max'), 4096n);
  });
});

describe('v1 edge cases', () => {
  let tree: GeneratedCgroupTree;
  let batch: CgroupSampleBatch;
  const put = (i: number, name: string, content: string): void =>
    writeFileSync(cgroupFilePath(tree.refs[i]!, name), content);

  before(async () => {
    tree = generateCgroupTree({ root: path.join(scratch, 'v1-edge'), version: 1, containers: 6, seed: 7, clockTicks });
    put(0, 'pids.max', 'max\n');
    put(0, 'cpuacct.stat', 'user 250\nsystem 3\n');
    put(1, 'blkio.throttle.io_service_bytes_recursive', 'Total 0\n');
    put(1, 'blkio.throttle.io_serviced_recursive', '8:16 Read 4\n8:16 Write 5\n8:16 Total 9\nTotal 9\n');
    // A container whose memory hierarchy dir vanished while the others remain: being torn down.
    rmSync(path.dirname(cgroupFilePath(tree.refs[2]!, 'memory.stat')), { recursive: true });
    unlinkSync(cgroupFilePath(tree.refs[3]!, 'memory.oom_control'));
    put(4, 'memory.limit_in_bytes', '9223372036854771712\n');
    const only = tree.refs[5]!;
    const first = tree.refs[0]!;
    batch = await readAll([
      ...tree.refs,
      { version: 1, memory: only.version === 1 ? only.memory : '' },
      { ...first, unified: path.join(tree.root, 'unified', 'not-in-cgroup2') } as CgroupRef,
    ]);
  });

  test('cpuacct.stat ticks → ns', () => {
    assert.equal(batch.get(0, 'cpuacct.stat:user_ns'), (250n * 1_000_000_000n) / BigInt(clockTicks));
    assert.equal(batch.get(0, 'cpuacct.stat:system_ns'), (3n * 1_000_000_000n) / BigInt(clockTicks));
    assert.equal(batch.get(0, 'pids.max'), 'max');
  });

  test('blkio: no device lines → absent; devices merged across the two files', () => {
    const o = batch.toObject(1);
    assert.equal(o.fields['blkio.throttle.io_service_bytes_recursive:read'], undefined);
    assert.equal(o.fields['blkio.throttle.io_serviced_recursive:read'], 4n);
    assert.equal(o.fields['blkio.throttle.io_serviced_recursive:write'], 5n);
    assert.deepEqual(o.devices, [{ major: 8, minor: 16, rbytes: 0n, wbytes: 0n, rios: 4n, wios: 5n }]);
  });

  test('one controller dir gone → the cgroup is missing', () => {
    assert.equal(batch.status[2], CGROUP_MISSING);
    assert.deepEqual(batch.toObject(2).fields, {});
  });

  test('a missing file in an existing dir → only its fields absent', () => {
    assert.equal(batch.status[3], CGROUP_OK);
    assert.equal(batch.get(3, 'memory.oom_control:oom_kill'), undefined);
    assert.equal(batch.get(3, 'memory.stat:total_rss'), tree.cgroups[3]!.expected['memory.stat:total_rss']);
  });

  test('v1 "unlimited" limit is reported as the kernel prints it', () => {
    assert.equal(batch.get(4, 'memory.limit_in_bytes'), 9223372036854771712n);
  });

  test('a v1 ref whose unified (PSI) dir does not exist: ok, PSI absent', () => {
    const o = batch.toObject(7);
    assert.equal(o.status, 'ok');
    assert.equal(o.fields['cpu.pressure:some_total'], undefined);
    assert.equal(o.fields['cpuacct.usage'], tree.cgroups[0]!.expected['cpuacct.usage']);
  });

  test('a ref with only some controllers reads only those', () => {
    const o = batch.toObject(6);
    assert.equal(o.status, 'ok');
    assert.equal(o.fields['memory.stat:total_rss'], tree.cgroups[5]!.expected['memory.stat:total_rss']);
    assert.equal(o.fields['cpuacct.usage'], undefined);
    assert.equal(o.fields['cpu.pressure:some_total'], undefined);
  });
});

test('invalid refs are rejected by both readers', async () => {
  const bad = [{ version: 3, dir: '/x' }] as unknown as CgroupRef[];
  await assert.rejects(nativeReader().readCgroups(bad), TypeError);
  await assert.rejects(fsReader.readCgroups(bad), TypeError);
  await assert.rejects(nativeReader().readCgroups([{ version: 1 }]), /at least one controller/);
  await assert.rejects(fsReader.readCgroups([{ version: 2, dir: '' }]), /needs a dir/);
});
