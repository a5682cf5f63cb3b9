import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/api/types.js';
import { Registry } from '../../src/metrics/registry.js';
import type { PodStats, Summary } from '../../src/stats/summary.js';
import { FakeClock } from '../../src/util/clock.js';
import {
  EvictionManager,
  memcgUsageThreshold,
  parseThresholdConfig,
  type EvictionHost,
  type MemcgThresholdNotifier,
  type Threshold,
} from '../../src/eviction/index.js';
import { loggerDouble, settle } from '../kubelet/doubles.js';

const MI = 1024n * 1024n;
const GI = 1024n * MI;

function pod(name: string, opts: { requests?: string; limits?: string; priority?: number; grace?: number } = {}): Pod {
  const resources = opts.requests || opts.limits
    ? { ...(opts.requests && { requests: { memory: opts.requests } }), ...(opts.limits && { limits: { memory: opts.limits } }) }
    : undefined;
  return {
    metadata: { uid: `uid-${name}`, name, namespace: 'default' },
    spec: {
      containers: [{ name: `${name}-c`, image: 'busybox', ...(resources && { resources }) }],
      ...(opts.priority !== undefined && { priority: opts.priority }),
      ...(opts.grace !== undefined && { terminationGracePeriodSeconds: opts.grace }),
    },
  };
}

function podStats(p: Pod, ws: bigint): PodStats {
  const time = new Date(0);
  return {
    podRef: { name: p.metadata.name!, namespace: 'default', uid: p.metadata.uid! },
    startTime: null,
    containers: [{ name: p.spec.containers[0]!.name, startTime: null, memory: { time, workingSetBytes: ws } }],
    memory: { time, workingSetBytes: ws },
  };
}

class Host implements EvictionHost {
  pods: Pod[] = [];
  ws = new Map<string, bigint>();
  nodeAvailable = 4n * GI;
  nodeWorkingSet = 4n * GI;
  fsAvailable = 50n * GI;
  evicted: { pod: string; grace: number; message: string }[] = [];
  events: string[] = [];
  cleaned = true;
  summaries = 0;
  summary(): Promise<Summary> {
    this.summaries++;
    const time = new Date(0);
    return Promise.resolve({
      node: {
        nodeName: 'n', startTime: null,
        memory: { time, availableBytes: this.nodeAvailable, workingSetBytes: this.nodeWorkingSet, usageBytes: this.nodeWorkingSet + 512n * MI },
        fs: { time, availableBytes: this.fsAvailable, capacityBytes: 100n * GI, inodesFree: 1000n, inodes: 2000n },
      },
      pods: this.pods.map((p) => podStats(p, this.ws.get(p.metadata.name!) ?? 0n)),
    });
  }
  activePods(): Pod[] {
    return this.pods.filter((p) => !this.evicted.some((e) => e.pod === p.metadata.name));
  }
  evictPod(p: Pod, grace: number, message: string): void {
    this.evicted.push({ pod: p.metadata.name!, grace, message });
  }
  podCleanedUp(): boolean {
    return this.cleaned;
  }
  recordEvent(p: Pod, type: string, reason: string, message: string): void {
    this.events.push(`${p.metadata.name} ${type} ${reason} ${message}`);
  }
}

const hard = (cfg: Record<string, string>): Threshold[] =>
  parseThresholdConfig({ evictionHard: cfg, evictionSoft: {}, evictionSoftGracePeriod: {}, evictionMinimumReclaim: {}, enforceNodeAllocatable: [] });

function manager(host: Host, thresholds: Threshold[], extra: Partial<ConstructorParameters<typeof EvictionManager>[0]> = {}) {
  const clock = new FakeClock();
  const registry = new Registry();
  const m = new EvictionManager({
    host, clock, log: loggerDouble(), thresholds, registry,
    pressureTransitionPeriodMs: 300_000, maxPodGracePeriodSeconds: 30, ...extra,
  });
  return { m, clock, registry };
}

