// Static pods on a real containerd: start, status, edit, removal, broken manifests.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { access, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { allHierarchies, cgroupDir, discoverCgroupMounts, memoryHierarchy } from '../../src/cgroups/index.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;

function manifest(name: string, image: string, extra: { hostNetwork?: boolean; command?: string[]; env?: { name: string; value: string }[]; resources?: object } = {}): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { test: 'static-pods' } },
    spec: {
      hostNetwork: extra.hostNetwork ?? false,
      terminationGracePeriodSeconds: 2,
      containers: [{
        name: 'main',
        image,
        command: extra.command ?? ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
        env: extra.env,
        resources: extra.resources,
      }],
    },
  });
}

async function exists(p: string): Promise<boolean> {
  return access(p).then(() => true, () => false);
}

describe('static pods on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    kubelet = await startKubelet({ endpoint: rt.endpoint });
  });

  after(async () => {
    // Remove every manifest, let kubelet-ts tear the pods down, then stop it.
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'static-pods' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    cri.close();
  });

  const podNamed = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);

  it('runs a static pod to Running and reports what the runtime reports', async () => {
    await writeFile(join(kubelet.manifestDir, 'alpha.json'), manifest('alpha', rt.images.busybox, {
      env: [{ name: 'GREETING', value: 'hello' }],
      resources: { limits: { cpu: '100m', memory: '32Mi' } },
    }));
    const pod = await waitFor(async () => {
      const p = await podNamed('alpha');
      return p?.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.state.running ? p : undefined;
    }, WAIT, 'alpha to run');

    assert.equal(pod.metadata.namespace, 'default');
    assert.equal(pod.spec.nodeName, kubelet.nodeName);
    assert.equal(pod.metadata.annotations?.['kubernetes.io/config.source'], 'file');
    assert.equal(pod.metadata.annotations?.['kubernetes.io/config.hash'], pod.metadata.uid);
    assert.equal(pod.status?.qosClass, 'Guaranteed');
    const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'True');

    const cs = pod.status!.containerStatuses![0]!;
    const [sandbox] = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid! } });
    assert.ok(sandbox, 'the runtime holds a sandbox for the pod');
    assert.equal(sandbox.state, 'SANDBOX_READY');
    const containers = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid! } });
    assert.equal(containers.length, 1);
    const c = containers[0]!;
    assert.equal(cs.containerID, `containerd://${c.id}`);
    assert.equal(cs.name, 'main');
    assert.equal(cs.restartCount, 0);
    assert.equal(cs.ready, true);
    assert.equal(cs.image, rt.images.busybox);
    const st = (await cri.containerStatus(c.id)).status!;
    assert.equal(cs.imageID, st.image_ref);
    assert.equal(st.state, 'CONTAINER_RUNNING');
    assert.equal(st.labels['io.kubernetes.container.name'], 'main');
    assert.equal(st.labels['io.kubernetes.pod.name'], pod.metadata.name);
    assert.match(st.log_path, new RegExp(`/default_${pod.metadata.name}_${pod.metadata.uid}/main/0\\.log$`));

    // The pod network gave it an IP, and the status says so.
    const sb = (await cri.podSandboxStatus(sandbox.id)).status!;
    assert.ok(sb.network?.ip, 'bridge network assigned an IP');
    assert.equal(pod.status?.podIP, sb.network!.ip);

    // The container runs in the pod cgroup kubelet-ts made, with the limit it set, in the
    // memory hierarchy this machine has: v1 memory.limit_in_bytes (v1 and hybrid hosts, as
    // here), else v2 memory.max in the unified one (not runnable on this hybrid machine; the
    // v2 writes are unit-tested on generated trees in test/cm).
    const mem = memoryHierarchy(await discoverCgroupMounts());
    assert.ok(mem, 'this machine has a memory controller');
    const cg = cgroupDir(mem.mount, `/kubepods/pod${pod.metadata.uid}`);
    assert.ok(await exists(cg), `pod cgroup ${cg} exists`);
    assert.ok(await exists(join(cg, c.id)), 'container cgroup sits under the pod cgroup');
    const limitFile = mem.version === 1 ? 'memory.limit_in_bytes' : 'memory.max';
    assert.equal((await readFile(join(cg, limitFile), 'utf8')).trim(), String(32 * 1024 * 1024), `${limitFile} of the pod cgroup`);

    // Env literal and the downward API made it into the container.
    const exec = await cri.execSync(c.id, ['sh', '-c', 'echo $GREETING'], 10);
    assert.equal(Buffer.from(exec.stdout).toString().trim(), 'hello');
  });

  it('replaces the pod when its manifest is edited', async () => {
    const before = await podNamed('alpha');
    assert.ok(before?.metadata.uid);
    await writeFile(join(kubelet.manifestDir, 'alpha.json'), manifest('alpha', rt.images.busybox, {
      env: [{ name: 'GREETING', value: 'edited' }],
    }));
    const after = await waitFor(async () => {
      const p = await podNamed('alpha');
      return p && p.metadata.uid !== before.metadata.uid && p.status?.phase === 'Running' ? p : undefined;
    }, WAIT, 'the edited alpha to run');
    assert.equal(after.status?.qosClass, 'BestEffort');
    // The old pod's sandbox and containers are gone from the runtime.
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': before.metadata.uid! } })).length === 0, WAIT, 'the old sandbox to be removed');
    const old = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': before.metadata.uid! } });
    assert.equal(old.length, 0);
    const [c] = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': after.metadata.uid! } });
    const exec = await cri.execSync(c!.id, ['sh', '-c', 'echo $GREETING'], 10);
    assert.equal(Buffer.from(exec.stdout).toString().trim(), 'edited');
  });

  it('stops the pod and removes its sandbox and cgroups when the manifest is removed', async () => {
    const pod = await podNamed('alpha');
    assert.ok(pod?.metadata.uid);
    const uid = pod.metadata.uid;
    await rm(join(kubelet.manifestDir, 'alpha.json'));
    await waitFor(async () => !(await podNamed('alpha')), WAIT, 'alpha to leave /pods');
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': uid } })).length === 0, WAIT, 'the sandbox to be removed');
    assert.equal((await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': uid } })).length, 0);
    // Gone from every hierarchy the machine mounts (v1 controllers, the unified one, or both).
    const hierarchies = allHierarchies(await discoverCgroupMounts());
    assert.ok(hierarchies.length > 0);
    await waitFor(async () => {
      for (const m of hierarchies) {
        for (const qos of ['', 'burstable/', 'besteffort/']) {
          if (await exists(cgroupDir(m, `/kubepods/${qos}pod${uid}`))) return false;
        }
      }
      return true;
    }, WAIT, 'the pod cgroups to be removed');
  });

  it('keeps a good pod running beside a broken manifest and names the broken file', async () => {
    await writeFile(join(kubelet.manifestDir, 'good.json'), manifest('good', rt.images.busybox, { hostNetwork: true }));
    await writeFile(join(kubelet.manifestDir, 'broken.yaml'), 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\nspec:\n  containers:\n    - name: c\n');
    const good = await waitFor(async () => {
      const p = await podNamed('good');
      return p?.status?.phase === 'Running' ? p : undefined;
    }, WAIT, 'good to run');
    assert.equal(good.spec.hostNetwork, true);
    assert.equal(good.status?.podIP, good.status?.hostIP, 'a host-network pod has the host IP');
    await waitFor(async () => kubelet.logs().includes('broken.yaml'), WAIT, 'the broken file to be named in the log');
    assert.match(kubelet.logs(), /broken\.yaml[^\n]*image|image[^\n]*broken\.yaml/, 'the log names the file and the missing field');
    assert.equal(await podNamed('broken'), undefined);
    // Still running after the next periodic check.
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal((await podNamed('good'))?.status?.phase, 'Running');
    await rm(join(kubelet.manifestDir, 'broken.yaml'));
    await rm(join(kubelet.manifestDir, 'good.json'));
  });

  it('refuses a manifest whose uid climbs out of the root dir, naming file and field; nothing outside the root is touched; the good pod runs', async () => {
    const tag = `kts-victim-${process.pid}-${Date.now()}`;
    // where <rootDir>/pods/<uid> and <podLogsDir>/<ns>_<name>_<uid> would land for uid ../../<tag>
    const victim = join(dirname(kubelet.rootDir), tag);
    const logVictim = join('/var/log/pods', tag);
    await mkdir(victim);
    await writeFile(join(victim, 'canary'), 'not kubelet-ts\'s to remove');
    const evil = JSON.parse(manifest('evil', rt.images.busybox, { hostNetwork: true })) as Pod;
    evil.metadata.uid = `../../${tag}`;
    try {
      await writeFile(join(kubelet.manifestDir, 'guarded.json'), manifest('guarded', rt.images.busybox, { hostNetwork: true }));
      await writeFile(join(kubelet.manifestDir, 'evil.json'), JSON.stringify(evil));
      const good = await waitFor(async () => {
        const p = await podNamed('guarded');
        return p?.status?.phase === 'Running' ? p : undefined;
      }, WAIT, 'guarded to run');
      assert.match(good.metadata.uid!, /^[0-9a-f]{32}$/);
      await waitFor(async () => /evil\.json[^\n]*metadata\.uid/.test(kubelet.logs()), WAIT, 'the log to name evil.json and metadata.uid');
      // the logger escapes the quotes of the value inside its err="..." field
    assert.match(kubelet.logs(), /evil\.json: invalid pod: metadata\.uid: Invalid value: \\?"\.\.\/\.\.\/kts-victim-/);
      assert.equal(await podNamed('evil'), undefined);
      assert.deepEqual(await readdir(victim), ['canary'], 'nothing created beside the root dir');
      assert.equal(await exists(logVictim), false, 'nothing created beside the pod log dirs');
      // The manifest goes away: nothing outside the root is removed either.
      await rm(join(kubelet.manifestDir, 'evil.json'));
      await new Promise((r) => setTimeout(r, 2500));
      assert.deepEqual(await readdir(victim), ['canary']);
      assert.equal((await podNamed('guarded'))?.status?.phase, 'Running');
    } finally {
      await rm(join(kubelet.manifestDir, 'evil.json'), { force: true });
      await rm(join(kubelet.manifestDir, 'guarded.json'), { force: true });
      await rm(victim, { recursive: true, force: true });
    }
  });

  it('answers /healthz as upstream\'s healthz port, with no warning while the sync loop, PLEG and runtime are healthy', async () => {
    const h = await kubelet.healthz(true);
    assert.equal(h.code, 200);
    assert.equal(h.body, '[+]ping ok\nhealthz check passed\n');
  });
});
