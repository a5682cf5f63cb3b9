import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { call, nodeManifest, podManifest, startServer, watch } from './client.js';

const pods = '/api/v1/namespaces/default/pods';
const leases = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases';

function assertStatus(body: any, code: number, reason: string): void {
  assert.equal(body.kind, 'Status', JSON.stringify(body));
  assert.equal(body.apiVersion, 'v1');
  assert.equal(body.status, 'Failure');
  assert.equal(body.code, code);
  assert.equal(body.reason, reason);
  assert.equal(typeof body.message, 'string');
}

describe('test API server: objects', () => {
  let s: TestApiServer;
  before(async () => { s = await startServer(); });
  after(() => s.stop());

  it('answers errors with Status objects: AlreadyExists, NotFound, Invalid, missing namespace', async () => {
    assert.equal((await call(s, 'POST', pods, { body: podManifest('dup') })).code, 201);
    const dup = await call(s, 'POST', pods, { body: podManifest('dup') });
    assert.equal(dup.code, 409);
    assertStatus(dup.body, 409, 'AlreadyExists');
    assert.equal(dup.body.message, 'pods "dup" already exists');
    assert.deepEqual(dup.body.details, { name: 'dup', kind: 'pods' });
    const nf = await call(s, 'GET', `${pods}/nope`);
    assertStatus(nf.body, 404, 'NotFound');
    assert.equal(nf.body.message, 'pods "nope" not found');
    const lnf = await call(s, 'GET', `${leases}/nope`);
    assert.equal(lnf.body.message, 'leases.coordination.k8s.io "nope" not found');
    assert.equal(lnf.body.details.group, 'coordination.k8s.io');
    const bad = await call(s, 'POST', pods, { body: { metadata: { name: 'Bad_Name' }, spec: { containers: [] } } });
    assertStatus(bad.body, 422, 'Invalid');
    assert.match(bad.body.message, /^Pod "Bad_Name" is invalid: \[/);
    assert.deepEqual(bad.body.details.causes.map((c: any) => c.field), ['metadata.name', 'spec.containers']);
    const noNs = await call(s, 'POST', '/api/v1/namespaces/missing/configmaps', { body: { metadata: { name: 'x' } } });
    assertStatus(noNs.body, 404, 'NotFound');
    assert.equal(noNs.body.message, 'namespaces "missing" not found');
    const noPath = await call(s, 'POST', '/api/v1/pods', { body: podManifest('nowhere') });
    assertStatus(noPath.body, 405, 'MethodNotAllowed');
    const gone = await call(s, 'GET', '/api/v1/widgets');
    assertStatus(gone.body, 404, 'NotFound');
  });

  it('conflicts with 409 on a lease update with a stale resourceVersion', async () => {
    const spec = { holderIdentity: 'n1', leaseDurationSeconds: 40, renewTime: '2026-01-01T00:00:00.000000Z' };
    const created = await call(s, 'POST', leases, { body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'n1' }, spec } });
    assert.equal(created.code, 201);
    const lease = created.body;
    const renewed = await call(s, 'PUT', `${leases}/n1`, { body: { ...lease, spec: { ...spec, renewTime: '2026-01-01T00:00:10.000000Z' } } });
    assert.equal(renewed.code, 200);
    assert.ok(Number(renewed.body.metadata.resourceVersion) > Number(lease.metadata.resourceVersion));
    const stale = await call(s, 'PUT', `${leases}/n1`, { body: { ...lease, spec: { ...spec, renewTime: '2026-01-01T00:00:20.000000Z' } } });
    assert.equal(stale.code, 409);
    assertStatus(stale.body, 409, 'Conflict');
    assert.equal(stale.body.message, 'Operation cannot be fulfilled on leases.coordination.k8s.io "n1": the object has been modified; please apply your changes to the latest version and try again');
    const got = await call(s, 'GET', `${leases}/n1`);
    assert.equal(got.body.spec.renewTime, '2026-01-01T00:00:10.000000Z');
    // PUT to a lease that does not exist creates it, as upstream allows for leases.
    const put = await call(s, 'PUT', `${leases}/n2`, { body: { metadata: { name: 'n2' }, spec } });
    assert.equal(put.code, 201);
  });

  it('deletes a bound pod gracefully, then for good on a final delete with the UID precondition', async () => {
    const p = (await call(s, 'POST', pods, { body: { ...podManifest('graceful'), metadata: { name: 'graceful', finalizers: [] } } })).body;
    const w = await watch(s, `${pods}?watch=true&resourceVersion=${p.metadata.resourceVersion}&fieldSelector=metadata.name%3Dgraceful`);
    const d = await call(s, 'DELETE', pods + '/graceful', { body: { gracePeriodSeconds: 20 } });
    assert.equal(d.code, 200);
    assert.equal(d.body.metadata.deletionGracePeriodSeconds, 20);
    assert.equal(Date.parse(d.body.metadata.deletionTimestamp) - Date.parse(d.body.metadata.creationTimestamp) >= 19_000, true);
    assert.equal(d.body.metadata.generation, 2);
    assert.equal((await w.next())?.type, 'MODIFIED');
    // A longer grace period changes nothing; a shorter one moves the deadline.
    const longer = await call(s, 'DELETE', pods + '/graceful?gracePeriodSeconds=60');
    assert.equal(longer.body.metadata.deletionGracePeriodSeconds, 20);
    const shorter = await call(s, 'DELETE', pods + '/graceful', { body: { gracePeriodSeconds: 5 } });
    assert.equal(shorter.body.metadata.deletionGracePeriodSeconds, 5);
    assert.equal((await w.next())?.type, 'MODIFIED');
    const wrong = await call(s, 'DELETE', pods + '/graceful', { body: { gracePeriodSeconds: 0, preconditions: { uid: 'not-the-uid' } } });
    assertStatus(wrong.body, 409, 'Conflict');
    assert.equal(wrong.body.message, `Operation cannot be fulfilled on pods "graceful": Precondition failed: UID in precondition: not-the-uid, UID in object meta: ${p.metadata.uid}`);
    const staleRv = await call(s, 'DELETE', pods + '/graceful', { body: { gracePeriodSeconds: 0, preconditions: { resourceVersion: p.metadata.resourceVersion } } });
    assert.equal(staleRv.code, 409);
    const fin = await call(s, 'DELETE', pods + '/graceful', { body: { gracePeriodSeconds: 0, preconditions: { uid: p.metadata.uid } } });
    assert.equal(fin.code, 200);
    assert.equal((await w.next())?.type, 'DELETED');
    assert.equal((await call(s, 'GET', pods + '/graceful')).code, 404);
    w.close();
  });

  it('fills pod defaults as a default cluster\'s admission does; mirror pods get no service account', async () => {
    const p = (await call(s, 'POST', pods, { body: podManifest('defaults') })).body;
    assert.equal(p.spec.serviceAccountName, 'default');
    assert.deepEqual(p.spec.tolerations.map((t: any) => `${t.key}:${t.effect}:${t.tolerationSeconds}`), ['node.kubernetes.io/not-ready:NoExecute:300', 'node.kubernetes.io/unreachable:NoExecute:300']);
    assert.deepEqual([p.spec.restartPolicy, p.spec.terminationGracePeriodSeconds, p.spec.containers[0].imagePullPolicy, p.status.qosClass], ['Always', 30, 'IfNotPresent', 'BestEffort']);
    const m = podManifest('mirror') as any;
    m.metadata.annotations = { 'kubernetes.io/config.mirror': 'abc' };
    const mirror = (await call(s, 'POST', pods, { body: m })).body;
    assert.equal(mirror.spec.serviceAccountName, undefined);
  });

  it('answers dryRun=All writes without keeping them', async () => {
    const rv = s.store.resourceVersion;
    const c = await call(s, 'POST', pods + '?dryRun=All', { body: podManifest('dry') });
    assert.equal(c.code, 201);
    assert.equal(c.body.metadata.name, 'dry');
    assert.equal((await call(s, 'GET', pods + '/dry')).code, 404);
    await call(s, 'POST', pods, { body: podManifest('dry') });
    const after = s.store.resourceVersion;
    assert.equal(after, rv + 1);
    const p = await call(s, 'PATCH', pods + '/dry?dryRun=All', { body: { metadata: { labels: { a: 'b' } } }, contentType: 'application/merge-patch+json' });
    assert.equal(p.body.metadata.labels.a, 'b');
    const d = await call(s, 'DELETE', pods + '/dry?dryRun=All&gracePeriodSeconds=0');
    assert.equal(d.code, 200);
    const still = await call(s, 'GET', pods + '/dry');
    assert.equal(still.body.metadata.labels?.a, undefined);
    assert.equal(s.store.resourceVersion, after);
    assert.equal((await call(s, 'POST', pods + '?dryRun=Some', { body: podManifest('x') })).code, 400);
  });

  it('keeps an object with finalizers until the last one goes, then removes it', async () => {
    const p = podManifest('held') as any;
    p.metadata.finalizers = ['example.com/hold'];
    const created = (await call(s, 'POST', pods, { body: p })).body;
    const d = await call(s, 'DELETE', pods + '/held?gracePeriodSeconds=30');
    assert.equal(d.body.metadata.deletionGracePeriodSeconds, 30);
    const d0 = await call(s, 'DELETE', pods + '/held?gracePeriodSeconds=0');
    assert.equal(d0.body.metadata.deletionGracePeriodSeconds, 0);
    assert.equal((await call(s, 'GET', pods + '/held')).code, 200);
    const cleared = await call(s, 'PATCH', pods + '/held', { body: [{ op: 'remove', path: '/metadata/finalizers' }], contentType: 'application/json-patch+json' });
    assert.equal(cleared.code, 200);
    assert.equal((await call(s, 'GET', pods + '/held')).code, 404);
    assert.ok(created.metadata.uid);
  });

  it('removes an unbound pod at once, whatever the grace period', async () => {
    await call(s, 'POST', pods, { body: podManifest('unbound', '') });
    const d = await call(s, 'DELETE', pods + '/unbound?gracePeriodSeconds=30');
    assert.equal(d.code, 200);
    assert.equal((await call(s, 'GET', pods + '/unbound')).code, 404);
  });

  it('keeps status to the status subresource and spec to the main resource', async () => {
    const p = (await call(s, 'POST', pods, { body: podManifest('st') })).body;
    assert.equal(p.status.phase, 'Pending');
    const viaMain = await call(s, 'PATCH', pods + '/st', { body: { status: { phase: 'Running' } }, contentType: 'application/merge-patch+json' });
    assert.equal(viaMain.body.status.phase, 'Pending');
    const smp = {
      status: {
        phase: 'Running', podIP: '10.1.0.7',
        conditions: [{ type: 'Ready', status: 'True' }, { type: 'Initialized', status: 'True' }],
        containerStatuses: [{ name: 'c', ready: true, restartCount: 0, image: 'busybox:1.36', imageID: '', state: { running: { startedAt: '2026-01-01T00:00:00Z' } } }],
      },
    };
    const st = await call(s, 'PATCH', pods + '/st/status', { body: smp, contentType: 'application/strategic-merge-patch+json' });
    assert.equal(st.code, 200);
    assert.equal(st.body.status.phase, 'Running');
    // Merge by key: one condition changes, the other stays; the container status merges by name.
    const st2 = await call(s, 'PATCH', pods + '/st/status', {
      body: { status: { $setElementOrder: undefined, conditions: [{ type: 'Ready', status: 'False', reason: 'ContainersNotReady' }], containerStatuses: [{ name: 'c', ready: false }] } },
      contentType: 'application/strategic-merge-patch+json',
    });
    assert.deepEqual(st2.body.status.conditions.map((c: any) => `${c.type}=${c.status}`), ['Ready=False', 'Initialized=True']);
    assert.equal(st2.body.status.containerStatuses[0].ready, false);
    assert.equal(st2.body.status.containerStatuses[0].image, 'busybox:1.36');
    // The status manager's patch carries metadata.uid: a pod recreated under the same name refuses it.
    const otherUid = await call(s, 'PATCH', pods + '/st/status', { body: { metadata: { uid: 'not-this-pod' }, status: { phase: 'Failed' } }, contentType: 'application/strategic-merge-patch+json' });
    assertStatus(otherUid.body, 409, 'Conflict');
    assert.match(otherUid.body.message, /Precondition failed: UID in precondition: not-this-pod/);
    const sameUid = await call(s, 'PATCH', pods + '/st/status', { body: { metadata: { uid: p.metadata.uid }, status: { message: 'ok' } }, contentType: 'application/strategic-merge-patch+json' });
    assert.equal(sameUid.code, 200);
    const specViaStatus = await call(s, 'PATCH', pods + '/st/status', { body: { spec: { nodeName: 'elsewhere' } }, contentType: 'application/merge-patch+json' });
    assert.equal(specViaStatus.body.spec.nodeName, 'n1');
    const got = await call(s, 'GET', pods + '/st/status');
    assert.equal(got.body.status.podIP, '10.1.0.7');
    // The status PUT with a stale resourceVersion conflicts like any update.
    const put = await call(s, 'PUT', pods + '/st/status', { body: { ...p, status: { phase: 'Failed' } } });
    assert.equal(put.code, 409);
    // A pod's spec is immutable beyond the image and a few fields.
    const cur = (await call(s, 'GET', pods + '/st')).body;
    const forbidden = await call(s, 'PUT', pods + '/st', { body: { ...cur, spec: { ...cur.spec, restartPolicy: 'Never' } } });
    assertStatus(forbidden.body, 422, 'Invalid');
    const image = await call(s, 'PUT', pods + '/st', { body: { ...cur, spec: { ...cur.spec, containers: [{ ...cur.spec.containers[0], image: 'busybox:1.37' }] } } });
    assert.equal(image.code, 200);
    assert.equal(image.body.metadata.generation, 2);
  });

  it('patches node status: conditions and addresses merge by type; $patch directives', async () => {
    await call(s, 'POST', '/api/v1/nodes', { body: nodeManifest('n-patch') });
    const r = await call(s, 'PATCH', '/api/v1/nodes/n-patch/status', {
      contentType: 'application/strategic-merge-patch+json',
      body: {
        status: {
          $setElementOrder: undefined,
          '$setElementOrder/conditions': [{ type: 'MemoryPressure' }, { type: 'Ready' }],
          conditions: [{ type: 'MemoryPressure', status: 'False' }, { type: 'Ready', status: 'False', reason: 'KubeletNotReady' }],
          addresses: [{ type: 'InternalIP', address: '10.0.0.9' }],
        },
      },
    });
    assert.equal(r.code, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.status.conditions.map((c: any) => `${c.type}=${c.status}`), ['MemoryPressure=False', 'Ready=False']);
    assert.equal(r.body.status.conditions[1].message, 'kubelet is posting ready status');
    assert.deepEqual(r.body.status.addresses, [{ type: 'InternalIP', address: '10.0.0.9' }, { type: 'Hostname', address: 'n-patch' }]);
    const del = await call(s, 'PATCH', '/api/v1/nodes/n-patch/status', {
      contentType: 'application/strategic-merge-patch+json',
      body: { status: { conditions: [{ type: 'MemoryPressure', $patch: 'delete' }], capacity: { $patch: 'replace', cpu: '4' } } },
    });
    assert.deepEqual(del.body.status.conditions.map((c: any) => c.type), ['Ready']);
    assert.deepEqual(del.body.status.capacity, { cpu: '4' });
  });

  it('applies JSON patch with test, and merge patch; a failed test is 422', async () => {
    await call(s, 'POST', '/api/v1/nodes', { body: nodeManifest('n-json') });
    const ok = await call(s, 'PATCH', '/api/v1/nodes/n-json', {
      contentType: 'application/json-patch+json',
      body: [{ op: 'test', path: '/metadata/name', value: 'n-json' }, { op: 'add', path: '/metadata/labels/role', value: 'x' }, { op: 'add', path: '/spec/taints', value: [{ key: 'k', effect: 'NoSchedule' }] }],
    });
    assert.equal(ok.code, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.metadata.labels.role, 'x');
    const failed = await call(s, 'PATCH', '/api/v1/nodes/n-json', { contentType: 'application/json-patch+json', body: [{ op: 'test', path: '/metadata/labels/role', value: 'y' }, { op: 'remove', path: '/metadata/labels' }] });
    assertStatus(failed.body, 422, 'Invalid');
    assert.equal((await call(s, 'GET', '/api/v1/nodes/n-json')).body.metadata.labels.role, 'x');
    const merge = await call(s, 'PATCH', '/api/v1/nodes/n-json', { contentType: 'application/merge-patch+json', body: { metadata: { labels: { role: null } }, spec: { unschedulable: true } } });
    assert.equal(merge.body.metadata.labels.role, undefined);
    assert.equal(merge.body.spec.unschedulable, true);
    const unsupported = await call(s, 'PATCH', '/api/v1/nodes/n-json', { contentType: 'application/apply-patch+yaml', body: 'x: 1' });
    assertStatus(unsupported.body, 415, 'UnsupportedMediaType');
    const stale = await call(s, 'PATCH', '/api/v1/nodes/n-json', { contentType: 'application/merge-patch+json', body: { metadata: { resourceVersion: '1', labels: { a: 'b' } } } });
    assertStatus(stale.body, 409, 'Conflict');
    // A patch that changes nothing writes nothing: same resourceVersion back.
    const before = (await call(s, 'GET', '/api/v1/nodes/n-json')).body.metadata.resourceVersion;
    const noop = await call(s, 'PATCH', '/api/v1/nodes/n-json', { contentType: 'application/merge-patch+json', body: { spec: { unschedulable: true } } });
    assert.equal(noop.body.metadata.resourceVersion, before);
  });

  it('lists and patches events; describe-style field selectors on involvedObject', async () => {
    const ev = (name: string, obj: string, reason: string) => ({
      metadata: { name }, involvedObject: { kind: 'Pod', namespace: 'default', name: obj, uid: `uid-${obj}` },
      reason, message: `${reason} ${obj}`, type: 'Normal', count: 1, source: { component: 'kubelet', host: 'n1' },
      firstTimestamp: '2026-01-01T00:00:00Z', lastTimestamp: '2026-01-01T00:00:00Z',
    });
    await call(s, 'POST', '/api/v1/namespaces/default/events', { body: ev('e1', 'a', 'Pulled') });
    await call(s, 'POST', '/api/v1/namespaces/default/events', { body: ev('e2', 'b', 'Started') });
    const p = await call(s, 'PATCH', '/api/v1/namespaces/default/events/e1', { contentType: 'application/strategic-merge-patch+json', body: { count: 2, lastTimestamp: '2026-01-01T00:01:00Z' } });
    assert.equal(p.body.count, 2);
    const sel = encodeURIComponent('involvedObject.name=a,involvedObject.namespace=default,involvedObject.uid=uid-a');
    const l = await call(s, 'GET', `/api/v1/namespaces/default/events?fieldSelector=${sel}&limit=500`);
    assert.deepEqual(l.body.items.map((e: any) => e.metadata.name), ['e1']);
    const bySource = await call(s, 'GET', `/api/v1/events?fieldSelector=${encodeURIComponent('source=kubelet,reason=Started')}`);
    assert.deepEqual(bySource.body.items.map((e: any) => e.metadata.name), ['e2']);
  });

  it('serves configmaps, secrets and service accounts, and TokenRequest tokens that authenticate', async () => {
    await call(s, 'POST', '/api/v1/namespaces/default/secrets', { body: { metadata: { name: 'sec' }, stringData: { password: 'hunter2' } } });
    const sec = await call(s, 'GET', '/api/v1/namespaces/default/secrets/sec');
    assert.equal(sec.body.type, 'Opaque');
    assert.equal(Buffer.from(sec.body.data.password, 'base64').toString(), 'hunter2');
    const tr = await call(s, 'POST', '/api/v1/namespaces/default/serviceaccounts/default/token', {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: ['api'], expirationSeconds: 3600 } },
    });
    assert.equal(tr.code, 201, JSON.stringify(tr.body));
    assert.equal(tr.body.kind, 'TokenRequest');
    assert.match(tr.body.status.token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.ok(Date.parse(tr.body.status.expirationTimestamp) > Date.now() + 3500_000);
    const asSa = await call(s, 'GET', '/api/v1/namespaces/default/configmaps', { token: tr.body.status.token });
    assert.equal(asSa.code, 200);
    assert.equal(s.requests.at(-1)?.user, 'system:serviceaccount:default:default');
    const short = await call(s, 'POST', '/api/v1/namespaces/default/serviceaccounts/default/token', { body: { spec: { expirationSeconds: 60 } } });
    assert.equal(short.code, 422);
    const noSa = await call(s, 'POST', '/api/v1/namespaces/default/serviceaccounts/ghost/token', { body: { spec: {} } });
    assert.equal(noSa.code, 404);
  });

  it('has the kubernetes service and gives new services a cluster IP', async () => {
    const k = await call(s, 'GET', '/api/v1/namespaces/default/services/kubernetes');
    assert.deepEqual([k.body.spec.clusterIP, k.body.spec.ports[0].port], ['10.96.0.1', 443]);
    const svc = await call(s, 'POST', '/api/v1/namespaces/default/services', { body: { metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80 }] } } });
    assert.equal(svc.code, 201);
    assert.equal(svc.body.spec.clusterIP, '10.96.0.2');
    assert.deepEqual(svc.body.spec.ports, [{ port: 80, protocol: 'TCP', targetPort: 80 }]);
    assert.equal(svc.body.spec.type, 'ClusterIP');
  });

  it('serves discovery with verbs, scope, short names and kinds', async () => {
    const core = await call(s, 'GET', '/api/v1');
    const podsRes = core.body.resources.find((r: any) => r.name === 'pods');
    assert.deepEqual([podsRes.kind, podsRes.namespaced, podsRes.singularName, podsRes.shortNames], ['Pod', true, 'pod', ['po']]);
    assert.ok(podsRes.verbs.includes('watch'));
    assert.ok(core.body.resources.some((r: any) => r.name === 'pods/status' && r.verbs.includes('patch')));
    assert.ok(core.body.resources.some((r: any) => r.name === 'serviceaccounts/token' && r.kind === 'TokenRequest'));
    const nodesRes = core.body.resources.find((r: any) => r.name === 'nodes');
    assert.equal(nodesRes.namespaced, false);
    const groups = await call(s, 'GET', '/apis');
    assert.deepEqual(groups.body.groups.map((g: any) => g.name), ['node.k8s.io', 'coordination.k8s.io', 'certificates.k8s.io']);
    const nodeGroup = await call(s, 'GET', '/apis/node.k8s.io/v1');
    assert.deepEqual(nodeGroup.body.resources.map((r: any) => [r.name, r.kind, r.namespaced]), [['runtimeclasses', 'RuntimeClass', false]]);
    const coord = await call(s, 'GET', '/apis/coordination.k8s.io/v1');
    assert.equal(coord.body.resources[0].kind, 'Lease');
    assert.equal((await call(s, 'GET', '/version')).body.major, '1');
    const proto = await call(s, 'GET', '/api/v1/nodes', { accept: 'application/vnd.kubernetes.protobuf' });
    assert.equal(proto.code, 406);
  });
});
