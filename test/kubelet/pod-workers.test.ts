// The pod workers' state machine: create → sync, kill → terminating → terminated, removal
// finishes the worker, a re-added UID starts again; one hook at a time per UID; stop/idle.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/api/types.js';
import { PodWorkers, type PodWorkerHooks, type PodWorkersOptions } from '../../src/kubelet/pod-workers.js';
import { PodCache } from '../../src/pleg/cache.js';
import { FakeClock } from '../../src/util/clock.js';
import { gate, loggerDouble, mkPod, settle, type Gate } from './doubles.js';

interface Rig {
  workers: PodWorkers;
  calls: string[];
  /** Per hook name: a gate the next call waits on. */
  holds: Map<string, Gate>;
  /** What syncPod answers (terminal or not). */
  terminal: Set<string>;
  errors: string[];
  /** Max hooks running at once per UID. */
  maxConcurrent: Map<string, number>;
  /** Per hook name and UID: how many of its next calls fail. */
  failures: Map<string, number>;
  clock: FakeClock;
}

function rig(extra: Partial<PodWorkersOptions> = {}): Rig {
  const clock = new FakeClock();
  const cache = new PodCache();
  // Every read is fresh enough: the cache's own waiting is tested in test/pleg.
  cache.updateTime(Number.MAX_SAFE_INTEGER);
  const calls: string[] = [];
  const holds = new Map<string, Gate>();
  const terminal = new Set<string>();
  const errors: string[] = [];
  const running = new Map<string, number>();
  const maxConcurrent = new Map<string, number>();
  const failures = new Map<string, number>();
  const wrap = async (name: string, pod: Pod, extra = ''): Promise<void> => {
    const uid = pod.metadata.uid!;
    running.set(uid, (running.get(uid) ?? 0) + 1);
    maxConcurrent.set(uid, Math.max(maxConcurrent.get(uid) ?? 0, running.get(uid)!));
    calls.push(`${name} ${uid}${extra}`);
    try {
      const h = holds.get(`${name} ${uid}`);
      if (h) await h.promise;
      const left = failures.get(`${name} ${uid}`) ?? 0;
      if (left > 0) {
        failures.set(`${name} ${uid}`, left - 1);
        throw new Error(`${name} failed`);
      }
    } finally {
      running.set(uid, running.get(uid)! - 1);
    }
  };
  const hooks: PodWorkerHooks = {
    syncPod: async (pod) => {
      await wrap('sync', pod);
      return terminal.has(pod.metadata.uid!);
    },
    syncTerminatingPod: async (pod, _s, grace) => wrap('terminating', pod, grace === undefined ? '' : ` grace=${grace}`),
    syncTerminatedPod: async (pod, _s, removed) => wrap('terminated', pod, removed ? ' removed' : ''),
  };
  const workers = new PodWorkers({
    hooks, cache, clock, log: loggerDouble(), onError: (pod, err) => void errors.push(`${pod.metadata.uid}: ${err.message}`), retryBackoffMs: () => 10_000,
    ...extra,
  });
  return { workers, calls, holds, terminal, errors, maxConcurrent, failures, clock };
}

test('create syncs the pod; kill with removal terminates, cleans up and finishes the worker', async () => {
  const r = rig();
  const pod = mkPod('u1');
  r.workers.updatePod({ updateType: 'create', pod });
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1']);
  assert.equal(r.workers.isTerminationRequested('u1'), false);

  r.workers.updatePod({ updateType: 'kill', pod, removed: true, gracePeriodOverride: 5 });
  assert.equal(r.workers.isTerminationRequested('u1'), true);
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1', 'terminating u1 grace=5', 'terminated u1 removed']);
  assert.equal(r.workers.isTerminated('u1'), true);
  assert.deepEqual(r.workers.knownPods(), [], 'a finished worker is no longer a live pod');
  r.workers.forgetFinished();
  assert.equal(r.workers.has('u1'), false);
});

