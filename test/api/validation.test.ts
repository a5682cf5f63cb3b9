import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyPodDefaults } from '../../src/api/defaults.js';
import type { Container, Pod } from '../../src/api/types.js';
import { validatePod, type FieldError } from '../../src/api/validation.js';

function validPod(): Pod {
  const p: Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-node1', namespace: 'default', labels: { app: 'web' } },
    spec: {
      volumes: [{ name: 'data', emptyDir: {} }],
      initContainers: [{ name: 'setup', image: 'busybox:1.36', command: ['true'] }],
      containers: [
        {
          name: 'web',
          image: 'nginx:1.25',
          ports: [{ name: 'http', containerPort: 80 }],
          env: [{ name: 'MODE', value: 'prod' }],
          resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '1', memory: '128Mi' } },
          volumeMounts: [{ name: 'data', mountPath: '/data' }],
          livenessProbe: { httpGet: { port: 'http' } },
        },
      ],
    },
  };
  applyPodDefaults(p);
  return p;
}

function fields(errs: FieldError[]): string[] {
  return errs.map((e) => e.field);
}

function errorOn(errs: FieldError[], field: string): FieldError {
  const e = errs.find((x) => x.field === field);
  assert.ok(e, `expected an error on ${field}, got ${JSON.stringify(errs)}`);
  return e;
}

function web(p: Pod): Container {
  return p.spec.containers[0]!;
}

