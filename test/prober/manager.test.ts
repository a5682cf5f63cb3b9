// The probe schedule and threshold state machine (upstream prober worker_test/prober_manager_test
// facts) on a FakeClock: initial delay, period, thresholds, startup gating, hold after a
// liveness failure, the random start after a restart of kubelet-ts, events and metrics.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Container, ContainerStatus, Pod, PodStatus, Probe } from '../../src/api/types.js';
import { ProbeManager } from '../../src/prober/manager.js';
import type { ProbeOutcome, ProbeRequest, ProbeRunner, ProbeType } from '../../src/prober/types.js';
import { FakeClock } from '../../src/util/clock.js';
import type { Logger } from '../../src/util/log.js';

const log: Logger = { info() {}, warn() {}, error() {}, v: () => ({ info() {} }), with: () => log };

class ScriptedRunner implements ProbeRunner {
  calls: ProbeRequest[] = [];
  next: ProbeOutcome = { result: 'success', output: 'ok' };
  run(req: ProbeRequest): Promise<ProbeOutcome> {
    this.calls.push(req);
    return Promise.resolve(this.next);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Steps the clock a second at a time, letting each probe's promise settle. */
async function advance(clock: FakeClock, seconds: number): Promise<void> {
  for (let i = 0; i < seconds; i++) {
    clock.step(1000);
    await flush();
    // a probe re-arms once it settles: fire what became due meanwhile
    clock.step(0);
    await flush();
  }
}

function mkPod(probes: { liveness?: Probe; readiness?: Probe; startup?: Probe }): Pod {
  const c: Container = { name: 'app', image: 'busybox', ports: [{ name: 'http', containerPort: 8080 }] };
  if (probes.liveness) c.livenessProbe = probes.liveness;
  if (probes.readiness) c.readinessProbe = probes.readiness;
  if (probes.startup) c.startupProbe = probes.startup;
  return { metadata: { uid: 'u1', name: 'web', namespace: 'default' }, spec: { containers: [c], restartPolicy: 'Always' } };
}

interface Harness {
  clock: FakeClock;
  runner: ScriptedRunner;
  manager: ProbeManager;
  events: { reason: string; message: string }[];
  updates: { type: ProbeType; result: string; containerID: string }[];
  container: ContainerStatus;
  status: PodStatus;
}

function harness(opts: { random?: number; startedAgoMs?: number; managerAgeMs?: number } = {}): Harness {
  const clock = new FakeClock();
  const runner = new ScriptedRunner();
  const events: Harness['events'] = [];
  const updates: Harness['updates'] = [];
  const container: ContainerStatus = {
    name: 'app', containerID: 'containerd://c1', ready: false, restartCount: 0, image: 'busybox', imageID: '',
    state: { running: { startedAt: new Date(clock.now() - (opts.startedAgoMs ?? 0)).toISOString() } }, lastState: {}, started: false,
  };
  const status: PodStatus = { phase: 'Running', podIP: '10.0.0.5', containerStatuses: [container] };
  const manager = new ProbeManager({
    clock, log, runner,
    podStatus: (uid) => (uid === 'u1' ? status : undefined),
    recordEvent: (_p, _c, _t, reason, message) => events.push({ reason, message }),
    onUpdate: (type, u) => updates.push({ type, result: u.result, containerID: u.containerID }),
    random: () => opts.random ?? 0,
  });
  if (opts.managerAgeMs) clock.step(opts.managerAgeMs);
  container.state = { running: { startedAt: new Date(clock.now() - (opts.startedAgoMs ?? 0)).toISOString() } };
  return { clock, runner, manager, events, updates, container, status };
}

const exec: Probe = { exec: { command: ['check'] } };

test('prober: liveness waits initialDelaySeconds, fails after failureThreshold, then holds until the container is replaced', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.container.started = true;
  h.manager.addPod(mkPod({ liveness: { ...exec, initialDelaySeconds: 5, periodSeconds: 1, failureThreshold: 3, timeoutSeconds: 2 } }));
  h.runner.next = { result: 'failure', output: 'boom\n' };
  await advance(h.clock, 4);
  assert.equal(h.runner.calls.length, 0, 'no probe inside the initial delay');
  assert.equal(h.manager.liveness.get('containerd://c1'), 'Success', 'liveness starts as Success');
  await advance(h.clock, 2);
  assert.equal(h.runner.calls.length, 2);
  assert.equal(h.manager.liveness.get('containerd://c1'), 'Success', 'below the threshold nothing changes');
  await advance(h.clock, 1);
  assert.equal(h.runner.calls.length, 3);
  assert.equal(h.manager.liveness.get('containerd://c1'), 'Failure');
  assert.deepEqual(h.updates.at(-1), { type: 'Liveness', result: 'Failure', containerID: 'containerd://c1' });
  assert.deepEqual(h.events[0], { reason: 'Unhealthy', message: 'Liveness probe failed: boom' });
  const req = h.runner.calls[0]!;
  assert.equal(req.kind, 'exec');
  assert.equal(req.kind === 'exec' && req.containerID, 'c1');
  assert.equal(req.timeoutMs, 2000);
  await advance(h.clock, 5);
  assert.equal(h.runner.calls.length, 3, 'on hold after a liveness failure');
  // The restarted container has a new ID: probing resumes from the initial value.
  h.container.containerID = 'containerd://c2';
  h.container.state = { running: { startedAt: new Date(h.clock.now()).toISOString() } };
  h.runner.next = { result: 'success', output: '' };
  await advance(h.clock, 1);
  assert.equal(h.manager.liveness.get('containerd://c2'), 'Success');
  assert.equal(h.manager.liveness.get('containerd://c1'), undefined, 'the old container\'s result is dropped');
  await advance(h.clock, 6);
  assert.ok(h.runner.calls.length > 3, 'probing resumed after the initial delay');
});

test('prober: readiness starts Failure, needs successThreshold successes, and keeps probing after a failure', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.container.started = true;
  h.manager.addPod(mkPod({ readiness: { ...exec, periodSeconds: 2, successThreshold: 2, failureThreshold: 1 } }));
  await flush();
  await advance(h.clock, 0);
  h.clock.step(0);
  await flush();
  assert.equal(h.runner.calls.length, 1, 'first probe at once when kubelet-ts is not just started');
  assert.equal(h.manager.readiness.get('containerd://c1'), 'Failure');
  await advance(h.clock, 2);
  assert.equal(h.runner.calls.length, 2);
  assert.equal(h.manager.readiness.get('containerd://c1'), 'Success');
  assert.deepEqual(h.manager.statusInputs('u1').readiness, new Map([['containerd://c1', true]]));
  h.runner.next = { result: 'failure', output: 'nope' };
  await advance(h.clock, 2);
  assert.equal(h.manager.readiness.get('containerd://c1'), 'Failure');
  h.runner.next = { result: 'success', output: '' };
  await advance(h.clock, 4);
  assert.equal(h.manager.readiness.get('containerd://c1'), 'Success', 'readiness is never held');
  assert.deepEqual(h.updates.map((u) => u.result), ['Failure', 'Success', 'Failure', 'Success']);
});

