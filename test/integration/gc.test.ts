// Image and container garbage collection against a real containerd: image GC removes an image
// nothing uses and never the one a running container uses; container GC keeps one dead
// container per (pod, container name) and removes everything a removed pod left behind
// (containers, its stopped sandbox, its log directory).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { garbageCollectContainers } from '../../src/gc/container-gc.js';
import { criContainerGCRuntime } from '../../src/gc/node-gc.js';
import { ImageGCManager } from '../../src/images/image-gc.js';
import { Registry } from '../../src/metrics/registry.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { realClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;

const run = (cmd: string, args: string[]): Promise<void> =>
  new Promise((resolve, reject) => execFile(cmd, args, (err, _o, stderr) => (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || err.message}`)) : resolve())));

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A one-layer OCI image of its own (a file with unique content), pushed to the local registry. */
async function pushUniqueImage(registry: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-gc-image-'));
  try {
    await mkdir(join(dir, 'rootfs'));
    await writeFile(join(dir, 'rootfs', 'marker'), randomUUID());
    await run('tar', ['--mtime=@0', '--owner=0', '--group=0', '-cf', join(dir, 'layer.tar'), '-C', join(dir, 'rootfs'), '.']);
    const tar = await readFile(join(dir, 'layer.tar'));
    await run('gzip', ['-n', join(dir, 'layer.tar')]);
    const gz = await readFile(join(dir, 'layer.tar.gz'));
    const layout = join(dir, 'layout');
    await mkdir(join(layout, 'blobs', 'sha256'), { recursive: true });
    const blob = async (b: Buffer): Promise<string> => {
      const h = sha(b);
      await writeFile(join(layout, 'blobs', 'sha256', h), b);
      return h;
    };
    const config = Buffer.from(JSON.stringify({ architecture: process.arch === 'arm64' ? 'arm64' : 'amd64', os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [`sha256:${sha(tar)}`] } }));
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${await blob(config)}`, size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${await blob(gz)}`, size: gz.length }],
    }));
    const tag = `gc-${process.pid}-${Date.now()}`;
    await writeFile(join(layout, 'index.json'), JSON.stringify({
      schemaVersion: 2,
      manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: `sha256:${await blob(manifest)}`, size: manifest.length, annotations: { 'org.opencontainers.image.ref.name': tag } }],
    }));
    await writeFile(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    const ref = `${registry}/kubelet-ts/gc-test:${tag}`;
    await run('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', `oci:${layout}:${tag}`, `docker://${ref}`]);
    return ref;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function manifest(name: string, image: string, command: string, restartPolicy: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { test: 'gc' } },
    spec: { hostNetwork: true, restartPolicy, terminationGracePeriodSeconds: 1, containers: [{ name: 'main', image, command: ['sh', '-c', command] }] },
  });
}

describe('garbage collection on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;

  before(async () => {
    setLogSink(() => undefined);
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    kubelet = await startKubelet({ endpoint: rt.endpoint });
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'gc' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  const podNamed = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);

  it('image GC removes an unused image and never the one a running container uses', async () => {
    await writeFile(join(kubelet.manifestDir, 'user.json'), manifest('user', rt.images.busybox, 'trap "exit 0" TERM; while true; do sleep 1; done', 'Always'));
    await waitFor(async () => (await podNamed('user'))?.status?.phase === 'Running', WAIT, 'the pod using busybox to run');
    const unused = await pushUniqueImage(rt.registry);
    await cri.pullImage({ image: unused }, undefined, undefined, {});
    const unusedId = (await cri.imageStatus(unused)).image!.id;
    const busyboxId = (await cri.imageStatus(rt.images.busybox)).image!.id;
    assert.notEqual(unusedId, busyboxId);

    const registry = new Registry();
    // Only these two images are the collector's to judge: the shared runtime's others stay out of reach.
    const mine = new Set([unusedId, busyboxId]);
    const gc = new ImageGCManager({
      runtime: {
        listImages: async () => (await cri.listImages()).filter((i) => mine.has(i.id)),
        listContainers: () => cri.listContainers(),
        removeImage: (id) => cri.removeImage(id),
      },
      // a full image filesystem: free down to the low threshold, i.e. everything eligible
      imageFsStats: async () => ({ capacityBytes: 1n << 40n, availableBytes: 0n }),
      policy: { highThresholdPercent: 85, lowThresholdPercent: 80, minAgeMs: 0, maxAgeMs: 0 },
      clock: realClock,
      log: createLogger(),
      registry,
    });
    await assert.rejects(gc.garbageCollect(), /Failed to garbage collect required amount of images/);
    assert.equal((await cri.imageStatus(unused)).image, null, 'the unused image is gone');
    assert.equal((await cri.imageStatus(rt.images.busybox)).image?.id, busyboxId, 'the image in use stays');
    assert.match(registry.metricsText(), /kubelet_image_garbage_collected_total\{reason="space"\} 1/);
  });

  it('container GC keeps one dead container per container and clears what a removed pod left', async () => {
    // A crashing container: the kubelet keeps two dead attempts; the upstream policy keeps one.
    await writeFile(join(kubelet.manifestDir, 'crasher.json'), manifest('crasher', rt.images.busybox, 'exit 1', 'Always'));
    const crasher = await waitFor(async () => podNamed('crasher'), WAIT, 'the crasher');
    const dead = async (uid: string) => (await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': uid } })).filter((c) => c.state === 'CONTAINER_EXITED');
    await waitFor(async () => (await dead(crasher.metadata.uid!)).length >= 2, WAIT, 'two dead crasher containers');

    // A pod that ran to completion, then its kubelet forgot it (content removable).
    await writeFile(join(kubelet.manifestDir, 'done.json'), manifest('done', rt.images.busybox, 'echo bye', 'Never'));
    const done = await waitFor(async () => {
      const p = await podNamed('done');
      return p?.status?.phase === 'Succeeded' ? p : undefined;
    }, WAIT, 'the done pod to succeed');
    const doneUID = done.metadata.uid!;
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': doneUID } })).every((s) => s.state === 'SANDBOX_NOTREADY'), WAIT, 'the done sandbox to stop');
    const logDir = join('/var/log/pods', `default_done-${kubelet.nodeName}_${doneUID}`);
    await access(logDir);

    const mineOnly = new Set([crasher.metadata.uid!, doneUID]);
    const runtime = criContainerGCRuntime({
      listContainers: async () => (await cri.listContainers()).filter((c) => mineOnly.has(c.labels['io.kubernetes.pod.uid'] ?? '')),
      listPodSandbox: async () => (await cri.listPodSandbox()).filter((s) => mineOnly.has(s.labels['io.kubernetes.pod.uid'] ?? '')),
      removeContainer: (id) => cri.removeContainer(id),
      removePodSandbox: (id) => cri.removePodSandbox(id),
    }, '/var/log/pods');
    const r = await garbageCollectContainers({
      runtime,
      state: { shouldPodContentBeRemoved: (uid) => uid === doneUID, shouldPodRuntimeBeRemoved: (uid) => uid === doneUID },
      policy: { minAgeMs: 0, maxPerPodContainer: 1, maxContainers: -1 },
      allSourcesReady: () => true,
      now: () => Date.now(),
      log: createLogger(),
    });
    assert.ok(r.containers.length >= 2, `removed ${r.containers.length} containers`);
    assert.ok((await dead(crasher.metadata.uid!)).length <= 1, 'one dead crasher attempt left');
    assert.equal((await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': doneUID } })).length, 0);
    assert.equal((await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': doneUID } })).length, 0);
    assert.ok(r.logDirs.includes(logDir));
    await assert.rejects(access(logDir));
  });
});
