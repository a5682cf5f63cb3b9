import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import { NodeStatusManager, type NodeStatusManagerOptions } from '../../src/nodestatus/status-manager.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, startServer } from '../test-apiserver/client.js';
import { quietLogger, settle, until } from '../client/drive.js';
import { FakeSource } from './doubles.js';

describe('node status manager against the test API server (fake clock)', () => {
  let api: TestApiServer;
  let clock: FakeClock;
  let client: RestClient;
  let source: FakeSource;
  let ctl: AbortController;
  let running: Promise<void> | undefined;
  let m: NodeStatusManager;
  let events: string[];

  beforeEach(async () => {
    clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    api = await startServer({ clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock, qps: 0 });
    source = new FakeSource();
    ctl = new AbortController();
    events = [];
  });

  afterEach(async () => {
    ctl.abort();
    await running;
    client.close();
    await api.stop();
  });

  const create = (over: Partial<NodeStatusManagerOptions> = {}) => {
    m = new NodeStatusManager({
      client, clock, nodeName: 'n1', hostname: 'n1', source, kubeletVersion: 'v1.32.0-kts', kubeletPort: 10250, nodeIPs: ['10.0.0.5'],
      evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '10%' }, kubeReserved: { cpu: '500m' },
      registration: {}, jitter: 0, log: quietLogger(), recordEvent: (_t, r) => void events.push(r), ...over,
    });
    return m;
  };
  const start = async () => {
    running = m.run(ctl.signal);
    await until(clock, 'the first sync', () => m.syncs >= 1, 50);
  };
  const synced = (n: number) => until(clock, `sync ${n}`, () => m.syncs >= n, 0);
  const node = () => api.get('nodes', undefined, 'n1')!;
  const statusPatches = () => api.requests.filter((r) => r.method === 'PATCH' && r.path === '/api/v1/nodes/n1/status');
  const ready = () => node().status.conditions.find((c: any) => c.type === 'Ready');

  it('computes every 10 s, patches only on change, and reports an unchanged status after 5 min', async () => {
    create();
    await start();
    assert.equal(statusPatches().length, 0, 'the first sync finds the status it registered with');
    assert.equal(ready().status, 'True');
    const firstHeartbeat = ready().lastHeartbeatTime;
    // Unchanged: a GET every 10 s, no patch.
    for (let i = 2; i <= 5; i++) {
      clock.step(10_000);
      await synced(i);
    }
    assert.equal(statusPatches().length, 0);
    assert.equal(ready().lastHeartbeatTime, firstHeartbeat);
    // A change (a new image) is sent at the next sync.
    source.imageList = [...source.imageList, { id: 'sha256:b', repoTags: ['pause:3.9'], repoDigests: [], sizeBytes: 300_000 }];
    clock.step(10_000);
    await synced(6);
    assert.equal(statusPatches().length, 1);
    assert.deepEqual(node().status.images.map((i: any) => i.names[0]), ['busybox@sha256:aa', 'pause:3.9']);
    const reportedAt = clock.now();
    // Nothing changes: the next patch comes once 5 min passed since the last one.
    let syncs = 6;
    while (clock.now() - reportedAt < 290_000) {
      clock.step(10_000);
      await synced(++syncs);
    }
    assert.equal(statusPatches().length, 1);
    clock.step(10_000);
    await synced(++syncs);
    assert.equal(statusPatches().length, 2);
    assert.equal(Date.parse(ready().lastHeartbeatTime), Math.floor(clock.now() / 1000) * 1000);
    assert.equal(ready().lastTransitionTime, '2026-01-01T00:00:00Z', 'transition time kept');
  });

  it('reports Ready False when the runtime is down or PLEG is unhealthy, and Ready again after', async () => {
    create();
    await start();
    assert.equal(ready().status, 'True');
    source.errors = ['container runtime is down', 'PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s'];
    clock.step(10_000);
    await synced(2);
    assert.deepEqual({ s: ready().status, r: ready().reason, m: ready().message, t: ready().lastTransitionTime }, {
      s: 'False', r: 'KubeletNotReady', m: '[container runtime is down, PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s]', t: '2026-01-01T00:00:10Z',
    });
    source.errors = [];
    clock.step(10_000);
    await synced(3);
    assert.equal(ready().status, 'True');
    assert.equal(ready().lastTransitionTime, '2026-01-01T00:00:20Z');
    assert.deepEqual(events, ['NodeHasSufficientMemory', 'NodeHasNoDiskPressure', 'NodeHasSufficientPID', 'NodeNotReady', 'NodeReady']);
  });

  it('allocatable in the API is capacity less reservations and hard eviction thresholds', async () => {
    create();
    await start();
    assert.deepEqual(node().status.allocatable, { cpu: '3500m', memory: '8092Mi', 'hugepages-2Mi': '0', 'hugepages-1Gi': '0', pods: '110', 'ephemeral-storage': '90Gi' });
  });

  it('retries a failed patch with a fresh GET, up to 5 tries per sync', async () => {
    create();
    await start();
    source.errors = ['container runtime is down'];
    api.injectError({ method: 'PATCH', path: '/nodes/n1/status', count: 2, code: 409 });
    const before = api.requests.length;
    clock.step(10_000);
    await synced(2);
    assert.deepEqual(api.requests.slice(before).map((r) => `${r.method} ${r.code}`), ['GET 200', 'PATCH 409', 'GET 200', 'PATCH 409', 'GET 200', 'PATCH 200']);
    assert.equal(ready().status, 'False');
    let repeated = 0;
    api.injectError({ method: 'GET', path: '/nodes/n1', count: 5, code: 500 });
    const failed = await create({ registration: undefined, onRepeatedHeartbeatFailure: () => repeated++ }).updateNodeStatus().then(() => undefined, (e) => e);
    assert.equal(failed?.code, 'ERR_NODE_STATUS_UPDATE');
    assert.equal(repeated, 4);
  });

  it('uses the node lister\'s copy on the first try: no GET at rest', async () => {
    let cached: any;
    create({ nodeLister: () => cached });
    await start();
    cached = node();
    const before = api.requests.length;
    for (let i = 2; i <= 4; i++) {
      clock.step(10_000);
      await synced(i);
    }
    assert.equal(api.requests.length, before, 'nothing sent while nothing changed');
  });
});

