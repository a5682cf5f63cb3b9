// ConfigMaps and Secrets for env and envFrom from the test API server double, under each
// configMapAndSecretChangeDetectionStrategy: Watch (a watch per object, changes seen without a
// GET, stopped with the last pod), Cache (TTL) and Get (every sync).

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { RestClient } from '../../src/client/rest.js';
import { ManagedObjectSource, ObjectManager, referencedObjects, type ChangeDetectionStrategy } from '../../src/kubelet/configmap-secret.js';
import { ApiObjectSource, VolumeObjectError } from '../../src/volumemanager/object-source.js';
import { makeEnvironment } from '../../src/runtime/env.js';
import { FakeClock } from '../../src/util/clock.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, startServer } from '../test-apiserver/client.js';
import { quietLogger, until } from '../client/drive.js';

function podUsing(uid: string): Pod {
  return {
    metadata: { uid, name: `p-${uid}`, namespace: 'default' },
    spec: {
      containers: [{
        name: 'c', image: 'x',
        envFrom: [{ configMapRef: { name: 'cfg' }, prefix: 'CFG_' }],
        env: [{ name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'sec', key: 'password' } } }],
      }],
    },
  };
}

describe('ConfigMaps and Secrets from the API', () => {
  let api: TestApiServer;
  let clock: FakeClock;
  let client: RestClient;
  let managers: ObjectManager[];

  const gets = (kind: string) => api.requests.filter((r) => r.method === 'GET' && !r.watch && r.path.includes(`/${kind}`)).length;
  const manager = (strategy: ChangeDetectionStrategy) => {
    const m = new ObjectManager({ client, clock, log: quietLogger(), strategy, watchTimeoutSeconds: () => 300 });
    managers.push(m);
    return m;
  };
  const env = (m: ObjectManager, pod: Pod) => Object.fromEntries(makeEnvironment(pod, pod.spec.containers[0]!, {
    nodeName: 'n1', hostIPs: [], podIPs: [], getConfigMap: m.lookup('configmaps'), getSecret: m.lookup('secrets'),
  }).envs.map((e) => [e.key, e.value]));

  beforeEach(async () => {
    clock = new FakeClock();
    api = await startServer({ clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock, qps: 0 });
    managers = [];
    api.create('configmaps', 'default', { metadata: { name: 'cfg' }, data: { MODE: 'fast' } });
    api.create('secrets', 'default', { metadata: { name: 'sec' }, data: { password: Buffer.from('s3cret').toString('base64') } });
  });

  afterEach(async () => {
    for (const m of managers) m.stop();
    client.close();
    await api.stop();
  });

  it('finds the references of env and envFrom', () => {
    const r = referencedObjects(podUsing('a'));
    assert.deepEqual([...r.configmaps], ['cfg']);
    assert.deepEqual([...r.secrets], ['sec']);
  });

  it('Watch: one watch per object; values (secrets decoded) and later changes without another GET; stopped with the last pod', async () => {
    const m = manager('Watch');
    const a = podUsing('a');
    await m.prefetch(a);
    assert.deepEqual(env(m, a), { CFG_MODE: 'fast', PASSWORD: 's3cret' });
    await m.prefetch(podUsing('b'));
    assert.deepEqual(m.watched().sort(), ['configmaps/default/cfg', 'secrets/default/sec']);
    const listed = gets('configmaps');
    assert.equal(listed, 1, 'one list for two pods');
    await until(clock, 'the watch', () => api.openWatches === 2, 0);
    const cur = api.get('configmaps', 'default', 'cfg')!;
    api.registry.update(api.resource('configmaps'), 'default', 'cfg', { ...cur, data: { MODE: 'safe' } });
    await until(clock, 'the change', () => env(m, a).CFG_MODE === 'safe', 0);
    assert.equal(gets('configmaps'), listed, 'seen through the watch');
    m.unregisterPod('a');
    assert.equal(m.watched().length, 2, 'pod b still refers to them');
    m.unregisterPod('b');
    assert.deepEqual(m.watched(), []);
    await until(clock, 'the watches closed', () => api.openWatches === 0, 0);
  });

  it('Watch: a missing ConfigMap reads as not found (the container fails with upstream\'s message)', async () => {
    const m = manager('Watch');
    const p = podUsing('a');
    p.spec.containers[0]!.envFrom = [{ configMapRef: { name: 'absent' } }];
    await m.prefetch(p);
    assert.throws(() => env(m, p), /configmap "absent" not found/);
  });

  it('Get: every sync reads again', async () => {
    const m = manager('Get');
    const a = podUsing('a');
    await m.prefetch(a);
    await m.prefetch(a);
    assert.equal(gets('configmaps'), 2);
    assert.deepEqual(env(m, a), { CFG_MODE: 'fast', PASSWORD: 's3cret' });
  });

  it('Cache: read once per TTL (one minute)', async () => {
    const m = manager('Cache');
    const a = podUsing('a');
    await m.prefetch(a);
    clock.step(30_000);
    await m.prefetch(a);
    assert.equal(gets('configmaps'), 1);
    const cur = api.get('configmaps', 'default', 'cfg')!;
    api.registry.update(api.resource('configmaps'), 'default', 'cfg', { ...cur, data: { MODE: 'safe' } });
    clock.step(31_000);
    await m.prefetch(a);
    assert.equal(gets('configmaps'), 2);
    assert.equal(env(m, a).CFG_MODE, 'safe');
  });

  it('finds the references of configMap, secret and projected volumes', () => {
    const p = podUsing('a');
    p.spec.volumes = [
      { name: 'v1', configMap: { name: 'vol-cfg' } },
      { name: 'v2', secret: { secretName: 'vol-sec' } },
      { name: 'v3', projected: { sources: [{ configMap: { name: 'proj-cfg' } }, { secret: { name: 'proj-sec' } }, { downwardAPI: { items: [] } }] } },
    ] as never;
    const r = referencedObjects(p);
    assert.deepEqual([...r.configmaps].sort(), ['cfg', 'proj-cfg', 'vol-cfg']);
    assert.deepEqual([...r.secrets].sort(), ['proj-sec', 'sec', 'vol-sec']);
  });

  it('Watch: volumes read the watched copy (secret data as on the wire), see changes without a GET, and name a missing object', async () => {
    const m = manager('Watch');
    const direct = new ApiObjectSource({ client, clock, strategy: 'Watch' });
    const src = new ManagedObjectSource(m, direct);
    const p = podUsing('a');
    p.spec.volumes = [{ name: 'v', configMap: { name: 'vcfg' } }, { name: 'gone', configMap: { name: 'absent' } }] as never;
    api.create('configmaps', 'default', { metadata: { name: 'vcfg' }, data: { k: 'one' } });
    await m.prefetch(p);
    const listed = gets('configmaps');
    assert.deepEqual((await src.getConfigMap('default', 'vcfg')).data, { k: 'one' });
    assert.equal((await src.getSecret('default', 'sec')).data?.password, Buffer.from('s3cret').toString('base64'));
    await assert.rejects(src.getConfigMap('default', 'absent'), (e: unknown) => e instanceof VolumeObjectError && e.notFound && /configmap "absent" not found/.test(e.message));
    await until(clock, 'the watches', () => api.openWatches === 4, 0);
    const cur = api.get('configmaps', 'default', 'vcfg')!;
    api.registry.update(api.resource('configmaps'), 'default', 'vcfg', { ...cur, data: { k: 'two' } });
    await until(clock, 'the change', () => m.object('configmaps', 'default', 'vcfg')?.obj?.data?.k === 'two', 0);
    assert.equal((await src.getConfigMap('default', 'vcfg')).data?.k, 'two');
    assert.equal(gets('configmaps'), listed, 'volumes read through the watch, no GET');
    // an object no registered pod refers to is read directly
    api.create('configmaps', 'default', { metadata: { name: 'other' }, data: { x: 'y' } });
    assert.deepEqual((await src.getConfigMap('default', 'other')).data, { x: 'y' });
    assert.equal(gets('configmaps'), listed + 1);
  });
});
