// The native reader's kept-open descriptors on generated trees (plain files on tmpfs or the
// temp dir): fresh values through pread, a clean "gone" for a removed container with its
// descriptors released, re-open when the path comes back, forget(), the budget, absent files
// remembered until the re-check period, and the last batch's entries reused safely.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, afterEach, test } from 'node:test';

import {
  ABSENT_RECHECK_MS,
  createNativeCgroupReader,
  dirsOfRef,
  type NativeCgroupReader,
} from '../../src/stats/cgroup-native-reader.js';
import { CGROUP_MISSING, CGROUP_OK, filesOfRef, type CgroupRef, type CgroupSampleBatch } from '../../src/stats/cgroup-sample.js';
import { FakeClock } from '../../src/util/clock.js';
import { cgroupFilePath, generateCgroupTree } from '../fixtures/cgroup-tree.js';

const created = createNativeCgroupReader();
const kept: NativeCgroupReader = created.reader!.withKeepOpen(true);
const plain: NativeCgroupReader = created.reader!.withKeepOpen(false);
const base = mkdtempSync(path.join(tmpdir(), 'kts-fdtable-'));
const fullBudget = kept.fdTable()!.budget;
let n = 0;

const openFds = (): number => readdirSync('/proc/self/fd').length;

function tree(version: 1 | 2, containers: number) {
  return generateCgroupTree({ root: path.join(base, `t${n++}`), version, containers, clockTicks: kept.clockTicks });
}

afterEach(() => {
  // Each test starts from an empty table with the derived budget.
  kept.setFdBudget(0);
  kept.setFdBudget(fullBudget);
});
after(() => rmSync(base, { recursive: true, force: true }));

test('the budget follows RLIMIT_NOFILE: soft - max(1024, soft/4)', () => {
  const t = kept.fdTable()!;
  assert.equal(t.highWater, Math.max(0, t.softLimit - Math.max(1024, Math.floor(t.softLimit / 4))));
  assert.equal(t.budget, t.highWater);
  assert.ok(kept.keepOpen);
});

for (const version of [2, 1] as const) {
  test(`v${version}: kept-open reads match open/read/close and see rewritten files`, () => {
    const t = tree(version, 4);
    const a = kept.readCgroupsSync(t.refs);
    const b = plain.readCgroupsSync(t.refs);
    for (let i = 0; i < t.refs.length; i++) assert.deepEqual(a.toObject(i), b.toObject(i));
    const first = kept.fdTable()!;
    assert.ok(first.open > 0, 'descriptors kept');
    // Rewrite one counter in place (same inode): the kept descriptor reads the new value.
    const file = version === 2 ? path.join((t.refs[0] as { dir: string }).dir, 'pids.current') : path.join(t.refs[0]!.version === 1 ? t.refs[0]!.pids! : '', 'pids.current');
    writeFileSync(file, '4242\n');
    const c = kept.readCgroupsSync(t.refs);
    assert.equal(c.get(0, 'pids.current'), 4242n);
    const second = kept.fdTable()!;
    assert.equal(second.open, first.open, 'no new descriptors on the second read');
    assert.ok(second.keptReads > first.keptReads);
  });

  test(`v${version}: a container removed while its descriptors are open reads as gone and releases them`, async () => {
    const t = tree(version, 3);
    const before = openFds();
    const r1 = await kept.readCgroups(t.refs);
    assert.deepEqual([...r1.status], [CGROUP_OK, CGROUP_OK, CGROUP_OK]);
    const held = kept.fdTable()!.open;
    assert.equal(openFds(), before + held, 'the table holds exactly its descriptors');
    const perContainer = held / 3;

    const victim = t.refs[1]!;
    for (const dir of dirsOfRef(victim)) rmSync(dir, { recursive: true, force: true });
    const r2 = await kept.readCgroups(t.refs);
    assert.deepEqual([...r2.status], [CGROUP_OK, CGROUP_MISSING, CGROUP_OK]);
    assert.equal(r2.toObject(1).fields && Object.keys(r2.toObject(1).fields).length, 0, 'no figures for a gone cgroup');
    assert.equal(kept.fdTable()!.open, held - perContainer);
    assert.equal(openFds(), before + held - perContainer, 'its descriptors are closed');
    assert.ok(kept.fdTable()!.gone >= perContainer);

    // The same path made again is opened again on the next read.
    generateCgroupTree({ root: t.root, version, containers: 3, clockTicks: kept.clockTicks });
    const r3 = await kept.readCgroups(t.refs);
    assert.deepEqual([...r3.status], [CGROUP_OK, CGROUP_OK, CGROUP_OK]);
    assert.equal(kept.fdTable()!.open, held);
  });
}

