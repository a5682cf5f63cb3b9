// kubelet-ts restarting, and the runtime going away and coming back: running pods are adopted
// from the runtime's labels, nothing is restarted, restart counts and backoff carry on.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ContainerStatus, Pod } from '../../src/api/types.js';
import { cgroupDir, discoverCgroupMounts, memoryHierarchy } from '../../src/cgroups/index.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, repoRoot, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const run = promisify(execFile);
const WAIT = 90_000;

describe('restarts of kubelet-ts and of the runtime', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let rootDir: string;
  let manifestDir: string;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    rootDir = await mkdtemp(join(tmpdir(), 'kts-restart-root-'));
    manifestDir = await mkdtemp(join(tmpdir(), 'kts-restart-manifests-'));
    const pod = (name: string, command: string[]) => JSON.stringify({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name, labels: { test: 'restart' } },
      spec: { hostNetwork: true, terminationGracePeriodSeconds: 2, containers: [{ name: 'main', image: rt.images.busybox, command }] },
    });
    await writeFile(join(manifestDir, 'steady.json'), pod('steady', ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done']));
    await writeFile(join(manifestDir, 'crashy.json'), pod('crashy', ['sh', '-c', 'exit 1']));
    kubelet = await startKubelet({ endpoint: rt.endpoint, rootDir, manifestDir });
  });

  after(async () => {
    await bringRuntimeUp();
    for (const f of await readdir(manifestDir)) await rm(join(manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'restart' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    await rm(rootDir, { recursive: true, force: true });
    await rm(manifestDir, { recursive: true, force: true });
    cri.close();
  });

  const get = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);
  const main = (p: Pod | undefined): ContainerStatus | undefined => p?.status?.containerStatuses?.[0];

  async function bringRuntimeUp(): Promise<void> {
    await run('bash', [join(repoRoot(), 'scripts', 'containerd.sh'), 'start']);
  }

  it('adopts running pods after a restart without restarting anything', async () => {
    const steady = await waitFor(async () => { const p = await get('steady'); return main(p)?.state.running ? p : undefined; }, WAIT, 'steady to run');
    const crashy = await waitFor(async () => { const p = await get('crashy'); return (main(p)?.restartCount ?? 0) >= 2 ? p : undefined; }, WAIT, 'crashy to restart twice');
    const steadyID = main(steady)!.containerID;
    const [sandbox] = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': steady.metadata.uid! } });
    const crashyRestarts = main(crashy)!.restartCount;

    await kubelet.stop();
    kubelet = await startKubelet({ endpoint: rt.endpoint, rootDir, manifestDir });

    const adopted = await waitFor(async () => { const p = await get('steady'); return main(p)?.state.running ? p : undefined; }, WAIT, 'steady in the new /pods');
    assert.equal(adopted.metadata.uid, steady.metadata.uid, 'same content, same UID');
    assert.equal(main(adopted)!.containerID, steadyID, 'the same container, not a new one');
    assert.equal(main(adopted)!.restartCount, 0);
    const sandboxes = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': steady.metadata.uid! } });
    assert.deepEqual(sandboxes.map((s) => s.id), [sandbox!.id], 'no second sandbox');
    assert.equal((await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': steady.metadata.uid! } })).length, 1);
    // The adopted pod keeps its cgroup with the container in it (a BestEffort pod), in the memory
    // hierarchy this machine has (v1 here; the unified one on a v2 host).
    const mem = memoryHierarchy(await discoverCgroupMounts());
    assert.ok(mem, 'this machine has a memory controller');
    const podCgroup = cgroupDir(mem.mount, `/kubepods/besteffort/pod${steady.metadata.uid}`);
    await access(join(podCgroup, steadyID!.replace('containerd://', '')));

    // The crash-looping pod keeps its count, and its backoff is not reset to an immediate restart.
    const again = await waitFor(async () => { const p = await get('crashy'); return main(p)?.state.waiting?.reason === 'CrashLoopBackOff' ? p : undefined; }, WAIT, 'crashy in CrashLoopBackOff');
    assert.ok(main(again)!.restartCount >= crashyRestarts, 'restart count carried over');
  });

  it('reports the runtime down on /healthz?verbose and recovers without restarting containers', async () => {
    const steady = await get('steady');
    const steadyID = main(steady)!.containerID;
    const { stdout } = await run('bash', [join(repoRoot(), 'scripts', 'containerd.sh'), 'status']).catch((e) => e as { stdout: string });
    const pid = Number(/pid (\d+)/.exec(stdout)?.[1]);
    assert.ok(pid > 0, `containerd pid from: ${stdout}`);
    process.kill(pid, 'SIGTERM');

    // As upstream, a runtime that is down does not fail /healthz; ?verbose reports it as a warn line.
    const down = await waitFor(async () => { const h = await kubelet.healthz(true); return /^warn: runtime is not healthy/m.test(h.body) ? h : undefined; }, WAIT, '/healthz to report the runtime down');
    assert.equal(down.code, 200);
    assert.match(down.body, /^warn: runtime is not healthy \(a node Ready condition, not a healthz check\): container runtime is down\b/m);
    // The pod is still served, still running as far as kubelet-ts knows.
    assert.equal(main(await get('steady'))?.containerID, steadyID);

    await bringRuntimeUp();
    await waitFor(async () => !/^warn: runtime/m.test((await kubelet.healthz(true)).body), WAIT, '/healthz to report the runtime up');
    const after = await waitFor(async () => { const p = await get('steady'); return main(p)?.state.running ? p : undefined; }, WAIT, 'steady running');
    assert.equal(main(after)!.containerID, steadyID, 'the container survived the runtime restart');
    assert.equal(main(after)!.restartCount, 0);
    const st = await cri.containerStatus(steadyID!.replace('containerd://', ''));
    assert.equal(st.status?.state, 'CONTAINER_RUNNING');
  });
});