test('a removed pod whose kill or cleanup fails is tried again by its worker until it finishes', async () => {
  const r = rig();
  const pod = mkPod('u1');
  r.workers.updatePod({ updateType: 'create', pod });
  await r.workers.idle();
  r.failures.set('terminating u1', 1).set('terminated u1', 1);
  r.workers.updatePod({ updateType: 'kill', pod, removed: true });
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1', 'terminating u1']);
  assert.deepEqual(r.errors, ['u1: terminating failed']);
  // no source sends a removed pod again: the worker retries after its backoff
  r.clock.step(9_999);
  await settle();
  assert.equal(r.calls.length, 2);
  r.clock.step(1);
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1', 'terminating u1', 'terminating u1', 'terminated u1 removed']);
  assert.equal(r.workers.isKnown('u1'), true, 'the failed cleanup leaves the worker live');
  r.clock.step(10_000);
  await r.workers.idle();
  assert.deepEqual(r.calls.slice(4), ['terminated u1 removed']);
  assert.deepEqual(r.errors, ['u1: terminating failed', 'u1: terminated failed']);
  assert.deepEqual(r.workers.knownPods(), []);
  // finished: nothing more is retried, and a stopped worker set retries nothing
  r.clock.step(60_000);
  await settle();
  assert.equal(r.calls.length, 5);
  const s = rig();
  s.workers.updatePod({ updateType: 'create', pod });
  await s.workers.idle();
  s.failures.set('terminating u1', 1);
  s.workers.updatePod({ updateType: 'kill', pod, removed: true });
  await s.workers.idle();
  s.workers.stop();
  s.clock.step(60_000);
  await settle();
  assert.deepEqual(s.calls, ['sync u1', 'terminating u1']);
});

test('a pod that reaches a terminal phase terminates once; its removal later runs the cleanup', async () => {
  const r = rig();
  const pod = mkPod('u1');
  r.terminal.add('u1');
  r.workers.updatePod({ updateType: 'create', pod });
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1', 'terminating u1', 'terminated u1']);
  // Updates for a terminated pod run nothing new.
  r.workers.updatePod({ updateType: 'update', pod });
  await r.workers.idle();
  assert.equal(r.calls.length, 3);
  r.workers.updatePod({ updateType: 'kill', pod, removed: true });
  await r.workers.idle();
  assert.deepEqual(r.calls.slice(3), ['terminated u1 removed']);
});

test('a terminating pod never goes back to sync; updates while terminating are dropped', async () => {
  const r = rig();
  const pod = mkPod('u1');
  r.holds.set('terminating u1', gate());
  r.workers.updatePod({ updateType: 'create', pod });
  await r.workers.idle();
  r.workers.updatePod({ updateType: 'kill', pod });
  await settle();
  r.workers.updatePod({ updateType: 'update', pod });
  r.workers.updatePod({ updateType: 'sync', pod });
  r.holds.get('terminating u1')!.open();
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1', 'terminating u1', 'terminated u1']);
});

test('one hook at a time per UID: updates while busy coalesce into one more sync', async () => {
  const r = rig();
  const pod = mkPod('u1');
  const g = gate();
  r.holds.set('sync u1', g);
  r.workers.updatePod({ updateType: 'create', pod });
  await settle();
  for (let i = 0; i < 5; i++) r.workers.updatePod({ updateType: 'update', pod });
  await settle();
  assert.deepEqual(r.calls, ['sync u1']);
  r.holds.delete('sync u1');
  g.open();
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1', 'sync u1'], 'five updates while busy make one more sync');
  assert.equal(r.maxConcurrent.get('u1'), 1);
});

test('different UIDs run in parallel', async () => {
  const r = rig();
  const g = gate();
  r.holds.set('sync a', g);
  r.workers.updatePod({ updateType: 'create', pod: mkPod('a') });
  r.workers.updatePod({ updateType: 'create', pod: mkPod('b') });
  await settle();
  assert.deepEqual(r.calls.sort(), ['sync a', 'sync b']);
  g.open();
  await r.workers.idle();
});

test('a kill while syncing is sticky: later updates do not undo it', async () => {
  const r = rig();
  const pod = mkPod('u1');
  const g = gate();
  r.holds.set('sync u1', g);
  r.workers.updatePod({ updateType: 'create', pod });
  await settle();
  r.workers.updatePod({ updateType: 'kill', pod, removed: true });
  r.workers.updatePod({ updateType: 'update', pod });
  g.open();
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync u1', 'terminating u1', 'terminated u1 removed']);
});

test('a static pod replaced under the same full name waits for the old UID to terminate', async () => {
  const r = rig();
  const old = mkPod('old', 'web');
  const next = mkPod('new', 'web');
  const g = gate();
  r.holds.set('terminating old', g);
  r.workers.updatePod({ updateType: 'create', pod: old });
  await r.workers.idle();
  r.workers.updatePod({ updateType: 'kill', pod: old, removed: true });
  r.workers.updatePod({ updateType: 'create', pod: next });
  await settle();
  assert.deepEqual(r.calls, ['sync old', 'terminating old'], 'the new UID must not start while the old one terminates');
  g.open();
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync old', 'terminating old', 'terminated old removed', 'sync new']);
});