describe('eviction manager', () => {
  it('under memory pressure evicts the BestEffort pod over its request first, one pod per pass, with upstream message, event and metric', async () => {
    const host = new Host();
    const be = pod('be');
    const burst = pod('burst', { requests: '100Mi' });
    const guaranteed = pod('guar', { requests: '2Gi', limits: '2Gi', priority: 0 });
    host.pods = [guaranteed, burst, be];
    host.ws.set('be', GI).set('burst', 200n * MI).set('guar', GI + 512n * MI);
    host.nodeAvailable = 50n * MI;
    const { m, registry } = manager(host, hard({ 'memory.available': '100Mi' }));
    const r = await m.synchronize();
    assert.equal(r.evicted?.metadata.name, 'be');
    assert.deepEqual(host.evicted, [{
      pod: 'be', grace: 1,
      message: 'The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container be-c was using 1Gi, request is 0, has larger consumption of memory. ',
    }]);
    assert.deepEqual(host.events, [`be Warning Evicted ${host.evicted[0]!.message}`]);
    assert.match(registry.metricsText(), /kubelet_evictions\{eviction_signal="memory.available"\} 1/);
    assert.deepEqual(m.nodeConditions(), ['MemoryPressure']);
    assert.deepEqual(m.pressure(), { memory: true, disk: false, pid: false });

    // Next pass: the burstable pod (over its request) goes before the Guaranteed one.
    await m.synchronize();
    assert.deepEqual(host.evicted.map((e) => e.pod), ['be', 'burst']);
    assert.equal(host.evicted[1]!.message, 'The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container burst-c was using 200Mi, request is 100Mi, has larger consumption of memory. ');
  });

  it('disk pressure: ranks on figures measured now (diskSummary), not on the cached ones that predate the pod filling the disk', async () => {
    const host = new Host();
    const quiet = pod('quiet');
    const eater = pod('eater');
    host.pods = [quiet, eater];
    host.fsAvailable = GI;
    const withVolume = (s: Summary, name: string, usedBytes: bigint): Summary => {
      for (const ps of s.pods) {
        if (ps.podRef.name === name) ps.containers[0]!.rootfs = { time: new Date(0), usedBytes };
      }
      return s;
    };
    // the cache: the eater's layer still empty, the quiet pod's 10Mi; measured now: the eater has 5Gi
    const cached = host.summary.bind(host);
    host.summary = async () => withVolume(withVolume(await cached(), 'quiet', 10n * MI), 'eater', 0n);
    let measured = 0;
    (host as EvictionHost).diskSummary = async () => {
      measured++;
      return withVolume(withVolume(await cached(), 'quiet', 10n * MI), 'eater', 5n * GI);
    };
    const { m } = manager(host, hard({ 'nodefs.available': '10%' }), { imageGC: async () => undefined, containerGC: async () => undefined });
    await m.synchronize();
    assert.equal(measured, 1);
    assert.deepEqual(host.evicted.map((e) => e.pod), ['eater']);
  });

  it('ranks by priority among pods over their requests, then by usage above request', async () => {
    const host = new Host();
    const low = pod('low', { priority: -10 });
    const big = pod('big', { priority: 100 });
    host.pods = [big, low];
    host.ws.set('low', 10n * MI).set('big', 3n * GI);
    host.nodeAvailable = 10n * MI;
    const { m } = manager(host, hard({ 'memory.available': '100Mi' }));
    await m.synchronize();
    assert.equal(host.evicted[0]!.pod, 'low');
  });

  it('evicts nothing and reports no pressure while memory is above the threshold', async () => {
    const host = new Host();
    host.pods = [pod('be')];
    const { m } = manager(host, hard({ 'memory.available': '100Mi' }));
    const r = await m.synchronize();
    assert.equal(r.evicted, undefined);
    assert.equal(host.evicted.length, 0);
    assert.deepEqual(m.nodeConditions(), []);
  });

  it('never evicts a critical pod', async () => {
    const host = new Host();
    host.pods = [pod('crit', { priority: 2_000_000_000 })];
    host.ws.set('crit', GI);
    host.nodeAvailable = 10n * MI;
    const { m } = manager(host, hard({ 'memory.available': '100Mi' }));
    assert.equal((await m.synchronize()).evicted, undefined);
    assert.equal(host.evicted.length, 0);
  });

  it('a soft threshold waits its grace period and caps the pod grace at evictionMaxPodGracePeriod', async () => {
    const host = new Host();
    host.pods = [pod('be', { grace: 60 })];
    host.ws.set('be', GI);
    host.nodeAvailable = 500n * MI;
    const soft = parseThresholdConfig({ evictionHard: {}, evictionSoft: { 'memory.available': '1Gi' }, evictionSoftGracePeriod: { 'memory.available': 60_000 }, evictionMinimumReclaim: {}, enforceNodeAllocatable: [] });
    const { m, clock } = manager(host, soft, { maxPodGracePeriodSeconds: 20 });
    await m.synchronize();
    assert.equal(host.evicted.length, 0);
    // pressure is reported at once, the eviction waits for the grace period
    assert.deepEqual(m.nodeConditions(), ['MemoryPressure']);
    clock.step(59_999);
    await m.synchronize();
    assert.equal(host.evicted.length, 0);
    clock.step(1);
    await m.synchronize();
    assert.deepEqual(host.evicted.map((e) => [e.pod, e.grace]), [['be', 20]]);
  });

  it('keeps the pressure condition for the transition period after the signal recovers', async () => {
    const host = new Host();
    host.nodeAvailable = 10n * MI;
    const { m, clock } = manager(host, hard({ 'memory.available': '100Mi' }), { pressureTransitionPeriodMs: 60_000 });
    await m.synchronize();
    assert.ok(m.isUnderMemoryPressure());
    host.nodeAvailable = 4n * GI;
    clock.step(59_000);
    await m.synchronize();
    assert.ok(m.isUnderMemoryPressure());
    clock.step(1_000);
    await m.synchronize();
    assert.ok(!m.isUnderMemoryPressure());
  });

  it('admission refuses BestEffort pods under memory pressure alone, every non-critical pod under disk pressure', async () => {
    const host = new Host();
    const { m } = manager(host, hard({ 'memory.available': '100Mi', 'nodefs.available': '10%' }));
    assert.deepEqual(m.admit(pod('be')), { admit: true });
    host.nodeAvailable = 10n * MI;
    await m.synchronize();
    assert.deepEqual(m.admit(pod('be')), { admit: false, reason: 'Evicted', message: 'The node had condition: [MemoryPressure]. ' });
    assert.deepEqual(m.admit(pod('burst', { requests: '10Mi' })), { admit: true });
    const tolerating = pod('tol');
    tolerating.spec.tolerations = [{ key: 'node.kubernetes.io/memory-pressure', operator: 'Exists', effect: 'NoSchedule' }];
    assert.deepEqual(m.admit(tolerating), { admit: true });
    host.fsAvailable = GI;
    await m.synchronize();
    assert.deepEqual(m.admit(pod('burst', { requests: '10Mi' })), { admit: false, reason: 'Evicted', message: 'The node had condition: [MemoryPressure DiskPressure]. ' });
    assert.deepEqual(m.admit(pod('crit', { priority: 2_000_000_000 })), { admit: true });
  });

  it('reclaims node-level resources (container GC, then image GC) before evicting for disk, and evicts none when that is enough', async () => {
    const host = new Host();
    host.pods = [pod('be')];
    host.fsAvailable = GI;
    const calls: string[] = [];
    const { m } = manager(host, hard({ 'nodefs.available': '10%' }), {
      containerGC: async () => void calls.push('containers'),
      imageGC: async () => { calls.push('images'); host.fsAvailable = 20n * GI; },
    });
    const r = await m.synchronize();
    assert.deepEqual(calls, ['containers', 'images']);
    assert.equal(r.reclaimedNodeLevel, true);
    assert.equal(host.evicted.length, 0);
    assert.deepEqual(m.nodeConditions(), ['DiskPressure']);

    // Reclaim not enough: the pod goes, named with the disk figures.
    host.fsAvailable = GI;
    const m2 = manager(host, hard({ 'nodefs.available': '10%' }), { imageGC: async () => undefined }).m;
    await m2.synchronize();
    assert.equal(host.evicted[0]!.pod, 'be');
    assert.equal(host.evicted[0]!.message, 'The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 1Gi. ');
  });

  it('a memcg notification runs a pass at once; the loop polls every monitoring period and waits for the evicted pod', async () => {
    const host = new Host();
    host.pods = [pod('be')];
    host.ws.set('be', GI);
    let onCross: ((key: string) => void) | undefined;
    const armed: [string, string, bigint][] = [];
    const notifier: MemcgThresholdNotifier = { setThreshold: (k, cg, b) => void armed.push([k, cg, b]), close: () => undefined };
    const { m, clock } = manager(host, hard({ 'memory.available': '100Mi' }), { memcgNotifier: (cb) => { onCross = cb; return notifier; } });
    m.start();
    clock.step(0);
    await settle();
    assert.equal(host.summaries, 1);
    // usage threshold = capacity − 100Mi + inactive file (512Mi), one byte past it
    assert.deepEqual(armed, [['memory.available/hard', '', 8n * GI - 100n * MI + 512n * MI + 1n]]);
    // A notification read a little short of the threshold: one re-check after 100 ms.
    host.nodeAvailable = 101n * MI;
    onCross!('memory.available/hard');
    await settle();
    assert.equal(host.summaries, 2);
    assert.equal(host.evicted.length, 0);
    host.nodeAvailable = 10n * MI;
    clock.step(100);
    await settle();
    assert.equal(host.summaries, 3);
    assert.equal(host.evicted[0]?.pod, 'be');
    clock.step(10_000);
    await settle();
    assert.equal(host.summaries, 4);
    m.stop();
  });

  it('after a notification\'s eviction, no pass evicts again until the evicted pod is cleaned up', async () => {
    const host = new Host();
    host.pods = [pod('guar', { requests: '64Mi', limits: '64Mi' }), pod('be')];
    host.ws.set('be', GI).set('guar', 10n * MI);
    let onCross: ((key: string) => void) | undefined;
    const notifier: MemcgThresholdNotifier = { setThreshold: () => undefined, close: () => undefined };
    const { m, clock } = manager(host, hard({ 'memory.available': '100Mi' }), { memcgNotifier: (cb) => { onCross = cb; return notifier; } });
    m.start();
    clock.step(0);
    await settle();
    host.nodeAvailable = 10n * MI;
    host.cleaned = false;
    onCross!('memory.available/hard');
    await settle();
    assert.deepEqual(host.evicted.map((e) => e.pod), ['be']);
    // the hog's memory is still counted while its container stops: the loop's pass and a
    // second notification wait, and the Guaranteed pod stays
    const passes = host.summaries;
    clock.step(10_000);
    await settle();
    onCross!('memory.available/hard');
    await settle();
    assert.equal(host.summaries, passes);
    assert.deepEqual(host.evicted.map((e) => e.pod), ['be']);
    // cleaned up and the memory back: the waiting passes run and evict nothing
    host.cleaned = true;
    host.nodeAvailable = 2n * GI;
    clock.step(1_000);
    await settle();
    assert.ok(host.summaries > passes);
    assert.deepEqual(host.evicted.map((e) => e.pod), ['be']);
    m.stop();
  });

  it('with a dedicated image filesystem, nodefs pressure evicts without reclaim and imagefs pressure reclaims', async () => {
    const host = new Host();
    host.pods = [pod('be')];
    host.fsAvailable = GI;
    const calls: string[] = [];
    const gc = { containerGC: async () => void calls.push('containers'), imageGC: async () => void calls.push('images') };
    const { m } = manager(host, hard({ 'nodefs.available': '10%' }), { ...gc, dedicatedImageFs: true });
    await m.synchronize();
    assert.deepEqual(calls, []);
    assert.equal(host.evicted[0]?.pod, 'be');
    const host2 = new Host();
    host2.pods = [pod('be')];
    const summary = host2.summary.bind(host2);
    host2.summary = async () => {
      const s = await summary();
      s.node.runtime = { imageFs: { time: new Date(0), availableBytes: GI, capacityBytes: 100n * GI } };
      return s;
    };
    const m2 = manager(host2, hard({ 'imagefs.available': '15%' }), { ...gc, dedicatedImageFs: true }).m;
    await m2.synchronize();
    assert.deepEqual(calls, ['containers', 'images']);
    assert.equal(host2.evicted[0]?.pod, 'be');
  });

  it('under PID pressure evicts the pod with the most processes among the lowest priority', async () => {
    const host = new Host();
    const few = pod('few');
    const many = pod('many');
    const important = pod('important', { priority: 1000 });
    host.pods = [few, important, many];
    const counts: Record<string, bigint> = { few: 2n, many: 500n, important: 9000n };
    const summary = host.summary.bind(host);
    host.summary = async () => {
      const s = await summary();
      s.node.rlimit = { time: new Date(0), maxpid: 10_000n, curproc: 9_950n };
      for (const p of s.pods) p.process_stats = { process_count: counts[p.podRef.name]! };
      return s;
    };
    const { m } = manager(host, hard({ 'pid.available': '1%' }));
    await m.synchronize();
    assert.equal(host.evicted[0]?.pod, 'many');
    assert.equal(host.evicted[0]?.message, 'The node was low on resource: pids. Threshold quantity: 100, available: 50. ');
    assert.deepEqual(m.nodeConditions(), ['PIDPressure']);
  });

  it('computes the memcg usage threshold as upstream', () => {
    const [t] = hard({ 'memory.available': '10%' });
    assert.equal(memcgUsageThreshold(t!, { usageBytes: 6n * GI, workingSetBytes: 5n * GI, availableBytes: 5n * GI }), 10n * GI - GI + GI + 1n);
    assert.equal(memcgUsageThreshold(t!, { usageBytes: 1n }), undefined);
  });
});