test('prober: the startup probe gates liveness and readiness, then stops once started', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.manager.addPod(mkPod({ startup: { ...exec, periodSeconds: 1, failureThreshold: 30 }, liveness: { tcpSocket: { port: 'http' }, periodSeconds: 1 } }));
  h.runner.next = { result: 'failure', output: 'not yet' };
  await advance(h.clock, 3);
  assert.ok(h.runner.calls.length >= 3);
  assert.ok(h.runner.calls.every((c) => c.kind === 'exec'), 'only the startup probe runs before the container started');
  assert.equal(h.manager.startup.get('containerd://c1'), 'Unknown');
  assert.deepEqual(h.manager.statusInputs('u1').startup, new Map(), 'Unknown is not reported as started');
  h.runner.next = { result: 'success', output: '' };
  await advance(h.clock, 1);
  assert.equal(h.manager.startup.get('containerd://c1'), 'Success');
  // The pod sync that follows reports started=true.
  h.container.started = true;
  const before = h.runner.calls.length;
  await advance(h.clock, 3);
  const after: ProbeRequest[] = h.runner.calls.slice(before);
  assert.ok(after.length >= 3);
  assert.ok(after.every((c) => c.kind === 'tcp'), 'liveness runs, startup stops');
  const tcp: ProbeRequest = after[0]!;
  assert.deepEqual(tcp.kind === 'tcp' && [tcp.host, tcp.port], ['10.0.0.5', 8080], 'host is the pod IP; the named port resolves');
});

