// The syncLoop's handlers and housekeeping, against a pod-workers recorder: what each source
// operation, PLEG event batch and tick dispatches.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SyncLoop, PLEG_CHANNEL_CAPACITY } from '../../src/kubelet/sync-loop.js';
import { handleHousekeeping, type HousekeepingOptions } from '../../src/kubelet/housekeeping.js';
import { PodManager } from '../../src/kubelet/pod-manager.js';
import { WorkQueue } from '../../src/kubelet/work-queue.js';
import type { UpdatePodOptions } from '../../src/kubelet/pod-workers.js';
import { StatusManager } from '../../src/status/status-manager.js';
import type { PodLifecycleEvent } from '../../src/pleg/types.js';
import { FakeClock } from '../../src/util/clock.js';
import { CgroupsDouble, PlegDouble, loggerDouble, mkPod } from './doubles.js';

function loop(opts: { runtimeUp?: () => boolean } = {}) {
  const clock = new FakeClock();
  const podManager = new PodManager();
  const workQueue = new WorkQueue(clock);
  const updates: string[] = [];
  const scheduled: (() => void)[] = [];
  const podWorkers = {
    updatePod: (o: UpdatePodOptions) => void updates.push(`${o.updateType} ${o.pod.metadata.uid}${o.removed ? ' removed' : ''}`),
  };
  const sl = new SyncLoop({
    clock, log: loggerDouble(), podManager, podWorkers, workQueue,
    runtimeUp: opts.runtimeUp ?? (() => true),
    schedule: (fn) => void scheduled.push(fn),
  });
  const drain = (): void => { for (const fn of scheduled.splice(0)) fn(); };
  return { clock, podManager, workQueue, updates, sl, drain, scheduled };
}

const ev = (id: string, type: PodLifecycleEvent['type'], data = 'c1'): PodLifecycleEvent => ({ id, type, data } as PodLifecycleEvent);

test('ADD adds to the pod manager and creates a worker; UPDATE updates; REMOVE and DELETE kill with removal', () => {
  const t = loop();
  const a = mkPod('a');
  t.sl.handlePodUpdate({ op: 'ADD', pods: [a], source: 'file' });
  assert.equal(t.podManager.getPodByUID('a'), a);
  const a2 = { ...a, metadata: { ...a.metadata, labels: { x: '1' } } };
  t.sl.handlePodUpdate({ op: 'UPDATE', pods: [a2], source: 'file' });
  assert.equal(t.podManager.getPodByUID('a'), a2);
  t.workQueue.enqueue('a', 0);
  t.sl.handlePodUpdate({ op: 'REMOVE', pods: [a2], source: 'file' });
  assert.equal(t.podManager.getPodByUID('a'), undefined);
  assert.deepEqual(t.workQueue.getWork(), [], 'a removed pod leaves the work queue');
  t.sl.handlePodUpdate({ op: 'ADD', pods: [mkPod('b')], source: 'api' });
  t.sl.handlePodUpdate({ op: 'DELETE', pods: [mkPod('b')], source: 'api' });
  assert.deepEqual(t.updates, ['create a', 'update a', 'kill a removed', 'create b', 'kill b removed']);
});

test('RECONCILE updates the pod manager only (status-only changes need no sync)', () => {
  const t = loop();
  const a = mkPod('a');
  t.sl.handlePodUpdate({ op: 'ADD', pods: [a], source: 'file' });
  const a2 = { ...a, metadata: { ...a.metadata, annotations: { note: 'x' } } };
  t.sl.handlePodUpdate({ op: 'RECONCILE', pods: [a2], source: 'file' });
  assert.equal(t.podManager.getPodByUID('a'), a2);
  assert.deepEqual(t.updates, ['create a']);
});

test('PLEG events: one sync per pod per batch; unknown pods and ContainerRemoved are skipped', () => {
  const t = loop();
  t.podManager.addPod(mkPod('a'));
  t.podManager.addPod(mkPod('b'));
  t.sl.enqueuePlegEvent(ev('a', 'ContainerStarted'));
  t.sl.enqueuePlegEvent(ev('a', 'ContainerDied'));
  t.sl.enqueuePlegEvent(ev('b', 'ContainerRemoved'));
  t.sl.enqueuePlegEvent(ev('zzz', 'ContainerStarted'));
  assert.equal(t.scheduled.length, 1, 'one drain scheduled for the batch');
  assert.deepEqual(t.updates, [], 'nothing dispatched before the drain');
  t.drain();
  assert.deepEqual(t.updates, ['sync a']);
  t.sl.enqueuePlegEvent(ev('a', 'ContainerDied'));
  t.drain();
  assert.deepEqual(t.updates, ['sync a', 'sync a'], 'the next batch syncs again');
});

