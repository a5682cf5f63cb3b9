// Events to the API server (the test API server double, in-process, on a fake clock):
// created, deduplicated by PATCH, aggregated, spam-filtered per object, retried through an
// outage, and never blocking the caller.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import { EventCorrelator, EventSink, type ApiEvent, type ObjectReference } from '../../src/kubelet/event-sink.js';
import { EventRecorder } from '../../src/kubelet/event-recorder.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, startServer } from '../test-apiserver/client.js';
import { quietLogger, settle, until } from '../client/drive.js';

const pod: ObjectReference = { kind: 'Pod', apiVersion: 'v1', namespace: 'default', name: 'web', uid: 'uid-web' };
const node: ObjectReference = { kind: 'Node', name: 'n1', uid: 'n1' };

function event(clock: FakeClock, c: EventCorrelator, ref: ObjectReference, reason: string, message: string): ApiEvent {
  const t = new Date(clock.now()).toISOString();
  return {
    apiVersion: 'v1', kind: 'Event', metadata: { name: c.eventName(ref.name), namespace: ref.namespace ?? 'default' }, involvedObject: ref,
    reason, message, type: 'Warning', source: { component: 'kubelet', host: 'n1' }, firstTimestamp: t, lastTimestamp: t, count: 1,
    reportingComponent: 'kubelet', reportingInstance: 'n1',
  };
}

describe('event correlator (client-go semantics)', () => {
  it('counts a repeat up under the first name, with a patch of count, lastTimestamp and message', () => {
    const clock = new FakeClock();
    const c = new EventCorrelator(clock);
    const first = c.correlate(event(clock, c, pod, 'BackOff', 'Back-off restarting failed container'));
    assert.equal(first.patch, undefined);
    c.updateState({ ...first.event, metadata: { ...first.event.metadata, resourceVersion: '7' } });
    clock.step(30_000);
    const again = c.correlate(event(clock, c, pod, 'BackOff', 'Back-off restarting failed container'));
    assert.equal(again.event.metadata.name, first.event.metadata.name);
    assert.equal(again.event.count, 2);
    assert.equal(again.event.firstTimestamp, first.event.firstTimestamp);
    assert.deepEqual(again.patch, { count: 2, lastTimestamp: again.event.lastTimestamp, message: 'Back-off restarting failed container' });
  });

  it('combines the 10th distinct message for one object and reason within 10 minutes, and restarts after 10 quiet minutes', () => {
    const clock = new FakeClock();
    const c = new EventCorrelator(clock, { spamBurst: 1000 });
    const out = [];
    for (let i = 0; i < 12; i++) out.push(c.correlate(event(clock, c, pod, 'Failed', `error ${i}`)));
    assert.deepEqual(out.slice(0, 9).map((r) => r.event.message), Array.from({ length: 9 }, (_, i) => `error ${i}`));
    assert.equal(out[9]!.event.message, '(combined from similar events): error 9');
    assert.equal(out[9]!.patch, undefined);
    // Later similar events update the one combined event.
    assert.equal(out[10]!.event.message, '(combined from similar events): error 10');
    assert.equal(out[10]!.event.metadata.name, out[9]!.event.metadata.name);
    assert.equal(out[11]!.event.count, 3);
    clock.step(10 * 60_000 + 1);
    assert.equal(c.correlate(event(clock, c, pod, 'Failed', 'error 99')).event.message, 'error 99');
  });

  it('drops events for one object past a burst of 25, one more every 5 minutes; other objects are not affected', () => {
    const clock = new FakeClock();
    const c = new EventCorrelator(clock);
    const kept = (ref: ObjectReference, n: number, msg: (i: number) => string) => {
      let k = 0;
      for (let i = 0; i < n; i++) if (!c.correlate(event(clock, c, ref, 'BackOff', msg(i))).skip) k++;
      return k;
    };
    assert.equal(kept(pod, 100, () => 'Back-off restarting failed container'), 25);
    assert.equal(kept(node, 3, (i) => `m${i}`), 3);
    clock.step(5 * 60_000);
    assert.equal(kept(pod, 5, () => 'Back-off restarting failed container'), 1);
  });
});

