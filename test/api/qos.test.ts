import { test } from 'node:test';
import assert from 'node:assert/strict';
import { computePodQOS, getPodQOS } from '../../src/api/qos.js';
import type { Container, Pod, ResourceRequirements } from '../../src/api/types.js';

function ctr(name: string, resources?: ResourceRequirements, sidecar = false): Container {
  const c: Container = { name, image: 'busybox' };
  if (resources) c.resources = resources;
  if (sidecar) c.restartPolicy = 'Always';
  return c;
}

function pod(containers: Container[], initContainers?: Container[]): Pod {
  const p: Pod = { metadata: { name: 'p', namespace: 'default', uid: 'u1' }, spec: { containers } };
  if (initContainers) p.spec.initContainers = initContainers;
  return p;
}

const full = (cpu: string, mem: string): ResourceRequirements => ({
  requests: { cpu, memory: mem },
  limits: { cpu, memory: mem },
});

test('no requests or limits anywhere is BestEffort', () => {
  assert.equal(getPodQOS(pod([ctr('a'), ctr('b')])), 'BestEffort');
});

test('only non-QoS resources set is BestEffort', () => {
  const r = { requests: { 'ephemeral-storage': '1Gi', 'example.com/gpu': 1 }, limits: { 'example.com/gpu': 1 } };
  assert.equal(getPodQOS(pod([ctr('a', r)])), 'BestEffort');
});

test('zero quantities do not count: requests and limits of 0 are BestEffort', () => {
  assert.equal(getPodQOS(pod([ctr('a', { requests: { cpu: '0', memory: 0 }, limits: { cpu: '0m' } })])), 'BestEffort');
});

test('equal cpu and memory requests and limits in every container is Guaranteed', () => {
  assert.equal(getPodQOS(pod([ctr('a', full('500m', '128Mi')), ctr('b', full('1', '1Gi'))])), 'Guaranteed');
});

test('equal amounts written differently still match (1 == 1000m, 1Gi == 1073741824)', () => {
  const r = { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1000m', memory: 1073741824 } };
  assert.equal(getPodQOS(pod([ctr('a', r)])), 'Guaranteed');
});

test('only limits set: requests default from limits, so Guaranteed', () => {
  assert.equal(getPodQOS(pod([ctr('a', { limits: { cpu: '2', memory: '256Mi' } })])), 'Guaranteed');
});

test('only a cpu limit is Burstable (memory limit missing)', () => {
  assert.equal(getPodQOS(pod([ctr('a', { limits: { cpu: '1' } })])), 'Burstable');
});

test('only cpu requests is Burstable', () => {
  assert.equal(getPodQOS(pod([ctr('a', { requests: { cpu: '100m' } })])), 'Burstable');
});

test('requests below limits is Burstable', () => {
  const r = { requests: { cpu: '500m', memory: '64Mi' }, limits: { cpu: '1', memory: '64Mi' } };
  assert.equal(getPodQOS(pod([ctr('a', r)])), 'Burstable');
});

test('one container without resources next to a guaranteed one is Burstable', () => {
  assert.equal(getPodQOS(pod([ctr('a', full('1', '1Gi')), ctr('b')])), 'Burstable');
});

test('init containers count: a guaranteed app with a bare init container is Burstable', () => {
  assert.equal(getPodQOS(pod([ctr('a', full('1', '1Gi'))], [ctr('init')])), 'Burstable');
});

test('init containers count: guaranteed app and guaranteed init container is Guaranteed', () => {
  assert.equal(getPodQOS(pod([ctr('a', full('1', '1Gi'))], [ctr('init', full('200m', '32Mi'))])), 'Guaranteed');
});

test('init container requests alone make the pod Burstable', () => {
  assert.equal(getPodQOS(pod([ctr('a')], [ctr('init', { requests: { memory: '10Mi' } })])), 'Burstable');
});

test('a zero memory limit does not satisfy Guaranteed', () => {
  const r = { requests: { cpu: '1' }, limits: { cpu: '1', memory: '0' } };
  assert.equal(getPodQOS(pod([ctr('a', r)])), 'Burstable');
});

test('pod overhead is ignored', () => {
  const p = pod([ctr('a', full('1', '1Gi'))]);
  p.spec.overhead = { cpu: '250m', memory: '120Mi' };
  assert.equal(getPodQOS(p), 'Guaranteed');
  const q = pod([ctr('a')]);
  q.spec.overhead = { cpu: '250m', memory: '120Mi' };
  assert.equal(getPodQOS(q), 'BestEffort');
});

test('getPodQOS prefers the class the API server recorded; computePodQOS ignores it', () => {
  const p = pod([ctr('a')]);
  p.status = { qosClass: 'Burstable' };
  assert.equal(getPodQOS(p), 'Burstable');
  assert.equal(computePodQOS(p), 'BestEffort');
});
