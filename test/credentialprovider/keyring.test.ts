// The keyring's matching (upstream pkg/credentialprovider keyring_test cases) and the decoding
// of dockercfg / dockerconfigjson pull secrets.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  CredentialError, DockerKeyring, addPullSecret, isDefaultRegistryMatch, keyringKey, urlsMatch, type PullSecret,
} from '../../src/credentialprovider/keyring.js';
import { normalizeRepository } from '../../src/credentialprovider/index.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('urlsMatch (upstream TestURLsMatch)', () => {
  const cases: [string, string, boolean][] = [
    ['*.kubernetes.io', 'prefix.kubernetes.io', true],
    ['prefix.*.io', 'prefix.kubernetes.io', true],
    ['prefix.kubernetes.*', 'prefix.kubernetes.io', true],
    ['*-good.kubernetes.io', 'prefix-good.kubernetes.io', true],
    ['*.kubernetes.io', 'kubernetes.io', false],
    ['*.*.kubernetes.io', 'prefix.kubernetes.io', false],
    ['*kubernetes.io', 'prefix.kubernetes.io', false],
    ['*.kubernetes.io', 'a.b.kubernetes.io', false],
    ['kubernetes.io', 'kubernetes.io', true],
    ['*.kubernetes.io:1111', 'prefix.kubernetes.io:1111', true],
    ['*.kubernetes.io:1111', 'prefix.kubernetes.io:1112', false],
    ['*.kubernetes.io:1111', 'prefix.kubernetes.io', false],
    ['*.kubernetes.io', 'prefix.kubernetes.io:1111', false],
    ['prefix.kubernetes.io/foo', 'prefix.kubernetes.io/foo/bar', true],
    ['prefix.kubernetes.io/foo/bar', 'prefix.kubernetes.io/foo', false],
    ['*.kubernetes.io/foo', 'prefix.kubernetes.io/foo/bar', true],
    ['*.kubernetes.io', 'prefix.kubernetes.io/foo/bar', true],
    // Go's URL parser reads `?` as a query and refuses `[` in a host: neither globs a host.
    ['k?s.io', 'k8s.io', false],
    ['k[0-9]s.io', 'k8s.io', false],
    ['k8s.io', 'K8S.io', false],
  ];
  for (const [glob, target, want] of cases) {
    it(`${glob} vs ${target} → ${want}`, () => assert.equal(urlsMatch(glob, target), want));
  }
});

describe('keyring keys and the default registry', () => {
  it('drops the scheme and /v1/, /v2/ prefixes, keeps the port and path', () => {
    assert.equal(keyringKey('https://index.docker.io/v1/'), 'index.docker.io');
    assert.equal(keyringKey('http://registry.example.com:5000/v2/'), 'registry.example.com:5000');
    assert.equal(keyringKey('quay.io/coreos'), 'quay.io/coreos');
    assert.equal(keyringKey('https://quay.io/v1/coreos'), 'quay.io/coreos');
    assert.equal(keyringKey('127.0.0.1:5001'), '127.0.0.1:5001');
    assert.equal(keyringKey('bad host:port:x'), undefined);
  });

  it('isDefaultRegistryMatch as upstream', () => {
    assert.equal(isDefaultRegistryMatch('ubuntu'), true);
    assert.equal(isDefaultRegistryMatch('library/ubuntu'), true);
    assert.equal(isDefaultRegistryMatch('docker.io/library/ubuntu'), true);
    assert.equal(isDefaultRegistryMatch('index.docker.io/library/ubuntu'), true);
    assert.equal(isDefaultRegistryMatch('gcr.io/x/y'), false);
    assert.equal(isDefaultRegistryMatch('localhost:5000/y'), false);
    assert.equal(isDefaultRegistryMatch(''), false);
  });

  it('normalizes image names to the repository pulled from', () => {
    assert.equal(normalizeRepository('busybox'), 'docker.io/library/busybox');
    assert.equal(normalizeRepository('busybox:1.36'), 'docker.io/library/busybox');
    assert.equal(normalizeRepository('google/pause@sha256:abcd'), 'docker.io/google/pause');
    assert.equal(normalizeRepository('index.docker.io/foo'), 'docker.io/library/foo');
    assert.equal(normalizeRepository('127.0.0.1:5001/kts/app:v1'), '127.0.0.1:5001/kts/app');
    assert.equal(normalizeRepository('localhost/app'), 'localhost/app');
  });
});

