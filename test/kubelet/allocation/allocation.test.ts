// The allocation manager and its checkpoint (upstream pkg/kubelet/allocation, 1.33): the file is
// byte for byte what upstream writes (golden value from upstream's state_checkpoint_test), a
// resize is allocated, Deferred or Infeasible as canResizePod decides, and the status shows it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod, PodStatus } from '../../../src/api/types.js';
import { checkpointChecksum, decodeCheckpoint, encodeCheckpoint } from '../../../src/kubelet/allocation/checkpoint.js';
import { AllocationManager } from '../../../src/kubelet/allocation/allocation-manager.js';
import { canResizePod } from '../../../src/kubelet/allocation/resize-admission.js';
import { applyResizeStatus } from '../../../src/kubelet/allocation/resize-status.js';
import type { AdmissionNode } from '../../../src/kubelet/admission.js';
import type { RuntimePodStatus } from '../../../src/runtime/types.js';
import type { Logger } from '../../../src/util/log.js';

function testLog(lines: string[] = []): Logger {
  const log: Record<string, unknown> = {};
  const rec = (msg: string, fields?: unknown) => { lines.push(`${msg} ${JSON.stringify(fields ?? {})}`); };
  Object.assign(log, { info: rec, warn: rec, error: rec, v: () => log, with: () => log });
  return log as unknown as Logger;
}

// upstream 1.33 state_checkpoint_test (Test_stateCheckpoint_formatUpgraded)
const UPSTREAM_133 = '{"data":"{\\"allocationEntries\\":{\\"pod1\\":{\\"container1\\":{\\"requests\\":{\\"cpu\\":\\"1Ki\\",\\"memory\\":\\"1Ki\\"}}}}}","checksum":1555601526}';
// upstream 1.34's payload shape, same test
const UPSTREAM_134 = '{"data":"{\\"entries\\":{\\"pod1\\":{\\"ContainerResources\\":{\\"container1\\":{\\"requests\\":{\\"cpu\\":\\"1Ki\\",\\"memory\\":\\"1Ki\\"}}}}}}","checksum":1178570812}';

test('checkpoint: written byte for byte as upstream 1.33 writes it (golden checksum), and upstream 1.33 and 1.34 files read back', () => {
  const m = new Map([['pod1', new Map([['container1', { requests: { cpu: '1Ki', memory: '1Ki' } }]])]]);
  assert.equal(encodeCheckpoint(m), UPSTREAM_133);
  for (const text of [UPSTREAM_133, UPSTREAM_134]) {
    const back = decodeCheckpoint('f', text);
    assert.deepEqual(back.get('pod1')?.get('container1'), { requests: { cpu: '1Ki', memory: '1Ki' } });
  }
  assert.equal(checkpointChecksum(JSON.parse(UPSTREAM_134).data), 1178570812);
  assert.throws(() => decodeCheckpoint('/x/allocated_pods_state', UPSTREAM_133.replace('1555601526', '1')), /checkpoint is corrupted, please drain this node and delete pod resource information checkpoint file "\/x\/allocated_pods_state"/);
});

const node: AdmissionNode = { name: 'n', labels: {}, taints: [], allocatable: { cpu: 2000, memory: 4 * 1024 ** 3, pods: 110 } };

function pod(uid: string, cpu: string, mem = '64Mi', gen = 1): Pod {
  return { metadata: { uid, name: uid, namespace: 'default', generation: gen }, spec: { containers: [{ name: 'c', image: 'i', resources: { requests: { cpu, memory: mem }, limits: { cpu: '4', memory: '1Gi' } } }] } };
}

test('canResizePod: beyond allocatable is Infeasible (memory named first), a static pod is Infeasible, a refused admission is Deferred with its message', () => {
  const ok = () => ({ admit: true });
  assert.deepEqual(canResizePod(pod('a', '3'), false, node, ok), { fit: false, reason: 'Infeasible', message: 'Node didn\'t have enough capacity: cpu, requested: 3000, capacity: 2000' });
  assert.deepEqual(canResizePod(pod('a', '3', '5Gi'), false, node, ok), { fit: false, reason: 'Infeasible', message: `Node didn't have enough capacity: memory, requested: ${5 * 1024 ** 3}, capacity: ${4 * 1024 ** 3}` });
  assert.deepEqual(canResizePod(pod('a', '1'), true, node, ok), { fit: false, reason: 'Infeasible', message: 'In-place resize of static-pods is not supported' });
  const refused = () => ({ admit: false, reason: 'OutOfcpu', message: 'Node didn\'t have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000' });
  assert.deepEqual(canResizePod(pod('a', '1500m'), false, node, refused), { fit: false, reason: 'Deferred', message: 'Node didn\'t have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000' });
  assert.deepEqual(canResizePod(pod('a', '1'), false, node, ok), { fit: true });
});

