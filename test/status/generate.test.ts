import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateAPIPodStatus, podStatusEqual, toRFC3339 } from '../../src/status/generate.js';
import { shouldContainerBeRestarted } from '../../src/runtime/restart-policy.js';
import type { StatusInputs } from '../../src/status/generate.js';
import { crashLoopBackOffMessage } from '../../src/api/reasons.js';
import type { Container, Pod, PodCondition, PodStatus, RestartPolicy } from '../../src/api/types.js';
import type { ContainerRuntimeStatus, RuntimePodStatus, SandboxRuntimeStatus } from '../../src/runtime/types.js';

const T0 = Date.UTC(2024, 4, 1, 10, 0, 0); // 2024-05-01T10:00:00Z
const NOW = T0 + 60_000 + 789; // sub-second part must be dropped
const NOW_RFC = '2024-05-01T10:01:00Z';
const IMAGE_REF = '127.0.0.1:5000/busybox@sha256:' + 'ab'.repeat(32);

function mkPod(opts: {
  containers?: Container[];
  init?: Container[];
  restartPolicy?: RestartPolicy;
  hostNetwork?: boolean;
} = {}): Pod {
  const p: Pod = {
    metadata: { name: 'web', namespace: 'default', uid: 'uid-1' },
    spec: {
      containers: opts.containers ?? [{ name: 'a', image: '127.0.0.1:5000/busybox:1' }],
      restartPolicy: opts.restartPolicy ?? 'Always',
    },
  };
  if (opts.init) p.spec.initContainers = opts.init;
  if (opts.hostNetwork) p.spec.hostNetwork = true;
  return p;
}

let seq = 0;
function rc(name: string, over: Partial<ContainerRuntimeStatus> = {}): ContainerRuntimeStatus {
  const id = over.id ?? `c${++seq}`;
  return {
    id,
    containerID: `containerd://${id}`,
    name,
    state: 'running',
    createdAt: T0,
    startedAt: T0 + 1000,
    finishedAt: 0,
    exitCode: 0,
    image: '127.0.0.1:5000/busybox:1',
    imageRef: IMAGE_REF,
    hash: 'h',
    restartCount: 0,
    reason: '',
    message: '',
    labels: {},
    annotations: {},
    ...over,
  };
}

function sandbox(over: Partial<SandboxRuntimeStatus> = {}): SandboxRuntimeStatus {
  return {
    id: 'sb1', state: 'ready', createdAt: T0 - 5000, attempt: 0, ip: '10.88.0.5', additionalIps: [],
    hostNetwork: false, labels: {}, annotations: {}, ...over,
  };
}

function runtime(containers: ContainerRuntimeStatus[], over: Partial<RuntimePodStatus> = {}): RuntimePodStatus {
  return {
    uid: 'uid-1', name: 'web', namespace: 'default', ips: ['10.88.0.5'],
    sandboxStatuses: [sandbox()], containerStatuses: containers, timestamp: NOW, ...over,
  };
}

function gen(over: Partial<StatusInputs> & { pod: Pod }): PodStatus {
  return generateAPIPodStatus({ hostIPs: ['192.168.1.10'], now: NOW, ...over });
}

function cond(s: PodStatus, type: string): PodCondition {
  const c = s.conditions?.find((x) => x.type === type);
  assert.ok(c, `condition ${type} present`);
  return c;
}

test('toRFC3339 drops milliseconds and ends in Z', () => {
  assert.equal(toRFC3339(NOW), NOW_RFC);
  assert.equal(toRFC3339(0), '1970-01-01T00:00:00Z');
});

