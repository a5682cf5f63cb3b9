import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Container } from '../../src/api/types.js';
import {
  canonicalContainerJSON,
  containerHashMatches,
  fnv32a,
  goJSONString,
  hashContainer,
  legacyKubeletTsHash,
  spewByteSlice,
  upstreamHashedJSON,
} from '../../src/runtime/container-hash.js';

function base(): Container {
  return {
    name: 'app',
    image: 'registry.local/app:1.0',
    command: ['/bin/app'],
    args: ['--port', '8080'],
    env: [
      { name: 'A', value: '1' },
      { name: 'B', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
    ],
    ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
    resources: { requests: { cpu: '250m', memory: '64Mi' }, limits: { cpu: '500m', memory: '128Mi' } },
    securityContext: { capabilities: { drop: ['ALL'] }, runAsUser: 1000 },
    terminationMessagePath: '/dev/termination-log',
    imagePullPolicy: 'IfNotPresent',
  };
}

/** The same object with every key order reversed, recursively. */
function reversedKeys<T>(v: T): T {
  if (Array.isArray(v)) return v.map(reversedKeys) as T;
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).reverse()) out[k] = reversedKeys((v as Record<string, unknown>)[k]);
    return out as T;
  }
  return v;
}

describe('fnv32a', () => {
  it('matches the FNV-1a 32-bit reference values', () => {
    assert.equal(fnv32a(''), 0x811c9dc5);
    assert.equal(fnv32a('a'), 0xe40c292c);
    assert.equal(fnv32a('foobar'), 0xbf9cf968);
  });
});

describe('hashContainer (upstream 1.31-1.34 HashContainer)', () => {
  // Golden value from upstream's own TestHashContainer (pkg/kubelet/container, helpers_test.go):
  // name test_container, image foo/image:v1, args and a port that are not hashed, expected
  // 0x8e45cbd0. The encoding steps are pinned one by one in the tests below.
  const golden: { name: string; c: Container; json: string; hash: string }[] = [
    {
      name: "upstream's TestHashContainer",
      c: { name: 'test_container', image: 'foo/image:v1', args: ['/bin/sh', '-c', 'echo abc'], ports: [{ containerPort: 8001 }] },
      json: '{"image":"foo/image:v1","name":"test_container"}',
      hash: '8e45cbd0',
    },
  ];
  for (const g of golden) {
    it(`golden: ${g.name}`, () => {
      assert.equal(hashContainer(g.c), g.hash);
      assert.equal(upstreamHashedJSON(g.c), g.json);
    });
  }

  it('hashes spew\'s %#v rendering of the JSON bytes, not the JSON itself', () => {
    assert.equal(spewByteSlice(Buffer.from('{"a"}')), '([]uint8)[123 34 97 34 125]');
    assert.equal(spewByteSlice(new Uint8Array(0)), '([]uint8)[]');
    const c: Container = { name: 'c', image: 'busybox' };
    const json = '{"image":"busybox","name":"c"}';
    assert.equal(upstreamHashedJSON(c), json);
    const spew = `([]uint8)[${Array.from(Buffer.from(json)).join(' ')}]`;
    assert.equal(hashContainer(c), fnv32a(spew).toString(16));
    assert.notEqual(hashContainer(c), fnv32a(json).toString(16));
  });

  it('encodes strings as Go\'s json.Marshal does (HTML-safe escapes, \\b and \\f short forms)', () => {
    assert.equal(goJSONString('a<b>&c'), '"a\\u003cb\\u003e\\u0026c"');
    assert.equal(goJSONString('q"\\'), '"q\\"\\\\"');
    assert.equal(goJSONString('\n\r\t\b\f\u0001\u001f'), '"\\n\\r\\t\\b\\f\\u0001\\u001f"');
    assert.equal(goJSONString('\u2028\u2029'), '"\\u2028\\u2029"');
    assert.equal(goJSONString('é/日'), '"é/日"');
    assert.equal(goJSONString('\ud800'), '"\\ufffd"');
  });

  it('treats an absent image as "" (Go\'s zero string)', () => {
    assert.equal(upstreamHashedJSON({ name: 'c' } as Container), '{"image":"","name":"c"}');
  });

  it('is lowercase hex without padding, as upstream formats it', () => {
    for (const n of ['a', 'b', 'c', 'd', 'e', 'sidecar', 'x'.repeat(63)]) {
      assert.match(hashContainer({ name: n, image: 'busybox' }), /^[1-9a-f][0-9a-f]{0,7}$|^0$/);
    }
  });

  it('does not depend on key order', () => {
    assert.equal(hashContainer(reversedKeys(base())), hashContainer(base()));
  });

  it('covers only name and image, as upstream 1.31+', () => {
    const c = base();
    c.args = ['--other'];
    c.env = [];
    c.resources = { limits: { cpu: '2' } };
    assert.equal(hashContainer(c), hashContainer(base()));
    assert.notEqual(hashContainer({ ...base(), image: 'registry.local/app:1.1' }), hashContainer(base()));
    assert.notEqual(hashContainer({ ...base(), name: 'app2' }), hashContainer(base()));
  });
});

