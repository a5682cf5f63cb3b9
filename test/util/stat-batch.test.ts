// statBatch: the addon's one-job batch and the fs.promises.stat fallback give the same rows
// (files, directories, symlinks followed, ENOENT, ENOTDIR, long and empty lists), and bad
// arguments are refused with a TypeError by both, the addon's own checks included.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, stat, symlink, writeFile } from 'node:fs/promises';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadNative } from '../../src/native.js';
import { STAT_ROW, STAT_ROW_FIELDS, statBatch, statBatchBackend } from '../../src/util/stat-batch.js';

const dirs: string[] = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

const native = statBatchBackend().backend === 'native';

async function fixture(): Promise<{ d: string; paths: string[] }> {
  const d = await mkdtemp(join(tmpdir(), 'kts-statb-'));
  dirs.push(d);
  await writeFile(join(d, 'a.log'), 'x'.repeat(1234));
  await writeFile(join(d, 'empty'), '');
  await mkdir(join(d, 'sub'));
  await symlink(join(d, 'a.log'), join(d, 'link'));
  await symlink(join(d, 'nothing'), join(d, 'dangling'));
  const paths = [join(d, 'a.log'), join(d, 'empty'), join(d, 'sub'), join(d, 'missing'), join(d, 'a.log', 'x'), join(d, 'link'), join(d, 'dangling'), '', join(d, 'ü-non-ascii')];
  await writeFile(join(d, 'ü-non-ascii'), 'y');
  return { d, paths };
}

test('the fallback rows match fs.stat: fields, types, errno codes', async () => {
  const { paths } = await fixture();
  const r = await statBatch(paths, { backend: 'fallback' });
  assert.equal(r.length, paths.length);
  assert.equal(r.rows.length, paths.length * STAT_ROW);
  const big = await stat(paths[0]!, { bigint: true });
  assert.ok(r.ok(0) && r.isFile(0) && !r.isDirectory(0));
  assert.equal(r.size(0), 1234);
  assert.equal(r.ino(0), Number(big.ino));
  assert.equal(r.dev(0), Number(big.dev));
  assert.equal(BigInt(r.mtimeSec(0)) * 1_000_000_000n + BigInt(r.mtimeNsec(0)), big.mtimeNs);
  assert.equal(BigInt(r.ctimeSec(0)) * 1_000_000_000n + BigInt(r.ctimeNsec(0)), big.ctimeNs);
  assert.equal(r.mode(0), Number(big.mode));
  assert.ok(Math.abs(r.mtimeMs(0) - Number(big.mtimeNs) / 1e6) < 0.001);
  assert.ok(r.isFile(1) && r.size(1) === 0);
  assert.ok(r.isDirectory(2));
  assert.equal(r.code(3), 'ENOENT');
  assert.equal(r.code(4), 'ENOTDIR');
  // a symlink is followed, as fs.stat does
  assert.ok(r.isFile(5) && r.ino(5) === r.ino(0));
  assert.equal(r.code(6), 'ENOENT');
  assert.equal(r.code(7), 'ENOENT');
  assert.ok(r.isFile(8) && r.size(8) === 1);
  // a failed row is all zero past errno
  for (let f = 1; f < STAT_ROW; f++) assert.equal(r.rows[3 * STAT_ROW + f], 0, STAT_ROW_FIELDS[f]);
});

test('native and fallback agree on every row', { skip: !native && 'native addon not built' }, async () => {
  const { paths } = await fixture();
  const [n, f] = await Promise.all([statBatch(paths, { backend: 'native' }), statBatch(paths, { backend: 'fallback' })]);
  assert.deepEqual(Array.from(n.rows), Array.from(f.rows));
});

test('a long list (3000 paths, present and missing) in order, both backends alike', async () => {
  const { d } = await fixture();
  const paths: string[] = [];
  for (let i = 0; i < 3000; i++) paths.push(i % 3 === 0 ? join(d, `missing-${i}`) : i % 3 === 1 ? join(d, 'a.log') : join(d, 'sub'));
  const f = await statBatch(paths, { backend: 'fallback' });
  assert.equal(f.length, 3000);
  for (let i = 0; i < 3000; i++) {
    if (i % 3 === 0) assert.equal(f.code(i), 'ENOENT');
    else if (i % 3 === 1) assert.equal(f.size(i), 1234);
    else assert.ok(f.isDirectory(i));
  }
  if (native) assert.deepEqual(Array.from((await statBatch(paths)).rows), Array.from(f.rows));
});

test('an empty list resolves to no rows', async () => {
  for (const backend of native ? (['native', 'fallback'] as const) : (['fallback'] as const)) {
    const r = await statBatch([], { backend });
    assert.equal(r.length, 0);
  }
});

test('bad arguments are a TypeError naming the argument, with either backend', async () => {
  const bad: Array<[unknown, RegExp]> = [
    [undefined, /paths must be an array/],
    ['/etc', /paths must be an array/],
    [['/etc', 5], /paths\[1\] is not a string/],
    [['/a\0b'], /paths\[0\] contains a NUL/],
  ];
  for (const backend of ['native', 'fallback'] as const) {
    if (backend === 'native' && !native) continue;
    for (const [arg, re] of bad) await assert.rejects(statBatch(arg as string[], { backend }), (e: unknown) => e instanceof TypeError && re.test(e.message));
  }
});

test('the addon itself refuses bad arguments with a TypeError, never crashing', { skip: !native && 'native addon not built' }, async () => {
  const addon = loadNative().addon as unknown as { statBatch(p: unknown): Promise<Float64Array> };
  for (const arg of [undefined, 5, {}, ['a', 1], ['a\0b'], new Uint16Array(2), new Uint8Array([47])]) {
    assert.throws(() => addon.statBatch(arg), TypeError, String(arg));
  }
  // the cgroup reader's encoding: NUL-terminated UTF-8 bytes
  const { d } = await fixture();
  const rows = await addon.statBatch(new TextEncoder().encode(`${join(d, 'a.log')}\0${join(d, 'missing')}\0\0`));
  assert.equal(rows.length, 3 * STAT_ROW);
  assert.equal(rows[2], 1234);
  assert.equal(rows[STAT_ROW], 2); // ENOENT
  assert.equal(rows[2 * STAT_ROW], 2); // "" is ENOENT
});
