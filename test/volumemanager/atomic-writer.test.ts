import assert from 'node:assert/strict';
import { lstat, mkdtemp, readdir, readFile, readlink, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeAtomically, validatePayloadPath, type FileProjection } from '../../src/volumemanager/atomic-writer.js';
import { FakeClock } from '../../src/util/clock.js';

const payload = (o: Record<string, string>, mode = 0o644): Map<string, FileProjection> =>
  new Map(Object.entries(o).map(([k, v]) => [k, { data: v, mode }]));

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-aw-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

describe('atomic writer', () => {
  it('writes into a timestamped dir behind ..data, with user-visible symlinks', async () => {
    const dir = join(root, 'a');
    const clock = new FakeClock(Date.UTC(2024, 4, 6, 7, 8, 9));
    assert.equal(await writeAtomically(dir, payload({ one: '1', 'nested/two': '2' }), clock), true);
    const ts = await readlink(join(dir, '..data'));
    assert.match(ts, /^\.\.2024_05_06_07_08_09\.\d+$/);
    assert.equal(await readlink(join(dir, 'one')), '..data/one');
    assert.equal(await readlink(join(dir, 'nested')), '..data/nested');
    assert.equal(await readFile(join(dir, 'nested', 'two'), 'utf8'), '2');
    assert.equal((await stat(join(dir, 'one'))).mode & 0o777, 0o644);
  });

  it('an unchanged payload writes nothing; a changed one swaps ..data, drops the old dir and stale names', async () => {
    const dir = join(root, 'b');
    const clock = new FakeClock(Date.UTC(2024, 0, 1));
    await writeAtomically(dir, payload({ keep: 'k', gone: 'g' }), clock);
    const first = await readlink(join(dir, '..data'));
    assert.equal(await writeAtomically(dir, payload({ keep: 'k', gone: 'g' }), clock), false);
    assert.equal(await readlink(join(dir, '..data')), first);
    clock.step(1000);
    assert.equal(await writeAtomically(dir, payload({ keep: 'k2' }), clock), true);
    const second = await readlink(join(dir, '..data'));
    assert.notEqual(second, first);
    assert.equal(await readFile(join(dir, 'keep'), 'utf8'), 'k2');
    const names = (await readdir(dir)).sort();
    assert.deepEqual(names, ['..data', 'keep', second].sort());
    await assert.rejects(lstat(join(dir, 'gone')));
  });

  it('refuses payload paths that escape or collide with its own names', async () => {
    for (const p of ['/abs', '../up', 'a/../../b', '..data', '..hidden']) {
      assert.ok(validatePayloadPath(p), p);
      await assert.rejects(writeAtomically(join(root, 'c'), payload({ [p]: 'x' }), new FakeClock()), /invalid path/);
    }
    assert.equal(validatePayloadPath('ok/file.txt'), undefined);
  });
});
