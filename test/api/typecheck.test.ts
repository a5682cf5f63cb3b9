import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkTypes, MaxTypeErrors } from '../../src/api/typecheck.js';
import fc from 'fast-check';
import { checkPodTypes, isValidPodIdentity, isValidPodUID, podIdentityErrors, validatePod } from '../../src/api/validation.js';
import { applyPodDefaults } from '../../src/api/defaults.js';
import type { Pod } from '../../src/api/types.js';

function pod(spec: Record<string, unknown> = {}, container: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'default', ...metadata },
    spec: { containers: [{ name: 'web', image: 'nginx:1.25', ...container }], ...spec },
  };
}

function typeError(p: unknown): string {
  const errs = checkPodTypes(p);
  assert.equal(errs.length, 1, JSON.stringify(errs));
  return `${errs[0]!.field}: ${errs[0]!.message}`;
}

describe('checkPodTypes: wrong types are refused naming the field', () => {
  it('security fields must be booleans, not strings that read as unset', () => {
    assert.equal(
      typeError(pod({}, { securityContext: { runAsNonRoot: 'true' } })),
      'spec.containers[0].securityContext.runAsNonRoot: expected boolean, got string "true"',
    );
    assert.equal(
      typeError(pod({}, { securityContext: { allowPrivilegeEscalation: 'false' } })),
      'spec.containers[0].securityContext.allowPrivilegeEscalation: expected boolean, got string "false"',
    );
    assert.equal(typeError(pod({}, { securityContext: { privileged: 1 } })), 'spec.containers[0].securityContext.privileged: expected boolean, got number 1');
    assert.equal(typeError(pod({ securityContext: { runAsNonRoot: 'yes' } })), 'spec.securityContext.runAsNonRoot: expected boolean, got string "yes"');
    assert.equal(typeError(pod({ hostNetwork: 'true' })), 'spec.hostNetwork: expected boolean, got string "true"');
  });

  it('integers: int64 range, non-negative where upstream says so, no fractions', () => {
    assert.match(typeError(pod({ terminationGracePeriodSeconds: 1e300 })), /^spec\.terminationGracePeriodSeconds: expected int64, got number 1e\+300: out of range/);
    assert.equal(typeError(pod({ terminationGracePeriodSeconds: -1 })), 'spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0');
    assert.equal(typeError(pod({ terminationGracePeriodSeconds: 1.5 })), 'spec.terminationGracePeriodSeconds: expected int64, got number 1.5');
    assert.equal(typeError(pod({ terminationGracePeriodSeconds: '30' })), 'spec.terminationGracePeriodSeconds: expected int64, got string "30"');
    assert.match(typeError(pod({}, { ports: [{ containerPort: 2 ** 31 }] })), /^spec\.containers\[0\]\.ports\[0\]\.containerPort: expected int32, got number 2147483648: out of range/);
    assert.equal(typeError(pod({}, { securityContext: { runAsUser: -1 } })), 'spec.containers[0].securityContext.runAsUser: Invalid value: -1: must be greater than or equal to 0');
    assert.equal(typeError(pod({}, { livenessProbe: { exec: { command: ['true'] }, periodSeconds: -5 } })), 'spec.containers[0].livenessProbe.periodSeconds: Invalid value: -5: must be greater than or equal to 0');
    assert.equal(typeError(pod({ volumes: [{ name: 'c', configMap: { name: 'x', defaultMode: 0o1777 } }] })), 'spec.volumes[0].configMap.defaultMode: Invalid value: 1023: must be less than or equal to 511');
  });

  it('strings, lists, maps and objects', () => {
    assert.equal(typeError(pod({}, { image: 7 })), 'spec.containers[0].image: expected string, got number 7');
    assert.equal(typeError(pod({}, { command: 'sh -c true' })), 'spec.containers[0].command: expected list, got string "sh -c true"');
    assert.equal(typeError(pod({}, { args: ['a', { b: 1 }] })), 'spec.containers[0].args[1]: expected string, got object');
    assert.equal(typeError(pod({}, {}, { labels: { app: 1 } })), 'metadata.labels[app]: expected string, got number 1');
    assert.equal(typeError(pod({}, {}, { uid: 42 })), 'metadata.uid: expected string, got number 42');
    assert.equal(typeError(pod({}, { securityContext: 'privileged' })), 'spec.containers[0].securityContext: expected object, got string "privileged"');
    assert.equal(typeError(pod({}, { resources: { limits: { memory: true } } })), 'spec.containers[0].resources.limits[memory]: expected quantity (string or number), got boolean true');
    assert.equal(typeError(pod({}, { livenessProbe: { httpGet: { port: 1.5 } } })), 'spec.containers[0].livenessProbe.httpGet.port: expected int32 or string, got number 1.5');
    assert.equal(typeError({ ...pod(), metadata: [] }), 'metadata: expected object, got list');
  });

  it('accepts a well-typed pod, null as unset (removed), and unknown fields untouched', () => {
    const p = pod({ securityContext: null, affinity: { nodeAffinity: {} }, futureField: { x: [1] } }, { securityContext: { runAsNonRoot: true, runAsUser: 1000 }, tty: null });
    assert.deepEqual(checkPodTypes(p), []);
    const spec = p.spec as Record<string, unknown>;
    assert.equal('securityContext' in spec, false);
    assert.deepEqual(spec.futureField, { x: [1] });
    assert.equal('tty' in (spec.containers as Record<string, unknown>[])[0]!, false);
  });

  it('validatePod reports type errors too (and only them)', () => {
    const p = pod({}, { securityContext: { runAsNonRoot: 'true' } }) as unknown as Pod;
    applyPodDefaults(p);
    assert.deepEqual(validatePod(p).map((e) => e.field), ['spec.containers[0].securityContext.runAsNonRoot']);
  });

  it('a flood of wrong types gives a bounded list', () => {
    const many = Array.from({ length: 500 }, (_, i) => ({ name: `c${i}`, image: 1 }));
    const errs = checkTypes({ spec: { containers: many } }, { spec: { struct: { containers: { list: { struct: { image: 'string' } } } } } });
    assert.equal(errs.length, MaxTypeErrors + 1);
    assert.match(errs.at(-1)!.message, /and 480 more type errors/);
  });
});

