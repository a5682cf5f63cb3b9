// The stats provider on a synthetic v2 cgroup tree with a test host, a fake clock and a
// test procfs: pod/container → cgroup mapping, one shared read per housekeeping interval,
// backend choice, node figures, the CRI backend (against a CRI double), and the HTTP routes.
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

import type { Pod } from '../../src/api/types.js';
import type {
  Container,
  ContainerStats as CriContainerStats,
  ImageFsInfoResponse,
  PodSandbox,
  PodSandboxStats as CriPodSandboxStats,
} from '../../src/runtime/cri-types.js';
import { CriError } from '../../src/runtime/cri-errors.js';
import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import type { CgroupMounts } from '../../src/cgroups/index.js';
import type { CgroupReader, CgroupRef, CgroupSampleBatch } from '../../src/stats/cgroup-sample.js';
import { buildCriPodStats, fetchCriStats, type CriStatsSource } from '../../src/stats/cri-backend.js';
import { parseLoadavgTasks, parseMeminfo, parseProcStat } from '../../src/stats/node-stats.js';
import { DISK_ACCOUNTING_WAIT_MS, StatsProvider, containerIdOf, statsCgroupRef, type StatsHost } from '../../src/stats/provider.js';
import { statsRoutes, type SummarySource } from '../../src/stats/routes.js';
import { CpuRateTracker } from '../../src/stats/summary.js';
import type { Handler } from '../../src/server/server.js';
import { FakeClock } from '../../src/util/clock.js';
import type { LogFields, Logger } from '../../src/util/log.js';
import { generateCgroupTree, removeCgroupTree, type GeneratedCgroupTree } from '../fixtures/cgroup-tree.js';

const INTERVAL = 10_000;

function writeV2Cgroup(mounts: CgroupMounts, cgroupPath: string, usageUsec: bigint, memCurrent: bigint, inactiveFile = 0n): void {
  const ref = statsCgroupRef(mounts, cgroupPath);
  assert.equal(ref.version, 2);
  mkdirSync(ref.dir, { recursive: true });
  writeFileSync(path.join(ref.dir, 'cpu.stat'), `usage_usec ${usageUsec}\nuser_usec 0\nsystem_usec 0\n`);
  writeFileSync(path.join(ref.dir, 'memory.current'), `${memCurrent}\n`);
  writeFileSync(path.join(ref.dir, 'memory.stat'), `anon 1\ninactive_file ${inactiveFile}\n`);
  writeFileSync(path.join(ref.dir, 'pids.current'), '4\n');
}

function writeProc(dir: string): void {
  mkdirSync(path.join(dir, 'sys', 'kernel'), { recursive: true });
  writeFileSync(path.join(dir, 'stat'), 'cpu  100 0 50 1000 0 0 0 0 0 0\ncpu0 100 0 50 1000 0 0 0 0 0 0\nbtime 1767225600\n');
  writeFileSync(path.join(dir, 'meminfo'), 'MemTotal:       16777216 kB\nMemFree:         4194304 kB\nInactive(file):  1048576 kB\nAnonPages:        524288 kB\n');
  writeFileSync(path.join(dir, 'loadavg'), '0.50 0.40 0.30 2/345 6789\n');
  writeFileSync(path.join(dir, 'sys', 'kernel', 'pid_max'), '32768\n');
  writeFileSync(path.join(dir, 'sys', 'kernel', 'threads-max'), '192730\n');
}

/** A Logger that keeps what was logged. */
class RecordingLogger implements Logger {
  lines: Array<{ level: string; msg: string; fields?: LogFields }> = [];
  info(msg: string, fields?: LogFields): void { this.lines.push({ level: 'info', msg, fields }); }
  warn(msg: string, fields?: LogFields): void { this.lines.push({ level: 'warn', msg, fields }); }
  error(msg: string, fields?: LogFields): void { this.lines.push({ level: 'error', msg, fields }); }
  v(): Pick<Logger, 'info'> { return { info: () => undefined }; }
  with(): Logger { return this; }
}