test('fresh pod with nothing created: Pending, ContainerCreating, conditions and times', () => {
  const pod = mkPod({ containers: [{ name: 'b', image: 'img-b' }, { name: 'a', image: 'img-a' }] });
  const s = gen({ pod });
  assert.equal(s.phase, 'Pending');
  assert.equal(s.qosClass, 'BestEffort');
  assert.equal(s.hostIP, '192.168.1.10');
  assert.deepEqual(s.hostIPs, [{ ip: '192.168.1.10' }]);
  assert.equal(s.podIP, undefined);
  assert.equal(s.startTime, NOW_RFC);
  // regular container statuses are sorted by name, as upstream does
  assert.deepEqual(s.containerStatuses, [
    { name: 'a', state: { waiting: { reason: 'ContainerCreating' } }, lastState: {}, ready: false, restartCount: 0, image: 'img-a', imageID: '', started: false },
    { name: 'b', state: { waiting: { reason: 'ContainerCreating' } }, lastState: {}, ready: false, restartCount: 0, image: 'img-b', imageID: '', started: false },
  ]);
  assert.equal(s.initContainerStatuses, undefined);
  assert.deepEqual(s.conditions, [
    { type: 'PodReadyToStartContainers', status: 'False', lastProbeTime: null, lastTransitionTime: NOW_RFC },
    { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: NOW_RFC },
    { type: 'Ready', status: 'False', reason: 'ContainersNotReady', message: 'containers with unready status: [b a]', lastProbeTime: null, lastTransitionTime: NOW_RFC },
    { type: 'ContainersReady', status: 'False', reason: 'ContainersNotReady', message: 'containers with unready status: [b a]', lastProbeTime: null, lastTransitionTime: NOW_RFC },
    { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: NOW_RFC },
  ]);
});

test('init containers in progress: PodInitializing everywhere, Initialized False with the names', () => {
  const pod = mkPod({ init: [{ name: 'init1', image: 'i' }, { name: 'init2', image: 'i' }] });
  const s = gen({ pod, runtime: runtime([rc('init1')]) });
  assert.equal(s.phase, 'Pending');
  assert.deepEqual(s.initContainerStatuses!.map((c) => c.name), ['init1', 'init2']);
  const [i1, i2] = s.initContainerStatuses!;
  assert.ok(i1!.state.running);
  assert.equal(i1!.started, true);
  assert.equal(i1!.ready, false);
  assert.deepEqual(i2!.state, { waiting: { reason: 'PodInitializing' } });
  assert.deepEqual(s.containerStatuses![0]!.state, { waiting: { reason: 'PodInitializing' } });
  const init = cond(s, 'Initialized');
  assert.equal(init.status, 'False');
  assert.equal(init.reason, 'ContainersNotInitialized');
  assert.equal(init.message, 'containers with incomplete status: [init1 init2]');
  assert.equal(cond(s, 'PodReadyToStartContainers').status, 'True');
});

test('init containers done: Completed, ready, Initialized True, app still PodInitializing until created', () => {
  const pod = mkPod({ init: [{ name: 'init1', image: 'i' }] });
  const done = rc('init1', { state: 'exited', exitCode: 0, reason: 'Completed', finishedAt: T0 + 3000 });
  const s = gen({ pod, runtime: runtime([done]) });
  const i1 = s.initContainerStatuses![0]!;
  assert.equal(i1.ready, true);
  assert.equal(i1.state.terminated?.reason, 'Completed');
  assert.equal(cond(s, 'Initialized').status, 'True');
  assert.deepEqual(s.containerStatuses![0]!.state, { waiting: { reason: 'PodInitializing' } });
  assert.equal(s.phase, 'Pending');
});

test('running container: Running, ready, started, IDs, image ref, times, pod IP', () => {
  const pod = mkPod();
  const c = rc('a', { id: 'abc123', startedAt: T0 + 1500 });
  const s = gen({ pod, runtime: runtime([c]) });
  assert.equal(s.phase, 'Running');
  assert.equal(s.podIP, '10.88.0.5');
  assert.deepEqual(s.podIPs, [{ ip: '10.88.0.5' }]);
  assert.deepEqual(s.containerStatuses, [{
    name: 'a',
    state: { running: { startedAt: '2024-05-01T10:00:01Z' } },
    lastState: {},
    ready: true,
    restartCount: 0,
    image: '127.0.0.1:5000/busybox:1',
    imageID: IMAGE_REF,
    containerID: 'containerd://abc123',
    started: true,
  }]);
  for (const type of ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled']) {
    assert.equal(cond(s, type).status, 'True', type);
  }
});

test('all exited under Always: Running, terminated Completed/Error kept', () => {
  const pod = mkPod({ containers: [{ name: 'a', image: 'i' }, { name: 'b', image: 'i' }], restartPolicy: 'Always' });
  const s = gen({ pod, runtime: runtime([
    rc('a', { state: 'exited', exitCode: 0, finishedAt: T0 + 9000 }),
    rc('b', { state: 'exited', exitCode: 3, finishedAt: T0 + 9000, message: 'boom' }),
  ]) });
  assert.equal(s.phase, 'Running');
  const [a, b] = s.containerStatuses!;
  assert.equal(a!.state.terminated?.reason, 'Completed');
  assert.deepEqual(b!.state.terminated, {
    exitCode: 3, reason: 'Error', message: 'boom',
    startedAt: '2024-05-01T10:00:01Z', finishedAt: '2024-05-01T10:00:09Z', containerID: b!.containerID,
  });
  assert.equal(a!.ready, false);
  assert.equal(a!.started, false);
  assert.equal(cond(s, 'Ready').message, 'containers with unready status: [a b]');
});

