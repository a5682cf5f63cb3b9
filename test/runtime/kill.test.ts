// Graceful kill with doubles: preStop first, then StopContainer with what is left of the grace
// period (2s floor); failures named per container; NotFound is success.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { Pod } from '../../src/api/types.js';
import { PodKiller, MINIMUM_GRACE_PERIOD_SECONDS, type KillCri } from '../../src/runtime/kill.js';
import { HandlerRunner } from '../../src/runtime/hooks.js';
import { CriError } from '../../src/runtime/cri-errors.js';
import { KillPodError } from '../../src/runtime/errors.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../src/runtime/types.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

function pod(grace: number, preStopSleep?: number): Pod {
  return {
    metadata: { uid: 'u1', name: 'web', namespace: 'default' },
    spec: {
      terminationGracePeriodSeconds: grace,
      containers: [{ name: 'main', image: 'busybox', lifecycle: preStopSleep === undefined ? undefined : { preStop: { sleep: { seconds: preStopSleep } } } }],
    },
  };
}

function running(name: string, id = `id-${name}`): ContainerRuntimeStatus {
  return { id, containerID: `containerd://${id}`, name, state: 'running', createdAt: 1, startedAt: 1, finishedAt: 0, exitCode: 0, image: '', imageRef: '', hash: '', restartCount: 0, reason: '', message: '', labels: {}, annotations: {} };
}

function podStatus(containers: ContainerRuntimeStatus[]): RuntimePodStatus {
  return { uid: 'u1', name: 'web', namespace: 'default', ips: ['10.0.0.5'], sandboxStatuses: [{ id: 'sb1', state: 'ready', createdAt: 1, attempt: 0, ip: '10.0.0.5', additionalIps: [], hostNetwork: false, labels: {}, annotations: {} }], containerStatuses: containers, timestamp: 1 };
}

function rig(fail: Record<string, unknown> = {}) {
  const clock = new FakeClock();
  const calls: string[] = [];
  const cri: KillCri = {
    stopContainer: async (id, grace) => {
      calls.push(`stop ${id} ${grace}`);
      if (fail[id]) throw fail[id];
    },
    stopPodSandbox: async (id) => {
      calls.push(`stopSandbox ${id}`);
      if (fail[id]) throw fail[id];
    },
  };
  const hooks = new HandlerRunner({ cri: { execSync: async () => ({ stdout: Buffer.from(''), stderr: Buffer.from(''), exit_code: 0 }) }, clock });
  const killer = new PodKiller({ cri, hooks, clock, log: loggerDouble(), hostIPs: () => ['10.0.0.1'] });
  return { clock, calls, killer };
}

test('preStop runs first; StopContainer gets what is left of the grace period', async () => {
  const r = rig();
  const p = r.killer.killPod(pod(30, 4), podStatus([running('main')]), undefined);
  for (let i = 0; i < 5; i++) await new Promise((res) => setImmediate(res));
  assert.deepEqual(r.calls, [], 'StopContainer waits for the preStop hook');
  r.clock.step(4000);
  await p;
  assert.deepEqual(r.calls, ['stop id-main 26', 'stopSandbox sb1']);
});

test('the grace period never drops under the 2s floor; an override replaces the pod\'s', async () => {
  const r = rig();
  await r.killer.killPod(pod(1), podStatus([running('main')]), undefined);
  await r.killer.killPod(pod(30), podStatus([running('main')]), 0);
  assert.deepEqual(r.calls, [`stop id-main ${MINIMUM_GRACE_PERIOD_SECONDS}`, 'stopSandbox sb1', `stop id-main ${MINIMUM_GRACE_PERIOD_SECONDS}`, 'stopSandbox sb1']);
});

test('NotFound is success; other failures make a KillPodError naming the pod and each container', async () => {
  const r = rig({
    'id-gone': new CriError('StopContainer', GrpcStatus.NOT_FOUND, 'no such container'),
    'id-stuck': new CriError('StopContainer', GrpcStatus.DEADLINE_EXCEEDED, 'timed out'),
  });
  await assert.rejects(r.killer.killPod(pod(5), podStatus([running('gone'), running('stuck'), running('main')]), undefined), (err) => {
    assert.ok(err instanceof KillPodError);
    assert.equal(err.code, 'ERR_KILL_POD');
    assert.equal(err.pod, 'default/web');
    assert.deepEqual(err.failures.map((f) => f.split(':')[0]), ['stuck']);
    return true;
  });
  assert.ok(r.calls.includes('stopSandbox sb1'), 'the sandbox is stopped even when a container failed');
});
