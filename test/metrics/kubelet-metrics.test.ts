// The kubelet families with upstream's names, labels and buckets; the image size buckets and
// working-pods combinations as upstream sets them; the pod start SLI without the pulls; and
// the cAdvisor page rendered from a synthetic cgroup tree (figures, labels, device names,
// the sandbox's network namespace).
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { cgroupRefFor } from '../../src/cgroups/index.js';
import { Registry } from '../../src/metrics/registry.js';
import { grpcCodeName, imageSizeBucket, kubeletMetrics, runtimeOperationsObserver, setWorkingPods } from '../../src/metrics/kubelet-metrics.js';
import { PodStartTracker } from '../../src/kubelet/pod-start-metrics.js';
import { collectCadvisorMetrics, parseNetDev } from '../../src/stats/cadvisor-metrics.js';
import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import type { Pod } from '../../src/api/types.js';
import { generateCgroupTree } from '../fixtures/cgroup-tree.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

describe('kubelet metrics families', () => {
  it('runtime operations: upstream\'s operation_type names, ExponentialBuckets(.005, 2.5, 14), errors and started pods from RunPodSandbox', () => {
    const r = new Registry();
    const m = kubeletMetrics(r);
    const observe = runtimeOperationsObserver(m);
    observe('RunPodSandbox', 0.2);
    observe('RunPodSandbox', 0.1, Object.assign(new Error('x'), { code: 4 }));
    observe('ListContainers', 0.001);
    const text = r.metricsText();
    assert.match(text, /^# HELP kubelet_runtime_operations_duration_seconds \[ALPHA\] Duration in seconds of runtime operations\. Broken down by operation type\.$/m);
    assert.match(text, /^kubelet_runtime_operations_total\{operation_type="run_podsandbox"\} 2$/m);
    assert.match(text, /^kubelet_runtime_operations_total\{operation_type="list_containers"\} 1$/m);
    assert.match(text, /^kubelet_runtime_operations_errors_total\{operation_type="run_podsandbox"\} 1$/m);
    assert.match(text, /^kubelet_started_pods_total 2$/m);
    assert.match(text, /^kubelet_started_pods_errors_total 1$/m);
    const les = [...text.matchAll(/^kubelet_runtime_operations_duration_seconds_bucket\{operation_type="list_containers",le="([^"]+)"\}/gm)].map((x) => x[1]);
    assert.equal(les.length, 15);
    assert.deepEqual(les.slice(0, 3), ['0.005', '0.0125', '0.03125']);
    assert.equal(les[14], '+Inf');
    assert.equal(grpcCodeName({ code: 4 }), 'DeadlineExceeded');
    assert.equal(grpcCodeName(new Error('plain')), 'Unknown');
  });

  it('the same families are returned for a registry; pod start buckets as upstream', () => {
    const r = new Registry();
    assert.equal(kubeletMetrics(r), kubeletMetrics(r));
    kubeletMetrics(r).podStartDuration.observe(1.5);
    const text = r.metricsText();
    const les = [...text.matchAll(/^kubelet_pod_start_duration_seconds_bucket\{le="([^"]+)"\}/gm)].map((x) => x[1]);
    assert.deepEqual(les, ['0.5', '1', '2', '3', '4', '5', '6', '8', '10', '20', '30', '45', '60', '120', '180', '240', '300', '360', '480', '600', '900', '1200', '1800', '2700', '3600', '+Inf']);
    assert.match(text, /^kubelet_pod_start_duration_seconds_count 1$/m);
  });

  it('image size buckets as upstream\'s GetImageSizeBucket', () => {
    assert.equal(imageSizeBucket(0), 'N/A');
    assert.equal(imageSizeBucket(5 * MiB), '0-10MB');
    assert.equal(imageSizeBucket(15 * MiB), '10MB-100MB');
    assert.equal(imageSizeBucket(500 * MiB), '100MB-500MB');
    assert.equal(imageSizeBucket(15 * GiB), '10GB-20GB');
    assert.equal(imageSizeBucket(200 * GiB), 'GT100GB');
  });

  it('kubelet_working_pods sets every valid combination, zero included; runtime-only pods are static "unknown"', () => {
    const r = new Registry();
    const m = kubeletMetrics(r);
    setWorkingPods(m, [
      { lifecycle: 'sync', config: 'desired', static: true },
      { lifecycle: 'sync', config: 'desired', static: false },
      { lifecycle: 'sync', config: 'desired', static: false },
      { lifecycle: 'terminating', config: 'orphan', static: false },
      { lifecycle: 'terminated', config: 'runtime_only', static: false },
    ]);
    const text = r.metricsText();
    assert.equal([...text.matchAll(/^kubelet_working_pods\{/gm)].length, 15);
    assert.match(text, /^kubelet_working_pods\{config="desired",lifecycle="sync",static=""\} 2$/m);
    assert.match(text, /^kubelet_working_pods\{config="desired",lifecycle="sync",static="true"\} 1$/m);
    assert.match(text, /^kubelet_working_pods\{config="orphan",lifecycle="terminating",static=""\} 1$/m);
    assert.match(text, /^kubelet_working_pods\{config="runtime_only",lifecycle="terminated",static="unknown"\} 1$/m);
    assert.match(text, /^kubelet_working_pods\{config="orphan",lifecycle="sync",static="true"\} 0$/m);
  });

  it('the pod start SLI leaves the time spent pulling out; each is recorded once per pod', () => {
    let now = Date.parse('2026-01-01T00:00:10Z');
    const r = new Registry();
    const m = kubeletMetrics(r);
    const t = new PodStartTracker(m, { now: () => now } as never);
    const pod = {
      metadata: { uid: 'u1', name: 'p', namespace: 'ns', creationTimestamp: '2026-01-01T00:00:00Z', annotations: { 'kubernetes.io/config.seen': '2026-01-01T00:00:02Z' } },
      spec: { containers: [{ name: 'c', image: 'i' }] },
    } as unknown as Pod;
    t.seen(pod);
    t.pulling(pod, 'start');
    now += 4000;
    t.pulling(pod, 'end');
    now += 1000;
    const running = { phase: 'Running', containerStatuses: [{ name: 'c', state: { running: { startedAt: '' } } }] } as never;
    t.observe(pod, running);
    t.observe(pod, running);
    const text = r.metricsText();
    // created at 0 s, running at 15 s, 4 s pulling: 11 s; first seen at 2 s: 13 s
    assert.match(text, /^kubelet_pod_start_sli_duration_seconds_sum 11$/m);
    assert.match(text, /^kubelet_pod_start_sli_duration_seconds_count 1$/m);
    assert.match(text, /^kubelet_pod_start_duration_seconds_sum 13$/m);
    assert.match(text, /^kubelet_pod_start_duration_seconds_count 1$/m);
  });
});

describe('/metrics/cadvisor from the cgroups', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kts-cadvisor-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('parses /proc/<pid>/net/dev', () => {
    const text = 'Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n' +
      '    lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0\n' +
      '  eth0:    5000      40    1    2    0     0          0         0     3000      30    3    4    0     0       0          0\n';
    assert.deepEqual(parseNetDev(text)[1], { iface: 'eth0', rxBytes: 5000, rxPackets: 40, rxErrs: 1, rxDrop: 2, txBytes: 3000, txPackets: 30, txErrs: 3, txDrop: 4 });
  });

  it('renders a pod, its container and sandbox with cAdvisor\'s labels, figures and device names', async () => {
    const tree = generateCgroupTree({ root: join(dir, 'cg'), version: 1, containers: 2, seed: 7 });
    const [c0] = tree.cgroups;
    const podPath = posix.dirname(c0!.cgroupPath);
    const containerId = posix.basename(c0!.cgroupPath);
    const sandboxId = posix.basename(tree.cgroups[1]!.cgroupPath);
    const uid = /pod([0-9a-f-]+)$/.exec(podPath)![1]!;
    // the sandbox's process and its network namespace; block device names
    const proc = join(dir, 'proc');
    mkdirSync(join(proc, '4242', 'net'), { recursive: true });
    writeFileSync(join(proc, '4242', 'status'), 'Name:\tpause\nThreads:\t1\n');
    writeFileSync(join(proc, '4242', 'net', 'dev'), 'h1\nh2\n  eth0: 7 8 0 0 0 0 0 0 9 10 0 0 0 0 0 0\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n');
    const sandboxRef = cgroupRefFor(tree.mounts, `${podPath}/${sandboxId}`);
    for (const d of [sandboxRef.version === 1 ? sandboxRef.pids : undefined, sandboxRef.version === 1 ? sandboxRef.cpuacct : undefined]) {
      if (d) writeFileSync(join(d, 'cgroup.procs'), '4242\n');
    }
    // the pod cgroup's own figures (the fixture fills only the containers')
    const podRef = cgroupRefFor(tree.mounts, podPath);
    if (podRef.version === 1) {
      writeFileSync(join(podRef.memory!, 'memory.usage_in_bytes'), '123456\n');
      writeFileSync(join(podRef.cpuacct!, 'cpuacct.usage'), '2000000000\n');
    }
    const sys = join(dir, 'sys');
    for (const dev of c0!.expectedDevices) {
      mkdirSync(join(sys, 'dev', 'block', `${dev.major}:${dev.minor}`), { recursive: true });
      writeFileSync(join(sys, 'dev', 'block', `${dev.major}:${dev.minor}`, 'uevent'), `MAJOR=${dev.major}\nDEVNAME=vd${dev.major}x${dev.minor}\n`);
    }
    const pod = {
      metadata: { uid, name: 'web', namespace: 'prod' },
      spec: { containers: [{ name: 'app', image: 'busybox' }] },
      status: { containerStatuses: [{ name: 'app', image: 'docker.io/library/busybox:1.36', containerID: `containerd://${containerId}`, state: { running: { startedAt: '2026-01-01T00:00:00Z' } } }] },
    } as unknown as Pod;
    const reader = new FsCgroupReader();
    const page = await collectCadvisorMetrics({
      getPods: () => [pod],
      podCgroupName: () => podPath,
      refFor: (p) => cgroupRefFor(tree.mounts, p),
      readCgroupPaths: async (paths) => {
        const refs = paths.map((p) => cgroupRefFor(tree.mounts, p));
        return { batch: await reader.readCgroups(refs), refs };
      },
      memoryCapacityBytes: 8 * GiB,
      procDir: proc,
      sysDir: sys,
    }, Date.parse('2026-01-01T00:01:00Z'));
    const base = `container="app",id="${podPath}/${containerId}",image="docker.io/library/busybox:1.36",name="${containerId}",namespace="prod",pod="web"`;
    const usage = Number(c0!.expected['cpuacct.usage']) / 1e9;
    assert.ok(page.includes(`container_cpu_usage_seconds_total{${base.replace('container="app",', 'container="app",cpu="total",')}} ${usage} `), page.slice(0, 3000));
    // values as Go writes them (%g: large ones in e-notation); read back as numbers
    const value = (name: string, labels: string): number | undefined => {
      const line = page.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    };
    assert.equal(value('container_memory_rss', base), Number(c0!.expected['memory.stat:total_rss']));
    assert.equal(value('container_memory_cache', base), Number(c0!.expected['memory.stat:total_cache']));
    // the pod-level series: container, image and name empty, id the pod cgroup
    const podLabels = `container="",id="${podPath}",image="",name="",namespace="prod",pod="web"`;
    assert.equal(value('container_memory_usage_bytes', podLabels), 123456);
    assert.equal(value('container_cpu_usage_seconds_total', podLabels.replace('container="",', 'container="",cpu="total",')), 2);
    // block I/O per device, named as /dev/<name>
    for (const dev of c0!.expectedDevices) {
      const dl = `container="app",device="/dev/vd${dev.major}x${dev.minor}",${base.slice('container="app",'.length)}`;
      assert.equal(value('container_fs_reads_bytes_total', dl), Number(dev.rbytes));
      assert.equal(value('container_fs_writes_total', dl), Number(dev.wios));
    }
    // the sandbox's network, lo left out
    assert.match(page, new RegExp(`^container_network_receive_bytes_total\\{container="",id="${podPath.replace(/[/.]/g, '\\$&')}/${sandboxId}",image="",interface="eth0",name="${sandboxId}",namespace="prod",pod="web"\\} 7 `, 'm'));
    assert.match(page, /^container_network_transmit_packets_total\{[^}]*interface="eth0"[^}]*pod="web"\} 10 /m);
    assert.doesNotMatch(page, /interface="lo"[^}]*pod="web"/);
    const machine = /^machine_memory_bytes\{boot_id="[^"]*",machine_id="[^"]*",system_uuid="[^"]*"\} (\S+)$/m.exec(page);
    assert.equal(Number(machine?.[1]), 8 * GiB);
    assert.equal(Number(/^container_start_time_seconds\{container="app",[^}]*\} (\S+) /m.exec(page)?.[1]), 1767225600);
    // every family once, HELP and TYPE before its samples
    const types = [...page.matchAll(/^# TYPE (\S+) /gm)].map((x) => x[1]);
    assert.equal(new Set(types).size, types.length);
  });
});
