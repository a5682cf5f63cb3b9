import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PodCache } from '../../src/pleg/cache.js';
import { EventedPLEG, eventedPlegEnabled } from '../../src/pleg/evented.js';
import { GenericPLEG } from '../../src/pleg/generic.js';
import type { PodLifecycleEvent } from '../../src/pleg/types.js';
import { carriedSandboxStatus, carriedStatus, type ContainerEvent, type ContainerEventTypeName } from '../../src/pleg/wire-event.js';
import { createPlegMetrics } from '../../src/pleg/metrics.js';
import { Registry } from '../../src/metrics/registry.js';
import { FakeClock } from '../../src/util/clock.js';
import { ChannelDouble, EventSourceDouble, RuntimeDouble, loggerDouble, settle } from './doubles.js';

function setup() {
  const runtime = new RuntimeDouble();
  const cache = new PodCache();
  const clock = new FakeClock();
  const channel = new ChannelDouble();
  const metrics = createPlegMetrics(new Registry());
  const log = loggerDouble();
  const generic = new GenericPLEG({
    runtime,
    cache,
    clock,
    log,
    relistPeriodMs: 1000,
    relistThresholdMs: 3 * 60_000,
    emit: channel.emit,
    metrics,
  });
  const source = new EventSourceDouble();
  const pleg = new EventedPLEG({ generic, events: source, status: runtime.statusSource });
  return { runtime, cache, clock, channel, metrics, generic, source, pleg };
}

type Setup = ReturnType<typeof setup>;

/** Starts the PLEG with the stream established and the first relist delivered. */
async function started(s: Setup): Promise<void> {
  s.pleg.start();
  s.clock.step(0);
  s.source.ready();
  await settle(10);
}

const pods = { uid: 'u1', name: 'web-0', namespace: 'default', attempt: 0 };

function event(s: Setup, id: string, type: ContainerEventTypeName, at = s.clock.now(), pod: ContainerEvent['pod'] = pods): ContainerEvent {
  return { containerId: id, type, createdAt: at, pod };
}

const key = (e: PodLifecycleEvent): string => `${e.id}/${e.type}/${e.data ?? ''}`;

function baseline(s: Setup, uid = 'u1', name = 'web-0', namespace = 'default'): void {
  s.runtime.addPod(uid, name, namespace);
  s.runtime.sandbox(uid, `sb-${uid}`, 'SANDBOX_READY');
  s.runtime.container(uid, `c-${uid}`, 'CONTAINER_RUNNING', 'app');
}

test('an event refreshes only the container it names and is emitted once the cache shows it', async () => {
  const s = setup();
  baseline(s);
  await started(s);
  assert.equal(s.source.opens, 1);
  s.channel.take();
  const fullReads = s.runtime.statusCalls.length;

  s.clock.step(10);
  s.runtime.container('u1', 'c-u1', 'CONTAINER_EXITED');
  s.source.send(event(s, 'c-u1', 'CONTAINER_STOPPED_EVENT'));
  await settle();
  assert.deepEqual(s.channel.take().map(key), ['u1/ContainerDied/c-u1']);
  assert.deepEqual(s.runtime.singleReads, ['c-u1'], 'one container read, no pod read');
  assert.equal(s.runtime.statusCalls.length, fullReads);
  const entry = s.cache.get('u1');
  assert.equal(entry.status?.containerStatuses.find((c) => c.id === 'c-u1')?.state, 'exited');
  assert.equal(entry.status?.sandboxStatuses[0]?.state, 'ready', 'the rest of the status is kept');
  assert.equal(s.pleg.stats.events, 1);
});

