// Filesystem accounting on the main thread (src/stats/fs-usage.ts) with a scripted measurer and
// a FakeClock: each path measured once per volumeStatsAggPeriod, tasks bounded, forgotten paths
// dropped; the Summary gets rootfs, logs, volume and ephemeral-storage as upstream names them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/api/types.js';
import { FakeClock } from '../../src/util/clock.js';
import type { Logger } from '../../src/util/log.js';
import { FsUsageCache, addFsAccounting, podVolumesDir, usageRequests, type MeasureFs, writableLayerOf } from '../../src/stats/fs-usage.js';
import type { Summary } from '../../src/stats/summary.js';
import type { UsageAnswer, UsageRequest } from '../../workers/fs-usage.js';

const log: Logger = { info() {}, warn() {}, error() {}, v: () => ({ info() {} }), with: () => log } as unknown as Logger;
const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

function scripted(answer: (r: UsageRequest) => UsageAnswer): { measure: MeasureFs; calls: UsageRequest[][]; open: () => number; release: () => void } {
  const calls: UsageRequest[][] = [];
  let waiting: (() => void)[] = [];
  let inFlight = 0;
  let peak = 0;
  return {
    calls,
    open: () => peak,
    release: () => { for (const w of waiting.splice(0)) w(); },
    measure: (reqs) => {
      calls.push(reqs);
      inFlight++;
      peak = Math.max(peak, inFlight);
      return new Promise((resolve) => waiting.push(() => { inFlight--; resolve(reqs.map(answer)); }));
    },
  };
}

test('fs usage cache: measures new paths at once, each again only after a period, in bounded batches', async () => {
  const clock = new FakeClock(0);
  const m = scripted(() => ({ usage: { bytes: 4096, inodes: 1, mount: false } }));
  const cache = new FsUsageCache({ measure: m.measure, clock, periodMs: 60_000, log, batch: 2, concurrency: 2 });
  const paths = ['/a', '/b', '/c', '/d', '/e'].map((path) => ({ path }));
  cache.track(paths);
  assert.equal(m.calls.length, 2, 'two tasks in flight at most');
  assert.deepEqual(m.calls.map((c) => c.length), [2, 2]);
  while (m.calls.length < 3 || m.calls.flat().length < 5) { m.release(); await flush(); }
  m.release();
  await cache.idle();
  assert.equal(m.open(), 2);
  assert.equal(cache.get('/e')?.answer.usage?.bytes, 4096);
  clock.step(30_000);
  cache.track(paths);
  assert.equal(m.calls.length, 3, 'nothing measured again within the period');
  clock.step(30_000);
  cache.track(paths.slice(0, 1));
  assert.equal(m.calls.length, 4);
  assert.deepEqual(m.calls[3], [{ path: '/a', split: 0 }]);
  assert.equal(cache.get('/b'), undefined, 'a path no longer tracked is forgotten');
  m.release();
  await cache.idle();
});

test('fs accounting: rootfs from the writable layer, logs, volumes and ephemeral-storage in the Summary', async () => {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const pod: Pod = {
    metadata: { uid: 'u1', name: 'web', namespace: 'ns' },
    spec: { containers: [{ name: 'app' }] },
    status: { containerStatuses: [{ name: 'app', containerID: 'containerd://c1', ready: true, restartCount: 0, image: 'i', imageID: '', state: { running: {} }, lastState: {} }] },
  };
  const root = '/var/lib/kubelet';
  const reqs = usageRequests([pod], root, '/var/log/pods');
  assert.deepEqual(reqs, [{ path: podVolumesDir(root, 'u1'), split: 2 }, { path: '/var/log/pods/ns_web_u1/app' }]);
  const m = scripted((r) => r.split === 2
    ? { children: { 'kubernetes.io~empty-dir/cache': { bytes: 1_048_576, inodes: 2, mount: false }, 'kubernetes.io~empty-dir/mem': { bytes: 8192, inodes: 2, mount: true }, 'kubernetes.io~host-path/h': { bytes: 1, inodes: 1, mount: false } } }
    : { usage: { bytes: 4096, inodes: 2, mount: false } });
  const cache = new FsUsageCache({ measure: m.measure, clock, periodMs: 60_000, log });
  cache.track(reqs);
  m.release();
  await cache.idle();
  const nodeFs = { time: new Date(clock.now()), capacityBytes: 100n, availableBytes: 50n, inodes: 10n, inodesFree: 5n };
  const imageFs = { time: new Date(clock.now()), capacityBytes: 200n, availableBytes: 20n };
  const summary: Summary = {
    node: { nodeName: 'n', startTime: null, runtime: { imageFs } },
    pods: [{ podRef: { name: 'web', namespace: 'ns', uid: 'u1' }, startTime: null, containers: [{ name: 'app', startTime: null }] }],
  };
  const layer = { attributes: { id: 'c1', metadata: null, labels: {}, annotations: {} }, cpu: null, memory: null, writable_layer: { timestamp: '1767225600000000000', fs_id: null, used_bytes: { value: '20480' }, inodes_used: { value: '5' } } };
  addFsAccounting(summary, { pods: [pod], rootDir: root, podLogsDir: '/var/log/pods', cache, writableLayers: new Map([['c1', writableLayerOf(layer as never)!]]), nodeFs, imageFs });
  const ps = summary.pods[0]!;
  const c = ps.containers[0]!;
  assert.equal(c.rootfs?.usedBytes, 20480n);
  assert.equal(c.rootfs?.inodesUsed, 5n);
  assert.equal(c.rootfs?.capacityBytes, 200n, 'the writable layer lives on the image fs');
  assert.equal(c.logs?.usedBytes, 4096n);
  assert.equal(c.logs?.capacityBytes, 100n);
  assert.deepEqual(ps.volume?.find((v) => v.name === 'cache')?.usedBytes, 1_048_576n);
  assert.equal(ps.volume?.find((v) => v.name === 'cache')?.capacityBytes, 100n);
  assert.equal(ps.volume?.find((v) => v.name === 'mem')?.capacityBytes, undefined, 'a tmpfs volume is not the node disk');
  assert.deepEqual(ps.volume?.map((v) => v.name).sort(), ['cache', 'h', 'mem']);
  // writable layer + logs + the disk-backed emptyDir (not the tmpfs one, not the hostPath)
  assert.equal(ps['ephemeral-storage']?.usedBytes, 20480n + 4096n + 1_048_576n);
  assert.equal(ps['ephemeral-storage']?.inodesUsed, 5n + 2n + 2n);
  assert.equal(summary.node.runtime?.containerFs, imageFs);
});
