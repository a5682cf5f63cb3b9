import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManifestError } from '../../src/sources/errors.js';
import { decodePodManifest, decodePodManifests } from '../../src/sources/manifest.js';

const FILE = { source: 'file', location: '/etc/kubernetes/manifests/web.yaml', nodeName: 'node1' } as const;
const URL_ORIGIN = { source: 'http', location: 'http://127.0.0.1:1/pods', nodeName: 'node1' } as const;

const WEB_YAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: nginx:1.25
  volumes:
  - name: conf
    hostPath:
      path: /etc/web
  - name: cm
    configMap: {name: x, defaultMode: 0600}
`;

function decodeError(fn: () => unknown): ManifestError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ManifestError, `expected ManifestError, got ${String(e)}`);
    return e;
  }
  assert.fail('expected the decode to fail');
}

describe('decodePodManifest (file)', () => {
  it('decodes YAML into a defaulted static pod', () => {
    const pod = decodePodManifest(WEB_YAML, FILE);
    assert.equal(pod.metadata.name, 'web-node1');
    assert.equal(pod.metadata.namespace, 'default');
    assert.equal(pod.spec.nodeName, 'node1');
    assert.equal(pod.spec.restartPolicy, 'Always');
    assert.equal(pod.spec.containers[0]!.imagePullPolicy, 'IfNotPresent');
    // YAML 1.1 like upstream: 0600 is octal
    assert.equal(pod.spec.volumes![1]!.configMap!.defaultMode, 0o600);
    assert.match(pod.metadata.uid!, /^[0-9a-f]{32}$/);
  });

  it('decodes JSON', () => {
    const json = JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'j' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } });
    assert.equal(decodePodManifest(json, FILE).metadata.name, 'j-node1');
  });

  it('keeps timestamps as strings, as Go YAML does', () => {
    const pod = decodePodManifest(WEB_YAML.replace('  name: web\n', '  name: web\n  annotations:\n    built: 2024-01-02T03:04:05Z\n'), FILE);
    assert.equal(pod.metadata.annotations!.built, '2024-01-02T03:04:05Z');
  });

  it('names the file on a parse error', () => {
    const e = decodeError(() => decodePodManifest('apiVersion: v1\nkind: [Pod', FILE));
    assert.equal(e.code, 'ManifestInvalid');
    assert.equal(e.source, 'file');
    assert.equal(e.location, FILE.location);
    assert.ok(e.message.startsWith(`${FILE.location}: couldn't parse as YAML or JSON`), e.message);
    assert.ok(!e.message.includes('\n'));
  });

  it('refuses a wrong kind or apiVersion, naming the field', () => {
    let e = decodeError(() => decodePodManifest('apiVersion: apps/v1\nkind: Deployment\n', FILE));
    assert.equal(e.field, 'kind');
    assert.match(e.message, /Deployment/);
    e = decodeError(() => decodePodManifest(WEB_YAML.replace('apiVersion: v1', 'apiVersion: v2'), FILE));
    assert.equal(e.field, 'apiVersion');
    e = decodeError(() => decodePodManifest(WEB_YAML.replace('apiVersion: v1\n', ''), FILE));
    assert.equal(e.field, 'apiVersion');
  });

  it('refuses a PodList in a file, as upstream', () => {
    const e = decodeError(() => decodePodManifest('apiVersion: v1\nkind: PodList\nitems: []\n', FILE));
    assert.equal(e.field, 'kind');
  });

  it('reports validation errors naming the file and the field', () => {
    const e = decodeError(() => decodePodManifest(WEB_YAML.replace('    image: nginx:1.25\n', ''), FILE));
    assert.equal(e.field, 'spec.containers[0].image');
    assert.equal(e.message, `${FILE.location}: invalid pod: spec.containers[0].image: Required value`);
    assert.deepEqual(e.fieldErrors, [{ field: 'spec.containers[0].image', message: 'Required value' }]);
  });

  it('says Required for a nameless pod rather than complaining about "-node1"', () => {
    const e = decodeError(() => decodePodManifest(WEB_YAML.replace('  name: web\n', '  labels: {a: b}\n'), FILE));
    assert.equal(e.field, 'metadata.name');
    assert.match(e.message, /Required value/);
  });

  it('refuses an empty file and a non-object', () => {
    assert.match(decodeError(() => decodePodManifest('', FILE)).message, /empty/);
    assert.match(decodeError(() => decodePodManifest('- a\n- b\n', FILE)).message, /not an object/);
  });
});

describe('decodePodManifests (http)', () => {
  it('accepts a single pod', () => {
    const pods = decodePodManifests(WEB_YAML, URL_ORIGIN);
    assert.equal(pods.length, 1);
    assert.equal(pods[0]!.metadata.annotations!['kubernetes.io/config.source'], 'http');
    // only file-sourced pods get the NoExecute toleration
    assert.equal(pods[0]!.spec.tolerations, undefined);
  });

  it('accepts a PodList', () => {
    const list = {
      apiVersion: 'v1',
      kind: 'PodList',
      items: [
        { metadata: { name: 'a' }, spec: { containers: [{ name: 'c', image: 'x:1' }] } },
        { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'b' }, spec: { containers: [{ name: 'c', image: 'x:1' }] } },
      ],
    };
    const pods = decodePodManifests(JSON.stringify(list), URL_ORIGIN);
    assert.deepEqual(pods.map((p) => p.metadata.name), ['a-node1', 'b-node1']);
    assert.notEqual(pods[0]!.metadata.uid, pods[1]!.metadata.uid);
  });

  it('refuses the whole list when one item is invalid, naming the item', () => {
    const list = {
      apiVersion: 'v1',
      kind: 'PodList',
      items: [
        { metadata: { name: 'a' }, spec: { containers: [{ name: 'c', image: 'x:1' }] } },
        { metadata: { name: 'b' }, spec: { containers: [{ name: 'c' }] } },
      ],
    };
    const e = decodeError(() => decodePodManifests(JSON.stringify(list), URL_ORIGIN));
    assert.equal(e.source, 'http');
    assert.equal(e.field, 'items[1].spec.containers[0].image');
    assert.ok(e.message.startsWith(URL_ORIGIN.location));
  });
});
