import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  generateContainersReadyCondition,
  generatePodInitializedCondition,
  generatePodReadyCondition,
  podSandboxChanged,
  updateLastTransitionTime,
} from '../../src/status/conditions.js';
import type { ContainerStatus, Pod, PodStatus } from '../../src/api/types.js';
import type { RuntimePodStatus, SandboxRuntimeStatus } from '../../src/runtime/types.js';

const pod: Pod = {
  metadata: { name: 'p', namespace: 'ns', uid: 'u' },
  spec: {
    initContainers: [{ name: 'init1', image: 'i' }, { name: 'side', image: 'i', restartPolicy: 'Always' }],
    containers: [{ name: 'a', image: 'i' }, { name: 'b', image: 'i' }],
  },
};

const st = (name: string, ready: boolean, extra: Partial<ContainerStatus> = {}): ContainerStatus => ({
  name, state: { running: {} }, lastState: {}, ready, restartCount: 0, image: 'i', imageID: '', ...extra,
});

test('ContainersReady without statuses: UnknownContainerStatuses', () => {
  const c = generateContainersReadyCondition(pod, undefined, 'Pending');
  assert.deepEqual(c, { type: 'ContainersReady', status: 'False', reason: 'UnknownContainerStatuses' });
});

test('ContainersReady names unknown and unready containers, sidecars included, regular init not', () => {
  const c = generateContainersReadyCondition(pod, [st('init1', false), st('side', false), st('a', true)], 'Running');
  assert.equal(c.status, 'False');
  assert.equal(c.reason, 'ContainersNotReady');
  assert.equal(c.message, 'containers with unknown status: [b], containers with unready status: [side]');
});

test('ContainersReady: Failed pod is never ready; Succeeded with all known is PodCompleted', () => {
  const all = [st('init1', true), st('side', true), st('a', true), st('b', true)];
  assert.equal(generateContainersReadyCondition(pod, all, 'Failed').reason, 'PodFailed');
  assert.equal(generateContainersReadyCondition(pod, all, 'Failed').status, 'False');
  assert.equal(generateContainersReadyCondition(pod, all, 'Succeeded').reason, 'PodCompleted');
  assert.equal(generateContainersReadyCondition(pod, all, 'Running').status, 'True');
});

test('Ready copies ContainersReady when that is not True', () => {
  const c = generatePodReadyCondition(pod, [], [st('side', true), st('a', false), st('b', true)], 'Running');
  assert.deepEqual(c, { type: 'Ready', status: 'False', reason: 'ContainersNotReady', message: 'containers with unready status: [a]' });
});

test('Initialized lists unknown then incomplete init containers', () => {
  const c = generatePodInitializedCondition(pod, [st('side', false, { started: false })], 'Pending');
  assert.equal(c.status, 'False');
  assert.equal(c.reason, 'ContainersNotInitialized');
  assert.equal(c.message, 'containers with unknown status: [init1], containers with incomplete status: [side]');
  assert.deepEqual(generatePodInitializedCondition(pod, undefined, 'Pending'),
    { type: 'Initialized', status: 'False', reason: 'UnknownContainerStatuses' });
});

test('Initialized is True once a regular container ran, even if init statuses say otherwise', () => {
  const statuses = [st('init1', false, { state: { waiting: {} } }), st('side', false, { started: false }), st('a', false)];
  assert.deepEqual(generatePodInitializedCondition(pod, statuses, 'Running'), { type: 'Initialized', status: 'True' });
});

function sb(over: Partial<SandboxRuntimeStatus> = {}): SandboxRuntimeStatus {
  return { id: 's', state: 'ready', createdAt: 1, attempt: 0, ip: '10.0.0.2', additionalIps: [], hostNetwork: false, labels: {}, annotations: {}, ...over };
}
function rt(sandboxStatuses: SandboxRuntimeStatus[]): RuntimePodStatus {
  return { uid: 'u', name: 'p', namespace: 'ns', ips: [], sandboxStatuses, containerStatuses: [], timestamp: 0 };
}

test('podSandboxChanged: none, two ready, newest not ready, network mode differs', () => {
  assert.equal(podSandboxChanged(pod, undefined), true);
  assert.equal(podSandboxChanged(pod, rt([sb()])), false);
  assert.equal(podSandboxChanged(pod, rt([sb(), sb({ id: 't' })])), true);
  assert.equal(podSandboxChanged(pod, rt([sb({ state: 'notready' }), sb({ id: 'old' })])), true);
  assert.equal(podSandboxChanged(pod, rt([sb({ hostNetwork: true })])), true);
});

test('updateLastTransitionTime keeps the old time only when the status is unchanged', () => {
  const old: PodStatus = { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: 'T1' }, { type: 'Initialized', status: 'False', lastTransitionTime: 'T1' }] };
  const cur: PodStatus = { conditions: [{ type: 'Ready', status: 'True' }, { type: 'Initialized', status: 'True' }, { type: 'PodScheduled', status: 'True' }] };
  for (const t of ['Ready', 'Initialized', 'PodScheduled', 'ContainersReady']) updateLastTransitionTime(cur, old, t, 'T2');
  assert.deepEqual(cur.conditions!.map((c) => c.lastTransitionTime), ['T1', 'T2', 'T2']);
});
