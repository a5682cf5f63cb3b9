import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../../src/util/clock.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { call, podManifest, startServer, watch } from './client.js';

const pods = '/api/v1/namespaces/default/pods';

describe('test API server: resourceVersion and watch', () => {
  let s: TestApiServer;
  before(async () => { s = await startServer(); });
  after(() => s.stop());

  it('bumps one global resourceVersion on every write, across kinds', async () => {
    const a = await call(s, 'POST', pods, { body: podManifest('rv-a') });
    const cm = await call(s, 'POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: 'rv-cm' }, data: { k: 'v' } } });
    const b = await call(s, 'PATCH', `${pods}/rv-a`, { body: { metadata: { labels: { x: 'y' } } }, contentType: 'application/merge-patch+json' });
    assert.equal(a.code, 201);
    const rvs = [a, cm, b].map((r) => Number(r.body.metadata.resourceVersion));
    assert.ok(rvs[0] < rvs[1] && rvs[1] < rvs[2], `not increasing: ${rvs}`);
    const list = await call(s, 'GET', pods);
    assert.equal(list.body.kind, 'PodList');
    assert.equal(Number(list.body.metadata.resourceVersion), rvs[2]);
    assert.ok(a.body.metadata.uid && a.body.metadata.creationTimestamp);
    assert.equal(a.body.metadata.generation, 1);
  });

  it('replays changes after the given resourceVersion, then streams new ones', async () => {
    const c1 = await call(s, 'POST', pods, { body: podManifest('replay-1') });
    const from = c1.body.metadata.resourceVersion;
    await call(s, 'POST', pods, { body: podManifest('replay-2') });
    await call(s, 'DELETE', `${pods}/replay-1?gracePeriodSeconds=0`);
    const w = await watch(s, `${pods}?watch=true&resourceVersion=${from}`);
    assert.equal(w.code, 200);
    const e1 = await w.next();
    assert.deepEqual([e1?.type, e1?.object.metadata.name], ['ADDED', 'replay-2']);
    const e2 = await w.next();
    assert.deepEqual([e2?.type, e2?.object.metadata.name], ['DELETED', 'replay-1']);
    assert.ok(Number(e2?.object.metadata.resourceVersion) > Number(e1?.object.metadata.resourceVersion));
    await call(s, 'POST', pods, { body: podManifest('replay-3') });
    const e3 = await w.next();
    assert.deepEqual([e3?.type, e3?.object.metadata.name, e3?.object.kind], ['ADDED', 'replay-3', 'Pod']);
    w.close();
  });

  it('sends the current state as ADDED when no resourceVersion is given', async () => {
    const w = await watch(s, '/api/v1/namespaces?watch=true');
    const names = [];
    for (let i = 0; i < 4; i++) names.push((await w.next())?.object.metadata.name);
    assert.deepEqual(names.sort(), ['default', 'kube-node-lease', 'kube-public', 'kube-system']);
    w.close();
  });

  it('filters by fieldSelector spec.nodeName and label selector; leaving the selection is DELETED', async () => {
    const w = await watch(s, `/api/v1/pods?watch=true&fieldSelector=${encodeURIComponent('spec.nodeName=node-a')}&labelSelector=${encodeURIComponent('app in (web),tier!=db')}`);
    await call(s, 'POST', pods, { body: podManifest('sel-other-node', 'node-b', { app: 'web' }) });
    await call(s, 'POST', pods, { body: podManifest('sel-no-label', 'node-a') });
    await call(s, 'POST', pods, { body: podManifest('sel-yes', 'node-a', { app: 'web' }) });
    const e = await w.next();
    assert.deepEqual([e?.type, e?.object.metadata.name], ['ADDED', 'sel-yes']);
    await call(s, 'PATCH', `${pods}/sel-yes`, { body: { metadata: { labels: { tier: 'db' } } }, contentType: 'application/merge-patch+json' });
    const gone = await w.next();
    assert.deepEqual([gone?.type, gone?.object.metadata.name], ['DELETED', 'sel-yes']);
    assert.equal(w.events.length, 2);
    const list = await call(s, 'GET', `/api/v1/pods?fieldSelector=${encodeURIComponent('spec.nodeName=node-b,metadata.namespace=default')}`);
    assert.deepEqual(list.body.items.map((p: any) => p.metadata.name), ['sel-other-node']);
    const bad = await call(s, 'GET', `/api/v1/pods?fieldSelector=spec.bogus%3Dx`);
    assert.equal(bad.code, 400);
    assert.match(bad.body.message, /field label not supported: spec.bogus/);
    w.close();
  });

  it('answers a watch from a compacted resourceVersion with a 410 Expired ERROR event', async () => {
    const old = (await call(s, 'GET', pods)).body.metadata.resourceVersion;
    await call(s, 'POST', pods, { body: podManifest('after-old') });
    s.compact();
    const w = await watch(s, `${pods}?watch=true&resourceVersion=${old}`);
    const e = await w.next();
    assert.equal(e?.type, 'ERROR');
    assert.deepEqual([e?.object.kind, e?.object.code, e?.object.reason, e?.object.status], ['Status', 410, 'Expired', 'Failure']);
    assert.match(e?.object.message, /^too old resource version: \d+ \(\d+\)$/);
    await w.ended;
    const exact = await call(s, 'GET', `${pods}?resourceVersion=${old}&resourceVersionMatch=Exact`);
    assert.equal(exact.code, 410);
    const notOlder = await call(s, 'GET', `${pods}?resourceVersion=${old}&resourceVersionMatch=NotOlderThan`);
    assert.equal(notOlder.code, 200);
    const future = await call(s, 'GET', `${pods}?resourceVersion=${s.store.resourceVersion + 5}`);
    assert.deepEqual([future.code, future.body.reason, future.body.details.causes[0].reason], [504, 'Timeout', 'ResourceVersionTooLarge']);
    // Watching from the current version still works after compaction.
    const now = (await call(s, 'GET', pods)).body.metadata.resourceVersion;
    const w2 = await watch(s, `${pods}?watch=true&resourceVersion=${now}`);
    await call(s, 'POST', pods, { body: podManifest('after-compact') });
    assert.equal((await w2.next())?.object.metadata.name, 'after-compact');
    w2.close();
  });

  it('expires continue tokens with the history they read from', async () => {
    for (const n of ['page-1', 'page-2', 'page-3']) await call(s, 'POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: n } } });
    const p1 = await call(s, 'GET', '/api/v1/namespaces/default/configmaps?limit=2');
    assert.equal(p1.body.items.length, 2);
    assert.ok(p1.body.metadata.continue);
    const p2 = await call(s, 'GET', `/api/v1/namespaces/default/configmaps?limit=2&continue=${encodeURIComponent(p1.body.metadata.continue)}`);
    assert.ok(p2.body.items.length >= 1);
    assert.ok(!p2.body.items.some((i: any) => p1.body.items.some((j: any) => j.metadata.name === i.metadata.name)));
    // A write after the first page, then a compaction past it: that page's revision is gone.
    await call(s, 'POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: 'page-4' } } });
    s.compact();
    const p3 = await call(s, 'GET', `/api/v1/namespaces/default/configmaps?limit=2&continue=${encodeURIComponent(p1.body.metadata.continue)}`);
    assert.equal(p3.code, 410);
  });

  it('ends watches on timeoutSeconds and when told to drop them', async () => {
    const w = await watch(s, `${pods}?watch=true&resourceVersion=${(await call(s, 'GET', pods)).body.metadata.resourceVersion}&timeoutSeconds=1`);
    await w.ended;
    const w2 = await watch(s, `${pods}?watch=true&resourceVersion=${(await call(s, 'GET', pods)).body.metadata.resourceVersion}`);
    assert.equal(s.openWatches, 1);
    s.dropWatches();
    await w2.ended;
    assert.equal(s.openWatches, 0);
  });
});

describe('test API server: bookmarks', () => {
  it('sends BOOKMARK events with the current resourceVersion when allowWatchBookmarks (fake clock)', async () => {
    const clock = new FakeClock();
    const s = await startServer({ clock, bookmarkIntervalMs: 60_000 });
    try {
      const rv = (await call(s, 'GET', pods)).body.metadata.resourceVersion;
      const plain = await watch(s, `${pods}?watch=true&resourceVersion=${rv}`);
      const w = await watch(s, `${pods}?watch=true&resourceVersion=${rv}&allowWatchBookmarks=true`);
      await call(s, 'POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: 'bump' } } });
      clock.step(60_000);
      const b = await w.next();
      assert.equal(b?.type, 'BOOKMARK');
      assert.equal(b?.object.kind, 'Pod');
      assert.equal(b?.object.metadata.resourceVersion, String(s.store.resourceVersion));
      assert.ok(Number(b?.object.metadata.resourceVersion) > Number(rv));
      assert.equal(plain.events.length, 0);
      // Initial events end with the annotated bookmark when sendInitialEvents is asked.
      const wl = await watch(s, `${pods}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`);
      const end = await wl.next();
      assert.equal(end?.type, 'BOOKMARK');
      assert.equal(end?.object.metadata.annotations['k8s.io/initial-events-end'], 'true');
      for (const x of [plain, w, wl]) x.close();
    } finally {
      await s.stop();
    }
  });
});
