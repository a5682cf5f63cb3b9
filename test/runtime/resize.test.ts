// The in-place resize decisions and their order (upstream computePodResizeAction and
// doPodResizeAction): which resource of which container moves, when a restart is asked for, and
// the order of pod cgroup and container updates (limits growing: pod first; shrinking: containers
// first; decreases before increases), the pod memory limit guard against current usage.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Container, Pod, ResourceRequirements } from '../../src/api/types.js';
import { computeContainerResizeAction, doPodResizeAction, emptyResizeActions, type PodCgroupResizeConfig } from '../../src/runtime/resize.js';
import type { ContainerRuntimeStatus } from '../../src/runtime/types.js';

const running = (name: string): ContainerRuntimeStatus => ({
  id: `id-${name}`, containerID: `containerd://id-${name}`, name, state: 'running', createdAt: 0, startedAt: 0, finishedAt: 0,
  exitCode: 0, image: '', imageRef: '', hash: '', restartCount: 0, reason: '', message: '', labels: {}, annotations: {},
});

const rows: { name: string; desired: ResourceRequirements; actuated: ResourceRequirements | undefined; policy?: Container['resizePolicy']; want: 'keep' | 'restart'; cpu?: boolean; memory?: boolean; only?: boolean }[] = [
  { name: 'same amounts, other spellings', desired: { limits: { cpu: '1', memory: '1Gi' } }, actuated: { limits: { cpu: '1000m', memory: '1073741824' } }, want: 'keep' },
  { name: 'cpu limit up', desired: { limits: { cpu: '2' } }, actuated: { limits: { cpu: '1' } }, want: 'keep', cpu: true },
  { name: 'cpu request only', desired: { requests: { cpu: '200m' } }, actuated: { requests: { cpu: '100m' } }, want: 'keep', cpu: true },
  { name: 'cpu requests both at or under 2m count as equal', desired: { requests: { cpu: '1m' } }, actuated: { requests: { cpu: '2m' } }, want: 'keep' },
  { name: 'cpu limits both at or under 10m count as equal', desired: { limits: { cpu: '5m' } }, actuated: { limits: { cpu: '10m' } }, want: 'keep' },
  { name: 'memory limit down', desired: { limits: { memory: '64Mi' } }, actuated: { limits: { memory: '128Mi' } }, want: 'keep', memory: true },
  { name: 'memory request only: nothing to actuate but the record', desired: { requests: { memory: '64Mi' } }, actuated: { requests: { memory: '32Mi' } }, want: 'keep', only: true },
  { name: 'memory with RestartContainer', desired: { limits: { memory: '64Mi' } }, actuated: { limits: { memory: '128Mi' } }, policy: [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }], want: 'restart' },
  { name: 'cpu change with memory RestartContainer: in place', desired: { limits: { cpu: '2', memory: '64Mi' } }, actuated: { limits: { cpu: '1', memory: '64Mi' } }, policy: [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }], want: 'keep', cpu: true },
  { name: 'cpu with RestartContainer', desired: { requests: { cpu: '2' } }, actuated: { requests: { cpu: '1' } }, policy: [{ resourceName: 'cpu', restartPolicy: 'RestartContainer' }], want: 'restart' },
  { name: 'NotRequired is in place', desired: { limits: { memory: '256Mi' } }, actuated: { limits: { memory: '128Mi' } }, policy: [{ resourceName: 'memory', restartPolicy: 'NotRequired' }], want: 'keep', memory: true },
];

for (const r of rows) {
  test(`computeContainerResizeAction: ${r.name}`, () => {
    const actions = emptyResizeActions();
    const c: Container = { name: 'c', resources: r.desired, ...(r.policy ? { resizePolicy: r.policy } : {}) };
    assert.equal(computeContainerResizeAction(c, running('c'), r.actuated, actions), r.want);
    assert.equal(actions.containersToUpdate.cpu.length, r.cpu ? 1 : 0);
    assert.equal(actions.containersToUpdate.memory.length, r.memory ? 1 : 0);
    assert.equal(actions.actuateOnly.length, r.only ? 1 : 0);
    assert.equal(actions.updatePodResources, r.want === 'restart');
  });
}

function burstable(containers: Container[]): Pod {
  return { metadata: { uid: 'u1', name: 'p', namespace: 'default' }, spec: { containers } };
}

