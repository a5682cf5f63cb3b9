// Node-pressure eviction on a real containerd: the hard memory.available threshold is set just
// under what the node has at test time, a BestEffort pod allocates ~2 GiB and is evicted
// (Failed, reason Evicted, upstream's message, an Evicted event, kubelet_evictions) while the
// Guaranteed pod keeps running; a BestEffort pod added under the pressure is refused.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { mkdtemp } from 'node:fs/promises';
import type { Pod } from '../../src/api/types.js';
import { Quantity } from '../../src/api/quantity.js';
import { cgroupDir, discoverCgroupMounts } from '../../src/cgroups/index.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { parseMeminfo } from '../../src/stats/node-stats.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const MI = 1024n * 1024n;

function manifest(name: string, image: string, command: string, resources?: object): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { test: 'eviction' } },
    spec: {
      hostNetwork: true,
      terminationGracePeriodSeconds: 2,
      containers: [{ name: 'main', image, command: ['sh', '-c', command], resources }],
    },
  });
}

/** memory.available as the kubelet computes it: MemTotal − the root cgroup's working set. */
async function nodeMemoryAvailable(): Promise<bigint> {
  const mounts = await discoverCgroupMounts();
  const total = parseMeminfo(await readFile('/proc/meminfo', 'latin1')).get('MemTotal')!;
  const mem = mounts.v1.memory;
  if (!mem) return parseMeminfo(await readFile('/proc/meminfo', 'latin1')).get('MemAvailable')!;
  const dir = cgroupDir(mem, '/');
  const usage = BigInt((await readFile(join(dir, 'memory.usage_in_bytes'), 'utf8')).trim());
  const inactive = BigInt(/^total_inactive_file (\d+)$/m.exec(await readFile(join(dir, 'memory.stat'), 'utf8'))?.[1] ?? '0');
  return total - (usage - inactive);
}

describe('eviction on containerd under memory pressure', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;
  let configDir: string;
  let threshold: string;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    const available = await nodeMemoryAvailable();
    // ~600 MiB under what the node has now: the hog's 2 GiB crosses it, the machine's own drift does not
    threshold = Quantity.fromValue(((available - 600n * MI) / MI) * MI, 'BinarySI').toString();
    configDir = await mkdtemp(join(tmpdir(), 'kts-evict-config-'));
    const config = join(configDir, 'kubelet.yaml');
    await writeFile(config, [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      'evictionHard:',
      `  memory.available: "${threshold}"`,
      // the allocatable twin would sit under the same huge threshold: not enforced here
      'enforceNodeAllocatable: ["none"]',
      'evictionPressureTransitionPeriod: 5m',
      // the kernel's notification may decide before the 10 s pass (off by default, as upstream)
      'kernelMemcgNotification: true',
      // standalone: webhook authn/authz need an API server
      'authentication: {webhook: {enabled: false}}',
      'authorization: {mode: AlwaysAllow}',
    ].join('\n') + '\n');
    kubelet = await startKubelet({ endpoint: rt.endpoint, extraArgs: ['--config', config, '-v', '3'] });
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'eviction' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    await rm(configDir, { recursive: true, force: true });
    cri.close();
  });

  const podNamed = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);

  it('evicts the BestEffort memory hog with upstream status and event; the Guaranteed pod keeps running', async (t) => {
    await writeFile(join(kubelet.manifestDir, 'guaranteed.json'), manifest('guaranteed', rt.images.busybox,
      'trap "exit 0" TERM; while true; do sleep 1; done', { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } }));
    await waitFor(async () => (await podNamed('guaranteed'))?.status?.phase === 'Running', WAIT, 'the Guaranteed pod to run');

    // dd holds its 2000 MiB buffer while the pipe to sleep stays full
    await writeFile(join(kubelet.manifestDir, 'hog.json'), manifest('hog', rt.images.busybox, 'sleep 2; dd if=/dev/zero bs=2000M count=1 | sleep 100000'));
    const hog = await waitFor(async () => {
      const p = await podNamed('hog');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, WAIT, 'the hog to be evicted');
    assert.equal(hog.status?.qosClass, 'BestEffort');
    assert.equal(hog.status?.reason, 'Evicted');
    const msg = hog.status?.message ?? '';
    assert.match(msg, new RegExp(`^The node was low on resource: memory\\. Threshold quantity: ${threshold}, available: \\d+(Ki|Mi|Gi)?\\. Container main was using \\d+(Ki|Mi|Gi)?, request is 0, has larger consumption of memory\\. $`));
    const dt = hog.status?.conditions?.find((c) => c.type === 'DisruptionTarget');
    assert.equal(dt?.reason, 'TerminationByKubelet');
    assert.match(kubelet.logs(), /Event occurred.*reason="Evicted"/);
    // which path decided (the memcg notification, or the 10 s pass if it came first)
    t.diagnostic(`decided by: ${/Eviction manager: notification/.test(kubelet.logs()) ? 'memcg threshold notification' : 'housekeeping pass'}`);

    // The hog's container is stopped; the Guaranteed pod still runs a while later.
    await waitFor(async () => {
      const cs = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': hog.metadata.uid! } });
      return cs.length > 0 && cs.every((c) => c.state !== 'CONTAINER_RUNNING');
    }, WAIT, 'the hog container to stop');
    await new Promise((r) => setTimeout(r, 5_000));
    const g = await podNamed('guaranteed');
    assert.equal(g?.status?.phase, 'Running', `the Guaranteed pod: ${g?.status?.reason ?? ''} ${g?.status?.message ?? ''}\n` +
      kubelet.logs().split('\n').filter((l) => /Eviction manager/.test(l)).join('\n'));
    const gcs = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': g!.metadata.uid! } });
    assert.ok(gcs.some((c) => c.state === 'CONTAINER_RUNNING'));

    const metrics = await (await fetch(`http://127.0.0.1:${kubelet.readOnlyPort}/metrics`)).text();
    assert.match(metrics, /kubelet_evictions\{eviction_signal="memory.available"\} 1\b/);
  });

  it('refuses a BestEffort pod while the node has MemoryPressure', async () => {
    await writeFile(join(kubelet.manifestDir, 'late.json'), manifest('late', rt.images.busybox, 'sleep 100000'));
    const late = await waitFor(async () => {
      const p = await podNamed('late');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, WAIT, 'the late pod to be refused');
    assert.equal(late.status?.reason, 'Evicted');
    assert.equal(late.status?.message, 'Pod was rejected: The node had condition: [MemoryPressure]. ');
    assert.equal((await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': late.metadata.uid! } })).length, 0);
  });
});