test('stale events are rejected: older than the record, or older than a relist that saw later', async () => {
  const s = setup();
  baseline(s);
  s.runtime.container('u1', 'c2', 'CONTAINER_RUNNING', 'side');
  await started(s);
  s.channel.take();

  s.clock.step(10);
  const stoppedAt = s.clock.now();
  s.runtime.container('u1', 'c-u1', 'CONTAINER_EXITED');
  s.source.send(event(s, 'c-u1', 'CONTAINER_STOPPED_EVENT', stoppedAt));
  await settle();
  assert.deepEqual(s.channel.take().map(key), ['u1/ContainerDied/c-u1']);

  // a STARTED generated before the STOPPED arrives late: it must not resurrect the container
  s.source.send(event(s, 'c-u1', 'CONTAINER_STARTED_EVENT', stoppedAt - 5));
  await settle();
  assert.deepEqual(s.channel.take(), []);
  assert.equal(s.cache.get('u1').status?.containerStatuses.find((c) => c.id === 'c-u1')?.state, 'exited');

  // the relist sees c2 dead first; late events about c2 from before it are stale
  s.clock.step(10);
  const beforeRelist = s.clock.now() - 1;
  s.runtime.container('u1', 'c2', 'CONTAINER_EXITED');
  await s.pleg.relist();
  assert.deepEqual(s.channel.take().map(key), ['u1/ContainerDied/c2']);
  s.source.send(event(s, 'c2', 'CONTAINER_STARTED_EVENT', beforeRelist));
  s.source.send(event(s, 'c2', 'CONTAINER_STOPPED_EVENT', beforeRelist));
  await settle();
  assert.deepEqual(s.channel.take(), []);
  assert.equal(s.pleg.stats.stale, 3);
  const reads = s.runtime.singleReads.length;
  // a repeated event with a newer time changes nothing: no read, no event
  s.clock.step(10);
  s.source.send(event(s, 'c2', 'CONTAINER_STOPPED_EVENT'));
  await settle();
  assert.deepEqual(s.channel.take(), []);
  assert.equal(s.runtime.singleReads.length, reads);
  assert.equal(s.pleg.stats.duplicate, 1);
  // a late event for a removed container is stale too
  s.clock.step(10);
  s.runtime.removeContainer('u1', 'c2');
  s.source.send(event(s, 'c2', 'CONTAINER_DELETED_EVENT'));
  await settle();
  assert.deepEqual(s.channel.take().map(key), ['u1/ContainerRemoved/c2']);
  s.source.send(event(s, 'c2', 'CONTAINER_STOPPED_EVENT', s.clock.now() - 1));
  await settle();
  assert.deepEqual(s.channel.take(), []);
});

test('reconnect: backoff doubling, 1s relists while down, a full relist after reconnecting, nothing lost or doubled', async () => {
  const s = setup();
  baseline(s);
  await started(s);
  s.channel.take();
  assert.equal(s.generic.relistDuration.periodMs, 300_000);

  s.source.fail();
  assert.equal(s.metrics.eventedConnErrors.get(), 1);
  assert.equal(s.generic.relistDuration.periodMs, 1_000, 'relists at the generic pace while the stream is down');
  await settle();

  // the runtime changes while no stream is open: that event is lost on the wire
  s.clock.step(1);
  s.runtime.container('u1', 'c3', 'CONTAINER_RUNNING', 'late');
  const lostAt = s.clock.now();

  s.clock.step(498);
  assert.equal(s.source.opens, 1);
  s.clock.step(1); // 500ms after the failure
  assert.equal(s.source.opens, 2);
  await settle(10);
  s.source.fail(); // fails again before being established
  s.clock.step(999);
  assert.equal(s.source.opens, 2);
  s.clock.step(1); // backoff doubled to 1s
  assert.equal(s.source.opens, 3);
  await settle(10);

  // the 1s fallback relists may already have found c3; take what came so far
  const meanwhile = s.channel.take().map(key);
  s.source.ready();
  await settle(10);
  assert.equal(s.pleg.stats.reconnectRelists, 1);
  assert.equal(s.generic.relistDuration.periodMs, 300_000);
  const after = s.channel.take().map(key);
  // the runtime replays the started event it generated while we were away
  s.source.send(event(s, 'c3', 'CONTAINER_STARTED_EVENT', lostAt));
  await settle();
  const all = [...meanwhile, ...after, ...s.channel.take().map(key)];
  assert.deepEqual(all, ['u1/ContainerStarted/c3'], 'found once: by a relist, not again by the late event');
  assert.equal(s.metrics.eventedConnSuccess.get(), 2);
});