test('a pod removed and added again with the same UID starts again (finished worker)', async () => {
  const r = rig();
  const pod = mkPod('static-1', 'web');
  r.workers.updatePod({ updateType: 'create', pod });
  await r.workers.idle();
  r.workers.updatePod({ updateType: 'kill', pod, removed: true });
  await r.workers.idle();
  assert.equal(r.workers.isTerminated('static-1'), true);

  r.workers.updatePod({ updateType: 'create', pod });
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync static-1', 'terminating static-1', 'terminated static-1 removed', 'sync static-1']);
  assert.equal(r.workers.isTerminationRequested('static-1'), false);
  assert.deepEqual(r.workers.knownPods(), ['static-1']);
});

test('a pod added again while its removal is still running starts once the removal finished', async () => {
  const r = rig();
  const pod = mkPod('static-1', 'web');
  const g = gate();
  r.holds.set('terminating static-1', g);
  r.workers.updatePod({ updateType: 'create', pod });
  await r.workers.idle();
  r.workers.updatePod({ updateType: 'kill', pod, removed: true });
  await settle();
  r.workers.updatePod({ updateType: 'create', pod });
  await settle();
  assert.deepEqual(r.calls, ['sync static-1', 'terminating static-1']);
  g.open();
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync static-1', 'terminating static-1', 'terminated static-1 removed', 'sync static-1']);
});

test('a hook error is reported and the pod is retried on the next update', async () => {
  const r = rig();
  const pod = mkPod('u1');
  let fail = true;
  const workers = new PodWorkers({
    hooks: {
      syncPod: async () => {
        r.calls.push('sync');
        if (fail) throw new Error('boom');
        return false;
      },
      syncTerminatingPod: async () => undefined,
      syncTerminatedPod: async () => undefined,
    },
    cache: (() => { const c = new PodCache(); c.updateTime(Number.MAX_SAFE_INTEGER); return c; })(),
    clock: new FakeClock(),
    log: loggerDouble(),
    onError: (p, err) => void r.errors.push(`${p.metadata.uid}: ${err.message}`),
  });
  workers.updatePod({ updateType: 'create', pod });
  await workers.idle();
  assert.deepEqual(r.errors, ['u1: boom']);
  fail = false;
  workers.updatePod({ updateType: 'sync', pod });
  await workers.idle();
  assert.deepEqual(r.calls, ['sync', 'sync']);
});

test('after stop() no new work starts and idle() resolves while a hook still runs', async () => {
  const r = rig();
  const g = gate();
  r.holds.set('sync u1', g);
  r.workers.updatePod({ updateType: 'create', pod: mkPod('u1') });
  await settle();
  let idle = false;
  const p = r.workers.idle().then(() => { idle = true; });
  await settle();
  assert.equal(idle, false, 'idle waits for the running hook');
  r.workers.stop();
  r.workers.updatePod({ updateType: 'create', pod: mkPod('u2') });
  r.workers.updatePod({ updateType: 'update', pod: mkPod('u1') });
  g.open();
  await p;
  await settle();
  assert.deepEqual(r.calls, ['sync u1'], 'nothing starts after stop');
});

test('a terminated pod is cleaned up without waiting for a relist; sync and terminating still wait', async () => {
  const clock = new FakeClock();
  const cache = new PodCache();
  const calls: string[] = [];
  const errors: string[] = [];
  const pod = mkPod('u1');
  const status = (ts: number) => ({ uid: 'u1', name: 'p', namespace: 'ns', ips: [], sandboxStatuses: [], containerStatuses: [], timestamp: ts });
  const workers = new PodWorkers({
    hooks: {
      syncPod: async () => { calls.push('sync'); clock.step(10); return false; },
      syncTerminatingPod: async () => {
        calls.push('terminating');
        // the relist's last read of the pod failed; no relist comes after the kill
        cache.set('u1', undefined, new Error('relist read failed'), clock.now());
        clock.step(10);
      },
      syncTerminatedPod: async (_p, _s, removed) => { calls.push(`terminated${removed ? ' removed' : ''}`); },
    },
    cache,
    clock,
    log: loggerDouble(),
    onError: (p, err) => void errors.push(`${p.metadata.uid}: ${err.message}`),
  });
  cache.set('u1', status(clock.now()), undefined, clock.now());
  workers.updatePod({ updateType: 'create', pod });
  await workers.idle();
  assert.deepEqual(calls, ['sync']);
  workers.updatePod({ updateType: 'sync', pod });
  await settle();
  assert.deepEqual(calls, ['sync'], 'a sync waits for a read newer than the last sync');
  workers.updatePod({ updateType: 'kill', pod, removed: true });
  await settle();
  assert.deepEqual(calls, ['sync'], 'so does the kill');
  cache.set('u1', status(clock.now()), undefined, clock.now());
  await settle();
  // the cleanup follows the kill at once, despite the cache's error: it reads the runtime itself
  assert.deepEqual(calls, ['sync', 'terminating', 'terminated removed']);
  assert.deepEqual(errors, []);
});

