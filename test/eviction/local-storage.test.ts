// Local ephemeral storage limits with figures fed in: each rule (emptyDir sizeLimit, the pod's
// total against its containers' limits, a container against its own), upstream's messages, the
// order the rules are tried in, and the manager's side: the pods go at once with the immediate
// grace, no DisruptionTarget, an Evicted event and kubelet_evictions labelled as upstream.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Container, Pod, Volume } from '../../src/api/types.js';
import { Registry } from '../../src/metrics/registry.js';
import type { ContainerStats, PodStats, Summary } from '../../src/stats/summary.js';
import { FakeClock } from '../../src/util/clock.js';
import {
  EvictionManager,
  localStorageViolation,
  parseThresholdConfig,
  podEphemeralStorageLimit,
  type EvictionHost,
  type Threshold,
} from '../../src/eviction/index.js';
import { loggerDouble, settle } from '../kubelet/doubles.js';

const KI = 1024n;
const MI = 1024n * KI;
const t0 = new Date(0);

interface PodOpts {
  containers?: { name: string; limit?: string; request?: string }[];
  init?: { name: string; limit?: string }[];
  volumes?: Volume[];
  priority?: number;
  overhead?: string;
}

function pod(name: string, o: PodOpts = {}): Pod {
  const container = (c: { name: string; limit?: string; request?: string }): Container => ({
    name: c.name,
    image: 'busybox',
    ...((c.limit || c.request) && {
      resources: {
        ...(c.limit && { limits: { 'ephemeral-storage': c.limit } }),
        ...(c.request && { requests: { 'ephemeral-storage': c.request } }),
      },
    }),
  });
  return {
    metadata: { uid: `uid-${name}`, name, namespace: 'default' },
    spec: {
      containers: (o.containers ?? [{ name: 'main' }]).map(container),
      ...(o.init && { initContainers: o.init.map(container) }),
      ...(o.volumes && { volumes: o.volumes }),
      ...(o.priority !== undefined && { priority: o.priority }),
      ...(o.overhead && { overhead: { 'ephemeral-storage': o.overhead } }),
    },
  };
}

interface Figures {
  containers?: Record<string, { rootfs?: bigint; logs?: bigint }>;
  volumes?: Record<string, bigint>;
  ephemeral?: bigint;
}

function stats(p: Pod, f: Figures = {}): PodStats {
  const containers: ContainerStats[] = Object.entries(f.containers ?? {}).map(([name, c]) => ({
    name, startTime: null,
    ...(c.rootfs !== undefined && { rootfs: { time: t0, usedBytes: c.rootfs } }),
    ...(c.logs !== undefined && { logs: { time: t0, usedBytes: c.logs } }),
  }));
  const s: PodStats = { podRef: { name: p.metadata.name!, namespace: 'default', uid: p.metadata.uid! }, startTime: null, containers };
  if (f.volumes) s.volume = Object.entries(f.volumes).map(([name, used]) => ({ time: t0, name, usedBytes: used }));
  if (f.ephemeral !== undefined) s['ephemeral-storage'] = { time: t0, usedBytes: f.ephemeral };
  return s;
}

const shared = { dedicatedImageFs: false };

