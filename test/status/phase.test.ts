import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getPhase, isStaticPod } from '../../src/status/phase.js';
import type { Container, ContainerStatus, Pod, RestartPolicy } from '../../src/api/types.js';

function pod(names: string[], restartPolicy: RestartPolicy = 'Always', init: Container[] = []): Pod {
  return {
    metadata: { name: 'p', namespace: 'ns', uid: 'u' },
    spec: { containers: names.map((name) => ({ name, image: 'i' })), initContainers: init, restartPolicy },
  };
}

const base = (name: string): ContainerStatus => ({
  name, state: {}, lastState: {}, ready: false, restartCount: 0, image: 'i', imageID: '',
});
const running = (name: string, started = true): ContainerStatus => ({
  ...base(name), state: { running: { startedAt: '2024-01-01T00:00:00Z' } }, started,
});
const exited = (name: string, exitCode: number): ContainerStatus => ({
  ...base(name), state: { terminated: { exitCode } },
});
const waiting = (name: string, lastExit?: number): ContainerStatus => ({
  ...base(name),
  state: { waiting: { reason: 'ContainerCreating' } },
  lastState: lastExit === undefined ? {} : { terminated: { exitCode: lastExit } },
});
const sidecar = (name: string): Container => ({ name, image: 'i', restartPolicy: 'Always' });
const initC = (name: string): Container => ({ name, image: 'i' });

test('containers waiting for their first start: Pending', () => {
  assert.equal(getPhase(pod(['a', 'b']), [running('a'), waiting('b')], [], false), 'Pending');
});

test('all started and one running: Running', () => {
  assert.equal(getPhase(pod(['a', 'b']), [running('a'), exited('b', 0)], [], false), 'Running');
});

test('a container with no known state keeps the pod Pending (no Unknown phase)', () => {
  assert.equal(getPhase(pod(['a', 'b']), [running('a'), base('b')], [], false), 'Pending');
  assert.equal(getPhase(pod(['a']), [], [], false), 'Pending');
});

test('all exited under Always: Running (they are being restarted)', () => {
  assert.equal(getPhase(pod(['a', 'b'], 'Always'), [exited('a', 0), exited('b', 1)], [], false), 'Running');
  assert.equal(getPhase(pod(['a'], 'Always'), [exited('a', 0)], [], false), 'Running');
});

test('all exited 0 under OnFailure or Never: Succeeded', () => {
  assert.equal(getPhase(pod(['a', 'b'], 'OnFailure'), [exited('a', 0), exited('b', 0)], [], false), 'Succeeded');
  assert.equal(getPhase(pod(['a', 'b'], 'Never'), [exited('a', 0), exited('b', 0)], [], false), 'Succeeded');
});

test('all exited with a failure: Failed under Never, Running under OnFailure', () => {
  assert.equal(getPhase(pod(['a', 'b'], 'Never'), [exited('a', 0), exited('b', 2)], [], false), 'Failed');
  assert.equal(getPhase(pod(['a', 'b'], 'OnFailure'), [exited('a', 0), exited('b', 2)], [], false), 'Running');
});

test('a container waiting to restart after a failure counts as stopped, not waiting', () => {
  assert.equal(getPhase(pod(['a'], 'Always'), [waiting('a', 1)], [], false), 'Running');
  assert.equal(getPhase(pod(['a'], 'OnFailure'), [waiting('a', 1)], [], false), 'Running');
});

test('podIsTerminal decides by exit codes whatever the restart policy', () => {
  assert.equal(getPhase(pod(['a'], 'Always'), [exited('a', 0)], [], true), 'Succeeded');
  assert.equal(getPhase(pod(['a'], 'Always'), [exited('a', 137)], [], true), 'Failed');
  assert.equal(getPhase(pod(['a'], 'OnFailure'), [waiting('a', 1)], [], true), 'Failed');
});

test('static pods are never made terminal by podIsTerminal', () => {
  const p = pod(['a'], 'Always');
  p.metadata.annotations = { 'kubernetes.io/config.source': 'file' };
  assert.equal(isStaticPod(p), true);
  assert.equal(getPhase(p, [exited('a', 0)], [], true), 'Running');
  p.metadata.annotations = { 'kubernetes.io/config.source': 'api' };
  assert.equal(isStaticPod(p), false);
  assert.equal(getPhase(p, [exited('a', 0)], [], true), 'Succeeded');
});

test('init container running or not yet run: Pending', () => {
  const p = pod(['a'], 'Always', [initC('i1'), initC('i2')]);
  assert.equal(getPhase(p, [waiting('a')], [running('i1'), waiting('i2')], false), 'Pending');
  assert.equal(getPhase(p, [waiting('a')], [exited('i1', 0), waiting('i2')], false), 'Pending');
});

test('init containers done and the app running: Running', () => {
  const p = pod(['a'], 'Always', [initC('i1')]);
  assert.equal(getPhase(p, [running('a')], [exited('i1', 0)], false), 'Running');
});

test('a failed init container fails the pod only under Never', () => {
  const never = pod(['a'], 'Never', [initC('i1')]);
  assert.equal(getPhase(never, [waiting('a')], [exited('i1', 1)], false), 'Failed');
  const always = pod(['a'], 'Always', [initC('i1')]);
  assert.equal(getPhase(always, [waiting('a')], [exited('i1', 1)], false), 'Pending');
  const onFailure = pod(['a'], 'OnFailure', [initC('i1')]);
  assert.equal(getPhase(onFailure, [waiting('a')], [waiting('i1', 1)], false), 'Pending');
});

test('sidecar running but not started keeps the pod Pending', () => {
  const p = pod(['a'], 'Always', [sidecar('s')]);
  assert.equal(getPhase(p, [waiting('a')], [running('s', false)], false), 'Pending');
});

test('started sidecar and running app: Running; the sidecar counts as running', () => {
  const p = pod(['a'], 'Always', [sidecar('s')]);
  assert.equal(getPhase(p, [running('a')], [running('s', true)], false), 'Running');
  // app exited under Never, sidecar still running: the pod is still Running
  const never = pod(['a'], 'Never', [sidecar('s')]);
  assert.equal(getPhase(never, [exited('a', 0)], [running('s', true)], false), 'Running');
});

test('exited sidecars do not count: app succeeded under Never is Succeeded', () => {
  const p = pod(['a'], 'Never', [sidecar('s')]);
  assert.equal(getPhase(p, [exited('a', 0)], [exited('s', 137)], false), 'Succeeded');
});

test('a restarting sidecar after initialization does not send the pod back to Pending', () => {
  const p = pod(['a'], 'Always', [sidecar('s')]);
  const statuses = [running('a')];
  const init = [running('s', false)];
  assert.equal(getPhase(p, statuses, init, false, false), 'Pending');
  assert.equal(getPhase(p, statuses, init, false, true), 'Running');
});
