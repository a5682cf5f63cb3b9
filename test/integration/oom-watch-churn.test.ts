// Many watches added and removed: one thread, at most one fd per cgroup, none left behind.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { OomWatcher } from '../../src/oom/oom-watcher.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { createMemoryCgroup, removeCgroupDir, type TestMemoryCgroup } from '../fixtures/oom-cgroup.js';
import { collectingHandle, realNative } from '../oom/helpers.js';

async function openFds(): Promise<number> {
  return (await readdir('/proc/self/fd')).length;
}

async function threadCount(): Promise<number> {
  return (await readdir('/proc/self/task')).length;
}

describe('watch add/remove at scale', () => {
  it('2000 v2 cgroups cost no fd each, and unwatching them all leaks nothing', async () => {
    const root = await mkdtemp(join(tmpdir(), 'kts-oom-churn-'));
    const dirs: string[] = [];
    for (let i = 0; i < 2000; i++) {
      const d = join(root, `c${i}`);
      await mkdir(d);
      await writeFile(join(d, 'memory.events'), 'oom 0\noom_kill 0\n');
      dirs.push(d);
    }
    const before = await openFds();
    const threadsBefore = await threadCount();
    const { handle } = collectingHandle(realNative());
    try {
      for (let round = 0; round < 3; round++) {
        dirs.forEach((d, i) => handle.watchV2(i, d));
        assert.equal(handle.stats().v2, 2000);
        // epoll + wake eventfd + one shared inotify fd, whatever the number of cgroups.
        assert.equal(await openFds(), before + 3);
        assert.equal(await threadCount(), threadsBefore + 1);
        dirs.forEach((_d, i) => assert.equal(handle.unwatch(i), true));
        assert.equal(handle.stats().watches, 0);
      }
      // Re-watching an id replaces its watch instead of adding one.
      handle.watchV2(1, dirs[0]!);
      handle.watchV2(1, dirs[1]!);
      assert.equal(handle.stats().v2, 1);
    } finally {
      handle.close();
    }
    assert.equal(await openFds(), before);
    assert.equal(await threadCount(), threadsBefore);
    await rm(root, { recursive: true, force: true });
  });

  it('300 real memory cgroups: freed on unwatch and on cgroup removal (v1: one eventfd each; v2: the shared inotify fd)', async () => {
    // The cgroups go where the machine has its memory controller (v1 on the hybrid hosts these
    // tests run on, so the v2 branch does not run here; synthetic v2 dirs are the test above).
    const cgroups: TestMemoryCgroup[] = [];
    const before = await openFds();
    const { handle, events, waitFor } = collectingHandle(realNative());
    try {
      for (let i = 0; i < 300; i++) cgroups.push(await createMemoryCgroup(64 << 20, 'kts-oom-churn'));
      const v1 = cgroups[0]!.version === 1;
      // v1: epoll + wake eventfd + one eventfd per cgroup; v2: epoll + wake eventfd + one inotify fd.
      const perCgroupFds = (n: number): number => (v1 ? 2 + n : 3);
      cgroups.forEach((c, i) => (v1 ? handle.watchV1(i, c.dir) : handle.watchV2(i, c.dir)));
      assert.equal(v1 ? handle.stats().v1 : handle.stats().v2, 300);
      assert.equal(await openFds(), before + perCgroupFds(300));
      for (let i = 0; i < 150; i++) assert.equal(handle.unwatch(i), true);
      assert.equal(await openFds(), before + perCgroupFds(150));
      // The kernel signals each remaining watch once more when its cgroup is removed
      // (v1: the eventfd; v2: inotify's IN_IGNORED).
      for (const c of cgroups) await c.remove();
      for (let i = 150; i < 300; i++) await waitFor((e) => e.kind === 'removed' && e.id === i, `removal of cgroup ${i}`);
      assert.equal(events.filter((e) => e.kind === 'removed').length, 150);
      assert.equal(events.filter((e) => e.kind === 'oom_kill').length, 0);
      assert.equal(handle.stats().watches, 0);
      // v2 may keep its one inotify fd until close.
      if (v1) assert.equal(await openFds(), before + 2);
      else assert.ok((await openFds()) <= before + 3);
    } finally {
      handle.close();
      for (const c of cgroups) await removeCgroupDir(c.dir);
    }
    assert.equal(await openFds(), before);
  });

  it('OomWatcher: 2000 containers watched and unwatched leave no native watch behind', async () => {
    setLogSink(() => {});
    const root = await mkdtemp(join(tmpdir(), 'kts-oom-churn-w-'));
    const w = new OomWatcher({ mode: 'cgroup', native: realNative(), logger: createLogger() });
    try {
      await w.start();
      const before = await openFds();
      for (let i = 0; i < 2000; i++) {
        const d = join(root, `c${i}`);
        await mkdir(d);
        await writeFile(join(d, 'memory.events'), 'oom 0\noom_kill 0\n');
        const r = await w.watchContainer(`pod-${i % 50}`, 'c', `cid-${i}`, { version: 2, dir: d });
        assert.equal(r.watch, 'inotify');
      }
      assert.equal(w.nativeStats()?.v2, 2000);
      for (let i = 0; i < 2000; i++) w.unwatch(`cid-${i}`);
      assert.equal(w.nativeStats()?.watches, 0);
      assert.ok((await openFds()) <= before + 1, 'at most the shared inotify fd was added');
    } finally {
      w.stop();
      setLogSink((line) => process.stderr.write(line + '\n'));
      await rm(root, { recursive: true, force: true });
    }
  });
});
