// The API server pod source against the test API server double (fake clock): this node's pods
// through the merger as source "api", watch changes, relist after 410, reconnect after the
// server restarts, periodic resync, malformed pods reported by name, mirror pods apart.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { RestClient } from '../../src/client/rest.js';
import type { ApiSource } from '../../src/sources/api-source.js';
import type { ApiPodError } from '../../src/sources/errors.js';
import { PodConfig, type PodUpdate } from '../../src/sources/pod-config.js';
import { FakeClock } from '../../src/util/clock.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, podManifest, startServer } from '../test-apiserver/client.js';
import { quietLogger, until } from '../client/drive.js';

describe('API pod source (test API server, fake clock)', () => {
  let api: TestApiServer;
  let clock: FakeClock;
  let client: RestClient;
  let config: PodConfig;
  let source: ApiSource;
  let updates: PodUpdate[];
  let apiErrors: ApiPodError[];
  let mirrors: Pod[][];

  const names = () => config.mergedPods().map((p) => p.metadata.name).sort();
  const ops = () => updates.map((u) => `${u.op}:${u.pods.map((p) => p.metadata.name).sort().join(',')}`);

  beforeEach(async () => {
    clock = new FakeClock();
    api = await startServer({ clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock });
    updates = [];
    apiErrors = [];
    mirrors = [];
    api.create('pods', 'default', podManifest('a', 'n1'));
    api.create('pods', 'default', podManifest('elsewhere', 'n2'));
    config = new PodConfig({
      nodeName: 'n1',
      clock,
      onUpdate: (u) => updates.push(u),
      onError: () => assert.fail('no manifest errors expected'),
      onApiPodError: (e) => apiErrors.push(e),
      log: () => undefined,
    });
    source = config.startApiSource(client, { logger: quietLogger(), resyncPeriodMs: 60_000, watchTimeoutSeconds: () => 300, onMirrorPods: (p) => mirrors.push(p) });
    await until(clock, 'the first set', () => config.seenAllSources(), 0);
    await until(clock, 'the watch', () => api.openWatches === 1, 0);
  });

  afterEach(async () => {
    await config.stop();
    client.close();
    await api.stop();
  });

  it('delivers the pods bound to this node as source "api", never another node\'s', () => {
    assert.deepEqual(ops(), ['ADD:a']);
    assert.equal(updates[0]!.source, 'api');
    assert.equal(updates[0]!.pods[0]!.metadata.annotations!['kubernetes.io/config.source'], 'api');
    const list = api.requests.find((r) => r.method === 'GET' && r.path === '/api/v1/pods' && !r.watch)!;
    assert.match(decodeURIComponent(list.query), /fieldSelector=spec\.nodeName=n1/);
  });

  it('follows the watch: a new pod is ADD, a graceful delete is DELETE, the final delete is REMOVE', async () => {
    api.create('pods', 'default', podManifest('b', 'n1'));
    api.create('pods', 'default', podManifest('c', 'n2'));
    await until(clock, 'b added', () => names().includes('b'), 0);
    api.registry.delete(api.resource('pods'), 'default', 'b', { gracePeriodSeconds: 30 });
    await until(clock, 'b deleting', () => ops().includes('DELETE:b'), 0);
    api.registry.delete(api.resource('pods'), 'default', 'b', { gracePeriodSeconds: 0 });
    await until(clock, 'b removed', () => ops().includes('REMOVE:b'), 0);
    assert.deepEqual(ops(), ['ADD:a', 'ADD:b', 'DELETE:b', 'REMOVE:b']);
    assert.deepEqual(names(), ['a']);
  });

  it('relists after 410 Gone and sees what changed meanwhile', async () => {
    const lists = source.lists;
    await api.stop();
    api.create('pods', 'default', podManifest('during', 'n1'));
    api.registry.delete(api.resource('pods'), 'default', 'a', { gracePeriodSeconds: 0 });
    api.compact();
    await api.start();
    await until(clock, 'the relist', () => names().join() === 'during', 500);
    assert.ok(source.lists > lists, 'listed again');
    assert.deepEqual(ops(), ['ADD:a', 'REMOVE:a', 'ADD:during']);
  });

  it('reconnects with backoff after the server restarts, and nothing is delivered twice', async () => {
    await api.stop();
    const before = api.requests.length;
    // the reflector retries on the fake clock: 800 ms doubling, capped at 30 s
    for (let i = 0; i < 8; i++) { clock.step(1000); await new Promise((r) => setTimeout(r, 5)); }
    api.create('pods', 'default', podManifest('later', 'n1'));
    await api.restart();
    await until(clock, 'later', () => names().includes('later'), 1000);
    assert.ok(api.requests.length > before);
    assert.deepEqual(ops(), ['ADD:a', 'ADD:later']);
  });

  it('re-sends the whole set every resync period; an unchanged set makes no update', async () => {
    const sets = source.sets;
    clock.step(60_000);
    await until(clock, 'a resync', () => source.sets > sets, 0);
    assert.deepEqual(ops(), ['ADD:a']);
  });

  it('reports a malformed pod by name and skips it; the other pods are kept', async () => {
    const bad = podManifest('bad', 'n1') as any;
    bad.spec.containers[0].env = [{ name: 'X', value: 5 }];
    api.create('pods', 'default', bad);
    api.create('pods', 'default', podManifest('good', 'n1'));
    await until(clock, 'good', () => names().includes('good'), 0);
    await until(clock, 'the report', () => apiErrors.length > 0, 0);
    assert.deepEqual(names(), ['a', 'good']);
    assert.equal(apiErrors.length, 1);
    assert.match(apiErrors[0]!.message, /^pod default\/bad from the API server: invalid pod/);
    assert.equal(apiErrors[0]!.field, 'spec.containers[0].env[0].value');
    assert.equal(apiErrors[0]!.code, 'ApiPodInvalid');
    // a resync does not report it again
    const sets = source.sets;
    clock.step(60_000);
    await until(clock, 'a resync', () => source.sets > sets, 0);
    assert.equal(apiErrors.length, 1);
  });

  it('hands mirror pods to their own consumer, never to the merged set', async () => {
    const m = podManifest('static-n1', 'n1') as any;
    m.metadata.annotations = { 'kubernetes.io/config.mirror': 'abc', 'kubernetes.io/config.hash': 'abc' };
    api.create('pods', 'default', m);
    await until(clock, 'the mirror pod', () => mirrors.at(-1)?.length === 1, 0);
    assert.equal(mirrors.at(-1)![0]!.metadata.name, 'static-n1');
    assert.deepEqual(names(), ['a']);
  });
});
