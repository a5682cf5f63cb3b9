// Disk pressure on a small filesystem: a 512 MiB ext4 on a loop device holds kubelet-ts's root
// dir, its pod logs and the whole store of a private containerd (content, snapshots), so
// nodefs and imagefs are one filesystem, as on most nodes. The hard nodefs.available threshold
// sits ~100 MiB under what that filesystem has free before the pods start; a pod writing 250
// MiB into its emptyDir crosses it. As upstream, the node-level reclaim runs first (the dead
// container of a finished pod and the unused image go), and only when that is not enough is
// the writer evicted: Failed, reason Evicted, upstream's message, an Evicted event, DiskPressure
// on the Node; the quiet pod keeps running, a new pod is refused, and once the evicted pod's
// emptyDir is gone the pressure ends. Then a pod making 12k files crosses nodefs.inodesFree and
// is evicted the same way.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createCipheriv, createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { Quantity, parseQuantity } from '../../src/api/quantity.js';
import { allHierarchies, cgroupDir, discoverCgroupMounts } from '../../src/cgroups/index.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { ensureRuntime, startSecondRuntime, type SecondRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { mountSmallFs, type SmallFs } from '../fixtures/small-fs.js';

const WAIT = 120_000;
const MI = 1024n * 1024n;
const NODE = 'kts-diskpress-node';
const CGROUP_ROOT = '/kts-diskpress';
const FS_MIB = 512;
/** The unused image's one layer (uncompressed: the runtime holds it twice, blob and snapshot). */
const FILLER_MIB = 40;
/** What the finished pod leaves in its dead container's writable layer. */
const DEAD_MIB = 30;
/** What the writer puts in its emptyDir. */
const WRITE_MIB = 250;
/** The threshold's distance under the free space before the pods: above DEAD_MIB, under WRITE_MIB − 2 × FILLER_MIB. */
const MARGIN_MIB = 100n;
/** Files the inode eater makes, and the nodefs.inodesFree threshold's distance under the free inodes before the pods. */
const FILES = 12_000;
const INODE_MARGIN = 8_000n;

const run = (cmd: string, args: string[]): Promise<void> =>
  new Promise((resolve, reject) => execFile(cmd, args, { timeout: WAIT }, (err, _o, stderr) => (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || err.message}`)) : resolve())));

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/**
 * A one-layer image of FILLER_MIB of incompressible bytes, the same every run (a fixed AES-CTR
 * stream, fixed tar metadata), pushed to the local registry once.
 */
async function pushFillerImage(registry: string): Promise<string> {
  const ref = `${registry}/kubelet-ts/disk-filler:1`;
  const dir = await mkdtemp(join(tmpdir(), 'kts-filler-image-'));
  try {
    await mkdir(join(dir, 'rootfs'));
    const cipher = createCipheriv('aes-128-ctr', Buffer.alloc(16, 7), Buffer.alloc(16, 0));
    await writeFile(join(dir, 'rootfs', 'filler.bin'), Buffer.concat([cipher.update(Buffer.alloc(FILLER_MIB << 20)), cipher.final()]));
    await run('tar', ['--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '-cf', join(dir, 'layer.tar'), '-C', join(dir, 'rootfs'), 'filler.bin']);
    const tar = await readFile(join(dir, 'layer.tar'));
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
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: `sha256:${await blob(tar)}`, size: tar.length }],
    }));
    await writeFile(join(layout, 'index.json'), JSON.stringify({
      schemaVersion: 2,
      manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: `sha256:${await blob(manifest)}`, size: manifest.length, annotations: { 'org.opencontainers.image.ref.name': '1' } }],
    }));
    await writeFile(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    await run('skopeo', ['--insecure-policy', 'copy', '--quiet', '--dest-tls-verify=false', `oci:${layout}:1`, `docker://${ref}`]);
    return ref;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function podJson(name: string, image: string, spec: { command: string; restartPolicy?: string; emptyDir?: boolean; requests?: Record<string, string>; priority?: number }): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', labels: { test: 'disk-pressure' } },
    spec: {
      nodeName: NODE,
      hostNetwork: true,
      priority: spec.priority,
      restartPolicy: spec.restartPolicy ?? 'Always',
      terminationGracePeriodSeconds: 2,
      containers: [{
        name: 'main', image, command: ['sh', '-c', spec.command],
        resources: spec.requests ? { requests: spec.requests } : undefined,
        volumeMounts: spec.emptyDir ? [{ name: 'scratch', mountPath: '/scratch' }] : undefined,
      }],
      volumes: spec.emptyDir ? [{ name: 'scratch', emptyDir: {} }] : undefined,
    },
  };
}

