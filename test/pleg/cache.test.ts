import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PodCache } from '../../src/pleg/cache.js';
import type { RuntimePodStatus } from '../../src/runtime/types.js';
import { settle } from './doubles.js';

const status = (uid: string, ts: number): RuntimePodStatus => ({
  uid,
  name: 'p',
  namespace: 'ns',
  ips: [],
  sandboxStatuses: [],
  containerStatuses: [],
  timestamp: ts,
});

test('set keeps the newest entry: an older status is refused', () => {
  const c = new PodCache();
  assert.equal(c.set('u', status('u', 200), undefined, 200), true);
  assert.equal(c.set('u', status('u', 100), undefined, 100), false);
  assert.equal(c.get('u').modified, 200);
  assert.equal(c.set('u', status('u', 200), undefined, 200), true, 'as new is accepted');
  assert.equal(c.get('u').status?.timestamp, 200);
});

test('getNewerThan waits for an entry or a relist at least that fresh', async () => {
  const c = new PodCache();
  c.set('u', status('u', 100), undefined, 100);
  const got: number[] = [];
  void c.getNewerThan('u', 150).then((e) => got.push(e.modified));
  void c.getNewerThan('v', 150).then((e) => got.push(e.modified));
  await settle();
  assert.deepEqual(got, []);
  c.set('u', status('u', 160), undefined, 160);
  await settle();
  assert.deepEqual(got, [160]);
  c.updateTime(170);
  await settle();
  assert.deepEqual(got, [160, 170], 'a pod without an entry is served by the relist time');
});

test('a pod with an update in flight is not vouched for by the relist time', async () => {
  const c = new PodCache();
  c.set('u', status('u', 100), undefined, 100);
  c.markPending('u');
  let served = false;
  void c.getNewerThan('u', 150).then(() => (served = true));
  c.updateTime(200);
  await settle();
  assert.equal(served, false);
  c.set('u', status('u', 190), undefined, 190);
  await settle();
  assert.equal(served, true);
});

test('the stale-read hook hears about waits the cache cannot serve, only those', () => {
  const c = new PodCache();
  const heard: Array<[string, number]> = [];
  c.setStaleReadHook((uid, t) => heard.push([uid, t]));
  c.set('u', status('u', 100), undefined, 100);
  void c.getNewerThan('u', 50);
  void c.getNewerThan('u', 150);
  assert.deepEqual(heard, [['u', 150]]);
});

test('delete wakes waiters once the relist time covers them', async () => {
  const c = new PodCache();
  c.updateTime(300);
  c.set('u', status('u', 100), undefined, 100);
  c.markPending('u');
  let entry: unknown;
  void c.getNewerThan('u', 250).then((e) => (entry = e));
  c.delete('u');
  await settle();
  assert.deepEqual(entry, { modified: 300 });
});
