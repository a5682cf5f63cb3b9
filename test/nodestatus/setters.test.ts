import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FakeClock } from '../../src/util/clock.js';
import {
  aggregateMessage, allocatable, allocatableReservation, hugePageResourceName, machineCapacity, MEMORY_PRESSURE, nodeAddresses, nodeImages,
  nodeStatusHasChanged, setMachineInfo, setPressureCondition, setReadyCondition,
} from '../../src/nodestatus/setters.js';
import { memTotalFromMeminfo, osImageFromOsRelease, readMachineInfo } from '../../src/nodestatus/machine-info.js';
import { RuntimeState } from '../../src/nodestatus/runtime-state.js';
import { nodeStatusPatch } from '../../src/nodestatus/node-patch.js';
import type { Node } from '../../src/nodestatus/types.js';
import { GiB, machine } from './doubles.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');

describe('capacity and allocatable', () => {
  it('capacity from the machine: cpu, memory, pods, ephemeral-storage, hugepages', () => {
    assert.deepEqual(machineCapacity(machine({ hugePages: [{ pageSizeKiB: 2048, numPages: 512 }, { pageSizeKiB: 1048576, numPages: 0 }] }), 110), {
      cpu: '4', memory: '8Gi', pods: '110', 'ephemeral-storage': '100Gi', 'hugepages-2Mi': '1Gi', 'hugepages-1Gi': '0',
    });
    assert.equal(machineCapacity(machine({ numCores: 2 }), 110, 10).pods, '20', 'podsPerCore caps pods');
    assert.equal(hugePageResourceName(1048576), 'hugepages-1Gi');
  });

  it('localStorageCapacityIsolation false: no ephemeral-storage capacity, and Ready does not ask for it (upstream)', () => {
    assert.equal(machineCapacity(machine({}), 110, 0, false)['ephemeral-storage'], undefined);
    const node: Node = { metadata: { name: 'n1' }, status: { capacity: { 'ephemeral-storage': '5Gi' } } };
    setMachineInfo(node, machine({}), { maxPods: 110, localStorageCapacityIsolation: false, reserved: () => ({}) });
    assert.equal(node.status!.capacity!['ephemeral-storage'], undefined, 'a capacity reported before is taken back');
    setReadyCondition(node, [], T0, undefined, { localStorageCapacityIsolation: false });
    assert.equal(node.status!.conditions!.find((c) => c.type === 'Ready')!.status, 'True');
    setReadyCondition(node, [], T0, undefined, {});
    assert.match(node.status!.conditions!.find((c) => c.type === 'Ready')!.message!, /missing node capacity for resources: ephemeral-storage/);
  });

  const cases: { name: string; capacity: Record<string, string>; o: { kubeReserved?: Record<string, string>; systemReserved?: Record<string, string>; evictionHard?: Record<string, string> }; want: Record<string, string> }[] = [
    {
      name: 'upstream defaults: memory less 100Mi, ephemeral-storage less 10%',
      capacity: { cpu: '4', memory: '8Gi', pods: '110', 'ephemeral-storage': '100Gi' },
      o: { evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '10%', 'nodefs.inodesFree': '5%', 'imagefs.available': '15%' } },
      want: { cpu: '4', memory: '8092Mi', pods: '110', 'ephemeral-storage': '90Gi' },
    },
    {
      name: 'kubeReserved + systemReserved + eviction add up',
      capacity: { cpu: '4', memory: '8Gi', pods: '110', 'ephemeral-storage': '100Gi' },
      o: { kubeReserved: { cpu: '100m', memory: '512Mi', 'ephemeral-storage': '1Gi' }, systemReserved: { cpu: '400m', memory: '1Gi' }, evictionHard: { 'memory.available': '512Mi' } },
      want: { cpu: '3500m', memory: '6Gi', pods: '110', 'ephemeral-storage': '99Gi' },
    },
    {
      name: 'never below zero; resources not in capacity are ignored',
      capacity: { cpu: '1', memory: '1Gi', pods: '10' },
      o: { kubeReserved: { cpu: '2', memory: '2Gi', 'example.com/gpu': '1' } },
      want: { cpu: '0', memory: '0', pods: '10' },
    },
    {
      name: 'huge pages come out of allocatable memory',
      capacity: { cpu: '2', memory: '4Gi', pods: '110', 'hugepages-2Mi': '1Gi' },
      o: { evictionHard: { 'memory.available': '100Mi' } },
      want: { cpu: '2', memory: '2972Mi', pods: '110', 'hugepages-2Mi': '1Gi' },
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(allocatable(c.capacity, allocatableReservation(c.capacity, [c.o.systemReserved, c.o.kubeReserved], c.o.evictionHard)), c.want);
    });
  }

  it('setMachineInfo fills nodeInfo ids, and a new boot id records Rebooted', () => {
    const node: Node = { metadata: { name: 'n1' }, status: { nodeInfo: { bootID: 'old' }, allocatable: { 'example.com/gone': '1' } } };
    const events: string[] = [];
    setMachineInfo(node, machine(), { maxPods: 110, reserved: () => ({}), recordEvent: (t, r, m) => events.push(`${t} ${r} ${m}`) });
    assert.equal(node.status!.nodeInfo!.machineID, 'mid-1');
    assert.equal(node.status!.nodeInfo!.systemUUID, 'uuid-1');
    assert.equal(node.status!.nodeInfo!.bootID, 'boot-1');
    assert.deepEqual(events, ['Warning Rebooted Node n1 has been rebooted, boot id: boot-1']);
    assert.equal(node.status!.allocatable!['example.com/gone'], undefined, 'extended resources gone from capacity leave allocatable');
  });
});

