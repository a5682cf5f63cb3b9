// The pod sync path and the volume manager: volumes before any container, a FailedMount event
// and no runtime work when they fail, and mounts undone before the pod directory goes.

import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { PodManager } from '../../src/kubelet/pod-manager.js';
import { PodSyncer, setupDataDirs } from '../../src/kubelet/pod-sync.js';
import { WorkQueue } from '../../src/kubelet/work-queue.js';
import type { PodSyncExtras, PodSyncResult, RuntimePodStatus } from '../../src/runtime/types.js';
import { StatusManager } from '../../src/status/status-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import type { Mounter, MountPoint } from '../../src/volumemanager/mounter.js';
import { VolumeManager } from '../../src/volumemanager/volume-manager.js';
import { CgroupsDouble, RuntimeRecorder, emptyStatus, loggerDouble } from './doubles.js';

class ExtrasRecorder extends RuntimeRecorder {
  extras: PodSyncExtras | undefined;
  override async syncPod(pod: Pod, _status?: RuntimePodStatus, extras?: PodSyncExtras): Promise<PodSyncResult> {
    this.extras = extras;
    return super.syncPod(pod);
  }
}

class MountTable implements Mounter {
  mounts: MountPoint[] = [];
  unmounted: string[] = [];
  async mountTmpfs(target: string): Promise<void> { this.mounts.push({ mountPoint: target, fsType: 'tmpfs' }); }
  async unmount(target: string): Promise<void> {
    this.unmounted.push(target);
    this.mounts = this.mounts.filter((m) => m.mountPoint !== target);
  }
  async list(): Promise<MountPoint[]> { return [...this.mounts]; }
}

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-podsync-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

function setup(): { syncer: PodSyncer; runtime: ExtrasRecorder; events: string[]; mounter: MountTable; statusManager: StatusManager } {
  const clock = new FakeClock();
  const runtime = new ExtrasRecorder();
  const events: string[] = [];
  const mounter = new MountTable();
  const statusManager = new StatusManager();
  const log = loggerDouble();
  const syncer = new PodSyncer({
    runtime,
    statusManager,
    podManager: new PodManager(),
    workQueue: new WorkQueue(clock),
    cgroups: new CgroupsDouble(),
    clock,
    log,
    rootDir: root,
    podLogsDir: join(root, 'logs'),
    syncFrequencyMs: 60_000,
    hostIPs: () => ['10.0.0.1'],
    volumes: new VolumeManager({ rootDir: root, clock, log, nodeName: 'n', hostIPs: () => ['10.0.0.1'], mounter }),
    recordEvent: (pod, type, reason, message) => void events.push(`${pod.metadata.name} ${type} ${reason}: ${message}`),
  });
  return { syncer, runtime, events, mounter, statusManager };
}

const pod = (uid: string, volumes: Pod['spec']['volumes']): Pod => ({
  metadata: { uid, name: `p-${uid}`, namespace: 'default' },
  spec: { volumes, containers: [{ name: 'c', image: 'busybox', volumeMounts: (volumes ?? []).map((v) => ({ name: v.name, mountPath: `/${v.name}` })) }] },
});