test('all exited 0 under OnFailure: Succeeded with PodCompleted conditions', () => {
  const pod = mkPod({ restartPolicy: 'OnFailure' });
  const s = gen({ pod, runtime: runtime([rc('a', { state: 'exited', exitCode: 0, finishedAt: T0 + 5000 })]) });
  assert.equal(s.phase, 'Succeeded');
  const ready = cond(s, 'Ready');
  assert.deepEqual([ready.status, ready.reason, ready.message], ['False', 'PodCompleted', undefined]);
  assert.equal(cond(s, 'ContainersReady').reason, 'PodCompleted');
  assert.equal(cond(s, 'Initialized').status, 'True');
  assert.equal(cond(s, 'Initialized').reason, 'PodCompleted');
});

test('exited with failure under Never: Failed with PodFailed; under OnFailure: Running', () => {
  const exited = () => runtime([rc('a', { state: 'exited', exitCode: 1, finishedAt: T0 + 5000 })]);
  const never = gen({ pod: mkPod({ restartPolicy: 'Never' }), runtime: exited() });
  assert.equal(never.phase, 'Failed');
  assert.equal(cond(never, 'Ready').reason, 'PodFailed');
  assert.equal(cond(never, 'ContainersReady').reason, 'PodFailed');
  const onFailure = gen({ pod: mkPod({ restartPolicy: 'OnFailure' }), runtime: exited() });
  assert.equal(onFailure.phase, 'Running');
});

test('podIsTerminal: a pod whose containers all exited 0 under Always is Succeeded', () => {
  const s = gen({ pod: mkPod(), runtime: runtime([rc('a', { state: 'exited', exitCode: 0 })]), podIsTerminal: true });
  assert.equal(s.phase, 'Succeeded');
});

test('OOMKilled comes through from the runtime', () => {
  const s = gen({ pod: mkPod({ restartPolicy: 'Never' }), runtime: runtime([
    rc('a', { state: 'exited', exitCode: 137, reason: 'OOMKilled', finishedAt: T0 + 4000 }),
  ]) });
  assert.equal(s.containerStatuses![0]!.state.terminated?.reason, 'OOMKilled');
  assert.equal(s.containerStatuses![0]!.state.terminated?.exitCode, 137);
  assert.equal(s.phase, 'Failed');
});

test('after a restart: state from the newest attempt, lastState from the one before', () => {
  const old = rc('a', { id: 'old', state: 'exited', exitCode: 1, createdAt: T0, startedAt: T0 + 1000, finishedAt: T0 + 2000 });
  const cur = rc('a', { id: 'new', state: 'running', createdAt: T0 + 3000, startedAt: T0 + 4000, restartCount: 1 });
  const older = rc('a', { id: 'older', state: 'exited', exitCode: 2, createdAt: T0 - 9000 });
  // the runtime's order is not trusted: attempts are ordered by creation time
  const s = gen({ pod: mkPod(), runtime: runtime([old, older, cur]) });
  const a = s.containerStatuses![0]!;
  assert.equal(a.restartCount, 1);
  assert.equal(a.containerID, 'containerd://new');
  assert.deepEqual(a.state, { running: { startedAt: '2024-05-01T10:00:04Z' } });
  assert.deepEqual(a.lastState, { terminated: {
    exitCode: 1, reason: 'Error', startedAt: '2024-05-01T10:00:01Z', finishedAt: '2024-05-01T10:00:02Z', containerID: 'containerd://old',
  } });
});

