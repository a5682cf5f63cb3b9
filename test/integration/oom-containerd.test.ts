// A container on the real containerd, OOM-killed: the per-cgroup source (eventfd on v1,
// inotify on v2) and the eBPF source see the victim (the container's init process) in the
// container's memory cgroup, and the runtime's ContainerStatus says OOMKilled. Needs root and
// the test runtime (scripts/setup-node.sh). The layout comes from cgroup discovery; the hybrid
// hosts these tests run on keep memory on v1, so the v2 branches do not run here.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { crossCheckTerminatedReason } from '../../src/oom/events.js';
import { OomWatcher } from '../../src/oom/oom-watcher.js';
import type { OomEvent } from '../../src/oom/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import type { ContainerConfig, PodSandboxConfig } from '../../src/runtime/cri-types.js';
import { allHierarchies, cgroupDir, cgroupRefFor, discoverCgroupMounts, memoryHierarchy } from '../../src/cgroups/index.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { removeCgroupDir, waitUntil } from '../fixtures/oom-cgroup.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { ebpfBuildExpected, realNative } from '../oom/helpers.js';

const LIMIT = 32 << 20;

function nextOom(w: OomWatcher, pred: (e: OomEvent) => boolean, what: string, timeoutMs = 30_000): Promise<OomEvent> {
  const p = new Promise<OomEvent>((resolve, reject) => {
    const timer = setTimeout(() => { w.off('oom', on); reject(new Error(`no OOM event for ${what} within ${timeoutMs} ms`)); }, timeoutMs);
    const on = (e: OomEvent): void => {
      if (!pred(e)) return;
      clearTimeout(timer);
      w.off('oom', on);
      resolve(e);
    };
    w.on('oom', on);
  });
  p.catch(() => undefined);
  return p;
}