test('forget() closes the descriptors of containers no longer watched', () => {
  const t = tree(2, 3);
  const before = openFds();
  kept.readCgroupsSync(t.refs);
  const held = kept.fdTable()!.open;
  kept.forget([t.refs[0]!, t.refs[2]!]);
  assert.equal(kept.fdTable()!.open, held / 3);
  assert.equal(openFds(), before + held / 3);
  kept.forget(t.refs);
  assert.equal(openFds(), before);
});

test('the budget is honoured: past it, reads fall back to open/read/close with the same figures', () => {
  const t = tree(2, 6);
  const files = filesOfRef(t.refs[0]!).length;
  assert.equal(kept.setFdBudget(files * 2 + 1), files * 2 + 1);
  const before = openFds();
  const a = kept.readCgroupsSync(t.refs);
  const b = plain.readCgroupsSync(t.refs);
  for (let i = 0; i < t.refs.length; i++) assert.deepEqual(a.toObject(i), b.toObject(i));
  const s = kept.fdTable()!;
  assert.ok(s.open <= files * 2 + 1, `kept ${s.open}`);
  assert.ok(s.fallbacks > 0);
  assert.equal(openFds(), before + s.open);
  // Another batch of other cgroups evicts the least recently used entries, still within budget.
  const other: CgroupRef[] = tree(2, 2).refs;
  const evictionsBefore = s.evictions;
  kept.readCgroupsSync(other);
  const s2 = kept.fdTable()!;
  assert.ok(s2.open <= files * 2 + 1);
  assert.ok(s2.evictions > evictionsBefore, 'older entries evicted for the new batch');
  // A lower budget sheds descriptors at once; zero keeps nothing.
  kept.setFdBudget(0);
  assert.equal(kept.fdTable()!.open, 0);
  assert.equal(openFds(), before);
  const c = kept.readCgroupsSync(t.refs);
  assert.deepEqual(c.toObject(5), b.toObject(5));
  assert.equal(openFds(), before);
});

test('the budget cannot be raised past the derived one', () => {
  assert.equal(kept.setFdBudget(fullBudget + 1000), fullBudget);
  assert.throws(() => kept.setFdBudget(-1), TypeError);
});

const sameAs = (a: CgroupSampleBatch, b: CgroupSampleBatch): void => {
  assert.equal(a.count, b.count);
  for (let i = 0; i < a.count; i++) assert.deepEqual(a.toObject(i), b.toObject(i), `cgroup ${i}`);
};

for (const version of [2, 1] as const) {
  test(`v${version}: an absent file is not opened again until the re-check period, then picked up`, () => {
    const clock = new FakeClock();
    const reader = createNativeCgroupReader(undefined, { clock }).reader!.withKeepOpen(true);
    const t = tree(version, 3);
    // A controller not enabled for this cgroup: its files are absent.
    const name = version === 2 ? 'memory.stat' : 'memory.oom_control';
    const file = cgroupFilePath(t.refs[1]!, name);
    const content = readFileSync(file, 'utf8');
    const field = version === 2 ? 'memory.stat:anon' : 'memory.oom_control:oom_kill';
    const expected = t.cgroups[1]!.expected[field];
    assert.notEqual(expected, undefined);
    unlinkSync(file);
    const a = reader.readCgroupsSync(t.refs);
    assert.equal(a.status[1], CGROUP_OK);
    assert.equal(a.get(1, field), undefined);
    const held = reader.fdTable()!.open;

    // The file appears (the controller is enabled): the table still remembers it as absent...
    writeFileSync(file, content);
    clock.step(ABSENT_RECHECK_MS - 1);
    const b = reader.readCgroupsSync(t.refs);
    assert.equal(b.get(1, field), undefined, 'not opened again before the re-check');
    assert.equal(reader.fdTable()!.open, held);
    // ...while a reader without the table sees it at once.
    assert.equal(plain.readCgroupsSync(t.refs).get(1, field), expected);

    // Past the period one read opens it again, keeps it, and later reads go on seeing it.
    clock.step(1);
    const c = reader.readCgroupsSync(t.refs);
    assert.equal(c.get(1, field), expected);
    assert.equal(reader.fdTable()!.open, held + 1);
    sameAs(reader.readCgroupsSync(t.refs), plain.readCgroupsSync(t.refs));
    reader.forget(t.refs);
  });
}