test('CrashLoopBackOff: waiting with the back-off message, lastState terminated', () => {
  const pod = mkPod();
  const msg = crashLoopBackOffMessage(10_000, 'a', pod);
  assert.equal(msg, 'back-off 10s restarting failed container=a pod=web_default(uid-1)');
  const s = gen({
    pod,
    runtime: runtime([rc('a', { state: 'exited', exitCode: 1, restartCount: 2, finishedAt: T0 + 5000 })]),
    startFailures: new Map([['a', { reason: 'CrashLoopBackOff', message: msg }]]),
  });
  const a = s.containerStatuses![0]!;
  assert.deepEqual(a.state, { waiting: { reason: 'CrashLoopBackOff', message: msg } });
  assert.equal(a.lastState.terminated?.exitCode, 1);
  assert.equal(a.lastState.terminated?.reason, 'Error');
  assert.equal(a.restartCount, 2);
  assert.equal(a.ready, false);
  assert.equal(s.phase, 'Running');
});

test('a start failure is not shown for a container that will not be restarted', () => {
  const failures = new Map([['a', { reason: 'CrashLoopBackOff', message: 'x' }]]);
  const never = gen({
    pod: mkPod({ restartPolicy: 'Never' }),
    runtime: runtime([rc('a', { state: 'exited', exitCode: 1 })]),
    startFailures: failures,
  });
  assert.ok(never.containerStatuses![0]!.state.terminated);
  const runningNow = gen({ pod: mkPod(), runtime: runtime([rc('a')]), startFailures: failures });
  assert.ok(runningNow.containerStatuses![0]!.state.running);
});

test('ErrImagePull before any container exists: waiting with reason and message, Pending', () => {
  const s = gen({
    pod: mkPod(),
    runtime: runtime([]),
    startFailures: new Map([['a', { reason: 'ErrImagePull', message: 'failed to pull image "x": not found' }]]),
  });
  assert.deepEqual(s.containerStatuses![0]!.state, {
    waiting: { reason: 'ErrImagePull', message: 'failed to pull image "x": not found' },
  });
  assert.deepEqual(s.containerStatuses![0]!.lastState, {});
  assert.equal(s.phase, 'Pending');
});

test('a created container not yet started waits with no reason', () => {
  const s = gen({ pod: mkPod(), runtime: runtime([rc('a', { state: 'created', startedAt: 0 })]) });
  assert.deepEqual(s.containerStatuses![0]!.state, { waiting: {} });
  assert.match(s.containerStatuses![0]!.containerID ?? '', /^containerd:\/\/c\d+$/);
  assert.equal(s.containerStatuses![0]!.started, false);
  assert.equal(s.phase, 'Pending');
});

test('readiness: a readiness probe without a result is not ready; results by full or bare ID', () => {
  const pod = mkPod({ containers: [{ name: 'a', image: 'i', readinessProbe: { exec: { command: ['true'] } } }] });
  const rt = () => runtime([rc('a', { id: 'rid' })]);
  const none = gen({ pod, runtime: rt() });
  assert.equal(none.containerStatuses![0]!.ready, false);
  assert.equal(none.containerStatuses![0]!.started, true);
  assert.equal(cond(none, 'Ready').status, 'False');
  assert.equal(cond(none, 'ContainersReady').message, 'containers with unready status: [a]');
  const ok = gen({ pod, runtime: rt(), readiness: new Map([['containerd://rid', true]]) });
  assert.equal(ok.containerStatuses![0]!.ready, true);
  assert.equal(cond(ok, 'Ready').status, 'True');
  const bare = gen({ pod, runtime: rt(), readiness: new Map([['rid', true]]) });
  assert.equal(bare.containerStatuses![0]!.ready, true);
  const failing = gen({ pod, runtime: rt(), readiness: new Map([['containerd://rid', false]]) });
  assert.equal(failing.containerStatuses![0]!.ready, false);
});

test('startup probe: not started (so not ready) until it succeeds', () => {
  const pod = mkPod({ containers: [{ name: 'a', image: 'i', startupProbe: { exec: { command: ['true'] } } }] });
  const rt = () => runtime([rc('a', { id: 'sid' })]);
  const before = gen({ pod, runtime: rt() });
  assert.equal(before.containerStatuses![0]!.started, false);
  assert.equal(before.containerStatuses![0]!.ready, false);
  const failed = gen({ pod, runtime: rt(), startup: new Map([['containerd://sid', false]]) });
  assert.equal(failed.containerStatuses![0]!.started, false);
  const after = gen({ pod, runtime: rt(), startup: new Map([['containerd://sid', true]]) });
  assert.equal(after.containerStatuses![0]!.started, true);
  assert.equal(after.containerStatuses![0]!.ready, true);
});

