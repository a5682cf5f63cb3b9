// /stats/summary and /metrics/resource of a real kubelet-ts on a real containerd: a busy
// container's CPU rises between two reads, a container holding ~64 MiB of anonymous memory
// shows a working set near that, and the resource metrics name both.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cgroupDir, discoverCgroupMounts } from '../../src/cgroups/index.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 120_000;
const MiB = 1024 * 1024;
/** What the memory-hungry container holds: a 64 MiB shell variable. */
const HELD_BYTES = 64 * MiB;

interface SummaryJSON {
  node: { nodeName: string; cpu?: { usageCoreNanoSeconds?: number }; memory?: { workingSetBytes?: number }; fs?: object };
  pods: Array<{
    podRef: { name: string; namespace: string; uid: string };
    cpu?: { usageCoreNanoSeconds?: number };
    memory?: { workingSetBytes?: number };
    containers: Array<{ name: string; startTime: string; cpu?: { time: string; usageCoreNanoSeconds?: number; usageNanoCores?: number }; memory?: { workingSetBytes?: number; usageBytes?: number } }>;
  }>;
}

/**
 * A pod cgroup's cumulative CPU in ns, read where this machine keeps it: v1 cpuacct.usage (v1
 * and hybrid hosts, as here), else cpu.stat usage_usec in the unified hierarchy (v2 hosts; not
 * runnable on this hybrid machine, the v2 readers are unit-tested on generated trees).
 */
async function podCgroupCpuNs(podCgroup: string): Promise<number> {
  const mounts = await discoverCgroupMounts();
  if (mounts.v1.cpuacct) return Number((await readFile(join(cgroupDir(mounts.v1.cpuacct, podCgroup), 'cpuacct.usage'), 'utf8')).trim());
  const stat = await readFile(join(cgroupDir(mounts.unified!, podCgroup), 'cpu.stat'), 'utf8');
  return Number(/^usage_usec (\d+)$/m.exec(stat)?.[1]) * 1000;
}

function manifest(name: string, image: string, command: string[], limits: { cpu: string; memory: string }): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { test: 'stats' } },
    spec: {
      hostNetwork: true,
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'main', image, command, resources: { limits } }],
    },
  });
}

describe('stats on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;
  let base: string;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    kubelet = await startKubelet({ endpoint: rt.endpoint });
    base = `http://127.0.0.1:${kubelet.readOnlyPort}`;
    await writeFile(join(kubelet.manifestDir, 'busy.json'), manifest('busy', rt.images.busybox, ['sh', '-c', 'while :; do :; done'], { cpu: '200m', memory: '32Mi' }));
    // busybox sh keeps the variable in its heap; the loop keeps the shell from exec'ing away.
    const hog = `x=$(head -c ${HELD_BYTES} /dev/zero | tr '\\0' a); while :; do sleep 5; done; echo \${#x}`;
    await writeFile(join(kubelet.manifestDir, 'hog.json'), manifest('hog', rt.images.busybox, ['sh', '-c', hog], { cpu: '500m', memory: '256Mi' }));
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'stats' } })).length === 0, WAIT, 'stats pods to be removed').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  const summary = async (): Promise<SummaryJSON> => {
    const res = await fetch(`${base}/stats/summary`);
    if (res.status !== 200) throw new Error(`/stats/summary answered ${res.status}: ${await res.text()}`);
    assert.equal(res.headers.get('content-type'), 'application/json');
    return (await res.json()) as SummaryJSON;
  };
  const container = (s: SummaryJSON, pod: string) =>
    s.pods.find((p) => p.podRef.name === `${pod}-${kubelet.nodeName}`)?.containers.find((c) => c.name === 'main');

  it("reports the node, and a busy container's CPU rising between two reads", async () => {
    const first = await waitFor(async () => {
      const s = await summary();
      const c = container(s, 'busy');
      return c?.cpu?.usageCoreNanoSeconds !== undefined ? { s, c } : undefined;
    }, WAIT, 'the busy container in /stats/summary');
    assert.equal(first.s.node.nodeName, kubelet.nodeName);
    assert.ok((first.s.node.cpu?.usageCoreNanoSeconds ?? 0) > 0, 'node CPU reported');
    assert.ok((first.s.node.memory?.workingSetBytes ?? 0) > 0, 'node working set reported');
    assert.ok(first.s.node.fs, 'node fs reported');
    const pod = first.s.pods.find((p) => p.podRef.name === `busy-${kubelet.nodeName}`)!;
    assert.equal(pod.podRef.namespace, 'default');
    assert.ok(pod.cpu?.usageCoreNanoSeconds !== undefined, 'pod CPU from the pod cgroup');
    // The pod's figure is its cgroup's counter (a Guaranteed pod: /kubepods/pod<uid>), read later here.
    const direct = await podCgroupCpuNs(`/kubepods/pod${pod.podRef.uid}`);
    assert.ok(direct > 0 && direct >= pod.cpu.usageCoreNanoSeconds, `pod cgroup CPU ${direct} ns >= reported ${pod.cpu.usageCoreNanoSeconds} ns`);

    // Two housekeeping snapshots of the same container (a restart in between starts over).
    let prev = first.c;
    const [before, later] = await waitFor(async () => {
      const c = container(await summary(), 'busy');
      if (!c?.cpu?.time) return undefined;
      if (c.startTime !== prev.startTime) {
        prev = c;
        return undefined;
      }
      return c.cpu.time !== prev.cpu!.time ? ([prev, c] as const) : undefined;
    }, WAIT, 'a newer snapshot of the busy container');
    assert.ok(later.cpu!.usageCoreNanoSeconds! > before.cpu!.usageCoreNanoSeconds!, 'cumulative CPU rose');
    assert.ok((later.cpu!.usageNanoCores ?? 0) > 0, 'a rate once there are two samples');
  });

  it("reports a memory-hungry container's working set near what it holds", async () => {
    const c = await waitFor(async () => {
      const m = container(await summary(), 'hog');
      return (m?.memory?.workingSetBytes ?? 0) >= HELD_BYTES * 0.9 ? m : undefined;
    }, WAIT, 'the hog container to hold its memory');
    const ws = c!.memory!.workingSetBytes!;
    assert.ok(ws <= HELD_BYTES * 2, `working set ${ws} is near ${HELD_BYTES}`);
    assert.ok(c!.memory!.usageBytes! >= ws, 'usage >= working set');
  });

  it('serves /metrics/resource with both containers', async () => {
    const res = await fetch(`${base}/metrics/resource`);
    assert.equal(res.status, 200);
    const text = await res.text();
    for (const pod of ['busy', 'hog']) {
      const labels = `\\{container="main",namespace="default",pod="${pod}-${kubelet.nodeName}"\\}`;
      assert.match(text, new RegExp(`^container_cpu_usage_seconds_total${labels} \\S+ \\d+$`, 'm'));
      assert.match(text, new RegExp(`^container_memory_working_set_bytes${labels} \\S+ \\d+$`, 'm'));
    }
    assert.match(text, /^node_cpu_usage_seconds_total \S+ \d+$/m);
    assert.match(text, /^scrape_error 0$/m);
  });
});
