// Pulls with credentials: the image manager asks the pod's pull secrets and the plugins, passes
// each matching credential as the CRI AuthConfig in turn until one works (no anonymous try once
// any matched, as upstream), and pulls anonymously when none matched.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/api/types.js';
import { PullCredentials, type PullSecretSource } from '../../src/credentialprovider/index.js';
import { PluginProvider, type CredentialProvider } from '../../src/credentialprovider/plugin.js';
import { ImageError, ImageManager } from '../../src/images/image-manager.js';
import type { AuthConfig } from '../../src/runtime/cri-types.js';
import { FakeClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { StandaloneObjectSource } from '../../src/volumemanager/object-source.js';

setLogSink(() => undefined);

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const REG = '127.0.0.1:5001';

/** A registry behind a CRI double: a pull succeeds only with the right username/password. */
class AuthRegistryDouble {
  pulls: { image: string; auth: AuthConfig | undefined }[] = [];
  constructor(private readonly user: string, private readonly password: string) {}
  async imageStatus() {
    return { image: null };
  }
  async pullImage(spec: { image: string }, auth: AuthConfig | undefined) {
    this.pulls.push({ image: spec.image, auth });
    if (!spec.image.startsWith(`${REG}/`)) return { image_ref: 'sha256:public' };
    if (auth?.username === this.user && auth.password === this.password) return { image_ref: 'sha256:private' };
    throw new Error(`failed to pull and unpack image "${spec.image}": failed to resolve reference "${spec.image}": pull access denied, repository does not exist or may require authorization: authorization failed: no basic auth credentials`);
  }
}

const secrets = (objs: Record<string, unknown>): PullSecretSource & { reads: string[] } => {
  const reads: string[] = [];
  return {
    reads,
    async getSecret(ns, name) {
      reads.push(`${ns}/${name}`);
      const s = objs[name];
      if (!s) throw new Error(`secret "${name}" not found`);
      return s as never;
    },
  };
};
const dockerconfigjson = (name: string, auths: Record<string, { username: string; password: string }>) => ({
  metadata: { name, namespace: 'team' }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': b64(JSON.stringify({ auths })) },
});
const pod = (pullSecrets: string[]): Pod => ({
  metadata: { name: 'p', namespace: 'team', uid: 'u1' },
  spec: { containers: [], imagePullSecrets: pullSecrets.map((name) => ({ name })) } as Pod['spec'],
});
const container = (image: string) => ({ name: 'c', image, imagePullPolicy: 'Always' as const });

function manager(cri: AuthRegistryDouble, credentials?: PullCredentials) {
  return new ImageManager({ cri, clock: new FakeClock(), log: createLogger(), serializeImagePulls: true, credentials });
}

describe('pulls with imagePullSecrets', () => {
  it('passes the matching secret as AuthConfig; the pull succeeds', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const src = secrets({ regcred: dockerconfigjson('regcred', { [`http://${REG}`]: { username: 'alice', password: 's3cret' } }) });
    const m = manager(cri, new PullCredentials({ secrets: src, log: createLogger() }));
    assert.equal(await m.ensureImageExists(pod(['regcred']), container(`${REG}/kts/app:v1`)), 'sha256:private');
    assert.deepEqual(cri.pulls, [{ image: `${REG}/kts/app:v1`, auth: { username: 'alice', password: 's3cret' } }]);
    assert.deepEqual(src.reads, ['team/regcred']);
  });

  it('tries each matching credential in order (more specific first) until one works', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const src = secrets({
      a: dockerconfigjson('a', { [REG]: { username: 'alice', password: 's3cret' } }),
      b: dockerconfigjson('b', { [`${REG}/kts`]: { username: 'old', password: 'stale' } }),
    });
    const m = manager(cri, new PullCredentials({ secrets: src, log: createLogger() }));
    assert.equal(await m.ensureImageExists(pod(['a', 'b']), container(`${REG}/kts/app:v1`)), 'sha256:private');
    assert.deepEqual(cri.pulls.map((p) => p.auth?.username), ['old', 'alice']);
  });

  it('every matching credential wrong: ErrImagePull with each failure, and no anonymous try', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const src = secrets({ a: dockerconfigjson('a', { [REG]: { username: 'bob', password: 'x' } }), b: dockerconfigjson('b', { [REG]: { username: 'carol', password: 'y' } }) });
    const m = manager(cri, new PullCredentials({ secrets: src, log: createLogger() }));
    await assert.rejects(m.ensureImageExists(pod(['a', 'b']), container(`${REG}/kts/app:v1`)), (e: unknown) => {
      assert.ok(e instanceof ImageError);
      assert.equal(e.code, 'ErrImagePull');
      assert.match(e.message, /^Failed to pull image "127\.0\.0\.1:5001\/kts\/app:v1": \[.*no basic auth credentials, .*no basic auth credentials\]$/);
      return true;
    });
    assert.deepEqual(cri.pulls.map((p) => p.auth?.username), ['bob', 'carol']);
  });

  it('no matching credential: pulls anonymously (auth undefined)', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const src = secrets({ a: dockerconfigjson('a', { 'other.example.com': { username: 'x', password: 'y' } }) });
    const m = manager(cri, new PullCredentials({ secrets: src, log: createLogger() }));
    assert.equal(await m.ensureImageExists(pod(['a']), container('busybox:1.36')), 'sha256:public');
    assert.deepEqual(cri.pulls, [{ image: 'busybox:1.36', auth: undefined }]);
  });

  it('a secret that cannot be read is skipped (logged, event hook called) and the pull goes on without it', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const events: string[] = [];
    const creds = new PullCredentials({ secrets: secrets({}), log: createLogger(), onSecretsMissing: (_p, m) => events.push(m) });
    await assert.rejects(manager(cri, creds).ensureImageExists(pod(['gone']), container(`${REG}/kts/app:v1`)),
      /no basic auth credentials \(image pull secret "gone" could not be read\)$/);
    assert.deepEqual(cri.pulls.map((p) => p.auth), [undefined]);
    assert.deepEqual(events, ['Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed.']);
  });

  it('standalone (no API server): the secret is not read, the pull goes on anonymously', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const m = manager(cri, new PullCredentials({ secrets: new StandaloneObjectSource(), log: createLogger() }));
    assert.equal(await m.ensureImageExists(pod(['regcred']), container('busybox:1.36')), 'sha256:public');
    assert.deepEqual(cri.pulls.map((p) => p.auth), [undefined]);
  });

  it('a secret that does not decode fails the pull with ErrImagePull naming the secret', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const src = secrets({ broken: { metadata: { name: 'broken', namespace: 'team' }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': b64('{"auths":{"a.io":{"auth":"***"}}}') } } });
    const m = manager(cri, new PullCredentials({ secrets: src, log: createLogger() }));
    await assert.rejects(m.ensureImageExists(pod(['broken']), container(`${REG}/kts/app:v1`)),
      (e: unknown) => e instanceof ImageError && e.code === 'ErrImagePull' && /image pull secret "team\/broken" .*illegal base64 data/.test(e.message));
    assert.equal(cri.pulls.length, 0);
  });
});

