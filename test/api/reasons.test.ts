import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as R from '../../src/api/reasons.js';
import type { Pod } from '../../src/api/types.js';

test('reason strings are upstream\'s exact strings', () => {
  assert.deepEqual(
    [R.ContainerCreating, R.PodInitializing, R.CrashLoopBackOff, R.ImagePullBackOff, R.ErrImagePull,
      R.InvalidImageName, R.ErrImageNeverPull, R.ImageInspectError, R.RegistryUnavailable,
      R.CreateContainerConfigError, R.CreateContainerError, R.PreStartHookError, R.PostStartHookError,
      R.RunContainerError, R.Completed, R.ErrorReason, R.OOMKilled, R.ContainerStatusUnknown, R.Evicted],
    ['ContainerCreating', 'PodInitializing', 'CrashLoopBackOff', 'ImagePullBackOff', 'ErrImagePull',
      'InvalidImageName', 'ErrImageNeverPull', 'ImageInspectError', 'RegistryUnavailable',
      'CreateContainerConfigError', 'CreateContainerError', 'PreStartHookError', 'PostStartHookError',
      'RunContainerError', 'Completed', 'Error', 'OOMKilled', 'ContainerStatusUnknown', 'Evicted'],
  );
  assert.equal(R.Reasons.Error, 'Error');
  assert.equal(R.Reasons.CrashLoopBackOff, 'CrashLoopBackOff');
});

test('condition types and reasons', () => {
  assert.deepEqual(
    [R.PodReadyToStartContainers, R.PodInitialized, R.ContainersReady, R.PodReady, R.PodScheduled],
    ['PodReadyToStartContainers', 'Initialized', 'ContainersReady', 'Ready', 'PodScheduled'],
  );
  assert.deepEqual(
    [R.ContainersNotInitialized, R.ContainersNotReady, R.PodCompleted, R.PodFailed, R.UnknownContainerStatuses, R.ReadinessGatesNotReady],
    ['ContainersNotInitialized', 'ContainersNotReady', 'PodCompleted', 'PodFailed', 'UnknownContainerStatuses', 'ReadinessGatesNotReady'],
  );
});

test('kubelet-owned and shared conditions', () => {
  for (const t of ['PodScheduled', 'Ready', 'Initialized', 'ContainersReady', 'PodReadyToStartContainers']) {
    assert.equal(R.podConditionByKubelet(t), true, t);
  }
  assert.equal(R.podConditionByKubelet('DisruptionTarget'), false);
  assert.equal(R.podConditionSharedByKubelet('DisruptionTarget'), true);
  assert.equal(R.podConditionByKubelet('example.com/gate'), false);
});

test('formatGoDuration prints like Go time.Duration', () => {
  const cases: [number, string][] = [
    [0, '0s'], [300, '300ms'], [1500, '1.5s'], [10_000, '10s'], [40_000, '40s'],
    [80_000, '1m20s'], [160_000, '2m40s'], [300_000, '5m0s'], [3_600_000, '1h0m0s'], [3_723_000, '1h2m3s'],
  ];
  for (const [ms, want] of cases) assert.equal(R.formatGoDuration(ms), want, String(ms));
});

test('crashLoopBackOffMessage names the container and the pod as name_namespace(uid)', () => {
  const pod: Pod = { metadata: { name: 'web', namespace: 'prod', uid: '1234' }, spec: { containers: [] } };
  assert.equal(R.crashLoopBackOffMessage(300_000, 'app', pod), 'back-off 5m0s restarting failed container=app pod=web_prod(1234)');
  assert.equal(R.goStringList(['a', 'b']), '[a b]');
});
