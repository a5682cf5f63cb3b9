// computePodActions, one row per case upstream's TestComputePodActions and
// TestComputePodActionsWithInitContainers cover (the facts: inputs and expected actions).
// Probe rows: a liveness or startup failure from the prober kills (and, unless Never, restarts) the container.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Container, Pod, RestartPolicy } from '../../src/api/types.js';
import { computePodActions, type PodActions, type ProbeResultsView } from '../../src/runtime/pod-actions.js';
import { hashContainer, legacyKubeletTsHash } from '../../src/runtime/container-hash.js';
import { hasResizeWork } from '../../src/runtime/resize.js';
import type { ContainerRuntimeStatus, RuntimePodStatus, SandboxRuntimeStatus } from '../../src/runtime/types.js';

const T0 = Date.UTC(2026, 0, 1);

function mkPod(opts: { policy?: RestartPolicy; init?: number; sidecars?: number; hostNetwork?: boolean; deleted?: boolean } = {}): Pod {
  const containers: Container[] = ['foo1', 'foo2', 'foo3'].map((name) => ({ name, image: 'busybox' }));
  const init: Container[] = [];
  for (let i = 1; i <= (opts.init ?? 0); i++) init.push({ name: `init${i}`, image: 'busybox' });
  for (let i = 1; i <= (opts.sidecars ?? 0); i++) init.push({ name: `sidecar${i}`, image: 'busybox', restartPolicy: 'Always' });
  const pod: Pod = { metadata: { uid: 'uid-1', name: 'foo', namespace: 'default' }, spec: { containers, restartPolicy: opts.policy ?? 'Always' } };
  if (init.length) pod.spec.initContainers = init;
  if (opts.hostNetwork) pod.spec.hostNetwork = true;
  if (opts.deleted) pod.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  return pod;
}

function sandbox(over: Partial<SandboxRuntimeStatus> = {}): SandboxRuntimeStatus {
  return { id: 'sb1', state: 'ready', createdAt: T0, attempt: 0, ip: '10.1.1.1', additionalIps: [], hostNetwork: false, labels: {}, annotations: {}, ...over };
}

function ctr(pod: Pod, name: string, over: Partial<ContainerRuntimeStatus> = {}): ContainerRuntimeStatus {
  const spec = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((c) => c.name === name)!;
  return {
    id: `id-${name}`, containerID: `containerd://id-${name}`, name, state: 'running', createdAt: T0, startedAt: T0, finishedAt: 0,
    exitCode: 0, image: 'busybox', imageRef: 'sha256:x', hash: hashContainer(spec), restartCount: 0, reason: '', message: '',
    labels: {}, annotations: {}, ...over,
  };
}

function status(sandboxes: SandboxRuntimeStatus[], containers: ContainerRuntimeStatus[]): RuntimePodStatus {
  return { uid: 'uid-1', name: 'foo', namespace: 'default', ips: [], sandboxStatuses: sandboxes, containerStatuses: containers, timestamp: T0 };
}

const exited = (code: number): Partial<ContainerRuntimeStatus> => ({ state: 'exited', exitCode: code, finishedAt: T0 + 1000 });
const allRunning = (pod: Pod) => pod.spec.containers.map((c) => ctr(pod, c.name));
const initDone = (pod: Pod) => (pod.spec.initContainers ?? []).map((c) => ctr(pod, c.name, c.restartPolicy === 'Always' ? {} : exited(0)));

interface Row {
  name: string;
  pod: Pod;
  status: (pod: Pod) => RuntimePodStatus;
  want: Partial<Omit<PodActions, 'containersToKill'>> & { kill?: string[] };
}

const NONE: Row['want'] = { killPod: false, createSandbox: false, initContainersToStart: [], containersToStart: [], kill: [] };

