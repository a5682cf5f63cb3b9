// The Summary builder on synthetic cgroup trees (v1 and v2): upstream's field names and
// units, working set = usage - inactive file, unmeasured fields left out, exact counters
// past 2^53, usageNanoCores from the previous sample, and identical output from both readers.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import { createNativeCgroupReader } from '../../src/stats/cgroup-native-reader.js';
import type { CgroupMounts } from '../../src/cgroups/index.js';
import type { CgroupFieldName, CgroupFieldValue, CgroupRef } from '../../src/stats/cgroup-sample.js';
import { statsCgroupRef } from '../../src/stats/provider.js';
import {
  CpuRateTracker,
  buildCgroupSummary,
  cpuAndMemoryOnly,
  formatTime,
  memoryStats,
  summaryToJSON,
  workingSetBytes,
  type NodeFigures,
  type Summary,
  type SummaryPlan,
} from '../../src/stats/summary.js';
import { generateCgroupTree, removeCgroupTree, type GeneratedCgroupTree } from '../fixtures/cgroup-tree.js';

const V1_UNLIMITED = 9223372036854771712n;

interface CgroupValues {
  usageNs: bigint;
  memUsage: bigint;
  inactiveFile: bigint;
  rss: bigint;
  limit: bigint | 'max';
  pids?: bigint;
}