describe('addresses', () => {
  const cases: { name: string; in: Parameters<typeof nodeAddresses>[0]; want: string[] }[] = [
    { name: '--node-ip', in: { nodeIPs: ['10.0.0.7'], hostname: 'h1', candidates: ['10.9.9.9'] }, want: ['InternalIP 10.0.0.7', 'Hostname h1'] },
    { name: 'dual-stack --node-ip', in: { nodeIPs: ['10.0.0.7', 'fd00::7'], hostname: 'h1' }, want: ['InternalIP 10.0.0.7', 'InternalIP fd00::7', 'Hostname h1'] },
    { name: 'hostname that is an IP', in: { nodeIPs: [], hostname: '192.168.1.2' }, want: ['InternalIP 192.168.1.2', 'Hostname 192.168.1.2'] },
    { name: 'IPv4 candidates first', in: { nodeIPs: [], hostname: 'h1', candidates: ['fd00::1', '10.1.1.1'] }, want: ['InternalIP 10.1.1.1', 'Hostname h1'] },
    { name: '"::" prefers IPv6', in: { nodeIPs: ['::'], hostname: 'h1', candidates: ['10.1.1.1', 'fd00::1'] }, want: ['InternalIP fd00::1', 'Hostname h1'] },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(nodeAddresses(c.in).map((a) => `${a.type} ${a.address}`), c.want));
  it('no address at all is an error naming the node', () => {
    assert.throws(() => nodeAddresses({ nodeIPs: [], hostname: 'h1', candidates: [] }), (e: any) => e.code === 'ERR_NODE_STATUS' && /h1/.test(e.message));
  });
});

