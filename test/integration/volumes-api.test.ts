// configMap, secret and projected volumes on a real containerd with objects from the test API
// server: kubelet-ts runs in this process (its API client set, pods fed as the API source would
// feed them), the API server double is started here. Covers files and modes, the secret on a
// tmpfs, a changed configMap reaching the running container, a projected service account token,
// and a restart of kubelet-ts with pods running that loses nothing and removes an orphan's
// directory (its tmpfs unmounted first, a symlink out of it not followed).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyPodDefaults } from '../../src/api/defaults.js';
import type { Pod } from '../../src/api/types.js';
import { RestClient } from '../../src/client/rest.js';
import { defaultKubeletConfig, type KubeletConfig, type KubeletFlags } from '../../src/config/index.js';
import { buildDependencies, type PodSources } from '../../src/kubelet/dependencies.js';
import { Kubelet } from '../../src/kubelet/kubelet.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import type { PodUpdate } from '../../src/sources/pod-config.js';
import { parseMountInfo, systemMounter } from '../../src/volumemanager/mounter.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { waitFor } from '../fixtures/kubelet-process.js';
import { loggerDouble } from '../kubelet/doubles.js';

const WAIT = 90_000;
const LABEL = { test: 'volumes-api' };
const TOKEN = 'volumes-api-admin';
const NODE = 'kts-volapi-node';

async function tmpfsMounts(): Promise<string[]> {
  return parseMountInfo(await readFile('/proc/self/mountinfo', 'utf8')).filter((m) => m.fsType === 'tmpfs').map((m) => m.mountPoint);
}

