import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../fixtures/test-apiserver/errors.js';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch } from '../fixtures/test-apiserver/patch.js';

describe('test API server patches', () => {
  it('merge patch follows RFC 7386: null deletes, objects merge, arrays replace', () => {
    assert.deepEqual(
      applyMergePatch({ a: 'b', c: { d: 'e', f: 'g' }, l: [1, 2] }, { a: 'z', c: { f: null }, l: [3] }),
      { a: 'z', c: { d: 'e' }, l: [3] },
    );
    assert.deepEqual(applyMergePatch({ a: 1 }, { b: { c: null } }), { a: 1, b: {} });
  });

  it('JSON patch follows RFC 6902, test included, and leaves the input alone', () => {
    const doc = { a: { b: [1, 2, 3] }, k: 'v' };
    const out = applyJsonPatch(doc, [
      { op: 'add', path: '/a/b/1', value: 9 },
      { op: 'add', path: '/a/b/-', value: 4 },
      { op: 'remove', path: '/a/b/0' },
      { op: 'replace', path: '/k', value: 'w' },
      { op: 'copy', from: '/k', path: '/k2' },
      { op: 'move', from: '/k2', path: '/a/x~1y' },
      { op: 'test', path: '/a/b', value: [9, 2, 3, 4] },
    ]);
    assert.deepEqual(out, { a: { b: [9, 2, 3, 4], 'x/y': 'w' }, k: 'w' });
    assert.deepEqual(doc, { a: { b: [1, 2, 3] }, k: 'v' });
    assert.throws(() => applyJsonPatch(doc, [{ op: 'test', path: '/k', value: 'nope' }]), (e: ApiError) => e.httpCode === 422);
    assert.throws(() => applyJsonPatch(doc, [{ op: 'replace', path: '/missing', value: 1 }]), (e: ApiError) => e.httpCode === 422);
    assert.throws(() => applyJsonPatch(doc, { op: 'add' }), (e: ApiError) => e.httpCode === 400);
  });

  it('strategic merge patch merges pod lists by their keys and replaces the others', () => {
    const pod = {
      metadata: { finalizers: ['a'], ownerReferences: [{ uid: 'u1', name: 'rs' }] },
      spec: {
        containers: [{ name: 'c1', image: 'i1', env: [{ name: 'A', value: '1' }], ports: [{ containerPort: 80, protocol: 'TCP' }] }, { name: 'c2', image: 'i2' }],
        tolerations: [{ key: 't1' }],
      },
      status: { conditions: [{ type: 'Ready', status: 'False' }, { type: 'PodScheduled', status: 'True' }], containerStatuses: [{ name: 'c1', ready: false, restartCount: 1 }] },
    };
    const out = applyStrategicMergePatch(pod, {
      metadata: { finalizers: ['b', 'a'] },
      spec: { containers: [{ name: 'c1', env: [{ name: 'B', value: '2' }] }, { name: 'c2', $patch: 'delete' }], tolerations: [{ key: 't2' }] },
      status: { conditions: [{ type: 'Ready', status: 'True' }], containerStatuses: [{ name: 'c1', ready: true }] },
    }, 'Pod');
    assert.deepEqual(out.metadata.finalizers, ['a', 'b']);
    assert.deepEqual(out.spec.containers, [{ name: 'c1', image: 'i1', env: [{ name: 'A', value: '1' }, { name: 'B', value: '2' }], ports: [{ containerPort: 80, protocol: 'TCP' }] }]);
    assert.deepEqual(out.spec.tolerations, [{ key: 't2' }]);
    assert.deepEqual(out.status.conditions, [{ type: 'Ready', status: 'True' }, { type: 'PodScheduled', status: 'True' }]);
    assert.deepEqual(out.status.containerStatuses, [{ name: 'c1', ready: true, restartCount: 1 }]);
    assert.deepEqual(pod.spec.containers.length, 2);
  });

  it('honours $patch replace/delete, $setElementOrder, $deleteFromPrimitiveList and $retainKeys', () => {
    const node = { status: { conditions: [{ type: 'A', status: 'x' }, { type: 'B', status: 'y' }], capacity: { cpu: '1', memory: '1Gi' } }, spec: { podCIDRs: ['10.0.0.0/24', '10.1.0.0/24'] } };
    const out = applyStrategicMergePatch(node, {
      status: { '$setElementOrder/conditions': [{ type: 'B' }, { type: 'A' }], conditions: [{ type: 'B', status: 'z' }], capacity: { $patch: 'replace', pods: '10' } },
      spec: { '$deleteFromPrimitiveList/podCIDRs': ['10.0.0.0/24'] },
    }, 'Node');
    assert.deepEqual(out.status.conditions, [{ type: 'B', status: 'z' }, { type: 'A', status: 'x' }]);
    assert.deepEqual(out.status.capacity, { pods: '10' });
    assert.deepEqual(out.spec.podCIDRs, ['10.1.0.0/24']);
    const replaced = applyStrategicMergePatch(node, { status: { conditions: [{ $patch: 'replace' }, { type: 'C', status: 'n' }] } }, 'Node');
    assert.deepEqual(replaced.status.conditions, [{ type: 'C', status: 'n' }]);
    const retained = applyStrategicMergePatch({ spec: { a: 1, b: 2, c: 3 } }, { spec: { $retainKeys: ['a', 'c'], c: 4 } }, 'Pod');
    assert.deepEqual(retained.spec, { a: 1, c: 4 });
    const gone = applyStrategicMergePatch(node, { status: { $patch: 'delete' } }, 'Node');
    assert.equal(gone.status, undefined);
    assert.throws(() => applyStrategicMergePatch(node, { status: { conditions: [{ status: 'no key' }] } }, 'Node'), (e: ApiError) => e.httpCode === 400);
  });
});