/** Writes the cpu/memory/pids files of one cgroup the way the kernel prints them. */
function writeCgroup(mounts: CgroupMounts, version: 1 | 2, cgroupPath: string, v: CgroupValues): void {
  const ref = statsCgroupRef(mounts, cgroupPath);
  const put = (dir: string | undefined, name: string, text: string): void => {
    if (!dir) throw new Error(`no dir for ${name}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, name), text);
  };
  if (version === 2) {
    assert.equal(ref.version, 2);
    const dir = ref.dir;
    put(dir, 'cpu.stat', `usage_usec ${v.usageNs / 1000n}\nuser_usec 0\nsystem_usec 0\n`);
    put(dir, 'memory.current', `${v.memUsage}\n`);
    put(dir, 'memory.max', `${v.limit}\n`);
    put(dir, 'memory.stat', `anon ${v.rss}\nfile 0\ninactive_file ${v.inactiveFile}\npgfault 11\npgmajfault 2\n`);
    if (v.pids !== undefined) put(dir, 'pids.current', `${v.pids}\n`);
  } else {
    assert.equal(ref.version, 1);
    put(ref.cpuacct, 'cpuacct.usage', `${v.usageNs}\n`);
    put(ref.memory, 'memory.usage_in_bytes', `${v.memUsage}\n`);
    put(ref.memory, 'memory.limit_in_bytes', `${v.limit === 'max' ? V1_UNLIMITED : v.limit}\n`);
    put(ref.memory, 'memory.stat', `rss ${v.rss}\ntotal_rss ${v.rss}\ntotal_inactive_file ${v.inactiveFile}\ntotal_pgfault 11\ntotal_pgmajfault 2\n`);
    if (v.pids !== undefined) put(ref.pids, 'pids.current', `${v.pids}\n`);
    for (const dir of [ref.cpu, ref.blkio]) if (dir) mkdirSync(dir, { recursive: true });
  }
}

/** availableBytes never goes below 0, even when the usage is over the limit. */
const floor = (v: bigint): bigint => (v > 0n ? v : 0n);

/** What a container's figures must be, computed from the generator's expected values. */
function expectedContainer(version: 1 | 2, e: Partial<Record<CgroupFieldName, CgroupFieldValue>>) {
  const b = (f: CgroupFieldName): bigint => {
    const v = e[f];
    assert.equal(typeof v, 'bigint', `${f} expected in fixture`);
    return v as bigint;
  };
  if (version === 2) {
    const usage = b('memory.current');
    const ws = usage > b('memory.stat:inactive_file') ? usage - b('memory.stat:inactive_file') : 0n;
    const max = e['memory.max'];
    return {
      cpu: b('cpu.stat:usage_usec') * 1000n,
      usage,
      ws,
      rss: b('memory.stat:anon'),
      pgfault: b('memory.stat:pgfault'),
      pgmajfault: b('memory.stat:pgmajfault'),
      available: max === 'max' ? undefined : floor((max as bigint) - ws),
    };
  }
  const usage = b('memory.usage_in_bytes');
  const ws = usage > b('memory.stat:total_inactive_file') ? usage - b('memory.stat:total_inactive_file') : 0n;
  const limit = b('memory.limit_in_bytes');
  return {
    cpu: b('cpuacct.usage'),
    usage,
    ws,
    rss: b('memory.stat:total_rss'),
    pgfault: b('memory.stat:total_pgfault'),
    pgmajfault: b('memory.stat:total_pgmajfault'),
    available: limit === V1_UNLIMITED ? undefined : floor(limit - ws),
  };
}

interface Fixture {
  tree: GeneratedCgroupTree;
  plan: SummaryPlan;
  refs: CgroupRef[];
  podPaths: string[];
}

/** 6 containers in 3 pods, a root and a kubepods cgroup; container 5's cgroup is never created. */
function makeFixture(version: 1 | 2): Fixture {
  const root = mkdtempSync(path.join(tmpdir(), `kts-summary-v${version}-`));
  const tree = generateCgroupTree({ root, version, containers: 6, seed: 42 });
  const refs: CgroupRef[] = [];
  const row = (p: string): number => refs.push(statsCgroupRef(tree.mounts, p)) - 1;
  writeCgroup(tree.mounts, version, '/', { usageNs: 5_000_000_000_000n, memUsage: 8n << 30n, inactiveFile: 1n << 30n, rss: 2n << 30n, limit: 'max' });
  writeCgroup(tree.mounts, version, '/kubepods', { usageNs: 9_000_000_000n, memUsage: 3n << 30n, inactiveFile: 1n << 29n, rss: 1n << 30n, limit: 7n << 30n });
  const plan: SummaryPlan = {
    nodeName: 'node-a',
    nodeStartTime: new Date('2026-01-01T00:00:00Z'),
    rootRow: row('/'),
    podsRow: row('/kubepods'),
    podsStartTime: new Date('2026-01-01T00:00:05Z'),
    pods: [],
  };
  const podPaths: string[] = [];
  tree.cgroups.forEach((c, i) => {
    const podPath = path.posix.dirname(c.cgroupPath);
    if (i % 2 === 0) {
      podPaths.push(podPath);
      writeCgroup(tree.mounts, version, podPath, { usageNs: 1_000_000n * BigInt(i + 1), memUsage: 100n << 20n, inactiveFile: 10n << 20n, rss: 50n << 20n, limit: 'max', pids: BigInt(3 + i) });
      plan.pods.push({
        podRef: { name: `pod-${i / 2}`, namespace: 'ns', uid: podPath.slice(podPath.lastIndexOf('/pod') + 4) },
        startTime: new Date(`2026-01-01T00:01:0${i / 2}Z`),
        row: row(podPath),
        containers: [],
      });
    }
    const id = path.posix.basename(c.cgroupPath);
    const p = i === 5 ? `${podPath}/gone${id}` : c.cgroupPath;
    plan.pods.at(-1)!.containers.push({ name: `c${i}`, id, startTime: new Date(`2026-01-01T00:02:0${i}Z`), row: row(p) });
  });
  return { tree, plan, refs, podPaths };
}

const NODE: NodeFigures = {
  memTotal: 16n << 30n,
  memFree: 4n << 30n,
  inactiveFile: 2n << 30n,
  rlimit: { maxpid: 32768n, curproc: 321n },
};

for (const version of [1, 2] as const) {
  describe(`buildCgroupSummary on a v${version} tree`, () => {
    let fx: Fixture;
    let summary: Summary;
    const time = new Date('2026-01-01T00:10:00.250Z');

    before(async () => {
      fx = makeFixture(version);
      const batch = await new FsCgroupReader().readCgroups(fx.refs);
      summary = buildCgroupSummary(fx.plan, batch, NODE, time, new CpuRateTracker());
    });
    after(() => removeCgroupTree(fx.tree.root));

    it('reports each container with upstream units and working set = usage - inactive file', () => {
      const byName = new Map(summary.pods.flatMap((p) => p.containers.map((c) => [c.name, c] as const)));
      for (let i = 0; i < 5; i++) {
        const c = byName.get(`c${i}`);
        assert.ok(c, `container c${i} reported`);
        const want = expectedContainer(version, fx.tree.cgroups[i]!.expected);
        assert.equal(c.cpu?.usageCoreNanoSeconds, want.cpu, `c${i} cpu`);
        assert.equal(c.memory?.usageBytes, want.usage);
        assert.equal(c.memory?.workingSetBytes, want.ws);
        assert.equal(c.memory?.rssBytes, want.rss);
        assert.equal(c.memory?.pageFaults, want.pgfault);
        assert.equal(c.memory?.majorPageFaults, want.pgmajfault);
        assert.equal(c.memory?.availableBytes, want.available, `c${i} availableBytes`);
        assert.deepEqual(c.cpu?.time, time);
        assert.equal(c.startTime?.toISOString(), `2026-01-01T00:02:0${i}.000Z`);
      }
    });

    it('keeps counters past 2^53 exact (container 3 of the fixture is huge)', () => {
      const c3 = summary.pods[1]!.containers.find((c) => c.name === 'c3')!;
      const want = expectedContainer(version, fx.tree.cgroups[3]!.expected);
      assert.ok(want.cpu > 2n ** 53n);
      assert.equal(c3.cpu?.usageCoreNanoSeconds, want.cpu);
      assert.ok(summaryToJSON(summary).includes(`"usageCoreNanoSeconds":${want.cpu}`));
    });

    it('leaves out a container whose cgroup is missing, and what was not measured', () => {
      assert.deepEqual(summary.pods[2]!.containers.map((c) => c.name), ['c4']);
      const c = summary.pods[0]!.containers[0]!;
      assert.equal(c.rootfs, undefined);
      assert.equal(c.logs, undefined);
      assert.equal(c.cpu?.usageNanoCores, undefined, 'no rate without a previous sample');
      const json = summaryToJSON(summary);
      for (const absent of ['usageNanoCores', 'network', 'volume', 'ephemeral-storage', 'rootfs', 'logs', 'swap']) {
        assert.ok(!json.includes(`"${absent}"`), `${absent} left out`);
      }
    });

    it('reports pods from their pod cgroups, with process_stats from pids.current', () => {
      assert.equal(summary.pods.length, 3);
      const p0 = summary.pods[0]!;
      assert.deepEqual(p0.podRef, fx.plan.pods[0]!.podRef);
      assert.equal(p0.cpu?.usageCoreNanoSeconds, 1_000_000n);
      assert.equal(p0.memory?.workingSetBytes, 90n << 20n);
      assert.equal(p0.memory?.availableBytes, undefined, 'no limit, no availableBytes');
      assert.deepEqual(p0.process_stats, { process_count: 3n });
    });

    it('reports the node from the root cgroup with the machine memory as its limit', () => {
      const n = summary.node;
      assert.equal(n.nodeName, 'node-a');
      assert.equal(n.cpu?.usageCoreNanoSeconds, 5_000_000_000_000n);
      assert.equal(n.memory?.usageBytes, 8n << 30n);
      assert.equal(n.memory?.workingSetBytes, 7n << 30n);
      assert.equal(n.memory?.availableBytes, (16n << 30n) - (7n << 30n));
      assert.deepEqual(n.rlimit, { time, maxpid: 32768n, curproc: 321n });
      const pods = n.systemContainers?.find((c) => c.name === 'pods');
      assert.equal(pods?.memory?.workingSetBytes, (3n << 30n) - (1n << 29n));
      assert.equal(pods?.memory?.availableBytes, (7n << 30n) - ((3n << 30n) - (1n << 29n)));
      assert.equal(pods?.cpu?.usageCoreNanoSeconds, 9_000_000_000n);
    });

    it('writes upstream JSON: field names, RFC 3339 second times, integers', () => {
      const parsed = JSON.parse(summaryToJSON(summary)) as Record<string, any>;
      assert.deepEqual(Object.keys(parsed), ['node', 'pods']);
      assert.equal(parsed.node.startTime, '2026-01-01T00:00:00Z');
      assert.equal(parsed.node.cpu.time, '2026-01-01T00:10:00Z');
      assert.deepEqual(Object.keys(parsed.node.memory).sort(), ['availableBytes', 'majorPageFaults', 'pageFaults', 'rssBytes', 'time', 'usageBytes', 'workingSetBytes']);
      assert.deepEqual(Object.keys(parsed.pods[0]).sort(), ['containers', 'cpu', 'memory', 'podRef', 'process_stats', 'startTime']);
      assert.deepEqual(Object.keys(parsed.pods[0].containers[0]).sort(), ['cpu', 'memory', 'name', 'startTime']);
      assert.equal(typeof parsed.pods[0].cpu.usageCoreNanoSeconds, 'number');
    });
  });
}

describe('usageNanoCores', () => {
  it('is the CPU rate between two snapshots, per cgroup', async () => {
    const fx = makeFixture(2);
    try {
      const rates = new CpuRateTracker();
      const reader = new FsCgroupReader();
      const t0 = new Date('2026-01-01T00:00:00Z');
      buildCgroupSummary(fx.plan, await reader.readCgroups(fx.refs), NODE, t0, rates);
      // 10 s later the first pod used 2.5 more CPU-seconds (0.25 cores), the node 5 (0.5 cores).
      writeCgroup(fx.tree.mounts, 2, fx.podPaths[0]!, { usageNs: 1_000_000n + 2_500_000_000n, memUsage: 1n, inactiveFile: 0n, rss: 0n, limit: 'max' });
      writeCgroup(fx.tree.mounts, 2, '/', { usageNs: 5_005_000_000_000n, memUsage: 8n << 30n, inactiveFile: 0n, rss: 0n, limit: 'max' });
      const t1 = new Date(t0.getTime() + 10_000);
      const s = buildCgroupSummary(fx.plan, await reader.readCgroups(fx.refs), NODE, t1, rates);
      assert.equal(s.pods[0]!.cpu?.usageNanoCores, 250_000_000n);
      assert.equal(s.node.cpu?.usageNanoCores, 500_000_000n);
      assert.equal(s.pods[1]!.cpu?.usageNanoCores, 0n, 'an idle pod has rate 0, not absent');
      assert.equal(s.pods[0]!.containers[0]!.cpu?.usageNanoCores, 0n);
    } finally {
      removeCgroupTree(fx.tree.root);
    }
  });

  it('is left out after a counter goes backwards, and stale keys are forgotten', () => {
    const rates = new CpuRateTracker();
    assert.equal(rates.update('a', 100n, 0), undefined);
    assert.equal(rates.update('a', 50n, 1000), undefined);
    assert.equal(rates.update('a', 1_000_050n, 2000), 1_000_000n);
    rates.endRound();
    rates.update('b', 1n, 3000);
    rates.endRound();
    assert.equal(rates.has('a'), false);
    assert.equal(rates.has('b'), true);
  });
});

describe('node memory without a root memory cgroup (v2)', () => {
  it('comes from /proc/meminfo: usage = total - free, working set = usage - Inactive(file)', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'kts-summary-meminfo-'));
    try {
      const mounts: CgroupMounts = { unified: { mountPoint: root, root: '/' }, v1: {} };
      writeFileSync(path.join(root, 'cpu.stat'), 'usage_usec 42\n');
      const refs = [statsCgroupRef(mounts, '/')];
      const plan: SummaryPlan = { nodeName: 'n', nodeStartTime: null, rootRow: 0, podsRow: -1, pods: [] };
      const s = buildCgroupSummary(plan, await new FsCgroupReader().readCgroups(refs), NODE, new Date(0), new CpuRateTracker());
      assert.equal(s.node.cpu?.usageCoreNanoSeconds, 42_000n);
      assert.equal(s.node.memory?.usageBytes, 12n << 30n);
      assert.equal(s.node.memory?.workingSetBytes, 10n << 30n);
      assert.equal(s.node.memory?.availableBytes, 6n << 30n);
      assert.equal(s.node.systemContainers, undefined);
      assert.equal(summaryToJSON(s.node.startTime), 'null', 'an unknown time is written as Go writes the zero time');
    } finally {
      removeCgroupTree(root);
    }
  });
});

describe('summary building blocks', () => {
  it('floors the working set at 0', () => {
    assert.equal(workingSetBytes(100n, 150n), 0n);
    assert.equal(workingSetBytes(100n, undefined), 100n);
    assert.deepEqual(memoryStats(new Date(0), { usage: 100n, inactiveFile: 150n, limit: 50n }), {
      time: new Date(0), availableBytes: 50n, usageBytes: 100n, workingSetBytes: 0n,
    });
  });

  it('writes times as metav1.Time does', () => {
    assert.equal(formatTime(new Date('2026-03-04T05:06:07.891Z')), '2026-03-04T05:06:07Z');
  });

  it('trims to CPU and memory for only_cpu_and_memory', () => {
    const t = new Date(0);
    const s: Summary = {
      node: { nodeName: 'n', startTime: t, cpu: { time: t, usageCoreNanoSeconds: 1n }, fs: { time: t, usedBytes: 1n }, rlimit: { time: t } },
      pods: [{ podRef: { name: 'p', namespace: 'ns', uid: 'u' }, startTime: t, containers: [{ name: 'c', startTime: t, rootfs: { time: t } }], process_stats: { process_count: 1n } }],
    };
    const json = summaryToJSON(cpuAndMemoryOnly(s));
    assert.equal(json, '{"node":{"nodeName":"n","startTime":"1970-01-01T00:00:00Z","cpu":{"time":"1970-01-01T00:00:00Z","usageCoreNanoSeconds":1}},"pods":[{"podRef":{"name":"p","namespace":"ns","uid":"u"},"startTime":"1970-01-01T00:00:00Z","containers":[{"name":"c","startTime":"1970-01-01T00:00:00Z"}]}]}');
  });
});

describe('native and fs readers', () => {
  it('give the same Summary on the same tree', async () => {
    const native = createNativeCgroupReader();
    assert.ok(native.reader, `native addon: ${native.error}`);
    for (const version of [1, 2] as const) {
      const fx = makeFixture(version);
      try {
        const t = new Date('2026-01-01T00:00:00Z');
        const a = buildCgroupSummary(fx.plan, await native.reader.readCgroups(fx.refs), NODE, t, new CpuRateTracker());
        const b = buildCgroupSummary(fx.plan, await new FsCgroupReader().readCgroups(fx.refs), NODE, t, new CpuRateTracker());
        assert.equal(summaryToJSON(a), summaryToJSON(b));
        assert.equal(a.pods.length, 3);
      } finally {
        removeCgroupTree(fx.tree.root);
      }
    }
  });
});