/** A reader double: counts reads, can hold them until released, delegates to the fs reader. */
class CountingReaderDouble implements CgroupReader {
  readonly backend: 'native' | 'fs';
  reads = 0;
  lastRefs: CgroupRef[] = [];
  gate?: Promise<void>;
  readonly #inner = new FsCgroupReader();
  constructor(backend: 'native' | 'fs') { this.backend = backend; }
  async readCgroups(list: readonly CgroupRef[]): Promise<CgroupSampleBatch> {
    this.reads++;
    this.lastRefs = [...list];
    if (this.gate) await this.gate;
    return this.#inner.readCgroups(list);
  }
}

/** A CRI double answering fixed lists. */
class CriDouble implements CriStatsSource {
  sandboxes: PodSandbox[] = [];
  containers: Container[] = [];
  containerStats: CriContainerStats[] = [];
  sandboxStats: CriPodSandboxStats[] | Error = [];
  imageFs: ImageFsInfoResponse | Error = new Error('no image fs in this test');
  statsCalls = 0;
  async listPodSandbox(): Promise<PodSandbox[]> { return this.sandboxes; }
  async listContainers(): Promise<Container[]> { return this.containers; }
  async listContainerStats(): Promise<CriContainerStats[]> { this.statsCalls++; return this.containerStats; }
  async listPodSandboxStats(): Promise<CriPodSandboxStats[]> {
    if (this.sandboxStats instanceof Error) throw this.sandboxStats;
    return this.sandboxStats;
  }
  async imageFsInfo(): Promise<ImageFsInfoResponse> {
    if (this.imageFs instanceof Error) throw this.imageFs;
    return this.imageFs;
  }
}

class TestStatsHost implements StatsHost {
  nodeName = 'node-a';
  config: { statsBackend: 'native' | 'fs' | 'cri'; cgroupRoot: string } = { statsBackend: 'native', cgroupRoot: '' };
  flags: { rootDir: string };
  cri = new CriDouble();
  clock = new FakeClock(Date.UTC(2026, 0, 1));
  pods: Pod[] = [];
  podPaths = new Map<string, string>();
  constructor(rootDir: string) { this.flags = { rootDir }; }
  getPods(): Pod[] { return this.pods; }
  podCgroupName(pod: Pod): string { return this.podPaths.get(pod.metadata.uid!)!; }
}

function running(name: string, id: string | undefined, startedAt = '2026-01-01T00:00:01Z') {
  return { name, state: { running: { startedAt } }, lastState: {}, ready: true, restartCount: 0, image: 'busybox', imageID: '', containerID: id === undefined ? undefined : `containerd://${id}` };
}