test('the terminated step gets the status the terminating step read after its kill, once', async () => {
  const cache = new PodCache();
  cache.updateTime(Number.MAX_SAFE_INTEGER);
  const seen: string[] = [];
  const pod = mkPod('u1');
  const afterKill = { uid: 'u1', name: 'read-after-kill', namespace: 'ns', ips: [], sandboxStatuses: [], containerStatuses: [], timestamp: 1 };
  const workers = new PodWorkers({
    hooks: {
      syncPod: async () => true, // terminal: terminated without removal first
      syncTerminatingPod: async () => afterKill,
      syncTerminatedPod: async (_p, s, removed, fresh) => void seen.push(`${s.name} removed=${removed} afterKill=${fresh}`),
    },
    cache,
    clock: new FakeClock(),
    log: loggerDouble(),
  });
  workers.updatePod({ updateType: 'create', pod });
  await workers.idle();
  workers.updatePod({ updateType: 'kill', pod, removed: true });
  await workers.idle();
  assert.deepEqual(seen, [
    'read-after-kill removed=false afterKill=true',
    // removed later: the kill's read is used up, the hook reads the runtime itself
    `${pod.metadata.name} removed=true afterKill=false`,
  ]);
});

test('a pod re-added under its UID after removal first waits for a read newer than the removal', async () => {
  const clock = new FakeClock();
  const cache = new PodCache();
  const seen: string[] = [];
  const pod = mkPod('u1');
  const status = (name: string) => ({ uid: 'u1', name, namespace: 'ns', ips: [], sandboxStatuses: [], containerStatuses: [], timestamp: clock.now() });
  const workers = new PodWorkers({
    hooks: {
      syncPod: async (_p, s) => { seen.push(`sync ${s.name}`); clock.step(10); return false; },
      syncTerminatingPod: async () => { seen.push('terminating'); clock.step(10); return status('after-kill'); },
      syncTerminatedPod: async () => { seen.push('terminated'); clock.step(10); },
    },
    cache,
    clock,
    log: loggerDouble(),
  });
  cache.set('u1', status('first-life'), undefined, clock.now());
  workers.updatePod({ updateType: 'create', pod });
  await workers.idle();
  cache.set('u1', status('first-life-running'), undefined, clock.now());
  workers.updatePod({ updateType: 'kill', pod, removed: true });
  await workers.idle();
  assert.deepEqual(seen, ['sync first-life', 'terminating', 'terminated']);
  // put back at once: the cache still holds the first life's read
  workers.updatePod({ updateType: 'create', pod });
  await settle();
  assert.deepEqual(seen.slice(3), [], 'no sync on a read older than the removal');
  cache.set('u1', status('after-removal'), undefined, clock.now());
  await workers.idle();
  assert.deepEqual(seen.slice(3), ['sync after-removal']);
});