test('prober: a startup failure holds and reports Failure for computePodActions', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.manager.addPod(mkPod({ startup: { ...exec, periodSeconds: 1, failureThreshold: 2 } }));
  h.runner.next = { result: 'failure', output: 'down' };
  await advance(h.clock, 2);
  assert.equal(h.manager.startup.get('containerd://c1'), 'Failure');
  assert.deepEqual(h.events.map((e) => e.message), ['Startup probe failed: down', 'Startup probe failed: down']);
});

test('prober: right after kubelet-ts starts, a probe waits a random part of its period', async () => {
  const h = harness({ random: 0.5 });
  h.container.started = true;
  h.manager.addPod(mkPod({ liveness: { ...exec, periodSeconds: 10 } }));
  await advance(h.clock, 4);
  assert.equal(h.runner.calls.length, 0);
  await advance(h.clock, 1);
  assert.equal(h.runner.calls.length, 1, 'first run at 0.5 × period');
  await advance(h.clock, 10);
  assert.equal(h.runner.calls.length, 2, 'then every period');
});

test('prober: warnings count as success and raise ProbeWarning; errors are unknown and retried', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.container.started = true;
  h.manager.addPod(mkPod({ readiness: { httpGet: { port: 8080, path: '/' }, periodSeconds: 5 } }));
  h.runner.next = { result: 'warning', output: 'Probe terminated redirects, Response body: x' };
  h.clock.step(0);
  await flush();
  assert.equal(h.manager.readiness.get('containerd://c1'), 'Success');
  assert.deepEqual(h.events.at(-1), { reason: 'ProbeWarning', message: 'Readiness probe warning: Probe terminated redirects, Response body: x' });
  h.runner.next = { result: 'unknown', output: 'pool down' };
  const before = h.runner.calls.length;
  await advance(h.clock, 5);
  assert.equal(h.runner.calls.length - before, 3, 'an errored run is retried up to 3 times');
  assert.equal(h.manager.readiness.get('containerd://c1'), 'Success', 'unknown changes nothing');
  const text = h.manager.metrics.registry.metricsText();
  assert.match(text, /prober_probe_total\{container="app",namespace="default",pod="web",pod_uid="u1",probe_type="Readiness",result="successful"\} 1/);
  assert.match(text, /prober_probe_total\{container="app",namespace="default",pod="web",pod_uid="u1",probe_type="Readiness",result="unknown"\} 1/);
  assert.match(text, /prober_probe_duration_seconds_count\{container="app",namespace="default",pod="web",probe_type="Readiness"\} 1/);
});

test('prober: a deleted pod is not restarted by liveness; removePod stops every timer', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.container.started = true;
  const pod = mkPod({ liveness: { ...exec, periodSeconds: 1, failureThreshold: 1 }, readiness: { ...exec, periodSeconds: 1 } });
  pod.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  h.runner.next = { result: 'failure', output: 'x' };
  h.manager.addPod(pod);
  await advance(h.clock, 3);
  assert.equal(h.manager.liveness.get('containerd://c1'), 'Success');
  assert.equal(h.manager.workerCount(), 2);
  h.manager.removePod(pod);
  assert.equal(h.manager.workerCount(), 0);
  assert.equal(h.clock.pendingTimers(), 0);
  assert.equal(h.manager.readiness.get('containerd://c1'), undefined);
});

test('prober: a container that exited reads as failed; under Never the worker ends', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.container.started = true;
  const pod = mkPod({ readiness: { ...exec, periodSeconds: 1 } });
  pod.spec.restartPolicy = 'Never';
  h.manager.addPod(pod);
  await advance(h.clock, 1);
  h.container.state = { terminated: { exitCode: 1, reason: 'Error' } } as ContainerStatus['state'];
  await advance(h.clock, 1);
  assert.equal(h.manager.readiness.get('containerd://c1'), undefined, 'the ended worker dropped its result');
  assert.equal(h.manager.workerCount(), 0);
});

test('prober: readiness reported before a restart of kubelet-ts is kept for the same container', async () => {
  const h = harness({ managerAgeMs: 60_000 });
  h.container.started = true;
  const pod = mkPod({ readiness: { ...exec, periodSeconds: 10, initialDelaySeconds: 30 } });
  pod.status = { containerStatuses: [{ ...h.container, ready: true }] };
  h.manager.addPod(pod);
  h.clock.step(0);
  await flush();
  assert.equal(h.manager.readiness.get('containerd://c1'), 'Success');
});
