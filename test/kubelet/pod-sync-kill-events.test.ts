// A pod whose kill or removal the runtime refuses (a sandbox that cannot be stopped: the CRI
// answers StopPodSandbox with an error) records upstream's FailedKillPod event with the
// runtime's message, and the step still fails so that the pod worker tries it again.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { PodManager } from '../../src/kubelet/pod-manager.js';
import { PodSyncer } from '../../src/kubelet/pod-sync.js';
import { WorkQueue } from '../../src/kubelet/work-queue.js';
import { KillPodError } from '../../src/runtime/errors.js';
import type { RuntimePodStatus } from '../../src/runtime/types.js';
import { StatusManager } from '../../src/status/status-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import { CgroupsDouble, RuntimeRecorder, emptyStatus, loggerDouble } from './doubles.js';

const BUSY = 'CRI StopPodSandbox failed: UNKNOWN: failed to destroy network for sandbox "abc": failed to remove netns: unlinkat /var/run/netns/cni-1: device or resource busy';

class StuckSandboxRuntime extends RuntimeRecorder {
  override async killPod(pod: Pod | undefined, status: RuntimePodStatus): Promise<void> {
    await super.killPod(pod, status);
    throw new KillPodError(`${status.namespace}/${status.name}`, [`sandbox abc: ${BUSY}`]);
  }
  override async removePod(status: RuntimePodStatus): Promise<void> {
    await super.removePod(status);
    throw new Error(BUSY);
  }
}

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-kill-events-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

function setup(runtime: RuntimeRecorder): { syncer: PodSyncer; events: string[] } {
  const clock = new FakeClock();
  const events: string[] = [];
  const syncer = new PodSyncer({
    runtime,
    statusManager: new StatusManager(),
    podManager: new PodManager(),
    workQueue: new WorkQueue(clock),
    cgroups: new CgroupsDouble(),
    clock,
    log: loggerDouble(),
    rootDir: root,
    podLogsDir: join(root, 'logs'),
    syncFrequencyMs: 60_000,
    hostIPs: () => ['10.0.0.1'],
    recordEvent: (pod, type, reason, message) => void events.push(`${pod.metadata.uid} ${type} ${reason}: ${message}`),
  });
  return { syncer, events };
}

const pod: Pod = { metadata: { uid: 'u1', name: 'web-node', namespace: 'default' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } };

describe('a pod the runtime cannot stop', () => {
  it('records FailedKillPod with "error killing pod:" and the runtime\'s message when the kill fails, and fails the step', async () => {
    const { syncer, events } = setup(new StuckSandboxRuntime());
    await assert.rejects(syncer.syncTerminatingPod(pod, emptyStatus('u1', 'web-node'), undefined), /device or resource busy/);
    assert.deepEqual(events, [`u1 Warning FailedKillPod: error killing pod: killing pod default/web-node: sandbox abc: ${BUSY}`]);
  });

  it('records FailedKillPod when removing a removed pod\'s sandboxes fails, and fails the step', async () => {
    const { syncer, events } = setup(new StuckSandboxRuntime());
    await assert.rejects(syncer.syncTerminatedPod(pod, emptyStatus('u1', 'web-node'), true, true), /device or resource busy/);
    assert.deepEqual(events, [`u1 Warning FailedKillPod: error removing pod: ${BUSY}`]);
  });

  it('records nothing when the kill and removal succeed', async () => {
    const { syncer, events } = setup(new RuntimeRecorder());
    await syncer.syncTerminatingPod(pod, emptyStatus('u1', 'web-node'), undefined);
    await syncer.syncTerminatedPod(pod, emptyStatus('u1', 'web-node'), true, true);
    assert.deepEqual(events, []);
  });
});