test('AllocationManager: admission allocates; a resize that fits is allocated and in progress; one that does not is held with the allocated pod; both survive a restart through the checkpoint', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-alloc-'));
  try {
    let now = 1_700_000_000_000;
    const am = new AllocationManager({ rootDir: dir, log: testLog(), now: () => now });
    await am.load();
    const p1 = pod('u1', '500m');
    am.setAllocated(p1);
    // resized to 1500m: Deferred (the fit says so); the runtime keeps the allocated 500m
    const want = pod('u1', '1500m', '64Mi', 2);
    const held = am.handlePodResourcesResize(want, () => ({ fit: false, reason: 'Deferred', message: 'no room' }));
    assert.equal(held.spec.containers[0]!.resources!.requests!.cpu, '500m');
    assert.deepEqual(am.resizeConditions('u1').pending, { reason: 'Deferred', message: 'no room', generation: 2, since: now });
    now += 1000;
    // room now: allocated, pending cleared, in progress
    const run = am.handlePodResourcesResize(want, () => ({ fit: true }));
    assert.equal(run.spec.containers[0]!.resources!.requests!.cpu, '1500m');
    assert.equal(am.resizeConditions('u1').pending, undefined);
    assert.equal(am.resizeConditions('u1').inProgress?.generation, 2);
    am.setActuated('u1', 'c', { requests: { cpu: '500m', memory: '64Mi' }, limits: { cpu: '4', memory: '1Gi' } });
    await am.flush();
    const again = new AllocationManager({ rootDir: dir, log: testLog(), now: () => now });
    await again.load();
    assert.equal(again.getContainerAllocation('u1', 'c')?.requests?.cpu, '1500m');
    assert.equal(again.getActuated('u1', 'c')?.requests?.cpu, '500m');
    const file = await readFile(join(dir, 'allocated_pods_state'), 'utf8');
    assert.match(file, /^\{"data":"\{\\"allocationEntries\\":\{\\"u1\\":\{\\"c\\":/);
    // a corrupt checkpoint is logged and ignored, not fatal
    await writeFile(join(dir, 'actuated_pods_state'), '{"data":"{}","checksum":1}');
    const lines: string[] = [];
    const third = new AllocationManager({ rootDir: dir, log: testLog(lines), now: () => now });
    await third.load();
    assert.equal(third.getActuated('u1', 'c'), undefined);
    assert.ok(lines.some((l) => l.includes('actuated_pods_state')), lines.join('\n'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('applyResizeStatus: allocatedResources and resources (runtime figures, spelled as allocated), PodResizePending and PodResizeInProgress with observedGeneration; none once actuated', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-alloc-'));
  try {
    const am = new AllocationManager({ rootDir: dir, log: testLog(), now: () => Date.UTC(2026, 0, 1) });
    const p = pod('u2', '500m');
    am.setAllocated(p);
    am.setActuated('u2', 'c', { requests: { cpu: '250m', memory: '64Mi' }, limits: { cpu: '4', memory: '1Gi' } });
    const rs: RuntimePodStatus = {
      uid: 'u2', name: 'u2', namespace: 'default', ips: [], sandboxStatuses: [], timestamp: 0,
      containerStatuses: [{ id: 'x', containerID: 'containerd://x', name: 'c', state: 'running', createdAt: 0, startedAt: 0, finishedAt: 0, exitCode: 0, image: '', imageRef: '', hash: '', restartCount: 0, reason: '', message: '', labels: {}, annotations: {},
        resources: { cpuQuota: 400000, cpuPeriod: 100000, cpuShares: 256, memoryLimit: 1024 ** 3 } }],
    };
    const base: PodStatus = { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }, { type: 'PodResizePending', status: 'True', reason: 'Deferred' }], containerStatuses: [{ name: 'c', state: { running: { startedAt: 'x' } }, lastState: {}, ready: true, restartCount: 0, image: 'i', imageID: '' }] };
    am.handlePodResourcesResize(pod('u2', '3', '64Mi', 3), () => ({ fit: false, reason: 'Infeasible', message: 'too big' }));
    const s = applyResizeStatus(p, base, rs, am);
    const cs = s.containerStatuses![0]!;
    assert.deepEqual(cs.allocatedResources, { cpu: '500m', memory: '64Mi' });
    assert.deepEqual(cs.resources, { limits: { cpu: '4', memory: '1Gi' }, requests: { cpu: '250m', memory: '64Mi' } });
    assert.deepEqual(s.conditions!.map((c) => [c.type, c.reason, c.message, c.observedGeneration]), [
      ['Ready', undefined, undefined, undefined],
      ['PodResizePending', 'Infeasible', 'too big', 3],
      ['PodResizeInProgress', undefined, undefined, 1],
    ]);
    // the runtime runs the allocation: no InProgress; the spec back at the allocation: no Pending
    am.setActuated('u2', 'c', p.spec.containers[0]!.resources!);
    am.handlePodResourcesResize(p, () => ({ fit: true }));
    const done = applyResizeStatus(p, base, rs, am);
    assert.deepEqual(done.conditions!.map((c) => c.type), ['Ready']);
    await am.flush(); // the checkpoint writes in flight end before the directory goes
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
