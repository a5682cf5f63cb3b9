// Filesystem accounting on a real containerd: a container writes a file of known size into its
// rootfs and one into an emptyDir; /stats/summary then shows at least those sizes in the
// container's rootfs, the pod's volume list and its ephemeral-storage.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 120_000;
const MiB = 1024 * 1024;
const ROOTFS_MIB = 3;
const VOLUME_MIB = 2;

interface Fs { usedBytes?: number; inodesUsed?: number; capacityBytes?: number }
interface SummaryJSON {
  node: { runtime?: { imageFs?: Fs; containerFs?: Fs } };
  pods: Array<{
    podRef: { name: string };
    containers: Array<{ name: string; rootfs?: Fs; logs?: Fs }>;
    volume?: Array<Fs & { name: string }>;
    'ephemeral-storage'?: Fs;
  }>;
}

describe('filesystem accounting on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let dir: string;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-fsacct-'));
    const manifests = join(dir, 'manifests');
    await mkdir(manifests);
    const config = join(dir, 'config.yaml');
    await writeFile(config, 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nvolumeStatsAggPeriod: 3s\nauthentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n');
    await writeFile(join(manifests, 'writer.json'), JSON.stringify({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name: 'writer', labels: { test: 'fs-accounting' } },
      spec: {
        hostNetwork: true, terminationGracePeriodSeconds: 1,
        containers: [{
          name: 'main', image: rt.images.busybox,
          command: ['sh', '-c', `dd if=/dev/urandom of=/big bs=65536 count=${ROOTFS_MIB * 16} && dd if=/dev/urandom of=/cache/blob bs=65536 count=${VOLUME_MIB * 16} && echo written; trap "exit 0" TERM; while true; do sleep 1; done`],
          volumeMounts: [{ name: 'cache', mountPath: '/cache' }],
        }],
        volumes: [{ name: 'cache', emptyDir: {} }],
      },
    }));
    kubelet = await startKubelet({ endpoint: rt.endpoint, manifestDir: manifests, extraArgs: ['--config', config] });
  });

  after(async () => {
    const manifests = join(dir, 'manifests');
    for (const f of await readdir(manifests)) await rm(join(manifests, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'fs-accounting' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    await rm(dir, { recursive: true, force: true });
    cri.close();
  });

  it('shows the written sizes in rootfs, volume and ephemeral-storage', async () => {
    const summary = async (): Promise<SummaryJSON> => (await fetch(`http://127.0.0.1:${kubelet.readOnlyPort}/stats/summary`)).json() as Promise<SummaryJSON>;
    const pod = await waitFor(async () => {
      const p = (await summary()).pods.find((x) => x.podRef.name === `writer-${kubelet.nodeName}`);
      const c = p?.containers.find((x) => x.name === 'main');
      const v = p?.volume?.find((x) => x.name === 'cache');
      return (c?.rootfs?.usedBytes ?? 0) >= ROOTFS_MIB * MiB && (v?.usedBytes ?? 0) >= VOLUME_MIB * MiB ? p : undefined;
    }, WAIT, 'the written files to show in /stats/summary');
    const c = pod.containers.find((x) => x.name === 'main')!;
    assert.ok(c.rootfs!.inodesUsed! >= 1);
    assert.ok(c.rootfs!.capacityBytes! > 0, 'rootfs capacity is the image fs');
    assert.ok(c.logs && c.logs.usedBytes! > 0, 'the container log ("written") is counted');
    const v = pod.volume!.find((x) => x.name === 'cache')!;
    assert.ok(v.inodesUsed! >= 2, 'the emptyDir and its file');
    assert.ok(pod['ephemeral-storage']!.usedBytes! >= (ROOTFS_MIB + VOLUME_MIB) * MiB);
    const s = await summary();
    assert.ok(s.node.runtime?.imageFs?.capacityBytes);
    assert.deepEqual(s.node.runtime?.containerFs, s.node.runtime?.imageFs);
  });
});
