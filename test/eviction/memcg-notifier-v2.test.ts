// The cgroup v2 memory notifier's decisions on a scripted native handle (the real watcher's
// side is test/oom/native-pressure.test.ts): which memory.events changes call for a pass, the
// least interval between passes, the PSI trigger fallback, retries, and which notifier a host's
// cgroups get.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import type { CgroupMounts } from '../../src/cgroups/index.js';
import {
  createMemoryNotifier,
  createV2MemoryNotifier,
  memoryEventsRises,
  parsePsi,
  PSI_MEMORY_TRIGGER,
  PSI_MEMORY_TRIGGER_UNPRIVILEGED,
  V2MemoryNotifier,
} from '../../src/eviction/index.js';
import { NativeMemcgNotifier } from '../../src/eviction/memcg-notifier.js';
import type { NativeOomEvent, NativeOomExports, NativeOomWatcherHandle } from '../../src/oom/native-types.js';
import { FakeClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';

const psi = (someTotal: number) => `some avg10=1.50 avg60=0.30 avg300=0.05 total=${someTotal}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=12\n`;

function errno(code: string, message: string): Error {
  return Object.assign(new Error(`${message}: ${code}`), { code });
}

/** A native handle whose watches do what `behave` says; events are pushed with `emit`. */
function scriptedNative(behave: {
  events?: (file: string) => Record<string, number>;
  pressure?: (file: string, trigger: string) => void;
} = {}) {
  const calls: string[] = [];
  let onEvents: ((e: NativeOomEvent[]) => void) | undefined;
  let closed = 0;
  const handle = {
    watchMemoryEvents: (id: number, file: string) => {
      calls.push(`events ${id} ${file}`);
      return behave.events ? behave.events(file) : { high: 0, max: 0, oom: 0 };
    },
    watchPressure: (id: number, file: string, trigger: string) => {
      calls.push(`psi ${id} ${file} ${trigger}`);
      behave.pressure?.(file, trigger);
    },
    watchMemoryThreshold: () => undefined,
    unref: () => undefined,
    close: () => void closed++,
  } as unknown as NativeOomWatcherHandle;
  const native: NativeOomExports = {
    OomWatcherHandle: function (cb: (e: NativeOomEvent[]) => void) {
      onEvents = cb;
      return handle;
    } as unknown as NativeOomExports['OomWatcherHandle'],
  };
  const emit = (e: Partial<NativeOomEvent>): void => onEvents!([{ kind: 'error', source: 'inotify', observedTimeNs: process.hrtime.bigint(), ...e } as NativeOomEvent]);
  return { native, calls, emit, closed: () => closed };
}

function v2(opts: Parameters<typeof scriptedNative>[0] = {}, minIntervalMs?: number) {
  setLogSink(() => undefined);
  const s = scriptedNative(opts);
  const clock = new FakeClock();
  const passes: string[] = [];
  const r = createV2MemoryNotifier({ native: s.native, podsDir: '/cg/kubepods', eventsFile: '/cg/kubepods/memory.events', clock, log: createLogger(), onCross: (k) => passes.push(k), minIntervalMs });
  return { ...s, r, clock, passes };
}

describe('cgroup v2 memory pressure notifier', () => {
  it('parses PSI lines (some and full)', () => {
    assert.deepEqual(parsePsi(psi(123456)), {
      some: { avg10: 1.5, avg60: 0.3, avg300: 0.05, total: 123456n },
      full: { avg10: 0, avg60: 0, avg300: 0, total: 12n },
    });
    assert.deepEqual(parsePsi('garbage\n'), {});
  });

  it('calls for a pass on new high, max, oom or oom_kill counts only', () => {
    assert.deepEqual(memoryEventsRises({ low: 4 }), []);
    assert.deepEqual(memoryEventsRises({}), []);
    assert.deepEqual(memoryEventsRises(undefined), []);
    assert.deepEqual(memoryEventsRises({ max: 3, low: 1 }), ['max +3']);
    assert.deepEqual(memoryEventsRises({ oom_kill: 1, oom: 1, high: 2 }), ['high +2', 'oom +1', 'oom_kill +1']);
  });

  it('arms memory.events and the PSI trigger on the pods cgroup and passes at once on a rise', () => {
    const t = v2();
    const n = t.r.notifier!;
    try {
      assert.ok(n instanceof V2MemoryNotifier);
      assert.deepEqual(t.calls, ['events 1 /cg/kubepods/memory.events', `psi 2 /cg/kubepods/memory.pressure ${PSI_MEMORY_TRIGGER}`]);
      assert.deepEqual(n.armed(), { events: '/cg/kubepods/memory.events', psi: { file: '/cg/kubepods/memory.pressure', trigger: PSI_MEMORY_TRIGGER } });
      // low alone is no pressure on a limit
      t.emit({ kind: 'memory_events', id: 1, counters: { low: 1, high: 0, max: 0 }, deltas: { low: 1 } });
      assert.deepEqual(t.passes, []);
      t.emit({ kind: 'memory_events', id: 1, counters: { low: 1, high: 0, max: 2 }, deltas: { max: 2 } });
      assert.deepEqual(t.passes, ['pods memory.events (max +2)']);
      assert.deepEqual(n.counters, { low: 1, high: 0, max: 2 });
      assert.equal(n.lastCross?.key, 'pods memory.events (max +2)');
      // another id's events are not this notifier's
      t.emit({ kind: 'memory_events', id: 9, deltas: { max: 1 } });
      assert.equal(t.passes.length, 1);
    } finally {
      n.close();
    }
    assert.equal(t.closed(), 1);
  });

  it('asks for at most one pass per interval, the changes in between making one at its end', () => {
    const t = v2({}, 1000);
    const n = t.r.notifier!;
    try {
      t.emit({ kind: 'memory_pressure', source: 'psi', id: 2 });
      assert.equal(t.passes.length, 1);
      t.clock.step(100);
      t.emit({ kind: 'memory_events', id: 1, deltas: { max: 1 } });
      t.emit({ kind: 'memory_events', id: 1, deltas: { max: 5 } });
      assert.equal(t.passes.length, 1);
      t.clock.step(899);
      assert.equal(t.passes.length, 1);
      t.clock.step(1);
      assert.deepEqual(t.passes, [`pods memory.pressure (${PSI_MEMORY_TRIGGER})`, 'pods memory.events (max +5)']);
      // a full interval later the next change passes at once
      t.clock.step(1000);
      t.emit({ kind: 'memory_events', id: 1, deltas: { oom: 1 } });
      assert.equal(t.passes.length, 3);
    } finally {
      n.close();
    }
    // closed: a pending pass does not come
    const u = v2({}, 1000);
    u.emit({ kind: 'memory_pressure', source: 'psi', id: 2 });
    u.emit({ kind: 'memory_pressure', source: 'psi', id: 2 });
    u.r.notifier!.close();
    u.clock.step(5000);
    assert.equal(u.passes.length, 1);
    assert.equal(u.clock.pendingTimers(), 0);
  });

  it('falls back to a 2 s window when the kernel refuses the 1 s trigger (no CAP_SYS_RESOURCE)', () => {
    const t = v2({ pressure: (file, trigger) => { if (trigger === PSI_MEMORY_TRIGGER) throw errno('EINVAL', `PSI trigger ${file}: write trigger`); } });
    const n = t.r.notifier!;
    try {
      assert.deepEqual(n.armed().psi, { file: '/cg/kubepods/memory.pressure', trigger: PSI_MEMORY_TRIGGER_UNPRIVILEGED });
      assert.deepEqual(n.errors(), []);
    } finally {
      n.close();
    }
  });

  it('keeps memory.events when PSI is refused, naming the file; no notifier when nothing can be armed', () => {
    const t = v2({ pressure: (file) => { throw errno('EINVAL', `PSI trigger ${file}: not a PSI file (a *.pressure file on cgroup2, or /proc/pressure/*)`); } });
    const n = t.r.notifier!;
    try {
      assert.deepEqual(n.armed(), { events: '/cg/kubepods/memory.events' });
      // not a PSI file: no second trigger is tried
      assert.equal(t.calls.filter((c) => c.startsWith('psi')).length, 1);
      const [err] = n.errors();
      assert.equal(err?.code, 'ERR_MEMORY_PRESSURE_WATCH');
      assert.equal(err?.file, '/cg/kubepods/memory.pressure');
      assert.match(err!.message, /\/cg\/kubepods\/memory\.pressure: not a PSI file/);
    } finally {
      n.close();
    }
    const none = v2({
      events: (file) => { throw errno('EACCES', `memory.events watch ${file}: inotify_add_watch`); },
      pressure: (file) => { throw errno('EOPNOTSUPP', `PSI trigger ${file}: write trigger`); },
    });
    assert.equal(none.r.notifier, undefined);
    assert.match(none.r.reason!, /memory\.events watch \/cg\/kubepods\/memory\.events: inotify_add_watch: EACCES; PSI trigger \/cg\/kubepods\/memory\.pressure: write trigger: EOPNOTSUPP/);
    assert.equal(none.closed(), 1);
  });

  it('retries files that were missing (or went away) at the manager\'s threshold refresh', () => {
    let present = false;
    const t = v2({
      events: (file) => { if (!present) throw errno('ENOENT', `memory.events watch ${file}: inotify_add_watch`); return { max: 0 }; },
      pressure: (file) => { if (!present) throw errno('ENOENT', `PSI trigger ${file}: open`); },
    });
    const n = t.r.notifier!;
    try {
      assert.ok(n, 'a missing pods cgroup may appear: the notifier stays');
      assert.deepEqual(n.armed(), {});
      assert.match(n.errors()[1]!.message, /PSI is off/);
      n.setThreshold('memory.available/hard', '', 1n);
      assert.deepEqual(n.armed(), {});
      present = true;
      n.setThreshold('memory.available/hard', '', 1n);
      assert.deepEqual(n.armed(), { events: '/cg/kubepods/memory.events', psi: { file: '/cg/kubepods/memory.pressure', trigger: PSI_MEMORY_TRIGGER } });
      const before = t.calls.length;
      n.setThreshold('memory.available/hard', '', 1n);
      assert.equal(t.calls.length, before, 'armed watches are left alone');
      // the cgroup removed: the watch ends and is armed again at the next refresh
      t.emit({ kind: 'watch_lost', source: 'psi', id: 2, message: 'PSI trigger on /cg/kubepods/memory.pressure ended' });
      assert.equal(n.armed().psi, undefined);
      n.setThreshold('memory.available/hard', '', 1n);
      assert.ok(n.armed().psi);
    } finally {
      n.close();
    }
  });
});

describe('which kernel memory notification a host gets', () => {
  const mount = (mountPoint: string) => ({ mountPoint, root: '/' });
  const base = { podsCgroupName: '/kubepods', clock: new FakeClock(), log: createLogger(), onCross: () => undefined };

  it('none when kernelMemcgNotification is off (the default, as upstream)', () => {
    const s = scriptedNative();
    const r = createMemoryNotifier({ ...base, enabled: false, native: { native: s.native }, mounts: { v1: {}, unified: mount('/sys/fs/cgroup') } });
    assert.equal(r.notifier, undefined);
    assert.match(r.reason!, /kernelMemcgNotification is off/);
    assert.deepEqual(s.calls, []);
  });

  it('v2 on a cgroup2-only host (stock Debian 12), on the pods cgroup under the unified mount', () => {
    setLogSink(() => undefined);
    const s = scriptedNative();
    const r = createMemoryNotifier({ ...base, enabled: true, native: { native: s.native }, mounts: { v1: {}, unified: mount('/sys/fs/cgroup') } });
    try {
      assert.equal(r.version, 2);
      assert.ok(r.notifier instanceof V2MemoryNotifier);
      assert.ok(s.calls.includes(`psi 2 /sys/fs/cgroup/kubepods/memory.pressure ${PSI_MEMORY_TRIGGER}`), s.calls.join('\n'));
    } finally {
      r.notifier?.close();
    }
  });

  it('v1 where the memory controller is on v1, hybrid hosts included', () => {
    const s = scriptedNative();
    const mounts: CgroupMounts = { v1: { memory: mount('/sys/fs/cgroup/memory') }, unified: mount('/sys/fs/cgroup/unified') };
    const r = createMemoryNotifier({ ...base, enabled: true, native: { native: s.native }, mounts });
    try {
      assert.equal(r.version, 1);
      assert.ok(r.notifier instanceof NativeMemcgNotifier);
      assert.deepEqual(s.calls, [], 'v1 arms its thresholds from the manager');
    } finally {
      r.notifier?.close();
    }
  });

  it('none, with why, without the addon or a memory hierarchy', () => {
    const s = scriptedNative();
    const noAddon = createMemoryNotifier({ ...base, enabled: true, native: { error: 'native addon not built' }, mounts: { v1: {}, unified: mount('/sys/fs/cgroup') } });
    assert.equal(noAddon.reason, 'native addon not built');
    const hybridNoMemory = createMemoryNotifier({ ...base, enabled: true, native: { native: s.native }, mounts: { v1: { cpu: mount('/sys/fs/cgroup/cpu') }, unified: mount('/sys/fs/cgroup/unified') } });
    assert.equal(hybridNoMemory.notifier, undefined);
    assert.match(hybridNoMemory.reason!, /no memory cgroup hierarchy/);
  });
});