test('readiness gates: Ready False until the gate condition is True', () => {
  const pod = mkPod();
  (pod.spec as Record<string, unknown>)['readinessGates'] = [{ conditionType: 'example.com/lb' }];
  const missing = gen({ pod, runtime: runtime([rc('a')]) });
  assert.equal(cond(missing, 'ContainersReady').status, 'True');
  assert.deepEqual([cond(missing, 'Ready').status, cond(missing, 'Ready').reason, cond(missing, 'Ready').message],
    ['False', 'ReadinessGatesNotReady', 'corresponding condition of pod readiness gate "example.com/lb" does not exist.']);
  pod.status = { conditions: [{ type: 'example.com/lb', status: 'False' }] };
  const notTrue = gen({ pod, runtime: runtime([rc('a')]) });
  assert.equal(cond(notTrue, 'Ready').message, 'the status of pod readiness gate "example.com/lb" is not "True", but False');
  // the gate's condition is kept: the kubelet does not own it
  assert.equal(cond(notTrue, 'example.com/lb').status, 'False');
  pod.status = { conditions: [{ type: 'example.com/lb', status: 'True' }] };
  assert.equal(cond(gen({ pod, runtime: runtime([rc('a')]) }), 'Ready').status, 'True');
});

test('sidecar init containers: Initialized once started; their readiness gates ContainersReady', () => {
  const pod = mkPod({ init: [
    { name: 'setup', image: 'i' },
    { name: 'proxy', image: 'i', restartPolicy: 'Always', readinessProbe: { exec: { command: ['true'] } } },
  ] });
  const setup = rc('setup', { state: 'exited', exitCode: 0, createdAt: T0 });
  const proxy = rc('proxy', { id: 'px', createdAt: T0 + 100 });
  // sidecar running but its startup not done yet: not initialized, app not created
  const waitingStart = gen({
    pod: { ...pod, spec: { ...pod.spec, initContainers: [pod.spec.initContainers![0]!, { ...pod.spec.initContainers![1]!, startupProbe: { exec: { command: ['true'] } } }] } },
    runtime: runtime([setup, proxy]),
  });
  assert.equal(cond(waitingStart, 'Initialized').message, 'containers with incomplete status: [proxy]');
  assert.equal(waitingStart.phase, 'Pending');

  const app = rc('a', { createdAt: T0 + 200 });
  const s = gen({ pod, runtime: runtime([setup, proxy, app]) });
  assert.equal(cond(s, 'Initialized').status, 'True');
  assert.equal(s.phase, 'Running');
  const px = s.initContainerStatuses!.find((c) => c.name === 'proxy')!;
  assert.equal(px.started, true);
  assert.equal(px.ready, false);
  assert.equal(cond(s, 'ContainersReady').message, 'containers with unready status: [proxy]');
  const ready = gen({ pod, runtime: runtime([setup, proxy, app]), readiness: new Map([['containerd://px', true]]) });
  assert.equal(cond(ready, 'ContainersReady').status, 'True');
  assert.equal(cond(ready, 'Ready').status, 'True');
});

test('a restarting sidecar after the app started keeps the pod Running and Initialized', () => {
  const pod = mkPod({ init: [{ name: 'proxy', image: 'i', restartPolicy: 'Always' }] });
  const s = gen({
    pod,
    runtime: runtime([
      rc('proxy', { state: 'exited', exitCode: 1, createdAt: T0 + 100, restartCount: 1 }),
      rc('a', { createdAt: T0 + 200 }),
    ]),
    startFailures: new Map([['proxy', { reason: 'CrashLoopBackOff', message: 'back-off' }]]),
  });
  assert.equal(s.initContainerStatuses![0]!.state.waiting?.reason, 'CrashLoopBackOff');
  assert.equal(s.phase, 'Running');
  assert.equal(cond(s, 'Initialized').status, 'True');
});

test('host network pods get the node IPs as pod IPs and need no sandbox IP', () => {
  const pod = mkPod({ hostNetwork: true });
  const rt = runtime([rc('a')], { ips: [], sandboxStatuses: [sandbox({ ip: '', hostNetwork: true })] });
  const s = gen({ pod, runtime: rt, hostIPs: ['192.168.1.10', 'fd00::10'] });
  assert.equal(s.podIP, '192.168.1.10');
  assert.deepEqual(s.podIPs, [{ ip: '192.168.1.10' }, { ip: 'fd00::10' }]);
  assert.deepEqual(s.hostIPs, [{ ip: '192.168.1.10' }, { ip: 'fd00::10' }]);
  assert.equal(cond(s, 'PodReadyToStartContainers').status, 'True');
});