describe('configMap, secret and projected volumes from the test API server on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let api: TestApiServer;
  let client: RestClient;
  let scratch: string;
  let rootDir: string;
  let kubelet: Kubelet;
  let feed: ((u: PodUpdate) => void) | undefined;
  const logs: string[] = [];
  const pods = new Map<string, Pod>();

  async function startKubelet(): Promise<Kubelet> {
    const config: KubeletConfig = {
      ...defaultKubeletConfig(),
      containerRuntimeEndpoint: rt.endpoint,
      podLogsDir: join(scratch, 'logs'),
      // every pod resyncs every 2 s and reads its objects afresh (strategy Get)
      syncFrequency: 2_000,
      configMapAndSecretChangeDetectionStrategy: 'Get',
      clusterDomain: 'cluster.local',
    };
    const flags: KubeletFlags = { rootDir, nodeIP: [], verbosity: 2, help: false, hostnameOverride: NODE };
    const log = loggerDouble(logs);
    const deps = await buildDependencies(config, flags, NODE, log);
    deps.apiClient = client;
    // the pods come as the API source would send them (that source is wired elsewhere)
    deps.podSources = ({ onUpdate }): PodSources => {
      feed = onUpdate;
      queueMicrotask(() => onUpdate({ op: 'ADD', pods: [...pods.values()], source: 'api' }));
      return { startFileSource: () => undefined, startUrlSource: () => undefined, seenAllSources: () => true, stop: async () => undefined };
    };
    const k = new Kubelet({ config, flags, deps });
    await k.start();
    return k;
  }

  /** Creates the pod in the API server (so tokens can be bound to it) and hands it to kubelet-ts. */
  function runPod(name: string, spec: Record<string, unknown>): Pod {
    const created = api.create('pods', 'default', {
      metadata: { name, labels: LABEL },
      spec: { nodeName: NODE, hostNetwork: true, terminationGracePeriodSeconds: 1, serviceAccountName: 'default', ...spec },
    }) as Pod;
    const pod = structuredClone(created);
    pod.metadata.annotations = { ...pod.metadata.annotations, 'kubernetes.io/config.source': 'api' };
    applyPodDefaults(pod);
    pods.set(name, pod);
    feed?.({ op: 'ADD', pods: [pod], source: 'api' });
    return pod;
  }

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    scratch = await mkdtemp(join(tmpdir(), 'kts-volapi-it-'));
    rootDir = join(scratch, 'root');
    await mkdir(rootDir);
    api = new TestApiServer({ tls: false, tokens: { [TOKEN]: { user: 'system:node:kts-volapi-node', groups: ['system:nodes'] } } });
    await api.start();
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { maxRetries: 0 });
    api.create('configmaps', 'default', { metadata: { name: 'app-config' }, data: { 'app.conf': 'color=blue\n', mode: 'fast' } });
    api.create('secrets', 'default', { metadata: { name: 'app-secret' }, stringData: { password: 's3cret', user: 'admin' } });
    kubelet = await startKubelet();
  });

  after(async () => {
    if (feed) feed({ op: 'REMOVE', pods: [...pods.values()], source: 'api' });
    pods.clear();
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: LABEL })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet?.stop();
    for (const m of (await tmpfsMounts()).filter((p) => p.startsWith(`${rootDir}/`)).sort((a, b) => b.length - a.length)) {
      await systemMounter.unmount(m).catch(() => undefined);
    }
    client?.close();
    await api?.stop();
    cri.close();
    await rm(scratch, { recursive: true, force: true });
  });

  const runningContainer = async (pod: Pod, name = 'app'): Promise<string> => {
    const cs = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': pod.metadata.uid!, 'io.kubernetes.container.name': name } });
    return cs.find((x) => x.state === 'CONTAINER_RUNNING')?.id ?? '';
  };
  const exec = async (id: string, script: string): Promise<string> => {
    const r = await cri.execSync(id, ['sh', '-c', script], 10);
    assert.equal(r.exit_code, 0, `${script}: ${Buffer.from(r.stderr).toString()}`);
    return Buffer.from(r.stdout).toString();
  };
  const running = (pod: Pod): Promise<string> => waitFor(() => runningContainer(pod), WAIT, `${pod.metadata.name} to run\n${logs.slice(-30).join('\n')}`);
  const secretDir = (pod: Pod, vol: string): string => join(rootDir, 'pods', pod.metadata.uid!, 'volumes', 'kubernetes.io~secret', vol);

  const appSpec = () => ({
    volumes: [
      { name: 'config', configMap: { name: 'app-config' } },
      { name: 'creds', secret: { secretName: 'app-secret', defaultMode: 0o400, items: [{ key: 'password', path: 'db/password' }] } },
      { name: 'token', projected: { sources: [
        { serviceAccountToken: { audience: 'vault', expirationSeconds: 3600, path: 'token' } },
        { configMap: { name: 'app-config', items: [{ key: 'mode', path: 'mode' }] } },
        { downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
      ] } },
    ],
    containers: [{
      name: 'app',
      image: rt.images.busybox,
      command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
      volumeMounts: [
        { name: 'config', mountPath: '/etc/config' },
        { name: 'creds', mountPath: '/etc/creds' },
        { name: 'token', mountPath: '/var/run/secrets/tokens' },
      ],
    }],
  });

  let app: Pod;
  let appContainer: string;

  it('a configMap and a secret appear as files (the secret on a tmpfs, 0400), read-only', async () => {
    app = runPod('app', appSpec());
    appContainer = await running(app);
    assert.equal(await exec(appContainer, 'cat /etc/config/app.conf'), 'color=blue\n');
    assert.equal(await exec(appContainer, 'cat /etc/config/mode'), 'fast');
    assert.equal(await exec(appContainer, 'cat /etc/creds/db/password'), 's3cret');
    assert.equal((await exec(appContainer, 'stat -L -c %a /etc/creds/db/password')).trim(), '400');
    assert.equal((await exec(appContainer, 'stat -L -c %a /etc/config/app.conf')).trim(), '644');
    // inside, the secret is a tmpfs and the configMap is not; both read-only
    const mounts = await exec(appContainer, 'cat /proc/mounts');
    assert.match(mounts, /^tmpfs \/etc\/creds tmpfs ro[, ]/m);
    assert.doesNotMatch(mounts, /^tmpfs \/etc\/config /m);
    const ro = await cri.execSync(appContainer, ['sh', '-c', 'echo x > /etc/config/new'], 10);
    assert.notEqual(ro.exit_code, 0);
    // on the host: the secret volume is a tmpfs mount, its files behind ..data
    assert.ok((await tmpfsMounts()).includes(secretDir(app, 'creds')));
    assert.ok((await lstat(join(secretDir(app, 'creds'), 'db'))).isSymbolicLink());
  });

  it('a projected service account token (bound to the pod, for its audience) appears with the other projections', async () => {
    const token = await exec(appContainer, 'cat /var/run/secrets/tokens/token');
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    assert.equal(claims.sub, 'system:serviceaccount:default:default');
    assert.deepEqual(claims.aud, ['vault']);
    assert.deepEqual(claims['kubernetes.io'].pod, { name: 'app', uid: app.metadata.uid });
    assert.ok(claims.exp - claims.iat === 3600);
    assert.equal(await exec(appContainer, 'cat /var/run/secrets/tokens/mode'), 'fast');
    assert.equal(await exec(appContainer, 'cat /var/run/secrets/tokens/name'), 'app');
    assert.match(await exec(appContainer, 'cat /proc/mounts'), /^tmpfs \/var\/run\/secrets\/tokens tmpfs ro[, ]/m);
    const posts = api.requests.filter((r) => r.method === 'POST' && r.path === '/api/v1/namespaces/default/serviceaccounts/default/token');
    assert.equal(posts.length, 1, 'one TokenRequest, reused on every resync until it is due');
  });

  it('a changed configMap is updated inside the running container', async () => {
    const cm = api.get('configmaps', 'default', 'app-config')!;
    api.registry.update(api.resource('configmaps'), 'default', 'app-config', { ...cm, data: { 'app.conf': 'color=green\n', mode: 'slow' } });
    await waitFor(async () => (await exec(appContainer, 'cat /etc/config/app.conf')) === 'color=green\n', 30_000, 'the new configMap data in the container');
    await waitFor(async () => (await exec(appContainer, 'cat /var/run/secrets/tokens/mode')) === 'slow', 30_000, 'the projected configMap key in the container');
    assert.equal(await runningContainer(app), appContainer, 'the same container, not restarted');
  });

  it('a restart of kubelet-ts with pods running loses nothing and removes an orphan\'s directory', async () => {
    const orphan = runPod('orphan', {
      volumes: [{ name: 'creds', secret: { secretName: 'app-secret' } }],
      containers: [{ name: 'app', image: rt.images.busybox, command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'], volumeMounts: [{ name: 'creds', mountPath: '/etc/creds' }] }],
    });
    await running(orphan);
    const orphanDir = join(rootDir, 'pods', orphan.metadata.uid!);
    assert.ok((await tmpfsMounts()).includes(secretDir(orphan, 'creds')));
    const appTmpfs = (await tmpfsMounts()).filter((m) => m.startsWith(join(rootDir, 'pods', app.metadata.uid!)));

    await kubelet.stop();
    // while kubelet-ts is down: the orphan is deleted and its sandbox removed from the runtime
    // behind its back; its directory stays with its tmpfs mounted and a link pointing outside
    pods.delete('orphan');
    api.registry.delete(api.resource('pods'), 'default', 'orphan', { gracePeriodSeconds: 0 });
    for (const s of await cri.listPodSandbox({ label_selector: { 'io.kubernetes.pod.uid': orphan.metadata.uid! } })) {
      await cri.stopPodSandbox(s.id);
      await cri.removePodSandbox(s.id);
    }
    const outside = join(scratch, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'precious'), 'keep me');
    await symlink(outside, join(orphanDir, 'volumes', 'escape'));

    kubelet = await startKubelet();
    await waitFor(async () => !(await lstat(orphanDir).then(() => true, () => false)), WAIT, `the orphan's directory to be removed\n${logs.slice(-30).join('\n')}`);
    assert.ok(!(await tmpfsMounts()).includes(secretDir(orphan, 'creds')), 'the orphan\'s tmpfs unmounted');
    assert.ok(logs.some((l) => l === 'I Removed orphaned pod directory'), 'removed by the orphan cleanup (the runtime no longer had the pod)');
    assert.equal(await readFile(join(outside, 'precious'), 'utf8'), 'keep me', 'nothing followed out of the pod directory');

    // the running pod: same container, every mount in place exactly once, files readable
    await new Promise((r) => setTimeout(r, 5_000)); // a few resyncs of the new kubelet-ts
    assert.equal(await runningContainer(app), appContainer);
    assert.deepEqual((await tmpfsMounts()).filter((m) => m.startsWith(join(rootDir, 'pods', app.metadata.uid!))).sort(), appTmpfs.sort());
    assert.equal(await exec(appContainer, 'cat /etc/creds/db/password'), 's3cret');
    assert.equal(await exec(appContainer, 'cat /etc/config/app.conf'), 'color=green\n');
    assert.match(await exec(appContainer, 'cat /var/run/secrets/tokens/token'), /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.ok(logs.some((l) => l.startsWith('I Reconstructed volumes from disk')), 'the actual state was read back');
  });
});
