// The Kubelet built from doubles (no runtime, no root): wiring from its Dependencies, bounded
// periodic timers, and a stop that never waits on in-flight work beyond its deadline.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kubelet, STOP_TIMEOUT_MS } from '../../src/kubelet/kubelet.js';
import { HOUSEKEEPING_PERIOD_MS } from '../../src/kubelet/housekeeping.js';
import { OomWatcher } from '../../src/oom/oom-watcher.js';
import { gate, harness, knownPod, mkPod, settle, until, type Harness } from './doubles.js';

async function started(): Promise<{ h: Harness; k: Kubelet; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-kubelet-'));
  const h = harness(dir);
  const k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
  await k.start();
  // Every cache read is fresh enough: the PLEG's part is tested in test/pleg.
  h.plegWiring!.cache.updateTime(Number.MAX_SAFE_INTEGER);
  return { h, k, dir };
}

test('start wires the dependencies: PLEG started, sources feed the workers, the runtime syncs', async () => {
  const { h, k, dir } = await started();
  try {
    assert.equal(h.pleg.started, true);
    h.sources.onUpdate({ op: 'ADD', pods: [mkPod('a')], source: 'file' });
    await until(() => h.runtime.calls.length > 0);
    assert.deepEqual(h.runtime.calls, ['syncPod a']);
    assert.equal(k.getPods().length, 1);
    assert.equal(k.healthChecks().find((c) => c.name === 'runtime')?.ok, true);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('periodic tasks keep one live timer each, however many ticks pass', async () => {
  const { h, k, dir } = await started();
  try {
    const first = k.liveTimers();
    assert.equal(first, 4, 'runtime check, sync tick, housekeeping, resolv.conf check');
    for (let i = 0; i < 600; i++) {
      h.clock.step(1000);
      await settle(2);
    }
    // a housekeeping tick reading the pods directory may still be in flight: it re-arms when done
    await until(() => k.liveTimers() === first, 'every periodic task re-armed');
    assert.equal(k.liveTimers(), first);
    assert.ok(h.clock.pendingTimers() <= first + 1, `pending fake timers: ${h.clock.pendingTimers()}`);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
  assert.equal(k.liveTimers(), 0, 'stop cancels every timer');
});

test('stop abandons a kill that never ends: runtime stopped, CRI closed, bounded by the deadline', async () => {
  const { h, k, dir } = await started();
  try {
    const pod = mkPod('a');
    h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
    await until(() => h.runtime.calls.length === 1);
    const hang = gate();
    h.runtime.hold.killPod = hang;
    h.sources.onUpdate({ op: 'REMOVE', pods: [pod], source: 'file' });
    await until(() => h.runtime.calls.length === 2);
    assert.deepEqual(h.runtime.calls, ['syncPod a', 'killPod a']);

    let done = false;
    const stopping = k.stop().then(() => { done = true; });
    await settle();
    assert.equal(h.runtime.stopped, true, 'hooks are aborted');
    assert.equal(h.cri.closed, true, 'CRI calls in flight are cancelled');
    assert.equal(h.pleg.closed, true);
    assert.equal(h.sources.stopped, true);
    assert.equal(done, false, 'the hung kill is waited for up to the deadline');
    h.clock.step(STOP_TIMEOUT_MS);
    await stopping;
    assert.equal(done, true);

    // Nothing new starts after stop, even when the hung call returns.
    h.sources.onUpdate({ op: 'ADD', pods: [mkPod('b')], source: 'file' });
    hang.open();
    await settle(20);
    assert.ok(!h.runtime.calls.includes('syncPod b'), h.runtime.calls.join(', '));
    assert.ok(!h.runtime.calls.includes('removePod a'), 'no new step of the old pod after stop');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('stop returns at once when no work is in flight, and twice is the same stop', async () => {
  const { k, dir } = await started();
  try {
    const a = k.stop();
    assert.equal(k.stop(), a);
    await a;
    assert.equal(k.healthChecks().find((c) => c.name === 'syncloop')?.ok, false);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a pod removed and re-added with the same UID runs again (static pod file put back)', async () => {
  const { h, k, dir } = await started();
  try {
    const pod = mkPod('static-1', 'web');
    const runs = () => h.runtime.calls.filter((c) => c.startsWith('syncPod') || c.startsWith('killPod') || c.startsWith('removePod'));
    h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
    await until(() => runs().length === 1, 'first sync');
    h.sources.onUpdate({ op: 'REMOVE', pods: [pod], source: 'file' });
    await until(() => runs().length === 3, 'removal');
    await settle(20);
    h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
    await until(() => runs().length === 4, 'second sync');
    assert.deepEqual(h.runtime.calls.filter((c) => c.startsWith('syncPod') || c.startsWith('killPod') || c.startsWith('removePod')),
      ['syncPod static-1', 'killPod static-1', 'removePod static-1', 'syncPod static-1']);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

/** A kubelet with a real OOM watcher (mode off: no native source; it still keeps its watches). */
async function startedWithOom(): Promise<{ h: Harness; k: Kubelet; dir: string; oom: OomWatcher }> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-kubelet-'));
  const h = harness(dir);
  let oom!: OomWatcher;
  h.deps.oomWatcher = (onEvent) => {
    oom = new OomWatcher({ mode: 'off', clock: h.clock, logger: h.deps.log, onEvent });
    return {
      start: () => oom.start(),
      stop: () => oom.stop(),
      oomKills: (id) => oom.oomKills(id),
      unwatch: (id) => oom.unwatch(id),
      watched: () => oom.watched(),
      watchContainer: (podUID, name, id, cgroupName, meta) =>
        oom.watchContainer(podUID, name, id, { version: 2, dir: join(dir, 'no-cgroup', cgroupName) }, meta),
    };
  };
  const k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
  await k.start();
  h.plegWiring!.cache.updateTime(Number.MAX_SAFE_INTEGER);
  return { h, k, dir, oom };
}

const watchedIDs = (oom: OomWatcher): string[] => oom.watched().map((w) => w.containerID).sort();

test('a container the runtime removed by itself (PLEG ContainerRemoved) is no longer watched for OOM', async () => {
  const { h, k, dir, oom } = await startedWithOom();
  try {
    const pod = mkPod('a');
    h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
    h.runtimeHooks!.onContainerStarted(pod, 'c', 'c1');
    h.runtimeHooks!.onContainerStarted(pod, 'c', 'c2');
    await settle();
    assert.deepEqual(watchedIDs(oom), ['c1', 'c2']);
    // The runtime restarted c1 behind the kubelet's back: the PLEG reports it removed.
    h.plegWiring!.emit({ id: 'a', type: 'ContainerRemoved', data: 'c1' });
    await settle();
    assert.deepEqual(watchedIDs(oom), ['c2']);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('housekeeping unwatches containers a later PLEG list no longer shows (a dropped ContainerRemoved)', async () => {
  const { h, k, dir, oom } = await startedWithOom();
  try {
    const pod = mkPod('a');
    h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
    h.runtimeHooks!.onContainerStarted(pod, 'c', 'gone');
    h.runtimeHooks!.onContainerStarted(pod, 'c', 'kept');
    await settle();
    h.clock.step(10);
    h.pleg.known.set('a', knownPod('a', ['kept']));
    h.pleg.listedAt = h.clock.now();
    // Started after that list: the list cannot know it yet, so it stays watched.
    h.runtimeHooks!.onContainerStarted(pod, 'c', 'fresh');
    await settle();
    h.clock.step(HOUSEKEEPING_PERIOD_MS);
    await until(() => oom.watched().length === 2, 'housekeeping to unwatch the gone container');
    assert.deepEqual(watchedIDs(oom), ['fresh', 'kept']);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('the syncloop check passes before the loop has started (as upstream) and fails once it is stale or stopped', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-kubelet-'));
  const h = harness(dir);
  const k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
  const syncloop = () => k.healthChecks().find((c) => c.name === 'syncloop');
  try {
    assert.deepEqual(syncloop(), { name: 'syncloop', ok: true, message: 'ok' });
    await k.start();
    assert.equal(syncloop()?.ok, true);
    // The loop's tick stops being handled (a wedged loop): stale after max(2 x syncFrequency, 5 min).
    const max = Math.max(2 * h.config.syncFrequency, 5 * 60_000);
    (k as unknown as { syncLoop: { handleSyncTick(): void } }).syncLoop.handleSyncTick = () => undefined;
    (k as unknown as { housekeeping(): Promise<void> }).housekeeping = async () => undefined;
    h.clock.step(max + 1_000);
    await settle();
    assert.equal(syncloop()?.ok, false);
    assert.match(syncloop()!.message, /sync Loop took longer than expected/);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
  assert.equal(syncloop()?.ok, false, 'stopped');
});

test('the configured resolvConf is checked at start: too many search domains is a CheckLimitsForResolvConf warning on the node', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-kubelet-'));
  const h = harness(dir);
  const file = join(dir, 'resolv.conf');
  await writeFile(file, `nameserver 10.0.0.53\nsearch ${Array.from({ length: 30 }, (_, i) => `d${i}.example`).join(' ')}\n`);
  h.config.resolvConf = file;
  h.config.clusterDomain = 'cluster.local';
  const k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
  try {
    await k.start();
    await until(() => k.events.recent().some((e) => e.reason === 'CheckLimitsForResolvConf'), 'the resolv.conf check');
    const e = k.events.recent().find((x) => x.reason === 'CheckLimitsForResolvConf')!;
    assert.deepEqual([e.object, e.type, e.message], ['Node node-a', 'Warning', `Resolv.conf file '${file}' contains search line consisting of more than 29 domains!`]);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a removed pod is read once after its kill, and that read is what its cleanup checks and removes', async () => {
  const { h, k, dir } = await started();
  try {
    const pod = mkPod('gone-1', 'web');
    h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
    await until(() => h.runtime.calls.includes('syncPod gone-1'), 'first sync');
    const before = h.runtime.calls.length;
    h.sources.onUpdate({ op: 'REMOVE', pods: [pod], source: 'file' });
    await until(() => h.runtime.calls.includes('removePod gone-1'), 'removal');
    assert.deepEqual(h.runtime.calls.slice(before), ['killPod gone-1', 'getPodStatus gone-1', 'removePod gone-1']);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