test('the PLEG channel is bounded: a full channel refuses events', () => {
  const t = loop();
  for (let i = 0; i < PLEG_CHANNEL_CAPACITY; i++) assert.equal(t.sl.enqueuePlegEvent(ev(`p${i}`, 'ContainerStarted')), true);
  assert.equal(t.sl.enqueuePlegEvent(ev('over', 'ContainerStarted')), false);
  t.drain();
  assert.equal(t.sl.enqueuePlegEvent(ev('again', 'ContainerStarted')), true);
});

test('while the runtime is down neither PLEG events nor the tick sync pods', () => {
  let up = false;
  const t = loop({ runtimeUp: () => up });
  t.podManager.addPod(mkPod('a'));
  t.workQueue.enqueue('a', 0);
  t.sl.enqueuePlegEvent(ev('a', 'ContainerDied'));
  t.drain();
  t.sl.handleSyncTick();
  assert.deepEqual(t.updates, []);
  up = true;
  t.sl.handleSyncTick();
  assert.deepEqual(t.updates, ['sync a'], 'the due pod waited in the queue');
});

test('the sync tick syncs the pods that are due, once, and only desired ones', () => {
  const t = loop();
  t.podManager.addPod(mkPod('a'));
  t.podManager.addPod(mkPod('b'));
  t.workQueue.enqueue('a', 1000);
  t.workQueue.enqueue('b', 5000);
  t.workQueue.enqueue('gone', 0);
  t.sl.handleSyncTick();
  assert.deepEqual(t.updates, []);
  t.clock.step(1000);
  t.sl.handleSyncTick();
  t.sl.handleSyncTick();
  assert.deepEqual(t.updates, ['sync a']);
  t.clock.step(4000);
  t.sl.handleSyncTick();
  assert.deepEqual(t.updates, ['sync a', 'sync b']);
  assert.equal(t.sl.lastIteration, t.clock.now());
});

function hk(over: Partial<HousekeepingOptions> = {}) {
  const podManager = new PodManager();
  const pleg = new PlegDouble();
  const cgroups = new CgroupsDouble();
  const statusManager = new StatusManager();
  const updates: string[] = [];
  const known = new Set<string>();
  let forgot = 0;
  let backoffGCs = 0;
  const reasonCache = new Map<string, unknown>();
  const opts: HousekeepingOptions = {
    log: loggerDouble(),
    podManager,
    podWorkers: {
      updatePod: (o) => void updates.push(`${o.updateType} ${o.pod.metadata.uid}${o.removed ? ' removed' : ''} ${o.pod.metadata.namespace}/${o.pod.metadata.name}`),
      has: (uid) => known.has(uid),
      isKnown: (uid) => known.has(uid),
      forgetFinished: () => void forgot++,
    },
    pleg,
    cgroups,
    statusManager,
    runtime: { gcBackoff: () => void backoffGCs++ },
    caches: [reasonCache],
    ready: () => true,
    ...over,
  };
  return { opts, podManager, pleg, cgroups, statusManager, updates, known, reasonCache, forgot: () => forgot, backoffGCs: () => backoffGCs };
}

const knownPod = (uid: string, name: string) => ({ uid, name, namespace: 'default', sandboxes: [], containers: [] });

test('housekeeping kills orphaned runtime pods (removed), never desired or known ones', async () => {
  const t = hk();
  t.podManager.addPod(mkPod('desired'));
  t.known.add('working');
  t.pleg.known.set('desired', knownPod('desired', 'd'));
  t.pleg.known.set('working', knownPod('working', 'w'));
  t.pleg.known.set('orphan', knownPod('orphan', 'old-web'));
  await handleHousekeeping(t.opts);
  assert.deepEqual(t.updates, ['kill orphan removed default/old-web']);
  assert.equal(t.forgot(), 1);
});

