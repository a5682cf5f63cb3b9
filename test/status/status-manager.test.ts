// The status manager reporting to the test API server double (fake clock): patches only on
// change, batched (or not), versioned, retried on 409, never backwards, a static pod's status
// on its mirror pod, the final delete with grace 0 and the UID precondition, and an outage of
// ten minutes that loses nothing.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Pod, PodStatus } from '../../src/api/types.js';
import { RestClient } from '../../src/client/rest.js';
import { StatusManager, omitEmpty, statusDiff } from '../../src/status/status-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, podManifest, startServer } from '../test-apiserver/client.js';
import { quietLogger, settle, until } from '../client/drive.js';

const running = (ip = '10.1.0.5'): PodStatus => ({ phase: 'Running', podIP: ip, podIPs: [{ ip }], conditions: [{ type: 'Ready', status: 'True' }] });
const pending: PodStatus = { phase: 'Pending', conditions: [{ type: 'Ready', status: 'False', reason: 'ContainersNotReady' }] };

describe('status manager against the test API server (fake clock)', () => {
  let api: TestApiServer;
  let clock: FakeClock;
  let client: RestClient;
  let pods: Map<string, Pod>;
  let mirrors: Map<string, Pod>;

  const patches = () => api.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith('/status'));
  const apiPod = (name: string) => api.get('pods', 'default', name) as Pod | undefined;
  const known = (name: string): Pod => {
    const p = structuredClone(apiPod(name)!);
    pods.set(p.metadata.uid!, p);
    return p;
  };
  const manager = (batchDelayMs = 500) => new StatusManager({
    client, clock, log: quietLogger(), batchDelayMs,
    getPod: (uid) => pods.get(uid),
    isStatic: (p) => p.metadata.annotations?.['kubernetes.io/config.source'] === 'file',
    mirrorPodOf: (p) => mirrors.get(p.metadata.name!),
  });

  beforeEach(async () => {
    clock = new FakeClock();
    api = await startServer({ clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock, qps: 0 });
    pods = new Map();
    mirrors = new Map();
    api.create('pods', 'default', podManifest('a', 'n1'));
  });

  afterEach(async () => {
    client.close();
    await api.stop();
  });

  it('patches only when the status changed; each change bumps the version once', async () => {
    const sm = manager();
    const pod = known('a');
    sm.setPodStatus(pod, pending);
    sm.setPodStatus(pod, structuredClone(pending));
    assert.deepEqual(sm.versions(pod.metadata.uid!), { version: 1, synced: 0 });
    await until(clock, 'the patch', () => apiPod('a')!.status?.conditions?.[0]?.reason === 'ContainersNotReady');
    assert.equal(patches().length, 1);
    sm.setPodStatus(pod, structuredClone(pending));
    clock.step(5_000);
    await settle();
    assert.equal(patches().length, 1, 'an unchanged status sends nothing');
    const r = patches()[0]!;
    assert.equal(r.contentType, 'application/merge-patch+json');
    assert.deepEqual(sm.versions(pod.metadata.uid!), { version: 1, synced: 1 });
    sm.stop();
  });

  it('batches: changes within the batch delay make one patch; with batching off each change is one', async () => {
    const sm = manager(500);
    const pod = known('a');
    sm.setPodStatus(pod, pending);
    sm.setPodStatus(pod, running('10.1.0.1'));
    sm.setPodStatus(pod, running('10.1.0.2'));
    await until(clock, 'the batch', () => apiPod('a')!.status?.podIP === '10.1.0.2');
    assert.equal(patches().length, 1);

    const off = manager(0);
    api.create('pods', 'default', podManifest('b', 'n1'));
    const b = known('b');
    off.setPodStatus(b, pending);
    await until(clock, 'b pending', () => apiPod('b')!.status?.conditions !== undefined, 0);
    off.setPodStatus(b, running('10.1.0.1'));
    await until(clock, 'b running', () => apiPod('b')!.status?.podIP === '10.1.0.1', 0);
    off.setPodStatus(b, running('10.1.0.2'));
    await until(clock, 'b moved', () => apiPod('b')!.status?.podIP === '10.1.0.2', 0);
    assert.equal(patches().filter((p) => p.path.includes('/pods/b/')).length, 3);
    sm.stop();
    off.stop();
  });

  it('retries a 409 after reading the pod again, and the API ends with the latest status', async () => {
    const sm = manager();
    const pod = known('a');
    api.injectError({ method: 'PATCH', path: '/pods/a/status', count: 1, code: 409 });
    sm.setPodStatus(pod, running());
    await until(clock, 'the retried patch', () => apiPod('a')!.status?.phase === 'Running');
    assert.equal(sm.stats.conflicts, 1);
    assert.ok(api.requests.some((r) => r.method === 'GET' && r.path === '/api/v1/namespaces/default/pods/a'), 'read the pod after the conflict');
    assert.equal(patches().length, 2);
    sm.stop();
  });

  it('a pod replaced under the same name (another UID) is not patched with the old pod\'s status', async () => {
    const sm = manager();
    const pod = known('a');
    api.registry.delete(api.resource('pods'), 'default', 'a', { gracePeriodSeconds: 0 });
    api.create('pods', 'default', podManifest('a', 'n1'));
    sm.setPodStatus(pod, running());
    await until(clock, 'the dropped update', () => sm.versions(pod.metadata.uid!)?.synced === 1);
    assert.equal(apiPod('a')!.status?.phase, 'Pending');
    assert.notEqual(apiPod('a')!.metadata.uid, pod.metadata.uid);
    sm.stop();
  });

  it('never moves a terminal phase back', async () => {
    const sm = manager();
    const pod = known('a');
    sm.setPodStatus(pod, { phase: 'Failed', reason: 'OutOfpods', message: 'Pod was rejected: x' });
    sm.setPodStatus(pod, running());
    assert.equal(sm.getPodStatus(pod.metadata.uid!)!.phase, 'Failed');
    await until(clock, 'the patch', () => apiPod('a')!.status?.phase === 'Failed');
    // the API's copy counts too: a pod the API has Failed is not reported Running by a fresh manager
    const fresh = manager();
    pods.set(pod.metadata.uid!, structuredClone(apiPod('a')!));
    fresh.setPodStatus(pod, running());
    assert.equal(fresh.getPodStatus(pod.metadata.uid!)!.phase, 'Failed');
    sm.stop();
    fresh.stop();
  });

  it('keeps the first terminal phase with its reason and message (Failed/Evicted never becomes Succeeded)', () => {
    const sm = manager();
    const pod = known('a');
    sm.setPodStatus(pod, { phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory. ' });
    sm.setPodStatus(pod, { phase: 'Succeeded', conditions: [{ type: 'Ready', status: 'False', reason: 'PodCompleted' }] });
    const s = sm.getPodStatus(pod.metadata.uid!)!;
    assert.deepEqual([s.phase, s.reason, s.message], ['Failed', 'Evicted', 'The node was low on resource: memory. ']);
    sm.setPodStatus(pod, running());
    assert.deepEqual([sm.getPodStatus(pod.metadata.uid!)!.phase, sm.getPodStatus(pod.metadata.uid!)!.reason], ['Failed', 'Evicted']);
    sm.stop();
  });

  it('reports a static pod\'s status on its mirror pod (the mirror\'s UID as the precondition)', async () => {
    const sm = manager();
    const mirror = api.create('pods', 'default', { ...podManifest('web-n1', 'n1'), metadata: { name: 'web-n1', annotations: { 'kubernetes.io/config.mirror': 'h1' } } }) as Pod;
    const staticPod: Pod = { metadata: { uid: 'h1', name: 'web-n1', namespace: 'default', annotations: { 'kubernetes.io/config.source': 'file', 'kubernetes.io/config.hash': 'h1' } }, spec: { containers: [{ name: 'c', image: 'x' }] }, status: { phase: 'Pending' } };
    pods.set('h1', staticPod);
    sm.setPodStatus(staticPod, running());
    clock.step(1000);
    await settle();
    assert.equal(patches().length, 0, 'no mirror pod known yet: nothing to patch');
    mirrors.set('web-n1', mirror);
    sm.setPodStatus(staticPod, running('10.1.0.9'));
    await until(clock, 'the mirror\'s status', () => apiPod('web-n1')!.status?.podIP === '10.1.0.9');
    sm.stop();
  });

  it('deletes a terminated pod deleted in the API: last status first, then grace 0 with the UID precondition', async () => {
    const sm = manager();
    api.registry.delete(api.resource('pods'), 'default', 'a', { gracePeriodSeconds: 30 });
    const pod = known('a');
    assert.ok(pod.metadata.deletionTimestamp);
    sm.setPodStatus(pod, { phase: 'Succeeded' });
    sm.podTerminated(pod);
    sm.deletePodStatus(pod.metadata.uid!);
    await until(clock, 'the final delete', () => !apiPod('a'));
    const del = api.requests.filter((r) => r.method === 'DELETE');
    assert.equal(del.length, 1);
    const order = api.requests.filter((r) => r.method !== 'GET').map((r) => r.method);
    assert.deepEqual(order, ['PATCH', 'DELETE'], 'the status goes first');
    sm.stop();
  });

  it('the final delete refuses to delete another pod of the same name (UID precondition)', async () => {
    const sm = manager(0);
    api.registry.delete(api.resource('pods'), 'default', 'a', { gracePeriodSeconds: 30 });
    const pod = known('a');
    api.registry.delete(api.resource('pods'), 'default', 'a', { gracePeriodSeconds: 0 });
    const replacement = api.create('pods', 'default', podManifest('a', 'n1'));
    sm.podTerminated(pod);
    await until(clock, 'the refused delete', () => api.requests.some((r) => r.method === 'DELETE' && r.code === 409), 0);
    await settle();
    assert.equal(apiPod('a')!.metadata.uid, replacement.metadata.uid);
    sm.stop();
  });

  it('reconciles: a status another writer changed in the API is sent again at the next sync period; an equal one is not', async () => {
    // batching off and the clock held still until the first patch is in: no reconcile pass can come first
    const sm = manager(0);
    const pod = known('a');
    sm.setPodStatus(pod, running());
    await until(clock, 'the first patch', () => apiPod('a')!.status?.phase === 'Running' && sm.versions(pod.metadata.uid!)?.synced === 1, 0);
    // the pod manager's copy follows the API (the watch's RECONCILE does it in the kubelet)
    pods.set(pod.metadata.uid!, structuredClone(apiPod('a')!));
    clock.step(11_000);
    await settle(3);
    assert.equal(patches().length, 1, 'the API has what the kubelet has: nothing to reconcile');
    assert.equal(sm.stats.reconciles, 0);
    // another writer overwrites the status; the watch brings it to the pod manager
    const cur = apiPod('a')!;
    api.registry.update(api.resource('pods'), 'default', 'a', { ...cur, status: { phase: 'Pending', podIP: '10.9.9.9' } }, 'status');
    pods.set(pod.metadata.uid!, structuredClone(apiPod('a')!));
    await until(clock, 'the reconciled status', () => apiPod('a')!.status?.phase === 'Running' && apiPod('a')!.status?.podIP === '10.1.0.5', 1000);
    assert.equal(sm.stats.reconciles, 1);
    assert.equal(patches().length, 2);
    sm.stop();
  });

  it('ten minutes without the API server lose nothing: the latest status arrives when it is back', async () => {
    const sm = manager();
    const pod = known('a');
    await api.stop();
    sm.setPodStatus(pod, pending);
    for (let i = 0; i < 60; i++) {
      clock.step(10_000);
      await settle(3);
      if (i === 30) sm.setPodStatus(pod, running('10.1.0.7'));
    }
    assert.equal(apiPod('a')!.status?.phase, 'Pending');
    assert.ok(sm.stats.failures > 0 && sm.stats.failures < 80, `retries are backed off: ${sm.stats.failures}`);
    await api.start();
    await until(clock, 'the status after the outage', () => apiPod('a')!.status?.podIP === '10.1.0.7', 1000);
    sm.stop();
  });
});

describe('omitEmpty (reconcile\'s comparison)', () => {
  it('takes fields the API server leaves out (empty, zero, false, null) for equal, and a real change for a change', () => {
    const ours = { phase: 'Running', message: '', conditions: [{ type: 'Ready', status: 'True', lastProbeTime: null }], containerStatuses: [{ name: 'c', restartCount: 0, ready: true, lastState: {} }] };
    const api = { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], containerStatuses: [{ name: 'c', ready: true }] };
    assert.deepEqual(omitEmpty(ours), omitEmpty(api));
    assert.notDeepEqual(omitEmpty(ours), omitEmpty({ ...api, phase: 'Pending' }));
    assert.notDeepEqual(omitEmpty(ours), omitEmpty({ ...api, containerStatuses: [{ name: 'c', ready: false, restartCount: 1 }] }));
  });
});

