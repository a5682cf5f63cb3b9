import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RestClient } from '../../src/client/rest.js';
import { FakeClock } from '../../src/util/clock.js';
import { NodeStatusManager, type NodeStatusManagerOptions } from '../../src/nodestatus/status-manager.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, startServer } from '../test-apiserver/client.js';
import { quietLogger, until } from '../client/drive.js';
import { FakeSource } from './doubles.js';
import { BUILD_ANNOTATION, KUBELET_TS_BUILD } from '../../src/version.js';

/** A fake clock that also records every wait asked of it. */
class RecordingClock extends FakeClock {
  readonly waits: number[] = [];

  override setTimeout(fn: () => void, ms: number) {
    this.waits.push(ms);
    return super.setTimeout(fn, ms);
  }
}

describe('node registration against the test API server (fake clock)', () => {
  let api: TestApiServer;
  let clock: RecordingClock;
  let client: RestClient;
  let source: FakeSource;

  beforeEach(async () => {
    clock = new RecordingClock(Date.parse('2026-01-01T00:00:00Z'));
    api = await startServer({ clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock, qps: 0 });
    source = new FakeSource();
  });

  afterEach(async () => {
    client.close();
    await api.stop();
  });

  const manager = (over: Partial<NodeStatusManagerOptions> = {}) => new NodeStatusManager({
    client, clock, nodeName: 'n1', hostname: 'host-1', source, kubeletVersion: 'v1.32.0-kts', kubeletPort: 10250, nodeIPs: ['10.0.0.5'],
    registration: { nodeLabels: { 'node-role.kubernetes.io/worker': '', tier: 'edge' }, registerWithTaints: [{ key: 'dedicated', value: 'edge', effect: 'NoSchedule' }] },
    jitter: 0, log: quietLogger(), ...over,
  });
  const registerRequests = () => api.requests.filter((r) => r.path.startsWith('/api/v1/nodes')).map((r) => `${r.method} ${r.path} ${r.code}`);

  it('creates the Node with upstream labels, taints, annotation and a full status', async () => {
    const m = manager();
    const done = m.registration!.register();
    const node = await until(clock, 'the node', () => api.get('nodes', undefined, 'n1'));
    await done;
    assert.deepEqual(node.metadata.labels, {
      'kubernetes.io/hostname': 'host-1', 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': node.metadata.labels['kubernetes.io/arch'],
      'beta.kubernetes.io/os': 'linux', 'beta.kubernetes.io/arch': node.metadata.labels['kubernetes.io/arch'],
      'node-role.kubernetes.io/worker': '', tier: 'edge',
    });
    assert.match(node.metadata.labels['kubernetes.io/arch'], /^(amd64|arm64|arm|386|ppc64le|s390x|riscv64)$/);
    assert.equal(node.metadata.labels['node.kubernetes.io/instance-type'], undefined, 'no instance type when unknown');
    assert.deepEqual(node.metadata.annotations, { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true', [BUILD_ANNOTATION]: KUBELET_TS_BUILD });
    assert.deepEqual(node.spec.taints, [{ key: 'dedicated', value: 'edge', effect: 'NoSchedule' }]);
    assert.deepEqual(node.status.capacity, { cpu: '4', memory: '8Gi', 'hugepages-2Mi': '0', 'hugepages-1Gi': '0', pods: '110', 'ephemeral-storage': '100Gi' });
    assert.deepEqual(node.status.conditions.map((c: any) => `${c.type}=${c.status} ${c.reason}`),
      ['MemoryPressure=False KubeletHasSufficientMemory', 'DiskPressure=False KubeletHasNoDiskPressure', 'PIDPressure=False KubeletHasSufficientPID', 'Ready=True KubeletReady']);
    assert.deepEqual(node.status.daemonEndpoints, { kubeletEndpoint: { Port: 10250 } });
    assert.equal(node.status.nodeInfo.containerRuntimeVersion, 'containerd://1.7.24');
    assert.deepEqual(registerRequests(), ['POST /api/v1/nodes 201']);
  });

  it('sets the instance-type labels only where the instance type is known', async () => {
    const m = manager({ registration: { instanceType: 'm5.large', registerSchedulable: false } });
    const node = await m.initialNode();
    assert.equal(node.metadata.labels!['node.kubernetes.io/instance-type'], 'm5.large');
    assert.equal(node.metadata.labels!['beta.kubernetes.io/instance-type'], 'm5.large');
    assert.equal(node.spec!.unschedulable, true);
    assert.deepEqual(node.spec!.taints, [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }]);
  });

  it('reconciles an existing Node instead of duplicating it', async () => {
    const old = api.create('nodes', undefined, {
      metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'old-host', 'kubernetes.io/os': 'linux', 'custom': 'kept' }, annotations: { mine: 'kept' } },
      spec: { podCIDR: '10.244.0.0/24' },
      status: {
        capacity: { cpu: '4', memory: '8Gi', pods: '110', 'example.com/gpu': '2', 'hugepages-2Mi': '1Gi', 'hugepages-32Mi': '0' },
        allocatable: { cpu: '4', memory: '7Gi', pods: '110', 'example.com/gpu': '2', 'hugepages-2Mi': '1Gi', 'hugepages-32Mi': '0' },
      },
    });
    const m = manager();
    const done = m.registration!.register();
    await until(clock, 'registration', () => m.registration!.registered);
    await done;
    assert.equal(api.list('nodes').length, 1);
    const node = api.get('nodes', undefined, 'n1')!;
    assert.equal(node.metadata.uid, old.metadata.uid, 'the same Node, not a new one');
    assert.equal(node.metadata.labels['kubernetes.io/hostname'], 'host-1');
    assert.equal(node.metadata.labels.custom, 'kept');
    assert.equal(node.metadata.labels['kubernetes.io/arch'], node.metadata.labels['beta.kubernetes.io/arch']);
    assert.deepEqual(node.metadata.annotations, { mine: 'kept', 'volumes.kubernetes.io/controller-managed-attach-detach': 'true', [BUILD_ANNOTATION]: KUBELET_TS_BUILD });
    assert.equal(node.spec.podCIDR, '10.244.0.0/24');
    assert.equal(node.status.capacity['example.com/gpu'], '0', 'extended resources zeroed until a device plugin says otherwise');
    assert.equal(node.status.allocatable['example.com/gpu'], '0');
    assert.equal(node.status.capacity['hugepages-2Mi'], '0', 'huge page pools as the machine has them now');
    assert.equal(node.status.capacity['hugepages-1Gi'], '0');
    assert.equal(node.status.capacity['hugepages-32Mi'], undefined, 'a size the machine no longer has is removed');
    assert.deepEqual(registerRequests(), ['POST /api/v1/nodes 409', 'GET /api/v1/nodes/n1 200', 'PATCH /api/v1/nodes/n1/status 200']);
    // Registered once: later syncs only update the status.
    await m.sync();
    assert.equal(registerRequests().filter((r) => r.startsWith('POST')).length, 1);
  });

  it('retries through 500s with backoff 100 ms doubling (capped at 7 s)', async () => {
    api.injectError({ method: 'POST', path: '/api/v1/nodes', count: 7, code: 500 });
    const m = manager();
    const done = m.registration!.register();
    await until(clock, 'registration', () => m.registration!.registered, 50);
    await done;
    assert.deepEqual(registerRequests(), [...Array(7).fill('POST /api/v1/nodes 500'), 'POST /api/v1/nodes 201']);
    assert.deepEqual(clock.waits, [100, 200, 400, 800, 1600, 3200, 6400, 7000]);
    assert.equal(m.registration!.attempts, 8);
  });
});
