// The node's containerd (Debian's unit, configured as kubeadm nodes run it) answers the CRI
// through the project's client, and with SystemdCgroup = true its containers are systemd
// scopes inside the slice named as the pod's cgroup parent, with the limits as unit properties.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { access, readFile } from 'node:fs/promises';
import { CriClient } from '../../src/runtime/cri-client.js';
import type { ContainerConfig, PodSandboxConfig } from '../../src/runtime/cri-types.js';
import { assertInVmNode, cgroupOf, run, unitProperty, VM } from './vm-env.js';

const SLICE = 'ktsvmtest.slice';
const LIMIT = 64 * 1024 * 1024;

async function exists(p: string): Promise<boolean> {
  return access(p).then(() => true, () => false);
}

describe('containerd in the VM node (CRI, SystemdCgroup)', () => {
  let cri: CriClient;
  let sandboxID = '';

  before(() => {
    assertInVmNode();
    cri = new CriClient({ runtimeEndpoint: VM.endpoint, timeoutMs: 120_000 });
  });

  after(async () => {
    if (sandboxID) {
      await cri.stopPodSandbox(sandboxID).catch(() => undefined);
      await cri.removePodSandbox(sandboxID).catch(() => undefined);
    }
    cri?.close();
    await run('systemctl', ['stop', SLICE]);
  });

  it('answers Version and Status, and its CRI config says SystemdCgroup = true for runc', async () => {
    const v = await cri.version();
    assert.equal(v.runtime_name, 'containerd');
    assert.equal(v.runtime_api_version, 'v1');
    const st = await cri.status(true);
    const ready = Object.fromEntries(st.status!.conditions.map((c) => [c.type, c.status]));
    assert.equal(ready.RuntimeReady, true);
    assert.equal(ready.NetworkReady, true, 'the bridge CNI config is loaded');
    const config = JSON.parse(st.info.config ?? '{}') as { containerd?: { runtimes?: Record<string, { options?: { SystemdCgroup?: boolean } }> } };
    assert.equal(config.containerd?.runtimes?.runc?.options?.SystemdCgroup, true, `CRI config: ${st.info.config}`);
  });

  it('pulls the test images from the host registries forwarded into the node', async () => {
    for (const image of [VM.images.pause, VM.images.busybox]) {
      const r = await cri.pullImage(image);
      assert.match(r.image_ref, /^sha256:[0-9a-f]{64}$/);
      const status = await cri.imageStatus(image);
      assert.ok(status.image?.repo_tags.includes(image), `${image} is listed after the pull`);
    }
  });

  it('runs a container as a systemd scope in the pod slice, with memory.max and MemoryMax set to its limit', async () => {
    const uid = `vmtest-${process.pid}`;
    const sandboxConfig: PodSandboxConfig = {
      metadata: { name: 'scope-check', namespace: 'kts-vm', uid, attempt: 0 },
      labels: { 'io.kubernetes.pod.uid': uid },
      linux: { cgroup_parent: SLICE, security_context: { namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } } },
    };
    sandboxID = (await cri.runPodSandbox(sandboxConfig)).pod_sandbox_id;
    const config: ContainerConfig = {
      metadata: { name: 'sleeper', attempt: 0 },
      image: { image: VM.images.busybox },
      command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
      linux: {
        resources: { memory_limit_in_bytes: LIMIT },
        security_context: { namespace_options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } },
      },
    };
    const id = (await cri.createContainer(sandboxID, config, sandboxConfig)).container_id;
    await cri.startContainer(id);
    const info = JSON.parse((await cri.containerStatus(id, true)).info.info ?? '{}') as { pid?: number };
    assert.ok(info.pid && info.pid > 1, 'containerd reports the container pid');

    // runc's systemd driver: a transient scope unit named after the container, in the slice.
    const scope = `cri-containerd-${id}.scope`;
    assert.equal(await cgroupOf(info.pid), `/${SLICE}/${scope}`);
    assert.equal(await unitProperty(scope, 'ActiveState'), 'active');
    assert.equal(await unitProperty(scope, 'Slice'), SLICE);
    assert.equal(await unitProperty(scope, 'MemoryMax'), String(LIMIT));
    assert.equal((await readFile(`/sys/fs/cgroup/${SLICE}/${scope}/memory.max`, 'utf8')).trim(), String(LIMIT));
    assert.equal(await unitProperty(SLICE, 'ActiveState'), 'active');

    await cri.stopContainer(id, 5);
    await cri.removeContainer(id);
    // The scope is gone with the container (systemd removes the unit and its cgroup).
    assert.equal(await exists(`/sys/fs/cgroup/${SLICE}/${scope}`), false);
  });
});
