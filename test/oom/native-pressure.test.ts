// The native watcher's cgroup v2 memory-pressure watches on generated files: this kernel's
// memory controller is v1, so real memory.events cannot be produced here, but a regular file
// written by the test raises IN_MODIFY just as cgroupfs does. (PSI triggers on real pressure
// files: test/integration/psi-trigger.test.ts.)
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { createV2MemoryNotifier } from '../../src/eviction/memcg-notifier-v2.js';
import { realClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { collectingHandle, realNative } from './helpers.js';

const events = (c: { low?: number; high?: number; max?: number; oom?: number; oomKill?: number }): string =>
  `low ${c.low ?? 0}\nhigh ${c.high ?? 0}\nmax ${c.max ?? 0}\noom ${c.oom ?? 0}\noom_kill ${c.oomKill ?? 0}\noom_group_kill 0\n`;

describe('native memory.events watch on a generated file', () => {
  let dir: string;
  before(async () => { dir = await mkdtemp(join(tmpdir(), 'kts-mem-events-')); });
  after(async () => { await rm(dir, { recursive: true, force: true }); });

  it('returns the counters when armed, then delivers each rise with every counter and the deltas', async () => {
    const { handle, events: got, waitFor } = collectingHandle(realNative());
    const file = join(dir, 'memory.events');
    await writeFile(file, events({ low: 2, max: 1 }));
    try {
      assert.deepEqual(handle.watchMemoryEvents!(3, file), { low: 2, high: 0, max: 1, oom: 0, oom_kill: 0, oom_group_kill: 0 });
      assert.equal(handle.stats().memoryEvents, 1);
      await writeFile(file, events({ low: 2, high: 4, max: 1 }));
      const first = await waitFor((e) => e.kind === 'memory_events', 'high 0 -> 4');
      assert.equal(first.source, 'inotify');
      assert.equal(first.id, 3);
      assert.deepEqual(first.counters, { low: 2, high: 4, max: 1, oom: 0, oom_kill: 0, oom_group_kill: 0 });
      assert.deepEqual(first.deltas, { high: 4 });

      // Rewritten with the same counters: no change, no event. Caught empty or cut mid-line
      // (mid-rewrite): skipped, not read as counters gone or lowered.
      await writeFile(file, events({ low: 2, high: 4, max: 1 }));
      await truncate(file, 0);
      await writeFile(file, 'low 2\nhigh 4\nmax 1\noom 0\noom_k');
      await writeFile(file, events({ low: 2, high: 4, max: 3, oom: 1, oomKill: 1 }));
      const second = await waitFor((e) => e.kind === 'memory_events' && e.counters?.max === 3, 'max 1 -> 3');
      assert.deepEqual(second.deltas, { max: 2, oom: 1, oom_kill: 1 });
      assert.equal(got.filter((e) => e.kind === 'memory_events').length, 2, JSON.stringify(got, (_k, v) => (typeof v === 'bigint' ? String(v) : v)));

      await unlink(file);
      const lost = await waitFor((e) => e.kind === 'watch_lost', 'the watch to end with the file');
      assert.equal(lost.id, 3);
      assert.match(lost.message!, new RegExp(`memory\\.events watch on ${file} ended`));
      assert.equal(handle.stats().memoryEvents, 0);
    } finally {
      handle.close();
    }
  });

  it('stops delivering once unwatched, and re-arming an id replaces its watch', async () => {
    const { handle, events: got, waitFor } = collectingHandle(realNative());
    const a = join(dir, 'a.events');
    const b = join(dir, 'b.events');
    await writeFile(a, events({}));
    await writeFile(b, events({}));
    try {
      handle.watchMemoryEvents!(1, a);
      handle.watchMemoryEvents!(1, b);
      assert.equal(handle.stats().memoryEvents, 1);
      await writeFile(a, events({ max: 7 }));
      await writeFile(b, events({ max: 1 }));
      const e = await waitFor((x) => x.kind === 'memory_events', 'b to change');
      assert.equal(e.id, 1);
      assert.equal(e.counters?.max, 1, 'the change of b, not of a');
      assert.equal(handle.unwatchMemoryEvents!(1), true);
      assert.equal(handle.unwatchMemoryEvents!(1), false);
      // a second handle's watch on b shows the change was made and seen
      const other = collectingHandle(realNative());
      try {
        other.handle.watchMemoryEvents!(5, b);
        await writeFile(b, events({ max: 2 }));
        await other.waitFor((x) => x.kind === 'memory_events', 'the other handle to see b');
      } finally {
        other.handle.close();
      }
      assert.equal(got.filter((x) => x.kind === 'memory_events').length, 1, 'only b\'s first change, under id 1');
    } finally {
      handle.close();
    }
  });

  it('refuses a missing file, naming it, with the errno', () => {
    const { handle } = collectingHandle(realNative());
    const file = join(dir, 'nope', 'memory.events');
    try {
      assert.throws(() => handle.watchMemoryEvents!(1, file), (err: NodeJS.ErrnoException) =>
        err.code === 'ENOENT' && err.message.startsWith(`memory.events watch ${file}: inotify_add_watch:`));
      assert.equal(handle.stats().memoryEvents, 0);
    } finally {
      handle.close();
    }
  });

  it('refuses a PSI trigger on a file that is not a PSI file, naming it, and writes nothing there', async () => {
    const { handle } = collectingHandle(realNative());
    const file = join(dir, 'memory.pressure');
    const text = 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n';
    await writeFile(file, text);
    try {
      assert.throws(() => handle.watchPressure!(1, file, 'some 150000 1000000'), (err: NodeJS.ErrnoException) =>
        err.code === 'EINVAL' && err.message.startsWith(`PSI trigger ${file}: not a PSI file`));
      assert.throws(() => handle.watchPressure!(1, join(dir, 'none.pressure'), 'some 150000 1000000'), (err: NodeJS.ErrnoException) =>
        err.code === 'ENOENT' && err.message.startsWith(`PSI trigger ${join(dir, 'none.pressure')}: open:`));
      assert.equal(await readFile(file, 'utf8'), text);
      assert.equal(handle.stats().psiTriggers, 0);
      assert.equal(handle.stats().fds, 2, 'only the epoll and wake fds: the refused file was closed');
    } finally {
      handle.close();
    }
  });

  it('through the v2 notifier: a max rise reaches the eviction manager\'s callback', async () => {
    setLogSink(() => undefined);
    const file = join(dir, 'pods.events');
    await writeFile(file, events({}));
    const passes: string[] = [];
    let resolve!: () => void;
    const passed = new Promise<void>((r) => { resolve = r; });
    const r = createV2MemoryNotifier({
      native: realNative(), podsDir: dir, eventsFile: file, psiFile: null, clock: realClock, log: createLogger(),
      onCross: (k) => { passes.push(k); resolve(); },
    });
    const n = r.notifier!;
    try {
      assert.ok(n, r.reason);
      assert.deepEqual(n.armed(), { events: file });
      await writeFile(file, events({ low: 5 }));
      await writeFile(file, events({ low: 5, max: 2 }));
      await passed;
      assert.deepEqual(passes, ['pods memory.events (max +2)']);
      assert.ok(n.lastCross && n.lastCross.deliveredTimeNs >= n.lastCross.observedTimeNs);
    } finally {
      n.close();
    }
  });
});