describe('kubectl sees the node the status manager reports', () => {
  let api: TestApiServer;
  let dir: string;

  beforeEach(async () => {
    api = await startServer({ tls: true });
    dir = mkdtempSync(join(tmpdir(), 'kts-nodestatus-'));
  });
  afterEach(async () => {
    await api.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const kubectl = (kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], { timeout: 20_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }));
    });

  it('get nodes -o wide and describe node show the node Ready with capacity and nodeInfo', async () => {
    const clock = new FakeClock(Date.now());
    const client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, caData: api.ca!.cert, token: TOKEN }, { clock, qps: 0 });
    try {
      const m = new NodeStatusManager({
        client, clock, nodeName: 'n1', hostname: 'n1', source: new FakeSource(), kubeletVersion: 'v1.32.0-kts', kubeletPort: 10250,
        nodeIPs: ['10.0.0.5'], evictionHard: { 'nodefs.available': '10%' }, registration: { nodeLabels: { 'node-role.kubernetes.io/worker': '' } }, jitter: 0, log: quietLogger(),
      });
      const done = m.sync();
      await until(clock, 'the first sync', () => m.latest, 50);
      await done;
      await settle();
    } finally {
      client.close();
    }
    const kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, api.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'));
    const wide = await kubectl(kubeconfig, ['get', 'nodes', '-o', 'wide']);
    assert.equal(wide.code, 0, wide.stderr);
    const [head, row] = wide.stdout.trim().split('\n').map((l) => l.trim().split(/\s{2,}/));
    assert.deepEqual(head, ['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION', 'INTERNAL-IP', 'EXTERNAL-IP', 'OS-IMAGE', 'KERNEL-VERSION', 'CONTAINER-RUNTIME']);
    assert.deepEqual([row![0], row![1], row![2], row![4], row![5], row![6], row![7], row![8], row![9]],
      ['n1', 'Ready', 'worker', 'v1.32.0-kts', '10.0.0.5', '<none>', 'Debian GNU/Linux 12 (bookworm)', '6.1.0-test', 'containerd://1.7.24']);
    const d = await kubectl(kubeconfig, ['describe', 'node', 'n1']);
    assert.equal(d.code, 0, d.stderr);
    assert.match(d.stdout, /Ready\s+True\s+.*KubeletReady\s+kubelet is posting ready status/);
    assert.match(d.stdout, /MemoryPressure\s+False\s+.*KubeletHasSufficientMemory\s+kubelet has sufficient memory available/);
    assert.match(d.stdout, /Capacity:\n\s+cpu:\s+4\n\s+ephemeral-storage:\s+100Gi\n\s+hugepages-1Gi:\s+0\n\s+hugepages-2Mi:\s+0\n\s+memory:\s+8Gi\n\s+pods:\s+110\n/);
    assert.match(d.stdout, /Allocatable:\n\s+cpu:\s+4\n\s+ephemeral-storage:\s+90Gi\n/);
    assert.match(d.stdout, /Machine ID:\s+mid-1/);
    assert.match(d.stdout, /System UUID:\s+uuid-1/);
    assert.match(d.stdout, /Boot ID:\s+boot-1/);
    assert.match(d.stdout, /Container Runtime Version:\s+containerd:\/\/1.7.24/);
    assert.match(d.stdout, /Kubelet Version:\s+v1.32.0-kts/);
    assert.match(d.stdout, /InternalIP:\s+10.0.0.5\n\s+Hostname:\s+n1/);
  });
});