describe('DockerKeyring.lookup', () => {
  it('docker hub credentials (https://index.docker.io/v1/) serve unqualified and qualified Docker Hub images', () => {
    const k = new DockerKeyring();
    k.add({ 'https://index.docker.io/v1/': { username: 'u', password: 'p' } }, 'test');
    assert.deepEqual(k.lookup(normalizeRepository('google/docker-registry')).map((c) => c.auth), [{ username: 'u', password: 'p' }]);
    assert.deepEqual(k.lookup('index.docker.io/google/docker-registry').map((c) => c.auth.username), ['u']);
    assert.deepEqual(k.lookup('gcr.io/google/docker-registry'), []);
  });

  it('returns the more specific path first (quay.io/coreos before quay.io), then the host', () => {
    const k = new DockerKeyring();
    k.add({ 'quay.io': { username: 'host' }, 'quay.io/coreos': { username: 'path' }, 'https://quay.io/coreos/etcd': { username: 'deep' } }, 'test');
    assert.deepEqual(k.lookup('quay.io/coreos/etcd').map((c) => c.auth.username), ['deep', 'path', 'host']);
    assert.deepEqual(k.lookup('quay.io/coreos/other').map((c) => c.auth.username), ['path', 'host']);
    assert.deepEqual(k.lookup('quay.io/other/etcd').map((c) => c.auth.username), ['host']);
  });

  it('matches wildcard hosts and needs the same port', () => {
    const k = new DockerKeyring();
    k.add({ 'https://*.docker.io/v1/': { username: 'glob' }, '*.example.com:8080': { username: 'port' } }, 'test');
    assert.deepEqual(k.lookup('registry.docker.io/foo/bar').map((c) => c.auth.username), ['glob']);
    assert.deepEqual(k.lookup('sub.example.com:8080/foo').map((c) => c.auth.username), ['port']);
    assert.deepEqual(k.lookup('sub.example.com/foo'), []);
    assert.deepEqual(k.lookup('sub.example.com:8081/foo'), []);
    assert.deepEqual(k.lookup('a.sub.docker.io/foo'), []);
  });
});

const secret = (type: string, key: string, value: string, name = 'regcred'): PullSecret => ({ metadata: { name, namespace: 'ns' }, type, data: { [key]: value } });

describe('pull secrets', () => {
  it('decodes a kubernetes.io/dockerconfigjson secret, auth winning over username/password', () => {
    const k = new DockerKeyring();
    addPullSecret(k, secret('kubernetes.io/dockerconfigjson', '.dockerconfigjson', b64(JSON.stringify({
      auths: { '127.0.0.1:5001': { username: 'ignored', password: 'x', auth: b64('alice:pa:ss') }, 'other.io': { username: 'bob', password: 'pw' } },
    }))));
    assert.deepEqual(k.lookup('127.0.0.1:5001/kts/app'), [{ auth: { username: 'alice', password: 'pa:ss' }, source: 'secret ns/regcred' }]);
    assert.deepEqual(k.lookup('other.io/x').map((c) => c.auth), [{ username: 'bob', password: 'pw' }]);
  });

  it('decodes a kubernetes.io/dockercfg secret (no auths wrapper)', () => {
    const k = new DockerKeyring();
    addPullSecret(k, secret('kubernetes.io/dockercfg', '.dockercfg', b64(JSON.stringify({ 'https://registry.example.com': { auth: b64('u:p'), email: 'a@b' } }))));
    assert.deepEqual(k.lookup('registry.example.com/app').map((c) => c.auth), [{ username: 'u', password: 'p' }]);
  });

  it('ignores other secret types and a type without its key', () => {
    const k = new DockerKeyring();
    addPullSecret(k, secret('Opaque', '.dockerconfigjson', b64('{"auths":{"a.io":{"username":"u"}}}')));
    addPullSecret(k, secret('kubernetes.io/dockercfg', '.dockerconfigjson', b64('{"a.io":{"username":"u"}}')));
    assert.equal(k.size, 0);
  });

  const bad: [string, PullSecret, RegExp][] = [
    ['bad base64 in the auth field', secret('kubernetes.io/dockerconfigjson', '.dockerconfigjson', b64('{"auths":{"a.io":{"auth":"!!notbase64"}}}')),
      /image pull secret "ns\/regcred" \.dockerconfigjson: auths\["a\.io"\]\.auth: illegal base64 data/],
    ['an auth field without a colon', secret('kubernetes.io/dockerconfigjson', '.dockerconfigjson', b64(`{"auths":{"a.io":{"auth":"${b64('nocolon')}"}}}`)),
      /image pull secret "ns\/regcred" .*auth: unable to parse auth field, must be formatted as base64\(username:password\)/],
    ['content that is not JSON', secret('kubernetes.io/dockercfg', '.dockercfg', b64('{not json')), /image pull secret "ns\/regcred" \.dockercfg: not valid JSON/],
    ['the data itself not base64', secret('kubernetes.io/dockercfg', '.dockercfg', '%%%'), /image pull secret "ns\/regcred": data\["\.dockercfg"\]: illegal base64 data/],
    ['a username that is not a string', secret('kubernetes.io/dockerconfigjson', '.dockerconfigjson', b64('{"auths":{"a.io":{"username":5}}}')), /auths\["a\.io"\]\.username: must be a string/],
    ['auths not an object', secret('kubernetes.io/dockerconfigjson', '.dockerconfigjson', b64('{"auths":[]}')), /image pull secret "ns\/regcred" \.dockerconfigjson: auths: must be a JSON object/],
  ];
  for (const [what, s, re] of bad) {
    it(`${what}: a clear error naming the secret`, () => {
      assert.throws(() => addPullSecret(new DockerKeyring(), s), (err: unknown) => err instanceof CredentialError && re.test((err as Error).message));
    });
  }
});
