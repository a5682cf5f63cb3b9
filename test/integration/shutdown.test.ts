// SIGTERM while kubelet-ts is terminating pods with a long preStop hook and grace period: the
// process exits promptly with 0 and leaves the containers running (as upstream's kubelet).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CriClient } from '../../src/runtime/cri-client.js';
import { discoverCgroupMounts } from '../../src/cgroups/index.js';
import { PodContainerManager } from '../../src/cm/pod-container-manager.js';
import { createLogger } from '../../src/util/log.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const LABEL = { test: 'shutdown' };
/** Far more than the shutdown bound; the old code waited out a 300s preStop and the grace. */
const EXIT_LIMIT_MS = 20_000;

function manifest(name: string, image: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: LABEL },
    spec: {
      hostNetwork: true,
      terminationGracePeriodSeconds: 300,
      containers: [{
        name: 'main',
        image,
        // Ignores SIGTERM: only the grace period's end would stop it.
        command: ['sh', '-c', 'trap "" TERM; while true; do sleep 1; done'],
        lifecycle: { preStop: { exec: { command: ['sleep', '300'] } } },
      }],
    },
  });
}

describe('shutdown of kubelet-ts', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    kubelet = await startKubelet({ endpoint: rt.endpoint });
  });

  after(async () => {
    await kubelet.stop();
    // Tear down what kubelet-ts was told to leave running.
    const cgroups = new PodContainerManager({ mounts: await discoverCgroupMounts(), cgroupRoot: '', log: createLogger() });
    for (const sb of await cri.listPodSandbox({ label_selector: LABEL })) {
      for (const c of await cri.listContainers({ pod_sandbox_id: sb.id })) {
        await cri.stopContainer(c.id, 0).catch(() => undefined);
        await cri.removeContainer(c.id).catch(() => undefined);
      }
      await cri.stopPodSandbox(sb.id).catch(() => undefined);
      await cri.removePodSandbox(sb.id).catch(() => undefined);
      const uid = sb.labels['io.kubernetes.pod.uid'];
      for (const [cgUID, name] of await cgroups.listPodCgroups()) if (cgUID === uid) await cgroups.remove(name).catch(() => undefined);
    }
    cri.close();
  });

  it('exits 0 within a bounded time on SIGTERM while pods are terminating, leaving them running', async () => {
    const names = ['slow-a', 'slow-b'];
    for (const n of names) await writeFile(join(kubelet.manifestDir, `${n}.json`), manifest(n, rt.images.busybox));
    await waitFor(async () => {
      const pods = await kubelet.pods();
      return names.every((n) => pods.find((p) => p.metadata.name === `${n}-${kubelet.nodeName}`)?.status?.containerStatuses?.[0]?.state.running);
    }, WAIT, 'both pods to run');

    // Removing the manifests starts termination: the preStop hooks (300s) are now running.
    for (const n of names) await rm(join(kubelet.manifestDir, `${n}.json`));
    await waitFor(async () => (kubelet.logs().match(/Terminating pod/g) ?? []).length >= 2, WAIT, 'termination to start');
    await new Promise((r) => setTimeout(r, 1000));

    const exited = new Promise<number | null>((r) => kubelet.child.once('exit', (code) => r(code)));
    kubelet.child.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), EXIT_LIMIT_MS))]);
    assert.equal(code, 0, `kubelet-ts did not exit 0 within ${EXIT_LIMIT_MS}ms of SIGTERM:\n${kubelet.logs().slice(-3000)}`);
    assert.match(kubelet.logs(), /Shutting down; pods keep running/);

    const containers = [];
    for (const sb of await cri.listPodSandbox({ label_selector: LABEL })) containers.push(...await cri.listContainers({ pod_sandbox_id: sb.id }));
    const running = containers.filter((c) => c.state === 'CONTAINER_RUNNING');
    assert.equal(running.length, 2, `both containers keep running: ${JSON.stringify(containers.map((c) => c.state))}`);
  });
});