describe('validatePod', () => {
  it('accepts a valid defaulted pod', () => {
    assert.deepEqual(validatePod(validPod()), []);
  });

  it('requires metadata.name and checks it is a DNS subdomain', () => {
    const p = validPod();
    delete p.metadata.name;
    assert.match(errorOn(validatePod(p), 'metadata.name').message, /^Required value/);
    p.metadata.name = 'Web_1';
    assert.match(errorOn(validatePod(p), 'metadata.name').message, /^Invalid value: "Web_1": a lowercase RFC 1123 subdomain/);
    p.metadata.name = 'a.b-c';
    assert.deepEqual(validatePod(p), []);
  });

  it('checks namespace is a DNS label', () => {
    const p = validPod();
    p.metadata.namespace = 'kube.system';
    assert.match(errorOn(validatePod(p), 'metadata.namespace').message, /RFC 1123 label/);
  });

  it('requires containers', () => {
    const p = validPod();
    p.spec.containers = [];
    assert.equal(errorOn(validatePod(p), 'spec.containers').message, 'Required value');
  });

  it('checks container names: DNS label, unique across init and regular containers', () => {
    const p = validPod();
    web(p).name = 'setup';
    assert.equal(errorOn(validatePod(p), 'spec.containers[0].name').message, 'Duplicate value: "setup"');
    web(p).name = 'Web';
    assert.match(errorOn(validatePod(p), 'spec.containers[0].name').message, /RFC 1123 label/);
  });

  it('requires an image', () => {
    const p = validPod();
    delete web(p).image;
    assert.equal(errorOn(validatePod(p), 'spec.containers[0].image').message, 'Required value');
    p.spec.initContainers![0]!.image = ' busybox';
    assert.match(errorOn(validatePod(p), 'spec.initContainers[0].image').message, /whitespace/);
  });

  it('checks restartPolicy', () => {
    const p = validPod();
    (p.spec as { restartPolicy: string }).restartPolicy = 'Sometimes';
    assert.equal(
      errorOn(validatePod(p), 'spec.restartPolicy').message,
      'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
    );
  });

  it('checks container and host ports', () => {
    const p = validPod();
    web(p).ports = [
      { containerPort: 0 },
      { containerPort: 70000 },
      { containerPort: 80, hostPort: 8080 },
      { containerPort: 81, hostPort: 8080 },
      { containerPort: 82, name: 'Bad_Name' },
    ];
    const errs = validatePod(p);
    assert.match(errorOn(errs, 'spec.containers[0].ports[0].containerPort').message, /between 1 and 65535/);
    assert.match(errorOn(errs, 'spec.containers[0].ports[1].containerPort').message, /between 1 and 65535/);
    assert.equal(errorOn(errs, 'spec.containers[0].ports[3].hostPort').message, 'Duplicate value: "TCP/8080"');
    errorOn(errs, 'spec.containers[0].ports[4].name');
    assert.ok(!fields(errs).includes('spec.containers[0].ports[2].hostPort'));
  });

  it('checks resource quantities and requests <= limits', () => {
    const p = validPod();
    web(p).resources = { requests: { cpu: '2', memory: 'lots' }, limits: { cpu: '1', memory: '1Gi' } };
    const errs = validatePod(p);
    assert.equal(errorOn(errs, 'spec.containers[0].resources.requests[cpu]').message, 'Invalid value: "2": must be less than or equal to cpu limit of 1');
    assert.match(errorOn(errs, 'spec.containers[0].resources.requests[memory]').message, /^Invalid value: "lots"/);
  });

  it('rejects negative quantities and unknown resource names', () => {
    const p = validPod();
    web(p).resources = { limits: { memory: '-1Mi', gpu: '1' } };
    const errs = validatePod(p);
    assert.match(errorOn(errs, 'spec.containers[0].resources.limits[memory]').message, /greater than or equal to 0/);
    assert.match(errorOn(errs, 'spec.containers[0].resources.limits[gpu]').message, /standard resource/);
  });

  it('extended resources need requests equal to limits', () => {
    const p = validPod();
    web(p).resources = { requests: { 'example.com/gpu': '1' }, limits: { 'example.com/gpu': '2' } };
    assert.match(errorOn(validatePod(p), 'spec.containers[0].resources.requests[example.com/gpu]').message, /must be equal to example.com\/gpu limit of 2/);
  });

  it('checks env var names and valueFrom', () => {
    const p = validPod();
    web(p).env = [
      { name: '1ABC', value: 'x' },
      { name: 'OK', valueFrom: {} },
      { name: 'BOTH', value: 'x', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    ];
    const errs = validatePod(p);
    assert.match(errorOn(errs, 'spec.containers[0].env[0].name').message, /valid environment variable name/);
    assert.match(errorOn(errs, 'spec.containers[0].env[1].valueFrom').message, /must specify one of/);
    assert.match(errorOn(errs, 'spec.containers[0].env[2].valueFrom').message, /may not be specified when `value` is not empty/);
  });

  it('checks volume names are unique and mounts reference volumes', () => {
    const p = validPod();
    p.spec.volumes!.push({ name: 'data', emptyDir: {} });
    web(p).volumeMounts!.push({ name: 'missing', mountPath: '/m' }, { name: 'data', mountPath: '/data' });
    const errs = validatePod(p);
    assert.equal(errorOn(errs, 'spec.volumes[1].name').message, 'Duplicate value: "data"');
    assert.equal(errorOn(errs, 'spec.containers[0].volumeMounts[1].name').message, 'Not found: "missing"');
    assert.match(errorOn(errs, 'spec.containers[0].volumeMounts[2].mountPath').message, /must be unique/);
  });

  it('requires exactly one volume source', () => {
    const p = validPod();
    p.spec.volumes = [{ name: 'data', emptyDir: {}, hostPath: { path: '/x' } }];
    assert.match(errorOn(validatePod(p), 'spec.volumes[0].hostPath').message, /may not specify more than 1 volume type/);
  });

  it('requires probes to have exactly one handler', () => {
    const p = validPod();
    web(p).livenessProbe = { periodSeconds: 10 };
    web(p).readinessProbe = { exec: { command: ['true'] }, tcpSocket: { port: 80 } };
    const errs = validatePod(p);
    assert.equal(errorOn(errs, 'spec.containers[0].livenessProbe').message, 'Required value: must specify a handler type');
    assert.equal(errorOn(errs, 'spec.containers[0].readinessProbe.tcpSocket').message, 'Forbidden: may not specify more than 1 handler type');
  });

  it('liveness successThreshold must be 1', () => {
    const p = validPod();
    web(p).livenessProbe!.successThreshold = 2;
    assert.equal(errorOn(validatePod(p), 'spec.containers[0].livenessProbe.successThreshold').message, 'Invalid value: 2: must be 1');
  });

  it('allows restartPolicy Always only on init containers (sidecars), which may have probes', () => {
    const p = validPod();
    web(p).restartPolicy = 'Always';
    assert.equal(errorOn(validatePod(p), 'spec.containers[0].restartPolicy').message, 'Forbidden: may not be set for non-init containers');

    const q = validPod();
    q.spec.initContainers![0]!.readinessProbe = { exec: { command: ['true'] } };
    assert.equal(
      errorOn(validatePod(q), 'spec.initContainers[0].readinessProbe').message,
      'Forbidden: may not be set for init containers without restartPolicy=Always',
    );
    q.spec.initContainers![0]!.restartPolicy = 'Always';
    assert.deepEqual(validatePod(q), []);
    (q.spec.initContainers![0] as { restartPolicy: string }).restartPolicy = 'OnFailure';
    assert.match(errorOn(validatePod(q), 'spec.initContainers[0].restartPolicy').message, /^Unsupported value: "OnFailure"/);
  });

  it('reports malformed shapes instead of throwing', () => {
    const junk = { metadata: { name: 'x', namespace: 'default' }, spec: { containers: 'nope', restartPolicy: 'Always' } } as unknown as Pod;
    assert.match(errorOn(validatePod(junk), 'spec.containers').message, /expected list, got string "nope"/);
  });
});
