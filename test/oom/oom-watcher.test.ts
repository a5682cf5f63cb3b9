// OomWatcher's source selection, attribution and metrics, against a test double of the
// native watcher (the real one is exercised in native-*.test.ts and real-oom.test.ts).
import { describe, it, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Registry } from '../../src/metrics/registry.js';
import { oomEventRecord } from '../../src/oom/events.js';
import type { NativeOomEvent, NativeOomExports, NativeOomWatcherHandle, NativeStartResult } from '../../src/oom/native-types.js';
import { OomWatcher, OomWatcherError } from '../../src/oom/oom-watcher.js';
import { isKubeletError } from '../../src/util/errors.js';
import type { OomEvent } from '../../src/oom/types.js';
import { FakeClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';

/** Test double of the addon's OOM exports: records calls, lets the test push native events. */
class NativeOomDouble implements NativeOomExports {
  ebpfResult: NativeStartResult = { ok: true };
  kmsgResult: NativeStartResult = { ok: true };
  handles: HandleDouble[] = [];
  readonly OomWatcherHandle: new (cb: (events: NativeOomEvent[]) => void) => NativeOomWatcherHandle;

  constructor() {
    const self = this;
    this.OomWatcherHandle = class extends HandleDouble {
      constructor(cb: (events: NativeOomEvent[]) => void) {
        super(cb, self);
        self.handles.push(this);
      }
    };
  }
}

class HandleDouble implements NativeOomWatcherHandle {
  calls: string[] = [];
  v1 = new Map<number, string>();
  v2 = new Map<number, string>();
  closed = false;
  constructor(readonly push: (events: NativeOomEvent[]) => void, private readonly owner: NativeOomDouble) {}
  watchV1(id: number, dir: string): void { this.calls.push(`watchV1 ${id} ${dir}`); this.v1.set(id, dir); }
  watchV2(id: number, dir: string): void { this.calls.push(`watchV2 ${id} ${dir}`); this.v2.set(id, dir); }
  unwatch(id: number): boolean { this.calls.push(`unwatch ${id}`); return this.v1.delete(id) || this.v2.delete(id); }
  startEbpf(): NativeStartResult { this.calls.push('startEbpf'); return this.owner.ebpfResult; }
  stopEbpf(): void {}
  startKmsg(): NativeStartResult { this.calls.push('startKmsg'); return this.owner.kmsgResult; }
  stopKmsg(): void {}
  stats() { return { watches: this.v1.size + this.v2.size, v1: this.v1.size, v2: this.v2.size, fds: 2 + this.v1.size, ebpf: false, kmsg: false, running: !this.closed, droppedBatches: 0, droppedEvents: 0, handlerErrors: 0 }; }
  ref(): void {}
  unref(): void {}
  close(): void { this.closed = true; }
}

const POD = '11111111-2222-3333-4444-555555555555';
const CID = 'c'.repeat(64);
const now = (): bigint => process.hrtime.bigint();

describe('OomWatcher (native double)', () => {
  let dir: string;
  let cgDir: string;
  let inode: number;

  beforeEach(async () => {
    setLogSink(() => {});
    dir = await mkdtemp(join(tmpdir(), 'kts-oom-watcher-'));
    cgDir = join(dir, 'memory', 'kubepods', 'burstable', `pod${POD}`, CID);
    await mkdir(cgDir, { recursive: true });
    inode = (await stat(cgDir)).ino;
  });
  afterEach(async () => {
    setLogSink((line) => process.stderr.write(line + '\n'));
    await rm(dir, { recursive: true, force: true });
  });

  const logger = createLogger();

  it('auto takes eBPF when it loads and arms no per-cgroup watch', async () => {
    const native = new NativeOomDouble();
    const w = new OomWatcher({ mode: 'auto', native, logger });
    const status = await w.start();
    assert.deepEqual(status.sources, ['ebpf']);
    assert.equal(status.ebpfUnavailableReason, undefined);
    const r = await w.watchContainer(POD, 'app', CID, { version: 1, memory: cgDir });
    assert.deepEqual(r, { inode, watch: 'none' });
    assert.deepEqual(native.handles[0]!.calls, ['startEbpf']);
    w.stop();
    assert.equal(native.handles[0]!.closed, true);
  });

  it('auto says why eBPF was not taken and falls back to cgroup notifications plus kmsg', async () => {
    const native = new NativeOomDouble();
    native.ebpfResult = { ok: false, reason: 'not root (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)' };
    const w = new OomWatcher({ mode: 'auto', native, logger });
    const status = await w.start();
    assert.deepEqual(status.sources, ['eventfd', 'inotify', 'kmsg']);
    assert.equal(status.ebpfUnavailableReason, 'not root (needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)');
    const r1 = await w.watchContainer(POD, 'app', CID, { version: 1, memory: cgDir, cpu: '/nowhere' });
    assert.deepEqual(r1, { inode, watch: 'eventfd' });
    const r2 = await w.watchContainer(POD, 'side', 'd'.repeat(64), { version: 2, dir });
    assert.equal(r2.watch, 'inotify');
    const h = native.handles[0]!;
    assert.deepEqual([...h.v1.values()], [cgDir]);
    assert.deepEqual([...h.v2.values()], [dir]);
    w.unwatch(CID);
    w.unwatch('d'.repeat(64));
    assert.equal(h.v1.size + h.v2.size, 0);
    w.stop();
  });

  it('watched() lists the watched containers with when they were watched; unwatch removes them and their native watch', async () => {
    const native = new NativeOomDouble();
    native.ebpfResult = { ok: false, reason: 'no eBPF here' };
    const clock = new FakeClock(5_000);
    const w = new OomWatcher({ mode: 'cgroup', native, logger, clock });
    await w.start();
    await w.watchContainer(POD, 'app', CID, { version: 1, memory: cgDir });
    clock.step(1_000);
    await w.watchContainer(POD, 'side', 'd'.repeat(64), { version: 2, dir });
    assert.deepEqual(w.watched(), [
      { containerID: CID, podUID: POD, since: 5_000 },
      { containerID: 'd'.repeat(64), podUID: POD, since: 6_000 },
    ]);
    w.unwatch(CID);
    assert.deepEqual(w.watched().map((c) => c.containerID), ['d'.repeat(64)]);
    assert.deepEqual([...native.handles[0]!.v1.values()], []);
    w.stop();
  });

  it('an explicit ebpf mode rejects with the reason when eBPF does not load', async () => {
    const native = new NativeOomDouble();
    native.ebpfResult = { ok: false, reason: 'no BTF: /sys/kernel/btf/vmlinux is missing' };
    const w = new OomWatcher({ mode: 'ebpf', native, logger });
    await assert.rejects(w.start(), (err: unknown) => err instanceof OomWatcherError && err.code === 'OomWatcherUnavailable' && /no BTF/.test(err.message));
    assert.equal(native.handles[0]!.closed, true);
  });

  it('its errors are KubeletErrors with a stable code', async () => {
    const w = new OomWatcher({ mode: 'off', native: new NativeOomDouble(), logger });
    await w.start();
    await assert.rejects(w.start(), (err: unknown) => isKubeletError(err, 'OomWatcherState') && (err as Error).name === 'OomWatcherError' && /already running/.test((err as Error).message));
  });

  it('a fatal native error is said in status() and the watcher keeps serving what it has', async () => {
    const native = new NativeOomDouble();
    const w = new OomWatcher({ mode: 'cgroup', native, logger });
    await w.start();
    native.handles[0]!.push([{ kind: 'error', source: 'watcher', fatal: true, message: 'oom watcher thread stopped: epoll_wait: Bad file descriptor', observedTimeNs: now() }]);
    assert.match(w.status().nativeFailure ?? '', /epoll_wait: Bad file descriptor/);
    // A non-fatal error (one cgroup file) is no failure of the watcher.
    native.handles[0]!.push([{ kind: 'error', source: 'eventfd', message: 'read x: EIO', observedTimeNs: now() }]);
    assert.match(w.status().nativeFailure ?? '', /epoll_wait/);
    w.stop();
  });

  it('off starts nothing; a missing addon turns auto off with the reason and fails cgroup mode', async () => {
    const native = new NativeOomDouble();
    const off = new OomWatcher({ mode: 'off', native, logger });
    assert.deepEqual((await off.start()).sources, []);
    assert.equal(native.handles.length, 0);
    const auto = new OomWatcher({ mode: 'auto', native: {}, logger });
    const st = await auto.start();
    assert.deepEqual(st.sources, []);
    assert.match(st.nativeUnavailableReason ?? '', /OOM watcher/);
    await assert.rejects(new OomWatcher({ mode: 'cgroup', native: {}, logger }).start(), OomWatcherError);
  });

  it('attributes eBPF kills by inode, then by path, and counts them per container', async () => {
    const native = new NativeOomDouble();
    const registry = new Registry();
    const events: OomEvent[] = [];
    const w = new OomWatcher({ mode: 'ebpf', native, registry, logger, onEvent: (e) => events.push(e) });
    await w.start();
    await w.watchContainer(POD, 'app', CID, { version: 1, memory: cgDir }, { podName: 'web', podNamespace: 'shop' });
    const h = native.handles[0]!;
    const ebpf = (over: Partial<NativeOomEvent>): NativeOomEvent => ({ kind: 'oom_kill', source: 'ebpf', observedTimeNs: now(), count: 1, pid: 100, tid: 100, comm: 'java', uid: 0, ...over });
    h.push([
      ebpf({ memcgInode: inode, cgroupPath: '/not/used/when/inode/matches' }),
      ebpf({ pid: 101, memcgInode: 1, cgroupPath: `/kubepods/burstable/pod${POD}/${'e'.repeat(64)}` }),
      ebpf({ pid: 102, memcgInode: 2, cgroupPath: '/system.slice/sshd.service', comm: 'sshd' }),
      ebpf({ pid: 103, memcgInode: 3, cgroupPath: '/', cgroupPathFromProc: true }),
    ]);
    assert.equal(events.length, 4);
    assert.deepEqual(
      events.map((e) => [e.pid, e.scope, e.podUID, e.containerName, e.containerID]),
      [
        [100, 'container', POD, 'app', CID],
        [101, 'pod', POD, undefined, 'e'.repeat(64)],
        [102, 'system', undefined, undefined, undefined],
        // "/" read from /proc for an exiting v1 task proves nothing.
        [103, 'unknown', undefined, undefined, undefined],
      ],
    );
    assert.equal(events[0]!.cgroupInode, inode);
    assert.equal(events[0]!.podNamespace, 'shop');
    assert.equal(oomEventRecord(events[2]!)?.reason, 'SystemOOM');
    assert.equal(w.oomCounts().get(CID), 1);
    assert.match(registry.metricsText(), /container_oom_events_total\{container="app",id="c+",namespace="shop",pod="web"\} 1\n/);

    // A kill that races the unwatch still lands on the container.
    w.unwatch(CID);
    assert.doesNotMatch(registry.metricsText(), /container="app"/);
    h.push([ebpf({ pid: 104, memcgInode: inode })]);
    assert.equal(events[4]!.containerID, CID);
    assert.equal(w.oomKills(CID), 2);
    w.stop();
  });

  it('turns eventfd kills into container events with the dying process as victim', async () => {
    const native = new NativeOomDouble();
    const events: OomEvent[] = [];
    const w = new OomWatcher({ mode: 'cgroup', native, logger });
    w.on('oom', (e: OomEvent) => events.push(e));
    await w.start();
    await w.watchContainer(POD, 'app', CID, { version: 1, memory: cgDir });
    const h = native.handles[0]!;
    const [id] = [...h.v1.keys()];
    h.push([
      { kind: 'oom', source: 'eventfd', observedTimeNs: now(), id },
      { kind: 'oom_kill', source: 'eventfd', observedTimeNs: now(), id, count: 2, total: 2, victims: [{ pid: 9, comm: 'a' }, { pid: 10, comm: 'b' }] },
      { kind: 'oom_kill', source: 'eventfd', observedTimeNs: now(), id: 999, count: 1, total: 1, victims: [] },
      { kind: 'removed', source: 'eventfd', observedTimeNs: now(), id, total: 2 },
    ]);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.count, 2);
    assert.equal(events[0]!.pid, 9);
    assert.equal(events[0]!.victims?.length, 2);
    assert.equal(events[0]!.cgroupInode, inode);
    assert.equal(w.oomCounts().get(CID), 2);
    // The kernel dropped the watch with the cgroup: unwatch must not ask the native side again.
    w.unwatch(CID);
    assert.equal(h.calls.filter((c) => c.startsWith('unwatch')).length, 0);
    w.stop();
  });

  it('kmsg mode parses kernel lines; beside cgroup sources it keeps only victims outside pods', async () => {
    const lines = (pid: number, memcg: string): NativeOomEvent[] => [
      { kind: 'kmsg', source: 'kmsg', observedTimeNs: now(), line: `oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=${memcg},task_memcg=${memcg},task=sh,pid=${pid},uid=0` },
      { kind: 'kmsg', source: 'kmsg', observedTimeNs: now(), line: `Memory cgroup out of memory: Killed process ${pid} (sh) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0` },
    ];
    const native = new NativeOomDouble();
    const events: OomEvent[] = [];
    const w = new OomWatcher({ mode: 'kmsg', native, logger, onEvent: (e) => events.push(e) });
    assert.deepEqual((await w.start()).sources, ['kmsg']);
    await w.watchContainer(POD, 'app', CID, { version: 1, memory: cgDir });
    native.handles[0]!.push([...lines(5, `/kubepods/burstable/pod${POD}/${CID}`), ...lines(6, '/user.slice')]);
    assert.deepEqual(events.map((e) => [e.pid, e.scope, e.containerName]), [[5, 'container', 'app'], [6, 'system', undefined]]);
    w.stop();

    const native2 = new NativeOomDouble();
    native2.ebpfResult = { ok: false, reason: 'missing libbpf (libbpf.so.1: cannot open shared object file)' };
    const events2: OomEvent[] = [];
    const w2 = new OomWatcher({ mode: 'auto', native: native2, logger, onEvent: (e) => events2.push(e) });
    await w2.start();
    native2.handles[0]!.push([...lines(5, `/kubepods/burstable/pod${POD}/${CID}`), ...lines(6, '/user.slice')]);
    assert.deepEqual(events2.map((e) => [e.pid, e.scope, e.source]), [[6, 'system', 'kmsg']]);
    w2.stop();
  });

  it('arms containers registered before start', async () => {
    const native = new NativeOomDouble();
    native.ebpfResult = { ok: false, reason: 'x' };
    const w = new OomWatcher({ mode: 'cgroup', native, logger });
    assert.deepEqual(await w.watchContainer(POD, 'app', CID, { version: 1, memory: cgDir }), { watch: 'none' });
    await w.start();
    assert.deepEqual([...native.handles[0]!.v1.values()], [cgDir]);
    w.stop();
  });

  it('reports a cgroup that is already gone instead of throwing', async () => {
    const native = new NativeOomDouble();
    const w = new OomWatcher({ mode: 'cgroup', native, logger });
    await w.start();
    const r = await w.watchContainer(POD, 'app', CID, { version: 1, memory: join(dir, 'gone') });
    assert.equal(r.watch, 'none');
    assert.match(r.error ?? '', /ENOENT/);
    w.stop();
  });
});
