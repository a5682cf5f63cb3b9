import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiStatusError, isAlreadyExists, isConflict, isGone, isNotFound } from '../../src/client/errors.js';
import type { RestConfig } from '../../src/client/kubeconfig.js';
import { TokenBucket } from '../../src/client/rate-limiter.js';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, podManifest, startServer } from '../test-apiserver/client.js';
import { settle, track, until } from './drive.js';

const pods = '/api/v1/namespaces/default/pods';
const leases = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases';

const configFor = (api: TestApiServer): RestConfig => ({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN });

describe('REST client against the test API server', () => {
  let api: TestApiServer;
  let c: RestClient;
  before(async () => {
    api = await startServer();
    c = new RestClient(configFor(api), { maxRetries: 0 });
  });
  after(async () => {
    c.close();
    await api.stop();
  });

  it('creates, gets, patches three ways, updates and deletes', async () => {
    const created = await c.create(pods, podManifest('p1'));
    assert.equal(created.metadata.name, 'p1');
    const got = await c.get(`${pods}/p1`);
    assert.equal(got.metadata.uid, created.metadata.uid);
    const m = await c.patch(`${pods}/p1`, 'merge', { metadata: { labels: { a: '1' } } });
    assert.equal(m.metadata.labels.a, '1');
    const s = await c.patch(`${pods}/p1`, 'strategic', { spec: { containers: [{ name: 'c', image: 'busybox:1.37' }] } });
    assert.equal(s.spec.containers.length, 1);
    assert.equal(s.spec.containers[0].image, 'busybox:1.37');
    const j = await c.patch(`${pods}/p1`, 'json', [{ op: 'add', path: '/metadata/labels/b', value: '2' }]);
    assert.deepEqual(j.metadata.labels, { a: '1', b: '2' });
    const types = api.requests.filter((r) => r.method === 'PATCH').map((r) => r.contentType);
    assert.deepEqual(types.slice(-3), ['application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/json-patch+json']);
    const status = await c.patch(`${pods}/p1/status`, 'merge', { status: { phase: 'Running' } });
    assert.equal(status.status.phase, 'Running');
    await c.delete(`${pods}/p1`, { body: { gracePeriodSeconds: 0, preconditions: { uid: created.metadata.uid } } });
    assert.equal(api.get('pods', 'default', 'p1'), undefined);
  });

  it('turns Status answers into typed errors: NotFound, AlreadyExists, Invalid, Conflict', async () => {
    const nf = await c.get(`${pods}/nope`).catch((e) => e);
    assert.ok(nf instanceof ApiStatusError && isNotFound(nf));
    assert.deepEqual([nf.code, nf.httpCode, nf.status.details?.name], ['NotFound', 404, 'nope']);
    assert.match(nf.message, /GET \/api\/v1\/namespaces\/default\/pods\/nope: 404 NotFound: pods "nope" not found/);
    await c.create(pods, podManifest('dup'));
    const ae = await c.create(pods, podManifest('dup')).catch((e) => e);
    assert.ok(isAlreadyExists(ae));
    assert.deepEqual([ae.code, ae.httpCode], ['AlreadyExists', 409]);
    const inv = await c.create(pods, { metadata: { name: 'Bad_Name' }, spec: { containers: [{ name: 'c', image: 'x' }] } }).catch((e) => e);
    assert.deepEqual([inv.code, inv.httpCode], ['Invalid', 422]);
    assert.equal(inv.status.details.causes[0].field, 'metadata.name');
  });

  it('surfaces a stale lease update as Conflict', async () => {
    const lease = await c.create(leases, { metadata: { name: 'n1' }, spec: { holderIdentity: 'n1', leaseDurationSeconds: 40 } });
    await c.update(`${leases}/n1`, { ...lease, spec: { ...lease.spec, renewTime: '2026-01-01T00:00:10.000000Z' } });
    const err = await c.update(`${leases}/n1`, { ...lease, spec: { ...lease.spec, renewTime: '2026-01-01T00:00:20.000000Z' } }).catch((e) => e);
    assert.ok(isConflict(err), String(err));
    assert.deepEqual([err.code, err.httpCode], ['Conflict', 409]);
    assert.match(err.message, /Operation cannot be fulfilled on leases.coordination.k8s.io "n1"/);
  });

  it('surfaces a compacted resourceVersion as a 410 (reason Expired)', async () => {
    const old = (await c.get(pods)).metadata.resourceVersion;
    await c.create(pods, podManifest('after-old'));
    api.compact();
    const err = await c.get(pods, { query: { resourceVersion: old, resourceVersionMatch: 'Exact' } }).catch((e) => e);
    assert.ok(isGone(err));
    assert.deepEqual([err.code, err.httpCode], ['Expired', 410]);
  });

  it('gives a plain-text error answer a reason from its HTTP code', async () => {
    const err = await c.get('/no/such/path').catch((e) => e);
    assert.deepEqual([err.code, err.httpCode], ['NotFound', 404]);
  });
});

