// A pod that asks for a user namespace (hostUsers: false) never runs as the host's root, on
// real containerd: where the runtime's default handler reports user namespace support, its
// container's /proc/self/uid_map maps 0 to a range that is not 0; where it does not (containerd
// 1.6, which reports no runtime handler and would ignore userns_options), no sandbox and no
// container is ever made for it, it stays Pending, and FailedCreatePodSandBox says why, in
// upstream's words. A pod with hostUsers: true beside it runs as before.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { access, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const NO_USERNS = "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces: the handler \"\" is not known";

function manifest(name: string, image: string, hostUsers: boolean): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { test: 'userns' } },
    spec: {
      hostUsers,
      terminationGracePeriodSeconds: 2,
      containers: [{ name: 'main', image, command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'] }],
    },
  });
}

describe('hostUsers: false on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    // -v 3: the kubelet logs the events it records
    kubelet = await startKubelet({ endpoint: rt.endpoint, extraArgs: ['-v', '3'] });
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'userns' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  const podNamed = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);

  it('never runs it as the host\'s root', async () => {
    // runtime_handlers: newer runtimes only (containerd 1.6 sends none)
    const handlers = (await cri.status()).runtime_handlers ?? [];
    const supported = handlers.find((h) => h.name === '')?.features?.user_namespaces === true;
    await writeFile(join(kubelet.manifestDir, 'hostusers.json'), manifest('hostusers', rt.images.busybox, true));
    await writeFile(join(kubelet.manifestDir, 'userns.json'), manifest('userns', rt.images.busybox, false));

    // the pod that shares the host's users runs as before (userns_options NODE is harmless)
    await waitFor(async () => (await podNamed('hostusers'))?.status?.phase === 'Running', WAIT, 'hostusers to run');
    const pod = await waitFor(() => podNamed('userns'), WAIT, 'the userns pod to be seen');
    const uid = pod.metadata.uid!;
    const selector = { label_selector: { 'io.kubernetes.pod.uid': uid } };

    if (supported) {
      const running = await waitFor(async () => (await podNamed('userns'))?.status?.phase === 'Running', WAIT, 'userns to run');
      assert.ok(running);
      const [c] = await cri.listContainers(selector);
      const out = Buffer.from((await cri.execSync(c!.id, ['cat', '/proc/self/uid_map'], 10)).stdout).toString().trim();
      const [inside, outside, length] = out.split(/\s+/).map(Number);
      assert.equal(inside, 0);
      assert.notEqual(outside, 0, `uid_map ${out} maps root in the pod to root on the host`);
      assert.notEqual(length, 4294967295, `uid_map ${out} is the identity`);
      return;
    }

    // The runtime cannot: the sandbox fails as upstream's does, again on each retry.
    // the log quotes values as JSON strings
    const event = `reason="FailedCreatePodSandBox" message=${JSON.stringify(NO_USERNS)}`;
    const events = () => kubelet.logs().split('\n').filter((l) => l.includes(event) && l.includes(pod.metadata.name!));
    await waitFor(async () => events().length >= 2, WAIT, `two events ${event} in the log`);
    assert.deepEqual(await cri.listPodSandbox(selector), [], 'the runtime has no sandbox for the pod');
    assert.deepEqual(await cri.listContainers(selector), [], 'the runtime has no container for the pod');
    const now = await podNamed('userns');
    assert.equal(now?.status?.phase, 'Pending');
    assert.equal(now?.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
    // nothing was allocated for a pod that got no sandbox
    await assert.rejects(access(join(kubelet.rootDir, 'pods', uid, 'userns')), { code: 'ENOENT' });
  });
});
