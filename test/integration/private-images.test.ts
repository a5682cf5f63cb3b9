// Private images on containerd: a second local registry that requires authentication (htpasswd),
// pulled from by pods driven with kubectl through the test API server double: with an image
// pull secret (`kubectl create secret docker-registry`), with a credential-provider plugin (a
// shell-script test double speaking credentialprovider.kubelet.k8s.io/v1), and without either
// (ErrImagePull, then ImagePullBackOff, with the registry's refusal). Bad plugins — one that
// prints garbage, one that hangs past upstream's one-minute exec timeout — fail their pull with
// an error naming the plugin while the other pods keep running.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CriClient } from '../../src/runtime/cri-client.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { ensureRuntime, repoRoot, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const run = promisify(execFile);
const WAIT = 120_000;
const NODE = 'kts-private-images-node';
const V1 = 'credentialprovider.kubelet.k8s.io/v1';

interface AuthRegistry { addr: string; user: string; password: string; image: string }

async function authRegistry(): Promise<AuthRegistry> {
  const { stdout } = await run('bash', [join(repoRoot(), 'scripts', 'containerd.sh'), 'env']);
  const env = new Map(stdout.split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const));
  const need = (k: string): string => {
    const v = env.get(k);
    if (!v) throw new Error(`containerd.sh env printed no ${k}`);
    return v;
  };
  return { addr: need('KTS_AUTH_REGISTRY'), user: need('KTS_AUTH_REGISTRY_USER'), password: need('KTS_AUTH_REGISTRY_PASSWORD'), image: need('KTS_PRIVATE_IMAGE') };
}

function pod(name: string, image: string, pullSecrets: string[] = []): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { test: 'private-images' } },
    spec: {
      nodeName: NODE,
      terminationGracePeriodSeconds: 1,
      ...(pullSecrets.length ? { imagePullSecrets: pullSecrets.map((n) => ({ name: n })) } : {}),
      containers: [{ name: 'main', image, imagePullPolicy: 'Always', command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'] }],
    },
  });
}