test('a static pod killed and recreated under the same UID: every transition once, none resurrected', async () => {
  const s = setup();
  const uid = 'static-apiserver';
  const meta = { uid, name: 'kube-apiserver-node1', namespace: 'kube-system', attempt: 0 };
  s.runtime.addPod(uid, meta.name, meta.namespace);
  s.runtime.sandbox(uid, 'sbA', 'SANDBOX_READY');
  s.runtime.container(uid, 'cA', 'CONTAINER_RUNNING', 'kube-apiserver');
  await started(s);
  s.channel.take();

  const send = (id: string, type: ContainerEventTypeName, at = s.clock.now()): void =>
    s.source.send(event(s, id, type, at, { ...meta }));
  const step = (): void => s.clock.step(5);

  // kill (the manifest changed): container and sandbox stop and are removed
  step();
  const killedAt = s.clock.now();
  s.runtime.container(uid, 'cA', 'CONTAINER_EXITED', 'kube-apiserver');
  send('cA', 'CONTAINER_STOPPED_EVENT');
  step();
  s.runtime.sandbox(uid, 'sbA', 'SANDBOX_NOTREADY');
  send('sbA', 'CONTAINER_STOPPED_EVENT');
  await settle();
  step();
  s.runtime.removeContainer(uid, 'cA');
  send('cA', 'CONTAINER_DELETED_EVENT');
  step();
  s.runtime.removeContainer(uid, 'sbA');
  send('sbA', 'CONTAINER_DELETED_EVENT');
  await settle();
  assert.equal(s.cache.get(uid).status, undefined, 'the pod left the cache with its last sandbox');

  // recreate under the same UID; events arrive in bursts, one twice, one stale
  step();
  s.runtime.addPod(uid, meta.name, meta.namespace);
  s.runtime.sandbox(uid, 'sbB', 'SANDBOX_READY', 50);
  send('sbB', 'CONTAINER_CREATED_EVENT');
  send('sbB', 'CONTAINER_STARTED_EVENT');
  step();
  s.runtime.container(uid, 'cB', 'CONTAINER_CREATED', 'kube-apiserver', 60);
  send('cB', 'CONTAINER_CREATED_EVENT');
  await settle();
  step();
  s.runtime.container(uid, 'cB', 'CONTAINER_RUNNING', 'kube-apiserver', 60);
  send('cB', 'CONTAINER_STARTED_EVENT');
  send('cB', 'CONTAINER_STARTED_EVENT'); // duplicate
  send('cA', 'CONTAINER_STOPPED_EVENT', killedAt); // stale, for a removed container
  await settle(10);
  // and the slow relist agrees without emitting anything again
  await s.pleg.relist();

  const got = s.channel.take().map(key);
  const want = [
    `${uid}/ContainerDied/cA`,
    `${uid}/ContainerDied/sbA`,
    `${uid}/ContainerRemoved/cA`,
    `${uid}/ContainerRemoved/sbA`,
    `${uid}/ContainerStarted/sbB`,
    `${uid}/ContainerStarted/cB`,
  ];
  assert.deepEqual([...got].sort(), [...want].sort());
  assert.ok(got.indexOf(`${uid}/ContainerDied/cA`) < got.indexOf(`${uid}/ContainerRemoved/cA`));
  assert.ok(got.indexOf(`${uid}/ContainerRemoved/sbA`) < got.indexOf(`${uid}/ContainerStarted/sbB`));
  const st = s.cache.get(uid).status!;
  assert.deepEqual(st.sandboxStatuses.map((x) => x.id), ['sbB']);
  assert.deepEqual(st.containerStatuses.map((x) => [x.id, x.state]), [['cB', 'running']]);
  assert.deepEqual(st.ips, ['10.88.0.9']);
  assert.deepEqual(s.generic.knownPods().get(uid)?.containers.map((c) => c.id), ['cB']);
});

