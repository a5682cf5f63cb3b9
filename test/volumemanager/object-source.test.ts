// The volumes' object source against the test API server: core/v1 GETs behind a TTL cache
// (or none, strategy Get), NotFound named as upstream's managers name it, TokenRequest bound to
// the pod, and standalone mode failing with upstream's message naming the object.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RestConfig } from '../../src/client/kubeconfig.js';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import { ApiObjectSource, DEFAULT_OBJECT_TTL_MS, StandaloneObjectSource, VolumeObjectError } from '../../src/volumemanager/object-source.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, podManifest, startServer } from '../test-apiserver/client.js';

const configFor = (api: TestApiServer): RestConfig => ({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN });

async function rejectsWith(p: Promise<unknown>, code: string, message: RegExp): Promise<VolumeObjectError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof VolumeObjectError, String(err));
    assert.equal(err.code, code);
    assert.match(err.message, message);
    return err;
  }
  assert.fail('expected a rejection');
}

describe('ApiObjectSource against the test API server', () => {
  let api: TestApiServer;
  let client: RestClient;
  before(async () => {
    api = await startServer();
    client = new RestClient(configFor(api), { maxRetries: 0 });
    api.create('configmaps', 'default', { metadata: { name: 'cfg' }, data: { 'a.txt': 'one' }, binaryData: { bin: Buffer.from([0, 1, 2]).toString('base64') } });
    api.create('secrets', 'default', { metadata: { name: 'sec' }, stringData: { password: 's3cret' } });
    api.create('pods', 'default', podManifest('web'));
  });
  after(async () => {
    client.close();
    await api.stop();
  });

  const gets = (path: string) => api.requests.filter((r) => r.method === 'GET' && r.path === path).length;

  it('reads a ConfigMap and a Secret as on the wire', async () => {
    const src = new ApiObjectSource({ client, clock: new FakeClock() });
    const cm = await src.getConfigMap('default', 'cfg');
    assert.deepEqual(cm.data, { 'a.txt': 'one' });
    assert.deepEqual(Buffer.from(cm.binaryData!.bin!, 'base64'), Buffer.from([0, 1, 2]));
    const s = await src.getSecret('default', 'sec');
    assert.equal(Buffer.from(s.data!.password!, 'base64').toString(), 's3cret');
  });

  it('names a missing object as upstream does (singular kind), with notFound set', async () => {
    const src = new ApiObjectSource({ client, clock: new FakeClock() });
    const e1 = await rejectsWith(src.getConfigMap('default', 'nope'), 'ERR_VOLUME_OBJECT_NOT_FOUND', /^configmap "nope" not found$/);
    assert.ok(e1.notFound);
    const e2 = await rejectsWith(src.getSecret('default', 'nope'), 'ERR_VOLUME_OBJECT_NOT_FOUND', /^secret "nope" not found$/);
    assert.equal(e2.namespace, 'default');
  });

  it('serves from its TTL cache (the simplified Watch strategy) and reads again once the TTL passed', async () => {
    const clock = new FakeClock();
    const src = new ApiObjectSource({ client, clock });
    api.create('configmaps', 'default', { metadata: { name: 'ttl' }, data: { k: 'v1' } });
    const path = '/api/v1/namespaces/default/configmaps/ttl';
    const before = gets(path);
    assert.equal((await src.getConfigMap('default', 'ttl')).data!.k, 'v1');
    const cm = api.get('configmaps', 'default', 'ttl')!;
    api.registry.update(api.resource('configmaps'), 'default', 'ttl', { ...cm, data: { k: 'v2' } });
    clock.step(DEFAULT_OBJECT_TTL_MS - 1);
    assert.equal((await src.getConfigMap('default', 'ttl')).data!.k, 'v1');
    assert.equal(gets(path) - before, 1);
    clock.step(1);
    assert.equal((await src.getConfigMap('default', 'ttl')).data!.k, 'v2');
    assert.equal(gets(path) - before, 2);
  });

  it('strategy Get reads the API server on every call; concurrent calls share one GET', async () => {
    const src = new ApiObjectSource({ client, clock: new FakeClock(), strategy: 'Get' });
    const path = '/api/v1/namespaces/default/configmaps/cfg';
    const before = gets(path);
    await src.getConfigMap('default', 'cfg');
    await src.getConfigMap('default', 'cfg');
    assert.equal(gets(path) - before, 2);
    await Promise.all([src.getConfigMap('default', 'cfg'), src.getConfigMap('default', 'cfg')]);
    assert.equal(gets(path) - before, 3);
  });

  it('a failed call (not a NotFound) names the object and is not cached', async () => {
    const src = new ApiObjectSource({ client, clock: new FakeClock() });
    api.injectError({ method: 'GET', path: '/configmaps/cfg', count: 1, code: 500 });
    await rejectsWith(src.getConfigMap('default', 'cfg'), 'ERR_VOLUME_OBJECT_FETCH', /^failed to get configmap "default\/cfg": .*500/);
    assert.deepEqual((await src.getConfigMap('default', 'cfg')).data, { 'a.txt': 'one' });
  });

  it('requests a token bound to the pod, for the audience and lifetime asked', async () => {
    const src = new ApiObjectSource({ client, clock: new FakeClock() });
    const pod = api.get('pods', 'default', 'web')!;
    const t0 = Date.now();
    const tok = await src.requestServiceAccountToken('default', 'default', 'vault', 7200, { name: 'web', uid: pod.metadata.uid });
    assert.equal(tok.expirationSeconds, 7200);
    assert.ok(Math.abs(tok.expirationTimestamp - (t0 + 7_200_000)) < 5_000, `expires ${new Date(tok.expirationTimestamp).toISOString()}`);
    const claims = JSON.parse(Buffer.from(tok.token.split('.')[1]!, 'base64url').toString());
    assert.deepEqual(claims.aud, ['vault']);
    assert.equal(claims.sub, 'system:serviceaccount:default:default');
    assert.deepEqual(claims['kubernetes.io'].pod, { name: 'web', uid: pod.metadata.uid });
    const post = api.requests.filter((r) => r.method === 'POST' && r.path === '/api/v1/namespaces/default/serviceaccounts/default/token');
    assert.equal(post.at(-1)?.code, 201);
    // no audience: the API server's own
    const own = await src.requestServiceAccountToken('default', 'default', '', 3600, { name: 'web', uid: pod.metadata.uid });
    assert.deepEqual(JSON.parse(Buffer.from(own.token.split('.')[1]!, 'base64url').toString()).aud, ['https://kubernetes.default.svc.cluster.local']);
  });

  it('a token for a missing service account or pod fails naming the account', async () => {
    const src = new ApiObjectSource({ client, clock: new FakeClock() });
    const pod = api.get('pods', 'default', 'web')!;
    await rejectsWith(src.requestServiceAccountToken('default', 'ghost', '', 3600, { name: 'web', uid: pod.metadata.uid }),
      'ERR_VOLUME_OBJECT_NOT_FOUND', /^failed to fetch token for serviceaccounts "ghost" in namespace "default": .*NotFound/);
    await rejectsWith(src.requestServiceAccountToken('default', 'default', '', 3600, { name: 'gone', uid: 'x' }),
      'ERR_VOLUME_OBJECT_NOT_FOUND', /pods "gone" not found/);
  });
});

