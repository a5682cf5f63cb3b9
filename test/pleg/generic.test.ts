import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PodCache } from '../../src/pleg/cache.js';
import { GenericPLEG, formatGoDuration } from '../../src/pleg/generic.js';
import { generateEvents } from '../../src/pleg/records.js';
import { isSyncPodWorthy, type PodLifecycleEvent } from '../../src/pleg/types.js';
import { createPlegMetrics } from '../../src/pleg/metrics.js';
import { Registry } from '../../src/metrics/registry.js';
import { FakeClock } from '../../src/util/clock.js';
import { ChannelDouble, RuntimeDouble, loggerDouble, settle } from './doubles.js';

function setup(opts: { capacity?: number; concurrency?: number } = {}) {
  const runtime = new RuntimeDouble();
  const cache = new PodCache();
  const clock = new FakeClock();
  const channel = new ChannelDouble(opts.capacity);
  const registry = new Registry();
  const metrics = createPlegMetrics(registry);
  const logs: string[] = [];
  let discards = 0;
  const pleg = new GenericPLEG({
    runtime,
    cache,
    clock,
    log: loggerDouble(logs),
    relistPeriodMs: 1000,
    relistThresholdMs: 3 * 60_000,
    emit: channel.emit,
    onDiscard: () => void discards++,
    statusConcurrency: opts.concurrency,
    metrics,
  });
  return { runtime, cache, clock, channel, pleg, metrics, registry, logs, discards: () => discards };
}

const ev = (id: string, type: PodLifecycleEvent['type'], data?: string): PodLifecycleEvent => (data ? { id, type, data } : { id, type });

test('generateEvents covers every transition upstream emits', () => {
  assert.deepEqual(generateEvents('p', 'c', 'non-existent', 'running'), [ev('p', 'ContainerStarted', 'c')]);
  assert.deepEqual(generateEvents('p', 'c', 'running', 'exited'), [ev('p', 'ContainerDied', 'c')]);
  assert.deepEqual(generateEvents('p', 'c', 'running', 'unknown'), [ev('p', 'ContainerChanged', 'c')]);
  assert.deepEqual(generateEvents('p', 'c', 'exited', 'non-existent'), [ev('p', 'ContainerRemoved', 'c')]);
  assert.deepEqual(generateEvents('p', 'c', 'running', 'non-existent'), [ev('p', 'ContainerDied', 'c'), ev('p', 'ContainerRemoved', 'c')]);
  assert.deepEqual(generateEvents('p', 'c', 'running', 'running'), []);
});

test('first relist: a new pod yields ContainerStarted for sandbox and container, status cached', async () => {
  const { runtime, cache, pleg, channel } = setup();
  runtime.sandbox('u1', 'sb1', 'SANDBOX_READY');
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  await pleg.relist();
  const got = channel.take();
  assert.deepEqual(new Set(got.map((e) => `${e.type}:${e.data}`)), new Set(['ContainerStarted:sb1', 'ContainerStarted:c1']));
  assert.deepEqual(runtime.statusCalls, ['u1']);
  const entry = cache.get('u1');
  assert.equal(entry.status?.containerStatuses[0]?.id, 'c1');
  assert.deepEqual(entry.status?.ips, ['10.88.0.9']);
  assert.equal(pleg.knownPods().get('u1')?.name, 'pod-u1');
});

test('no churn: a relist makes zero status calls and emits nothing', async () => {
  const { runtime, pleg, channel } = setup();
  for (let i = 0; i < 50; i++) {
    runtime.sandbox(`u${i}`, `sb${i}`, 'SANDBOX_READY');
    runtime.container(`u${i}`, `c${i}`, 'CONTAINER_RUNNING');
  }
  await pleg.relist();
  channel.take();
  runtime.statusCalls = [];
  await pleg.relist();
  await pleg.relist();
  assert.deepEqual(runtime.statusCalls, []);
  assert.deepEqual(channel.take(), []);
  assert.equal(pleg.lastRelistStats?.statusCalls, 0);
  assert.equal(pleg.lastRelistStats?.created, 0, 'unchanged records are reused, not rebuilt');
});

test('ContainerDied, then ContainerRemoved only (died already reported); status calls only for the changed pod', async () => {
  const { runtime, pleg, channel } = setup();
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  runtime.container('u2', 'c2', 'CONTAINER_RUNNING');
  await pleg.relist();
  channel.take();
  runtime.statusCalls = [];

  runtime.container('u1', 'c1', 'CONTAINER_EXITED');
  await pleg.relist();
  assert.deepEqual(channel.take(), [ev('u1', 'ContainerDied', 'c1')]);
  assert.deepEqual(runtime.statusCalls, ['u1']);

  runtime.container('u1', 'c1b', 'CONTAINER_RUNNING');
  runtime.removeContainer('u1', 'c1');
  await pleg.relist();
  assert.deepEqual(
    new Set(channel.take().map((e) => `${e.type}:${e.data}`)),
    new Set(['ContainerStarted:c1b', 'ContainerRemoved:c1']),
  );
});