/** A host that also serves observe(): the node with only the asked pods, their working sets summed from all. */
class ObservingHost extends Host {
  asked: string[][] = [];
  fullBuilds = 0;
  volumeUse = new Map<string, { volume: string; bytes: bigint }>();
  override async summary(): Promise<Summary> {
    const s = await super.summary();
    for (const ps of s.pods) {
      const v = this.volumeUse.get(ps.podRef.name);
      if (v) ps.volume = [{ name: v.volume, usedBytes: v.bytes, time: new Date(0) }];
    }
    return s;
  }
  async observe(_fresh: boolean, pods: ReadonlySet<string>) {
    this.asked.push([...pods].sort());
    const all = await this.summary();
    this.summaries--; // one snapshot: counted once by the test through asked
    let ws = 0n;
    for (const p of all.pods) ws += p.memory?.workingSetBytes ?? 0n;
    return {
      summary: { node: all.node, pods: all.pods.filter((p) => pods.has(p.podRef.uid)) },
      podsWorkingSetBytes: ws,
      full: () => { this.fullBuilds++; return all; },
    };
  }
}

describe('eviction manager with observe()', () => {
  it('asks for the stats of the pods a local storage limit applies to only, and evicts the one over its emptyDir sizeLimit', async () => {
    const host = new ObservingHost();
    const plain = pod('plain');
    const limited: Pod = { ...pod('limited'), spec: { ...pod('limited').spec, volumes: [{ name: 'scratch', emptyDir: { sizeLimit: '1Mi' } }] } };
    host.pods = [plain, limited];
    host.volumeUse.set('limited', { volume: 'scratch', bytes: 2n * MI });
    const { m } = manager(host, hard({ 'memory.available': '100Mi' }));
    const r = await m.synchronize();
    assert.deepEqual(host.asked, [['uid-limited']]);
    assert.equal(r.evicted?.metadata.name, 'limited');
    assert.deepEqual(host.evicted.map((e) => e.message), ['Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". ']);
    assert.equal(host.fullBuilds, 0, 'no pressure: every pod\'s stats were never built');
  });

  it('ranks under memory pressure on the whole Summary, and measures allocatable memory against every pod\'s working set', async () => {
    const host = new ObservingHost();
    const be = pod('be');
    const burst = pod('burst', { requests: '100Mi' });
    host.pods = [burst, be];
    host.ws.set('be', GI).set('burst', 200n * MI);
    host.nodeAvailable = 50n * MI;
    const { m } = manager(host, hard({ 'memory.available': '100Mi' }), { allocatableMemory: { capacity: 2n * GI, reserved: 0n } });
    const r = await m.synchronize();
    assert.deepEqual(host.asked, [[]], 'no pod declares a local storage limit');
    assert.equal(r.evicted?.metadata.name, 'be');
    assert.equal(host.fullBuilds, 1);
    // 2Gi - (1Gi + 200Mi) of every pod, though the observed Summary held none of them
    assert.equal(m.observations().get('allocatableMemory.available')?.available, 2n * GI - GI - 200n * MI);
  });
});