describe('REST client retries, timeouts and rate limits (fake clock)', () => {
  let api: TestApiServer;
  before(async () => { api = await startServer(); });
  after(async () => { await api.stop(); });

  const count = (method: string, path: string) => api.requests.filter((r) => r.method === method && r.path === path).length;

  it('retries a GET through injected 500s with backoff, and returns the answer', async () => {
    const clock = new FakeClock();
    const c = new RestClient(configFor(api), { clock, retryInitialMs: 200 });
    api.injectError({ method: 'GET', path: '/namespaces/kube-system', count: 2, code: 500 });
    const before = count('GET', '/api/v1/namespaces/kube-system');
    const t = track(c.get('/api/v1/namespaces/kube-system'));
    const sent = () => count('GET', '/api/v1/namespaces/kube-system') - before;
    await until(clock, 'the first attempt', () => sent() === 1, 0);
    await settle();
    clock.step(199);
    await settle();
    assert.equal(sent(), 1, 'the first retry waits 200 ms');
    clock.step(1);
    await until(clock, 'the first retry', () => sent() === 2, 0);
    await settle();
    clock.step(399);
    await settle();
    assert.equal(sent(), 2, 'the second retry waits 400 ms');
    clock.step(1);
    const ns = await until(clock, 'the answer', () => t.done && t, 0);
    assert.equal(ns.value.metadata.name, 'kube-system');
    assert.equal(count('GET', '/api/v1/namespaces/kube-system') - before, 3);
    c.close();
  });

  it('does not retry a 500 on a POST, but retries a 429 on it after Retry-After', async () => {
    const clock = new FakeClock();
    const c = new RestClient(configFor(api), { clock });
    api.injectError({ method: 'POST', path: '/configmaps', count: 1, code: 500 });
    const err = await c.create('/api/v1/namespaces/default/configmaps', { metadata: { name: 'cm-500' } }).catch((e) => e);
    assert.deepEqual([err.code, err.httpCode], ['InternalError', 500]);
    assert.equal(api.get('configmaps', 'default', 'cm-500'), undefined);

    api.injectError({ method: 'POST', path: '/configmaps', count: 1, code: 429, retryAfterSeconds: 3 });
    const before = count('POST', '/api/v1/namespaces/default/configmaps');
    const t = track(c.create('/api/v1/namespaces/default/configmaps', { metadata: { name: 'cm-429' } }));
    await until(clock, 'the 429', () => api.requests.at(-1)?.code === 429, 0);
    await settle();
    clock.step(2_900);
    await settle();
    assert.equal(count('POST', '/api/v1/namespaces/default/configmaps') - before, 1, 'waits for Retry-After');
    await until(clock, 'the retry', () => t.done, 100);
    assert.equal(t.error, undefined);
    assert.ok(api.get('configmaps', 'default', 'cm-429'));
    assert.equal(count('POST', '/api/v1/namespaces/default/configmaps') - before, 2);
    c.close();
  });

  it('gives up after maxRetries with the last error', async () => {
    const clock = new FakeClock();
    const c = new RestClient(configFor(api), { clock, maxRetries: 2 });
    api.injectError({ method: 'GET', path: '/namespaces/default', count: 5, code: 503 });
    const t = track(c.get('/api/v1/namespaces/default'));
    await until(clock, 'giving up', () => t.done, 100);
    assert.deepEqual([(t.error as any).code, (t.error as any).httpCode], ['ServiceUnavailable', 503]);
    api.clearFaults();
    c.close();
  });

  it('times out on the injected clock, and stops on an abort signal', async () => {
    const clock = new FakeClock();
    const c = new RestClient(configFor(api), { clock, timeoutMs: 5_000 });
    api.latencyMs = 400;
    try {
      const t = track(c.get('/api/v1/nodes'));
      await settle();
      clock.step(4_999);
      await settle();
      assert.equal(t.done, false);
      clock.step(1);
      await until(clock, 'the timeout', () => t.done, 0);
      assert.equal((t.error as any).code, 'ERR_API_TIMEOUT');
      assert.match((t.error as any).message, /GET \/api\/v1\/nodes: no answer within 5000 ms/);
      const ctl = new AbortController();
      const t2 = track(c.get('/api/v1/nodes', { signal: ctl.signal }));
      await settle();
      ctl.abort();
      await until(clock, 'the abort', () => t2.done, 0);
      assert.equal((t2.error as any).code, 'ERR_API_ABORTED');
    } finally {
      api.latencyMs = 0;
      c.close();
    }
  });

  it('rate limits with the token bucket: burst at once, then qps', async () => {
    const clock = new FakeClock();
    const c = new RestClient(configFor(api), { clock, qps: 2, burst: 3 });
    const before = count('GET', '/api/v1/namespaces/kube-public');
    const calls = Array.from({ length: 6 }, () => track(c.get('/api/v1/namespaces/kube-public')));
    const sent = () => count('GET', '/api/v1/namespaces/kube-public') - before;
    await until(clock, 'the burst', () => calls.filter((x) => x.done).length === 3, 0);
    await settle();
    assert.equal(sent(), 3);
    clock.step(499);
    await settle();
    assert.equal(sent(), 3);
    clock.step(1);
    await until(clock, 'the fourth', () => sent() === 4, 0);
    clock.step(500);
    await until(clock, 'the fifth', () => sent() === 5, 0);
    clock.step(500);
    await until(clock, 'the sixth', () => calls.every((x) => x.done), 0);
    assert.ok(calls.every((x) => x.error === undefined));
    c.close();
  });
});

describe('token bucket', () => {
  it('defaults to kubeAPIQPS 50 / kubeAPIBurst 100 in the client', () => {
    const c = new RestClient({ source: 't', server: 'http://127.0.0.1:1', insecureSkipTLSVerify: false });
    assert.deepEqual([c.limiter?.qps, c.limiter?.burst], [50, 100]);
  });

  it('refills at qps up to burst, serves waiters in order, returns an aborted reservation', async () => {
    const clock = new FakeClock();
    const b = new TokenBucket(10, 2, clock);
    assert.ok(b.tryAccept() && b.tryAccept());
    assert.equal(b.tryAccept(), false);
    clock.step(10_000);
    assert.equal(b.available(), 2);
    b.tryAccept(); b.tryAccept();
    const order: number[] = [];
    const first = b.accept().then(() => order.push(1));
    const ctl = new AbortController();
    const second = b.accept(ctl.signal).catch((e) => e);
    const third = b.accept().then(() => order.push(3));
    ctl.abort();
    assert.equal((await second).code, 'ERR_API_ABORTED');
    clock.step(100);
    await first;
    clock.step(200);
    await third;
    assert.deepEqual(order, [1, 3]);
    assert.throws(() => new TokenBucket(0, 1, clock), RangeError);
  });
});