test('housekeeping removes pod cgroups nobody owns and trims per-pod state', async () => {
  const t = hk();
  t.podManager.addPod(mkPod('desired'));
  t.pleg.known.set('running', knownPod('running', 'r'));
  t.cgroups.cgroups.set('desired', '/kubepods/poddesired');
  t.cgroups.cgroups.set('running', '/kubepods/podrunning');
  t.cgroups.cgroups.set('stale', '/kubepods/besteffort/podstale');
  const pod = mkPod('gone');
  t.statusManager.setPodStatus(pod, { phase: 'Running' });
  t.reasonCache.set('gone', {});
  t.reasonCache.set('desired', {});
  await handleHousekeeping(t.opts);
  assert.deepEqual(t.cgroups.removed, ['/kubepods/besteffort/podstale']);
  assert.equal(t.statusManager.getPodStatus('gone'), undefined);
  assert.deepEqual([...t.reasonCache.keys()], ['desired']);
  assert.equal(t.backoffGCs(), 1, 'quiet backoff entries (keyed by pod UID) are dropped');
});

test('housekeeping waits until every source was seen and the runtime is up', async () => {
  const t = hk({ ready: () => false });
  t.pleg.known.set('orphan', knownPod('orphan', 'x'));
  t.cgroups.cgroups.set('stale', '/kubepods/podstale');
  await handleHousekeeping(t.opts);
  assert.deepEqual(t.updates, []);
  assert.deepEqual(t.cgroups.removed, []);
});

test('housekeeping removes orphaned pod directories, keeping desired, working and runtime-known pods; not before the sources were seen', async () => {
  const kept: string[][] = [];
  const volumes = { cleanupOrphanedPodDirs: async (keep: Pick<ReadonlySet<string>, 'has'>) => { kept.push(['desired', 'running', 'working', 'other'].filter((u) => keep.has(u))); return []; } };
  const early = hk({ ready: () => false, volumes });
  await handleHousekeeping(early.opts);
  assert.deepEqual(kept, []);
  const t = hk({ volumes });
  t.podManager.addPod(mkPod('desired'));
  t.known.add('working');
  t.pleg.known.set('running', knownPod('running', 'r'));
  await handleHousekeeping(t.opts);
  assert.deepEqual(kept, [['desired', 'running', 'working']]);
});

test('housekeeping scans pod log directories once per container GC period (upstream: every minute), not every pass', async () => {
  const { mkdtemp, mkdir, rm, access } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { POD_LOG_DIRS_CLEANUP_PERIOD_MS, HOUSEKEEPING_PERIOD_MS } = await import('../../src/kubelet/housekeeping.js');
  const logs = await mkdtemp(join(tmpdir(), 'kts-hk-logs-'));
  const gone = async (p: string): Promise<boolean> => {
    // the scan runs off the pass: give it a few turns
    for (let i = 0; i < 50; i++) {
      if (await access(p).then(() => false, () => true)) return true;
      await new Promise((r) => setTimeout(r, 2));
    }
    return false;
  };
  try {
    const clock = new FakeClock();
    const t = hk({ podLogsDir: logs, clock });
    await mkdir(join(logs, 'default_a_uid-a'));
    await handleHousekeeping(t.opts);
    assert.ok(await gone(join(logs, 'default_a_uid-a')), 'the first pass scans');
    await mkdir(join(logs, 'default_b_uid-b'));
    clock.step(HOUSEKEEPING_PERIOD_MS);
    await handleHousekeeping(t.opts);
    assert.equal(await gone(join(logs, 'default_b_uid-b')), false, 'the next housekeeping pass does not scan again');
    clock.step(POD_LOG_DIRS_CLEANUP_PERIOD_MS);
    await handleHousekeeping(t.opts);
    assert.ok(await gone(join(logs, 'default_b_uid-b')), 'a period later it does');
  } finally {
    await rm(logs, { recursive: true, force: true });
  }
});

test('housekeeping unwatches for OOM only the containers gone from their pod in the last relist', async () => {
  const unwatched: string[] = [];
  const oom = {
    watched: () => [
      { containerID: 'c-live', podUID: 'p1', since: 1 },
      { containerID: 'c-gone', podUID: 'p1', since: 1 },
      { containerID: 'c-podgone', podUID: 'p2', since: 1 },
      { containerID: 'c-new', podUID: 'p1', since: 5_000 },
    ],
    unwatch: (id: string) => void unwatched.push(id),
  };
  const t = hk({ oom });
  t.pleg.known.set('p1', { ...knownPod('p1', 'a'), containers: [{ id: 'c-live', name: 'c', state: 'running', createdAt: 0 }] });
  t.pleg.listedAt = 1_000;
  await handleHousekeeping(t.opts);
  assert.deepEqual(unwatched.sort(), ['c-gone', 'c-podgone']);
});
