// Admission as upstream's kubelet: reasons and messages for maxPods, cpu/memory/ephemeral-storage
// fit, node affinity/selector, node name, host ports, NoExecute taints; the rejected status;
// the activeDeadlineSeconds clock; and the sync loop keeping a refused pod out of the workers.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { activeDeadlineLeftMs, canAdmitPod, podRequests, rejectedStatus, type AdmissionNode } from '../../src/kubelet/admission.js';
import { PodManager } from '../../src/kubelet/pod-manager.js';
import { SyncLoop } from '../../src/kubelet/sync-loop.js';
import { WorkQueue } from '../../src/kubelet/work-queue.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble, mkPod } from './doubles.js';

const node = (over: Partial<AdmissionNode> = {}): AdmissionNode => ({
  name: 'n1',
  labels: { 'kubernetes.io/hostname': 'n1', 'kubernetes.io/os': 'linux', zone: 'a' },
  taints: [],
  allocatable: { pods: 110, cpu: 2000, memory: 4 * 2 ** 30, 'ephemeral-storage': 10 * 2 ** 30 },
  ...over,
});

function withRequests(uid: string, requests: Record<string, string>, extra: Partial<Pod['spec']> = {}): Pod {
  const p = mkPod(uid);
  p.spec.containers[0]!.resources = { requests };
  Object.assign(p.spec, extra);
  return p;
}

