// Pod lifecycle on real containerd through the real kubelet-ts process: init containers,
// sidecars, restart policies, CrashLoopBackOff, spec hash changes, image pulls, hooks,
// graceful termination, config errors.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Container, ContainerStatus, Pod, PodSpec } from '../../src/api/types.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
const LOOP = ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'];

describe('pod lifecycle on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let kubelet: KubeletProcess;
  let hookServer: Server;
  let hookPort = 0;
  const hookHits: string[] = [];

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    hookServer = createServer((req, res) => {
      hookHits.push(req.url ?? '');
      res.writeHead(req.url?.startsWith('/fail') ? 500 : 200);
      res.end('ok');
    });
    await new Promise<void>((r) => hookServer.listen(0, '127.0.0.1', () => r()));
    hookPort = (hookServer.address() as { port: number }).port;
    kubelet = await startKubelet({ endpoint: rt.endpoint });
  });

  after(async () => {
    for (const f of await readdir(kubelet.manifestDir)) await rm(join(kubelet.manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'lifecycle' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet.stop();
    hookServer.close();
    cri.close();
  });

  async function write(name: string, spec: Partial<PodSpec> & { containers: Container[] }, meta: { uid?: string } = {}): Promise<void> {
    const pod = {
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name, labels: { test: 'lifecycle' }, ...meta },
      spec: { hostNetwork: true, terminationGracePeriodSeconds: 2, ...spec },
    };
    await writeFile(join(kubelet.manifestDir, `${name}.json`), JSON.stringify(pod));
  }
  const remove = (name: string) => rm(join(kubelet.manifestDir, `${name}.json`), { force: true });
  const get = async (name: string): Promise<Pod | undefined> =>
    (await kubelet.pods()).find((p) => p.metadata.name === `${name}-${kubelet.nodeName}`);
  const until = (name: string, pred: (p: Pod) => boolean, what: string): Promise<Pod> =>
    waitFor(async () => { const p = await get(name); return p && pred(p) ? p : undefined; }, WAIT, `${name}: ${what}`);
  const cs = (p: Pod, c: string): ContainerStatus | undefined =>
    [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])].find((s) => s.name === c);
  const c = (name: string, command: string[], extra: Partial<Container> = {}): Container => ({ name, image: rt.images.busybox, command, ...extra });

  it('runs init containers one at a time, in order, before the regular containers', async () => {
    await write('init-order', {
      initContainers: [c('init-a', ['sh', '-c', 'sleep 1']), c('init-b', ['sh', '-c', 'sleep 1'])],
      containers: [c('main', LOOP)],
    });
    const p = await until('init-order', (p) => p.status?.phase === 'Running' && Boolean(cs(p, 'main')?.state.running), 'running');
    const a = cs(p, 'init-a')!.state.terminated!;
    const b = cs(p, 'init-b')!.state.terminated!;
    assert.equal(a.reason, 'Completed');
    assert.equal(a.exitCode, 0);
    assert.equal(b.reason, 'Completed');
    assert.ok(Date.parse(b.startedAt!) >= Date.parse(a.finishedAt!), 'init-b started after init-a finished');
    assert.ok(Date.parse(cs(p, 'main')!.state.running!.startedAt!) >= Date.parse(b.finishedAt!), 'main started after init-b finished');
    assert.equal(p.status?.conditions?.find((x) => x.type === 'Initialized')?.status, 'True');
    await remove('init-order');
  });

  it('shows PodInitializing while an init container runs', async () => {
    await write('init-wait', { initContainers: [c('init', LOOP)], containers: [c('main', LOOP)] });
    const p = await until('init-wait', (p) => Boolean(cs(p, 'init')?.state.running), 'init running');
    assert.equal(p.status?.phase, 'Pending');
    assert.equal(cs(p, 'main')?.state.waiting?.reason, 'PodInitializing');
    const init = p.status?.conditions?.find((x) => x.type === 'Initialized');
    assert.equal(init?.status, 'False');
    assert.equal(init?.reason, 'ContainersNotInitialized');
    assert.equal(init?.message, 'containers with incomplete status: [init]');
    await remove('init-wait');
  });

  it('fails a Never pod whose init container fails, and retries it under OnFailure', async () => {
    await write('init-fail-never', { restartPolicy: 'Never', initContainers: [c('init', ['sh', '-c', 'exit 2'])], containers: [c('main', LOOP)] });
    await write('init-fail-retry', { restartPolicy: 'OnFailure', initContainers: [c('init', ['sh', '-c', 'exit 2'])], containers: [c('main', LOOP)] });
    const never = await until('init-fail-never', (p) => p.status?.phase === 'Failed', 'Failed');
    assert.equal(cs(never, 'init')?.state.terminated?.exitCode, 2);
    assert.equal(cs(never, 'init')?.state.terminated?.reason, 'Error');
    assert.equal(cs(never, 'main')?.state.running, undefined, 'main never ran');
    const retry = await until('init-fail-retry', (p) => (cs(p, 'init')?.restartCount ?? 0) >= 1, 'init retried');
    assert.notEqual(retry.status?.phase, 'Failed');
    assert.equal(cs(retry, 'main')?.state.running, undefined, 'main does not start before init succeeds');
    await remove('init-fail-never');
    await remove('init-fail-retry');
  });

  it('keeps a restartable init container (sidecar) running beside the main container', async () => {
    await write('sidecar', {
      initContainers: [c('proxy', LOOP, { restartPolicy: 'Always' })],
      containers: [c('main', LOOP)],
    });
    const p = await until('sidecar', (p) => Boolean(cs(p, 'main')?.state.running) && Boolean(cs(p, 'proxy')?.state.running), 'both running');
    assert.equal(p.status?.phase, 'Running');
    assert.equal(cs(p, 'proxy')?.started, true);
    await remove('sidecar');
  });

  it('gives each restartPolicy upstream\'s phase and container state', async () => {
    await write('never-fails', { restartPolicy: 'Never', containers: [c('main', ['sh', '-c', 'exit 1'])] });
    await write('onfailure-ok', { restartPolicy: 'OnFailure', containers: [c('main', ['sh', '-c', 'exit 0'])] });
    await write('always-exits', { restartPolicy: 'Always', containers: [c('main', ['sh', '-c', 'exit 0'])] });
    const never = await until('never-fails', (p) => p.status?.phase === 'Failed', 'Failed');
    assert.deepEqual(
      { exitCode: cs(never, 'main')?.state.terminated?.exitCode, reason: cs(never, 'main')?.state.terminated?.reason, restarts: cs(never, 'main')?.restartCount },
      { exitCode: 1, reason: 'Error', restarts: 0 },
    );
    const ok = await until('onfailure-ok', (p) => p.status?.phase === 'Succeeded', 'Succeeded');
    assert.equal(cs(ok, 'main')?.state.terminated?.reason, 'Completed');
    assert.equal(cs(ok, 'main')?.restartCount, 0);
    assert.equal(ok.status?.conditions?.find((x) => x.type === 'Ready')?.reason, 'PodCompleted');
    // Always: restarted even after a clean exit, then held in CrashLoopBackOff.
    const always = await until('always-exits', (p) => cs(p, 'main')?.state.waiting?.reason === 'CrashLoopBackOff', 'CrashLoopBackOff');
    const st = cs(always, 'main')!;
    assert.equal(always.status?.phase, 'Running');
    assert.ok(st.restartCount >= 1);
    assert.equal(st.lastState.terminated?.reason, 'Completed');
    assert.match(st.state.waiting!.message!, new RegExp(`^back-off \\d+[sm0-9]* restarting failed container=main pod=always-exits-${kubelet.nodeName}_default\\(${always.metadata.uid}\\)$`));
    for (const n of ['never-fails', 'onfailure-ok', 'always-exits']) await remove(n);
  });

  it('restarts only the container whose spec changed', async () => {
    const uid = `hash-${Date.now()}`;
    await write('hash', { containers: [c('keep', LOOP), c('change', LOOP)] }, { uid });
    const before = await until('hash', (p) => Boolean(cs(p, 'keep')?.state.running && cs(p, 'change')?.state.running), 'running');
    // The container hash covers name and image (upstream 1.31+): a new image is a new definition.
    await write('hash', { containers: [c('keep', LOOP), c('change', LOOP, { image: rt.images.busyboxLatest })] }, { uid });
    const after = await until('hash', (p) => Boolean(cs(p, 'change')?.state.running) && cs(p, 'change')?.containerID !== cs(before, 'change')?.containerID, 'change restarted');
    assert.equal(after.metadata.uid, uid);
    assert.equal(cs(after, 'keep')?.containerID, cs(before, 'keep')?.containerID, 'the unchanged container kept running');
    assert.equal(cs(after, 'keep')?.restartCount, 0);
    assert.equal(cs(after, 'change')?.restartCount, 1);
    // The old container got SIGTERM and left through its trap.
    assert.equal(cs(after, 'change')?.lastState.terminated?.exitCode, 0);
    await remove('hash');
  });

  it('reports upstream\'s image reasons, and a registry that is down does not hold up other pods', async () => {
    await write('img-never', { containers: [c('main', LOOP, { image: `${rt.registry}/kubelet-ts/absent:1`, imagePullPolicy: 'Never' })] });
    await write('img-invalid', { containers: [c('main', LOOP, { image: 'Not A Valid/Image::name' })] });
    await write('img-down', { containers: [c('main', LOOP, { image: '127.0.0.1:1/kubelet-ts/busybox:1.36' })] });
    await write('img-ok', { containers: [c('main', LOOP, { imagePullPolicy: 'Always' })] });
    const never = await until('img-never', (p) => cs(p, 'main')?.state.waiting?.reason === 'ErrImageNeverPull', 'ErrImageNeverPull');
    assert.equal(cs(never, 'main')?.state.waiting?.message, `Container image "${rt.registry}/kubelet-ts/absent:1" is not present with pull policy of Never`);
    const invalid = await until('img-invalid', (p) => cs(p, 'main')?.state.waiting?.reason === 'InvalidImageName', 'InvalidImageName');
    assert.match(cs(invalid, 'main')!.state.waiting!.message!, /couldn't parse image name/);
    await until('img-down', (p) => cs(p, 'main')?.state.waiting?.reason === 'ErrImagePull', 'ErrImagePull');
    await until('img-down', (p) => cs(p, 'main')?.state.waiting?.reason === 'ImagePullBackOff', 'ImagePullBackOff');
    const ok = await until('img-ok', (p) => Boolean(cs(p, 'main')?.state.running), 'running');
    assert.match(cs(ok, 'main')!.imageID, /@sha256:[0-9a-f]{64}$/);
    for (const n of ['img-never', 'img-invalid', 'img-down', 'img-ok']) await remove(n);
  });

  it('reports CreateContainerConfigError for a missing configmap reference', async () => {
    await write('config-err', { containers: [c('main', LOOP, { env: [{ name: 'X', valueFrom: { configMapKeyRef: { name: 'settings', key: 'x' } } }] })] });
    const p = await until('config-err', (p) => cs(p, 'main')?.state.waiting?.reason === 'CreateContainerConfigError', 'CreateContainerConfigError');
    assert.match(cs(p, 'main')!.state.waiting!.message!, /configmap "settings" not found/);
    await remove('config-err');
  });

  it('reports CreateContainerError when the runtime refuses to create the container', async () => {
    // A Localhost seccomp profile that does not exist: containerd refuses CreateContainer.
    await write('create-err', { containers: [c('main', LOOP, { securityContext: { seccompProfile: { type: 'Localhost', localhostProfile: 'kts-no-such-profile.json' } } })] });
    const p = await until('create-err', (p) => cs(p, 'main')?.state.waiting?.reason === 'CreateContainerError', 'CreateContainerError');
    assert.match(cs(p, 'main')!.state.waiting!.message!, /kts-no-such-profile\.json/);
    await remove('create-err');
  });

  it('runs postStart and preStop hooks (httpGet and exec)', async () => {
    const url = (path: string) => ['sh', '-c', `wget -q -O /dev/null http://127.0.0.1:${hookPort}${path}`];
    await write('hooks', {
      containers: [c('main', LOOP, {
        lifecycle: {
          postStart: { httpGet: { host: '127.0.0.1', port: hookPort, path: '/poststart-http' } },
          preStop: { exec: { command: url('/prestop-exec') } },
        },
      })],
    });
    await until('hooks', (p) => Boolean(cs(p, 'main')?.state.running), 'running');
    assert.ok(hookHits.includes('/poststart-http'), 'postStart httpGet reached the server');
    await remove('hooks');
    await waitFor(async () => hookHits.includes('/prestop-exec'), WAIT, 'preStop exec to run');
  });

  it('kills a container whose postStart hook fails', async () => {
    await write('poststart-fail', { containers: [c('main', LOOP, { lifecycle: { postStart: { exec: { command: ['sh', '-c', 'exit 7'] } } } })] });
    const p = await until('poststart-fail', (p) => (cs(p, 'main')?.restartCount ?? 0) >= 1 && Boolean(cs(p, 'main')?.lastState.terminated), 'killed and restarted');
    assert.notEqual(cs(p, 'main')?.lastState.terminated?.exitCode, undefined);
    await waitFor(async () => /PostStartHook failed[^\n]*exited with 7/.test(kubelet.logs()), WAIT, 'the hook failure in the log');
    await remove('poststart-fail');
  });

  it('stops with SIGTERM first and SIGKILL after the grace period', async () => {
    const uid = `grace-${Date.now()}`;
    // A container that ignores SIGTERM is killed after its 2s grace period (137).
    await write('grace', { containers: [c('main', ['sh', '-c', 'trap "" TERM; while true; do sleep 1; done'])] }, { uid });
    const before = await until('grace', (p) => Boolean(cs(p, 'main')?.state.running), 'running');
    await write('grace', { containers: [c('main', ['sh', '-c', 'trap "" TERM; while true; do sleep 1; done'], { image: rt.images.busyboxLatest })] }, { uid });
    const after = await until('grace', (p) => cs(p, 'main')?.containerID !== cs(before, 'main')?.containerID && Boolean(cs(p, 'main')?.lastState.terminated), 'replaced');
    assert.equal(cs(after, 'main')?.lastState.terminated?.exitCode, 137);
    await remove('grace');
  });
});
