// The native watcher's thread against what may go wrong around it: a handler that throws, a
// scan in progress, a failing epoll_wait, a JS thread that falls behind, a handle collected
// while its thread runs. On generated memory.events files (inotify): no root needed.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';

import { defaultAddonPath } from '../../src/native.js';
import type { NativeOomEvent } from '../../src/oom/native-types.js';
import { collectingHandle, realNative } from './helpers.js';

const events = (oomKill: number): string => `low 0\nhigh 0\nmax 0\noom ${oomKill}\noom_kill ${oomKill}\noom_group_kill 0\n`;

/** Polls pred until it holds; rejects naming `what` after timeoutMs. */
async function until(pred: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('native OOM watcher thread', () => {
  let root: string;
  let n = 0;
  before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-oom-native-')); });
  after(async () => { await rm(root, { recursive: true, force: true }); });

  async function cgroupDir(): Promise<string> {
    const dir = await mkdtemp(join(root, `c${n++}-`));
    await writeFile(join(dir, 'memory.events'), events(0));
    return dir;
  }

  it('a handler that throws is counted and reported as a warning; the process and the watcher go on', async () => {
    const native = realNative();
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => { warnings.push(w); };
    process.on('warning', onWarning);
    let calls = 0;
    const handle = new native.OomWatcherHandle(() => {
      calls++;
      throw new Error('handler boom');
    });
    try {
      const dir = await cgroupDir();
      handle.watchV2(1, dir);
      await writeFile(join(dir, 'memory.events'), events(1));
      await until(() => handle.stats().handlerErrors >= 1, 'the handler error to be counted');
      await until(() => warnings.some((w) => /handler boom/.test(w.message)), 'the process warning');
      assert.match(handle.stats().lastHandlerError ?? '', /handler boom/);
      // Still delivering after the throw.
      await writeFile(join(dir, 'memory.events'), events(2));
      await until(() => calls >= 2, 'a second delivery');
      assert.equal(handle.stats().running, true);
    } finally {
      handle.close();
      process.off('warning', onWarning);
    }
  });

  it('a handler that throws does not crash the process even where node treats addon callback exceptions as uncaught', async () => {
    const addon = process.env.KTS_NATIVE_ADDON || defaultAddonPath()!;
    const dir = await cgroupDir();
    // --force-node-api-uncaught-exceptions-policy: what later node versions do by default; an
    // exception rethrown from the delivery would end this child before it prints.
    const script = `
      const a = require(process.argv[1]);
      const { writeFileSync } = require('node:fs');
      const dir = process.argv[2];
      const h = new a.OomWatcherHandle(() => { throw new Error('handler boom'); });
      h.watchV2(1, dir);
      writeFileSync(dir + '/memory.events', 'oom 1\\noom_kill 1\\n');
      const poll = setInterval(() => {
        if (h.stats().handlerErrors < 1) return;
        clearInterval(poll);
        h.close();
        process.stdout.write('alive ' + h.stats().running + '\\n');
      }, 5);
    `;
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--force-node-api-uncaught-exceptions-policy=true', '--no-warnings', '-e', script, addon, dir], { timeout: 30_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}: ${stdout} ${stderr}`)) : resolve(stdout));
    });
    assert.equal(out, 'alive false\n');
  });

  it('watch, unwatch and stats return while a scan is in progress (the lock is not held across scans)', async () => {
    const native = realNative();
    const hooks = native.oomTestHooks!;
    const { handle, waitFor } = collectingHandle(native);
    hooks.holdScans(true);
    try {
      const dir = await cgroupDir();
      handle.watchV2(1, dir);
      await writeFile(join(dir, 'memory.events'), events(1));
      await until(() => hooks.scansInFlight() >= 1, 'the watcher thread to start its scan');
      // The thread is parked inside its scan until released: these must not wait for it.
      handle.watchV2(2, await cgroupDir());
      assert.equal(handle.unwatch(2), true);
      assert.equal(handle.stats().v2, 1);
      assert.equal(hooks.scansInFlight(), 1, 'the scan is still in progress');
      hooks.holdScans(false);
      const e = await waitFor((x) => x.kind === 'oom_kill' && x.id === 1, 'the held scan to finish');
      assert.equal(e.count, 1);
    } finally {
      hooks.holdScans(false);
      handle.close();
    }
  });

  it('an unwatch during a scan drops what the scan finds', async () => {
    const native = realNative();
    const hooks = native.oomTestHooks!;
    const { handle, events: got } = collectingHandle(native);
    hooks.holdScans(true);
    try {
      const dir = await cgroupDir();
      handle.watchV2(1, dir);
      await writeFile(join(dir, 'memory.events'), events(1));
      await until(() => hooks.scansInFlight() >= 1, 'the scan');
      assert.equal(handle.unwatch(1), true);
      hooks.holdScans(false);
      await until(() => hooks.scansInFlight() === 0, 'the scan to end');
      // A later watch's event arrives, the unwatched one's never did.
      const other = await cgroupDir();
      handle.watchV2(2, other);
      await writeFile(join(other, 'memory.events'), events(1));
      await until(() => got.some((e) => e.id === 2), 'the second watch');
      assert.deepEqual(got.filter((e) => e.id === 1), []);
    } finally {
      hooks.holdScans(false);
      handle.close();
    }
  });

  it('epoll_wait: EINTR is retried; any other error stops the thread and says so', async () => {
    const native = realNative();
    const { handle, waitFor } = collectingHandle(native);
    try {
      const dir = await cgroupDir();
      handle.watchV2(1, dir);
      handle._testFailNextPoll!(constants.errno.EINTR);
      await writeFile(join(dir, 'memory.events'), events(1));
      await waitFor((e) => e.kind === 'oom_kill', 'an event after EINTR');
      assert.equal(handle.stats().running, true);

      handle._testFailNextPoll!(constants.errno.EBADF);
      const failed = await waitFor((e) => e.kind === 'error' && e.source === 'watcher', 'the fatal error event');
      assert.equal(failed.fatal, true);
      assert.match(failed.message ?? '', /epoll_wait: Bad file descriptor/);
      const st = handle.stats();
      assert.equal(st.running, false);
      assert.match(st.error ?? '', /epoll_wait/);
    } finally {
      handle.close();
    }
  });

  it('the queue to JS is bounded: with the JS thread blocked, batches beyond the bound are dropped and counted', async () => {
    const native = realNative();
    const batches: NativeOomEvent[][] = [];
    const handle = new native.OomWatcherHandle((b) => { batches.push(b); }, { maxQueuedBatches: 2 });
    const dir = await cgroupDir();
    const file = join(dir, 'memory.events');
    const go = new Int32Array(new SharedArrayBuffer(4));
    const done = new Int32Array(new SharedArrayBuffer(4));
    // Writes the file 40 times, 25 ms apart, while this thread is blocked in Atomics.wait.
    const worker = new Worker(`
      const { workerData } = require('node:worker_threads');
      const { writeFileSync } = require('node:fs');
      const { go, done, file } = workerData;
      Atomics.wait(go, 0, 0);
      const pause = new Int32Array(new SharedArrayBuffer(4));
      for (let i = 1; i <= 40; i++) {
        writeFileSync(file, 'oom ' + i + '\\noom_kill ' + i + '\\n');
        Atomics.wait(pause, 0, 0, 25);
      }
      Atomics.store(done, 0, 1);
      Atomics.notify(done, 0);
    `, { eval: true, workerData: { go, done, file } });
    try {
      handle.watchV2(1, dir);
      await new Promise((r) => worker.once('online', r));
      Atomics.store(go, 0, 1);
      Atomics.notify(go, 0);
      assert.equal(Atomics.wait(done, 0, 0, 60_000), 'ok');
      // Give the native thread time to post what the last write produced, then drain.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
      const st = handle.stats();
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(batches.length <= 2, `at most the bound was queued, got ${batches.length} batches`);
      assert.ok(st.droppedBatches >= 1, `dropped batches counted: ${JSON.stringify(st)}`);
      assert.ok(st.droppedEvents >= st.droppedBatches);
      assert.equal(handle.stats().running, true);
    } finally {
      await worker.terminate();
      handle.close();
    }
  });

  it('a handle collected while its thread is busy does not block the finalizer; the thread then ends', async () => {
    const addon = process.env.KTS_NATIVE_ADDON || defaultAddonPath()!;
    const dir = await cgroupDir();
    // In a child with --expose-gc. Old behaviour: the finalizer joined the thread, which waited
    // for a scan only this (then blocked) JS thread could release: a hang.
    const script = `
      const a = require(process.argv[1]);
      const { writeFileSync, readdirSync, readFileSync } = require('node:fs');
      const dir = process.argv[2];
      const threads = () => readdirSync('/proc/self/task').filter((t) => { try { return readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim() === 'kts-oom-watch'; } catch { return false; } }).length;
      const tick = () => new Promise((r) => setTimeout(r, 5));
      (async () => {
        a.oomTestHooks.holdScans(true);
        let h = new a.OomWatcherHandle(() => {});
        h.watchV2(1, dir);
        writeFileSync(dir + '/memory.events', 'oom 1\\noom_kill 1\\n');
        while (a.oomTestHooks.scansInFlight() === 0) await tick();
        h = null;
        for (let i = 0; i < 5; i++) { gc(); await tick(); }
        process.stdout.write('collected ' + threads() + '\\n');
        a.oomTestHooks.holdScans(false);
        for (let i = 0; i < 2000 && threads() > 0; i++) await tick();
        process.stdout.write('threads ' + threads() + '\\n');
        process.exit(0);
      })();
    `;
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--expose-gc', '-e', script, addon, dir], { timeout: 30_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}: ${stdout} ${stderr}`)) : resolve(stdout));
    });
    assert.match(out, /^collected 1$/m, 'the finalizer returned while the thread was still in its scan');
    assert.match(out, /^threads 0$/m, 'the collected watcher was told to stop');
  });
});
