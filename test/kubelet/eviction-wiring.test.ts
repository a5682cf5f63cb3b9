// The kubelet's side of eviction, built from doubles: admission refuses a pod with upstream's
// rejection status and event; an evicted pod is killed with the grace given and stays Failed
// with reason Evicted, its message and a DisruptionTarget condition.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kubelet } from '../../src/kubelet/kubelet.js';
import { harness, mkPod, until } from './doubles.js';

async function started() {
  const dir = await mkdtemp(join(tmpdir(), 'kts-evict-'));
  const h = harness(dir);
  const k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
  await k.start();
  h.plegWiring!.cache.updateTime(Number.MAX_SAFE_INTEGER);
  return { h, k, dir };
}

test('a pod refused by an admit handler gets no worker, a Failed status and a Warning event', async () => {
  const { h, k, dir } = await started();
  try {
    k.addPodAdmitHandler((pod) => (pod.metadata.name === 'pod-b'
      ? { admit: false, reason: 'Evicted', message: 'The node had condition: [MemoryPressure]. ' }
      : { admit: true }));
    h.sources.onUpdate({ op: 'ADD', pods: [mkPod('a'), mkPod('b')], source: 'file' });
    await until(() => h.runtime.calls.includes('syncPod a'));
    assert.ok(!h.runtime.calls.includes('syncPod b'));
    const status = k.getPods().find((p) => p.metadata.uid === 'b')!.status!;
    assert.deepEqual(status, { qosClass: 'BestEffort', phase: 'Failed', reason: 'Evicted', message: 'Pod was rejected: The node had condition: [MemoryPressure]. ' });
    assert.ok(k.events.recent().some((e) => e.object === 'Pod default/pod-b' && e.type === 'Warning' && e.reason === 'Evicted'));
    assert.deepEqual(k.activePods().map((p) => p.metadata.uid), ['a']);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('evictPod kills the pod with the grace given and leaves it Failed/Evicted with a DisruptionTarget condition', async () => {
  const { h, k, dir } = await started();
  try {
    h.sources.onUpdate({ op: 'ADD', pods: [mkPod('a')], source: 'file' });
    await until(() => h.runtime.calls.includes('syncPod a'));
    const pod = k.activePods()[0]!;
    const message = 'The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. ';
    k.evictPod(pod, 1, message);
    assert.deepEqual(k.activePods(), []);
    await until(() => h.runtime.calls.includes('killPod a') && k.podTerminated('a'));
    const status = k.getPods()[0]!.status!;
    assert.equal(status.phase, 'Failed');
    assert.equal(status.reason, 'Evicted');
    assert.equal(status.message, message);
    const dt = status.conditions?.find((c) => c.type === 'DisruptionTarget');
    assert.equal(dt?.status, 'True');
    assert.equal(dt?.reason, 'TerminationByKubelet');
    assert.equal(dt?.message, message);
    // GC's view: the evicted static pod's runtime leftovers may go, its content (still wanted) not
    assert.equal(k.podRuntimeRemovable('a'), true);
    assert.equal(k.podContentRemovable('a'), false);
    assert.equal(k.podContentRemovable('never-seen'), true);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('evictPod for a local storage limit leaves the pod Failed/Evicted without a DisruptionTarget condition', async () => {
  const { h, k, dir } = await started();
  try {
    h.sources.onUpdate({ op: 'ADD', pods: [mkPod('a')], source: 'file' });
    await until(() => h.runtime.calls.includes('syncPod a'));
    const message = 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ';
    k.evictPod(k.activePods()[0]!, 1, message, { disruptionTarget: false });
    await until(() => h.runtime.calls.includes('killPod a') && k.podTerminated('a'));
    const status = k.getPods()[0]!.status!;
    assert.deepEqual([status.phase, status.reason, status.message], ['Failed', 'Evicted', message]);
    assert.equal(status.conditions?.find((c) => c.type === 'DisruptionTarget'), undefined);
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('an evicted pod whose container exits 0 while being killed stays Failed/Evicted, not Succeeded', async () => {
  const { h, k, dir } = await started();
  try {
    // after the kill the runtime shows the container exited 0 (it caught SIGTERM and left cleanly)
    let killed = false;
    const recorder = h.runtime;
    const origKill = recorder.killPod.bind(recorder);
    recorder.killPod = async (pod, status) => { await origKill(pod, status); killed = true; };
    const origStatus = recorder.getPodStatus.bind(recorder);
    recorder.getPodStatus = async (uid, name, namespace) => {
      const s = await origStatus(uid, name, namespace);
      if (!killed) return s;
      s.sandboxStatuses = [{ id: 's1', state: 'notready', createdAt: 1, attempt: 0, ip: '', additionalIps: [], hostNetwork: false, labels: {}, annotations: {} }];
      s.containerStatuses = [{
        id: 'c1', containerID: 'containerd://c1', name: 'c', state: 'exited', createdAt: 2, startedAt: 3, finishedAt: 4,
        exitCode: 0, image: 'busybox', imageRef: 'busybox@sha256:0', hash: '0', restartCount: 0, reason: 'Completed', message: '', labels: {}, annotations: {},
      }];
      return s;
    };
    h.sources.onUpdate({ op: 'ADD', pods: [mkPod('a')], source: 'file' });
    await until(() => h.runtime.calls.includes('syncPod a'));
    const message = 'The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. ';
    k.evictPod(k.activePods()[0]!, 30, message);
    await until(() => killed && k.podTerminated('a'));
    const status = k.getPods()[0]!.status!;
    assert.deepEqual([status.phase, status.reason, status.message], ['Failed', 'Evicted', message]);
    assert.equal(status.containerStatuses?.[0]?.state.terminated?.exitCode, 0);
    assert.equal(status.conditions?.find((c) => c.type === 'DisruptionTarget')?.status, 'True');
  } finally {
    await k.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