describe('event sink against the test API server (fake clock)', () => {
  let api: TestApiServer;
  let clock: FakeClock;
  let sink: EventSink;

  beforeEach(async () => {
    clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    api = await startServer({ clock });
    const client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock, qps: 0 });
    sink = new EventSink({ client, clock, log: quietLogger(), host: 'n1', random: () => 0.5 });
  });

  afterEach(async () => {
    sink.stop();
    await api.stop();
  });

  const events = () => api.list('events') as unknown as ApiEvent[];
  const eventRequests = () => api.requests.filter((r) => r.path.includes('/events'));

  it('creates an Event, then patches its count for a repeat; describe-style lookups find it by object', async () => {
    sink.post(pod, 'Warning', 'BackOff', 'Back-off restarting failed container');
    await until(clock, 'the event', () => events().length === 1, 0);
    clock.step(10_000);
    sink.post(pod, 'Warning', 'BackOff', 'Back-off restarting failed container');
    await until(clock, 'the count to reach 2', () => events()[0]?.count === 2, 0);
    const [e] = events();
    assert.deepEqual(e!.involvedObject, pod);
    assert.deepEqual(e!.source, { component: 'kubelet', host: 'n1' });
    assert.equal(e!.firstTimestamp, '2026-01-01T00:00:00Z');
    assert.equal(e!.lastTimestamp, '2026-01-01T00:00:10Z');
    assert.deepEqual(eventRequests().map((r) => `${r.method} ${r.code}`), ['POST 201', 'PATCH 200']);
  });

  it('a crash loop of 1000 events reaches the API server as at most 25 writes', async () => {
    for (let i = 0; i < 1000; i++) sink.post(pod, 'Warning', i % 2 ? 'BackOff' : 'Started', i % 2 ? 'Back-off restarting failed container' : 'Started container app');
    await until(clock, 'the queue to drain', () => sink.pending() === 0 && eventRequests().length >= 25, 0);
    await settle();
    assert.equal(eventRequests().length, 25);
    assert.equal(sink.stats.skipped, 975);
    assert.equal(events().length, 2);
  });

  it('never blocks the caller, and sends what it holds once the API server is back', async () => {
    await api.stop();
    // post is synchronous: it queues and returns nothing to wait on, whatever the API server does
    for (let i = 0; i < 5; i++) assert.equal(sink.post(node, 'Normal', 'NodeReady', `Node n1 status is now: NodeReady ${i}`), undefined);
    assert.ok(sink.pending() >= 4, `queued: ${sink.pending()}`);
    // Tries fail while the server is away (retries every 10 s on the fake clock).
    for (let i = 0; i < 3; i++) { await settle(); clock.step(10_000); }
    assert.equal(events().length, 0);
    await api.restart();
    await until(clock, 'all five events', () => events().length === 5, 1_000);
    assert.equal(sink.stats.failed, 0);
  });

  it('bounds its queue: past 1000 waiting events the new one is dropped', async () => {
    await api.stop();
    for (let i = 0; i < 1100; i++) sink.post({ ...pod, name: `p${i}`, uid: `u${i}` }, 'Normal', 'Pulled', 'ok');
    assert.ok(sink.pending() <= 1000);
    assert.ok(sink.stats.dropped >= 99);
  });

  it('the recorder hands events to it only once told to, resolving the object reference', async () => {
    const rec = new EventRecorder(quietLogger(), () => clock.now());
    rec.record('Node n1', 'Normal', 'Starting', 'Starting kubelet.');
    rec.sendTo({ ref: (o) => (o === 'Node n1' ? node : undefined), post: (r, t, reason, m) => sink.post(r, t, reason, m) });
    rec.record('Node n1', 'Normal', 'NodeReady', 'Node n1 status is now: NodeReady');
    rec.record('Pod gone/x', 'Normal', 'Killing', 'Stopping container x');
    await until(clock, 'the event', () => events().length === 1, 0);
    await settle();
    assert.deepEqual(events().map((e) => e.reason), ['NodeReady']);
    assert.equal(rec.recent().length, 3);
  });
});