describe('pulls with credential-provider plugins', () => {
  const prov: CredentialProvider = { name: 'test-plugin', matchImages: [REG], defaultCacheDuration: 0, apiVersion: 'credentialprovider.kubelet.k8s.io/v1', args: [], env: [] };
  it('secret credentials come before the plugin\'s; the plugin is asked with the normalized repository', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const asked: string[] = [];
    const plugin = new PluginProvider(prov, async (_p, image) => { asked.push(image); return { cacheKeyType: 'Image', auth: { [REG]: { username: 'alice', password: 's3cret' } } }; }, new FakeClock());
    const src = secrets({ a: dockerconfigjson('a', { [REG]: { username: 'bob', password: 'x' } }) });
    const m = manager(cri, new PullCredentials({ secrets: src, providers: [plugin], log: createLogger() }));
    assert.equal(await m.ensureImageExists(pod(['a']), container(`${REG}/kts/app:v1`)), 'sha256:private');
    assert.deepEqual(asked, [`${REG}/kts/app`]);
    assert.deepEqual(cri.pulls.map((p) => p.auth?.username), ['bob', 'alice']);
  });

  it('a failing plugin adds nothing: the pull goes on anonymously and its error names the plugin', async () => {
    const cri = new AuthRegistryDouble('alice', 's3cret');
    const plugin = new PluginProvider(prov, async () => { throw new Error('error execing credential provider plugin test-plugin for image x: exit status 1'); }, new FakeClock());
    const m = manager(cri, new PullCredentials({ providers: [plugin], log: createLogger() }));
    await assert.rejects(m.ensureImageExists(pod([]), container(`${REG}/kts/app:v1`)),
      (e: unknown) => e instanceof ImageError && e.code === 'ErrImagePull' && /no basic auth credentials \(error execing credential provider plugin test-plugin .*exit status 1\)$/.test(e.message));
    assert.deepEqual(cri.pulls.map((p) => p.auth), [undefined]);
  });
});
