// Real OOM kills in a memory-limited cgroup made by the test, seen by the per-cgroup source
// (eventfd on a v1 memory cgroup, inotify on a v2 one's memory.events) and by the eBPF source
// with the victim's pid and the cgroup's inode. Needs root. The cgroup goes wherever the
// machine has its memory controller (test/fixtures/oom-cgroup.ts): on the hybrid hosts these
// tests run on that is v1, so the v2 branches below do not run here; the v2 inotify path is
// covered on synthetic memory.events files (oom-watch-churn, test/oom).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

import { Registry } from '../../src/metrics/registry.js';
import { oomEventRecord } from '../../src/oom/events.js';
import { OomWatcher } from '../../src/oom/oom-watcher.js';
import type { OomEvent } from '../../src/oom/types.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { createMemoryCgroup, readOomKill, startAllocator, startShellAllocator } from '../fixtures/oom-cgroup.js';
import { collectingHandle, ebpfBuildExpected, realNative } from '../oom/helpers.js';

const LIMIT = 16 << 20;

function dmesg(): Promise<string> {
  return new Promise((resolve, reject) => execFile('dmesg', { maxBuffer: 64 << 20 }, (err, out) => (err ? reject(err) : resolve(out))));
}

function nextOom(w: OomWatcher, pred: (e: OomEvent) => boolean, what: string, timeoutMs = 20_000): Promise<OomEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { w.off('oom', on); reject(new Error(`no OOM event for ${what} within ${timeoutMs} ms`)); }, timeoutMs);
    const on = (e: OomEvent): void => {
      if (!pred(e)) return;
      clearTimeout(timer);
      w.off('oom', on);
      resolve(e);
    };
    w.on('oom', on);
  });
}