describe('local storage limits (rules)', () => {
  it('an emptyDir over its sizeLimit, with upstream message; at or under it, or without a positive limit, nothing', () => {
    const p = pod('ed', { volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }, { name: 'free', emptyDir: {} }] });
    assert.deepEqual(localStorageViolation(p, stats(p, { volumes: { cache: 4n * MI } }), shared), {
      signal: 'emptydirfs.limit',
      message: 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ',
    });
    assert.equal(localStorageViolation(p, stats(p, { volumes: { cache: MI, free: 100n * MI } }), shared), undefined);
    const zero = pod('z', { volumes: [{ name: 'cache', emptyDir: { sizeLimit: '0' } }] });
    assert.equal(localStorageViolation(zero, stats(zero, { volumes: { cache: MI } }), shared), undefined);
    // unmeasured: nothing to compare
    assert.equal(localStorageViolation(p, stats(p), shared), undefined);
  });

  it('the sizeLimit rule covers a memory-medium emptyDir too, and prints the limit in canonical form', () => {
    const p = pod('mem', { volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '1048576' } }] });
    assert.equal(localStorageViolation(p, stats(p, { volumes: { shm: 2n * MI } }), shared)?.message,
      'Usage of EmptyDir volume "shm" exceeds the limit "1048576". ');
    const p2 = pod('k', { volumes: [{ name: 'v', emptyDir: { sizeLimit: '2048Ki' } }] });
    assert.equal(localStorageViolation(p2, stats(p2, { volumes: { v: 3n * MI } }), shared)?.message,
      'Usage of EmptyDir volume "v" exceeds the limit "2Mi". ');
  });

  it('the pod ephemeral-storage figure over the sum of its containers\' limits', () => {
    const p = pod('sum', { containers: [{ name: 'a', limit: '2Mi' }, { name: 'b', limit: '1Mi' }] });
    assert.deepEqual(localStorageViolation(p, stats(p, { ephemeral: 3n * MI + 1n }), shared), {
      signal: 'ephemeralpodfs.limit',
      message: 'Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. ',
    });
    assert.equal(localStorageViolation(p, stats(p, { ephemeral: 3n * MI }), shared), undefined);
  });

  it('the pod limit is the sum of the limits set (a container without one adds nothing), init containers at their peak, plus overhead', () => {
    const partial = pod('p', { containers: [{ name: 'a', limit: '1Mi' }, { name: 'b' }] });
    assert.equal(podEphemeralStorageLimit(partial)?.toString(), '1Mi');
    assert.equal(localStorageViolation(partial, stats(partial, { ephemeral: 2n * MI }), shared)?.signal, 'ephemeralpodfs.limit');
    assert.equal(podEphemeralStorageLimit(pod('none')), undefined);
    assert.equal(localStorageViolation(pod('none'), stats(pod('none'), { ephemeral: 100n * MI }), shared), undefined);
    const init = pod('i', { containers: [{ name: 'a', limit: '1Mi' }], init: [{ name: 'setup', limit: '5Mi' }] });
    assert.equal(podEphemeralStorageLimit(init)?.toString(), '5Mi');
    const oh = pod('o', { containers: [{ name: 'a', limit: '1Mi' }], overhead: '1Mi' });
    assert.equal(podEphemeralStorageLimit(oh)?.toString(), '2Mi');
  });

  it('a container whose writable layer and logs exceed its own limit, with upstream message', () => {
    const p = pod('c', { containers: [{ name: 'quiet', limit: '10Mi' }, { name: 'loud', limit: '10Mi' }] });
    // 6Mi + 6Mi: over the container's 10Mi, under the pod's 20Mi
    const f = { containers: { quiet: { rootfs: MI, logs: KI }, loud: { rootfs: 6n * MI, logs: 6n * MI } }, ephemeral: 13n * MI };
    assert.deepEqual(localStorageViolation(p, stats(p, f), shared), {
      signal: 'ephemeralcontainerfs.limit',
      message: 'Container loud exceeded its local ephemeral storage limit "10Mi". ',
    });
  });

  it('with a dedicated image filesystem a container\'s limit counts its logs only', () => {
    const p = pod('d', { containers: [{ name: 'main', limit: '10Mi' }] });
    const f = { containers: { main: { rootfs: 50n * MI, logs: MI } } };
    assert.equal(localStorageViolation(p, stats(p, f), { dedicatedImageFs: true }), undefined);
    assert.equal(localStorageViolation(p, stats(p, { containers: { main: { rootfs: 0n, logs: 11n * MI } } }), { dedicatedImageFs: true })?.signal, 'ephemeralcontainerfs.limit');
  });

  it('limits are read once per spec object: the same spec judges alike on every pass, a replaced spec with new limits is judged by them', () => {
    const p = pod('upd', { containers: [{ name: 'main', limit: '10Mi' }], volumes: [{ name: 'cache', emptyDir: { sizeLimit: '4Mi' } }] });
    const f = { containers: { main: { rootfs: 6n * MI, logs: 0n } }, volumes: { cache: 3n * MI }, ephemeral: 9n * MI };
    for (let pass = 0; pass < 2; pass++) assert.equal(localStorageViolation(p, stats(p, f), shared), undefined);
    // the pod is updated: a new spec object with smaller limits (specs are replaced, never edited)
    const smaller = pod('upd', { containers: [{ name: 'main', limit: '5Mi' }], volumes: [{ name: 'cache', emptyDir: { sizeLimit: '2Mi' } }] });
    assert.equal(localStorageViolation(smaller, stats(smaller, f), shared)?.signal, 'emptydirfs.limit');
    const noEmptyDir = pod('upd', { containers: [{ name: 'main', limit: '5Mi' }] });
    assert.equal(localStorageViolation(noEmptyDir, stats(noEmptyDir, { ...f, ephemeral: 4n * MI }), shared)?.message, 'Container main exceeded its local ephemeral storage limit "5Mi". ');
    assert.equal(localStorageViolation(noEmptyDir, stats(noEmptyDir, f), shared)?.signal, 'ephemeralpodfs.limit');
    // the first spec still judges by its own limits
    assert.equal(localStorageViolation(p, stats(p, f), shared), undefined);
  });

  it('tries the rules in upstream order: emptyDir, then the pod, then a container', () => {
    const p = pod('all', { containers: [{ name: 'main', limit: '1Mi' }], volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }] });
    const f = { containers: { main: { rootfs: 2n * MI, logs: 0n } }, volumes: { cache: 2n * MI }, ephemeral: 4n * MI };
    assert.equal(localStorageViolation(p, stats(p, f), shared)?.signal, 'emptydirfs.limit');
    assert.equal(localStorageViolation(p, stats(p, { ...f, volumes: { cache: 0n } }), shared)?.signal, 'ephemeralpodfs.limit');
    assert.equal(localStorageViolation(p, stats(p, { ...f, volumes: { cache: 0n }, ephemeral: 0n }), shared)?.signal, 'ephemeralcontainerfs.limit');
  });
});

