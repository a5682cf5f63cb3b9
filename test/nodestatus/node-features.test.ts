// status.features, nodeInfo.swap and --cloud-provider=external, as upstream's NodeFeatures,
// MachineInfo and NodeAddress setters and initialNode compute them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RestClient } from '../../src/client/rest.js';
import { parseKubeletFlags } from '../../src/config/index.js';
import { readMachineInfo } from '../../src/nodestatus/machine-info.js';
import {
  ANNOTATION_PROVIDED_NODE_IP, externalCloudProviderAddresses, setNodeFeatures, setSwapStatus, swapTotalFromMeminfo, TAINT_EXTERNAL_CLOUD_PROVIDER,
} from '../../src/nodestatus/node-features.js';
import { initialNode } from '../../src/nodestatus/registration.js';
import { NodeStatusManager, type NodeStatusManagerOptions } from '../../src/nodestatus/status-manager.js';
import type { Node } from '../../src/nodestatus/types.js';
import { FakeClock } from '../../src/util/clock.js';
import { quietLogger } from '../client/drive.js';
import { FakeSource, machine } from './doubles.js';

test('setNodeFeatures: present only when the runtime sent features; true never claimed while kubelet-ts cannot pass the policy on', () => {
  const node: Node = { metadata: { name: 'n1' }, status: {} };
  setNodeFeatures(node, null);
  assert.equal('features' in node.status!, false, 'a runtime sending no features (containerd 1.6)');
  setNodeFeatures(node, { supplementalGroupsPolicy: false });
  assert.deepEqual(node.status!.features, { supplementalGroupsPolicy: false });
  setNodeFeatures(node, { supplementalGroupsPolicy: true });
  assert.deepEqual(node.status!.features, { supplementalGroupsPolicy: false }, 'Strict is refused at admission here');
  setNodeFeatures(node, undefined);
  assert.equal('features' in node.status!, false);
  const off: Node = { metadata: { name: 'n1' }, status: { features: { kept: 1 } } };
  setNodeFeatures(off, { supplementalGroupsPolicy: false }, false);
  assert.deepEqual(off.status!.features, { kept: 1 }, 'gate off: left alone');
});

