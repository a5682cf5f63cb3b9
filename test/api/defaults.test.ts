import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyPodDefaults, defaultImagePullPolicy, parseImageReference } from '../../src/api/defaults.js';
import type { Pod } from '../../src/api/types.js';

function pod(spec: Partial<Pod['spec']> = {}): Pod {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'busybox:1.36' }], ...spec } };
}

describe('defaultImagePullPolicy', () => {
  const cases: [string, string][] = [
    ['busybox', 'Always'],
    ['busybox:latest', 'Always'],
    ['docker.io/library/busybox:latest', 'Always'],
    ['localhost:5000/app', 'Always'],
    ['busybox:1.36', 'IfNotPresent'],
    ['localhost:5000/app:v2', 'IfNotPresent'],
    ['busybox@sha256:' + 'a'.repeat(64), 'IfNotPresent'],
    ['busybox:latest@sha256:' + 'a'.repeat(64), 'Always'],
    ['Busybox', 'IfNotPresent'], // unparsable (upper-case repository): upstream ignores the error
    ['', 'IfNotPresent'],
  ];
  for (const [image, want] of cases) {
    it(`${JSON.stringify(image)} → ${want}`, () => assert.equal(defaultImagePullPolicy(image), want));
  }

  it('splits registry port from tag', () => {
    assert.deepEqual(parseImageReference('registry.local:5000/team/app:1.0'), { name: 'registry.local:5000/team/app', tag: '1.0', digest: '' });
    assert.deepEqual(parseImageReference('app'), { name: 'app', tag: 'latest', digest: '' });
  });
});

describe('applyPodDefaults', () => {
  it('fills the pod spec defaults', () => {
    const p = pod();
    applyPodDefaults(p);
    assert.equal(p.spec.restartPolicy, 'Always');
    assert.equal(p.spec.terminationGracePeriodSeconds, 30);
    assert.equal(p.spec.dnsPolicy, 'ClusterFirst');
    assert.equal(p.spec.schedulerName, 'default-scheduler');
    assert.deepEqual(p.spec.securityContext, {});
    assert.equal(p.spec.enableServiceLinks, true);
  });

  it('keeps what the manifest sets', () => {
    const p = pod({ restartPolicy: 'Never', terminationGracePeriodSeconds: 0, dnsPolicy: 'Default', enableServiceLinks: false });
    p.spec.containers[0]!.imagePullPolicy = 'Never';
    applyPodDefaults(p);
    assert.equal(p.spec.restartPolicy, 'Never');
    assert.equal(p.spec.terminationGracePeriodSeconds, 0);
    assert.equal(p.spec.dnsPolicy, 'Default');
    assert.equal(p.spec.enableServiceLinks, false);
    assert.equal(p.spec.containers[0]!.imagePullPolicy, 'Never');
  });

  it('defaults containers and init containers', () => {
    const p = pod({
      initContainers: [{ name: 'init', image: 'busybox' }],
      containers: [
        {
          name: 'c',
          image: 'nginx:1.25',
          ports: [{ containerPort: 80 }, { containerPort: 53, protocol: 'UDP' }],
          livenessProbe: { httpGet: { port: 80 } },
          readinessProbe: { tcpSocket: { port: 80 }, periodSeconds: 5 },
          lifecycle: { preStop: { httpGet: { port: 80, path: '/quit' } } },
          env: [{ name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }],
        },
      ],
    });
    applyPodDefaults(p);
    const init = p.spec.initContainers![0]!;
    assert.equal(init.imagePullPolicy, 'Always');
    assert.equal(init.terminationMessagePath, '/dev/termination-log');
    assert.equal(init.terminationMessagePolicy, 'File');
    const c = p.spec.containers[0]!;
    assert.equal(c.imagePullPolicy, 'IfNotPresent');
    assert.deepEqual(c.ports!.map((x) => x.protocol), ['TCP', 'UDP']);
    assert.equal(c.ports![0]!.hostPort, undefined);
    assert.deepEqual(c.livenessProbe, {
      httpGet: { port: 80, path: '/', scheme: 'HTTP' },
      timeoutSeconds: 1,
      periodSeconds: 10,
      successThreshold: 1,
      failureThreshold: 3,
    });
    assert.equal(c.readinessProbe!.periodSeconds, 5);
    assert.equal(c.readinessProbe!.failureThreshold, 3);
    assert.deepEqual(c.lifecycle!.preStop!.httpGet, { port: 80, path: '/quit', scheme: 'HTTP' });
    assert.equal(c.env![0]!.valueFrom!.fieldRef!.apiVersion, 'v1');
  });

  it('defaults requests from limits only where a request is missing', () => {
    const p = pod({
      containers: [{ name: 'c', image: 'x:1', resources: { limits: { cpu: '2', memory: '1Gi' }, requests: { cpu: '500m' } } }],
      initContainers: [{ name: 'i', image: 'x:1', resources: { limits: { memory: '64Mi' } } }],
    });
    applyPodDefaults(p);
    assert.deepEqual(p.spec.containers[0]!.resources!.requests, { cpu: '500m', memory: '1Gi' });
    assert.deepEqual(p.spec.initContainers![0]!.resources!.requests, { memory: '64Mi' });
  });

  it('with host networking, container ports are host ports', () => {
    const p = pod({ hostNetwork: true, containers: [{ name: 'c', image: 'x:1', ports: [{ containerPort: 8080 }] }] });
    applyPodDefaults(p);
    assert.equal(p.spec.containers[0]!.ports![0]!.hostPort, 8080);
  });

  it('defaults volumes: no source is emptyDir, file modes 0644', () => {
    const p = pod({
      volumes: [
        { name: 'scratch' },
        { name: 'cm', configMap: { name: 'x' } },
        { name: 'sec', secret: { secretName: 's', defaultMode: 0o400 } },
        { name: 'host', hostPath: { path: '/var/log' } },
      ],
    });
    applyPodDefaults(p);
    const v = p.spec.volumes!;
    assert.deepEqual(v[0], { name: 'scratch', emptyDir: {} });
    assert.equal(v[1]!.configMap!.defaultMode, 0o644);
    assert.equal(v[2]!.secret!.defaultMode, 0o400);
    assert.equal(v[3]!.hostPath!.type, '');
  });

  it('does not throw on malformed input', () => {
    const junk = { metadata: { name: 'x' }, spec: { containers: 'nope', volumes: [null, 3] } } as unknown as Pod;
    assert.doesNotThrow(() => applyPodDefaults(junk));
    assert.equal(junk.spec.restartPolicy, 'Always');
  });
});