test('pod network: a sandbox without an IP is not ready to start containers', () => {
  const rt = runtime([], { ips: [], sandboxStatuses: [sandbox({ ip: '' })] });
  assert.equal(cond(gen({ pod: mkPod(), runtime: rt }), 'PodReadyToStartContainers').status, 'False');
  const notReady = runtime([], { sandboxStatuses: [sandbox({ state: 'notready' })] });
  assert.equal(cond(gen({ pod: mkPod(), runtime: notReady }), 'PodReadyToStartContainers').status, 'False');
});

test('pod IPs follow the node IP family: primary family first, one of each', () => {
  const rt = runtime([rc('a')], { ips: ['fd00::5', '10.88.0.5', '10.88.0.6'] });
  assert.deepEqual(gen({ pod: mkPod(), runtime: rt }).podIPs, [{ ip: '10.88.0.5' }, { ip: 'fd00::5' }]);
  const v6 = gen({ pod: mkPod(), runtime: rt, hostIPs: ['fd00::10'] });
  assert.equal(v6.podIP, 'fd00::5');
});

test('transition times and start time are kept from the previous status while unchanged', () => {
  const pod = mkPod();
  const first = gen({ pod, runtime: runtime([]), now: T0 });
  assert.equal(first.startTime, '2024-05-01T10:00:00Z');
  const second = gen({ pod, runtime: runtime([rc('a')]), previous: first, now: T0 + 30_000 });
  assert.equal(second.startTime, '2024-05-01T10:00:00Z');
  // Ready changed False → True: new time; PodScheduled unchanged: old time
  assert.equal(cond(second, 'Ready').lastTransitionTime, '2024-05-01T10:00:30Z');
  assert.equal(cond(second, 'PodScheduled').lastTransitionTime, '2024-05-01T10:00:00Z');
  assert.equal(cond(second, 'Initialized').lastTransitionTime, '2024-05-01T10:00:00Z');
  const third = gen({ pod, runtime: runtime([rc('a')]), previous: second, now: T0 + 90_000 });
  assert.equal(cond(third, 'Ready').lastTransitionTime, '2024-05-01T10:00:30Z');
});

test('without a previous status the API status is the basis (start time, restart count)', () => {
  const pod = mkPod();
  pod.status = {
    startTime: '2024-04-30T00:00:00Z',
    containerStatuses: [{ name: 'a', state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: {}, ready: false, restartCount: 4, image: 'i', imageID: '' }],
  };
  const s = gen({ pod });
  assert.equal(s.startTime, '2024-04-30T00:00:00Z');
  assert.equal(s.containerStatuses![0]!.restartCount, 4);
});

test('a running container that vanished from the runtime shows lastState ContainerStatusUnknown', () => {
  const pod = mkPod();
  const previous = gen({ pod, runtime: runtime([rc('a', { id: 'gone' })]) });
  const s = gen({ pod, runtime: runtime([]), previous });
  const a = s.containerStatuses![0]!;
  assert.deepEqual(a.state, { waiting: { reason: 'ContainerCreating' } });
  assert.deepEqual(a.lastState, { terminated: {
    exitCode: 137, reason: 'ContainerStatusUnknown',
    message: 'The container could not be located when the pod was deleted.  The container used to be Running',
  } });
  assert.equal(a.restartCount, 1);
  assert.equal(s.phase, 'Running');
});

test('a running container the runtime reports as unknown is terminated ContainerStatusUnknown', () => {
  const pod = mkPod();
  const previous = gen({ pod, runtime: runtime([rc('a', { id: 'x' })]) });
  const s = gen({ pod, runtime: runtime([rc('a', { id: 'x', state: 'unknown' })]), previous });
  const a = s.containerStatuses![0]!;
  assert.deepEqual(a.state.terminated, {
    exitCode: 137, reason: 'ContainerStatusUnknown', message: 'The container could not be located when the pod was terminated',
  });
  assert.equal(a.restartCount, 1);
});

