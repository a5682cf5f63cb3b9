// Ephemeral containers in the runtime's decisions and the status: computePodActions starts one
// the runtime has never seen (also while init containers run), never again once it exited, and
// does not kill a running one as "not in the pod spec"; the config of one with a target shares
// the target's PID namespace (TARGET + target_id) unless the pod shares one already; the status
// reports ephemeralContainerStatuses as upstream (state, image, imageID, containerID, never ready).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Container, EphemeralContainer, Pod } from '../../src/api/types.js';
import { computePodActions } from '../../src/runtime/pod-actions.js';
import { hashContainer } from '../../src/runtime/container-hash.js';
import { applyTargetNamespace, targetContainerID } from '../../src/runtime/ephemeral.js';
import { generateContainerConfig } from '../../src/runtime/container-config.js';
import { generateAPIPodStatus } from '../../src/status/generate.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../src/runtime/types.js';

const T0 = Date.UTC(2026, 0, 1);

function mkPod(ephemeral: EphemeralContainer[], init: Container[] = []): Pod {
  const pod: Pod = {
    metadata: { uid: 'uid-1', name: 'foo', namespace: 'default' },
    spec: { containers: [{ name: 'app', image: 'busybox' }], restartPolicy: 'Always', ephemeralContainers: ephemeral },
  };
  if (init.length) pod.spec.initContainers = init;
  return pod;
}

function ctr(name: string, over: Partial<ContainerRuntimeStatus> = {}): ContainerRuntimeStatus {
  return {
    id: `id-${name}`, containerID: `containerd://id-${name}`, name, state: 'running', createdAt: T0, startedAt: T0, finishedAt: 0,
    exitCode: 0, image: 'busybox', imageRef: 'sha256:abc', hash: hashContainer({ name, image: 'busybox' }), restartCount: 0, reason: '', message: '',
    labels: {}, annotations: {}, ...over,
  };
}

function status(containers: ContainerRuntimeStatus[]): RuntimePodStatus {
  return {
    uid: 'uid-1', name: 'foo', namespace: 'default', ips: ['10.1.1.1'],
    sandboxStatuses: [{ id: 'sb1', state: 'ready', createdAt: T0 - 1000, attempt: 0, ip: '10.1.1.1', additionalIps: [], hostNetwork: false, labels: {}, annotations: {} }],
    containerStatuses: containers, timestamp: T0,
  };
}

const debug: EphemeralContainer = { name: 'debugger', image: 'busybox', targetContainerName: 'app', stdin: true, tty: true };

test('computePodActions: an ephemeral container the runtime has never seen is started, once', () => {
  const pod = mkPod([debug]);
  const fresh = computePodActions(pod, status([ctr('app')]));
  assert.deepEqual(fresh.ephemeralContainersToStart, [0]);
  assert.deepEqual(fresh.containersToStart, []);
  assert.equal(fresh.killPod, false);

  const runningDebug = computePodActions(pod, status([ctr('debugger', { hash: 'whatever' }), ctr('app')]));
  assert.deepEqual(runningDebug.ephemeralContainersToStart, []);
  assert.deepEqual(runningDebug.containersToKill, [], 'a running ephemeral container is in the pod spec; its hash restarts nothing');

  const exited = computePodActions(pod, status([ctr('debugger', { state: 'exited', exitCode: 1, finishedAt: T0 + 5 }), ctr('app')]));
  assert.deepEqual(exited.ephemeralContainersToStart, [], 'never restarted, whatever the pod restartPolicy');
  assert.deepEqual(exited.containersToStart, []);
});

test('computePodActions: an ephemeral container starts while an init container still runs; not with a new sandbox', () => {
  const pod = mkPod([{ name: 'debugger', image: 'busybox' }], [{ name: 'init', image: 'busybox' }]);
  const initializing = computePodActions(pod, status([ctr('init')]));
  assert.deepEqual(initializing.ephemeralContainersToStart, [0]);
  assert.deepEqual(initializing.initContainersToStart, []);
  const noSandbox = computePodActions(pod, { ...status([]), sandboxStatuses: [] });
  assert.equal(noSandbox.createSandbox, true);
  assert.deepEqual(noSandbox.ephemeralContainersToStart, []);
});

