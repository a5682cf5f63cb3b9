// When a synced pod is next due (upstream completeWork): the regular resync is syncFrequency
// jittered by up to half again, a failed sync is retried after the jittered backOffPeriod, so
// pods started together do not all come due in the same second every minute.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { PodManager } from '../../src/kubelet/pod-manager.js';
import { PodSyncer } from '../../src/kubelet/pod-sync.js';
import { WorkQueue } from '../../src/kubelet/work-queue.js';
import type { PodSyncResult } from '../../src/runtime/types.js';
import { StatusManager } from '../../src/status/status-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import { CgroupsDouble, RuntimeRecorder, emptyStatus, loggerDouble } from './doubles.js';

class FailingRuntime extends RuntimeRecorder {
  override async syncPod(): Promise<PodSyncResult> {
    return { startFailures: new Map(), errors: ['runtime said no'] };
  }
}

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-resync-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

function setup(random: () => number, runtime = new RuntimeRecorder()): { syncer: PodSyncer; clock: FakeClock; queue: WorkQueue } {
  const clock = new FakeClock();
  const queue = new WorkQueue(clock);
  const syncer = new PodSyncer({
    runtime,
    statusManager: new StatusManager(),
    podManager: new PodManager(),
    workQueue: queue,
    cgroups: new CgroupsDouble(),
    clock,
    log: loggerDouble(),
    rootDir: root,
    podLogsDir: join(root, 'logs'),
    syncFrequencyMs: 60_000,
    hostIPs: () => ['10.0.0.1'],
    random,
  });
  return { syncer, clock, queue };
}

const pod = (uid: string): Pod => ({ metadata: { uid, name: `p-${uid}`, namespace: 'default' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } });

/** How long after the sync the pod came due, to the second. */
function dueAfter(clock: FakeClock, queue: WorkQueue, uid: string): number {
  for (let s = 0; s <= 120; s++) {
    if (queue.getWork().includes(uid)) return s;
    clock.step(1000);
  }
  return Infinity;
}

describe('resync timing', () => {
  for (const [random, want] of [[0, 60], [0.5, 75], [0.999, 90]] as const) {
    it(`a synced pod is due again after syncFrequency jittered by up to half (random ${random}: ${want} s)`, async () => {
      const { syncer, clock, queue } = setup(() => random);
      await syncer.syncPod(pod('u1'), emptyStatus('u1', 'p-u1'));
      assert.equal(dueAfter(clock, queue, 'u1'), want);
    });
  }

  it('a failed sync is retried after the 10 s backoff jittered by up to half', async () => {
    const { syncer, clock, queue } = setup(() => 0.999, new FailingRuntime());
    await assert.rejects(syncer.syncPod(pod('u2'), emptyStatus('u2', 'p-u2')), /runtime said no/);
    assert.equal(dueAfter(clock, queue, 'u2'), 15);
  });
});