describe('StandaloneObjectSource', () => {
  it('fails every read as upstream\'s standalone volume host, naming the object', async () => {
    const src = new StandaloneObjectSource();
    await rejectsWith(src.getConfigMap('kube-system', 'cfg'), 'ERR_VOLUME_OBJECT_STANDALONE', /^configmap "kube-system\/cfg": not supported due to running kubelet in standalone mode$/);
    await rejectsWith(src.getSecret('kube-system', 'sec'), 'ERR_VOLUME_OBJECT_STANDALONE', /^secret "kube-system\/sec": not supported due to running kubelet in standalone mode$/);
    await rejectsWith(src.requestServiceAccountToken('kube-system', 'default', '', 3600, { name: 'p', uid: 'u' }), 'ERR_VOLUME_OBJECT_STANDALONE', /^serviceaccount token "kube-system\/default": not supported/);
  });
});

describe('ApiObjectSource cache bounds', () => {
  it('prune drops entries older than the TTL', async () => {
    const api = await startServer();
    const client = new RestClient(configFor(api), { maxRetries: 0 });
    try {
      api.create('configmaps', 'default', { metadata: { name: 'p' }, data: { k: 'v' } });
      const clock = new FakeClock();
      const src = new ApiObjectSource({ client, clock });
      await src.getConfigMap('default', 'p');
      await src.getSecret('default', 'missing').catch(() => undefined);
      assert.equal(src.cached, 2);
      clock.step(DEFAULT_OBJECT_TTL_MS);
      src.prune();
      assert.equal(src.cached, 0);
    } finally {
      client.close();
      await api.stop();
    }
  });
});
