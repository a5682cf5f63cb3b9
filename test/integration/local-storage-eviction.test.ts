// Local ephemeral storage limits on a real containerd: a pod whose container writes 4 MiB into
// an emptyDir with `sizeLimit: 1Mi` is evicted with upstream's status, message and event and
// counted under kubelet_evictions{eviction_signal="emptydirfs.limit"}, while a pod that wrote
// as much into an emptyDir with room for it keeps running. volumeStatsAggPeriod is 2s so the
// accounting sees the files soon; the waits are hang limits only.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 120_000;
const MiB = 1024 * 1024;
const WRITTEN_MIB = 4;

function manifest(name: string, image: string, sizeLimit: string): string {
  return JSON.stringify({
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name, labels: { test: 'local-storage-eviction' } },
    spec: {
      hostNetwork: true, terminationGracePeriodSeconds: 30,
      containers: [{
        name: 'main', image,
        command: ['sh', '-c', `dd if=/dev/urandom of=/cache/blob bs=65536 count=${WRITTEN_MIB * 16} && echo written; trap "exit 0" TERM; while true; do sleep 1; done`],
        volumeMounts: [{ name: 'cache', mountPath: '/cache' }],
      }],
      volumes: [{ name: 'cache', emptyDir: { sizeLimit } }],
    },
  });
}

interface SummaryJSON {
  pods: Array<{ podRef: { name: string }; volume?: Array<{ name: string; usedBytes?: number }> }>;
}

describe('local storage eviction on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let dir: string;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-lsevict-'));
    const config = join(dir, 'config.yaml');
    await writeFile(config, 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nvolumeStatsAggPeriod: 2s\nauthentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n');
    kubelet = await startKubelet({ endpoint: rt.endpoint, extraArgs: ['--config', config, '-v', '3'] });
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'local-storage-eviction' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    await rm(dir, { recursive: true, force: true });
    cri.close();
  });

  const podNamed = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);
  const volumeUsed = async (name: string): Promise<number> => {
    const s = (await (await fetch(`http://127.0.0.1:${kubelet.readOnlyPort}/stats/summary`)).json()) as SummaryJSON;
    return s.pods.find((p) => p.podRef.name === `${name}-${kubelet.nodeName}`)?.volume?.find((v) => v.name === 'cache')?.usedBytes ?? 0;
  };

  it('evicts the pod over its emptyDir sizeLimit with upstream status and event; the pod within its limit keeps running', async () => {
    // the roomy pod first, measured at its 4 MiB before the other starts: every later pass saw it
    await writeFile(join(kubelet.manifestDir, 'roomy.json'), manifest('roomy', rt.images.busybox, '100Mi'));
    await waitFor(async () => (await volumeUsed('roomy')) >= WRITTEN_MIB * MiB, WAIT, 'the roomy pod\'s emptyDir to be measured');

    await writeFile(join(kubelet.manifestDir, 'over.json'), manifest('over', rt.images.busybox, '1Mi'));
    const over = await waitFor(async () => {
      const p = await podNamed('over');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, WAIT, 'the pod over its sizeLimit to be evicted');
    assert.equal(over.status?.reason, 'Evicted');
    assert.equal(over.status?.message, 'Usage of EmptyDir volume "cache" exceeds the limit "1Mi". ');
    // upstream sets no DisruptionTarget condition for local storage evictions
    assert.equal(over.status?.conditions?.find((c) => c.type === 'DisruptionTarget'), undefined);
    assert.match(kubelet.logs(), /Event occurred.*reason="Evicted".*Usage of EmptyDir volume/);

    // its container is stopped
    await waitFor(async () => {
      const cs = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': over.metadata.uid! } });
      return cs.length > 0 && cs.every((c) => c.state !== 'CONTAINER_RUNNING');
    }, WAIT, 'the evicted pod\'s container to stop');

    const roomy = await podNamed('roomy');
    assert.equal(roomy?.status?.phase, 'Running');
    const rcs = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': roomy!.metadata.uid! } });
    assert.ok(rcs.some((c) => c.state === 'CONTAINER_RUNNING'));

    const metrics = await (await fetch(`http://127.0.0.1:${kubelet.readOnlyPort}/metrics`)).text();
    assert.match(metrics, /kubelet_evictions\{eviction_signal="emptydirfs.limit"\} 1\b/);
  });
});