test('a worker waiting for a status newer than the cache has gets a full read, not a stale entry', async () => {
  const s = setup();
  baseline(s);
  await started(s);
  s.channel.take();
  s.clock.step(5_000);
  // the worker's last sync ended now; no event has vouched for anything since
  const minTime = s.clock.now();
  const before = s.runtime.statusCalls.length;
  let entry: Awaited<ReturnType<PodCache['getNewerThan']>> | undefined;
  void s.cache.getNewerThan('u1', minTime).then((e) => (entry = e));
  await settle();
  assert.equal(s.runtime.statusCalls.length, before + 1);
  assert.ok(entry && entry.modified >= minTime);
  assert.equal(entry?.status?.containerStatuses[0]?.state, 'running');
  assert.deepEqual(s.channel.take(), []);
});

test('events for a container of a new pod read the whole pod once and create its records', async () => {
  const s = setup();
  await started(s);
  s.clock.step(5);
  s.runtime.addPod('u9', 'new-0', 'default');
  s.runtime.sandbox('u9', 'sb9', 'SANDBOX_READY');
  s.runtime.container('u9', 'c9', 'CONTAINER_RUNNING', 'app');
  const p = { uid: 'u9', name: 'new-0', namespace: 'default', attempt: 0 };
  s.source.send(event(s, 'sb9', 'CONTAINER_CREATED_EVENT', s.clock.now(), p));
  s.source.send(event(s, 'sb9', 'CONTAINER_STARTED_EVENT', s.clock.now(), p));
  s.source.send(event(s, 'c9', 'CONTAINER_CREATED_EVENT', s.clock.now(), p));
  s.source.send(event(s, 'c9', 'CONTAINER_STARTED_EVENT', s.clock.now(), p));
  await settle(10);
  assert.deepEqual(new Set(s.channel.take().map(key)), new Set(['u9/ContainerStarted/sb9', 'u9/ContainerStarted/c9']));
  assert.ok(s.runtime.statusCalls.filter((u) => u === 'u9').length <= 2, 'coalesced whole-pod reads');
  assert.equal(s.generic.knownPods().get('u9')?.name, 'new-0');
});

test('events without a pod are ignored (upstream does so too); the stream health uses the evented threshold', async () => {
  const s = setup();
  baseline(s);
  await started(s);
  s.channel.take();
  s.source.send({ containerId: 'x', type: 'CONTAINER_STOPPED_EVENT', createdAt: s.clock.now() });
  await settle();
  assert.equal(s.pleg.stats.ignored, 1);
  assert.deepEqual(s.channel.take(), []);
  s.clock.step(4 * 60_000);
  assert.equal(s.pleg.healthy().ok, true, 'relists every 300s: 10 minutes of threshold');
  s.pleg.stop();
  assert.equal(s.generic.isRunning, false);
});

test('the feature gate is upstream\'s EventedPLEG', () => {
  assert.equal(eventedPlegEnabled({ EventedPLEG: true }), true);
  assert.equal(eventedPlegEnabled({ EventedPLEG: false }), false);
  assert.equal(eventedPlegEnabled(undefined), false);
});

test('a relist whose list predates an event does not undo it', async () => {
  const s = setup();
  baseline(s);
  await started(s);
  s.channel.take();
  // hold the next list until an event newer than the relist's start has landed
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const list = s.runtime.getPods.bind(s.runtime);
  s.runtime.getPods = async () => {
    const snapshot = await list();
    await gate;
    return snapshot;
  };
  s.clock.step(10);
  const relisting = s.pleg.relist();
  await settle();
  s.clock.step(1);
  s.runtime.container('u1', 'c-u1', 'CONTAINER_EXITED');
  s.source.send(event(s, 'c-u1', 'CONTAINER_STOPPED_EVENT'));
  await settle();
  release();
  await relisting;
  await settle();
  assert.deepEqual(s.channel.take().map(key), ['u1/ContainerDied/c-u1']);
  assert.equal(s.generic.knownPods().get('u1')?.containers[0]?.state, 'CONTAINER_EXITED');
});

