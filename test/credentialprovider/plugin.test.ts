// Credential-provider plugins: config validation, matchImages, the answer cache on a fake clock,
// and the exec protocol with real child processes (shell-script test doubles).

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CredentialPluginError, CredentialProviderConfigError, PluginProvider, execPlugin, loadCredentialProviderConfig,
  registerCredentialProviderPlugins, validateCredentialProviderConfig, type CredentialProvider, type PluginResponse,
} from '../../src/credentialprovider/plugin.js';
import { FakeClock } from '../../src/util/clock.js';

const V1 = 'credentialprovider.kubelet.k8s.io/v1';
const provider = (over: Partial<CredentialProvider> = {}): CredentialProvider => ({
  name: 'test-plugin', matchImages: ['*.example.com', '127.0.0.1:5001'], defaultCacheDuration: 0, apiVersion: V1, args: [], env: [], ...over,
});

describe('CredentialProviderConfig validation', () => {
  const good = { apiVersion: 'kubelet.config.k8s.io/v1', kind: 'CredentialProviderConfig', providers: [{ name: 'p', matchImages: ['*.io'], defaultCacheDuration: '10m', apiVersion: V1, args: ['get'], env: [{ name: 'A', value: 'b' }] }] };
  it('accepts a valid config and reads durations, args and env', () => {
    assert.deepEqual(validateCredentialProviderConfig(good, 'f.yaml'), [{ name: 'p', matchImages: ['*.io'], defaultCacheDuration: 600_000, apiVersion: V1, args: ['get'], env: [{ name: 'A', value: 'b' }] }]);
  });
  const p0 = good.providers[0]!;
  const bad: [string, unknown, RegExp][] = [
    ['no providers', { ...good, providers: [] }, /providers: Required value: at least 1 item in plugins is required/],
    ['wrong apiVersion', { ...good, apiVersion: 'v1' }, /apiVersion: unsupported value "v1"/],
    ['wrong kind', { ...good, kind: 'Foo' }, /kind: must be "CredentialProviderConfig"/],
    ['no name', { ...good, providers: [{ ...p0, name: '' }] }, /providers\[0\]\.name: Required value/],
    ['a name with /', { ...good, providers: [{ ...p0, name: 'a/b' }] }, /providers\[0\]\.name: .*cannot contain '\/'/],
    ['duplicate names', { ...good, providers: [p0, p0] }, /providers\[1\]\.name: Duplicate value: "p"/],
    ['no matchImages', { ...good, providers: [{ ...p0, matchImages: [] }] }, /providers\[0\]\.matchImages: Required value: at least 1 item in matchImages is required/],
    ['a bad matchImages entry', { ...good, providers: [{ ...p0, matchImages: ['a.io', 'bad:port:x'] }] }, /providers\[0\]\.matchImages\[1\]: Invalid value "bad:port:x"/],
    ['no defaultCacheDuration', { ...good, providers: [{ ...p0, defaultCacheDuration: undefined }] }, /providers\[0\]\.defaultCacheDuration: Required value/],
    ['a negative defaultCacheDuration', { ...good, providers: [{ ...p0, defaultCacheDuration: '-1m' }] }, /defaultCacheDuration must be greater than or equal to 0/],
    ['a bad defaultCacheDuration', { ...good, providers: [{ ...p0, defaultCacheDuration: 'soon' }] }, /providers\[0\]\.defaultCacheDuration: Invalid value "soon"/],
    ['no provider apiVersion', { ...good, providers: [{ ...p0, apiVersion: undefined }] }, /providers\[0\]\.apiVersion: Required value: apiVersion is required/],
    ['an unknown provider apiVersion', { ...good, providers: [{ ...p0, apiVersion: 'credentialprovider.kubelet.k8s.io/v2' }] }, /providers\[0\]\.apiVersion: Unsupported value/],
    ['tokenAttributes (not implemented)', { ...good, providers: [{ ...p0, tokenAttributes: {} }] }, /providers\[0\]\.tokenAttributes: .*not implemented/],
    ['an unknown field', { ...good, providers: [{ ...p0, matchImage: [] }] }, /providers\[0\]\.matchImage: unknown field/],
    ['env without a name', { ...good, providers: [{ ...p0, env: [{ value: 'x' }] }] }, /providers\[0\]\.env\[0\]\.name: Required value/],
  ];
  for (const [what, doc, re] of bad) {
    it(`${what}: an error naming the file and field`, () => {
      assert.throws(() => validateCredentialProviderConfig(doc, 'f.yaml'), (e: unknown) => e instanceof CredentialProviderConfigError && /"f\.yaml"/.test((e as Error).message) && re.test((e as Error).message));
    });
  }
});

describe('matchImages (upstream isImageAllowed)', () => {
  const p = new PluginProvider(provider({ matchImages: ['*.registry.io', 'registry.io:8080/team', '*.*.example.com'] }), async () => { throw new Error('unused'); }, new FakeClock());
  const cases: [string, boolean][] = [
    ['abc.registry.io/app', true],
    ['registry.io/app', false],
    ['a.b.registry.io/app', false],
    ['registry.io:8080/team/app', true],
    ['registry.io:8080/other/app', false],
    ['registry.io/team/app', false],
    ['a.b.example.com/x', true],
    ['b.example.com/x', false],
  ];
  for (const [image, want] of cases) it(`${image} → ${want}`, () => assert.equal(p.matches(image), want));
});

