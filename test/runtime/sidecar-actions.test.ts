// computePodActions for sidecars (restartable init containers) with probes, as upstream's
// computeInitContainerActions: the next init container waits for a running sidecar's startup
// probe to succeed (not once the pod has initialized); a failed startup or liveness probe
// restarts the sidecar.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/api/types.js';
import { computePodActions, type ProbeResultsView } from '../../src/runtime/pod-actions.js';
import { hashContainer } from '../../src/runtime/container-hash.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../src/runtime/types.js';

const T0 = Date.UTC(2026, 0, 1);
const probe = { exec: { command: ['true'] }, periodSeconds: 1 };

function mkPod(): Pod {
  return {
    metadata: { uid: 'uid-1', name: 'foo', namespace: 'default' },
    spec: {
      restartPolicy: 'Always',
      initContainers: [
        { name: 'sidecar1', image: 'busybox', restartPolicy: 'Always', startupProbe: probe, livenessProbe: probe },
        { name: 'setup', image: 'busybox' },
      ],
      containers: [{ name: 'main', image: 'busybox' }],
    },
  };
}

function ctr(pod: Pod, name: string, over: Partial<ContainerRuntimeStatus> = {}): ContainerRuntimeStatus {
  const spec = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((c) => c.name === name)!;
  return {
    id: `id-${name}`, containerID: `containerd://id-${name}`, name, state: 'running', createdAt: T0, startedAt: T0, finishedAt: 0,
    exitCode: 0, image: 'busybox', imageRef: 'sha256:x', hash: hashContainer(spec), restartCount: 0, reason: '', message: '',
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

/** The sidecar's probe results (the other containers have none). */
function probes(startup: 'Success' | 'Failure' | 'Unknown' | undefined, liveness: 'Success' | 'Failure' | undefined = 'Success'): ProbeResultsView {
  const mine = (id: string) => id === 'containerd://id-sidecar1';
  return { startup: (id) => (mine(id) ? startup : undefined), liveness: (id) => (mine(id) ? liveness : undefined) };
}

test('the next init container waits for the sidecar\'s startup probe', () => {
  const pod = mkPod();
  const rs = status([ctr(pod, 'sidecar1')]);
  for (const r of [undefined, 'Unknown'] as const) {
    const a = computePodActions(pod, rs, probes(r));
    assert.deepEqual([a.initContainersToStart, a.containersToStart, a.containersToKill, a.killPod], [[], [], [], false], `startup ${r}`);
  }
  const ok = computePodActions(pod, rs, probes('Success'));
  assert.deepEqual(ok.initContainersToStart, [1]);
});

test('a failed startup or liveness probe restarts the sidecar', () => {
  const pod = mkPod();
  const rs = status([ctr(pod, 'sidecar1')]);
  const startup = computePodActions(pod, rs, probes('Failure'));
  assert.deepEqual(startup.containersToKill.map((k) => [k.name, k.reason]), [['sidecar1', 'Init container sidecar1 failed startup probe']]);
  assert.deepEqual(startup.initContainersToStart, [0]);
  const liveness = computePodActions(pod, status([ctr(pod, 'sidecar1'), ctr(pod, 'setup', { state: 'exited', finishedAt: T0 + 1 }), ctr(pod, 'main')]), probes('Success', 'Failure'));
  assert.deepEqual(liveness.containersToKill.map((k) => k.name), ['sidecar1']);
  assert.deepEqual(liveness.initContainersToStart, [0]);
});

test('once the pod has initialized, a sidecar in its startup does not hold the regular containers back', () => {
  const pod = mkPod();
  const rs = status([ctr(pod, 'sidecar1'), ctr(pod, 'setup', { state: 'exited', finishedAt: T0 + 1 }), ctr(pod, 'main', { state: 'exited', exitCode: 1, finishedAt: T0 + 2 })]);
  const a = computePodActions(pod, rs, probes('Unknown'));
  assert.deepEqual(a.containersToStart, [0], 'main is restarted meanwhile');
});
