// Swapping the upstream kubelet for kubelet-ts on a running node: the test plays the upstream
// kubelet (1.31+) on containerd — sandboxes and containers with upstream's labels, annotations,
// container hash and log paths, a container restarted once and an init container that finished —
// then starts kubelet-ts on them. Pods bound through the test API server double are adopted:
// nothing restarted, statuses and restart counts carried over, as kubectl shows. A static pod
// (whose UID kubelet-ts cannot compute as upstream does) is replaced exactly once: the upstream
// instance is stopped and removed before kubelet-ts's starts, and the mirror pod is replaced.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Container, Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { hashContainer } from '../../src/runtime/container-hash.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { runLikeUpstream, upstreamContainerHash, type UpstreamPodRun } from '../fixtures/upstream-kubelet.js';

const run = promisify(execFile);
const WAIT = 90_000;
const NODE = 'kts-adopt-node';
const LOOP = ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'];

describe('adopting what the upstream kubelet left running (containerd, test API server, kubectl)', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let api: TestApiServer;
  let kubelet: KubeletProcess | undefined;
  let dir: string;
  let manifestDir: string;
  let admin: string;
  let web: Pod;
  let webRun: UpstreamPodRun;
  let staticRun: UpstreamPodRun;
  let oldMirrorUID: string;
  const staticUpstreamUID = createHash('md5').update('upstream static pod').digest('hex');

  const kubectl = async (...args: string[]): Promise<string> => (await run('kubectl', ['--kubeconfig', admin, ...args], { timeout: WAIT })).stdout;
  const podJSON = async (name: string): Promise<Pod> => JSON.parse(await kubectl('get', 'pod', name, '-o', 'json')) as Pod;
  const idsOf = async (uid: string): Promise<string[]> =>
    (await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': uid } })).map((c) => c.id).sort();

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-adopt-'));
    manifestDir = await mkdtemp(join(tmpdir(), 'kts-adopt-manifests-'));
    api = new TestApiServer({});
    await api.start();
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters']), { mode: 0o600 });

    // A pod bound to the node through the API (its UID is the API's), run as upstream ran it.
    const init: Container = { name: 'setup', image: rt.images.busybox, command: ['sh', '-c', 'true'] };
    const main: Container = { name: 'main', image: rt.images.busybox, command: LOOP, ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }] };
    api.create('pods', 'default', {
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name: 'web', labels: { test: 'adopt-upstream' } },
      spec: { nodeName: NODE, terminationGracePeriodSeconds: 2, initContainers: [init], containers: [main] },
    });
    web = api.get('pods', 'default', 'web') as Pod;
    webRun = await runLikeUpstream(cri, web, [
      { container: web.spec.initContainers![0]!, attempts: 1, waitExit: true },
      { container: web.spec.containers[0]!, attempts: 2 },
    ]);

    // A static pod as upstream ran it (its UID is upstream's hash of the file), with its mirror pod.
    const staticSpec = { terminationGracePeriodSeconds: 2, hostNetwork: true, containers: [{ name: 'main', image: rt.images.busybox, command: LOOP }] };
    await writeFile(join(manifestDir, 'static.json'), JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'static', labels: { test: 'adopt-upstream' } }, spec: staticSpec }));
    const staticName = `static-${NODE}`;
    const upstreamStatic: Pod = {
      metadata: { name: staticName, namespace: 'default', uid: staticUpstreamUID, labels: { test: 'adopt-upstream' }, annotations: { 'kubernetes.io/config.hash': staticUpstreamUID } },
      spec: { ...staticSpec, nodeName: NODE, containers: [{ ...staticSpec.containers[0]!, terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' }] },
    };
    staticRun = await runLikeUpstream(cri, upstreamStatic, [{ container: upstreamStatic.spec.containers[0]!, attempts: 1 }], 'file');
    api.create('pods', 'default', {
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name: staticName, labels: { test: 'adopt-upstream' }, annotations: { 'kubernetes.io/config.hash': staticUpstreamUID, 'kubernetes.io/config.mirror': staticUpstreamUID, 'kubernetes.io/config.source': 'file' } },
      spec: { ...staticSpec, nodeName: NODE },
    });
    oldMirrorUID = (api.get('pods', 'default', staticName) as Pod).metadata.uid!;

    const kubeconfig = join(dir, 'kubelet.kubeconfig');
    await writeFile(kubeconfig, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    kubelet = await startKubelet({ endpoint: rt.endpoint, nodeName: NODE, manifestDir, extraArgs: ['--kubeconfig', kubeconfig] });
  });

  after(async () => {
    await rm(join(manifestDir, 'static.json'), { force: true });
    try { api.registry.delete(api.resource('pods'), 'default', 'web', { gracePeriodSeconds: 1 }); } catch { /* gone */ }
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'adopt-upstream' } })).length === 0, WAIT, 'pods removed').catch(() => undefined);
    await kubelet?.stop();
    // whatever is left (a failed run) goes too
    for (const s of await cri.listPodSandbox({ label_selector: { test: 'adopt-upstream' } })) {
      await cri.stopPodSandbox(s.id).catch(() => undefined);
      await cri.removePodSandbox(s.id).catch(() => undefined);
    }
    await api.stop();
    cri.close();
    await rm(dir, { recursive: true, force: true });
    await rm(manifestDir, { recursive: true, force: true });
  });

  it('writes the upstream hash: the fixture agrees with upstream golden value and with kubelet-ts', () => {
    assert.equal(upstreamContainerHash({ name: 'test_container', image: 'foo/image:v1' }), '8e45cbd0');
    assert.equal(upstreamContainerHash(web.spec.containers[0]!), hashContainer(web.spec.containers[0]!));
  });

  it('adopts the API pod: no container restarted, restart count and init container carried over', async () => {
    const uid = web.metadata.uid!;
    const before = [...webRun.containers.values()].sort();
    const pod = await waitFor(async () => {
      const p = await podJSON('web');
      const main = p.status?.containerStatuses?.[0];
      return p.status?.phase === 'Running' && main?.state.running && main.ready ? p : undefined;
    }, WAIT, 'web Running and ready in kubectl get pod');
    const main = pod.status!.containerStatuses![0]!;
    assert.equal(main.restartCount, 1);
    assert.equal(main.containerID, `containerd://${webRun.containers.get('main/1')}`, 'attempt 1 is the running container');
    assert.equal(main.lastState.terminated?.containerID, `containerd://${webRun.containers.get('main/0')}`, 'attempt 0 is the last state');
    const init = pod.status!.initContainerStatuses![0]!;
    assert.equal(init.state.terminated?.reason, 'Completed');
    assert.equal(init.state.terminated?.exitCode, 0);
    assert.equal(init.containerID, `containerd://${webRun.containers.get('setup/0')}`);
    assert.equal(init.restartCount, 0);
    // the table kubectl prints: 1/1 Running, 1 restart
    assert.match(await kubectl('get', 'pod', 'web', '--no-headers'), /^web\s+1\/1\s+Running\s+1\b/);
    // a few more syncs: still the same containers and the same single sandbox
    await new Promise((r) => setTimeout(r, 3_000));
    assert.deepEqual(await idsOf(uid), before, 'no container created or removed');
    const sandboxes = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': uid } });
    assert.deepEqual(sandboxes.map((s) => s.id), [webRun.sandboxID], 'the upstream sandbox, no second one');
    // the pod's IP is the upstream sandbox's
    const sandboxIP = (await cri.podSandboxStatus(webRun.sandboxID)).status?.network?.ip;
    assert.ok(sandboxIP, 'the sandbox has a pod network IP');
    assert.equal(pod.status!.podIP, sandboxIP);
    const st = await cri.containerStatus(webRun.containers.get('main/1')!);
    assert.equal(st.status?.state, 'CONTAINER_RUNNING');
    assert.doesNotMatch(kubelet!.logs(), /definition changed|will be restarted/);
  });

  it('replaces the static pod once: the upstream instance is removed before kubelet-ts starts its own, the mirror pod replaced', async () => {
    const staticName = `static-${NODE}`;
    const mirror = await waitFor(async () => {
      const m = api.get('pods', 'default', staticName) as Pod | undefined;
      return m && m.metadata.uid !== oldMirrorUID && m.status?.phase === 'Running' ? m : undefined;
    }, WAIT, 'the new mirror pod Running');
    const newUID = mirror.metadata.annotations!['kubernetes.io/config.mirror']!;
    assert.notEqual(newUID, staticUpstreamUID);
    // the upstream instance is gone from the runtime: containers and sandbox
    assert.deepEqual(await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': staticUpstreamUID } }), []);
    assert.deepEqual(await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': staticUpstreamUID } }), []);
    assert.equal(staticRun.sandboxID.length > 0, true);
    // one instance of kubelet-ts's: one sandbox, one container, never restarted
    const sandboxes = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.name': staticName } });
    assert.equal(sandboxes.length, 1);
    assert.equal(sandboxes[0]!.metadata?.uid, newUID);
    assert.equal((await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': newUID } })).length, 1);
    assert.equal((await podJSON(staticName)).status?.containerStatuses?.[0]?.restartCount, 0);
    // one mirror pod in the API for that name, and the old one was deleted by the kubelet once
    assert.equal(api.list('pods', 'default').filter((p) => p.metadata.name === staticName).length, 1);
    const deletes = api.requests.filter((r) => r.method === 'DELETE' && r.path === `/api/v1/namespaces/default/pods/${staticName}`);
    assert.equal(deletes.length, 1, 'the old mirror pod deleted once');
    // the upstream instance was stopped and removed before kubelet-ts created its sandbox
    const lines = kubelet!.logs().split('\n');
    const removedAt = lines.findIndex((l) => l.includes('Pod terminated and cleaned up') && l.includes(staticUpstreamUID));
    const createdAt = lines.findIndex((l) => l.includes('Creating pod sandbox') && l.includes(newUID));
    assert.ok(removedAt >= 0, 'the upstream instance was cleaned up by kubelet-ts');
    assert.ok(createdAt >= 0, 'kubelet-ts created the static pod sandbox');
    assert.ok(removedAt < createdAt, `removed (line ${removedAt}) before the new sandbox (line ${createdAt})`);
    assert.equal(lines.filter((l) => l.includes('Creating pod sandbox') && l.includes(staticName)).length, 1, 'one sandbox created for the static pod');
  });
});