describe('the plugin answer cache (fake clock)', () => {
  const answer = (r: Partial<PluginResponse>): PluginResponse => ({ cacheKeyType: 'Image', auth: { '*.example.com': { username: 'u', password: 'p' } }, ...r });
  const counting = (r: PluginResponse) => {
    const seen: string[] = [];
    return { seen, exec: async (_p: CredentialProvider, image: string) => { seen.push(image); return r; } };
  };

  it('caches by image for cacheDuration, runs again after it expires', async () => {
    const clock = new FakeClock();
    const { seen, exec } = counting(answer({ cacheKeyType: 'Image', cacheDuration: 60_000 }));
    const p = new PluginProvider(provider(), exec, clock);
    assert.deepEqual(await p.provide('a.example.com/x'), { '*.example.com': { username: 'u', password: 'p' } });
    await p.provide('a.example.com/x');
    assert.deepEqual(seen, ['a.example.com/x']);
    await p.provide('a.example.com/y'); // another image: the Image key does not cover it
    assert.equal(seen.length, 2);
    clock.step(60_001);
    await p.provide('a.example.com/x');
    assert.equal(seen.length, 3);
  });

  it('a Registry key covers every image of the registry; Global covers every image', async () => {
    const clock = new FakeClock();
    const reg = counting(answer({ cacheKeyType: 'Registry', cacheDuration: 60_000 }));
    const p = new PluginProvider(provider(), reg.exec, clock);
    await p.provide('a.example.com/x');
    await p.provide('a.example.com/y');
    await p.provide('b.example.com/y');
    assert.deepEqual(reg.seen, ['a.example.com/x', 'b.example.com/y']);
    const glob = counting(answer({ cacheKeyType: 'Global', cacheDuration: 60_000 }));
    const g = new PluginProvider(provider(), glob.exec, clock);
    await g.provide('a.example.com/x');
    await g.provide('b.example.com/y');
    assert.deepEqual(glob.seen, ['a.example.com/x']);
  });

  it('no cacheDuration: the provider default; default 0 or a response of 0s: not cached', async () => {
    const clock = new FakeClock();
    const d = counting(answer({}));
    const withDefault = new PluginProvider(provider({ defaultCacheDuration: 30_000 }), d.exec, clock);
    await withDefault.provide('a.example.com/x');
    clock.step(29_000);
    await withDefault.provide('a.example.com/x');
    assert.equal(d.seen.length, 1);
    clock.step(2_000);
    await withDefault.provide('a.example.com/x');
    assert.equal(d.seen.length, 2);

    const z = counting(answer({}));
    const noDefault = new PluginProvider(provider({ defaultCacheDuration: 0 }), z.exec, clock);
    await noDefault.provide('a.example.com/x');
    await noDefault.provide('a.example.com/x');
    assert.equal(z.seen.length, 2);

    const zero = counting(answer({ cacheDuration: 0 }));
    const explicitZero = new PluginProvider(provider({ defaultCacheDuration: 600_000 }), zero.exec, clock);
    await explicitZero.provide('a.example.com/x');
    await explicitZero.provide('a.example.com/x');
    assert.equal(zero.seen.length, 2);
  });

  it('an image the provider does not match runs nothing; concurrent lookups share one run', async () => {
    const clock = new FakeClock();
    let release!: () => void;
    let runs = 0;
    const p = new PluginProvider(provider(), async () => { runs++; await new Promise<void>((r) => { release = r; }); return answer({}); }, clock);
    assert.deepEqual(await p.provide('docker.io/library/busybox'), {});
    assert.equal(runs, 0);
    const both = Promise.all([p.provide('a.example.com/x'), p.provide('a.example.com/x')]);
    await new Promise((r) => setImmediate(r));
    release();
    await both;
    assert.equal(runs, 1);
  });

  it('expired entries are purged after 15 minutes even when never read again', async () => {
    const clock = new FakeClock();
    const { exec } = counting(answer({ cacheKeyType: 'Image', cacheDuration: 60_000 }));
    const p = new PluginProvider(provider(), exec, clock);
    await p.provide('a.example.com/x');
    assert.equal(p.cacheSize, 1);
    clock.step(16 * 60_000);
    await p.provide('127.0.0.1:5001/other');
    assert.equal(p.cacheSize, 1); // only the new entry
  });
});

