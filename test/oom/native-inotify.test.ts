// The cgroup v2 source (inotify on memory.events) on generated files: this kernel's hybrid
// setup has no v2 memory controller, so real memory.events files cannot be produced here.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, unlink, writeFile, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { OomWatcher } from '../../src/oom/oom-watcher.js';
import type { OomEvent } from '../../src/oom/types.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { collectingHandle, realNative } from './helpers.js';

const events = (oom: number, oomKill: number): string => `low 0\nhigh 0\nmax ${oom * 3}\noom ${oom}\noom_kill ${oomKill}\noom_group_kill 0\n`;

describe('inotify source on generated memory.events', () => {
  let dir: string;
  before(async () => { dir = await mkdtemp(join(tmpdir(), 'kts-oom-v2-')); });
  after(async () => { await rm(dir, { recursive: true, force: true }); });

  it('reports increases of oom_kill (not oom) with the delta, and the file going away', async () => {
    const native = realNative();
    const { handle, events: got, waitFor } = collectingHandle(native);
    const file = join(dir, 'memory.events');
    await writeFile(file, events(0, 0));
    handle.watchV2(7, dir);
    try {
      // oom alone is no kill: had it produced an event, the first one would not have count 2.
      await writeFile(file, events(1, 0));
      await writeFile(file, events(2, 2));
      const first = await waitFor((e) => e.kind === 'oom_kill', 'oom_kill 0 -> 2');
      assert.equal(first.source, 'inotify');
      assert.equal(first.id, 7);
      assert.equal(first.count, 2);
      assert.equal(first.total, 2);
      assert.deepEqual(first.victims, []);

      // A file caught empty (mid-rewrite) is skipped, not read as a reset.
      await truncate(file, 0);
      await writeFile(file, events(3, 5));
      const second = await waitFor((e) => e.kind === 'oom_kill' && e.total === 5, 'oom_kill 2 -> 5');
      assert.equal(second.count, 3);
      assert.equal(got.filter((e) => e.kind === 'oom_kill').length, 2);

      await unlink(file);
      const removed = await waitFor((e) => e.kind === 'removed', 'the watch to end with the file');
      assert.equal(removed.id, 7);
      assert.equal(handle.stats().v2, 0);
    } finally {
      handle.close();
    }
  });

  it('rejects a cgroup dir without memory.events with the errno', () => {
    const native = realNative();
    const { handle } = collectingHandle(native);
    try {
      assert.throws(() => handle.watchV2(1, join(dir, 'nope')), (err: NodeJS.ErrnoException) => err.code === 'ENOENT' && /memory\.events/.test(err.message));
      assert.equal(handle.stats().watches, 0);
    } finally {
      handle.close();
    }
  });

  it('through OomWatcher (cgroup mode): a v2 container gets the event with its cgroup inode', async () => {
    setLogSink(() => {});
    const cg = await mkdtemp(join(dir, 'pod-'));
    await writeFile(join(cg, 'memory.events'), events(0, 0));
    const seen: OomEvent[] = [];
    const w = new OomWatcher({ mode: 'cgroup', native: realNative(), logger: createLogger() });
    try {
      await w.start();
      const r = await w.watchContainer('uid-v2', 'app', 'cid-v2', { version: 2, dir: cg });
      assert.equal(r.watch, 'inotify');
      const got = new Promise<OomEvent>((resolve) => w.once('oom', resolve));
      await writeFile(join(cg, 'memory.events'), events(1, 1));
      const e = await got;
      seen.push(e);
      assert.equal(e.source, 'inotify');
      assert.equal(e.containerID, 'cid-v2');
      assert.equal(e.podUID, 'uid-v2');
      assert.equal(e.cgroupInode, (await stat(cg)).ino);
      assert.equal(w.oomCounts().get('cid-v2'), 1);
    } finally {
      w.stop();
      setLogSink((line) => process.stderr.write(line + '\n'));
    }
  });
});
