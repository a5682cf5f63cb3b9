// kubelet-ts standalone on the VM node (systemd, unified cgroup v2): a static pod runs on
// containerd and its pod cgroup in the unified hierarchy carries the limits kubelet-ts wrote.
// The cgroupfs driver is used here, so the runtime is a second containerd with
// SystemdCgroup = false (scripts/containerd.sh, own root, state and socket); the node's
// own containerd keeps SystemdCgroup = true for the systemd driver.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { access, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { repoRoot } from '../fixtures/runtime.js';
import { assertInVmNode, cgroupOf, run, VM } from './vm-env.js';

// Under software emulation everything is ~10x slower than on this machine's host.
const WAIT = 300_000;
const MEMORY = 32 * 1024 * 1024;
const CGROUPFS_ENV = {
  ...process.env,
  KTS_NODE_DIR: '/var/lib/kts-cgroupfs',
  KTS_RUN_DIR: '/run/kts-cgroupfs',
  KTS_REGISTRY_PORT: '5000',
  KTS_START_TIMEOUT: '120',
};

async function exists(p: string): Promise<boolean> {
  return access(p).then(() => true, () => false);
}

function containerdScript(cmd: string) {
  return run('bash', [join(repoRoot(), 'scripts', 'containerd.sh'), cmd], { env: CGROUPFS_ENV, timeoutMs: 300_000 });
}

describe('kubelet-ts standalone on the VM node (cgroupfs driver, cgroup v2)', () => {
  let endpoint = '';
  let cri: CriClient;
  let kubelet: KubeletProcess | undefined;

  before(async () => {
    assertInVmNode();
    const started = await containerdScript('start');
    assert.equal(started.code, 0, `containerd.sh start: ${started.stderr}`);
    const env = await containerdScript('env');
    endpoint = /^CONTAINER_RUNTIME_ENDPOINT=(.*)$/m.exec(env.stdout)?.[1] ?? '';
    assert.match(endpoint, /^unix:\/\//);
    cri = new CriClient({ runtimeEndpoint: endpoint, timeoutMs: 120_000 });
    kubelet = await startKubelet({ endpoint, readyTimeoutMs: WAIT });
  });

  after(async () => {
    if (kubelet) {
      for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
      await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'vm-static' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
      await kubelet.stop();
    }
    cri?.close();
    await containerdScript('stop');
  });

  it('runs a Guaranteed static pod whose v2 pod cgroup has memory.max = its limit', async () => {
    const k = kubelet!;
    await writeFile(join(k.manifestDir, 'vm-static.json'), JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'vm-static', labels: { test: 'vm-static' } },
      spec: {
        terminationGracePeriodSeconds: 2,
        containers: [{
          name: 'main',
          image: VM.images.busybox,
          command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
          resources: { limits: { cpu: '100m', memory: '32Mi' } },
        }],
      },
    }));
    const pod = await waitFor(async () => {
      const p = (await k.pods()).find((x: Pod) => x.metadata.name === `vm-static-${k.nodeName}`);
      return p?.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.state.running ? p : undefined;
    }, WAIT, 'the static pod to run');
    assert.equal(pod.status?.qosClass, 'Guaranteed');
    const uid = pod.metadata.uid!;
    const [c] = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': uid } });
    assert.ok(c, 'the runtime holds the container');
    const pid = (JSON.parse((await cri.containerStatus(c.id, true)).info.info ?? '{}') as { pid?: number }).pid;
    assert.ok(pid && pid > 1);

    // Unified hierarchy only: the pod cgroup is /kubepods/pod<uid> under /sys/fs/cgroup,
    // the container's cgroup sits inside it, and both carry the 32Mi limit.
    const podDir = `/sys/fs/cgroup/kubepods/pod${uid}`;
    assert.equal(await cgroupOf(pid), `/kubepods/pod${uid}/${c.id}`);
    assert.equal((await readFile(join(podDir, 'memory.max'), 'utf8')).trim(), String(MEMORY));
    assert.equal((await readFile(join(podDir, c.id, 'memory.max'), 'utf8')).trim(), String(MEMORY));
    // 100m of CPU: a 10 ms quota per 100 ms period on the container.
    assert.equal((await readFile(join(podDir, c.id, 'cpu.max'), 'utf8')).trim(), '10000 100000');

    // Removing the manifest stops the pod and removes its cgroup.
    await rm(join(k.manifestDir, 'vm-static.json'));
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': uid } })).length === 0, WAIT, 'the sandbox to be removed');
    await waitFor(async () => !(await exists(podDir)), WAIT, 'the pod cgroup to be removed');
  });
});