describe('the exec protocol (real child processes)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-credplugin-'));
    const script = async (name: string, body: string) => {
      await writeFile(join(dir, name), `#!/bin/sh\n${body}\n`);
      await chmod(join(dir, name), 0o755);
    };
    // Echoes what it was given inside a valid response (the request, its args and env).
    await script('echo-plugin', `req=$(cat)
printf '{"apiVersion":"${V1}","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"5m","auth":{"*.example.com":{"username":"%s","password":"%s"}}}' "$1-$PLUGIN_USER" "$(printf '%s' "$req" | base64 -w0)"`);
    await script('hang-plugin', 'exec sleep 600');
    await script('crash-plugin', 'echo "no credentials for you" >&2; exit 3');
    await script('garbage-plugin', 'cat >/dev/null; echo "this is not json"');
    await script('wrong-version-plugin', `cat >/dev/null; echo '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}'`);
    await script('bad-key-type-plugin', `cat >/dev/null; echo '{"apiVersion":"${V1}","kind":"CredentialProviderResponse","cacheKeyType":"Sometimes"}'`);
  });
  after(async () => { await rm(dir, { recursive: true, force: true }); });

  it('sends a CredentialProviderRequest on stdin with the args and env of the config, reads the response', async () => {
    const run = execPlugin(dir);
    const res = await run(provider({ name: 'echo-plugin', args: ['get-credentials'], env: [{ name: 'PLUGIN_USER', value: 'alice' }] }), 'a.example.com/app');
    assert.equal(res.cacheKeyType, 'Registry');
    assert.equal(res.cacheDuration, 300_000);
    const entry = res.auth['*.example.com']!;
    assert.equal(entry.username, 'get-credentials-alice');
    assert.deepEqual(JSON.parse(Buffer.from(entry.password!, 'base64').toString()), { apiVersion: V1, kind: 'CredentialProviderRequest', image: 'a.example.com/app' });
  });

  it('the kubelet environment is passed on, the provider env overriding it', async () => {
    const run = execPlugin(dir, { environ: () => ({ PATH: process.env.PATH, PLUGIN_USER: 'from-kubelet' }) });
    assert.equal((await run(provider({ name: 'echo-plugin', args: ['x'] }), 'a.example.com/app')).auth['*.example.com']!.username, 'x-from-kubelet');
    assert.equal((await run(provider({ name: 'echo-plugin', args: ['x'], env: [{ name: 'PLUGIN_USER', value: 'cfg' }] }), 'a.example.com/app')).auth['*.example.com']!.username, 'x-cfg');
  });

  const failing: [string, string, RegExp][] = [
    ['hangs past the timeout', 'hang-plugin', /^error execing credential provider plugin hang-plugin for image a\.example\.com\/app: context deadline exceeded/],
    ['exits non-zero', 'crash-plugin', /^error execing credential provider plugin crash-plugin for image a\.example\.com\/app: exit status 3: no credentials for you/],
    ['prints garbage', 'garbage-plugin', /^credential provider plugin garbage-plugin for image a\.example\.com\/app: error reading GVK from response/],
    ['answers another apiVersion', 'wrong-version-plugin', /wrong-version-plugin .*apiVersion from credential plugin response did not match expected apiVersion:credentialprovider\.kubelet\.k8s\.io\/v1, actual apiVersion:credentialprovider\.kubelet\.k8s\.io\/v1alpha1/],
    ['answers a bad cacheKeyType', 'bad-key-type-plugin', /bad-key-type-plugin .*did not return a valid cacheKeyType: "Sometimes"/],
    ['does not exist', 'missing-plugin', /^error execing credential provider plugin missing-plugin for image a\.example\.com\/app: .*ENOENT/],
  ];
  for (const [what, name, re] of failing) {
    it(`a plugin that ${what}: an error naming the plugin`, async () => {
      const run = execPlugin(dir, { timeoutMs: 500 });
      await assert.rejects(run(provider({ name }), 'a.example.com/app'), (e: unknown) => e instanceof CredentialPluginError && e.plugin === name && re.test((e as Error).message));
    });
  }

  it('registering checks the bin dir, the config and every executable, naming each', async () => {
    const cfg = join(dir, 'config.yaml');
    await writeFile(cfg, `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: echo-plugin
    matchImages: ["*.example.com"]
    defaultCacheDuration: 1m
    apiVersion: ${V1}
`);
    const clock = new FakeClock();
    const ps = await registerCredentialProviderPlugins(cfg, dir, clock);
    assert.deepEqual(ps.map((p) => p.provider.name), ['echo-plugin']);
    await assert.rejects(registerCredentialProviderPlugins(cfg, undefined, clock), /--image-credential-provider-bin-dir: required/);
    await assert.rejects(registerCredentialProviderPlugins(cfg, join(dir, 'nope'), clock), /--image-credential-provider-bin-dir: plugin binary directory .*nope did not exist/);
    await writeFile(cfg, `apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: absent\n    matchImages: ["a.io"]\n    defaultCacheDuration: 1m\n    apiVersion: ${V1}\n`);
    await assert.rejects(registerCredentialProviderPlugins(cfg, dir, clock), /credential provider "absent": plugin binary executable .*absent did not exist/);
    await writeFile(cfg, '');
    await assert.rejects(loadCredentialProviderConfig(cfg), /credential provider config file ".*config\.yaml" is empty/);
    await writeFile(cfg, 'providers: [unclosed');
    await assert.rejects(loadCredentialProviderConfig(cfg), CredentialProviderConfigError);
  });
});