describe('pod UIDs and identities', () => {
  it('accepts UUIDs and content hashes', () => {
    for (const uid of ['6a1f3c52-1c0e-4a8a-9f0e-0d8e7c1b2a30', '6A1F3C52-1C0E-4A8A-9F0E-0D8E7C1B2A30', 'd41d8cd98f00b204e9800998ecf8427e', 'a', 'x'.repeat(128)]) {
      assert.deepEqual(isValidPodUID(uid), [], uid);
    }
  });

  it('refuses anything that is not one safe token', () => {
    for (const uid of ['../../victim', '../../../..', '..', '.', 'a/b', '/abs', 'a_b', 'a.b', '-a', 'a-', '', 'x'.repeat(129), 'a\0b', 'ü', 'a b', 'a\nb']) {
      assert.notDeepEqual(isValidPodUID(uid), [], JSON.stringify(uid));
    }
  });

  it('podIdentityErrors checks uid, namespace, name and container name by the API rules', () => {
    assert.deepEqual(podIdentityErrors({ uid: 'abc', namespace: 'default', name: 'web-node1', containerName: 'main' }), []);
    const errs = podIdentityErrors({ uid: '../x', namespace: 'a..b', name: 'a/b', containerName: 'Main' });
    assert.deepEqual(errs.map((e) => e.field), ['uid', 'namespace', 'name', 'containerName']);
    assert.deepEqual(podIdentityErrors({ uid: '', namespace: '', name: '' }).map((e) => e.message), ['Required value', 'Required value', 'Required value']);
  });

  it('isValidPodIdentity (the hot-path check) agrees with podIdentityErrors', () => {
    const part = fc.oneof(fc.stringMatching(/^[a-z0-9][-a-z0-9.]{0,70}$/), fc.uuid(), fc.constantFrom('', '..', 'a/b', 'A', 'a-', 'x'.repeat(254)), fc.string({ maxLength: 10 }));
    fc.assert(
      fc.property(part, part, part, fc.option(part, { nil: undefined }), (uid, namespace, name, containerName) => {
        const id = { uid, namespace, name, ...(containerName !== undefined ? { containerName } : {}) };
        assert.equal(isValidPodIdentity(uid, namespace, name, containerName), podIdentityErrors(id).length === 0, JSON.stringify(id));
      }),
      { numRuns: 2000 },
    );
  });
});