describe('conditions', () => {
  const clock = new FakeClock(T0);
  const capacity = { cpu: '1', memory: '1Gi', pods: '110', 'ephemeral-storage': '1Gi' };
  const ready = (errors: string[], node: Node = { metadata: { name: 'n1' }, status: { capacity } }, now = T0) => {
    setReadyCondition(node, errors, now);
    return node.status!.conditions!.find((c) => c.type === 'Ready')!;
  };

  it('Ready True with upstream reason and message', () => {
    assert.deepEqual(ready([]), { type: 'Ready', status: 'True', lastHeartbeatTime: '2026-01-01T00:00:00Z', lastTransitionTime: '2026-01-01T00:00:00Z', reason: 'KubeletReady', message: 'kubelet is posting ready status' });
  });

  const rs = new RuntimeState(clock);
  const notReady: { name: string; setup: () => string[]; message: string }[] = [
    { name: 'no runtime status yet', setup: () => new RuntimeState(clock).readyErrors(), message: 'container runtime status check may not have completed yet' },
    {
      name: 'runtime down (last good status older than 30 s)',
      setup: () => { rs.observeRuntimeStatus([{ type: 'RuntimeReady', status: true, reason: '', message: '' }, { type: 'NetworkReady', status: true, reason: '', message: '' }]); clock.step(30_000); return rs.readyErrors(); },
      message: 'container runtime is down',
    },
    {
      name: 'PLEG unhealthy',
      setup: () => {
        const s = new RuntimeState(clock);
        s.addHealthCheck({ name: 'PLEG', check: () => ({ ok: false, message: 'pleg was last seen active 3m0s ago; threshold is 3m0s' }) });
        s.observeRuntimeStatus([{ type: 'RuntimeReady', status: true, reason: '', message: '' }, { type: 'NetworkReady', status: true, reason: '', message: '' }]);
        return s.readyErrors();
      },
      message: 'PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s',
    },
    {
      name: 'network not ready (CRI Status NetworkReady false)',
      setup: () => {
        const s = new RuntimeState(clock);
        s.observeRuntimeStatus([{ type: 'RuntimeReady', status: true, reason: '', message: '' }, { type: 'NetworkReady', status: false, reason: 'NetworkPluginNotReady', message: 'Network plugin returns error: cni plugin not initialized' }]);
        return s.readyErrors();
      },
      message: 'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized',
    },
    {
      name: 'runtime not ready (CRI Status RuntimeReady false)',
      setup: () => {
        const s = new RuntimeState(clock);
        s.observeRuntimeStatus([{ type: 'RuntimeReady', status: true, reason: '', message: '' }, { type: 'NetworkReady', status: true, reason: '', message: '' }]);
        s.observeRuntimeStatus([{ type: 'RuntimeReady', status: false, reason: 'Broken', message: 'shim gone' }, { type: 'NetworkReady', status: true, reason: '', message: '' }]);
        return s.readyErrors();
      },
      message: 'container runtime not ready: RuntimeReady=false reason:Broken message:shim gone',
    },
    {
      name: 'runtime down and PLEG unhealthy together',
      setup: () => ['container runtime is down', 'PLEG is not healthy: pleg has yet to be successful'],
      message: '[container runtime is down, PLEG is not healthy: pleg has yet to be successful]',
    },
  ];
  for (const c of notReady) {
    it(`Ready False: ${c.name}`, () => {
      const r = ready(c.setup());
      assert.equal(r.status, 'False');
      assert.equal(r.reason, 'KubeletNotReady');
      assert.equal(r.message, c.message);
    });
  }

  it('missing capacity keeps the node NotReady', () => {
    const r = ready([], { metadata: { name: 'n1' }, status: { capacity: { cpu: '1', pods: '1' } } });
    assert.equal(r.message, 'missing node capacity for resources: memory, ephemeral-storage');
  });

  it('transition time kept while the status holds, moved when it flips (with NodeReady/NodeNotReady events)', () => {
    const node: Node = { metadata: { name: 'n1' }, status: { capacity } };
    const events: string[] = [];
    const rec = (_t: string, r: string) => void events.push(r);
    setReadyCondition(node, [], T0, rec);
    setReadyCondition(node, [], T0 + 10_000, rec);
    let c = node.status!.conditions![0]!;
    assert.equal(c.lastTransitionTime, '2026-01-01T00:00:00Z');
    assert.equal(c.lastHeartbeatTime, '2026-01-01T00:00:10Z');
    setReadyCondition(node, ['container runtime is down'], T0 + 20_000, rec);
    c = node.status!.conditions![0]!;
    assert.equal(c.lastTransitionTime, '2026-01-01T00:00:20Z');
    setReadyCondition(node, [], T0 + 30_000, rec);
    assert.deepEqual(events, ['NodeNotReady', 'NodeReady']);
  });

  it('pressure conditions start False with upstream reasons and keep their transition time', () => {
    const node: Node = { metadata: { name: 'n1' } };
    setPressureCondition(node, MEMORY_PRESSURE, false, T0);
    setPressureCondition(node, MEMORY_PRESSURE, false, T0 + 10_000);
    assert.deepEqual(node.status!.conditions, [{ type: 'MemoryPressure', status: 'False', lastHeartbeatTime: '2026-01-01T00:00:10Z', lastTransitionTime: '2026-01-01T00:00:00Z', reason: 'KubeletHasSufficientMemory', message: 'kubelet has sufficient memory available' }]);
    setPressureCondition(node, MEMORY_PRESSURE, true, T0 + 20_000);
    assert.equal(node.status!.conditions![0]!.reason, 'KubeletHasInsufficientMemory');
    assert.equal(node.status!.conditions![0]!.lastTransitionTime, '2026-01-01T00:00:20Z');
  });

  it('aggregates like errors.NewAggregate', () => {
    assert.equal(aggregateMessage(['a']), 'a');
    assert.equal(aggregateMessage(['a', 'b', 'a']), '[a, b]');
  });
});