const rows: Row[] = [
  {
    name: 'start the sandbox and every container of a new pod',
    pod: mkPod(),
    status: () => status([], []),
    want: { killPod: true, createSandbox: true, attempt: 0, sandboxID: '', containersToStart: [0, 1, 2], kill: [] },
  },
  {
    name: 'everything running: nothing to do',
    pod: mkPod(),
    status: (p) => status([sandbox()], allRunning(p)),
    want: { ...NONE, sandboxID: 'sb1' },
  },
  {
    name: 'restart exited containers under RestartPolicy Always',
    pod: mkPod({ policy: 'Always' }),
    status: (p) => status([sandbox()], [ctr(p, 'foo1', exited(0)), ctr(p, 'foo2', exited(1)), ctr(p, 'foo3')]),
    want: { ...NONE, sandboxID: 'sb1', containersToStart: [0, 1] },
  },
  {
    name: 'restart only failed containers under RestartPolicy OnFailure',
    pod: mkPod({ policy: 'OnFailure' }),
    status: (p) => status([sandbox()], [ctr(p, 'foo1', exited(0)), ctr(p, 'foo2', exited(1)), ctr(p, 'foo3')]),
    want: { ...NONE, sandboxID: 'sb1', containersToStart: [1] },
  },
  {
    name: 'restart nothing under RestartPolicy Never',
    pod: mkPod({ policy: 'Never' }),
    status: (p) => status([sandbox()], [ctr(p, 'foo1', exited(0)), ctr(p, 'foo2', exited(1)), ctr(p, 'foo3')]),
    want: { ...NONE, sandboxID: 'sb1' },
  },
  {
    name: 'sandbox dead under Always: kill the pod and recreate everything',
    pod: mkPod({ policy: 'Always' }),
    status: (p) => status([sandbox({ state: 'notready' })], [ctr(p, 'foo1', exited(0)), ctr(p, 'foo2', exited(1)), ctr(p, 'foo3')]),
    want: { killPod: true, createSandbox: true, attempt: 1, sandboxID: 'sb1', containersToStart: [0, 1, 2], initContainersToStart: [] },
  },
  {
    name: 'sandbox dead under OnFailure: recreate all containers but the succeeded one',
    pod: mkPod({ policy: 'OnFailure' }),
    status: (p) => status([sandbox({ state: 'notready' })], [ctr(p, 'foo1'), ctr(p, 'foo2', exited(0)), ctr(p, 'foo3')]),
    want: { killPod: true, createSandbox: true, attempt: 1, containersToStart: [0, 2] },
  },
  {
    name: 'sandbox without an IP (pod network): kill the pod and recreate everything',
    pod: mkPod(),
    status: (p) => status([sandbox({ ip: '' })], allRunning(p)),
    want: { killPod: true, createSandbox: true, attempt: 1, containersToStart: [0, 1, 2] },
  },
  {
    name: 'a host-network sandbox needs no IP',
    pod: mkPod({ hostNetwork: true }),
    status: (p) => status([sandbox({ ip: '', hostNetwork: true })], allRunning(p)),
    want: { ...NONE, sandboxID: 'sb1' },
  },
  {
    name: 'the network mode changed: a new sandbox (upstream: sandbox changed)',
    pod: mkPod({ hostNetwork: true }),
    status: (p) => status([sandbox()], allRunning(p)),
    want: { killPod: true, createSandbox: true, attempt: 1, sandboxID: '', containersToStart: [0, 1, 2] },
  },
  {
    name: 'more than one ready sandbox: reconcile by recreating',
    pod: mkPod(),
    status: (p) => status([sandbox({ id: 'sb2', createdAt: T0 + 1 }), sandbox()], allRunning(p)),
    want: { killPod: true, createSandbox: true, attempt: 1, sandboxID: 'sb2' },
  },
  {
    name: 'sandbox dead, RestartPolicy Never, containers exited: kill only, no new sandbox',
    pod: mkPod({ policy: 'Never' }),
    status: (p) => status([sandbox({ state: 'notready' })], [ctr(p, 'foo1', exited(0)), ctr(p, 'foo2', exited(1)), ctr(p, 'foo3', exited(0))]),
    want: { killPod: true, createSandbox: false, containersToStart: [] },
  },
  {
    name: 'sandbox dead, RestartPolicy OnFailure, every container succeeded: kill only, no new sandbox',
    pod: mkPod({ policy: 'OnFailure' }),
    status: (p) => status([sandbox({ state: 'notready' })], p.spec.containers.map((c) => ctr(p, c.name, exited(0)))),
    want: { killPod: true, createSandbox: false, containersToStart: [] },
  },
  {
    name: 'sandbox dead, RestartPolicy Never, no container ever created: new sandbox and every container',
    pod: mkPod({ policy: 'Never' }),
    status: () => status([sandbox({ state: 'notready' })], []),
    want: { killPod: true, createSandbox: true, attempt: 1, containersToStart: [0, 1, 2] },
  },
  {
    name: 'the spec hash changed: kill and recreate that container',
    pod: mkPod(),
    status: (p) => status([sandbox()], [ctr(p, 'foo1'), ctr(p, 'foo2', { hash: 'stale' }), ctr(p, 'foo3')]),
    want: { ...NONE, sandboxID: 'sb1', containersToStart: [1], kill: ['foo2'] },
  },
  {
    name: 'a container in unknown state: kill and recreate it',
    pod: mkPod(),
    status: (p) => status([sandbox()], [ctr(p, 'foo1'), ctr(p, 'foo2', { state: 'unknown' }), ctr(p, 'foo3')]),
    want: { ...NONE, sandboxID: 'sb1', containersToStart: [1], kill: ['foo2'] },
  },
  {
    name: 'a container created but not started: start it, kill nothing',
    pod: mkPod(),
    status: (p) => status([sandbox()], [ctr(p, 'foo1'), ctr(p, 'foo2', { state: 'created' }), ctr(p, 'foo3')]),
    want: { ...NONE, sandboxID: 'sb1', containersToStart: [1] },
  },
  {
    name: 'a running container the spec no longer names is killed',
    pod: mkPod(),
    status: (p) => status([sandbox()], [...allRunning(p), { ...ctr(p, 'foo1'), id: 'id-extra', name: 'extra' }]),
    want: { ...NONE, sandboxID: 'sb1', kill: ['extra'] },
  },
  {
    name: 'every container exited under Never and nothing runs: kill the pod',
    pod: mkPod({ policy: 'Never' }),
    status: (p) => status([sandbox()], p.spec.containers.map((c) => ctr(p, c.name, exited(1)))),
    want: { killPod: true, createSandbox: false, containersToStart: [], kill: [] },
  },
  {
    name: 'a deleted pod restarts nothing; with nothing running it is killed',
    pod: mkPod({ deleted: true }),
    status: (p) => status([sandbox()], p.spec.containers.map((c) => ctr(p, c.name, exited(1)))),
    want: { killPod: true, createSandbox: false, containersToStart: [] },
  },
  // ---- init containers ----
  {
    name: 'init: initialization completed; start every container',
    pod: mkPod({ init: 3 }),
    status: (p) => status([sandbox()], initDone(p)),
    want: { ...NONE, sandboxID: 'sb1', containersToStart: [0, 1, 2] },
  },
  {
    name: 'init: none started yet; start the first init container',
    pod: mkPod({ init: 3 }),
    status: () => status([sandbox()], []),
    want: { ...NONE, sandboxID: 'sb1', initContainersToStart: [0] },
  },
  {
    name: 'init: one in progress; do nothing',
    pod: mkPod({ init: 3 }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', exited(0)), ctr(p, 'init2')]),
    want: { ...NONE, sandboxID: 'sb1' },
  },
  {
    name: 'init: sandbox dead; kill the pod and start the first init container again',
    pod: mkPod({ init: 3 }),
    status: (p) => status([sandbox({ state: 'notready' })], initDone(p)),
    want: { killPod: true, createSandbox: true, attempt: 1, initContainersToStart: [0], containersToStart: [] },
  },
  {
    name: 'init: the last failed under Always; restart it',
    pod: mkPod({ init: 3, policy: 'Always' }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', exited(0)), ctr(p, 'init2', exited(0)), ctr(p, 'init3', exited(1))]),
    want: { ...NONE, sandboxID: 'sb1', initContainersToStart: [2] },
  },
  {
    name: 'init: the last failed under OnFailure; restart it',
    pod: mkPod({ init: 3, policy: 'OnFailure' }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', exited(0)), ctr(p, 'init2', exited(0)), ctr(p, 'init3', exited(1))]),
    want: { ...NONE, sandboxID: 'sb1', initContainersToStart: [2] },
  },
  {
    name: 'init: the last failed under Never; kill the pod',
    pod: mkPod({ init: 3, policy: 'Never' }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', exited(0)), ctr(p, 'init2', exited(0)), ctr(p, 'init3', exited(1))]),
    want: { killPod: true, createSandbox: false, initContainersToStart: [], containersToStart: [] },
  },
  {
    name: 'init: state unknown under Always; kill and restart it',
    pod: mkPod({ init: 3, policy: 'Always' }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', exited(0)), ctr(p, 'init2', exited(0)), ctr(p, 'init3', { state: 'unknown' })]),
    want: { ...NONE, sandboxID: 'sb1', initContainersToStart: [2], kill: ['init3'] },
  },
  {
    name: 'init: state unknown under OnFailure; kill and restart it',
    pod: mkPod({ init: 3, policy: 'OnFailure' }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', exited(0)), ctr(p, 'init2', exited(0)), ctr(p, 'init3', { state: 'unknown' })]),
    want: { ...NONE, sandboxID: 'sb1', initContainersToStart: [2], kill: ['init3'] },
  },
  {
    name: 'init: state unknown under Never; kill the pod',
    pod: mkPod({ init: 3, policy: 'Never' }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', exited(0)), ctr(p, 'init2', exited(0)), ctr(p, 'init3', { state: 'unknown' })]),
    want: { killPod: true, createSandbox: false, initContainersToStart: [] },
  },
  {
    name: 'init: sandbox dead, an init container failed, RestartPolicy Never; kill only',
    pod: mkPod({ init: 3, policy: 'Never' }),
    status: (p) => status([sandbox({ state: 'notready' })], [ctr(p, 'init1', exited(0)), ctr(p, 'init2', exited(1))]),
    want: { killPod: true, createSandbox: false, initContainersToStart: [], containersToStart: [] },
  },
  {
    name: 'init: sandbox dead, RestartPolicy Never, no container visible; new sandbox, first init container',
    pod: mkPod({ init: 3, policy: 'Never' }),
    status: () => status([sandbox({ state: 'notready' })], []),
    want: { killPod: true, createSandbox: true, attempt: 1, initContainersToStart: [0], containersToStart: [] },
  },
  {
    name: 'init: the spec hash of a finished init container changed; nothing restarts (it ran to completion)',
    pod: mkPod({ init: 1 }),
    status: (p) => status([sandbox()], [ctr(p, 'init1', { ...exited(0), hash: 'stale' }), ...allRunning(p)]),
    want: { ...NONE, sandboxID: 'sb1' },
  },
  // ---- restartable init containers (sidecars) ----
  {
    name: 'sidecar: running and started; start the regular containers',
    pod: mkPod({ sidecars: 1 }),
    status: (p) => status([sandbox()], initDone(p)),
    want: { ...NONE, sandboxID: 'sb1', containersToStart: [0, 1, 2] },
  },
  {
    name: 'sidecar: exited while the app runs; restart the sidecar',
    pod: mkPod({ sidecars: 1 }),
    status: (p) => status([sandbox()], [ctr(p, 'sidecar1', exited(1)), ...allRunning(p)]),
    want: { ...NONE, sandboxID: 'sb1', initContainersToStart: [0] },
  },
  {
    name: 'sidecar: spec hash changed; kill and restart it',
    pod: mkPod({ sidecars: 1 }),
    status: (p) => status([sandbox()], [ctr(p, 'sidecar1', { hash: 'stale' }), ...allRunning(p)]),
    want: { ...NONE, sandboxID: 'sb1', initContainersToStart: [0], kill: ['sidecar1'] },
  },
  {
    name: 'sidecar: only the sidecar runs (every app container exited under Never); sidecars do not keep the pod',
    pod: mkPod({ sidecars: 1, policy: 'Never' }),
    status: (p) => status([sandbox()], [ctr(p, 'sidecar1'), ...p.spec.containers.map((c) => ctr(p, c.name, exited(0)))]),
    want: { killPod: true, createSandbox: false, containersToStart: [], initContainersToStart: [] },
  },
];

for (const row of rows) {
  test(`computePodActions: ${row.name}`, () => {
    const got = computePodActions(row.pod, row.status(row.pod));
    const { kill, ...rest } = row.want;
    for (const [k, v] of Object.entries(rest)) {
      assert.deepEqual(got[k as keyof PodActions], v, `${k} (got ${JSON.stringify(got)})`);
    }
    if (kill) assert.deepEqual(got.containersToKill.map((c) => c.name).sort(), [...kill].sort(), `containersToKill (got ${JSON.stringify(got)})`);
  });
}

// ---- probe rows (upstream TestComputePodActions: liveness / startup probe failed) ----

type R = 'Success' | 'Failure' | 'Unknown';
function probes(liveness: Record<string, R>, startup: Record<string, R> = {}): ProbeResultsView {
  return { liveness: (id) => liveness[id], startup: (id) => startup[id] };
}

function probedPod(policy: RestartPolicy = 'Always'): Pod {
  const pod = mkPod({ policy });
  pod.spec.containers[1]!.livenessProbe = { exec: { command: ['true'] }, terminationGracePeriodSeconds: 7 };
  pod.spec.containers[2]!.startupProbe = { exec: { command: ['true'] } };
  return pod;
}

interface ProbeRow {
  name: string;
  policy: RestartPolicy;
  probes: ProbeResultsView;
  start: number[];
  kill: { name: string; reason: string; grace?: number }[];
}

const probeRows: ProbeRow[] = [
  {
    name: 'liveness failed: kill and restart it with upstream\'s message and the probe\'s grace period',
    policy: 'Always',
    probes: probes({ 'containerd://id-foo2': 'Failure' }),
    start: [1],
    kill: [{ name: 'foo2', reason: 'Container foo2 failed liveness probe, will be restarted', grace: 7 }],
  },
  {
    name: 'liveness failed under Never: kill without restart',
    policy: 'Never',
    probes: probes({ 'containerd://id-foo2': 'Failure' }),
    start: [],
    kill: [{ name: 'foo2', reason: 'Container foo2 failed liveness probe', grace: 7 }],
  },
  {
    name: 'startup failed: kill and restart it',
    policy: 'OnFailure',
    probes: probes({}, { 'containerd://id-foo3': 'Failure' }),
    start: [2],
    kill: [{ name: 'foo3', reason: 'Container foo3 failed startup probe, will be restarted' }],
  },
  {
    name: 'liveness succeeded, startup unknown: nothing to do',
    policy: 'Always',
    probes: probes({ 'containerd://id-foo2': 'Success' }, { 'containerd://id-foo3': 'Unknown' }),
    start: [],
    kill: [],
  },
  {
    name: 'a failure recorded for an older container ID does not kill the running one',
    policy: 'Always',
    probes: probes({ 'containerd://old-foo2': 'Failure' }),
    start: [],
    kill: [],
  },
];

for (const row of probeRows) {
  test(`computePodActions probes: ${row.name}`, () => {
    const pod = probedPod(row.policy);
    const got = computePodActions(pod, status([sandbox()], allRunning(pod)), row.probes);
    assert.equal(got.killPod, false);
    assert.deepEqual(got.containersToStart, row.start);
    assert.deepEqual(got.containersToKill.map((k) => ({ name: k.name, reason: k.reason, ...(k.gracePeriodOverride !== undefined ? { grace: k.gracePeriodOverride } : {}) })), row.kill);
  });
}

// ---- adoption: which recorded hashes keep a running container ----

/** A pod whose one container (and one sidecar) is upstream's TestHashContainer spec. */
function adoptPod(): Pod {
  const c: Container = { name: 'test_container', image: 'foo/image:v1', args: ['/bin/sh', '-c', 'echo abc'], ports: [{ containerPort: 8001 }] };
  const sidecar: Container = { name: 'sidecar1', image: 'busybox', command: ['sleep', 'inf'], restartPolicy: 'Always' };
  return { metadata: { uid: 'uid-1', name: 'foo', namespace: 'default' }, spec: { initContainers: [sidecar], containers: [c], restartPolicy: 'Always' } };
}

const adoptRows: { name: string; hash: (c: Container) => string; kept: boolean }[] = [
  // 8e45cbd0: what upstream 1.31-1.34 wrote for this spec (its TestHashContainer golden value)
  { name: 'the hash the upstream kubelet wrote (golden 8e45cbd0) is kept', hash: (c) => (c.name === 'test_container' ? '8e45cbd0' : hashContainer(c)), kept: true },
  { name: 'the upstream hash of its spec is kept', hash: (c) => hashContainer(c), kept: true },
  { name: 'the legacy kubelet-ts hash of its spec is kept (kubelet-ts upgrade)', hash: (c) => legacyKubeletTsHash(c), kept: true },
  { name: 'an unrelated hash is restarted', hash: () => 'deadbeef', kept: false },
  { name: 'the legacy hash of another spec (other image) is restarted', hash: (c) => legacyKubeletTsHash({ ...c, image: 'other:1' }), kept: false },
];

for (const row of adoptRows) {
  test(`computePodActions adoption: ${row.name}`, () => {
    const pod = adoptPod();
    const [sidecar] = pod.spec.initContainers!;
    const [main] = pod.spec.containers;
    const st = status([sandbox()], [ctr(pod, 'sidecar1', { hash: row.hash(sidecar!) }), ctr(pod, 'test_container', { hash: row.hash(main!) })]);
    const got = computePodActions(pod, st);
    assert.equal(got.killPod, false);
    assert.equal(got.createSandbox, false);
    if (row.kept) {
      assert.deepEqual(got.containersToKill, [], `nothing killed (got ${JSON.stringify(got)})`);
      assert.deepEqual(got.containersToStart, []);
      assert.deepEqual(got.initContainersToStart, []);
    } else {
      assert.deepEqual(got.containersToKill.map((k) => k.name).sort(), ['sidecar1', 'test_container']);
      // upstream's kill messages (computePodActions, computeInitContainerActions)
      assert.deepEqual(
        got.containersToKill.map((k) => k.reason).sort(),
        ['Container test_container definition changed, will be restarted', 'Init container sidecar1 definition changed'],
      );
      assert.deepEqual(got.containersToStart, [0]);
      assert.deepEqual(got.initContainersToStart, [0]);
    }
  });
}

// ---- resources: in-place resize (upstream computePodResizeAction) instead of a restart ----

test('computePodActions resize: a container whose actuated resources differ is updated in place, or restarted when its resizePolicy says RestartContainer; no resize view (static pods) or equal amounts: nothing', () => {
  const pod = adoptPod();
  const [sidecar] = pod.spec.initContainers!;
  const [main] = pod.spec.containers;
  main!.resources = { limits: { cpu: '500m', memory: '128Mi' } };
  sidecar!.resources = { requests: { cpu: '100m' } };
  const st = status([sandbox()], [ctr(pod, 'sidecar1'), ctr(pod, 'test_container')]);
  const view = (acts: Record<string, Container['resources']>) => ({ actuated: (name: string) => acts[name] });

  // actuated equal amounts written differently: nothing to do
  const same = computePodActions(pod, st, undefined, view({ test_container: { limits: { cpu: '0.5', memory: `${128 * 1024 * 1024}` } }, sidecar1: { requests: { cpu: '0.1' } } }));
  assert.deepEqual(same.containersToKill, []);
  assert.equal(hasResizeWork(same.resize), false);

  // cpu limit raised and sidecar cpu request lowered: both updated in place, nobody killed
  const grown = computePodActions(pod, st, undefined, view({ test_container: { limits: { cpu: '250m', memory: '128Mi' } }, sidecar1: { requests: { cpu: '200m' } } }));
  assert.deepEqual(grown.containersToKill, []);
  assert.deepEqual(grown.containersToStart, []);
  assert.deepEqual(grown.resize!.containersToUpdate.cpu.map((u) => u.container.name), ['sidecar1', 'test_container'], 'the decrease first');
  assert.deepEqual(grown.resize!.containersToUpdate.memory, []);

  // no resize view: resources are not compared at all (nothing restarted, as before a resize is allowed)
  assert.deepEqual(computePodActions(pod, st).containersToKill, []);

  // RestartContainer for memory: a memory change restarts with upstream's message, a cpu change does not
  main!.resizePolicy = [{ resourceName: 'memory', restartPolicy: 'RestartContainer' }];
  const memory = computePodActions(pod, st, undefined, view({ test_container: { limits: { cpu: '500m', memory: '64Mi' } }, sidecar1: { requests: { cpu: '100m' } } }));
  assert.deepEqual(memory.containersToKill.map((k) => k.reason), ['Container test_container resize requires restart']);
  assert.deepEqual(memory.containersToStart, [0]);
  assert.equal(memory.resize!.updatePodResources, true);
  const cpu = computePodActions(pod, st, undefined, view({ test_container: { limits: { cpu: '400m', memory: '128Mi' } }, sidecar1: { requests: { cpu: '100m' } } }));
  assert.deepEqual(cpu.containersToKill, []);
  assert.deepEqual(cpu.resize!.containersToUpdate.cpu.map((u) => u.container.name), ['test_container']);
});