describe('StatsProvider', () => {
  let tree: GeneratedCgroupTree;
  let work: string;
  let host: TestStatsHost;
  let log: RecordingLogger;
  let reader: CountingReaderDouble;
  const procDir = () => path.join(work, 'proc');

  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'kts-provider-'));
    tree = generateCgroupTree({ root: path.join(work, 'cg'), version: 2, containers: 4, seed: 7 });
    writeProc(procDir());
    writeV2Cgroup(tree.mounts, '/', 1_000_000n, 6n << 30n, 1n << 30n);
  });
  after(() => removeCgroupTree(work));

  beforeEach(() => {
    host = new TestStatsHost(work);
    log = new RecordingLogger();
    reader = new CountingReaderDouble('native');
    host.pods = [];
    for (let p = 0; p < 2; p++) {
      const first = tree.cgroups[2 * p]!.cgroupPath;
      const podPath = path.posix.dirname(first);
      const uid = podPath.slice(podPath.lastIndexOf('/pod') + 4);
      writeV2Cgroup(tree.mounts, podPath, 2_000_000n, 300n << 20n);
      host.podPaths.set(uid, podPath);
      host.pods.push({
        metadata: { name: `web-${p}`, namespace: 'shop', uid },
        spec: { containers: [{ name: 'app', image: 'busybox' }, { name: 'side', image: 'busybox' }, { name: 'waiting', image: 'busybox' }] },
        status: {
          startTime: '2026-01-01T00:00:00Z',
          containerStatuses: [
            running('app', path.posix.basename(first)),
            running('side', path.posix.basename(tree.cgroups[2 * p + 1]!.cgroupPath)),
            { name: 'waiting', state: { waiting: { reason: 'ContainerCreating' } }, lastState: {}, ready: false, restartCount: 0, image: 'busybox', imageID: '' },
          ],
        },
      });
    }
  });

  const provider = (extra: Partial<ConstructorParameters<typeof StatsProvider>[0]> = {}): StatsProvider =>
    new StatsProvider({ host, log, mounts: tree.mounts, native: { reader }, procDir: procDir(), housekeepingIntervalMs: INTERVAL, ...extra });

  it('refreshDiskAccounting waits for re-measured disk figures at most DISK_ACCOUNTING_WAIT_MS (a hung walk does not stop eviction)', async () => {
    (host.config as { volumeStatsAggPeriod?: number }).volumeStatsAggPeriod = 60_000;
    let walks = 0;
    // a filesystem walk that never answers (a hung mount)
    const p = provider({ measureFs: () => { walks++; return new Promise(() => {}); } });
    await p.refresh();
    let done = false;
    const pending = p.refreshDiskAccounting().then(() => { done = true; });
    for (let i = 0; i < 50 && !done; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(done, false, 'waits for the measurement');
    host.clock.step(DISK_ACCOUNTING_WAIT_MS);
    await pending;
    assert.ok(walks >= 1);
    p.stop();
  });

  it('maps pods and running containers to their cgroups', async () => {
    const p = provider();
    const s = await p.getSummary();
    assert.equal(p.backend, 'native');
    assert.deepEqual(s.pods.map((x) => x.podRef.name), ['web-0', 'web-1']);
    assert.deepEqual(s.pods[0]!.containers.map((c) => c.name), ['app', 'side'], 'a container without an id is not read');
    const want = (tree.cgroups[1]!.expected['cpu.stat:usage_usec'] as bigint) * 1000n;
    assert.equal(s.pods[0]!.containers[1]!.cpu?.usageCoreNanoSeconds, want);
    assert.equal(s.pods[0]!.cpu?.usageCoreNanoSeconds, 2_000_000_000n);
    assert.equal(s.pods[0]!.startTime?.toISOString(), '2026-01-01T00:00:00.000Z');
    assert.equal(s.pods[0]!.containers[0]!.startTime?.toISOString(), '2026-01-01T00:00:01.000Z');
    // root, kubepods, then per pod: pod cgroup + 2 containers
    assert.equal(reader.lastRefs.length, 2 + 2 * 3);
    assert.deepEqual(reader.lastRefs[2], { version: 2, dir: path.join(tree.mounts.unified!.mountPoint, host.podPaths.get(host.pods[0]!.metadata.uid!)!) });
  });

  it('plans an unchanged pod from what it computed before; a new status (a container stopped) is planned again', async () => {
    const p = provider();
    let names = 0;
    const name = host.podCgroupName.bind(host);
    host.podCgroupName = (pod) => (names++, name(pod));
    await p.refresh();
    assert.equal(names, 2);
    const first = (await p.refresh()).summary;
    assert.equal(names, 2, 'the same spec and status: no new cgroup name, paths or times');
    assert.deepEqual(first.pods[0]!.containers.map((c) => c.name), ['app', 'side']);
    const pod = host.pods[0]!;
    host.pods[0] = { ...pod, status: { ...pod.status, containerStatuses: pod.status!.containerStatuses!.filter((c) => c.name !== 'side') } };
    const s = (await p.refresh()).summary;
    assert.equal(names, 3);
    assert.deepEqual(s.pods[0]!.containers.map((c) => c.name), ['app']);
    assert.equal(reader.lastRefs.length, 2 + 2 + 3);
  });

  it('adds the node figures: root cgroup, /proc, statfs of the root dir, image fs from the runtime', async () => {
    host.cri.imageFs = {
      image_filesystems: [{ timestamp: '1', fs_id: { mountpoint: work }, used_bytes: { value: '123456' }, inodes_used: { value: '77' } }],
    };
    const s = await provider().getSummary();
    const n = s.node;
    assert.equal(n.nodeName, 'node-a');
    assert.equal(n.startTime?.toISOString(), '2026-01-01T00:00:00.000Z', 'boot time from /proc/stat btime');
    assert.equal(n.cpu?.usageCoreNanoSeconds, 1_000_000_000n);
    assert.equal(n.memory?.workingSetBytes, 5n << 30n);
    assert.equal(n.memory?.availableBytes, (16n << 30n) - (5n << 30n), 'limit = MemTotal');
    assert.deepEqual(n.rlimit, { time: s.node.rlimit!.time, maxpid: 32768n, curproc: 345n });
    assert.ok(n.fs && n.fs.capacityBytes! > 0n && n.fs.availableBytes !== undefined, 'node.fs from statfs');
    assert.equal(n.runtime?.imageFs?.usedBytes, 123456n);
    assert.equal(n.runtime?.imageFs?.inodesUsed, 77n);
    assert.equal(n.runtime?.imageFs?.capacityBytes, n.fs!.capacityBytes);
  });

  it('leaves runtime.imageFs out (and says so once) when the runtime cannot tell', async () => {
    const p = provider();
    const s = await p.getSummary();
    assert.equal(s.node.runtime, undefined);
    host.clock.step(INTERVAL);
    await p.getSummary();
    assert.equal(log.lines.filter((l) => l.msg.startsWith('Image filesystem stats unavailable')).length, 1);
  });

  it('shares one read per housekeeping interval', async () => {
    const p = provider();
    const a = await p.getSummary();
    host.clock.step(INTERVAL - 1);
    const b = await p.getSummary();
    assert.equal(reader.reads, 1);
    assert.equal(a, b);
    host.clock.step(1);
    const c = await p.getSummary();
    assert.equal(reader.reads, 2);
    assert.notEqual(c, a);
  });

  it('builds the Summary when asked: one tree per event-loop turn, the same figures and rates from one read', async () => {
    const p = provider();
    await p.refresh();
    const podPath = host.podPaths.get(host.pods[0]!.metadata.uid!)!;
    writeV2Cgroup(tree.mounts, podPath, 2_000_000n + 5_000_000n, 300n << 20n); // +5 CPU-seconds in 10 s
    host.clock.step(INTERVAL);
    try {
      const snap = await p.snapshot();
      const a = snap.summary;
      assert.equal(snap.summary, a, 'callers of one turn share the tree');
      assert.equal(a.pods[0]!.cpu?.usageNanoCores, 500_000_000n);
      await new Promise((r) => setImmediate(r));
      const b = snap.summary;
      assert.notEqual(b, a, 'a later turn builds its own tree: none is kept for the interval');
      assert.equal(reader.reads, 2, 'from the same read');
      assert.deepEqual(b, a, 'with the same figures, and the rate taken once at the read');
    } finally {
      writeV2Cgroup(tree.mounts, podPath, 2_000_000n, 300n << 20n);
    }
  });

  it('summaryOf builds the node and the asked pods only, as the whole Summary shows them; podsWorkingSetBytes sums every pod', async () => {
    const p = provider();
    const snap = await p.refresh();
    const whole = snap.summary;
    assert.ok(whole.pods.length >= 2, 'the fixture has pods to leave out');
    const one = whole.pods[1]!.podRef.uid;
    const part = snap.summaryOf(new Set([one]));
    assert.deepEqual(part.node, whole.node);
    assert.deepEqual(part.pods, [whole.pods[1]]);
    assert.deepEqual(snap.summaryOf(new Set()).pods, []);
    let ws = 0n;
    for (const ps of whole.pods) ws += ps.memory?.workingSetBytes ?? 0n;
    assert.ok(ws > 0n);
    assert.equal(snap.podsWorkingSetBytes(), ws);
  });

  it('lets concurrent callers share the read in flight', async () => {
    let release!: () => void;
    reader.gate = new Promise((r) => { release = r; });
    const p = provider();
    const pending = [p.getSummary(), p.getSummary(), p.snapshot().then((x) => x.summary)];
    await new Promise((r) => setImmediate(r));
    release();
    const [a, b, c] = await Promise.all(pending);
    assert.equal(reader.reads, 1);
    assert.equal(a, b);
    assert.equal(b, c);
  });

  it('takes a snapshot every interval once started, which gives usageNanoCores', async () => {
    const p = provider();
    await p.start();
    try {
      const first = await p.snapshot();
      await new Promise((r) => setImmediate(r));
      assert.equal(reader.reads, 1);
      assert.equal(first.summary.pods[0]!.cpu?.usageNanoCores, undefined);
      const podPath = host.podPaths.get(host.pods[0]!.metadata.uid!)!;
      writeV2Cgroup(tree.mounts, podPath, 2_000_000n + 5_000_000n, 300n << 20n); // +5 CPU-seconds in 10 s
      host.clock.step(INTERVAL);
      const second = await p.snapshot();
      assert.equal(reader.reads, 2, 'the timer started the read the caller joined');
      assert.equal(second.summary.pods[0]!.cpu?.usageNanoCores, 500_000_000n);
      assert.equal(second.summary.node.cpu?.usageNanoCores, 0n);
    } finally {
      p.stop();
      writeV2Cgroup(tree.mounts, host.podPaths.get(host.pods[0]!.metadata.uid!)!, 2_000_000n, 300n << 20n);
    }
    assert.equal(host.clock.pendingTimers(), 0, 'stop() cancels the housekeeping timer');
  });

  it('falls back to the fs reader when the addon is absent, and says so', async () => {
    const p = provider({ native: { error: 'native addon not built' } });
    await p.start();
    p.stop();
    assert.equal(p.backend, 'fs');
    const warn = log.lines.find((l) => l.level === 'warn');
    assert.equal(warn?.msg, 'Native cgroup reader unavailable; using the fs stats backend');
    assert.equal(warn?.fields?.reason, 'native addon not built');
    assert.equal((await p.getSummary()).pods.length, 2);
  });

  it('uses the fs reader when asked, even with the addon present', async () => {
    host.config.statsBackend = 'fs';
    const fsReader = new CountingReaderDouble('fs');
    const p = provider({ fsReader });
    await p.getSummary();
    assert.equal(p.backend, 'fs');
    assert.equal(fsReader.reads, 1);
    assert.equal(reader.reads, 0);
  });

  it('takes pods from the runtime with the cri backend, and the node from cgroups', async () => {
    host.config.statsBackend = 'cri';
    const cri = host.cri;
    cri.sandboxes = [sandbox('sb1', 'uid-1', 'SANDBOX_READY', '1767225600000000000')];
    cri.containers = [container('c1', 'sb1', 'app', 'CONTAINER_RUNNING')];
    cri.containerStats = [containerStats('c1', 7_000_000_000n, 64n << 20n)];
    cri.sandboxStats = [];
    const p = provider();
    const s = await p.getSummary();
    assert.equal(p.backend, 'cri');
    assert.equal(cri.statsCalls, 1);
    assert.deepEqual(s.pods.map((x) => x.podRef), [{ name: 'pod-uid-1', namespace: 'ns', uid: 'uid-1' }]);
    assert.equal(s.pods[0]!.containers[0]!.cpu?.usageCoreNanoSeconds, 7_000_000_000n);
    assert.equal(s.node.cpu?.usageCoreNanoSeconds, 1_000_000_000n);
    assert.equal(reader.lastRefs.length, 2, 'only the root and kubepods cgroups are read');
  });

  it('serves /stats/summary and /metrics/resource', async () => {
    const p = provider();
    await withServer(statsRoutes(p), async (base) => {
      const res = await fetch(`${base}/stats/summary`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/json');
      const body = (await res.json()) as { node: { nodeName: string; fs?: unknown }; pods: Array<{ podRef: { name: string } }> };
      assert.equal(body.node.nodeName, 'node-a');
      assert.ok(body.node.fs);
      assert.deepEqual(body.pods.map((x) => x.podRef.name), ['web-0', 'web-1']);

      const only = (await (await fetch(`${base}/stats/summary?only_cpu_and_memory=true`)).json()) as { node: { fs?: unknown; cpu?: unknown } };
      assert.equal(only.node.fs, undefined);
      assert.ok(only.node.cpu);

      const m = await fetch(`${base}/metrics/resource`);
      assert.equal(m.status, 200);
      assert.equal(m.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
      const text = await m.text();
      assert.match(text, /^pod_memory_working_set_bytes\{namespace="shop",pod="web-0"\} 3\.145728e\+08 \d{13}$/m);
      assert.match(text, /^scrape_error 0$/m);
    });
    assert.equal(reader.reads, 1, 'the three requests shared one snapshot');
  });

  it('answers 500 for the summary and scrape_error 1 for the metrics when stats fail', async () => {
    const failing: SummarySource = { getSummary: () => Promise.reject(new Error('cgroup mounts unreadable')) };
    await withServer(statsRoutes(failing), async (base) => {
      const res = await fetch(`${base}/stats/summary`);
      assert.equal(res.status, 500);
      assert.match(await res.text(), /cgroup mounts unreadable/);
      const text = await (await fetch(`${base}/metrics/resource`)).text();
      assert.match(text, /^scrape_error 1$/m);
      assert.match(text, /^resource_scrape_error 1$/m);
      assert.doesNotMatch(text, /^node_/m);
    });
  });
});

async function withServer(routes: Map<string, Handler>, fn: (base: string) => Promise<void>): Promise<void> {
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const h = routes.get(url.pathname);
    if (!h) {
      res.writeHead(404).end();
      return;
    }
    void Promise.resolve(h(req, res, url));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

// ---- CRI backend ----

function sandbox(id: string, uid: string, state: PodSandbox['state'], createdAt: string): PodSandbox {
  return { id, metadata: { name: `pod-${uid}`, uid, namespace: 'ns', attempt: 0 }, state, created_at: createdAt, labels: {}, annotations: {}, runtime_handler: '' };
}

function container(id: string, sandboxId: string, name: string, state: Container['state']): Container {
  return { id, pod_sandbox_id: sandboxId, metadata: { name, attempt: 0 }, image: null, image_ref: '', state, created_at: '1767225601000000000', labels: {}, annotations: {} };
}

const v = (n: bigint) => ({ value: n.toString() });

function containerStats(id: string, cpuNs: bigint, ws: bigint, timestampNs = 1767225610000000000n): CriContainerStats {
  return {
    attributes: { id, metadata: null, labels: {}, annotations: {} },
    cpu: { timestamp: timestampNs.toString(), usage_core_nano_seconds: v(cpuNs), usage_nano_cores: v(123n) },
    memory: { timestamp: timestampNs.toString(), working_set_bytes: v(ws), available_bytes: null, usage_bytes: v(ws + 10n), rss_bytes: v(ws - 10n), page_faults: v(5n), major_page_faults: v(0n) },
    writable_layer: { timestamp: timestampNs.toString(), fs_id: { mountpoint: '/var/lib/containerd' }, used_bytes: v(4096n), inodes_used: v(3n) },
  };
}

describe('buildCriPodStats', () => {
  const now = new Date('2026-01-01T00:00:20Z');

  it('keeps ready sandboxes (the newest per pod) and their running containers', () => {
    const pods = buildCriPodStats(
      {
        sandboxes: [
          sandbox('old', 'u1', 'SANDBOX_READY', '1000'),
          sandbox('new', 'u1', 'SANDBOX_READY', '2000'),
          sandbox('dead', 'u2', 'SANDBOX_NOTREADY', '3000'),
        ],
        containers: [
          container('a', 'new', 'app', 'CONTAINER_RUNNING'),
          container('b', 'new', 'done', 'CONTAINER_EXITED'),
          container('c', 'old', 'stale', 'CONTAINER_RUNNING'),
          container('d', 'dead', 'x', 'CONTAINER_RUNNING'),
        ],
        containerStats: [containerStats('a', 10n, 1000n)],
      },
      now,
      new CpuRateTracker(),
      { time: now, capacityBytes: 1n << 40n, availableBytes: 1n << 39n },
    );
    assert.equal(pods.length, 1);
    const [p] = pods;
    assert.equal(p!.startTime?.getTime(), 0, 'sandbox created_at (2000 ns) is the pod start time');
    assert.deepEqual(p!.containers.map((c) => c.name), ['app']);
    const c = p!.containers[0]!;
    assert.equal(c.startTime?.toISOString(), '2026-01-01T00:00:01.000Z');
    assert.equal(c.cpu?.usageNanoCores, 123n, "the runtime's rate until there is a previous sample");
    assert.deepEqual(c.memory, { time: new Date(1767225610000), usageBytes: 1010n, workingSetBytes: 1000n, rssBytes: 990n, pageFaults: 5n, majorPageFaults: 0n });
    assert.deepEqual(c.rootfs, { time: new Date(1767225610000), availableBytes: 1n << 39n, capacityBytes: 1n << 40n, usedBytes: 4096n, inodesUsed: 3n });
    // No sandbox stats: the pod's figures are its containers' sums.
    assert.equal(p!.cpu?.usageCoreNanoSeconds, 10n);
    assert.equal(p!.memory?.workingSetBytes, 1000n);
    assert.equal(p!.network, undefined);
  });

  it('takes pod figures from ListPodSandboxStats and computes its own rate from the previous sample', () => {
    const rates = new CpuRateTracker();
    const podStats = (cpuNs: bigint, ts: bigint): CriPodSandboxStats => ({
      attributes: { id: 'sb', metadata: null, labels: {}, annotations: {} },
      linux: {
        cpu: { timestamp: ts.toString(), usage_core_nano_seconds: v(cpuNs), usage_nano_cores: null },
        memory: { timestamp: ts.toString(), working_set_bytes: v(2048n), available_bytes: null, usage_bytes: v(4096n), rss_bytes: null, page_faults: null, major_page_faults: null },
        network: { timestamp: ts.toString(), default_interface: { name: 'eth0', rx_bytes: v(1n), rx_errors: v(0n), tx_bytes: v(2n), tx_errors: v(0n) }, interfaces: [{ name: 'eth0', rx_bytes: v(1n), rx_errors: v(0n), tx_bytes: v(2n), tx_errors: v(0n) }] },
        process: { timestamp: ts.toString(), process_count: v(3n) },
        containers: [],
      },
    });
    const base = { sandboxes: [sandbox('sb', 'u', 'SANDBOX_READY', '1')], containers: [container('a', 'sb', 'app', 'CONTAINER_RUNNING')] };
    buildCriPodStats({ ...base, containerStats: [containerStats('a', 0n, 1n, 10_000_000_000n)], sandboxStats: [podStats(0n, 10_000_000_000n)] }, now, rates);
    const [p] = buildCriPodStats(
      { ...base, containerStats: [containerStats('a', 1_000_000_000n, 1n, 20_000_000_000n)], sandboxStats: [podStats(3_000_000_000n, 20_000_000_000n)] },
      now,
      rates,
    );
    assert.equal(p!.cpu?.usageNanoCores, 300_000_000n);
    assert.equal(p!.containers[0]!.cpu?.usageNanoCores, 100_000_000n);
    assert.equal(p!.memory?.workingSetBytes, 2048n);
    assert.equal(p!.memory?.rssBytes, undefined, 'unset CRI values are left out');
    assert.deepEqual(p!.network, {
      time: new Date(20_000),
      name: 'eth0', rxBytes: 1n, rxErrors: 0n, txBytes: 2n, txErrors: 0n,
      interfaces: [{ name: 'eth0', rxBytes: 1n, rxErrors: 0n, txBytes: 2n, txErrors: 0n }],
    });
    assert.deepEqual(p!.process_stats, { process_count: 3n });
  });

  it('does without ListPodSandboxStats only when the runtime does not implement it', async () => {
    const cri = new CriDouble();
    cri.sandboxStats = new CriError('ListPodSandboxStats', 12, 'not implemented');
    assert.equal((await fetchCriStats(cri)).sandboxStats, undefined);
    cri.sandboxStats = new CriError('ListPodSandboxStats', 14, 'connection refused');
    await assert.rejects(fetchCriStats(cri), /UNAVAILABLE/);
  });
});

describe('node-stats parsers and ids', () => {
  it('parse /proc/stat, /proc/meminfo and /proc/loadavg', () => {
    assert.deepEqual(parseProcStat('cpu  100 5 50 1000 7 1 2 3 9 0\nbtime 1700000000\n'), {
      cpuUsageNs: (100n + 5n + 50n + 1n + 2n + 3n) * 10_000_000n,
      bootTimeSeconds: 1700000000,
    });
    const m = parseMeminfo('MemTotal:       2048 kB\nHugePages_Total:       3\n');
    assert.equal(m.get('MemTotal'), 2048n * 1024n);
    assert.equal(m.get('HugePages_Total'), 3n);
    assert.equal(parseLoadavgTasks('0.00 0.01 0.05 1/123 4567\n'), 123n);
    assert.equal(parseLoadavgTasks('garbage'), undefined);
  });

  it('narrows v1 cgroups to the controllers the Summary needs, without the hybrid unified dir', () => {
    const m = (p: string) => ({ mountPoint: `/cg/${p}`, root: '/' });
    const mounts: CgroupMounts = { unified: m('unified'), v1: { cpu: m('cpu'), cpuacct: m('cpuacct'), memory: m('memory'), pids: m('pids'), blkio: m('blkio') } };
    assert.deepEqual(statsCgroupRef(mounts, '/kubepods/pod1/c1', 'container'), { version: 1, cpuacct: '/cg/cpuacct/kubepods/pod1/c1', memory: '/cg/memory/kubepods/pod1/c1' });
    assert.deepEqual(Object.keys(statsCgroupRef(mounts, '/kubepods/pod1', 'pod')), ['version', 'cpuacct', 'memory', 'pids']);
    assert.deepEqual(Object.keys(statsCgroupRef(mounts, '/')), ['version', 'cpu', 'cpuacct', 'memory', 'pids', 'blkio']);
    assert.deepEqual(statsCgroupRef({ unified: m('unified'), v1: {} }, '/kubepods/pod1/c1', 'container'), { version: 2, dir: '/cg/unified/kubepods/pod1/c1' });
  });

  it('takes the id out of a containerID', () => {
    assert.equal(containerIdOf('containerd://abc'), 'abc');
    assert.equal(containerIdOf('abc'), 'abc');
    assert.equal(containerIdOf('containerd://'), undefined);
    assert.equal(containerIdOf(undefined), undefined);
  });
});
