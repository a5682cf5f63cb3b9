// kubelet-ts joined to the test API server double, on real containerd, driven with kubectl:
// - kubectl debug --target adds an ephemeral container that runs in the target's process
//   namespace (it sees the target's process as its PID 1), reported Running then Terminated in
//   ephemeralContainerStatuses, exec'd into, never restarted.
// - sidecars (restartable init containers): the next init container waits for a sidecar's
//   startup probe; on kubectl delete the regular container stops first, then the sidecars in
//   reverse order (each container appends to a file on a hostPath when it gets SIGTERM; the
//   handlers take longer the earlier their container must stop, so stopping all at once, as
//   before, writes the reverse order).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContainerStatus, Pod } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const NODE = 'kts-ephemeral-node';
const LABEL = { test: 'ephemeral-sidecars' };

interface Run { code: number; stdout: string; stderr: string }

describe('kubectl debug and sidecar ordering on containerd, through the test API server', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let api: TestApiServer;
  let kubelet: KubeletProcess;
  let dir: string;
  let shared: string;
  let admin: string;

  const kubectl = (args: string[], input?: string): Promise<Run> => new Promise((resolve) => {
    const child = execFile('kubectl', ['--kubeconfig', admin, ...args], { timeout: WAIT },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    if (input !== undefined) child.stdin!.end(input);
  });
  const ok = async (args: string[], input?: string): Promise<string> => {
    const r = await kubectl(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const podOf = (name: string): Pod | undefined => api.get('pods', 'default', name) as Pod | undefined;
  const until = <T>(what: string, f: () => T | undefined | false): Promise<T> =>
    api.waitFor(what, f, WAIT).catch((err) => { throw new Error(`${(err as Error).message}\nkubelet log:\n${kubelet.logs().slice(-4000)}`); });
  const ephemeralStatus = (pod: string, name: string): ContainerStatus | undefined =>
    podOf(pod)?.status?.ephemeralContainerStatuses?.find((s) => s.name === name);

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-ephemeral-'));
    shared = join(dir, 'shared');
    await mkdir(shared, { mode: 0o777 });
    api = new TestApiServer();
    await api.start();
    await writeFile(join(dir, 'ca.crt'), api.ca!.cert);
    await writeFile(join(dir, 'kubelet.kubeconfig'), api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'));
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('admin', ['system:masters']));
    await writeFile(join(dir, 'config.yaml'), [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      'authentication:',
      '  anonymous: {enabled: false}',
      '  webhook: {enabled: false}',
      `  x509: {clientCAFile: ${join(dir, 'ca.crt')}}`,
      'authorization: {mode: AlwaysAllow}',
    ].join('\n'));
    kubelet = await startKubelet({ endpoint: rt.endpoint, nodeName: NODE, extraArgs: ['--config', join(dir, 'config.yaml'), '--kubeconfig', join(dir, 'kubelet.kubeconfig'), '--node-ip', '127.0.0.1'] });
    await until('the node with its kubelet port', () => api.get('nodes', undefined, NODE)?.status?.daemonEndpoints?.kubeletEndpoint?.Port);
  });

  after(async () => {
    for (const p of api.list('pods')) {
      try { api.registry.delete(api.resource('pods'), p.metadata.namespace, p.metadata.name, { gracePeriodSeconds: 1 }); } catch { /* gone */ }
    }
    await api.waitFor('pods to go', () => api.list('pods').length === 0, WAIT).catch(() => undefined);
    await kubelet?.stop();
    await api?.stop();
    cri?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const apply = async (pod: Record<string, unknown>): Promise<void> => {
    const file = join(dir, `${(pod.metadata as { name: string }).name}.json`);
    await writeFile(file, JSON.stringify(pod));
    await ok(['apply', '-f', file]);
  };

  it('kubectl debug --target: the debug container sees the target\'s processes, runs, then terminates, and is not restarted', async () => {
    await apply({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'target', labels: LABEL },
      spec: { nodeName: NODE, hostNetwork: true, terminationGracePeriodSeconds: 1, containers: [{ name: 'app', image: rt.images.busybox, command: ['sleep', '3601'] }] },
    });
    await until('target Running', () => podOf('target')?.status?.phase === 'Running');
    // the debug container lists the processes it sees, then waits for the test to let it go
    const out = await ok(['debug', 'target', `--image=${rt.images.busybox}`, '--target=app', '--container=dbg', '--profile=general', '--',
      'sh', '-c', 'ps -o pid,args > /tmp/ps; while [ ! -f /tmp/done ]; do sleep 0.2; done; cat /tmp/ps']);
    assert.match(out, /Targeting container "app"/);
    const running = await until('dbg Running in ephemeralContainerStatuses', () => ephemeralStatus('target', 'dbg')?.state.running && ephemeralStatus('target', 'dbg'));
    assert.equal(running.image, rt.images.busybox);
    assert.match(running.imageID, /sha256:[0-9a-f]{64}/);
    assert.match(running.containerID ?? '', /^containerd:\/\/[0-9a-f]{64}$/);
    assert.equal(running.ready, false);
    assert.equal(running.restartCount, 0);
    // exec into the ephemeral container: it sees the target's process, as PID 1 of their shared namespace
    const ps = await ok(['exec', 'target', '-c', 'dbg', '--', 'cat', '/tmp/ps']);
    assert.match(ps, /^\s*1\s+sleep 3601\s*$/m, ps);
    // the CRI config: PID namespace TARGET of the app container
    const id = running.containerID!.replace('containerd://', '');
    const appID = podOf('target')!.status!.containerStatuses!.find((s) => s.name === 'app')!.containerID!.replace('containerd://', '');
    const verbose = await cri.containerStatus(id, true);
    const info = JSON.parse(verbose.info?.info ?? '{}');
    const pidNs = info.runtimeSpec?.linux?.namespaces?.find((n: { type: string }) => n.type === 'pid');
    assert.ok(pidNs?.path?.startsWith('/proc/'), JSON.stringify(pidNs));
    const appInfo = JSON.parse((await cri.containerStatus(appID, true)).info?.info ?? '{}');
    assert.equal(pidNs.path, `/proc/${appInfo.pid}/ns/pid`, 'the debug container joins the app container\'s PID namespace');

    await ok(['exec', 'target', '-c', 'dbg', '--', 'touch', '/tmp/done']);
    const done = await until('dbg Terminated', () => ephemeralStatus('target', 'dbg')?.state.terminated && ephemeralStatus('target', 'dbg'));
    assert.equal(done.state.terminated!.exitCode, 0);
    assert.equal(done.state.terminated!.reason, 'Completed');
    assert.equal(done.containerID, running.containerID);
    const logs = await ok(['logs', 'target', '-c', 'dbg']);
    assert.match(logs, /sleep 3601/);
    // ran once: one container of that name in the runtime
    const uid = podOf('target')!.metadata.uid!;
    const all = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': uid } });
    assert.deepEqual(all.map((c) => c.labels['io.kubernetes.container.name']).sort(), ['app', 'dbg']);
    // the pod stays Running and its app container is untouched
    assert.equal(podOf('target')!.status!.phase, 'Running');
    assert.equal(podOf('target')!.status!.containerStatuses![0]!.restartCount, 0);
  });

  it('sidecars: the next init container waits for a sidecar\'s startup probe; on delete the regular container stops first, then sidecar2, then sidecar1', async () => {
    const log = (what: string) => `echo ${what} >> /shared/order`;
    // each handler takes longer the earlier its container has to stop: stopped all at once, the order would be reversed
    const loop = (name: string, termDelay: string) => `trap '${termDelay ? `sleep ${termDelay}; ` : ''}${log(`${name}-term`)}; exit 0' TERM; while true; do sleep 0.2; done`;
    const mount = [{ name: 'shared', mountPath: '/shared' }];
    await apply({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'sidecars', labels: LABEL },
      spec: {
        nodeName: NODE, hostNetwork: true, terminationGracePeriodSeconds: 20,
        volumes: [{ name: 'shared', hostPath: { path: shared, type: 'Directory' } }],
        initContainers: [
          {
            name: 'sidecar1', image: rt.images.busybox, restartPolicy: 'Always', volumeMounts: mount,
            command: ['sh', '-c', `sleep 2; ${log('sidecar1-ready')}; touch /tmp/ready; ${loop('sidecar1', '')}`],
            startupProbe: { exec: { command: ['test', '-f', '/tmp/ready'] }, periodSeconds: 1, failureThreshold: 30 },
          },
          { name: 'setup', image: rt.images.busybox, volumeMounts: mount, command: ['sh', '-c', log('setup')] },
          { name: 'sidecar2', image: rt.images.busybox, restartPolicy: 'Always', volumeMounts: mount, command: ['sh', '-c', `${log('sidecar2-start')}; ${loop('sidecar2', '1')}`] },
        ],
        containers: [{ name: 'main', image: rt.images.busybox, volumeMounts: mount, command: ['sh', '-c', `${log('main-start')}; ${loop('main', '2')}`] }],
      },
    });
    await until('sidecars Running with main running', () => podOf('sidecars')?.status?.containerStatuses?.[0]?.state.running);
    const started = (await readFile(join(shared, 'order'), 'utf8')).trim().split('\n');
    assert.deepEqual(started, ['sidecar1-ready', 'setup', 'sidecar2-start', 'main-start']);

    await ok(['delete', 'pod', 'sidecars', '--wait=true']);
    const order = (await readFile(join(shared, 'order'), 'utf8')).trim().split('\n').slice(started.length);
    assert.deepEqual(order, ['main-term', 'sidecar2-term', 'sidecar1-term']);
  });
});
