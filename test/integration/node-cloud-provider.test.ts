// The Node's newer status fields and --cloud-provider=external, through the test API server
// double and kubectl: two kubelet-ts nodes on real containerd, one with --cloud-provider=external
// alone (registered with the uninitialized taint, no addresses of its own; the addresses a cloud
// controller sets are kept), one with --node-ip too (its addresses from --node-ip, and the
// provided-node-ip annotation); nodeInfo.swap from /proc/meminfo; status.features as the
// runtime reports them.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { CriClient } from '../../src/runtime/cri-client.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';

const run = promisify(execFile);
const CLOUD = 'kts-cloud-node';
const CLOUD_IP = 'kts-cloud-ip-node';
const WAIT = 60_000;

interface NodeJSON {
  metadata: { annotations?: Record<string, string> };
  spec: { taints?: { key: string; value?: string; effect: string }[] };
  status: { addresses?: { type: string; address: string }[]; nodeInfo: { swap?: { capacity: number } }; features?: unknown; conditions?: { type: string; lastHeartbeatTime: string }[] };
}

describe('node status of a current kubelet: swap, features, an external cloud provider (kubectl get node -o json)', () => {
  let rt: TestRuntime;
  let dir: string;
  let api: TestApiServer;
  let admin: string;
  const kubelets: KubeletProcess[] = [];

  const kubectl = async (...args: string[]): Promise<string> => (await run('kubectl', ['--kubeconfig', admin, ...args], { timeout: 30_000 })).stdout;
  const getNode = async (name: string): Promise<NodeJSON> => JSON.parse(await kubectl('get', 'node', name, '-o', 'json')) as NodeJSON;
  const heartbeat = (n: NodeJSON) => Date.parse(n.status.conditions?.find((c) => c.type === 'Ready')?.lastHeartbeatTime ?? '') || 0;

  before(async () => {
    rt = await ensureRuntime();
    dir = await mkdtemp(join(tmpdir(), 'kts-cloud-'));
    api = new TestApiServer({});
    await api.start();
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters']), { mode: 0o600 });
    // a status every second, sent even when unchanged: the next sync after the cloud controller's write shows quickly
    const config = join(dir, 'kubelet-config.yaml');
    await writeFile(config, 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 1s\n');
    for (const [name, extra] of [[CLOUD, []], [CLOUD_IP, ['--node-ip', '127.0.0.1']]] as const) {
      const kc = join(dir, `${name}.kubeconfig`);
      await writeFile(kc, api.kubeconfigFor(`system:node:${name}`, ['system:nodes'], 'cert'), { mode: 0o600 });
      kubelets.push(await startKubelet({ endpoint: rt.endpoint, nodeName: name, extraArgs: ['--config', config, '--kubeconfig', kc, '--cloud-provider=external', ...extra] }));
    }
  });

  after(async () => {
    for (const k of kubelets) await k.stop();
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('registers with the uninitialized taint and sets no address of its own without --node-ip', async () => {
    const node = await waitFor(async () => { const n = await getNode(CLOUD); return heartbeat(n) > 0 ? n : undefined; }, WAIT, 'the node with a Ready heartbeat');
    assert.deepEqual(node.spec.taints, [{ key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' }]);
    assert.deepEqual(node.status.addresses ?? [], [], 'the cloud controller sets them');
    assert.equal(node.metadata.annotations?.['alpha.kubernetes.io/provided-node-ip'], undefined);
  });

  it('leaves the addresses the cloud controller set', async () => {
    const cloudAddresses = [{ type: 'InternalIP', address: '10.200.0.7' }, { type: 'ExternalIP', address: '203.0.113.7' }, { type: 'Hostname', address: 'vm-7.cloud.example' }];
    await kubectl('patch', 'node', CLOUD, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { addresses: cloudAddresses } }));
    const at = Date.now();
    // two status syncs of the kubelet after the write
    const node = await waitFor(async () => { const n = await getNode(CLOUD); return heartbeat(n) >= at + 2_000 ? n : undefined; }, WAIT, 'two more heartbeats');
    assert.deepEqual(node.status.addresses, cloudAddresses);
  });

  it('with --node-ip: its addresses until the cloud controller sets them, and the provided-node-ip annotation', async () => {
    const node = await waitFor(async () => { const n = await getNode(CLOUD_IP); return n.status.addresses?.length ? n : undefined; }, WAIT, 'addresses from --node-ip');
    assert.deepEqual(node.status.addresses, [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: CLOUD_IP }]);
    assert.equal(node.metadata.annotations?.['alpha.kubernetes.io/provided-node-ip'], '127.0.0.1');
    assert.deepEqual(node.spec.taints?.map((t) => t.key), ['node.cloudprovider.kubernetes.io/uninitialized']);
  });

  it('reports nodeInfo.swap from /proc/meminfo and status.features as the runtime reports them', async () => {
    const meminfo = await readFile('/proc/meminfo', 'utf8');
    const swapTotal = Number(/^SwapTotal:\s+(\d+) kB/m.exec(meminfo)![1]) * 1024;
    const node = await getNode(CLOUD);
    assert.deepEqual(node.status.nodeInfo.swap, { capacity: swapTotal });
    const cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 10_000 });
    try {
      const features = (await cri.status()).features;
      // containerd 1.6 sends no features: upstream leaves status.features out then. A runtime
      // that sends them is reported, supplementalGroupsPolicy false: kubelet-ts cannot pass the policy on.
      if (!features) assert.equal(node.status.features, undefined);
      else assert.deepEqual(node.status.features, { supplementalGroupsPolicy: false });
    } finally {
      cri.close();
    }
  });
});
