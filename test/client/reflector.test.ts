import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { RestConfig } from '../../src/client/kubeconfig.js';
import { Reflector, type KubeObject, type ReflectorEvent } from '../../src/client/reflector.js';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, podManifest, startServer } from '../test-apiserver/client.js';
import { quietLogger, settle, until } from './drive.js';

const configFor = (api: TestApiServer): RestConfig => ({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN });

/** What a handler builds from the events, failing on a duplicate ADDED or a DELETED of the unknown. */
class View {
  readonly objects = new Map<string, KubeObject>();
  readonly violations: string[] = [];
  readonly events: ReflectorEvent<KubeObject>[] = [];

  handle = (e: ReflectorEvent<KubeObject>): void => {
    this.events.push(e);
    const k = `${e.object.metadata?.namespace}/${e.object.metadata?.name}`;
    if (e.type === 'ADDED' && this.objects.has(k)) this.violations.push(`duplicate ADDED ${k}`);
    if (e.type !== 'ADDED' && !this.objects.has(k)) this.violations.push(`${e.type} of unknown ${k}`);
    if (e.type === 'DELETED') this.objects.delete(k);
    else this.objects.set(k, e.object);
  };

  /** name → resourceVersion, to compare with the server's. */
  summary(): Record<string, string> {
    return Object.fromEntries([...this.objects.values()].map((o) => [o.metadata!.name!, o.metadata!.resourceVersion!]).sort());
  }
}

const serverView = (api: TestApiServer, node: string) =>
  Object.fromEntries(api.list('pods').filter((p) => p.spec.nodeName === node).map((p) => [p.metadata.name, p.metadata.resourceVersion]).sort());

const pod = (api: TestApiServer, name: string, node = 'n1') => api.create('pods', 'default', podManifest(name, node));
const relabel = (api: TestApiServer, name: string, v: string) => {
  const cur = api.get('pods', 'default', name)!;
  api.registry.update(api.resource('pods'), 'default', name, { ...cur, metadata: { ...cur.metadata, labels: { v } } });
};
const remove = (api: TestApiServer, name: string) => api.registry.delete(api.resource('pods'), 'default', name, { gracePeriodSeconds: 0 });