test('forget() drops what the table remembers as absent: the next read opens the file', async () => {
  const reader = createNativeCgroupReader(undefined, { clock: new FakeClock() }).reader!.withKeepOpen(true);
  const t = tree(2, 2);
  const file = cgroupFilePath(t.refs[0]!, 'memory.current');
  const content = readFileSync(file, 'utf8');
  unlinkSync(file);
  assert.equal((await reader.readCgroups(t.refs)).get(0, 'memory.current'), undefined);
  writeFileSync(file, content);
  assert.equal((await reader.readCgroups(t.refs)).get(0, 'memory.current'), undefined);
  reader.forget([t.refs[0]!]);
  assert.equal((await reader.readCgroups(t.refs)).get(0, 'memory.current'), t.cgroups[0]!.expected['memory.current']);
  reader.forget(t.refs);
});

test('a v1 cgroup with remembered-absent PSI files still reads as gone when removed and releases its descriptors', () => {
  const reader = createNativeCgroupReader(undefined, { clock: new FakeClock() }).reader!.withKeepOpen(true);
  const t = tree(1, 2);
  // PSI files absent (a v1 cgroup outside the unified hierarchy), then the whole cgroup goes.
  for (const name of ['cpu.pressure', 'memory.pressure', 'io.pressure']) unlinkSync(cgroupFilePath(t.refs[0]!, name));
  assert.deepEqual([...reader.readCgroupsSync(t.refs).status], [CGROUP_OK, CGROUP_OK]);
  const before = openFds();
  const perContainer = filesOfRef(t.refs[0]!).length - 3;
  for (const dir of dirsOfRef(t.refs[0]!)) rmSync(dir, { recursive: true, force: true });
  assert.deepEqual([...reader.readCgroupsSync(t.refs).status], [CGROUP_MISSING, CGROUP_OK]);
  assert.equal(openFds(), before - perContainer);
  reader.forget(t.refs);
});

test('the last batch\'s entries are reused only for the same list with no entry erased since', () => {
  const t = tree(1, 6);
  const refs = t.refs;
  sameAs(kept.readCgroupsSync(refs), plain.readCgroupsSync(refs));
  // Same list again (entries reused), after forget (entries erased), in another order, a subset.
  sameAs(kept.readCgroupsSync(refs), plain.readCgroupsSync(refs));
  kept.forget([refs[2]!]);
  sameAs(kept.readCgroupsSync(refs), plain.readCgroupsSync(refs));
  const reversed = [...refs].reverse();
  sameAs(kept.readCgroupsSync(reversed), plain.readCgroupsSync(reversed));
  sameAs(kept.readCgroupsSync(refs.slice(1)), plain.readCgroupsSync(refs.slice(1)));
  // Entries evicted in the middle of a batch (a budget below one snapshot), then the same list.
  const files = filesOfRef(refs[0]!).length;
  kept.setFdBudget(files * 2);
  sameAs(kept.readCgroupsSync(refs), plain.readCgroupsSync(refs));
  sameAs(kept.readCgroupsSync(refs), plain.readCgroupsSync(refs));
  kept.setFdBudget(fullBudget);
  sameAs(kept.readCgroupsSync(refs), plain.readCgroupsSync(refs));
  // One cgroup removed and made again between two reads of the same list.
  for (const dir of dirsOfRef(refs[4]!)) rmSync(dir, { recursive: true, force: true });
  assert.equal(kept.readCgroupsSync(refs).status[4], CGROUP_MISSING);
  generateCgroupTree({ root: t.root, version: 1, containers: 6, clockTicks: kept.clockTicks });
  sameAs(kept.readCgroupsSync(refs), plain.readCgroupsSync(refs));
});