class Host implements EvictionHost {
  pods: Pod[] = [];
  figures = new Map<string, Figures>();
  nodeAvailable = 4n * 1024n * MI;
  evicted: { pod: string; grace: number; message: string; disruptionTarget?: boolean }[] = [];
  events: string[] = [];
  cleaned = false;
  summary(): Promise<Summary> {
    return Promise.resolve({
      node: { nodeName: 'n', startTime: null, memory: { time: t0, availableBytes: this.nodeAvailable, workingSetBytes: 4n * 1024n * MI } },
      pods: this.pods.map((p) => stats(p, this.figures.get(p.metadata.name!))),
    });
  }
  activePods(): Pod[] {
    return this.pods.filter((p) => !this.evicted.some((e) => e.pod === p.metadata.name));
  }
  evictPod(p: Pod, grace: number, message: string, opts?: { disruptionTarget?: boolean }): void {
    this.evicted.push({ pod: p.metadata.name!, grace, message, ...(opts && { disruptionTarget: opts.disruptionTarget }) });
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
  const m = new EvictionManager({ host, clock, log: loggerDouble(), thresholds, registry, pressureTransitionPeriodMs: 300_000, maxPodGracePeriodSeconds: 30, ...extra });
  return { m, clock, registry };
}

describe('local storage limits (eviction manager)', () => {
  it('evicts every pod over a limit in one pass, immediate grace, no DisruptionTarget, event and metric per signal; others keep running', async () => {
    const host = new Host();
    const ed = pod('ed', { volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }] });
    const total = pod('total', { containers: [{ name: 'main', limit: '2Mi' }], volumes: [{ name: 'scratch', emptyDir: {} }] });
    const fine = pod('fine', { containers: [{ name: 'main', limit: '100Mi' }], volumes: [{ name: 'cache', emptyDir: { sizeLimit: '10Mi' } }] });
    host.pods = [ed, total, fine];
    host.figures.set('ed', { volumes: { cache: 4n * MI } });
    host.figures.set('total', { containers: { main: { rootfs: MI, logs: KI } }, volumes: { scratch: 2n * MI }, ephemeral: 3n * MI + KI });
    host.figures.set('fine', { containers: { main: { rootfs: MI, logs: KI } }, volumes: { cache: 5n * MI }, ephemeral: 6n * MI });
    const { m, registry } = manager(host, hard({ 'memory.available': '100Mi' }));
    const r = await m.synchronize();
    assert.deepEqual(r.evictedPods?.map((p) => p.metadata.name), ['ed', 'total']);
    assert.equal(r.evicted?.metadata.name, 'ed');
    assert.deepEqual(host.evicted, [
      { pod: 'ed', grace: 1, message: 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ', disruptionTarget: false },
      { pod: 'total', grace: 1, message: 'Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ', disruptionTarget: false },
    ]);
    assert.deepEqual(host.events, [
      'ed Warning Evicted Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ',
      'total Warning Evicted Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ',
    ]);
    const text = registry.metricsText();
    assert.match(text, /kubelet_evictions\{eviction_signal="emptydirfs.limit"\} 1\b/);
    assert.match(text, /kubelet_evictions\{eviction_signal="ephemeralpodfs.limit"\} 1\b/);
  });

  it('the container rule is counted under ephemeralcontainerfs.limit', async () => {
    const host = new Host();
    // main is over its own 1Mi, the pod under its 11Mi
    const p = pod('c', { containers: [{ name: 'main', limit: '1Mi' }, { name: 'side', limit: '10Mi' }] });
    host.pods = [p];
    host.figures.set('c', { containers: { main: { rootfs: MI, logs: KI }, side: { rootfs: 0n, logs: 0n } }, ephemeral: MI + KI });
    const { m, registry } = manager(host, hard({ 'memory.available': '100Mi' }));
    await m.synchronize();
    assert.equal(host.evicted[0]?.message, 'Container main exceeded its local ephemeral storage limit "1Mi". ');
    assert.match(registry.metricsText(), /kubelet_evictions\{eviction_signal="ephemeralcontainerfs.limit"\} 1\b/);
  });

  it('runs with no eviction threshold configured, and a local storage eviction ends the pass before any threshold', async () => {
    const host = new Host();
    const ed = pod('ed', { volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }] });
    host.pods = [ed, pod('other')];
    host.figures.set('ed', { volumes: { cache: 2n * MI } });
    const none = manager(host, []);
    assert.deepEqual((await none.m.synchronize()).evictedPods?.map((p) => p.metadata.name), ['ed']);

    // under memory pressure too: the pass evicts for the limit only, the threshold waits for the next pass
    const host2 = new Host();
    host2.pods = [pod('ed', { volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }] }), pod('other')];
    host2.figures.set('ed', { volumes: { cache: 2n * MI } });
    host2.nodeAvailable = 10n * MI;
    const { m } = manager(host2, hard({ 'memory.available': '100Mi' }));
    await m.synchronize();
    assert.deepEqual(host2.evicted.map((e) => e.pod), ['ed']);
    assert.deepEqual(m.nodeConditions(), ['MemoryPressure']);
    await m.synchronize();
    assert.deepEqual(host2.evicted.map((e) => [e.pod, e.disruptionTarget]), [['ed', false], ['other', true]]);
  });

  it('leaves critical pods alone and does nothing with localStorageCapacityIsolation off', async () => {
    const host = new Host();
    const crit = pod('crit', { priority: 2_000_000_000, volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }] });
    host.pods = [crit];
    host.figures.set('crit', { volumes: { cache: 2n * MI } });
    assert.equal((await manager(host, hard({ 'memory.available': '100Mi' })).m.synchronize()).evicted, undefined);
    const host2 = new Host();
    host2.pods = [pod('ed', { volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }] })];
    host2.figures.set('ed', { volumes: { cache: 2n * MI } });
    assert.equal((await manager(host2, hard({ 'memory.available': '100Mi' }), { localStorageCapacityIsolation: false }).m.synchronize()).evicted, undefined);
    assert.equal((await manager(host2, [], { localStorageCapacityIsolation: false }).m.synchronize()).evicted, undefined);
    assert.deepEqual(host.evicted.concat(host2.evicted), []);
  });

  it('the loop waits for every pod evicted in the pass to be cleaned up before the next pass', async () => {
    const host = new Host();
    const sized = (n: string): Pod => pod(n, { volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Mi' } }] });
    host.pods = [sized('a'), sized('b')];
    host.figures.set('a', { volumes: { cache: 2n * MI } }).set('b', { volumes: { cache: 2n * MI } });
    let passes = 0;
    const { m, clock } = manager(host, hard({ 'memory.available': '100Mi' }));
    m.onSynchronize = () => void passes++;
    m.start();
    clock.step(0);
    await settle();
    assert.equal(passes, 1);
    assert.deepEqual(m.waitingForCleanup?.metadata.name, 'a');
    // not cleaned up: after the monitoring period the loop is still waiting, no new pass
    clock.step(10_000);
    await settle();
    assert.equal(passes, 1);
    host.cleaned = true;
    clock.step(1_000);
    await settle();
    assert.equal(m.waitingForCleanup, undefined);
    clock.step(10_000);
    await settle();
    assert.equal(passes, 2);
    m.stop();
  });
});