test('a running container that vanishes yields ContainerDied and ContainerRemoved; a gone pod leaves the cache', async () => {
  const { runtime, cache, pleg, channel } = setup();
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  await pleg.relist();
  channel.take();
  assert.ok(cache.get('u1').status);
  runtime.removeContainer('u1', 'c1');
  await pleg.relist();
  assert.deepEqual(channel.take(), [ev('u1', 'ContainerDied', 'c1'), ev('u1', 'ContainerRemoved', 'c1')]);
  assert.equal(cache.get('u1').status, undefined);
  assert.equal(pleg.knownPods().has('u1'), false);
});

test('ContainerChanged (created/unknown) updates the cache but is not sent, as upstream', async () => {
  const { runtime, cache, pleg, channel } = setup();
  runtime.container('u1', 'c1', 'CONTAINER_CREATED');
  await pleg.relist();
  assert.deepEqual(channel.take(), []);
  assert.equal(cache.get('u1').status?.containerStatuses[0]?.state, 'created');
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  await pleg.relist();
  assert.deepEqual(channel.take(), [ev('u1', 'ContainerStarted', 'c1')]);
  runtime.container('u1', 'c1', 'CONTAINER_UNKNOWN');
  await pleg.relist();
  assert.deepEqual(channel.take(), []);
  assert.equal(cache.get('u1').status?.containerStatuses[0]?.state, 'unknown');
});

test('a failed inspection holds the events, retries next relist and then syncs; a pure retry sends PodSync', async () => {
  const { runtime, cache, pleg, channel } = setup();
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  await pleg.relist();
  channel.take();

  runtime.container('u1', 'c1', 'CONTAINER_EXITED');
  runtime.failStatusFor.add('u1');
  await pleg.relist();
  assert.deepEqual(channel.take(), [], 'no event before the status shows it');
  assert.match(cache.get('u1').error?.message ?? '', /status of u1 failed/);

  runtime.failStatusFor.clear();
  await pleg.relist();
  assert.deepEqual(channel.take(), [ev('u1', 'ContainerDied', 'c1')]);
  assert.equal(cache.get('u1').status?.containerStatuses[0]?.state, 'exited');

  // a retry with no container change: PodSync
  runtime.failStatusFor.add('u1');
  runtime.container('u1', 'c2', 'CONTAINER_RUNNING');
  await pleg.relist();
  channel.take();
  runtime.failStatusFor.clear();
  await pleg.relist();
  assert.deepEqual(channel.take(), [ev('u1', 'ContainerStarted', 'c2')]);
  runtime.failStatusFor.add('u1');
  await pleg.deliverer.request('u1', pleg.statusFetcher, true);
  runtime.failStatusFor.clear();
  await pleg.relist();
  assert.deepEqual(channel.take(), [ev('u1', 'PodSync')]);
});

test('discard counter: a full channel drops events and counts each one, never blocking the relist', async () => {
  const { runtime, pleg, channel, metrics, registry, discards } = setup({ capacity: 3 });
  for (let i = 0; i < 5; i++) runtime.container(`u${i}`, `c${i}`, 'CONTAINER_RUNNING');
  await pleg.relist();
  assert.equal(channel.accepted.length, 3);
  assert.equal(discards(), 2);
  assert.equal(metrics.discardEvents.get(), 2);
  assert.match(registry.metricsText(), /^kubelet_pleg_discard_events 2$/m);
  // the records moved on: the dropped events are not re-sent
  channel.take();
  await pleg.relist();
  assert.deepEqual(channel.take(), []);
});

test('health: unhealthy before the first relist and when none started within the 3-minute threshold', async () => {
  const { runtime, pleg, clock, metrics } = setup();
  assert.deepEqual(pleg.healthy(), { ok: false, message: 'pleg has yet to be successful' });
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  await pleg.relist();
  assert.equal(pleg.healthy().ok, true);
  assert.equal(metrics.lastSeen.get(), Math.floor(clock.now() / 1000));
  clock.step(3 * 60_000 + 1000);
  assert.deepEqual(pleg.healthy(), { ok: false, message: 'pleg was last seen active 3m1s ago; threshold is 3m0s' });
  // a failed list does not count as activity
  runtime.failList = true;
  await pleg.relist();
  assert.equal(pleg.healthy().ok, false);
  runtime.failList = false;
  await pleg.relist();
  assert.equal(pleg.healthy().ok, true);
});

