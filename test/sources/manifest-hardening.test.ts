// Manifests that must not reach a path, a cgroup or a security setting: identifiers that are not
// one safe name, and fields of the wrong type. Each case is refused naming the file and field.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManifestError } from '../../src/sources/errors.js';
import { decodePodManifest, decodePodManifests, MaxManifestBytes, MaxManifestDepth, MaxYAMLStructure, parseManifest } from '../../src/sources/manifest.js';
import { KubeletError } from '../../src/util/errors.js';

const FILE = { source: 'file', location: '/etc/kubernetes/manifests/web.yaml', nodeName: 'node1' } as const;
const URL_ORIGIN = { source: 'http', location: 'http://127.0.0.1:1/pods', nodeName: 'node1' } as const;

function yamlPod(opts: { uid?: string; extraContainer?: string; spec?: string; namespace?: string } = {}): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: web
${opts.uid !== undefined ? `  uid: ${JSON.stringify(opts.uid)}\n` : ''}${opts.namespace !== undefined ? `  namespace: ${JSON.stringify(opts.namespace)}\n` : ''}spec:
${opts.spec ?? ''}  containers:
  - name: web
    image: nginx:1.25
${opts.extraContainer ?? ''}`;
}

function decodeError(fn: () => unknown): ManifestError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ManifestError, `expected ManifestError, got ${String(e)}`);
    assert.ok(e instanceof KubeletError);
    return e;
  }
  assert.fail('expected the decode to fail');
}

describe('identifiers from a manifest', () => {
  it('a UID that climbs out of the pods directory is refused naming the file and metadata.uid', () => {
    for (const uid of ['../../victim', '../../../..', '..', 'a/b', '/etc', 'a_b', 'x'.repeat(129)]) {
      const e = decodeError(() => decodePodManifest(yamlPod({ uid }), FILE));
      assert.equal(e.field, 'metadata.uid', uid);
      assert.ok(e.message.startsWith(`${FILE.location}: invalid pod: metadata.uid: Invalid value: ${JSON.stringify(uid)}`), e.message);
    }
  });

  it('keeps a given UID that is a UUID or a content hash, as upstream', () => {
    const uuid = '6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30';
    assert.equal(decodePodManifest(yamlPod({ uid: uuid }), FILE).metadata.uid, uuid);
    assert.equal(decodePodManifest(yamlPod({ uid: 'd41d8cd98f00b204e9800998ecf8427e' }), FILE).metadata.uid, 'd41d8cd98f00b204e9800998ecf8427e');
  });

  it('the URL source refuses a bad UID in a PodList item, naming the item', () => {
    const list = {
      apiVersion: 'v1',
      kind: 'PodList',
      items: [
        { metadata: { name: 'a' }, spec: { containers: [{ name: 'c', image: 'x:1' }] } },
        { metadata: { name: 'b', uid: '../../victim' }, spec: { containers: [{ name: 'c', image: 'x:1' }] } },
      ],
    };
    const e = decodeError(() => decodePodManifests(JSON.stringify(list), URL_ORIGIN));
    assert.equal(e.field, 'items[1].metadata.uid');
    assert.ok(e.message.startsWith(URL_ORIGIN.location));
  });

  it('namespaces and names with path characters are refused', () => {
    assert.equal(decodeError(() => decodePodManifest(yamlPod({ namespace: '../etc' }), FILE)).field, 'metadata.namespace');
    assert.equal(decodeError(() => decodePodManifest(yamlPod({ extraContainer: '  - name: ../x\n    image: busybox\n' }), FILE)).field, 'spec.containers[1].name');
  });

  it('a pod whose log directory name could not be a file name is refused', () => {
    const name = `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}`;
    const e = decodeError(() => decodePodManifest(yamlPod().replace('name: web\n', `name: ${name}\n`), { ...FILE, nodeName: 'n'.repeat(63) }));
    assert.equal(e.field, 'metadata.name');
    assert.match(e.message, /pod log directory name .* bytes, more than the 255/);
  });
});

describe('fields of the wrong type', () => {
  it('runAsNonRoot: "true" (a string) is refused, not read as unset', () => {
    const e = decodeError(() => decodePodManifest(yamlPod({ extraContainer: '    securityContext:\n      runAsNonRoot: "true"\n' }), FILE));
    assert.equal(e.field, 'spec.containers[0].securityContext.runAsNonRoot');
    assert.equal(e.message, `${FILE.location}: invalid pod: spec.containers[0].securityContext.runAsNonRoot: expected boolean, got string "true"`);
  });

  it('allowPrivilegeEscalation: "false" is refused', () => {
    const e = decodeError(() => decodePodManifest(yamlPod({ extraContainer: '    securityContext:\n      allowPrivilegeEscalation: "false"\n' }), FILE));
    assert.equal(e.field, 'spec.containers[0].securityContext.allowPrivilegeEscalation');
    assert.match(e.message, /expected boolean, got string "false"/);
  });

  it('YAML 1.1 booleans (yes/no, unquoted) still read as booleans, as upstream', () => {
    const pod = decodePodManifest(yamlPod({ extraContainer: '    securityContext:\n      runAsNonRoot: yes\n      allowPrivilegeEscalation: no\n' }), FILE);
    assert.equal(pod.spec.containers[0]!.securityContext!.runAsNonRoot, true);
    assert.equal(pod.spec.containers[0]!.securityContext!.allowPrivilegeEscalation, false);
  });

  it('terminationGracePeriodSeconds: 1e300 is refused (JSON number and YAML)', () => {
    const json = JSON.parse(JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'w' }, spec: { containers: [{ name: 'c', image: 'x' }] } }));
    const text = JSON.stringify(json).replace('"spec":{', '"spec":{"terminationGracePeriodSeconds":1e300,');
    let e = decodeError(() => decodePodManifest(text, FILE));
    assert.equal(e.field, 'spec.terminationGracePeriodSeconds');
    assert.match(e.message, /expected int64, got number 1e\+300: out of range/);
    e = decodeError(() => decodePodManifest(yamlPod({ spec: '  terminationGracePeriodSeconds: 1e300\n' }), FILE));
    assert.equal(e.field, 'spec.terminationGracePeriodSeconds');
    e = decodeError(() => decodePodManifest(yamlPod({ spec: '  terminationGracePeriodSeconds: 1.0e+300\n' }), FILE));
    assert.equal(e.field, 'spec.terminationGracePeriodSeconds');
  });

  it('every type error is listed, the first one in `field`', () => {
    const e = decodeError(() => decodePodManifest(yamlPod({ spec: '  hostNetwork: "true"\n  hostPID: 1\n' }), FILE));
    assert.deepEqual(e.fieldErrors?.map((x) => x.field), ['spec.hostNetwork', 'spec.hostPID']);
    assert.equal(e.field, 'spec.hostNetwork');
  });
});

describe('hostile documents', () => {
  it('refuses nesting deeper than the limit without a stack overflow', () => {
    const deep = `${'['.repeat(MaxManifestDepth + 5)}${']'.repeat(MaxManifestDepth + 5)}`;
    const text = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w"},"spec":{"containers":[{"name":"c","image":"x"}],"x":${deep}}}`;
    assert.match(decodeError(() => decodePodManifest(text, FILE)).message, /nested more than/);
    // millions of levels (the YAML reader would exhaust the heap): refused before any parser runs
    const levels = 4_000_000;
    const jsonAbyss = `{"a":${'['.repeat(levels)}${']'.repeat(levels)}}`;
    assert.match(decodeError(() => decodePodManifest(jsonAbyss, FILE)).message, /nested more than 100 levels/);
    const yamlAbyss = `a: ${'['.repeat(levels)}${']'.repeat(levels)}`;
    assert.match(decodeError(() => decodePodManifest(yamlAbyss, FILE)).message, new RegExp(`limit of ${MaxYAMLStructure} structural characters`));
    assert.match(decodeError(() => decodePodManifest(`${'- '.repeat(levels)}a`, FILE)).message, /structural characters/);
  });

  it('reads a large JSON manifest natively; the same content as YAML is refused, naming the limit', () => {
    const env = Array.from({ length: 20_000 }, (_, i) => ({ name: `V${i}`, value: 'x'.repeat(20) }));
    const big = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'big' }, spec: { containers: [{ name: 'c', image: 'x', env }] } };
    const pod = decodePodManifest(JSON.stringify(big), FILE);
    assert.equal(pod.spec.containers[0]!.env!.length, 20_000);
    const asYaml = `apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n  - name: c\n    image: x\n    env:\n${env.map((e) => `    - name: ${e.name}\n      value: ${e.value}\n`).join('')}`;
    const e = decodeError(() => decodePodManifest(asYaml, FILE));
    assert.match(e.message, /write a manifest this large as JSON/);
  });

  it('a JSON flow mapping that is not strict JSON is still read as YAML', () => {
    const pod = decodePodManifest("{apiVersion: v1, kind: Pod, metadata: {name: w}, spec: {containers: [{name: c, image: 'x:1'}]}}", FILE);
    assert.equal(pod.metadata.name, 'w-node1');
  });

  it('refuses an alias bomb', () => {
    let y = 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n';
    for (let i = 1; i < 12; i++) y += `a${i}: &a${i} [${Array(10).fill(`*a${i - 1}`).join(', ')}]\n`;
    decodeError(() => decodePodManifest(y, FILE));
  });

  it('refuses a manifest over the size limit, naming the limit', () => {
    const e = decodeError(() => parseManifest(Buffer.alloc(MaxManifestBytes + 1, 0x20), FILE));
    assert.match(e.message, new RegExp(`limit of ${MaxManifestBytes}`));
  });
});
