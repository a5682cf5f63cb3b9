// RuntimeClass through the test API server double and kubectl, on real containerd:
// `kubectl apply` / `kubectl get runtimeclass` work; a pod naming a class runs with the class's
// handler on its sandbox and the class's overhead (set by the RuntimeClass admission) in its
// pod cgroup; a class whose handler the runtime does not have fails the sandbox with
// FailedCreatePodSandBox; a class the API server does not know refuses the pod at admission;
// a class deleted after its pod was admitted fails the sandbox with upstream's NotFound text.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cgroupDir, discoverCgroupMounts, memoryHierarchy } from '../../src/cgroups/index.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const run = promisify(execFile);
const WAIT = 90_000;
const NODE = 'kts-rtclass-node';

describe('RuntimeClass from the API server, driven with kubectl', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let api: TestApiServer;
  let kubelet: KubeletProcess;
  let dir: string;
  let admin: string;

  const kubectl = async (...args: string[]): Promise<string> => (await run('kubectl', ['--kubeconfig', admin, ...args], { timeout: WAIT })).stdout;
  const applyJSON = async (name: string, obj: object): Promise<string> => {
    const file = join(dir, `${name}.json`);
    await writeFile(file, JSON.stringify(obj));
    return kubectl('apply', '-f', file);
  };
  const pod = (name: string, runtimeClassName: string, resources?: object) => ({
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name, labels: { test: 'rtclass' } },
    spec: {
      nodeName: NODE, runtimeClassName, terminationGracePeriodSeconds: 2,
      containers: [{ name: 'main', image: rt.images.busybox, command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'], ...(resources ? { resources } : {}) }],
    },
  });
  const events = async (podName: string): Promise<string> => kubectl('get', 'events', '--field-selector', `involvedObject.name=${podName}`, '-o', 'jsonpath={range .items[*]}{.reason}: {.message}{"\\n"}{end}');

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-rtclass-'));
    api = new TestApiServer({});
    await api.start();
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters']), { mode: 0o600 });
    const kubeletKubeconfig = join(dir, 'kubelet.kubeconfig');
    await writeFile(kubeletKubeconfig, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    kubelet = await startKubelet({ endpoint: rt.endpoint, nodeName: NODE, extraArgs: ['--kubeconfig', kubeletKubeconfig] });
  });

  after(async () => {
    for (const p of api.list('pods')) {
      try { api.registry.delete(api.resource('pods'), p.metadata.namespace, p.metadata.name, { gracePeriodSeconds: 1 }); } catch { /* gone */ }
    }
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'rtclass' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    await api.stop();
    cri.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('kubectl creates and lists RuntimeClasses (node.k8s.io/v1, cluster-scoped)', async () => {
    await applyJSON('rc-runc', { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'rc-runc' }, handler: 'runc', overhead: { podFixed: { cpu: '50m', memory: '16Mi' } } });
    await applyJSON('rc-missing-handler', { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'rc-nohandler' }, handler: 'nosuchhandler' });
    const table = await kubectl('get', 'runtimeclass');
    assert.match(table, /NAME\s+HANDLER\s+AGE/);
    assert.match(table, /rc-runc\s+runc\s/);
    assert.match(table, /rc-nohandler\s+nosuchhandler\s/);
    assert.equal((await kubectl('get', 'runtimeclass', 'rc-runc', '-o', 'jsonpath={.handler}')).trim(), 'runc');
    await assert.rejects(applyJSON('rc-bad', { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'rc-bad' } }), /handler: Required value/);
  });

  it('a pod naming a class runs with its handler and its overhead in the pod cgroup', async () => {
    await applyJSON('with-class', pod('with-class', 'rc-runc', { limits: { cpu: '100m', memory: '32Mi' } }));
    assert.equal((await kubectl('get', 'pod', 'with-class', '-o', 'jsonpath={.spec.overhead.memory}')).trim(), '16Mi', 'the admission set the overhead');
    await waitFor(async () => (await kubectl('get', 'pod', 'with-class', '-o', 'jsonpath={.status.phase}')).trim() === 'Running', WAIT, 'with-class Running');
    const uid = (await kubectl('get', 'pod', 'with-class', '-o', 'jsonpath={.metadata.uid}')).trim();
    const [sb] = await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': uid } });
    assert.ok(sb, 'a sandbox for the pod');
    assert.equal(sb.runtime_handler, 'runc', 'RunPodSandbox got the class\'s handler');
    const mem = memoryHierarchy(await discoverCgroupMounts());
    assert.ok(mem, 'this machine has a memory controller');
    const limitFile = mem.version === 1 ? 'memory.limit_in_bytes' : 'memory.max';
    const limit = (await readFile(join(cgroupDir(mem.mount, `/kubepods/pod${uid}`), limitFile), 'utf8')).trim();
    assert.equal(limit, String((32 + 16) * 1024 * 1024), 'the pod cgroup holds the containers\' limit plus the overhead');
  });

  it('a class whose handler the runtime lacks fails the sandbox; an unknown class is refused by the API server', async () => {
    await applyJSON('no-handler', pod('no-handler', 'rc-nohandler'));
    const ev = await waitFor(async () => {
      const e = await events('no-handler');
      return /FailedCreatePodSandBox: Failed to create pod sandbox: .*nosuchhandler/.test(e) ? e : undefined;
    }, WAIT, 'FailedCreatePodSandBox for no-handler');
    assert.match(ev, /FailedCreatePodSandBox/);
    assert.equal((await kubectl('get', 'pod', 'no-handler', '-o', 'jsonpath={.status.phase}')).trim(), 'Pending');
    await assert.rejects(applyJSON('unknown-class', pod('unknown-class', 'nosuchclass')), /pods "unknown-class" is forbidden: pod rejected: RuntimeClass "nosuchclass" not found/);
  });

  it('a class deleted after its pod was admitted: the kubelet fails the sandbox with upstream\'s NotFound text', async () => {
    await applyJSON('rc-gone', { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'rc-gone' }, handler: 'runc' });
    // admitted while the class exists, bound to no node yet so the kubelet does not see it before the class goes
    const p = pod('class-gone', 'rc-gone');
    delete (p.spec as { nodeName?: string }).nodeName;
    await applyJSON('class-gone', p);
    await kubectl('delete', 'runtimeclass', 'rc-gone');
    // then scheduled, as the scheduler binds it
    api.registry.bind('default', 'class-gone', { target: { kind: 'Node', name: NODE } });
    const ev = await waitFor(async () => {
      const e = await events('class-gone');
      return e.includes('FailedCreatePodSandBox: Failed to create pod sandbox: runtimeclass.node.k8s.io "rc-gone" not found') ? e : undefined;
    }, WAIT, 'FailedCreatePodSandBox for class-gone');
    assert.ok(ev);
    const uid = (await kubectl('get', 'pod', 'class-gone', '-o', 'jsonpath={.metadata.uid}')).trim();
    assert.deepEqual(await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': uid } }), []);
  });
});