test('a runtime without GetContainerEvents (containerd 1.6: UNIMPLEMENTED) leaves the generic PLEG at 1s, no reconnects', async () => {
  const { CriError } = await import('../../src/runtime/cri-errors.js');
  const s = setup();
  baseline(s);
  s.pleg.start();
  s.clock.step(0);
  await settle();
  const h = s.source.current!;
  s.source.current = undefined;
  h.onEnd(new CriError('GetContainerEvents', 12, 'method GetContainerEvents not implemented'));
  assert.equal(s.pleg.streamState, 'unsupported');
  assert.equal(s.generic.relistDuration.periodMs, 1000);
  s.clock.step(60_000);
  await settle();
  assert.equal(s.source.opens, 1, 'no reconnect attempts');
  assert.deepEqual(s.pleg.healthy(), { ok: true, message: 'ok' });
  // the generic PLEG carries on relisting
  s.channel.take();
  s.runtime.container('u1', 'c-u1', 'CONTAINER_EXITED');
  s.clock.step(1000);
  await settle();
  assert.deepEqual(s.channel.take().map(key), ['u1/ContainerDied/c-u1']);
});

test('events that carry the pod\'s statuses (cri-api 0.26+) are applied without any read', async () => {
  const s = setup();
  baseline(s);
  await started(s);
  s.channel.take();
  const reads = s.runtime.singleReads.length;
  const podReads = s.runtime.statusCalls.length;
  const carried = (uid: string): Pick<ContainerEvent, 'sandboxStatus' | 'containerStatuses'> => {
    const st = s.runtime.statusOf(uid);
    return { sandboxStatus: carriedSandboxStatus(st.sandboxStatuses[0]!), containerStatuses: st.containerStatuses.map(carriedStatus) };
  };

  s.clock.step(10);
  s.runtime.container('u1', 'c-u1', 'CONTAINER_EXITED', 'app');
  s.source.send({ ...event(s, 'c-u1', 'CONTAINER_STOPPED_EVENT'), ...carried('u1') });
  // a pod never seen, announced by its sandbox's event
  s.runtime.addPod('u7', 'new-7', 'default');
  s.runtime.sandbox('u7', 'sb7', 'SANDBOX_READY');
  s.runtime.container('u7', 'c7', 'CONTAINER_RUNNING', 'app');
  const p7 = { uid: 'u7', name: 'new-7', namespace: 'default', attempt: 0 };
  s.source.send({ ...event(s, 'c7', 'CONTAINER_STARTED_EVENT', s.clock.now(), p7), ...carried('u7') });
  await settle();

  assert.equal(s.runtime.singleReads.length, reads, 'no container reads');
  assert.equal(s.runtime.statusCalls.length, podReads, 'no pod reads');
  assert.deepEqual(new Set(s.channel.take().map(key)), new Set(['u1/ContainerDied/c-u1', 'u7/ContainerStarted/sb7', 'u7/ContainerStarted/c7']));
  assert.equal(s.cache.get('u1').status?.containerStatuses.find((c) => c.id === 'c-u1')?.exitCode, 1);
  assert.deepEqual(s.cache.get('u7').status?.ips, ['10.88.0.9']);
  assert.equal(s.generic.knownPods().get('u7')?.containers.length, 1);

  // a stale event's carried statuses do not overwrite newer ones
  s.source.send({ ...event(s, 'c-u1', 'CONTAINER_STARTED_EVENT', s.clock.now() - 5), containerStatuses: [carriedStatus(s.runtime.containerStatusOf('c-u1', 'app', 'CONTAINER_RUNNING', 2))] });
  await settle();
  assert.deepEqual(s.channel.take(), []);
  assert.equal(s.cache.get('u1').status?.containerStatuses.find((c) => c.id === 'c-u1')?.state, 'exited');
});
