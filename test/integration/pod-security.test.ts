// Pod security settings on a real containerd, through the kubelet-ts CLI and its flags: a safe
// sysctl is set inside the pod, an unsafe one is refused before any sandbox exists, one allowed
// by --allowed-unsafe-sysctls (prefix form) is set, and --seccomp-default confines a container
// that asks for nothing with the runtime's default seccomp filter.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { isAppArmorEnabled } from '../../src/runtime/apparmor.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const LABEL = 'pod-security';

function manifest(name: string, image: string, sysctls: Record<string, string>, securityContext?: object): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { test: LABEL } },
    spec: {
      terminationGracePeriodSeconds: 1,
      securityContext: { sysctls: Object.entries(sysctls).map(([n, value]) => ({ name: n, value })) },
      containers: [{
        name: 'main',
        image,
        command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
        ...(securityContext ? { securityContext } : {}),
      }],
    },
  });
}

describe('pod security settings on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    kubelet = await startKubelet({ endpoint: rt.endpoint, extraArgs: ['--seccomp-default', '--allowed-unsafe-sysctls', 'net.core.*'] });
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: LABEL } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  const podNamed = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);

  const running = (name: string): Promise<Pod> => waitFor(async () => {
    const p = await podNamed(name);
    return p?.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.state.running ? p : undefined;
  }, WAIT, `${name} to run`);

  const exec = async (pod: Pod, cmd: string): Promise<string> => {
    const [c] = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid! } });
    assert.ok(c, `a container for ${pod.metadata.name}`);
    const r = await cri.execSync(c.id, ['sh', '-c', cmd], 10);
    return Buffer.from(r.stdout).toString().trim();
  };

  it('a safe sysctl (kernel.shm_rmid_forced=1) is set inside the pod', async () => {
    await writeFile(join(kubelet.manifestDir, 'shm.json'), manifest('shm', rt.images.busybox, { 'kernel.shm_rmid_forced': '1' }));
    const pod = await running('shm');
    assert.equal(await exec(pod, 'cat /proc/sys/kernel/shm_rmid_forced'), '1');
  });

  it('kernel.msgmax is refused: Failed, SysctlForbidden, and no sandbox is ever made', async () => {
    await writeFile(join(kubelet.manifestDir, 'msgmax.json'), manifest('msgmax', rt.images.busybox, { 'kernel.msgmax': '65536' }));
    const pod = await waitFor(async () => {
      const p = await podNamed('msgmax');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, WAIT, 'msgmax to be refused');
    assert.equal(pod.status?.reason, 'SysctlForbidden');
    assert.equal(pod.status?.message, 'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted');
    assert.deepEqual(await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid! } }), []);
  });

  it('an unsafe sysctl allowed by --allowed-unsafe-sysctls net.core.* is set in the pod\'s network namespace', async () => {
    await writeFile(join(kubelet.manifestDir, 'somaxconn.json'), manifest('somaxconn', rt.images.busybox, { 'net.core.somaxconn': '1234' }));
    const pod = await running('somaxconn');
    assert.equal(await exec(pod, 'cat /proc/sys/net/core/somaxconn'), '1234');
  });

  it('an AppArmor profile is refused where the host has no AppArmor (Failed, reason AppArmor, no sandbox), and runs where it has', async () => {
    await writeFile(join(kubelet.manifestDir, 'apparmor.json'), manifest('apparmor', rt.images.busybox, {}, { appArmorProfile: { type: 'RuntimeDefault' } }));
    if (isAppArmorEnabled()) {
      await running('apparmor');
      return;
    }
    const pod = await waitFor(async () => {
      const p = await podNamed('apparmor');
      return p?.status?.phase === 'Failed' ? p : undefined;
    }, WAIT, 'apparmor to be refused');
    assert.equal(pod.status?.reason, 'AppArmor');
    assert.equal(pod.status?.message, 'Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host');
    assert.deepEqual(await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid! } }), []);
  });

  it('--seccomp-default: a container that asks for nothing runs under a seccomp filter; Unconfined stays unconfined', async () => {
    const confined = await running('shm');
    assert.match(await exec(confined, 'grep ^Seccomp: /proc/self/status'), /^Seccomp:\s+2$/);
    await writeFile(join(kubelet.manifestDir, 'unconfined.json'), manifest('unconfined', rt.images.busybox, {}, { seccompProfile: { type: 'Unconfined' } }));
    const unconfined = await running('unconfined');
    assert.match(await exec(unconfined, 'grep ^Seccomp: /proc/self/status'), /^Seccomp:\s+0$/);
  });
});
