// Sidecar termination ordering (upstream's terminationOrdering) through the PodKiller with a CRI
// double whose StopContainer returns when the test says the container exited: the regular
// containers are stopped first, each sidecar once the regular containers and the sidecars
// declared after it have exited; the time waited comes off the shared grace period; an expired
// grace period stops the rest at once (2 s floor).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Container, Pod } from '../../src/api/types.js';
import { PodKiller, type KillCri } from '../../src/runtime/kill.js';
import { HandlerRunner } from '../../src/runtime/hooks.js';
import { TerminationOrdering } from '../../src/runtime/termination-ordering.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../src/runtime/types.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

function pod(grace: number, over: { init?: Container[]; containers?: Container[] } = {}): Pod {
  return {
    metadata: { uid: 'u1', name: 'web', namespace: 'default' },
    spec: {
      terminationGracePeriodSeconds: grace,
      initContainers: over.init ?? [
        { name: 'sidecar1', image: 'busybox', restartPolicy: 'Always' },
        { name: 'setup', image: 'busybox' },
        { name: 'sidecar2', image: 'busybox', restartPolicy: 'Always' },
      ],
      containers: over.containers ?? [{ name: 'main', image: 'busybox' }, { name: 'helper', image: 'busybox' }],
    },
  };
}

function running(name: string): ContainerRuntimeStatus {
  const id = `id-${name}`;
  return { id, containerID: `containerd://${id}`, name, state: 'running', createdAt: 1, startedAt: 1, finishedAt: 0, exitCode: 0, image: '', imageRef: '', hash: '', restartCount: 0, reason: '', message: '', labels: {}, annotations: {} };
}

function podStatus(names: string[]): RuntimePodStatus {
  return {
    uid: 'u1', name: 'web', namespace: 'default', ips: ['10.0.0.5'],
    sandboxStatuses: [{ id: 'sb1', state: 'ready', createdAt: 1, attempt: 0, ip: '10.0.0.5', additionalIps: [], hostNetwork: false, labels: {}, annotations: {} }],
    containerStatuses: names.map(running), timestamp: 1,
  };
}

/** StopContainer calls in order; each returns when exit(name) is called. */
function rig() {
  const clock = new FakeClock();
  const calls: string[] = [];
  const exits = new Map<string, () => void>();
  const cri: KillCri = {
    stopContainer: (id, grace) => {
      calls.push(`stop ${id.slice(3)} ${grace}`);
      return new Promise<void>((resolve) => exits.set(id.slice(3), resolve));
    },
    stopPodSandbox: async (id) => { calls.push(`stopSandbox ${id}`); },
  };
  const hooks = new HandlerRunner({ cri: { execSync: async () => ({ stdout: Buffer.from(''), stderr: Buffer.from(''), exit_code: 0 }) }, clock });
  const killer = new PodKiller({ cri, hooks, clock, log: loggerDouble(), hostIPs: () => ['10.0.0.1'] });
  const exit = (name: string) => {
    const f = exits.get(name);
    assert.ok(f, `${name} was asked to stop`);
    f();
  };
  return { clock, calls, killer, exit };
}

const settle = async () => { for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r)); };

test('regular containers stop first, then sidecar2, then sidecar1; the wait comes off the grace period', async () => {
  const r = rig();
  const done = r.killer.killPod(pod(30), podStatus(['main', 'helper', 'sidecar1', 'sidecar2']), undefined);
  await settle();
  assert.deepEqual(r.calls.sort(), ['stop helper 30', 'stop main 30'], 'only the regular containers get StopContainer');
  r.clock.step(3000);
  r.exit('main');
  await settle();
  assert.equal(r.calls.length, 2, 'the sidecars wait for every regular container');
  r.clock.step(1000);
  r.exit('helper');
  await settle();
  assert.deepEqual(r.calls.slice(2), ['stop sidecar2 26'], 'the last sidecar goes next, with 30 - 4 s');
  r.clock.step(5000);
  r.exit('sidecar2');
  await settle();
  assert.deepEqual(r.calls.slice(3), ['stop sidecar1 21']);
  r.exit('sidecar1');
  await done;
  assert.deepEqual(r.calls.slice(4), ['stopSandbox sb1']);
});

test('the grace period runs out: the sidecars still waiting are stopped at once with the 2 s floor', async () => {
  const r = rig();
  const done = r.killer.killPod(pod(10), podStatus(['main', 'helper', 'sidecar1', 'sidecar2']), undefined);
  await settle();
  r.exit('helper');
  await settle();
  assert.deepEqual(r.calls.sort(), ['stop helper 10', 'stop main 10']);
  // main ignores SIGTERM: runc kills it at the end of its 10 s; the sidecars do not wait longer
  r.clock.step(10_000);
  await settle();
  assert.deepEqual(r.calls.slice(2).sort(), ['stop sidecar1 2', 'stop sidecar2 2']);
  for (const n of ['main', 'sidecar1', 'sidecar2']) r.exit(n);
  await done;
  assert.equal(r.clock.pendingTimers(), 0, 'no wait is left behind');
});

test('a sidecar that no longer runs is not waited for; without sidecars nothing is ordered', async () => {
  const r = rig();
  const done = r.killer.killPod(pod(30), podStatus(['main', 'sidecar1']), undefined);
  await settle();
  assert.deepEqual(r.calls, ['stop main 30']);
  r.exit('main');
  await settle();
  assert.deepEqual(r.calls.slice(1), ['stop sidecar1 30'], 'sidecar2 has exited already: sidecar1 follows main at once');
  r.exit('sidecar1');
  await done;

  assert.equal(TerminationOrdering.forPod(pod(30, { init: [{ name: 'setup', image: 'busybox' }] }), ['main']), undefined);
  const plain = rig();
  const p2 = plain.killer.killPod(pod(30, { init: [{ name: 'setup', image: 'busybox' }] }), podStatus(['main', 'helper']), undefined);
  await settle();
  assert.deepEqual(plain.calls.sort(), ['stop helper 30', 'stop main 30']);
  plain.exit('main');
  plain.exit('helper');
  await p2;
});

test('ordering: what each container waits for', () => {
  const o = TerminationOrdering.forPod(pod(30), ['main', 'helper', 'sidecar1', 'sidecar2'])!;
  assert.deepEqual(o.waitingFor('main'), []);
  assert.deepEqual(o.waitingFor('sidecar2'), ['main', 'helper']);
  assert.deepEqual(o.waitingFor('sidecar1'), ['main', 'helper', 'sidecar2']);
  o.containerTerminated('main');
  o.containerTerminated('sidecar2');
  assert.deepEqual(o.waitingFor('sidecar1'), ['helper']);
});