test('a static pod held back by a namesake whose kill keeps failing is told which pod and why, and told again when it starts', async () => {
  const waits: string[] = [];
  const r = rig({ onWaiting: (pod, on) => void waits.push(on ? `${pod.metadata.uid} waits on ${on.pod.metadata.uid}: ${on.error}` : `${pod.metadata.uid} starts`) });
  const old = mkPod('old', 'web');
  const next = mkPod('new', 'web');
  r.workers.updatePod({ updateType: 'create', pod: old });
  await r.workers.idle();
  r.failures.set('terminating old', 2);
  r.workers.updatePod({ updateType: 'kill', pod: old, removed: true });
  r.workers.updatePod({ updateType: 'create', pod: next });
  await settle();
  assert.deepEqual(r.calls, ['sync old', 'terminating old']);
  assert.deepEqual(waits, ['new waits on old: terminating failed'], 'the failure is reported to the pod that waits');
  // an update of the waiting pod while the old one still fails: told again (the owner dedupes)
  r.workers.updatePod({ updateType: 'sync', pod: next });
  await settle();
  assert.deepEqual(waits.slice(1), ['new waits on old: terminating failed']);
  r.clock.step(10_000);
  await settle();
  assert.deepEqual(r.calls, ['sync old', 'terminating old', 'terminating old']);
  assert.equal(waits.length, 3, 'the second failure is reported too');
  r.clock.step(10_000);
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync old', 'terminating old', 'terminating old', 'terminating old', 'terminated old removed', 'sync new']);
  assert.equal(waits.at(-1), 'new starts');
  assert.equal(waits.length, 4);
});

test('a replacement that waits on a namesake which has not failed is not reported as waiting', async () => {
  const waits: string[] = [];
  const r = rig({ onWaiting: (pod, on) => void waits.push(`${pod.metadata.uid} ${on ? 'waits' : 'starts'}`) });
  const old = mkPod('old', 'web');
  const next = mkPod('new', 'web');
  const g = gate();
  r.holds.set('terminating old', g);
  r.workers.updatePod({ updateType: 'create', pod: old });
  await r.workers.idle();
  r.workers.updatePod({ updateType: 'kill', pod: old, removed: true });
  r.workers.updatePod({ updateType: 'create', pod: next });
  await settle();
  g.open();
  await r.workers.idle();
  assert.deepEqual(r.calls, ['sync old', 'terminating old', 'terminated old removed', 'sync new']);
  assert.deepEqual(waits, []);
});

test('a pod whose status cannot be read gets upstream\'s FailedSync event naming the error', async () => {
  const cache = new PodCache();
  const events: string[] = [];
  const errors: string[] = [];
  const calls: string[] = [];
  const workers = new PodWorkers({
    hooks: {
      syncPod: async () => { calls.push('sync'); return false; },
      syncTerminatingPod: async () => void calls.push('terminating'),
      syncTerminatedPod: async () => void calls.push('terminated'),
    },
    cache, clock: new FakeClock(), log: loggerDouble(),
    onError: (p, err) => void errors.push(`${p.metadata.uid}: ${err.message}`),
    recordEvent: (p, type, reason, message) => void events.push(`${p.metadata.uid} ${type} ${reason}: ${message}`),
    retryBackoffMs: () => 10_000,
  });
  cache.updateTime(Number.MAX_SAFE_INTEGER);
  cache.set('u1', undefined, new Error('CRI PodSandboxStatus failed: UNKNOWN: remove netns: device or resource busy'), 1);
  workers.updatePod({ updateType: 'create', pod: mkPod('u1') });
  await workers.idle();
  assert.deepEqual(calls, []);
  assert.deepEqual(events, ['u1 Warning FailedSync: error determining status: CRI PodSandboxStatus failed: UNKNOWN: remove netns: device or resource busy']);
  assert.equal(errors.length, 1);
});

test('previous instances found in the runtime before a first sync are killed and removed first; the pod starts once they are gone', async () => {
  const asked: string[] = [];
  const old = mkPod('old-uid', 'static-n1');
  const r = rig({
    previousInstances: async (pod) => {
      asked.push(pod.metadata.uid!);
      return pod.metadata.uid === 'new-uid' ? [{ metadata: { uid: 'old-uid', name: old.metadata.name, namespace: old.metadata.namespace }, spec: { containers: [] } }] : [];
    },
  });
  r.holds.set('terminating old-uid', gate());
  r.workers.updatePod({ updateType: 'create', pod: mkPod('new-uid', 'static-n1') });
  await settle();
  assert.deepEqual(r.calls, ['terminating old-uid'], 'the old instance is stopped, the new pod waits');
  r.holds.get('terminating old-uid')!.open();
  await r.workers.idle();
  assert.deepEqual(r.calls, ['terminating old-uid', 'terminated old-uid removed', 'sync new-uid']);
  assert.deepEqual(asked, ['new-uid'], 'asked once, before the first sync only');
  r.workers.updatePod({ updateType: 'sync', pod: mkPod('new-uid', 'static-n1') });
  await r.workers.idle();
  assert.deepEqual(asked, ['new-uid']);
  assert.equal(r.workers.isKnown('old-uid'), false, 'the old worker finished');
});