test('nodeInfo.swap: SwapTotal of /proc/meminfo in bytes, 0 without swap; gate off leaves it out', async () => {
  assert.equal(swapTotalFromMeminfo('MemTotal: 100 kB\nSwapTotal:       2097148 kB\nSwapFree: 1 kB\n'), 2097148 * 1024);
  assert.equal(swapTotalFromMeminfo('MemTotal: 100 kB\nSwapTotal:             0 kB\n'), 0);
  assert.equal(swapTotalFromMeminfo('MemTotal: 100 kB\n'), 0);
  const root = await mkdtemp(join(tmpdir(), 'kts-swap-'));
  try {
    await mkdir(join(root, 'proc'), { recursive: true });
    await writeFile(join(root, 'proc/meminfo'), 'MemTotal:       8000000 kB\nSwapTotal:       1048572 kB\n');
    const m = await readMachineInfo({ root, rootDir: root });
    assert.equal(m.swapCapacityBytes, 1048572 * 1024);
    const node: Node = { metadata: { name: 'n1' } };
    setSwapStatus(node, m.swapCapacityBytes);
    assert.deepEqual((node.status!.nodeInfo as Record<string, unknown>).swap, { capacity: 1048572 * 1024 });
    const off: Node = { metadata: { name: 'n1' } };
    setSwapStatus(off, m.swapCapacityBytes, false);
    assert.equal(off.status, undefined);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('external cloud provider: provided-node-ip annotation from --node-ip; the cloud controller\'s addresses kept; none set without --node-ip', () => {
  const node: Node = { metadata: { name: 'n1' }, status: {} };
  assert.equal(externalCloudProviderAddresses(node, { externalCloudProvider: true, nodeIPs: [] }), true, 'no --node-ip: wait for the cloud controller');
  assert.equal(node.metadata.annotations?.[ANNOTATION_PROVIDED_NODE_IP], undefined);
  assert.equal(externalCloudProviderAddresses(node, { externalCloudProvider: true, nodeIPs: ['0.0.0.0'] }), true, 'an unspecified IP is no --node-ip');
  assert.equal(externalCloudProviderAddresses(node, { externalCloudProvider: true, nodeIPs: ['10.0.0.5', 'fd00::5'] }), false, 'no addresses yet: the kubelet sets them from --node-ip');
  assert.equal(node.metadata.annotations![ANNOTATION_PROVIDED_NODE_IP], '10.0.0.5,fd00::5');
  node.status!.addresses = [{ type: 'InternalIP', address: '10.9.9.9' }];
  assert.equal(externalCloudProviderAddresses(node, { externalCloudProvider: true, nodeIPs: ['10.0.0.5'] }), true, 'addresses present: the cloud controller\'s');
  assert.equal(node.metadata.annotations![ANNOTATION_PROVIDED_NODE_IP], '10.0.0.5');
  assert.equal(externalCloudProviderAddresses(node, { externalCloudProvider: false, nodeIPs: ['10.0.0.5'] }), false);
  assert.equal(ANNOTATION_PROVIDED_NODE_IP in node.metadata.annotations!, false, 'a stale annotation goes');
});

test('registration with --cloud-provider=external carries the uninitialized taint after the others', () => {
  const node = initialNode({ nodeName: 'n1', hostname: 'n1', registerWithTaints: [{ key: 'a', value: 'b', effect: 'NoExecute' }], externalCloudProvider: true });
  assert.deepEqual(node.spec!.taints, [{ key: 'a', value: 'b', effect: 'NoExecute' }, { key: TAINT_EXTERNAL_CLOUD_PROVIDER, value: 'true', effect: 'NoSchedule' }]);
  assert.equal(initialNode({ nodeName: 'n1', hostname: 'n1' }).spec!.taints, undefined);
});

test('--cloud-provider: external or empty; anything else is refused naming the flag', () => {
  assert.equal(parseKubeletFlags(['--cloud-provider=external']).flags.cloudProvider, 'external');
  assert.equal(parseKubeletFlags(['--cloud-provider', '']).flags.cloudProvider, '');
  assert.throws(() => parseKubeletFlags(['--cloud-provider=gce']), /--cloud-provider.*invalid argument "gce": only "external"/);
});

test('the node status manager: external cloud provider without --node-ip sets no address, features and swap from the source', async () => {
  const source = new FakeSource() as FakeSource & { runtimeFeatures(): { supplementalGroupsPolicy: boolean } | null };
  source.info = machine({ swapCapacityBytes: 4096 });
  source.runtimeFeatures = () => ({ supplementalGroupsPolicy: false });
  const client = new RestClient({ server: 'https://127.0.0.1:1' } as ConstructorParameters<typeof RestClient>[0], { clock: new FakeClock(), qps: 0 });
  const make = (over: Partial<NodeStatusManagerOptions>) => new NodeStatusManager({ client, clock: new FakeClock(), nodeName: 'n1', hostname: 'n1', source, kubeletVersion: 'v0', kubeletPort: 10250, nodeIPs: ['10.0.0.5'], ipCandidates: async () => ['10.0.0.7'], log: quietLogger(), ...over });
  try {
    const node: Node = { metadata: { name: 'n1' } };
    await make({ nodeIPs: [], externalCloudProvider: { nodeIPs: [] } }).setNodeStatus(node);
    assert.equal(node.status!.addresses, undefined, 'the cloud controller sets them');
    assert.deepEqual(node.status!.features, { supplementalGroupsPolicy: false });
    assert.deepEqual((node.status!.nodeInfo as Record<string, unknown>).swap, { capacity: 4096 });
    const withIP: Node = { metadata: { name: 'n1' } };
    await make({ externalCloudProvider: { nodeIPs: ['10.0.0.5'] } }).setNodeStatus(withIP);
    assert.deepEqual(withIP.status!.addresses, [{ type: 'InternalIP', address: '10.0.0.5' }, { type: 'Hostname', address: 'n1' }]);
    assert.equal(withIP.metadata.annotations![ANNOTATION_PROVIDED_NODE_IP], '10.0.0.5');
    const plain: Node = { metadata: { name: 'n1' } };
    await make({ nodeIPs: [] }).setNodeStatus(plain);
    assert.deepEqual(plain.status!.addresses, [{ type: 'InternalIP', address: '10.0.0.7' }, { type: 'Hostname', address: 'n1' }], 'no cloud provider: found as before');
  } finally {
    client.close();
  }
});