describe('real OOM kills in a memory cgroup', () => {
  it('the per-cgroup source and the eBPF source both report the victim pid and the cgroup inode', async () => {
    setLogSink(() => {});
    const native = realNative();
    const logger = createLogger();
    const expectEbpf = await ebpfBuildExpected();
    const cg = await createMemoryCgroup(LIMIT);
    const perCgroup = cg.version === 1 ? 'eventfd' : 'inotify';
    const registry = new Registry();
    const viaCgroup = new OomWatcher({ mode: 'cgroup', native, logger, registry });
    const viaEbpf = new OomWatcher({ mode: expectEbpf.expected ? 'ebpf' : 'auto', native, logger });
    try {
      await viaCgroup.start();
      const ebpfStatus = await viaEbpf.start();
      if (expectEbpf.expected) {
        assert.deepEqual(ebpfStatus.sources, ['ebpf']);
      } else {
        // This machine cannot build eBPF: the addon must say so, and auto must fall back.
        assert.equal(native.oomEbpfBuild().compiled, false);
        assert.match(ebpfStatus.ebpfUnavailableReason ?? '', /eBPF source not built/);
        assert.ok(ebpfStatus.sources.includes('eventfd'));
      }
      for (const w of [viaCgroup, viaEbpf]) {
        const r = await w.watchContainer('pod-v1', 'alloc', 'cid-v1', cg.ref);
        assert.equal(r.inode, cg.inode);
        if (w === viaCgroup) assert.equal(r.watch, perCgroup);
      }
      const fromEventfd = nextOom(viaCgroup, (e) => e.containerID === 'cid-v1', perCgroup);
      const fromEbpf = nextOom(viaEbpf, (e) => e.cgroupInode === cg.inode, 'eBPF');
      // Awaited below; marked handled so an early failure does not leave them unhandled.
      fromEventfd.catch(() => undefined);
      fromEbpf.catch(() => undefined);
      const alloc = await startAllocator(cg.dir);
      const exit = await alloc.exited;
      assert.equal(exit.signal, 'SIGKILL');
      assert.equal(await readOomKill(cg.dir), 1);

      const ev = await fromEventfd;
      assert.equal(ev.source, perCgroup);
      assert.equal(ev.scope, 'container');
      assert.equal(ev.podUID, 'pod-v1');
      assert.equal(ev.containerName, 'alloc');
      assert.equal(ev.count, 1);
      if (cg.version === 1 || ev.pid !== undefined) {
        // v2 names the victim from the kernel's OOM report, which the kernel may rate-limit.
        assert.equal(ev.pid, alloc.pid);
        assert.equal(ev.comm, 'oom-alloc');
      }
      assert.equal(ev.cgroupInode, cg.inode);
      assert.equal(viaCgroup.oomCounts().get('cid-v1'), 1);
      assert.match(registry.metricsText(), /^container_oom_events_total\{container="alloc",id="cid-v1",namespace="",pod=""\} 1$/m);

      const eb = await fromEbpf;
      assert.equal(eb.source, expectEbpf.expected ? 'ebpf' : perCgroup);
      if (expectEbpf.expected || cg.version === 1 || eb.pid !== undefined) assert.equal(eb.pid, alloc.pid);
      assert.equal(eb.containerID, 'cid-v1');
      assert.equal(eb.cgroupInode, cg.inode);
      if (expectEbpf.expected) {
        assert.equal(eb.comm, 'oom-alloc');
        assert.equal(eb.uid, 0);
        assert.equal(eb.cgroupPath, `/${basename(cg.dir)}`);
        assert.equal(eb.memory?.cgroupLimitBytes, LIMIT);
        assert.ok((eb.memory?.anonRssKb ?? 0) > 8 * 1024, `anon rss ${eb.memory?.anonRssKb} kB reflects the allocation`);
        assert.equal(typeof eb.kernelTimeNs, 'bigint');
      }
    } finally {
      viaCgroup.stop();
      viaEbpf.stop();
      await cg.remove();
      setLogSink((line) => process.stderr.write(line + '\n'));
    }
  });

  it('auto: a victim in a cgroup outside any pod is a node-level SystemOOM', async () => {
    const expectEbpf = await ebpfBuildExpected();
    setLogSink(() => {});
    const cg = await createMemoryCgroup(LIMIT);
    const w = new OomWatcher({ mode: 'auto', native: realNative(), logger: createLogger() });
    try {
      const status = await w.start();
      // Without eBPF, auto's kmsg companion reports victims outside pods.
      assert.deepEqual(status.sources, expectEbpf.expected ? ['ebpf'] : ['eventfd', 'inotify', 'kmsg']);
      const sh = startShellAllocator(cg.dir);
      const got = nextOom(w, (e) => e.pid === sh.pid, `the busybox victim ${sh.pid}`);
      got.catch(() => undefined);
      assert.equal((await sh.exited).signal, 'SIGKILL');
      const e = await got;
      assert.equal(e.scope, 'system');
      assert.equal(e.comm, 'busybox');
      assert.equal(e.cgroupPath, `/${basename(cg.dir)}`);
      const record = oomEventRecord(e);
      assert.equal(record?.object, 'node');
      assert.equal(record?.reason, 'SystemOOM');
      assert.equal(record?.message, `System OOM encountered, victim process: busybox, pid: ${sh.pid}`);
    } finally {
      w.stop();
      await cg.remove();
      setLogSink((line) => process.stderr.write(line + '\n'));
    }
  });

  it('a victim gone before the watcher looked is named from the kernel log', async () => {
    // A real kill is logged for a cgroup; a generated memory.events file in a directory with the
    // same cgroup path then reports a kill with no process left to find in its cgroup.procs.
    const cg = await createMemoryCgroup(LIMIT);
    const root = await mkdtemp(join(tmpdir(), 'kts-oom-kmsg-'));
    const { handle, waitFor } = collectingHandle(realNative());
    try {
      const alloc = await startAllocator(cg.dir);
      assert.equal((await alloc.exited).signal, 'SIGKILL');
      const twin = join(root, basename(cg.dir));
      await mkdir(twin);
      await writeFile(join(twin, 'memory.events'), 'oom 0\noom_kill 0\n');
      handle.watchV2(1, twin);
      await writeFile(join(twin, 'memory.events'), 'oom 1\noom_kill 1\n');
      const e = await waitFor((x) => x.kind === 'oom_kill', 'the generated kill');
      // The kernel rate-limits its OOM report (10 per 5 s node-wide); without the report line
      // the kill cannot be placed, and a stale pid must not be given instead.
      const reported = (await dmesg()).includes(`task_memcg=/${basename(cg.dir)},task=oom-alloc,pid=${alloc.pid},`);
      assert.deepEqual(e.victims, reported ? [{ pid: alloc.pid, comm: 'oom-alloc' }] : []);
    } finally {
      handle.close();
      await cg.remove();
      await rm(root, { recursive: true, force: true });
    }
  });
});