describe('canAdmitPod', () => {
  it('OutOfpods beyond maxPods, with upstream\'s message', () => {
    const r = canAdmitPod(mkPod('x'), [mkPod('a'), mkPod('b')], node({ allocatable: { pods: 2 } }));
    assert.deepEqual(r, { admit: false, reason: 'OutOfpods', message: "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2" });
    assert.equal(canAdmitPod(mkPod('x'), [mkPod('a')], node({ allocatable: { pods: 2 } })).admit, true);
  });

  it('OutOfcpu / OutOfmemory / OutOfephemeral-storage in millicores and bytes, against what others request', () => {
    const others = [withRequests('a', { cpu: '1500m', memory: '1Gi' })];
    assert.deepEqual(canAdmitPod(withRequests('x', { cpu: '600m' }), others, node()), {
      admit: false, reason: 'OutOfcpu', message: "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000",
    });
    assert.deepEqual(canAdmitPod(withRequests('x', { memory: '3500Mi' }), others, node()), {
      admit: false, reason: 'OutOfmemory', message: `Node didn't have enough resource: memory, requested: ${3500 * 1024 * 1024}, used: ${2 ** 30}, capacity: ${4 * 2 ** 30}`,
    });
    assert.equal(canAdmitPod(withRequests('x', { 'ephemeral-storage': '11Gi' }), [], node()).reason, 'OutOfephemeral-storage');
    assert.equal(canAdmitPod(withRequests('x', { cpu: '500m', memory: '1Gi' }), others, node()).admit, true);
    // pods first, then cpu: the first failure wins
    assert.equal(canAdmitPod(withRequests('x', { cpu: '5' }), others, node({ allocatable: { pods: 1, cpu: 2000 } })).reason, 'OutOfpods');
  });

  it('requests: containers summed, the largest init container if more, sidecars added, overhead on top', () => {
    const p = withRequests('x', { cpu: '100m' });
    p.spec.containers.push({ name: 'd', image: 'x', resources: { requests: { cpu: '200m' } } });
    p.spec.initContainers = [
      { name: 'side', image: 'x', restartPolicy: 'Always', resources: { requests: { cpu: '50m' } } },
      { name: 'big', image: 'x', resources: { requests: { cpu: '1' } } },
    ];
    p.spec.overhead = { cpu: '10m' };
    assert.equal(podRequests(p).cpu, 1060);
  });

  it('nodeSelector and required node affinity: reason NodeAffinity', () => {
    const sel = mkPod('x');
    sel.spec.nodeSelector = { zone: 'b' };
    assert.deepEqual(canAdmitPod(sel, [], node()), { admit: false, reason: 'NodeAffinity', message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector" });
    sel.spec.nodeSelector = { zone: 'a' };
    assert.equal(canAdmitPod(sel, [], node()).admit, true);
    const aff = mkPod('y');
    aff.spec.affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [
      { matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }] },
      { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] },
    ] } } };
    assert.equal(canAdmitPod(aff, [], node()).admit, true, 'terms are ORed');
    aff.spec.affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }] } } };
    assert.equal(canAdmitPod(aff, [], node()).reason, 'NodeAffinity');
  });

  it('node name and host ports', () => {
    const other = mkPod('x');
    other.spec.nodeName = 'n2';
    assert.deepEqual(canAdmitPod(other, [], node()), { admit: false, reason: 'NodeName', message: "Predicate NodeName failed: node(s) didn't match the requested node name" });
    const a = mkPod('a');
    a.spec.containers[0]!.ports = [{ containerPort: 80, hostPort: 8080 }];
    const b = mkPod('b');
    b.spec.containers[0]!.ports = [{ containerPort: 80, hostPort: 8080, hostIP: '127.0.0.1' }];
    assert.deepEqual(canAdmitPod(b, [a], node()), { admit: false, reason: 'NodePorts', message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports" });
    b.spec.containers[0]!.ports = [{ containerPort: 80, hostPort: 8080, protocol: 'UDP' }];
    assert.equal(canAdmitPod(b, [a], node()).admit, true, 'another protocol is another port');
  });

  it('NoExecute taints without a toleration refuse an API pod, not a static pod; NoSchedule is not the kubelet\'s', () => {
    const taints = [{ key: 'dedicated', value: 'db', effect: 'NoExecute' }, { key: 'x', effect: 'NoSchedule' }];
    const p = mkPod('x');
    assert.deepEqual(canAdmitPod(p, [], node({ taints })), { admit: false, reason: 'TaintToleration', message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate" });
    assert.equal(canAdmitPod(p, [], node({ taints }), true).admit, true);
    p.spec.tolerations = [{ key: 'dedicated', operator: 'Equal', value: 'db', effect: 'NoExecute' }];
    assert.equal(canAdmitPod(p, [], node({ taints })).admit, true);
    p.spec.tolerations = [{ key: 'dedicated', operator: 'Equal', value: 'web' }];
    assert.equal(canAdmitPod(p, [], node({ taints })).admit, false);
  });

  it('the rejected status: Failed, the reason, "Pod was rejected: " and the message', () => {
    assert.deepEqual(rejectedStatus(mkPod('x'), 'OutOfpods', 'm'), { phase: 'Failed', reason: 'OutOfpods', message: 'Pod was rejected: m' });
  });

  it('activeDeadlineSeconds counts from the status startTime', () => {
    const p = mkPod('x');
    p.spec.activeDeadlineSeconds = 30;
    const start = '2026-01-01T00:00:00Z';
    assert.equal(activeDeadlineLeftMs(p, start, Date.parse(start) + 10_000), 20_000);
    assert.equal(activeDeadlineLeftMs(p, start, Date.parse(start) + 30_000), 0);
    assert.equal(activeDeadlineLeftMs(p, undefined, 0), undefined);
    assert.equal(activeDeadlineLeftMs(mkPod('y'), start, 0), undefined);
  });
});

describe('the sync loop with admission', () => {
  it('a refused pod is kept in the pod manager with its Failed status, never run; refused and terminal pods do not count', () => {
    const podManager = new PodManager();
    const updates: string[] = [];
    const statuses = new Map<string, string>();
    const rejected: string[] = [];
    const sl = new SyncLoop({
      clock: new FakeClock(),
      log: loggerDouble(),
      podManager,
      podWorkers: { updatePod: (o) => void updates.push(`${o.updateType} ${o.pod.metadata.uid}`) },
      workQueue: new WorkQueue(new FakeClock()),
      runtimeUp: () => true,
      admitPod: (pod, others) => canAdmitPod(pod, others, node({ allocatable: { pods: 1 } })),
      podStatus: (uid) => (statuses.has(uid) ? { phase: statuses.get(uid) as 'Failed' } : undefined),
      rejectPod: (pod, reason, _m, status) => {
        rejected.push(`${pod.metadata.uid} ${reason}`);
        statuses.set(pod.metadata.uid!, status.phase!);
      },
    });
    const a = { ...mkPod('a'), metadata: { ...mkPod('a').metadata, creationTimestamp: '2026-01-01T00:00:01Z' } };
    const b = { ...mkPod('b'), metadata: { ...mkPod('b').metadata, creationTimestamp: '2026-01-01T00:00:02Z' } };
    sl.handlePodUpdate({ op: 'ADD', pods: [b, a], source: 'api' });
    assert.deepEqual(updates, ['create a'], 'the older pod is admitted first');
    assert.deepEqual(rejected, ['b OutOfpods']);
    assert.ok(podManager.getPodByUID('b'));
    sl.handlePodUpdate({ op: 'UPDATE', pods: [b], source: 'api' });
    sl.drainPlegChannel();
    assert.deepEqual(updates, ['create a'], 'a refused pod is never synced');
    statuses.set('a', 'Succeeded');
    sl.handlePodUpdate({ op: 'ADD', pods: [mkPod('c')], source: 'api' });
    assert.deepEqual(updates, ['create a', 'create c'], 'a terminal pod and a refused pod leave room');
  });
});
