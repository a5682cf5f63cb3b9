// Mirror pods against the test API server double: created for a static pod with the
// config.mirror annotation, recreated after a user deletes it, replaced when the static pod
// changes, deleted when the static pod goes; nothing sent while the API matches.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { RestClient } from '../../src/client/rest.js';
import { MirrorPods } from '../../src/kubelet/mirror-pods.js';
import { FakeClock } from '../../src/util/clock.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, startServer } from '../test-apiserver/client.js';
import { quietLogger } from '../client/drive.js';

function staticPod(hash: string, image = 'busybox:1.36'): Pod {
  return {
    metadata: {
      uid: hash, name: 'web-n1', namespace: 'default', labels: { app: 'web' },
      annotations: { 'kubernetes.io/config.source': 'file', 'kubernetes.io/config.hash': hash, 'kubernetes.io/config.seen': '2026-01-01T00:00:00Z' },
    },
    spec: { nodeName: 'n1', containers: [{ name: 'c', image }], tolerations: [{ operator: 'Exists', effect: 'NoExecute' }] },
    status: { phase: 'Pending' },
  };
}

describe('mirror pods (test API server)', () => {
  let api: TestApiServer;
  let client: RestClient;
  let statics: Pod[];
  let mp: MirrorPods;

  const mirror = () => api.get('pods', 'default', 'web-n1') as Pod | undefined;
  /** What the API source would hand over: this node's mirror pods as stored now. */
  const feed = () => mp.setMirrorPods(api.list('pods', 'default').filter((p) => p.metadata.annotations?.['kubernetes.io/config.mirror'] !== undefined) as Pod[]);
  const writes = () => api.requests.filter((r) => r.method !== 'GET').length;

  beforeEach(async () => {
    const clock = new FakeClock();
    api = await startServer({ clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock, qps: 0 });
    statics = [staticPod('h1')];
    mp = new MirrorPods({ client, nodeName: 'n1', log: quietLogger(), staticPods: () => statics });
    api.create('nodes', undefined, { metadata: { name: 'n1' } });
  });

  afterEach(async () => {
    client.close();
    await api.stop();
  });

  it('creates the mirror pod with the static pod\'s hash, and sends nothing more while it matches', async () => {
    await mp.reconcile();
    const m = mirror()!;
    assert.equal(m.metadata.annotations!['kubernetes.io/config.mirror'], 'h1');
    assert.equal(m.metadata.annotations!['kubernetes.io/config.source'], 'file');
    assert.deepEqual(m.metadata.labels, { app: 'web' });
    assert.equal(m.metadata.ownerReferences?.[0]?.kind, 'Node');
    assert.equal(m.spec.nodeName, 'n1');
    assert.equal(mp.mirrorPodOf(statics[0]!)?.metadata.uid, m.metadata.uid);
    const before = writes();
    feed();
    await mp.reconcile();
    await mp.reconcile();
    assert.equal(writes(), before);
  });

  it('creates no mirror pod before its Node exists (upstream: the Node is its owner), and creates it once the Node is there', async () => {
    api.registry.delete(api.resource('nodes'), undefined, 'n1', { gracePeriodSeconds: 0 });
    await mp.reconcile();
    assert.equal(mirror(), undefined);
    assert.equal(api.requests.filter((r) => r.method === 'POST').length, 0);
    const node = api.create('nodes', undefined, { metadata: { name: 'n1' } }) as { metadata: { uid: string } };
    await mp.reconcile();
    assert.deepEqual(mirror()?.metadata.ownerReferences?.map((o) => [o.kind, o.name, o.uid]), [['Node', 'n1', node.metadata.uid]]);
  });

  it('a mirror pod deleted by a user (graceful) is deleted at once and created again', async () => {
    await mp.reconcile();
    const first = mirror()!;
    api.registry.delete(api.resource('pods'), 'default', 'web-n1', { gracePeriodSeconds: 30 });
    feed();
    await mp.reconcile();
    const again = mirror()!;
    assert.notEqual(again.metadata.uid, first.metadata.uid);
    assert.equal(again.metadata.deletionTimestamp, undefined);
    const del = api.requests.find((r) => r.method === 'DELETE' && r.user === 'admin' && r.code === 200);
    assert.ok(del, 'deleted with its UID precondition');
  });

  it('a mirror pod removed outright is created again', async () => {
    await mp.reconcile();
    api.registry.delete(api.resource('pods'), 'default', 'web-n1', { gracePeriodSeconds: 0 });
    feed();
    await mp.reconcile();
    assert.ok(mirror());
  });

  it('an edited static pod replaces its mirror; a removed one has its mirror deleted', async () => {
    await mp.reconcile();
    feed();
    statics = [staticPod('h2', 'busybox:1.37')];
    await mp.reconcile();
    assert.equal(mirror()!.metadata.annotations!['kubernetes.io/config.mirror'], 'h2');
    assert.equal(mirror()!.spec.containers[0]!.image, 'busybox:1.37');
    feed();
    statics = [];
    await mp.reconcile();
    assert.equal(mirror(), undefined);
  });

  it('a mirror created whose watch event has not arrived is adopted, not duplicated', async () => {
    await mp.reconcile();
    mp.setMirrorPods([]); // a set from before the create
    await mp.reconcile();
    assert.equal(api.list('pods', 'default').length, 1);
    assert.equal(mp.mirrorPodOf(statics[0]!)?.metadata.uid, mirror()!.metadata.uid);
  });
});
