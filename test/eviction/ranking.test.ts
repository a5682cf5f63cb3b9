// Disk-pressure ranking with figures fed in (upstream rankDiskPressureFunc): pods using more
// local storage than they request first, then lower priority, then most usage above the
// request; what counts as usage depends on the signal and on a dedicated image filesystem.
// Pods with no figures rank by priority alone; pods with no stats at all go first.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod, Volume } from '../../src/api/types.js';
import type { PodStats } from '../../src/stats/summary.js';
import { diskStatsToMeasure, localVolumeNames, podDiskUsage, rankPods } from '../../src/eviction/index.js';

const MI = 1024n * 1024n;
const t0 = new Date(0);

function pod(name: string, o: { request?: string; priority?: number; volumes?: Volume[] } = {}): Pod {
  return {
    metadata: { uid: `uid-${name}`, name, namespace: 'default' },
    spec: {
      containers: [{ name: 'main', image: 'busybox', ...(o.request && { resources: { requests: { 'ephemeral-storage': o.request } } }) }],
      ...(o.priority !== undefined && { priority: o.priority }),
      ...(o.volumes && { volumes: o.volumes }),
    },
  };
}

interface Figures { rootfs?: bigint; logs?: bigint; volumes?: Record<string, bigint>; inodes?: bigint }

function stats(p: Pod, f?: Figures): PodStats {
  const s: PodStats = { podRef: { name: p.metadata.name!, namespace: 'default', uid: p.metadata.uid! }, startTime: null, containers: [{ name: 'main', startTime: null }] };
  if (!f) return s;
  const c = s.containers[0]!;
  if (f.rootfs !== undefined) c.rootfs = { time: t0, usedBytes: f.rootfs, inodesUsed: f.inodes ?? 0n };
  if (f.logs !== undefined) c.logs = { time: t0, usedBytes: f.logs, inodesUsed: 0n };
  if (f.volumes) s.volume = Object.entries(f.volumes).map(([name, used]) => ({ time: t0, name, usedBytes: used, inodesUsed: 1n }));
  return s;
}

function rank(pods: Pod[], figures: Record<string, Figures | undefined>, resource: 'ephemeral-storage' | 'inodes' = 'ephemeral-storage', measure = diskStatsToMeasure('nodefs.available', false)): string[] {
  const byUid = new Map(pods.filter((p) => p.metadata.name! in figures).map((p) => [p.metadata.uid, stats(p, figures[p.metadata.name!])]));
  return rankPods(resource, pods, (p) => byUid.get(p.metadata.uid), measure).map((p) => p.metadata.name!);
}

describe('disk-pressure ranking', () => {
  it('puts pods over their ephemeral-storage request first, then lower priority, then most usage above the request', () => {
    const over = pod('over', { request: '1Mi', priority: 1000 });
    const under = pod('under', { request: '100Mi', priority: -5 });
    const bigLow = pod('big-low', { priority: 0 });
    const smallLow = pod('small-low', { priority: 0 });
    const order = rank([under, smallLow, over, bigLow], {
      over: { rootfs: 2n * MI, logs: 0n },
      under: { rootfs: 50n * MI, logs: 0n },
      'big-low': { rootfs: 30n * MI, logs: MI },
      'small-low': { rootfs: MI, logs: 0n },
    });
    // the three over their requests (none for the two without) by priority (-, 0, 0, 1000), usage decides between the 0s
    assert.deepEqual(order, ['big-low', 'small-low', 'over', 'under']);
  });

  it('counts writable layer, logs and local volumes (disk emptyDir, configMap, hostPath), not memory emptyDirs or secrets', () => {
    const p = pod('v', {
      volumes: [
        { name: 'disk', emptyDir: {} },
        { name: 'ram', emptyDir: { medium: 'Memory' } },
        { name: 'cm', configMap: { name: 'x' } },
        { name: 'sec', secret: { secretName: 'x' } },
        { name: 'host', hostPath: { path: '/data' } },
      ],
    });
    assert.deepEqual([...localVolumeNames(p)].sort(), ['cm', 'disk', 'host']);
    const s = stats(p, { rootfs: MI, logs: 2n * MI, volumes: { disk: 4n * MI, ram: 8n * MI, cm: 16n * MI, sec: 32n * MI } });
    assert.equal(podDiskUsage(s, p, 'bytes'), 23n * MI);
    // a memory emptyDir full of data does not make its pod the disk hog
    const ram = pod('ram', { volumes: [{ name: 'ram', emptyDir: { medium: 'Memory' } }] });
    const disk = pod('disk', { volumes: [{ name: 'scratch', emptyDir: {} }] });
    assert.deepEqual(rank([ram, disk], { ram: { rootfs: 0n, volumes: { ram: 500n * MI } }, disk: { rootfs: 0n, volumes: { scratch: 10n * MI } } }), ['disk', 'ram']);
  });

  it('with a dedicated image filesystem, nodefs ranks by logs and volumes and imagefs by writable layers', () => {
    const layers = pod('layers');
    const logs = pod('logs');
    const figures = { layers: { rootfs: 100n * MI, logs: 0n }, logs: { rootfs: 0n, logs: 10n * MI } };
    assert.deepEqual(diskStatsToMeasure('nodefs.available', true), ['logs', 'localVolumeSource']);
    assert.deepEqual(diskStatsToMeasure('imagefs.available', true), ['root']);
    assert.deepEqual(rank([layers, logs], figures, 'ephemeral-storage', diskStatsToMeasure('nodefs.available', true)), ['logs', 'layers']);
    assert.deepEqual(rank([logs, layers], figures, 'ephemeral-storage', diskStatsToMeasure('imagefs.available', true)), ['layers', 'logs']);
    assert.deepEqual(rank([logs, layers], figures, 'ephemeral-storage', diskStatsToMeasure('nodefs.available', false)), ['layers', 'logs']);
  });

  it('pods without figures rank by priority (usage 0); pods without any stats go first', () => {
    const a = pod('a', { priority: 10 });
    const b = pod('b', { priority: -10 });
    const c = pod('c', { priority: 100 });
    assert.deepEqual(rank([a, b, c], { a: {}, b: {}, c: {} }), ['b', 'a', 'c']);
    assert.deepEqual(rank([a, b, c], { a: {}, b: {} }), ['c', 'b', 'a']);
    // one measured pod over its (zero) request goes before unmeasured lower-priority ones
    assert.deepEqual(rank([a, b, c], { a: {}, b: {}, c: { rootfs: MI } }), ['c', 'b', 'a']);
  });

  it('inodes: any use counts as over (nobody requests inodes), then priority, then most inodes', () => {
    const few = pod('few');
    const many = pod('many');
    const none = pod('none', { priority: -100 });
    assert.deepEqual(rank([few, none, many], { few: { rootfs: 0n, inodes: 10n }, many: { rootfs: 0n, inodes: 5000n }, none: { rootfs: 0n, inodes: 0n } }, 'inodes'), ['many', 'few', 'none']);
  });
});