describe('statusDiff', () => {
  it('sends what changed, null for what went away, nothing when equal', () => {
    assert.equal(statusDiff({ phase: 'Running' }, { phase: 'Running' }), undefined);
    assert.deepEqual(statusDiff({ phase: 'Pending', reason: 'x' }, { phase: 'Running' }), { phase: 'Running', reason: null });
    // qosClass is the API server's: never removed by the kubelet
    assert.deepEqual(statusDiff({ phase: 'Pending', qosClass: 'BestEffort' }, { phase: 'Running' }), { phase: 'Running' });
  });
});

it('jsonEqual judges statuses as isDeepStrictEqual does', async () => {
  const { jsonEqual } = await import('../../src/status/status-manager.js');
  const { isDeepStrictEqual } = await import('node:util');
  const base = { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: 't' }], containerStatuses: [{ name: 'a', ready: true, restartCount: 0, state: { running: { startedAt: 't' } } }] };
  const cases: unknown[] = [
    base,
    structuredClone(base),
    { ...base, phase: 'Pending' },
    { ...base, message: undefined },
    { ...base, conditions: [] },
    { ...base, containerStatuses: [{ ...base.containerStatuses[0], restartCount: 1 }] },
    { ...base, containerStatuses: [{ ...base.containerStatuses[0], state: { running: {} } }] },
    { ...base, podIPs: [{ ip: '10.0.0.1' }] },
    { ...base, conditions: { 0: base.conditions[0], length: 1 } },
    { phase: 'Running', extra: NaN },
    { phase: 'Running', extra: NaN },
    { phase: 'Running', extra: -0 },
    { phase: 'Running', extra: 0 },
    null,
    'Running',
  ];
  for (const a of cases) for (const b of cases) assert.equal(jsonEqual(a, b), isDeepStrictEqual(a, b), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
});
