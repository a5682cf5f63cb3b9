// The kubelet as a node of a cluster, built from doubles (no runtime, no root) against the test
// API server double in-process, on a fake clock: registration and reconcile, node status and
// events, lease cadence and a 409, 10 minutes of API outage, and a stop that never waits on a
// hung API server. Without an API client the kubelet stays standalone.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RestClient } from '../../src/client/rest.js';
import { Kubelet } from '../../src/kubelet/kubelet.js';
import { KUBELET_VERSION } from '../../src/kubelet/node-agent.js';
import { BUILD_ANNOTATION, KUBELET_TS_BUILD } from '../../src/version.js';
import { microTime } from '../../src/nodestatus/lease.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, nodeManifest, startServer } from '../test-apiserver/client.js';
import { settle, until } from '../client/drive.js';
import { FakeSource } from '../nodestatus/doubles.js';
import { harness, type Harness } from './doubles.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const leasePath = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases';

describe('kubelet with an API server (test API server double, fake clock)', () => {
  let dir: string;
  let api: TestApiServer;
  let h: Harness;
  let k: Kubelet | undefined;
  let source: FakeSource;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-node-agent-'));
    h = harness(dir);
    h.clock.step(T0 - h.clock.now());
    api = await startServer({ clock: h.clock });
    source = new FakeSource();
    h.deps.apiClient = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock: h.clock });
    h.deps.nodeFacts = source;
    h.flags.nodeIP = ['10.0.0.1'];
    h.flags.nodeLabels = { role: 'infra' };
    h.config.registerWithTaints = [{ key: 'dedicated', value: 'infra', effect: 'NoSchedule' }];
    h.config.maxPods = 42;
    h.config.port = 10350;
    h.config.kubeReserved = { cpu: '500m', memory: '1Gi' };
    h.config.systemReserved = { memory: '512Mi' };
    h.config.evictionHard = { 'memory.available': '100Mi', 'nodefs.available': '10%' };
  });

  afterEach(async () => {
    await k?.stop();
    k = undefined;
    await api.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const start = async () => {
    k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
    await k.start();
    return k;
  };
  const node = () => api.get('nodes', undefined, 'node-a');
  const lease = () => api.get('leases', 'kube-node-lease', 'node-a', 'coordination.k8s.io');
  const ready = () => node()?.status?.conditions?.find((c: { type: string }) => c.type === 'Ready');
  const reasons = () => api.list('events').map((e) => e.reason as string);

  it('registers the Node with its labels, taints, capacity, allocatable, nodeInfo and Ready from CRI Status and PLEG', async () => {
    await start();
    const n = await until(h.clock, 'the Node', () => node(), 100);
    assert.deepEqual(n.metadata.labels, {
      'kubernetes.io/hostname': 'node-a', 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': n.metadata.labels['kubernetes.io/arch'],
      'beta.kubernetes.io/os': 'linux', 'beta.kubernetes.io/arch': n.metadata.labels['kubernetes.io/arch'], role: 'infra',
    });
    assert.deepEqual(n.spec.taints, [{ key: 'dedicated', value: 'infra', effect: 'NoSchedule' }]);
    assert.equal(n.status.capacity.pods, '42');
    assert.equal(n.status.capacity.cpu, '4');
    assert.equal(n.status.capacity.memory, '8Gi');
    // 8Gi − 1Gi − 512Mi − 100Mi; 4 − 0.5 cpu; 100Gi − 10 %.
    assert.equal(n.status.allocatable.memory, `${8192 - 1024 - 512 - 100}Mi`);
    assert.equal(n.status.allocatable.cpu, '3500m');
    assert.equal(n.status.allocatable['ephemeral-storage'], '90Gi');
    assert.deepEqual(n.status.addresses, [{ type: 'InternalIP', address: '10.0.0.1' }, { type: 'Hostname', address: 'node-a' }]);
    assert.equal(n.status.nodeInfo.containerRuntimeVersion, 'containerd://1.7.24');
    assert.equal(n.status.nodeInfo.kubeletVersion, KUBELET_VERSION);
    // the Kubernetes release kubelet-ts implements (version-skew checks read it); kubelet-ts's own build beside it
    assert.match(n.status.nodeInfo.kubeletVersion, /^v1\.34\.\d+$/);
    assert.equal(n.metadata.annotations[BUILD_ANNOTATION], KUBELET_TS_BUILD);
    assert.match(KUBELET_TS_BUILD, /^v\d+\.\d+\.\d+/);
    assert.deepEqual(n.status.images, [{ names: ['busybox@sha256:aa', 'busybox:1.36'], sizeBytes: 2_000_000 }]);
    // The secure port the config gives: where the API server proxies logs, exec and nodes/proxy.
    assert.deepEqual(n.status.daemonEndpoints, { kubeletEndpoint: { Port: 10350 } });
    const conds = Object.fromEntries(n.status.conditions.map((c: { type: string; status: string; reason: string }) => [c.type, `${c.status} ${c.reason}`]));
    assert.deepEqual(conds, {
      MemoryPressure: 'False KubeletHasSufficientMemory', DiskPressure: 'False KubeletHasNoDiskPressure',
      PIDPressure: 'False KubeletHasSufficientPID', Ready: 'True KubeletReady',
    });
    assert.equal(ready().message, 'kubelet is posting ready status');
    await until(h.clock, 'Starting and RegisteredNode events', () => reasons().includes('RegisteredNode') && reasons().includes('Starting'), 100);
    const starting = api.list('events').find((e) => e.reason === 'Starting')!;
    assert.deepEqual(starting.involvedObject, { kind: 'Node', name: 'node-a', uid: 'node-a' });
    assert.equal(starting.message, 'Starting kubelet.');
  });

  it('reports NotReady with upstream\'s reasons while the runtime or PLEG is unhealthy, then NodeReady', async () => {
    h.cri.ready = false;
    let plegOk = false;
    h.pleg.healthy = () => (plegOk ? { ok: true, message: 'ok' } : { ok: false, message: 'pleg was last seen active 3m10s ago; threshold is 3m0s' });
    await start();
    await until(h.clock, 'the Node', () => ready(), 100);
    assert.equal(ready().status, 'False');
    assert.equal(ready().reason, 'KubeletNotReady');
    assert.equal(ready().message, '[container runtime status check may not have completed yet, PLEG is not healthy: pleg was last seen active 3m10s ago; threshold is 3m0s, container runtime not ready: RuntimeReady=false reason: message:]');
    h.cri.ready = true;
    plegOk = true;
    await until(h.clock, 'Ready', () => ready()?.status === 'True', 500);
    await until(h.clock, 'the NodeReady event', () => reasons().includes('NodeReady'), 100);
    const e = api.list('events').find((x) => x.reason === 'NodeReady')!;
    assert.equal(e.message, 'Node node-a status is now: NodeReady');
  });

  it('reports the eviction manager\'s pressure as MemoryPressure with upstream\'s reason and event', async () => {
    let memory = false;
    const kubelet = await start();
    kubelet.setNodePressureSource(() => ({ memory, disk: false, pid: false }));
    const cond = () => node()?.status?.conditions?.find((c: { type: string }) => c.type === 'MemoryPressure');
    await until(h.clock, 'MemoryPressure False', () => cond()?.status === 'False', 100);
    memory = true;
    await until(h.clock, 'MemoryPressure True', () => cond()?.status === 'True', 500);
    assert.equal(cond().reason, 'KubeletHasInsufficientMemory');
    await until(h.clock, 'the NodeHasInsufficientMemory event', () => reasons().includes('NodeHasInsufficientMemory'), 100);
  });

  it('reconciles an existing Node instead of creating another: same UID, default labels put right', async () => {
    const existing = api.create('nodes', undefined, { ...nodeManifest('node-a'), metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'old-name', keep: 'me' } } });
    await start();
    await until(h.clock, 'the hostname label', () => node()?.metadata.labels['kubernetes.io/hostname'] === 'node-a', 100);
    await until(h.clock, 'status', () => ready(), 100);
    assert.equal(api.list('nodes').length, 1);
    assert.equal(node()!.metadata.uid, existing.metadata.uid);
    assert.equal(node()!.metadata.labels.keep, 'me');
    assert.ok(!reasons().includes('RegisteredNode'), 'no RegisteredNode for a Node that was there');
  });

  it('renews the lease every 10 s for 40 s, and retries a 409 on it', async () => {
    await start();
    const first = await until(h.clock, 'the lease', () => lease(), 100);
    assert.equal(first.spec.leaseDurationSeconds, 40);
    assert.equal(first.spec.holderIdentity, 'node-a');
    let prev = Date.parse(first.spec.renewTime);
    for (let i = 1; i <= 3; i++) {
      await until(h.clock, `renewal ${i}`, () => Date.parse(lease()!.spec.renewTime) > prev && lease(), 50);
      const t = Date.parse(lease()!.spec.renewTime);
      // Measured from the end of the last renewal, as upstream: 10 s plus the time a renewal takes.
      assert.ok(t - prev >= 10_000 && t - prev < 11_000, `renewed ${t - prev} ms after the last one`);
      prev = t;
    }
    api.injectError({ method: 'PUT', path: leasePath, count: 1, code: 409 });
    const before = Date.parse(lease()!.spec.renewTime);
    await until(h.clock, 'a renewal after the 409', () => Date.parse(lease()!.spec.renewTime) > before + 5_000 && lease(), 500);
    const codes = api.requests.filter((r) => r.path.startsWith(leasePath) && r.method === 'PUT').map((r) => r.code);
    assert.ok(codes.includes(409), 'the 409 happened');
    assert.equal(codes.at(-1), 200);
  });

  it('at rest sends one lease renewal per 10 s and nothing else: the Node comes from a watch, an unchanged status is not re-sent', async () => {
    await start();
    await until(h.clock, 'Ready', () => ready()?.status === 'True', 100);
    await until(h.clock, 'the node watch', () => api.requests.some((r) => r.path === '/api/v1/nodes' && r.watch), 100);
    // Let start-up settle (first renewals, the status update after registration).
    for (let i = 0; i < 30; i++) { h.clock.step(1_000); await settle(3); }
    const from = api.requests.length;
    for (let i = 0; i < 60; i++) { h.clock.step(1_000); await settle(3); }
    const minute = api.requests.slice(from).filter((r) => !r.path.includes('/events'));
    assert.deepEqual(minute.map((r) => `${r.method} ${r.path}`), Array(6).fill(`PUT ${leasePath}/node-a`));
  });

  it('rides out 10 minutes without the API server: nothing crashes, the loop runs, lease and status resume', async () => {
    await start();
    await until(h.clock, 'the lease', () => lease(), 100);
    await until(h.clock, 'Ready', () => ready()?.status === 'True', 100);
    const errors: unknown[] = [];
    const onErr = (e: unknown) => errors.push(e);
    process.on('unhandledRejection', onErr);
    try {
      await api.stop();
      const down = h.clock.now();
      for (let s = 0; s < 600; s++) {
        h.clock.step(1_000);
        if (s % 10 === 0) await settle(5);
        else await new Promise((r) => setImmediate(r));
      }
      assert.ok(h.clock.now() - down >= 600_000);
      assert.equal(k!.healthChecks().find((c) => c.name === 'syncloop')?.ok, true);
      // Timers stay bounded: retries replace each other.
      assert.ok(h.clock.pendingTimers() < 40, `pending fake timers: ${h.clock.pendingTimers()}`);
      const back = h.clock.now();
      await api.restart();
      await until(h.clock, 'a lease renewal after the outage', () => Date.parse(lease()!.spec.renewTime) >= back && lease(), 500);
      await until(h.clock, 'a status heartbeat after the outage', () => Date.parse(ready()!.lastHeartbeatTime) >= back - 1_000 && ready(), 500);
      assert.equal(ready().status, 'True');
      assert.equal(api.list('nodes').length, 1);
      assert.deepEqual(errors, []);
    } finally {
      process.off('unhandledRejection', onErr);
    }
  });

  // The limit only bounds a hang: a stop that waited on the hung calls would sit out their 60 s.
  it('stops at once while the API server hangs on every call', { timeout: 20_000 }, async () => {
    await start();
    await until(h.clock, 'the lease', () => lease(), 100);
    api.latencyMs = 60_000;
    // A renewal and a status update are now in flight, hanging.
    h.clock.step(10_500);
    await settle(20);
    await k!.stop();
    k = undefined;
    api.latencyMs = 0;
  });

  it('without an API client stays standalone: no node agent, no event sink', async () => {
    delete h.deps.apiClient;
    const kl = await start();
    assert.equal(kl.nodeAgent, undefined);
    assert.equal(kl.eventSink, undefined);
    h.clock.step(60_000);
    await settle(5);
    assert.equal(api.requests.length, 0);
  });
});