describe('private images from a registry that requires authentication', () => {
  let rt: TestRuntime;
  let reg: AuthRegistry;
  let cri: CriClient;
  let api: TestApiServer;
  let kubelet: KubeletProcess;
  let dir: string;
  let admin: string;
  let pluginImage: string;

  const kubectl = async (...args: string[]): Promise<string> => (await run('kubectl', ['--kubeconfig', admin, ...args], { timeout: WAIT })).stdout;
  const apply = async (name: string, image: string, secrets?: string[]): Promise<void> => {
    const file = join(dir, `${name}.json`);
    await writeFile(file, pod(name, image, secrets));
    await kubectl('apply', '-f', file);
  };
  const field = async (name: string, path: string): Promise<string> => (await kubectl('get', 'pod', name, '-o', `jsonpath={${path}}`)).trim();
  const running = (name: string) => waitFor(async () => (await field(name, '.status.phase')) === 'Running', WAIT, `${name} Running`);
  /** Waits for the container to wait with `reason`; returns its message (both read in one GET: the reason moves on). */
  const waiting = (name: string, reason: string, limit = WAIT) => waitFor(async () => {
    const out = (await kubectl('get', 'pod', name, '-o', 'jsonpath={.status.containerStatuses[0].state.waiting.reason}{"\\t"}{.status.containerStatuses[0].state.waiting.message}')).trim();
    const tab = out.indexOf('\t');
    return tab >= 0 && out.slice(0, tab) === reason ? out.slice(tab + 1) : undefined;
  }, limit, `${name} waiting with ${reason}`, 500);

  before(async () => {
    rt = await ensureRuntime();
    reg = await authRegistry();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-private-images-'));
    // A second repository in the authenticating registry, served to the plugin's pods.
    pluginImage = `${reg.addr}/kubelet-ts/plugin-busybox:1.36`;
    const creds = `${reg.user}:${reg.password}`;
    await run('skopeo', ['--insecure-policy', 'copy', '--quiet', '--src-tls-verify=false', '--dest-tls-verify=false', '--src-creds', creds, '--dest-creds', creds,
      `docker://${reg.image}`, `docker://${pluginImage}`], { timeout: WAIT });

    // Credential-provider plugins (test doubles): one that answers with the registry's
    // credentials (from the env and args of its config), one that prints garbage, one that hangs.
    const bin = join(dir, 'bin');
    await mkdir(bin);
    const script = async (name: string, body: string) => {
      await writeFile(join(bin, name), `#!/bin/sh\n${body}\n`);
      await chmod(join(bin, name), 0o755);
    };
    await script('kts-test-credential-provider', `[ "$1" = get-credentials ] || { echo "unexpected args: $*" >&2; exit 2; }
req=$(cat)
case "$req" in *'"kind":"CredentialProviderRequest"'*'"image":"${reg.addr}/kubelet-ts/plugin-busybox"'*) ;; *) echo "unexpected request: $req" >&2; exit 3 ;; esac
printf '{"apiVersion":"${V1}","kind":"CredentialProviderResponse","cacheKeyType":"Image","cacheDuration":"0s","auth":{"${reg.addr}":{"username":"%s","password":"%s"}}}' "$KTS_TEST_USER" "$KTS_TEST_PASSWORD"`);
    await script('kts-garbage-credential-provider', 'cat >/dev/null; echo "<html>definitely not a CredentialProviderResponse</html>"');
    await script('kts-hanging-credential-provider', 'exec sleep 3600');
    const config = join(dir, 'credential-providers.yaml');
    await writeFile(config, `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: kts-test-credential-provider
    matchImages: ["${reg.addr}/kubelet-ts/plugin-busybox"]
    defaultCacheDuration: 1m
    apiVersion: ${V1}
    args: [get-credentials]
    env:
      - name: KTS_TEST_USER
        value: ${reg.user}
      - name: KTS_TEST_PASSWORD
        value: ${reg.password}
  - name: kts-garbage-credential-provider
    matchImages: ["${reg.addr}/kubelet-ts/garbage"]
    defaultCacheDuration: 1m
    apiVersion: ${V1}
  - name: kts-hanging-credential-provider
    matchImages: ["${reg.addr}/kubelet-ts/hang"]
    defaultCacheDuration: 1m
    apiVersion: ${V1}
`);

    api = new TestApiServer({});
    await api.start();
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters']), { mode: 0o600 });
    const kubeletKubeconfig = join(dir, 'kubelet.kubeconfig');
    await writeFile(kubeletKubeconfig, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    kubelet = await startKubelet({
      endpoint: rt.endpoint,
      nodeName: NODE,
      extraArgs: ['--kubeconfig', kubeletKubeconfig, '--image-credential-provider-config', config, '--image-credential-provider-bin-dir', bin],
    });
  });

  after(async () => {
    for (const p of api?.list('pods') ?? []) {
      try { api.registry.delete(api.resource('pods'), p.metadata.namespace, p.metadata.name, { gracePeriodSeconds: 1 }); } catch { /* gone */ }
    }
    if (cri) {
      await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'private-images' } })).filter((s) => s.state === 'SANDBOX_READY').length === 0, WAIT, 'pods to stop').catch(() => undefined);
    }
    await kubelet?.stop();
    await api?.stop();
    cri?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('without credentials the pull fails with ErrImagePull, then ImagePullBackOff, naming the registry\'s refusal', async () => {
    await apply('no-secret', reg.image);
    const msg = await waiting('no-secret', 'ErrImagePull');
    assert.match(msg, new RegExp(`^Failed to pull image "${reg.image.replace(/[.]/g, '\\.')}": .*(401 Unauthorized|authorization failed|no basic auth credentials|unauthorized)`, 'i'));
    const backoff = await waiting('no-secret', 'ImagePullBackOff');
    assert.match(backoff, /^Back-off pulling image/);
  });

  it('a pull secret that does not exist: upstream\'s FailedToRetrieveImagePullSecret Warning naming it, and the pull goes on without it', async () => {
    await apply('missing-secret', reg.image, ['no-such-secret']);
    const event = await waitFor(async () => (await kubectl('get', 'events', '--field-selector', 'involvedObject.name=missing-secret,reason=FailedToRetrieveImagePullSecret',
      '-o', 'jsonpath={.items[0].type} {.items[0].message}')).trim() || undefined, WAIT, 'the FailedToRetrieveImagePullSecret event');
    assert.equal(event, 'Warning Unable to retrieve some image pull secrets (no-such-secret); attempting to pull the image may not succeed.');
    await waiting('missing-secret', 'ErrImagePull');
    await kubectl('delete', 'pod', 'missing-secret', '--grace-period=1', '--wait=false');
  });

  it('with an image pull secret (kubectl create secret docker-registry) the pod pulls and runs', async () => {
    await kubectl('create', 'secret', 'docker-registry', 'regcred', `--docker-server=http://${reg.addr}`, `--docker-username=${reg.user}`, `--docker-password=${reg.password}`);
    await apply('with-secret', reg.image, ['regcred']);
    await running('with-secret');
  });

  it('a wrong password in the secret: ErrImagePull naming the refusal', async () => {
    await kubectl('create', 'secret', 'docker-registry', 'wrongcred', `--docker-server=${reg.addr}`, `--docker-username=${reg.user}`, '--docker-password=not-the-password');
    await apply('wrong-secret', reg.image, ['wrongcred']);
    const msg = await waiting('wrong-secret', 'ErrImagePull');
    assert.match(msg, /401 Unauthorized|authorization failed|unauthorized/i);
  });

  it('with a credential-provider plugin the pod pulls and runs', async () => {
    await apply('with-plugin', pluginImage);
    await running('with-plugin');
  });

  it('a plugin that prints garbage: ErrImagePull naming the plugin; the other pods keep running', async () => {
    await apply('garbage-plugin', `${reg.addr}/kubelet-ts/garbage-busybox:1.36`);
    const msg = await waiting('garbage-plugin', 'ErrImagePull');
    assert.match(msg, /credential provider plugin kts-garbage-credential-provider for image 127\.0\.0\.1:\d+\/kubelet-ts\/garbage-busybox: error reading GVK from response/);
    // upstream's plugin families, by plugin name
    const metrics = await (await fetch(`http://127.0.0.1:${kubelet.readOnlyPort}/metrics`)).text();
    assert.match(metrics, /^kubelet_credential_provider_plugin_errors_total\{plugin_name="kts-garbage-credential-provider"\} [1-9]/m);
    assert.doesNotMatch(metrics, /^kubelet_credential_provider_plugin_errors_total\{plugin_name="kts-test-credential-provider"\}/m);
    assert.match(metrics, /^kubelet_credential_provider_plugin_duration_count\{plugin_name="kts-test-credential-provider"\} [1-9]/m);
    assert.match(metrics, /^kubelet_credential_provider_plugin_duration_bucket\{plugin_name="kts-test-credential-provider",le="0\.005"\} \d+$/m);
    assert.equal(await field('with-secret', '.status.phase'), 'Running');
    assert.equal(await field('with-plugin', '.status.phase'), 'Running');
  });

  it('a plugin that hangs: killed after upstream\'s one-minute timeout, ErrImagePull naming it; nothing else stops', async () => {
    await apply('hanging-plugin', `${reg.addr}/kubelet-ts/hang-busybox:1.36`);
    const msg = await waiting('hanging-plugin', 'ErrImagePull', 150_000);
    assert.match(msg, /error execing credential provider plugin kts-hanging-credential-provider for image 127\.0\.0\.1:\d+\/kubelet-ts\/hang-busybox: context deadline exceeded/);
    assert.equal(await field('with-secret', '.status.phase'), 'Running');
    assert.equal(await field('with-plugin', '.status.phase'), 'Running');
    assert.equal(kubelet.child.exitCode, null);
    assert.equal((await kubelet.healthz()).code, 200);
  });
});