test('a terminal phase sticks, with its reason and message (e.g. Evicted)', () => {
  const pod = mkPod();
  const previous: PodStatus = { phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory.' };
  const s = gen({ pod, runtime: runtime([rc('a')]), previous });
  assert.equal(s.phase, 'Failed');
  assert.equal(s.reason, 'Evicted');
  assert.equal(s.message, 'The node was low on resource: memory.');
  const fromAPI = mkPod();
  fromAPI.status = { phase: 'Succeeded' };
  assert.equal(gen({ pod: fromAPI, runtime: runtime([rc('a')]) }).phase, 'Succeeded');
});

test('an evicted pod whose containers exit 0 while terminal stays Failed/Evicted (the eviction status wins)', () => {
  const previous: PodStatus = { phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory.' };
  const s = gen({ pod: mkPod(), runtime: runtime([rc('a', { state: 'exited', exitCode: 0 })]), previous, podIsTerminal: true });
  assert.deepEqual([s.phase, s.reason, s.message], ['Failed', 'Evicted', 'The node was low on resource: memory.']);
  assert.equal(cond(s, 'Ready').reason, 'PodFailed');
});

test('a DisruptionTarget condition from the previous status is carried', () => {
  const previous: PodStatus = {
    phase: 'Running',
    conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message: 'x', lastTransitionTime: '2024-05-01T09:00:00Z' }],
  };
  const s = gen({ pod: mkPod(), runtime: runtime([rc('a')]), previous });
  const d = cond(s, 'DisruptionTarget');
  assert.equal(d.reason, 'TerminationByKubelet');
  assert.equal(d.lastTransitionTime, '2024-05-01T09:00:00Z');
});

test('guaranteed pod reports its QoS class', () => {
  const pod = mkPod({ containers: [{ name: 'a', image: 'i', resources: { limits: { cpu: '1', memory: '1Gi' } } }] });
  assert.equal(gen({ pod }).qosClass, 'Guaranteed');
});

test('shouldContainerBeRestarted follows state and restart policy; deleted pods never restart', () => {
  const c: Container = { name: 'a', image: 'i' };
  const exited0 = runtime([rc('a', { state: 'exited', exitCode: 0 })]);
  const exited1 = runtime([rc('a', { state: 'exited', exitCode: 1 })]);
  assert.equal(shouldContainerBeRestarted(c, mkPod(), undefined), true);
  assert.equal(shouldContainerBeRestarted(c, mkPod(), runtime([rc('a')])), false);
  assert.equal(shouldContainerBeRestarted(c, mkPod(), runtime([rc('a', { state: 'created' })])), true);
  assert.equal(shouldContainerBeRestarted(c, mkPod({ restartPolicy: 'Always' }), exited0), true);
  assert.equal(shouldContainerBeRestarted(c, mkPod({ restartPolicy: 'OnFailure' }), exited0), false);
  assert.equal(shouldContainerBeRestarted(c, mkPod({ restartPolicy: 'OnFailure' }), exited1), true);
  assert.equal(shouldContainerBeRestarted(c, mkPod({ restartPolicy: 'Never' }), exited1), false);
  const deleted = mkPod();
  deleted.metadata.deletionTimestamp = '2024-05-01T10:00:00Z';
  assert.equal(shouldContainerBeRestarted(c, deleted, exited1), false);
});

test('podStatusEqual ignores condition times and order, not content', () => {
  const pod = mkPod();
  const a = gen({ pod, runtime: runtime([rc('a', { id: 'q' })]), now: T0 });
  const b = structuredClone(a);
  for (const c of b.conditions!) {
    c.lastTransitionTime = '2024-05-01T11:00:00Z';
    c.lastProbeTime = '2024-05-01T11:00:00Z';
  }
  assert.equal(podStatusEqual(a, b), true);
  const reordered = { ...b, conditions: [...b.conditions!].reverse().map((c) => ({ ...c, lastProbeTime: undefined })) };
  assert.equal(podStatusEqual(a, reordered), true);
  const laterStart = { ...b, startTime: '2024-05-01T11:00:00Z' };
  assert.equal(podStatusEqual(a, laterStart), false);
  const unready = structuredClone(b);
  unready.containerStatuses![0]!.ready = false;
  assert.equal(podStatusEqual(a, unready), false);
  const otherMessage = structuredClone(b);
  otherMessage.conditions!.find((c) => c.type === 'Ready')!.message = 'x';
  assert.equal(podStatusEqual(a, otherMessage), false);
  const fewer = structuredClone(b);
  fewer.conditions!.pop();
  assert.equal(podStatusEqual(a, fewer), false);
});
