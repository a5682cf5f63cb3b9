import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { hashContainer } from '../../src/runtime/container-hash.js';
import {
  applyStaticPodDefaults,
  canonicalJSON,
  computeStaticPodUID,
  formatRFC3339Nano,
  generatePodName,
  getPodSource,
  isStaticPod,
  type StaticPodOrigin,
} from '../../src/sources/static-pod.js';

function pod(image = 'nginx:1.25'): Pod {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web' }, spec: { containers: [{ name: 'web', image }] } };
}

const ORIGIN: StaticPodOrigin = { source: 'file', location: '/etc/kubernetes/manifests/web.yaml', nodeName: 'Node1' };

describe('static pod naming and UID', () => {
  it('appends the lower-cased node name', () => {
    assert.equal(generatePodName('web', 'Node1.Example'), 'web-node1.example');
  });

  it('canonical JSON does not depend on key order', () => {
    assert.equal(canonicalJSON({ b: 1, a: { d: [1, { y: 1, x: 2 }], c: undefined } }), canonicalJSON({ a: { d: [1, { x: 2, y: 1 }] }, b: 1 }));
  });

  it('UID is stable for the same content, node and file', () => {
    assert.equal(computeStaticPodUID(pod(), ORIGIN), computeStaticPodUID(pod(), { ...ORIGIN }));
    assert.match(computeStaticPodUID(pod(), ORIGIN), /^[0-9a-f]{32}$/);
  });

  it('UID changes with the content, the node and the file', () => {
    const base = computeStaticPodUID(pod(), ORIGIN);
    assert.notEqual(computeStaticPodUID(pod('nginx:1.26'), ORIGIN), base);
    assert.notEqual(computeStaticPodUID(pod(), { ...ORIGIN, nodeName: 'node2' }), base);
    assert.notEqual(computeStaticPodUID(pod(), { ...ORIGIN, location: '/etc/kubernetes/manifests/web2.yaml' }), base);
    assert.notEqual(computeStaticPodUID(pod(), { source: 'http', location: ORIGIN.location, nodeName: 'Node1' }), base);
  });

  it('an edit the container hash does not cover (command, args, env) still gives a new UID: the pod is replaced', () => {
    // upstream 1.31+ hashes only a container's name and image; other fields of a static pod change
    // only by editing its file, and the content-derived UID makes that edit a new pod
    const edits: ((p: Pod) => void)[] = [
      (p) => (p.spec.containers[0]!.command = ['nginx', '-g', 'daemon off;']),
      (p) => (p.spec.containers[0]!.args = ['--debug']),
      (p) => (p.spec.containers[0]!.env = [{ name: 'A', value: '1' }]),
      (p) => (p.spec.containers[0]!.resources = { limits: { memory: '64Mi' } }),
    ];
    const base = computeStaticPodUID(pod(), ORIGIN);
    for (const edit of edits) {
      const edited = pod();
      edit(edited);
      assert.equal(hashContainer(edited.spec.containers[0]!), hashContainer(pod().spec.containers[0]!), 'the container hash does not see it');
      assert.notEqual(computeStaticPodUID(edited, ORIGIN), base, `UID after ${JSON.stringify(edited.spec.containers[0])}`);
    }
  });

  it('applies the static pod treatment', () => {
    const p = pod();
    applyStaticPodDefaults(p, ORIGIN);
    assert.equal(p.metadata.name, 'web-node1');
    assert.equal(p.metadata.namespace, 'default');
    assert.equal(p.spec.nodeName, 'Node1');
    assert.equal(p.metadata.annotations!['kubernetes.io/config.hash'], p.metadata.uid);
    assert.equal(p.metadata.annotations!['kubernetes.io/config.source'], 'file');
    assert.deepEqual(p.spec.tolerations, [{ operator: 'Exists', effect: 'NoExecute' }]);
    assert.equal(p.status!.phase, 'Pending');
    assert.equal(getPodSource(p), 'file');
    assert.equal(isStaticPod(p), true);
  });

  it('keeps a UID the manifest gives, as upstream', () => {
    const p = pod();
    p.metadata.uid = 'given-uid';
    applyStaticPodDefaults(p, ORIGIN);
    assert.equal(p.metadata.uid, 'given-uid');
    assert.equal(p.metadata.annotations!['kubernetes.io/config.hash'], 'given-uid');
  });

  it('does not duplicate a matching toleration', () => {
    const p = pod();
    p.spec.tolerations = [{ operator: 'Exists', effect: 'NoExecute' }, { key: 'k', operator: 'Exists' }];
    applyStaticPodDefaults(p, ORIGIN);
    assert.equal(p.spec.tolerations.length, 2);
  });

  it('API pods are not static', () => {
    const p = pod();
    p.metadata.annotations = { 'kubernetes.io/config.source': 'api' };
    assert.equal(isStaticPod(p), false);
    assert.equal(isStaticPod(pod()), false);
    assert.equal(getPodSource(pod()), undefined);
  });

  it('formats timestamps like Go RFC3339Nano', () => {
    assert.equal(formatRFC3339Nano(new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 120))), '2024-01-02T03:04:05.12Z');
    assert.equal(formatRFC3339Nano(new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 0))), '2024-01-02T03:04:05Z');
  });
});
