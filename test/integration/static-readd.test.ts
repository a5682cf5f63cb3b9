// A static pod whose manifest is removed and put back (same content, so the same UID) runs
// again once its first life was cleaned up.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const LABEL = { test: 'static-readd' };

describe('a static pod removed and re-added', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    kubelet = await startKubelet({ endpoint: rt.endpoint });
  });

  after(async () => {
    await rm(join(kubelet.manifestDir, 'again.json'), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: LABEL })).length === 0, WAIT, 'pod removal').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  it('starts again under the same UID', async () => {
    const file = join(kubelet.manifestDir, 'again.json');
    const manifest = JSON.stringify({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name: 'again', labels: LABEL },
      spec: {
        hostNetwork: true, terminationGracePeriodSeconds: 1,
        containers: [{ name: 'main', image: rt.images.busybox, command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'] }],
      },
    });
    const running = async (): Promise<Pod | undefined> =>
      (await kubelet.pods()).find((p) => p.metadata.name === `again-${kubelet.nodeName}` && p.status?.containerStatuses?.[0]?.state.running);

    await writeFile(file, manifest);
    const first = await waitFor(running, WAIT, 'first run');
    await rm(file);
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: LABEL })).length === 0, WAIT, 'the pod to be cleaned up');

    await writeFile(file, manifest);
    const second = await waitFor(running, WAIT, 'second run');
    assert.equal(second.metadata.uid, first.metadata.uid, 'same manifest, same UID');
    const sandboxes = await cri.listPodSandbox({ label_selector: LABEL });
    assert.equal(sandboxes.filter((s) => s.state === 'SANDBOX_READY').length, 1);
  });
});
