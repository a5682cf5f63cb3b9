import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { EXPECTED_ADDON_ABI, findPackageRoot, loadNative, type NativeAddon } from '../../src/native.js';
import { createNativeCgroupReader, encodeCgroupRefs, EncodedRefsCache } from '../../src/stats/cgroup-native-reader.js';
import { CGROUP_FIELD_NAMES } from '../../src/stats/cgroup-sample.js';
import { FakeClock } from '../../src/util/clock.js';

test('loader: addon absent → a reason naming the path, no throw', () => {
  const missing = path.join(tmpdir(), 'kts-no-such-dir', 'kubelet_ts_native.node');
  const got = loadNative({ path: missing });
  assert.equal(got.addon, undefined);
  assert.match(got.error ?? '', /not built/);
  assert.ok(got.error?.includes(missing));
  const reader = createNativeCgroupReader(got);
  assert.equal(reader.reader, undefined);
  assert.equal(reader.error, got.error);
});

test('loader: a file that is not an addon → a load-failure reason', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'kts-native-'));
  try {
    const file = path.join(dir, 'kubelet_ts_native.node');
    writeFileSync(file, 'not an ELF object');
    const got = loadNative({ path: file });
    assert.equal(got.addon, undefined);
    assert.match(got.error ?? '', /failed to load/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('loader: the built addon loads from the package root with the expected ABI', () => {
  assert.ok(findPackageRoot(), 'package root found above the module');
  const got = loadNative();
  assert.equal(got.error, undefined);
  assert.equal(got.addon?.addonAbi(), EXPECTED_ADDON_ABI);
  assert.deepEqual(got.addon?.fieldNames?.(), [...CGROUP_FIELD_NAMES]);
});

test('a stale addon without the reader, or with another field table, is refused', () => {
  const addonDouble: NativeAddon = { addonAbi: () => EXPECTED_ADDON_ABI };
  assert.match(createNativeCgroupReader({ addon: addonDouble }).error ?? '', /no cgroup reader/);
  const swapped = [...CGROUP_FIELD_NAMES];
  [swapped[1], swapped[2]] = [swapped[2]!, swapped[1]!];
  const reorderedDouble: NativeAddon = {
    addonAbi: () => EXPECTED_ADDON_ABI,
    fieldNames: () => swapped,
    readCgroupsSync: () => assert.fail('not called'),
    readCgroupsAsync: () => assert.fail('not called'),
  };
  const got = createNativeCgroupReader({ addon: reorderedDouble });
  assert.equal(got.reader, undefined);
  assert.match(got.error ?? '', /field 1 is "cpu.stat:system_usec"/);
});

test('encodeCgroupRefs: 6 NUL-terminated slots per cgroup', () => {
  const { kinds, paths } = encodeCgroupRefs([
    { version: 2, dir: '/a' },
    { version: 1, memory: '/m', cpu: '/c', unified: '/u' },
  ]);
  assert.deepEqual([...kinds], [2, 1]);
  assert.equal(paths, '/a\0\0\0\0\0\0/u\0/c\0\0/m\0\0\0');
  assert.throws(() => encodeCgroupRefs([{ version: 2, dir: 'a\0b' }]), /NUL/);
});

test('the addon rejects malformed arguments with a TypeError', () => {
  const addon = loadNative().addon!;
  assert.throws(() => addon.readCgroupsSync!(new Uint8Array([3]), '\0\0\0\0\0\0'), TypeError);
  assert.throws(() => addon.readCgroupsSync!(new Uint8Array([2]), '/a\0'), TypeError);
  assert.throws(() => addon.readCgroupsSync!([2] as unknown as Uint8Array, '/a\0\0\0\0\0\0'), TypeError);
  assert.throws(() => addon.readCgroupsSync!(new Uint8Array([2]), '/a\0\0\0\0\0\0', true, 1 as unknown as boolean), TypeError);
  assert.throws(() => addon.readCgroupsSync!(new Uint8Array([2]), new Uint16Array(7) as unknown as Uint8Array), TypeError);
  // The paths as UTF-8 bytes read the same as the string.
  const dir = path.join(tmpdir(), 'kts-no-such-cgroup-é');
  const asString = addon.readCgroupsSync!(new Uint8Array([2]), `${dir}\0\0\0\0\0\0`);
  const asBytes = addon.readCgroupsSync!(new Uint8Array([2]), new TextEncoder().encode(`${dir}\0\0\0\0\0\0`));
  assert.deepEqual(asBytes.status, asString.status);
  assert.throws(() => addon.readCgroupsSync!(new Uint8Array([2]), new TextEncoder().encode('/a\0')), TypeError);
});

test('EncodedRefsCache: the same encoding while the list names the same dirs, a new one when it does not', () => {
  const cache = new EncodedRefsCache();
  const decode = (e: { kinds: Uint8Array; paths: Uint8Array }) => ({ kinds: [...e.kinds], paths: new TextDecoder().decode(e.paths) });
  const list = [
    { version: 2, dir: '/a' },
    { version: 1, memory: '/m', cpu: '/c', unified: '/u' },
  ] as const;
  const first = cache.encode(list);
  const expected = encodeCgroupRefs(list);
  assert.deepEqual(decode(first), { kinds: [...expected.kinds], paths: expected.paths });
  // Equal refs in new objects (the provider builds its list each snapshot): reused as is.
  const again = cache.encode([{ version: 2, dir: '/a' }, { version: 1, memory: '/m', cpu: '/c', unified: '/u' }]);
  assert.equal(again.paths, first.paths);
  assert.equal(again.kinds, first.kinds);
  for (const changed of [
    [{ version: 2, dir: '/b' }, list[1]],
    [list[1], list[0]],
    [list[0]],
    [list[0], { version: 1, memory: '/m', cpu: '/c' }],
    [list[0], { version: 1, memory: '/m', cpu: '/c', unified: '/u', pids: '/p' }],
    [{ version: 1, cpu: '/a' }, list[1]],
  ] as const) {
    const got = cache.encode(changed);
    const want = encodeCgroupRefs(changed);
    assert.deepEqual(decode(got), { kinds: [...want.kinds], paths: want.paths });
  }
  // Invalid refs are still refused after a cached list.
  cache.encode(list);
  assert.throws(() => cache.encode([list[0], { version: 3, dir: '/x' }] as never), TypeError);
  assert.throws(() => cache.encode([list[0], null] as never), TypeError);
  assert.deepEqual(decode(cache.encode([])), { kinds: [], paths: '' });
});

test('the reader asks the addon to re-check absent files once per period of its clock, kept-open reads only', async () => {
  const calls: Array<[boolean | undefined, boolean | undefined]> = [];
  const empty = { status: new Uint8Array(0), values: new BigUint64Array(0), state: new Uint8Array(0), devIds: new Uint32Array(0), devValues: new BigUint64Array(0) };
  const clock = new FakeClock();
  const addonDouble: NativeAddon = {
    addonAbi: () => EXPECTED_ADDON_ABI,
    fieldNames: () => [...CGROUP_FIELD_NAMES],
    readCgroupsSync: (_k, _p, keepOpen, recheck) => (calls.push([keepOpen, recheck]), empty),
    readCgroupsAsync: async (_k, _p, keepOpen, recheck) => (calls.push([keepOpen, recheck]), empty),
    forgetCgroups: () => undefined,
    cgroupFdTable: () => assert.fail('not called'),
    setCgroupFdBudget: (n) => n,
  };
  const reader = createNativeCgroupReader({ addon: addonDouble }, { clock, absentRecheckMs: 1000 }).reader!;
  const plain = reader.withKeepOpen(false);
  reader.readCgroupsSync([]);
  clock.step(999);
  await reader.readCgroups([]);
  clock.step(1);
  plain.readCgroupsSync([]);
  await reader.readCgroups([]);
  reader.readCgroupsSync([]);
  clock.step(1000);
  reader.readCgroupsSync([]);
  assert.deepEqual(calls, [
    [true, false],
    [true, false],
    [false, false],
    [true, true],
    [true, false],
    [true, true],
  ]);
});
