import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Container } from '../../src/api/types.js';
import { canonicalContainerJSON, fnv32a, hashContainer } from '../../src/runtime/container-hash.js';

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

describe('hashContainer', () => {
  it('is lowercase hex without padding, as upstream formats it', () => {
    const h = hashContainer(base());
    assert.match(h, /^[0-9a-f]{1,8}$/);
    assert.equal(h, fnv32a(canonicalContainerJSON(base())).toString(16));
  });

  it('is pinned: a change here restarts every running container after an upgrade', () => {
    assert.equal(
      canonicalContainerJSON({ name: 'c', image: 'busybox', resources: { limits: { cpu: '1' } } }),
      '{"image":"busybox","name":"c","resources":{"limits":{"cpu":"q:1000000000"}}}',
    );
    assert.equal(hashContainer({ name: 'c', image: 'busybox' }), fnv32a('{"image":"busybox","name":"c"}').toString(16));
  });

  it('does not depend on key order', () => {
    assert.equal(hashContainer(reversedKeys(base())), hashContainer(base()));
  });

  it('treats empty and absent fields alike', () => {
    const withEmpties: Container = { ...base(), workingDir: '', volumeMounts: [], envFrom: undefined, lifecycle: {} };
    assert.equal(hashContainer(withEmpties), hashContainer(base()));
  });

  it('reads quantities by amount: "0.5" and 0.5 are "500m", "128Mi" is 134217728', () => {
    const a = base();
    a.resources = { requests: { cpu: 0.25, memory: '67108864' }, limits: { cpu: '0.5', memory: 134217728 } };
    assert.equal(hashContainer(a), hashContainer(base()));
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
      assert.notEqual(hashContainer(c), hashContainer(base()));
    });
  }

  it('does not modify the container', () => {
    const c = base();
    const before = JSON.stringify(c);
    hashContainer(c);
    assert.equal(JSON.stringify(c), before);
  });
});