test('relist metrics: duration and interval histograms, running pods and containers', async () => {
  const { runtime, pleg, clock, metrics } = setup();
  runtime.sandbox('u1', 'sb1', 'SANDBOX_READY');
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  runtime.container('u1', 'c0', 'CONTAINER_EXITED');
  await pleg.relist();
  clock.step(1000);
  await pleg.relist();
  const h = metrics.relistDuration.withLabelValues();
  assert.equal(h.count, 2);
  const iv = metrics.relistInterval.withLabelValues();
  assert.equal(iv.count, 1);
  assert.equal(iv.sum, 1);
  assert.equal(metrics.runningPods.get(), 1);
  assert.equal(metrics.runningContainers.get('running'), 1);
  assert.equal(metrics.runningContainers.get('exited'), 1);
});

test('the cache timestamp moves to the relist start after the changed pods are updated', async () => {
  const { runtime, cache, pleg, clock } = setup();
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  const t0 = clock.now();
  await pleg.relist();
  assert.equal(cache.globalTimestamp(), t0);
  // a worker waiting for a newer status than the last relist is served by the next one
  const waiting = cache.getNewerThan('u2', t0 + 500);
  let served = false;
  void waiting.then(() => (served = true));
  await settle();
  assert.equal(served, false);
  clock.step(1000);
  await pleg.relist();
  await settle();
  assert.equal(served, true);
});

test('status reads for changed pods run in parallel, bounded by statusConcurrency', async () => {
  const { runtime, pleg } = setup({ concurrency: 3 });
  let active = 0;
  let peak = 0;
  const base = runtime.getPodStatus.bind(runtime);
  runtime.getPodStatus = async (uid, name, ns) => {
    active++;
    peak = Math.max(peak, active);
    await settle(2);
    active--;
    return base(uid, name, ns);
  };
  for (let i = 0; i < 10; i++) runtime.container(`u${i}`, `c${i}`, 'CONTAINER_RUNNING');
  await pleg.relist();
  assert.equal(peak, 3);
  assert.equal(pleg.lastRelistStats?.statusCalls, 10);
});

test('start() relists at once and then every period; stop() ends it', async () => {
  const { runtime, pleg, clock } = setup();
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  pleg.start();
  clock.step(0);
  await settle();
  assert.equal(runtime.listCalls, 1);
  clock.step(1000);
  await settle();
  assert.equal(runtime.listCalls, 2);
  pleg.stop();
  clock.step(5000);
  await settle();
  assert.equal(runtime.listCalls, 2);
});

test('isSyncPodWorthy: ContainerRemoved is not a reason to sync', () => {
  assert.equal(isSyncPodWorthy(ev('u', 'ContainerRemoved', 'c')), false);
  assert.equal(isSyncPodWorthy(ev('u', 'ContainerDied', 'c')), true);
  assert.equal(isSyncPodWorthy(ev('u', 'PodSync')), true);
});

test('formatGoDuration prints Go durations', () => {
  assert.equal(formatGoDuration(180_000), '3m0s');
  assert.equal(formatGoDuration(181_500), '3m1.5s');
  assert.equal(formatGoDuration(3_723_000), '1h2m3s');
  assert.equal(formatGoDuration(250), '250ms');
});

test('with a container status source, a cached pod is refreshed only where it changed', async () => {
  const runtime = new RuntimeDouble();
  const cache = new PodCache();
  const channel = new ChannelDouble();
  const pleg = new GenericPLEG({
    runtime,
    status: runtime.statusSource,
    cache,
    clock: new FakeClock(),
    log: loggerDouble(),
    relistPeriodMs: 1000,
    relistThresholdMs: 180_000,
    emit: channel.emit,
  });
  runtime.sandbox('u1', 'sb1', 'SANDBOX_READY');
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  runtime.container('u1', 'c2', 'CONTAINER_RUNNING');
  await pleg.relist();
  assert.deepEqual(runtime.statusCalls, [], 'no list calls: the relist knows the ids');
  assert.deepEqual(runtime.singleReads.sort(), ['c1', 'c2', 'sb1'], 'a new pod: each of its ids read once');
  assert.equal(cache.get('u1').status?.containerStatuses.length, 2);
  assert.deepEqual(cache.get('u1').status?.ips, ['10.88.0.9']);
  channel.take();
  runtime.singleReads.length = 0;

  runtime.container('u1', 'c2', 'CONTAINER_EXITED');
  runtime.container('u1', 'c3', 'CONTAINER_RUNNING');
  runtime.removeContainer('u1', 'c1');
  await pleg.relist();
  assert.deepEqual(runtime.statusCalls, [], 'no whole-pod read');
  assert.deepEqual(runtime.singleReads.sort(), ['c2', 'c3'], 'the removed container is dropped without a read');
  assert.deepEqual(pleg.lastRelistStats?.containerReads, 2);
  const st = cache.get('u1').status!;
  assert.deepEqual(st.containerStatuses.map((c) => [c.id, c.state]).sort(), [['c2', 'exited'], ['c3', 'running']]);
  assert.deepEqual(st.sandboxStatuses.map((s) => s.id), ['sb1']);
  assert.deepEqual(
    new Set(channel.take().map((e) => `${e.type}:${e.data}`)),
    new Set(['ContainerDied:c2', 'ContainerStarted:c3', 'ContainerDied:c1', 'ContainerRemoved:c1']),
  );
});