describe('OOM kill of a container on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let trigger: string;
  const podUID = randomUUID();
  const podCgroup = `/kubepods/burstable/pod${podUID}`;
  let sandboxID = '';
  let containerID = '';

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 60_000 });
    trigger = await mkdtemp(join(tmpdir(), 'kts-oom-trigger-'));
  });

  after(async () => {
    if (containerID) await cri.removeContainer(containerID).catch(() => undefined);
    if (sandboxID) {
      await cri.stopPodSandbox(sandboxID).catch(() => undefined);
      await cri.removePodSandbox(sandboxID).catch(() => undefined);
    }
    cri?.close();
    // runc leaves the pod-level cgroup (the kubelet owns it): remove it in every hierarchy.
    for (const m of allHierarchies(await discoverCgroupMounts())) {
      await removeCgroupDir(cgroupDir(m, podCgroup), 50).catch(() => undefined);
    }
    await rm(trigger, { recursive: true, force: true });
  });

  it('is reported by the eventfd and eBPF sources with the right pid and cgroup, and the runtime says OOMKilled', async () => {
    setLogSink(() => {});
    const native = realNative();
    const logger = createLogger();
    const expectEbpf = await ebpfBuildExpected();
    const viaCgroup = new OomWatcher({ mode: 'cgroup', native, logger });
    const viaEbpf = new OomWatcher({ mode: expectEbpf.expected ? 'ebpf' : 'auto', native, logger });
    try {
      await viaCgroup.start();
      await viaEbpf.start();
      await cri.pullImage(rt.images.busybox);
      const sandboxConfig: PodSandboxConfig = {
        metadata: { name: 'oom-victim', namespace: 'kts-oom-test', uid: podUID, attempt: 0 },
        labels: { 'io.kubernetes.pod.name': 'oom-victim', 'io.kubernetes.pod.namespace': 'kts-oom-test', 'io.kubernetes.pod.uid': podUID, test: 'oom' },
        linux: { cgroup_parent: podCgroup, security_context: { namespace_options: { network: 'NODE', pid: 'CONTAINER', ipc: 'POD' } } },
      };
      sandboxID = (await cri.runPodSandbox(sandboxConfig)).pod_sandbox_id;
      const config: ContainerConfig = {
        metadata: { name: 'hog', attempt: 0 },
        image: { image: rt.images.busybox },
        // Waits for the test to arm its watches, then doubles a string until the limit.
        command: ['sh', '-c', 'while [ ! -e /trigger/go ]; do sleep 0.05; done; x=0123456789abcdef; while :; do x=$x$x; done'],
        mounts: [{ container_path: '/trigger', host_path: trigger, readonly: true }],
        labels: { 'io.kubernetes.container.name': 'hog', 'io.kubernetes.pod.uid': podUID },
        linux: {
          resources: { memory_limit_in_bytes: LIMIT },
          security_context: { namespace_options: { network: 'NODE', pid: 'CONTAINER', ipc: 'POD' } },
        },
      };
      containerID = (await cri.createContainer(sandboxID, config, sandboxConfig)).container_id;
      await cri.startContainer(containerID);
      const info = (await cri.containerStatus(containerID, true)).info;
      const pid = (JSON.parse(info.info ?? '{}') as { pid?: number }).pid;
      assert.ok(pid && pid > 1, `containerd reports the container's pid (${pid})`);

      const mounts = await discoverCgroupMounts();
      const perCgroup = memoryHierarchy(mounts)?.version === 2 ? 'inotify' : 'eventfd';
      const ref = cgroupRefFor(mounts, `${podCgroup}/${containerID}`);
      const watched = await Promise.all([viaCgroup, viaEbpf].map((w) => w.watchContainer(podUID, 'hog', containerID, ref, { podName: 'oom-victim', podNamespace: 'kts-oom-test' })));
      const inode = watched[0]!.inode;
      assert.equal(watched[0]!.watch, perCgroup);
      assert.ok(inode !== undefined && watched[1]!.inode === inode);

      const fromEventfd = nextOom(viaCgroup, (e) => e.containerID === containerID, perCgroup);
      const fromEbpf = nextOom(viaEbpf, (e) => e.containerID === containerID, 'eBPF');
      await writeFile(join(trigger, 'go'), '');

      const ev = await fromEventfd;
      assert.equal(ev.source, perCgroup);
      if (perCgroup === 'eventfd' || ev.pid !== undefined) {
        // v2 names the victim from the kernel's OOM report, which the kernel may rate-limit.
        assert.equal(ev.pid, pid);
        assert.equal(ev.comm, 'sh');
      }
      assert.equal(ev.cgroupInode, inode);
      assert.equal(ev.podUID, podUID);
      assert.equal(ev.podName, 'oom-victim');

      const eb = await fromEbpf;
      assert.equal(eb.source, expectEbpf.expected ? 'ebpf' : perCgroup);
      if (expectEbpf.expected || perCgroup === 'eventfd' || eb.pid !== undefined) assert.equal(eb.pid, pid);
      assert.equal(eb.cgroupInode, inode);
      assert.equal(eb.scope, 'container');
      if (expectEbpf.expected) {
        assert.equal(eb.cgroupPath, `${podCgroup}/${containerID}`);
        assert.equal(eb.memory?.cgroupLimitBytes, LIMIT);
      }

      const status = await waitUntil(async () => {
        const s = (await cri.containerStatus(containerID)).status;
        return s?.state === 'CONTAINER_EXITED' ? s : undefined;
      }, 30_000, 'the container to exit');
      assert.equal(status.reason, 'OOMKilled');
      assert.equal(status.exit_code, 137);
      assert.deepEqual(crossCheckTerminatedReason(status.reason, status.exit_code, viaCgroup.oomKills(containerID)), { reason: 'OOMKilled', agrees: true });
      assert.equal(viaEbpf.oomKills(containerID), 1);
    } finally {
      viaCgroup.stop();
      viaEbpf.stop();
      setLogSink((line) => process.stderr.write(line + '\n'));
    }
  });
});