describe('reflector against the test API server (fake clock)', () => {
  let api: TestApiServer;
  let clock: FakeClock;
  let client: RestClient;
  let view: View;
  let ctl: AbortController;
  let r: Reflector;
  let running: Promise<void>;

  beforeEach(async () => {
    clock = new FakeClock();
    api = await startServer({ clock, bookmarkIntervalMs: 60_000 });
    client = new RestClient(configFor(api), { clock });
    view = new View();
    ctl = new AbortController();
    pod(api, 'a');
    pod(api, 'b');
    pod(api, 'elsewhere', 'n2');
    let synced = 0;
    r = new Reflector({ client, path: '/api/v1/pods', fieldSelector: 'spec.nodeName=n1', handler: view.handle, onSynced: () => synced++, pageSize: 1, log: quietLogger() });
    running = r.run(ctl.signal);
    await until(clock, 'synced', () => r.hasSynced, 0);
    assert.equal(synced, 1);
    assert.deepEqual(view.summary(), serverView(api, 'n1'));
    await until(clock, 'the watch', () => api.openWatches === 1, 0);
  });

  afterEach(async () => {
    ctl.abort();
    await running;
    client.close();
    await api.stop();
  });

  const converged = (what: string) => until(clock, what, () => JSON.stringify(view.summary()) === JSON.stringify(serverView(api, 'n1')), 100);

  it('lists in pages, then follows adds, changes and deletes; ignores other nodes', async () => {
    assert.deepEqual(view.events.map((e) => [e.type, e.object.metadata?.name]), [['ADDED', 'a'], ['ADDED', 'b']]);
    pod(api, 'c');
    relabel(api, 'a', '2');
    remove(api, 'b');
    pod(api, 'other', 'n2');
    await converged('the watch events');
    assert.deepEqual(view.events.slice(2).map((e) => [e.type, e.object.metadata?.name]), [['ADDED', 'c'], ['MODIFIED', 'a'], ['DELETED', 'b']]);
    assert.equal((view.events[3]!.old as any).metadata.labels.v, undefined);
    assert.deepEqual(view.violations, []);
    assert.equal(r.lists, 1);
  });

  it('moves its resourceVersion on bookmarks', async () => {
    api.create('configmaps', 'default', { metadata: { name: 'bump' } });
    const rv = r.lastResourceVersion;
    clock.step(60_000);
    await until(clock, 'a bookmark', () => r.lastResourceVersion !== rv, 0);
    assert.equal(r.lastResourceVersion, String(api.store.resourceVersion));
  });

  it('re-watches from the last resourceVersion after a dropped watch, without relisting', async () => {
    api.dropWatches();
    pod(api, 'while-dropped');
    relabel(api, 'a', 'x');
    await converged('recovery from a dropped watch');
    assert.deepEqual(view.violations, []);
    assert.equal(r.lists, 1);
    assert.ok(r.watches >= 2);
    const rewatch = api.requests.filter((q) => q.watch).at(-1)!;
    assert.match(rewatch.query, /allowWatchBookmarks=true/);
  });

  it('survives an API server restart, changes made while it was down included', async () => {
    await api.stop();
    await until(clock, 'a failed re-watch', () => r.watches >= 3, 500);
    pod(api, 'while-down');
    remove(api, 'a');
    await api.restart();
    await converged('recovery from a restart');
    assert.deepEqual(view.violations, []);
    assert.equal(r.lists, 1, 'history still covers the version: no relist');
  });

  it('relists on a 410 ERROR event after compaction, and the view loses and duplicates nothing', async () => {
    await api.stop();
    pod(api, 'after-compaction');
    remove(api, 'a');
    relabel(api, 'b', 'y');
    api.compact();
    await api.restart();
    await converged('recovery from a compaction');
    assert.equal(r.lists, 2);
    assert.deepEqual(view.violations, []);
    const last = view.events.slice(2).map((e) => [e.type, e.object.metadata?.name]).sort();
    assert.deepEqual(last, [['ADDED', 'after-compaction'], ['DELETED', 'a'], ['MODIFIED', 'b']]);
  });

  it('relists on a 410 HTTP answer to the watch', async () => {
    api.injectError({ method: 'GET', path: 'watch=true', count: 1, code: 410 });
    api.dropWatches();
    pod(api, 'after-410');
    await converged('recovery from a 410 answer');
    assert.equal(r.lists, 2);
    assert.deepEqual(view.violations, []);
  });

  it('awaits the handler before reading the next event (backpressure)', async () => {
    ctl.abort();
    await running;
    ctl = new AbortController();
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const seen: string[] = [];
    const slow = new Reflector({
      client, path: '/api/v1/pods', fieldSelector: 'spec.nodeName=n3', log: quietLogger(),
      handler: async (e) => { seen.push(e.object.metadata!.name!); if (e.object.metadata!.name === 'slow-1') await gate; },
    });
    running = slow.run(ctl.signal);
    await until(clock, 'synced', () => slow.hasSynced, 0);
    for (const n of ['slow-1', 'slow-2', 'slow-3']) pod(api, n, 'n3');
    await until(clock, 'the first event', () => seen.length === 1, 0);
    await settle(50);
    assert.deepEqual(seen, ['slow-1']);
    release();
    await until(clock, 'the rest', () => seen.length === 3, 0);
    assert.deepEqual(seen, ['slow-1', 'slow-2', 'slow-3']);
  });

  it('refuses a watch event longer than its bound, and keeps trying without growing', async () => {
    ctl.abort();
    await running;
    ctl = new AbortController();
    const lines: string[] = [];
    const seen: string[] = [];
    const small = new Reflector({
      client, path: '/api/v1/pods', fieldSelector: 'spec.nodeName=n4', maxEventBytes: 64, log: quietLogger(lines),
      handler: (e) => void seen.push(e.object.metadata!.name!),
    });
    running = small.run(ctl.signal);
    await until(clock, 'synced', () => small.hasSynced, 0);
    pod(api, 'big', 'n4');
    await until(clock, 'two refused watches', () => small.watches >= 3, 500);
    assert.deepEqual(seen, []);
    assert.ok(lines.every((l) => l === 'watch failed'));
  });

  it('stops promptly on abort, while watching and while backing off', async () => {
    ctl.abort();
    await running;
    await until(clock, 'the server to see the watch closed', () => api.openWatches === 0, 0);
    const ctl2 = new AbortController();
    await api.stop();
    const r2 = new Reflector({ client, path: '/api/v1/pods', handler: () => undefined, log: quietLogger() });
    const run2 = r2.run(ctl2.signal);
    await settle(50);
    assert.equal(r2.hasSynced, false);
    ctl2.abort();
    await run2;
    await api.start();
  });
});