const SLEEP = 'trap "exit 0" TERM; while true; do sleep 1; done';
/**
 * No TERM handler: PID 1 ignores TERM and the eviction's kill ends it (137), so the evicted pod
 * is Failed with reason Evicted. (A container that exits 0 on TERM leaves an evicted pod
 * Succeeded with only the DisruptionTarget condition, as upstream since 1.27.)
 */
const SLEEP_UNTIL_KILLED = 'while true; do sleep 1; done';

/** Removes the cgroup subtree `name` in every hierarchy, deepest first (empty cgroups only). */
async function removeCgroupTree(name: string): Promise<void> {
  const mounts = await discoverCgroupMounts();
  const rmTree = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) await rmTree(join(dir, e.name));
    await rmdir(dir).catch(() => undefined);
  };
  for (const m of allHierarchies(mounts)) await rmTree(cgroupDir(m, name));
}

describe('disk pressure on a small filesystem holding the root dir, the logs and the images', () => {
  let base: string;
  let fs: SmallFs | undefined;
  let runtime: SecondRuntime | undefined;
  let cri: CriClient | undefined;
  let api: TestApiServer | undefined;
  let kubelet: KubeletProcess | undefined;
  let filler: string;
  let threshold: string;
  let thresholdBytes: bigint;
  let inodeThreshold: bigint;

  before(async () => {
    const shared = await ensureRuntime();
    base = await mkdtemp(join(tmpdir(), 'kts-diskpress-'));
    fs = await mountSmallFs(base, FS_MIB);
    runtime = await startSecondRuntime({ nodeDir: join(fs.dir, 'node'), runDir: join(base, 'run'), bridge: 'kts-dp0', podCidr: '10.89.0.0/16' });
    cri = new CriClient({ runtimeEndpoint: runtime.endpoint, timeoutMs: 60_000 });
    filler = await pushFillerImage(shared.registry);
    // what the pods run is on the filesystem before the threshold is taken; the filler is unused
    for (const image of [runtime.images.pause, runtime.images.busybox, filler]) await cri.pullImage(image);

    const available = await fs.available();
    thresholdBytes = ((available - MARGIN_MIB * MI) / MI) * MI;
    threshold = Quantity.fromValue(thresholdBytes, 'BinarySI').toString();
    inodeThreshold = (await fs.inodesFree()) - INODE_MARGIN;
    api = new TestApiServer({});
    await api.start();
    const kubeconfig = join(base, 'kubelet.kubeconfig');
    await writeFile(kubeconfig, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    const config = join(base, 'kubelet.yaml');
    await writeFile(config, [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      // its own cgroups: pods of the shared node are no orphans of this kubelet
      `cgroupRoot: ${CGROUP_ROOT}`,
      `podLogsDir: ${join(fs.dir, 'pods-logs')}`,
      'evictionHard:',
      `  nodefs.available: "${threshold}"`,
      `  nodefs.inodesFree: "${inodeThreshold}"`,
      'evictionPressureTransitionPeriod: 60s',
      'nodeStatusUpdateFrequency: 2s',
    ].join('\n') + '\n');
    kubelet = await startKubelet({ endpoint: runtime.endpoint, nodeName: NODE, rootDir: join(fs.dir, 'kubelet'), extraArgs: ['--config', config, '--kubeconfig', kubeconfig] });
  });

  after(async () => {
    const step = async (what: string, fn: () => Promise<unknown>): Promise<void> => {
      try {
        await fn();
      } catch (err) {
        console.error(`disk-pressure cleanup: ${what}: ${(err as Error).message}`);
      }
    };
    await step('kubelet-ts', async () => kubelet?.stop());
    cri?.close();
    // removes every pod of the private containerd and unmounts its overlays before the filesystem goes
    await step('private containerd', async () => runtime?.stop());
    await step('cgroups', () => removeCgroupTree(CGROUP_ROOT));
    await step('small filesystem', async () => fs?.close());
    await step('API server', async () => api?.stop());
    if (base) await rm(base, { recursive: true, force: true });
  });

  const pod = (name: string): Pod | undefined => api!.get('pods', 'default', name) as Pod | undefined;
  const create = (obj: object): void => void api!.create('pods', 'default', obj as never);
  const phase = (name: string): string | undefined => pod(name)?.status?.phase;
  const nodeCondition = (type: string) => (api!.get('nodes', undefined, NODE) as { status?: { conditions?: { type: string; status: string; reason?: string }[] } } | undefined)?.status?.conditions?.find((c) => c.type === type);

  it('reclaims the dead container and the unused image first, then evicts the pod filling its emptyDir', async (t) => {
    const rt = runtime!;
    const c = cri!;
    await waitFor(async () => nodeCondition('Ready')?.status === 'True', WAIT, 'the node to be Ready');
    assert.equal(nodeCondition('DiskPressure')?.status, 'False');
    // nodefs and imagefs are the small filesystem, as /stats/summary shows them
    const summary = await (await fetch(`http://127.0.0.1:${kubelet!.readOnlyPort}/stats/summary`)).json() as { node: { fs?: { capacityBytes?: number }; runtime?: { imageFs?: { capacityBytes?: number } } } };
    const capacity = Number(await fs!.capacity());
    assert.equal(summary.node.fs?.capacityBytes, capacity);
    assert.equal(summary.node.runtime?.imageFs?.capacityBytes, capacity);
    const fillerId = (await c.imageStatus(filler)).image?.id;
    assert.ok(fillerId, 'the filler image is on the private containerd');

    // its request keeps it under its share of the disk; its priority ranks it after the inode eater of the last case
    create(podJson('quiet', rt.images.busybox, { command: SLEEP, requests: { 'ephemeral-storage': '10Mi' }, priority: 1000 }));
    create(podJson('done', rt.images.busybox, { command: `dd if=/dev/zero of=/leftover bs=1M count=${DEAD_MIB} && sync`, restartPolicy: 'Never' }));
    await waitFor(async () => phase('quiet') === 'Running' && phase('done') === 'Succeeded', WAIT, 'quiet Running and done Succeeded');
    const doneUid = pod('done')!.metadata.uid!;
    assert.equal((await c.listContainers({ label_selector: { 'io.kubernetes.pod.uid': doneUid } })).length, 1, 'the finished pod left its dead container');
    assert.ok((await fs!.available()) > thresholdBytes, 'no pressure before the writer');

    create(podJson('writer', rt.images.busybox, { command: `dd if=/dev/zero of=/scratch/fill bs=1M count=${WRITE_MIB} && sync; ${SLEEP_UNTIL_KILLED}`, emptyDir: true }));
    const writer = await waitFor(async () => (phase('writer') === 'Failed' ? pod('writer') : undefined), WAIT, 'the writer to be evicted');
    // the decisions, in the order the kubelet took them
    for (const line of kubelet!.logs().split('\n')) {
      if (/Eviction manager: (attempting|able|pod is evicted)|Removing image|Container garbage collection removed/.test(line)) t.diagnostic(line.slice(0, 240));
    }

    assert.equal(writer.status?.reason, 'Evicted');
    const msg = writer.status?.message ?? '';
    assert.match(msg, new RegExp(`^The node was low on resource: ephemeral-storage\\. Threshold quantity: ${threshold}, available: \\d+(Ki|Mi|Gi)?\\. ` +
      '(Container main was using \\d+(Ki|Mi|Gi)?, request is 0, has larger consumption of ephemeral-storage\\. )?$'));
    assert.equal(writer.status?.conditions?.find((x) => x.type === 'DisruptionTarget')?.reason, 'TerminationByKubelet');

    // node-level reclaim came first: the dead container and the unused image are gone, before the eviction
    assert.deepEqual(await c.listContainers({ label_selector: { 'io.kubernetes.pod.uid': doneUid } }), []);
    assert.equal((await c.imageStatus(filler)).image, null, 'the unused image was removed');
    assert.ok((await c.imageStatus(rt.images.busybox)).image, 'the image in use stays');
    assert.ok((await c.imageStatus(rt.images.pause)).image, 'the sandbox image stays');
    const logs = kubelet!.logs();
    const at = (re: RegExp): number => {
      const m = re.exec(logs);
      assert.ok(m, `kubelet log has ${re}`);
      return m.index;
    };
    const reclaim = at(/Eviction manager: attempting to reclaim.*nodefs\.available/);
    const imageRemoved = at(new RegExp(`Removing image to free bytes.*${fillerId.replace(/[^a-z0-9]/g, '.')}`));
    const containersRemoved = at(/Container garbage collection removed/);
    const evicted = at(/Eviction manager: pod is evicted successfully.*writer/);
    assert.ok(reclaim < imageRemoved && imageRemoved < evicted && containersRemoved < evicted, 'reclaim, then the eviction');

    // upstream's Evicted event on the pod, and DiskPressure on the node with its event
    await waitFor(async () => api!.list('events', 'default').some((e) => {
      const ev = e as { reason?: string; type?: string; message?: string; involvedObject?: { name?: string } };
      return ev.involvedObject?.name === 'writer' && ev.reason === 'Evicted' && ev.type === 'Warning' && ev.message === msg;
    }), WAIT, 'the Evicted event');
    const dp = await waitFor(async () => (nodeCondition('DiskPressure')?.status === 'True' ? nodeCondition('DiskPressure') : undefined), WAIT, 'DiskPressure on the node');
    assert.equal(dp.reason, 'KubeletHasDiskPressure');
    await waitFor(async () => api!.list('events').some((e) => (e as { reason?: string }).reason === 'NodeHasDiskPressure'), WAIT, 'the NodeHasDiskPressure event');

    // the quiet pod keeps running
    assert.equal(phase('quiet'), 'Running');
    const quiet = await c.listContainers({ label_selector: { 'io.kubernetes.pod.uid': pod('quiet')!.metadata.uid! } });
    assert.ok(quiet.some((x) => x.state === 'CONTAINER_RUNNING'));

    const metrics = await (await fetch(`http://127.0.0.1:${kubelet!.readOnlyPort}/metrics`)).text();
    assert.match(metrics, /kubelet_evictions\{eviction_signal="nodefs\.available"\} 1\b/);
    assert.match(metrics, /kubelet_image_garbage_collected_total\{reason="space"\} 1\b/);
  });

  it('refuses a new pod while the node has DiskPressure', async () => {
    create(podJson('late', runtime!.images.busybox, { command: SLEEP }));
    const late = await waitFor(async () => (phase('late') === 'Failed' ? pod('late') : undefined), WAIT, 'the late pod to be refused');
    assert.equal(late.status?.reason, 'Evicted');
    assert.equal(late.status?.message, 'Pod was rejected: The node had condition: [DiskPressure]. ');
    assert.equal((await cri!.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': late.metadata.uid! } })).length, 0);
  });

  it('frees the evicted pod\'s emptyDir, and DiskPressure ends after the transition period', async () => {
    await waitFor(async () => (await fs!.available()) > thresholdBytes, WAIT, 'the evicted pod\'s emptyDir to be removed');
    const dp = await waitFor(async () => (nodeCondition('DiskPressure')?.status === 'False' ? nodeCondition('DiskPressure') : undefined), WAIT, 'DiskPressure to end');
    assert.equal(dp.reason, 'KubeletHasNoDiskPressure');
    assert.equal(phase('quiet'), 'Running');
  });

  it('evicts the pod eating the inodes under nodefs.inodesFree, with upstream\'s message', async () => {
    assert.ok((await fs!.inodesFree()) > inodeThreshold, 'no inode pressure before the eater');
    create(podJson('inodes', runtime!.images.busybox, { command: `cd /scratch && seq 1 ${FILES} | xargs touch && sync; ${SLEEP_UNTIL_KILLED}`, emptyDir: true }));
    const eater = await waitFor(async () => (phase('inodes') === 'Failed' ? pod('inodes') : undefined), WAIT, 'the inode eater to be evicted').catch(async (err: Error) => {
      const lines = kubelet!.logs().split('\n').filter((l) => /Eviction manager|inodes/.test(l)).slice(-15);
      throw new Error(`${err.message}; pod ${JSON.stringify(pod('inodes')?.status)}; inodes free ${await fs!.inodesFree()}, threshold ${inodeThreshold}\n${lines.join('\n')}`);
    });
    assert.equal(eater.status?.reason, 'Evicted');
    // inodes have no request: no container clause, as upstream
    assert.match(eater.status?.message ?? '', new RegExp(`^The node was low on resource: inodes\\. Threshold quantity: ${parseQuantity(String(inodeThreshold)).toString()}, available: \\d+k?\\. $`));
    assert.equal(phase('quiet'), 'Running', `the quiet pod: ${JSON.stringify(pod('quiet')?.status)}\n${kubelet!.logs().split('\n').filter((l) => /Eviction manager|quiet/.test(l)).slice(-20).join('\n')}`);
    const metrics = await (await fetch(`http://127.0.0.1:${kubelet!.readOnlyPort}/metrics`)).text();
    assert.match(metrics, /kubelet_evictions\{eviction_signal="nodefs\.inodesFree"\} 1\b/);
    await waitFor(async () => (await fs!.inodesFree()) > inodeThreshold, WAIT, 'the eater\'s files to be removed');
  });
});