function harness(current: PodCgroupResizeConfig, usage = 0) {
  const calls: string[] = [];
  const actuated = new Map<string, ResourceRequirements>();
  const deps = {
    podCgroup: {
      getPodCgroupConfig: async () => ({ ...current }),
      getPodCgroupMemoryUsage: async () => usage,
      setPodCgroupConfig: async (_p: Pod, v: Partial<PodCgroupResizeConfig>) => { calls.push(`pod ${JSON.stringify(v)}`); Object.assign(current, v); },
    },
    updateContainerResources: async (_p: Pod, c: Container) => { calls.push(`ctr ${c.name} ${JSON.stringify(c.resources)}`); },
    setActuated: (_p: Pod, name: string, r: ResourceRequirements) => { actuated.set(name, r); },
  };
  return { calls, actuated, deps };
}

test('doPodResizeAction: limits up: the pod cgroup first, then the containers; the actuated record follows', async () => {
  const a: Container = { name: 'a', resources: { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '300m', memory: '96Mi' } } };
  const pod = burstable([a]);
  const actions = emptyResizeActions();
  computeContainerResizeAction(a, running('a'), { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '200m', memory: '64Mi' } }, actions);
  const h = harness({ cpuQuota: 20000, cpuPeriod: 100000, cpuShares: 102, memoryLimit: 64 * 1024 * 1024 });
  await doPodResizeAction(pod, actions, h.deps);
  assert.deepEqual(h.calls, [
    `pod {"memoryLimit":${96 * 1024 * 1024}}`,
    `ctr a {"limits":{"cpu":"200m","memory":"${96 * 1024 * 1024}"},"requests":{"cpu":"100m","memory":"${32 * 1024 * 1024}"}}`,
    'pod {"cpuQuota":30000,"cpuPeriod":100000}',
    `ctr a {"limits":{"cpu":"300m","memory":"${96 * 1024 * 1024}"},"requests":{"cpu":"100m","memory":"${32 * 1024 * 1024}"}}`,
  ]);
  assert.deepEqual(h.actuated.get('a'), a.resources, 'all moved: the allocation is what it runs');
});

test('doPodResizeAction: limits down: the containers first (the decreasing one before the growing one), then the pod cgroup', async () => {
  const a: Container = { name: 'a', resources: { limits: { cpu: '100m' }, requests: { cpu: '100m' } } };
  const b: Container = { name: 'b', resources: { limits: { cpu: '150m' }, requests: { cpu: '100m' } } };
  const pod = burstable([a, b]);
  const actions = emptyResizeActions();
  computeContainerResizeAction(a, running('a'), { limits: { cpu: '100m' }, requests: { cpu: '100m' } }, actions);
  computeContainerResizeAction(b, running('b'), { limits: { cpu: '50m' }, requests: { cpu: '100m' } }, actions);
  // b grows, a stays: swap to make a shrink
  const actions2 = emptyResizeActions();
  const a2: Container = { name: 'a', resources: { limits: { cpu: '50m' }, requests: { cpu: '50m' } } };
  computeContainerResizeAction(b, running('b'), { limits: { cpu: '100m' }, requests: { cpu: '100m' } }, actions2);
  computeContainerResizeAction(a2, running('a'), { limits: { cpu: '200m' }, requests: { cpu: '100m' } }, actions2);
  assert.deepEqual(actions2.containersToUpdate.cpu.map((u) => u.container.name), ['a', 'b']);
  const h = harness({ cpuQuota: 30000, cpuPeriod: 100000, cpuShares: 204, memoryLimit: 1 << 30 });
  await doPodResizeAction(burstable([a2, b]), actions2, h.deps);
  assert.deepEqual(h.calls.map((c) => c.split(' ').slice(0, 2).join(' ')), ['ctr a', 'ctr b', 'pod {"cpuShares":153}', 'pod {"cpuQuota":20000,"cpuPeriod":100000}']);
  assert.equal(actions.containersToUpdate.cpu.length, 1);
  assert.ok(pod);
});

test('doPodResizeAction: a pod memory limit at or below the pod\'s usage is refused with upstream\'s message, nothing written', async () => {
  const a: Container = { name: 'a', resources: { limits: { memory: '64Mi' }, requests: { memory: '64Mi' } } };
  const actions = emptyResizeActions();
  computeContainerResizeAction(a, running('a'), { limits: { memory: '128Mi' }, requests: { memory: '64Mi' } }, actions);
  const h = harness({ cpuQuota: -1, cpuPeriod: 100000, cpuShares: 2, memoryLimit: 128 * 1024 * 1024 }, 100 * 1024 * 1024);
  await assert.rejects(doPodResizeAction(burstable([a]), actions, h.deps), /^KubeletError: aborting attempt to set pod memory limit less than current memory usage for pod p$/);
  assert.deepEqual(h.calls, []);
  assert.equal(h.actuated.size, 0);
});