describe('images, change detection and the patch', () => {
  it('images: biggest first, capped at nodeStatusMaxImages, at most 5 names, digests first', () => {
    const imgs = [
      { id: 'a', repoTags: ['small:1'], repoDigests: [], sizeBytes: 10 },
      { id: 'b', repoTags: ['t1', 't2', 't3', 't4'], repoDigests: ['d1', 'd2'], sizeBytes: 300 },
      { id: 'c', repoTags: ['mid:1'], repoDigests: [], sizeBytes: 200 },
    ];
    assert.deepEqual(nodeImages(imgs, 2), [{ names: ['d1', 'd2', 't1', 't2', 't3'], sizeBytes: 300 }, { names: ['mid:1'], sizeBytes: 200 }]);
    assert.equal(nodeImages(imgs, -1)!.length, 3);
    assert.equal(nodeImages(imgs, 0), undefined);
  });

  it('heartbeats alone are no change; quantities compare by value', () => {
    const a = { capacity: { memory: '1Gi' }, conditions: [{ type: 'Ready', status: 'True' as const, lastHeartbeatTime: 'x', lastTransitionTime: 't' }] };
    const b = { capacity: { memory: '1073741824' }, conditions: [{ type: 'Ready', status: 'True' as const, lastHeartbeatTime: 'y', lastTransitionTime: 't' }], images: [] };
    assert.equal(nodeStatusHasChanged(a, b), false);
    assert.equal(nodeStatusHasChanged(a, { ...b, capacity: { memory: '2Gi' } }), true);
    assert.equal(nodeStatusHasChanged(a, { ...b, conditions: [{ ...b.conditions[0]!, status: 'False' }] }), true);
  });

  it('the status patch: conditions by type with their order, changed addresses replaced, spec left out', () => {
    const orig: Node = {
      metadata: { name: 'n1', resourceVersion: '5' }, spec: { podCIDR: '10.0.0.0/24' },
      status: { conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: 'h1' }], addresses: [{ type: 'InternalIP', address: '10.0.0.1' }], capacity: { cpu: '2', 'example.com/x': '1' } },
    };
    const next: Node = structuredClone(orig);
    next.spec = { unschedulable: true };
    next.status!.conditions![0]!.lastHeartbeatTime = 'h2';
    next.status!.addresses = [{ type: 'InternalIP', address: '10.0.0.2' }];
    delete next.status!.capacity!['example.com/x'];
    assert.deepEqual(nodeStatusPatch(orig, next), {
      status: {
        '$setElementOrder/conditions': [{ type: 'Ready' }], conditions: [{ type: 'Ready', lastHeartbeatTime: 'h2' }],
        addresses: [{ type: 'InternalIP', address: '10.0.0.2' }, { $patch: 'replace' }],
        capacity: { 'example.com/x': null },
      },
    });
    assert.equal(nodeStatusPatch(orig, structuredClone(orig)), undefined);
  });
});

describe('machine facts', () => {
  it('PRETTY_NAME and MemTotal', () => {
    assert.equal(osImageFromOsRelease('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'), 'Debian GNU/Linux 12 (bookworm)');
    assert.equal(osImageFromOsRelease(undefined), 'Linux');
    assert.equal(memTotalFromMeminfo('MemTotal:        8039752 kB\nMemFree: 1 kB\n'), 8039752 * 1024);
  });

  it('reads ids, huge pages and the root dir filesystem under a root', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kts-machine-'));
    try {
      const put = (p: string, text: string) => { mkdirSync(join(root, p, '..'), { recursive: true }); writeFileSync(join(root, p), text); };
      put('etc/machine-id', 'abc123\n');
      put('proc/sys/kernel/random/boot_id', 'boot-xyz\n');
      put('etc/os-release', 'PRETTY_NAME="Test OS 1"\n');
      put('proc/meminfo', 'MemTotal:        4194304 kB\n');
      put('sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages', '16\n');
      const m = await readMachineInfo({ root, rootDir: root });
      assert.equal(m.machineID, 'abc123');
      assert.equal(m.bootID, 'boot-xyz');
      assert.equal(m.systemUUID, '', 'product_uuid unreadable: empty');
      assert.equal(m.osImage, 'Test OS 1');
      assert.equal(m.memoryCapacityBytes, 4 * GiB);
      assert.deepEqual(m.hugePages, [{ pageSizeKiB: 2048, numPages: 16 }]);
      assert.ok(m.rootfsCapacityBytes! > 0);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