describe('containerHashMatches', () => {
  it('accepts the upstream hash and the legacy kubelet-ts hash of the spec, nothing else', () => {
    const c = base();
    assert.equal(containerHashMatches(c, hashContainer(c)), true);
    assert.equal(containerHashMatches(c, legacyKubeletTsHash(c)), true);
    assert.notEqual(hashContainer(c), legacyKubeletTsHash(c));
    assert.equal(containerHashMatches(c, 'deadbeef'), false);
    assert.equal(containerHashMatches(c, undefined), false);
    // a legacy hash of an older spec (another image) does not match
    assert.equal(containerHashMatches(c, legacyKubeletTsHash({ ...base(), image: 'registry.local/app:0.9' })), false);
  });
});

describe('legacyKubeletTsHash (hash written by older kubelet-ts releases)', () => {
  it('is lowercase hex without padding, as upstream formats it', () => {
    const h = legacyKubeletTsHash(base());
    assert.match(h, /^[0-9a-f]{1,8}$/);
    assert.equal(h, fnv32a(canonicalContainerJSON(base())).toString(16));
  });

  it('is pinned: a change here restarts every running container after an upgrade', () => {
    assert.equal(
      canonicalContainerJSON({ name: 'c', image: 'busybox', resources: { limits: { cpu: '1' } } }),
      '{"image":"busybox","name":"c","resources":{"limits":{"cpu":"q:1000000000"}}}',
    );
    assert.equal(legacyKubeletTsHash({ name: 'c', image: 'busybox' }), fnv32a('{"image":"busybox","name":"c"}').toString(16));
  });

  it('does not depend on key order', () => {
    assert.equal(legacyKubeletTsHash(reversedKeys(base())), legacyKubeletTsHash(base()));
  });

  it('treats empty and absent fields alike', () => {
    const withEmpties: Container = { ...base(), workingDir: '', volumeMounts: [], envFrom: undefined, lifecycle: {} };
    assert.equal(legacyKubeletTsHash(withEmpties), legacyKubeletTsHash(base()));
  });

  it('reads quantities by amount: "0.5" and 0.5 are "500m", "128Mi" is 134217728', () => {
    const a = base();
    a.resources = { requests: { cpu: 0.25, memory: '67108864' }, limits: { cpu: '0.5', memory: 134217728 } };
    assert.equal(legacyKubeletTsHash(a), legacyKubeletTsHash(base()));
  });

  const edits: [string, (c: Container) => void][] = [
    ['image', (c) => (c.image = 'registry.local/app:1.1')],
    ['an arg', (c) => (c.args = ['--port', '8081'])],
    ['command', (c) => (c.command = ['/bin/app2'])],
    ['an env value', (c) => (c.env![0]!.value = '2')],
    ['env order', (c) => c.env!.reverse()],
    ['a new port', (c) => c.ports!.push({ containerPort: 9090 })],
    ['the cpu limit', (c) => (c.resources!.limits!.cpu = '600m')],
    ['the memory request', (c) => (c.resources!.requests!.memory = '65Mi')],
    ['privileged: false set explicitly', (c) => (c.securityContext!.privileged = false)],
    ['a probe', (c) => (c.livenessProbe = { tcpSocket: { port: 8080 } })],
    ['an unknown pass-through field', (c) => ((c as unknown as Record<string, unknown>).resizePolicy = [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }])],
  ];
  for (const [what, edit] of edits) {
    it(`changes when ${what} changes`, () => {
      const c = base();
      edit(c);
      assert.notEqual(legacyKubeletTsHash(c), legacyKubeletTsHash(base()));
    });
  }

  it('does not modify the container', () => {
    const c = base();
    const before = JSON.stringify(c);
    legacyKubeletTsHash(c);
    assert.equal(JSON.stringify(c), before);
  });
});
