// The Kubelet built from doubles (no runtime, no root): wiring from its Dependencies, bounded
// periodic timers, and a stop that never waits on in-flight work beyond its deadline.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kubelet, STOP_TIMEOUT_MS } from '../../src/kubelet/kubelet.js';
import { gate, harness, mkPod, settle, until, type Harness } from './doubles.js';

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
    assert.equal(first, 3, 'runtime check, sync tick, housekeeping');
    for (let i = 0; i < 600; i++) {
      h.clock.step(1000);
      await settle(2);
    }
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
