// A pod sandbox the runtime cannot stop is visible, not silent. containerd 1.6 answers
// StopPodSandbox with "failed to remove netns: unlinkat /var/run/netns/cni-...: device or
// resource busy" when the pod's netns file is mounted twice in its mount namespace (as after a
// recursive bind of /run/netns over itself, which `ip netns add` does the first time, while
// pods run). The test stacks a second bind mount on one pod's netns file (and removes it
// again), then replaces that static pod: the old pod records FailedKillPod with the runtime's
// message, the replacement's status names the old pod it waits on, and once the extra mount
// is gone the old sandbox is removed and the replacement runs.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const run = promisify(execFile);
const WAIT = 90_000;
const LABEL = { test: 'netns-busy' };

/** How many mounts this mount namespace has at `path`. */
async function mountsAt(path: string): Promise<number> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info.split('\n').filter((l) => l.split(' ')[4] === path).length;
}

/** Unmounts every mount at `path` (what the test stacked, and what the runtime left). */
async function unmountAll(path: string): Promise<void> {
  while ((await mountsAt(path)) > 0) await run('umount', [path]);
}

describe('a pod sandbox the runtime cannot stop', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;
  let netns: string | undefined;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    // events are logged at verbosity 3
    kubelet = await startKubelet({ endpoint: rt.endpoint, extraArgs: ['-v', '3'] });
  });

  after(async () => {
    if (netns) await unmountAll(netns).catch(() => undefined);
    await rm(join(kubelet.manifestDir, 'stuck.json'), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: LABEL })).length === 0, WAIT, 'pod removal').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  it('records FailedKillPod, names the old pod on the waiting replacement, and recovers once the netns can go', async () => {
    const file = join(kubelet.manifestDir, 'stuck.json');
    const manifest = (value: string): string => JSON.stringify({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name: 'stuck', labels: LABEL },
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'main', image: rt.images.busybox, env: [{ name: 'V', value }], command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'] }],
      },
    });
    const fullName = `stuck-${kubelet.nodeName}`;
    const named = async (): Promise<Pod | undefined> => (await kubelet.pods()).find((p) => p.metadata.name === fullName);

    await writeFile(file, manifest('first'));
    const first = await waitFor(async () => {
      const p = await named();
      return p?.status?.phase === 'Running' ? p : undefined;
    }, WAIT, 'the first pod to run');
    const oldUID = first.metadata.uid!;
    const [sandbox] = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': oldUID } });
    assert.ok(sandbox);
    const verbose = JSON.stringify((await cri.podSandboxStatus(sandbox.id, true)).info ?? {});
    netns = /\/var\/run\/netns\/cni-[0-9a-f-]+/.exec(verbose)?.[0];
    assert.ok(netns, 'the sandbox has a CNI network namespace file');
    assert.equal(await mountsAt(netns.replace(/^\/var\/run\//, '/run/')), 1);
    // a second mount of the same netns file in the runtime's mount namespace
    await run('mount', ['--bind', netns, netns]);
    netns = netns.replace(/^\/var\/run\//, '/run/');
    assert.equal(await mountsAt(netns), 2);

    await writeFile(file, manifest('second'));
    await waitFor(async () => /reason="?FailedKillPod"?[^\n]*error killing pod: [^\n]*device or resource busy/.test(kubelet.logs()), WAIT,
      'a FailedKillPod event with the runtime\'s message');
    assert.match(kubelet.logs(), new RegExp(`Event occurred[^\\n]*Pod default/${fullName}[^\\n]*FailedKillPod`));
    const waiting = await waitFor(async () => {
      const p = await named();
      return p && p.metadata.uid !== oldUID && p.status?.reason === 'PreviousPodNotTerminated' ? p : undefined;
    }, WAIT, 'the replacement to say what it waits on');
    assert.equal(waiting.status?.phase, 'Pending');
    assert.equal(waiting.status?.qosClass, 'BestEffort', 'the rest of the status is what a first sync shows');
    assert.equal(waiting.status?.containerStatuses?.[0]?.state.waiting?.reason, 'ContainerCreating');
    assert.match(waiting.status?.message ?? '', new RegExp(`previous pod default/${fullName} \\(UID ${oldUID}\\)`));
    assert.match(waiting.status?.message ?? '', /device or resource busy/);
    const stuck = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': oldUID } });
    assert.equal(stuck.length, 1, 'the old sandbox is still in the runtime');
    assert.equal(stuck[0]!.state, 'SANDBOX_NOTREADY');

    // the netns file can go again: the worker's retry stops and removes the old sandbox
    await unmountAll(netns);
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': oldUID } })).length === 0, WAIT, 'the old sandbox to be removed');
    const second = await waitFor(async () => {
      const p = await named();
      return p && p.metadata.uid !== oldUID && p.status?.phase === 'Running' ? p : undefined;
    }, WAIT, 'the replacement to run');
    assert.notEqual(second.status?.reason, 'PreviousPodNotTerminated');
    assert.equal(second.status?.message, undefined);
  });
});