test('first relist against a runtime that sends container statuses with the sandbox: one call per pod', async () => {
  const runtime = new RuntimeDouble();
  const cache = new PodCache();
  const channel = new ChannelDouble();
  const sandboxReads: string[] = [];
  const pleg = new GenericPLEG({
    runtime,
    status: {
      ...runtime.statusSource,
      sandboxStatusWithContainers: async (id) => {
        sandboxReads.push(id);
        const sb = await runtime.statusSource.sandboxStatus(id);
        runtime.singleReads.pop();
        if (!sb) return null;
        // the runtime covers c1 only; c2 (say, in another sandbox) is read on its own
        const c1 = (await runtime.statusSource.containerStatus('c1'))!;
        runtime.singleReads.pop();
        return { sandbox: sb, containers: [c1] };
      },
    },
    cache,
    clock: new FakeClock(),
    log: loggerDouble(),
    relistPeriodMs: 1000,
    relistThresholdMs: 180_000,
    emit: channel.emit,
  });
  runtime.sandbox('u1', 'sb1', 'SANDBOX_READY');
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  runtime.container('u1', 'c2', 'CONTAINER_RUNNING');
  await pleg.relist();
  assert.deepEqual(sandboxReads, ['sb1']);
  assert.deepEqual(runtime.singleReads, ['c2'], 'only the container the sandbox read did not cover');
  assert.equal(pleg.lastRelistStats?.containerReads, 2);
  const st = cache.get('u1').status!;
  assert.deepEqual(st.containerStatuses.map((c) => c.id).sort(), ['c1', 'c2']);
  assert.deepEqual(st.ips, ['10.88.0.9']);
  assert.deepEqual(new Set(channel.take().map((e) => `${e.type}:${e.data}`)), new Set(['ContainerStarted:sb1', 'ContainerStarted:c1', 'ContainerStarted:c2']));
});

// A pod sync that creates a container after the relist listed the pod, but before the relist's
// status read of it, must not find that read vouching for a time after the create: the read
// covers only the ids the list saw, so the next sync would create the container again.
test('a status read of listed ids is dated by the list, not the read: a sync after a create waits for the next relist', async () => {
  const runtime = new RuntimeDouble();
  const cache = new PodCache();
  const clock = new FakeClock();
  const channel = new ChannelDouble();
  const pleg = new GenericPLEG({
    runtime,
    status: runtime.statusSource,
    cache,
    clock,
    log: loggerDouble(),
    relistPeriodMs: 1000,
    relistThresholdMs: 180_000,
    emit: channel.emit,
  });
  // The pod sync runs between the list and the status read: it creates `id` and finishes.
  let syncDone = 0;
  let create: string | undefined;
  const list = runtime.getPods.bind(runtime);
  runtime.getPods = async () => {
    const pods = await list();
    if (create) {
      runtime.container('u1', create, 'CONTAINER_CREATED');
      create = undefined;
      clock.step(50);
      syncDone = clock.now();
      clock.step(50);
    }
    return pods;
  };
  const waitFor = (minTime: number): (() => string[] | undefined) => {
    let ids: string[] | undefined;
    void cache.getNewerThan('u1', minTime).then((e) => (ids = (e.status?.containerStatuses ?? []).map((c) => c.id)));
    return () => ids;
  };

  // A new pod (read from the listed ids): the sandbox only.
  runtime.sandbox('u1', 'sb1', 'SANDBOX_READY');
  create = 'c1';
  clock.step(1000);
  await pleg.relist();
  let seen = waitFor(syncDone);
  await settle();
  assert.equal(seen(), undefined, 'no status vouches for the time after c1 was created: the sync waits');
  clock.step(1000);
  await pleg.relist();
  await settle();
  assert.deepEqual(seen(), ['c1'], 'the next relist shows c1');

  // A cached pod refreshed where it changed: c1 moved, c2 created meanwhile.
  runtime.container('u1', 'c1', 'CONTAINER_RUNNING');
  create = 'c2';
  clock.step(1000);
  await pleg.relist();
  seen = waitFor(syncDone);
  await settle();
  assert.equal(seen(), undefined, 'the partial refresh does not vouch for c2 either');
  clock.step(1000);
  await pleg.relist();
  await settle();
  assert.deepEqual(seen()?.sort(), ['c1', 'c2']);
});
