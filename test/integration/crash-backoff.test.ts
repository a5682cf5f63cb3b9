// CrashLoopBackOff timing on real containerd, with the runtime manager driven directly and
// time stepped on a fake clock: 10s doubling to 300s, reset after 10 minutes.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { applyPodDefaults } from '../../src/api/defaults.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { RuntimeManager, type PodSyncResult } from '../../src/runtime/runtime-manager.js';
import type { RuntimePodStatus } from '../../src/runtime/types.js';
import { ImageManager } from '../../src/images/image-manager.js';
import { discoverCgroupMounts } from '../../src/cgroups/index.js';
import { PodContainerManager } from '../../src/cm/pod-container-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { ensureRuntime } from '../fixtures/runtime.js';
import { waitFor } from '../fixtures/kubelet-process.js';

const WAIT = 60_000;

describe('CrashLoopBackOff on containerd with a fake clock', () => {
  let cri: CriClient;
  let runtime: RuntimeManager;
  let clock: FakeClock;
  let cgroups: PodContainerManager;
  let rootDir: string;
  let busybox: string;
  const pod: Pod = {
    metadata: { name: 'crasher', namespace: 'default', uid: `crash-${process.pid}-${Date.now()}` },
    spec: {
      hostNetwork: true,
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 2,
      containers: [{ name: 'main', image: '', command: ['sh', '-c', 'exit 3'] }],
    },
  };

  before(async () => {
    const rt = await ensureRuntime();
    busybox = rt.images.busybox;
    pod.spec.containers[0]!.image = busybox;
    applyPodDefaults(pod);
    setLogSink(() => undefined);
    clock = new FakeClock(Date.now());
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    rootDir = await mkdtemp(join(tmpdir(), 'kts-backoff-'));
    cgroups = new PodContainerManager({ mounts: await discoverCgroupMounts(), cgroupRoot: '', log: createLogger() });
    const log = createLogger();
    runtime = new RuntimeManager({
      cri,
      images: new ImageManager({ cri, clock, log, serializeImagePulls: true }),
      clock,
      log,
      nodeName: 'backoff-node',
      hostIPs: () => ['127.0.0.1'],
      memoryCapacityBytes: 1 << 30,
      podLogsDir: join(rootDir, 'logs'),
      rootDir,
      ensurePodCgroup: (p) => cgroups.ensureExists(p),
    });
  });

  after(async () => {
    const st = await runtime.getPodStatus(pod.metadata.uid!, 'crasher', 'default');
    await runtime.killPod(pod, st, 0).catch(() => undefined);
    await runtime.removePod(await runtime.getPodStatus(pod.metadata.uid!, 'crasher', 'default'));
    await cgroups.remove(cgroups.podCgroupName(pod)).catch(() => undefined);
    await rm(rootDir, { recursive: true, force: true });
    cri.close();
  });

  // The runtime stamps real times; the kubelet here lives on the fake clock. Each container's
  // start and exit are moved onto the fake timeline at the fake moment the test first sees them.
  const seen = new Map<string, { startedAt: number; finishedAt?: number }>();
  async function status(): Promise<RuntimePodStatus> {
    const st = await runtime.getPodStatus(pod.metadata.uid!, 'crasher', 'default');
    for (const c of st.containerStatuses) {
      let v = seen.get(c.id);
      if (!v) seen.set(c.id, (v = { startedAt: clock.now() }));
      if (c.state === 'exited') v.finishedAt ??= clock.now();
      c.startedAt = v.startedAt;
      c.finishedAt = v.finishedAt ?? 0;
    }
    return st;
  }
  async function sync(rm = runtime): Promise<PodSyncResult> {
    const r = await rm.syncPod(pod, await status());
    await status(); // stamp what this sync started
    return r;
  }

  /** Waits (in real time) until the newest attempt of `main` has exited, and returns it. */
  async function exitedAttempt(restartCount: number) {
    return waitFor(async () => {
      const s = (await status()).containerStatuses.find((c) => c.name === 'main');
      return s && s.state === 'exited' && s.restartCount === restartCount ? s : undefined;
    }, WAIT, `attempt ${restartCount} to exit`);
  }

  const backoffOf = (r: PodSyncResult): string | undefined => r.startFailures.get('main')?.message;

  it('restarts at once the first time, then backs off 10s, 20s, 40s ... up to 300s', async () => {
    const first = await sync();
    assert.equal(first.startFailures.size, 0);
    await exitedAttempt(0);
    clock.step(1_000);
    // First crash: restarted at once (no backoff yet), as upstream.
    assert.equal((await sync()).startFailures.size, 0);

    const messages: string[] = [];
    let expected = 10_000;
    for (let restart = 1; restart <= 7; restart++) {
      await exitedAttempt(restart);
      // Just inside the window: in backoff, with upstream's message.
      clock.step(expected - 1_000);
      const r = await sync();
      assert.equal(r.startFailures.get('main')?.reason, 'CrashLoopBackOff');
      const msg = backoffOf(r)!;
      messages.push(msg.split(' ')[1]!);
      assert.equal(msg, `back-off ${messages.at(-1)} restarting failed container=main pod=crasher_default(${pod.metadata.uid})`);
      assert.ok(r.requeueAfterMs !== undefined && r.requeueAfterMs <= 1_100, 'requeued for the end of the window');
      // Just past it: restarted.
      clock.step(1_100);
      assert.equal((await sync()).startFailures.size, 0, `restart ${restart + 1} starts after ${expected}ms`);
      expected = Math.min(expected * 2, 300_000);
    }
    assert.deepEqual(messages, ['10s', '20s', '40s', '1m20s', '2m40s', '5m0s', '5m0s']);
  });

  it('forgets the backoff after 10 minutes without a crash', async () => {
    await exitedAttempt(8);
    clock.step(601_000);
    // Past 2 x 300s since the last restart: the entry has expired, so restart at once ...
    assert.equal((await sync()).startFailures.size, 0);
    // ... and the next crash starts over at 10s.
    await exitedAttempt(9);
    clock.step(5_000);
    assert.match(backoffOf(await sync()) ?? '', /^back-off 10s /);
  });

  it('rebuilds the backoff from the runtime after a restart of kubelet-ts', async () => {
    // Attempt 9 exited 5s ago (fake time) and is inside a 10s window. A new runtime manager
    // (a restarted kubelet-ts) has no backoff entries: it must not restart the container at once.
    const log = createLogger();
    const fresh = new RuntimeManager({
      cri, images: new ImageManager({ cri, clock, log, serializeImagePulls: true }), clock, log,
      nodeName: 'backoff-node', hostIPs: () => ['127.0.0.1'], memoryCapacityBytes: 1 << 30,
      podLogsDir: join(rootDir, 'logs'), rootDir, ensurePodCgroup: (p) => cgroups.ensureExists(p),
    });
    const r = await sync(fresh);
    assert.equal(r.startFailures.get('main')?.reason, 'CrashLoopBackOff', 'not restarted at once');
    assert.match(backoffOf(r) ?? '', /^back-off 10s /, 'the window rebuilt from the last two attempts');
    const st = (await status()).containerStatuses.filter((c) => c.name === 'main');
    assert.equal(Math.max(...st.map((c) => c.restartCount)), 9, 'no new attempt was started');
    clock.step(5_100);
    assert.equal((await sync(fresh)).startFailures.size, 0, 'restarted once the window passed');
  });
});