describe('pod sync with volumes', () => {
  it('a volume that cannot be set up is a FailedMount event, no runtime work, and the container waits in ContainerCreating', async () => {
    const { syncer, runtime, events, statusManager } = setup();
    const p = pod('u1', [{ name: 'cfg', configMap: { name: 'settings' } }]);
    await assert.rejects(syncer.syncPod(p, emptyStatus('u1', 'p-u1')), /Unable to attach or mount volumes/);
    assert.deepEqual(runtime.calls, []);
    assert.equal(events.length, 1);
    assert.match(events[0]!, /^p-u1 Warning FailedMount: Unable to attach or mount volumes: unmounted volumes=\[cfg\], unattached volumes=\[\], failed to process volumes=\[cfg\]: MountVolume.SetUp failed for volume "cfg" : configmap "default\/settings": not supported due to running kubelet in standalone mode$/);
    const st = statusManager.getPodStatus('u1');
    assert.equal(st?.phase, 'Pending');
    assert.equal(st?.containerStatuses?.[0]?.state.waiting?.reason, 'ContainerCreating');
  });

  it('set-up volumes reach the runtime as the container\'s mounts', async () => {
    const { syncer, runtime } = setup();
    const p = pod('u2', [{ name: 'cache', emptyDir: {} }]);
    await syncer.syncPod(p, emptyStatus('u2', 'p-u2'));
    assert.deepEqual(runtime.calls, ['syncPod u2']);
    const mounts = await runtime.extras!.containerMounts!(p.spec.containers[0]!, [], []);
    assert.deepEqual(mounts.map((m) => [m.container_path, m.host_path]), [['/cache', join(root, 'pods', 'u2', 'volumes', 'kubernetes.io~empty-dir', 'cache')]]);
  });

  it('a removed pod\'s mounts are undone before its directory is removed', async () => {
    const { syncer, mounter } = setup();
    const p = pod('u3', [{ name: 'shm', emptyDir: { medium: 'Memory' } }]);
    await syncer.syncPod(p, emptyStatus('u3', 'p-u3'));
    const shm = join(root, 'pods', 'u3', 'volumes', 'kubernetes.io~empty-dir', 'shm');
    assert.deepEqual(mounter.mounts.map((m) => m.mountPoint), [shm]);
    await syncer.syncTerminatedPod(p, emptyStatus('u3', 'p-u3'), true);
    assert.deepEqual(mounter.unmounted, [shm]);
    await assert.rejects(stat(join(root, 'pods', 'u3')));
  });

  it('makes a pod\'s data dirs once; a pod removed and added again (a static pod keeps its uid) gets them again', async () => {
    const { syncer } = setup();
    const p = pod('u5', []);
    const dirs = join(root, 'pods', 'u5');
    await syncer.syncPod(p, emptyStatus('u5', 'p-u5'));
    assert.ok((await stat(join(dirs, 'containers'))).isDirectory());
    assert.ok((await stat(join(dirs, 'volumes'))).isDirectory());
    assert.ok(syncer.podDirsMade.has('u5'));
    await syncer.syncTerminatedPod(p, emptyStatus('u5', 'p-u5'), true);
    await assert.rejects(stat(dirs));
    assert.equal(syncer.podDirsMade.has('u5'), false, 'removed with the pod dir');
    await syncer.syncPod(p, emptyStatus('u5', 'p-u5'));
    assert.ok((await stat(join(dirs, 'containers'))).isDirectory(), 'made again for the re-added pod');
    assert.ok((await stat(join(dirs, 'volumes'))).isDirectory());
  });

  it('the root dir, its pods dir and a pod\'s data dirs are made 0750, as upstream', async () => {
    const fresh = join(root, 'fresh-root');
    await setupDataDirs(fresh);
    assert.equal((await stat(fresh)).mode & 0o777, 0o750);
    assert.equal((await stat(join(fresh, 'pods'))).mode & 0o777, 0o750);
    const { syncer } = setup();
    await syncer.syncPod(pod('u6', []), emptyStatus('u6', 'p-u6'));
    for (const d of ['', 'containers', 'volumes']) assert.equal((await stat(join(root, 'pods', 'u6', d))).mode & 0o777, 0o750, `pods/u6/${d}`);
  });

  it('a terminated pod still wanted (evicted, finished) loses its volumes, emptyDir data included, and keeps its directory', async () => {
    const { syncer, mounter } = setup();
    const p = pod('u4', [{ name: 'scratch', emptyDir: {} }, { name: 'shm', emptyDir: { medium: 'Memory' } }]);
    await syncer.syncPod(p, emptyStatus('u4', 'p-u4'));
    const volumes = join(root, 'pods', 'u4', 'volumes');
    const scratch = join(volumes, 'kubernetes.io~empty-dir', 'scratch');
    await writeFile(join(scratch, 'fill'), Buffer.alloc(4096));
    await syncer.syncTerminatedPod(p, emptyStatus('u4', 'p-u4'), false);
    assert.deepEqual(mounter.unmounted, [join(volumes, 'kubernetes.io~empty-dir', 'shm')]);
    await assert.rejects(stat(volumes), /ENOENT/);
    assert.ok((await stat(join(root, 'pods', 'u4'))).isDirectory());
  });
});