test('the target container\'s PID namespace: TARGET with its id; a pod that shares one keeps it; a missing target is an error', () => {
  const pod = mkPod([debug]);
  const rs = status([ctr('app', { id: 'newest-app' }), ctr('app', { id: 'older-app', state: 'exited', createdAt: T0 - 10 })]);
  assert.equal(targetContainerID(debug, rs), 'newest-app');
  assert.equal(targetContainerID({ name: 'd', image: 'busybox' }, rs), undefined);
  assert.throws(() => targetContainerID({ ...debug, targetContainerName: 'gone' }, rs), /unable to find target container gone/);

  const opts = { podIPs: ['10.1.1.1'], hostIPs: ['10.0.0.1'], nodeName: 'n1', imageRef: 'sha256:abc', memoryCapacityBytes: 1 << 30 };
  const config = generateContainerConfig(pod, debug, 0, opts);
  assert.equal(config.linux?.security_context?.namespace_options?.pid, 'CONTAINER');
  applyTargetNamespace(config, 'newest-app');
  assert.equal(config.linux?.security_context?.namespace_options?.pid, 'TARGET');
  assert.equal(config.linux?.security_context?.namespace_options?.target_id, 'newest-app');
  assert.equal(config.stdin, true);
  assert.equal(config.tty, true);

  const shared = mkPod([debug]);
  shared.spec.shareProcessNamespace = true;
  const sharedConfig = generateContainerConfig(shared, debug, 0, opts);
  applyTargetNamespace(sharedConfig, 'newest-app');
  assert.equal(sharedConfig.linux?.security_context?.namespace_options?.pid, 'POD');
  assert.ok(!sharedConfig.linux?.security_context?.namespace_options?.target_id);
});

test('status: ephemeralContainerStatuses with state, image, imageID and containerID; waiting before it runs; never ready', () => {
  const pod = mkPod([debug, { name: 'another', image: 'busybox:1.36' }]);
  const before = generateAPIPodStatus({ pod, runtime: status([ctr('app')]), hostIPs: ['10.0.0.1'], now: T0 + 2000 });
  assert.deepEqual(before.ephemeralContainerStatuses?.map((s) => [s.name, s.state.waiting?.reason]), [['another', 'ContainerCreating'], ['debugger', 'ContainerCreating']]);

  const rs = status([
    ctr('debugger', { startedAt: T0 + 1000, imageRef: 'sha256:dbg' }),
    ctr('another', { state: 'exited', exitCode: 0, startedAt: T0 + 1000, finishedAt: T0 + 3000, image: 'busybox:1.36' }),
    ctr('app'),
  ]);
  const s = generateAPIPodStatus({ pod, runtime: rs, hostIPs: ['10.0.0.1'], now: T0 + 4000, previous: before });
  const [another, dbg] = s.ephemeralContainerStatuses!;
  assert.deepEqual(dbg, {
    name: 'debugger', state: { running: { startedAt: '2026-01-01T00:00:01Z' } }, lastState: {}, ready: false, restartCount: 0,
    image: 'busybox', imageID: 'sha256:dbg', containerID: 'containerd://id-debugger',
  });
  assert.equal(another!.state.terminated?.reason, 'Completed');
  assert.equal(another!.image, 'busybox:1.36');
  // the pod's phase and readiness are the regular containers' alone
  assert.equal(s.phase, 'Running');
  assert.equal(s.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
  assert.deepEqual(Object.keys(s).slice(-2), ['qosClass', 'ephemeralContainerStatuses']);
  // a pod without ephemeral containers has no such field
  assert.equal('ephemeralContainerStatuses' in generateAPIPodStatus({ pod: mkPod([]), runtime: status([ctr('app')]), hostIPs: [], now: T0 }), false);
});
