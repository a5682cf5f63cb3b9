// The settings of API server mode: kubeAPIQPS/kubeAPIBurst/contentType, registerWithTaints,
// nodeStatusMaxImages (upstream defaults and validation) and --node-labels.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError } from '../../src/config/errors.js';
import { loadConfig, parseKubeletFlags, validateStandaloneAuth, type ReadFileFn } from '../../src/config/index.js';

function files(map: Record<string, string>): ReadFileFn {
  return async (path: string) => {
    if (!(path in map)) throw Object.assign(new Error(`ENOENT ${path}`), { code: 'ENOENT' });
    return map[path]!;
  };
}

const HEAD = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n';
const load = (body: string) => loadConfig(['--config=/c.yaml'], files({ '/c.yaml': HEAD + body }));

describe('API server mode settings', () => {
  it('defaults as upstream: 50 QPS, burst 100, protobuf, 50 images, no taints', async () => {
    const { config, warnings } = await load('');
    assert.equal(config.kubeAPIQPS, 50);
    assert.equal(config.kubeAPIBurst, 100);
    assert.equal(config.contentType, 'application/vnd.kubernetes.protobuf');
    assert.equal(config.nodeStatusMaxImages, 50);
    assert.deepEqual(config.registerWithTaints, []);
    assert.deepEqual(warnings, []);
  });

  it('reads them from the file without a not-implemented warning', async () => {
    const { config, warnings } = await load([
      'kubeAPIQPS: 5', 'kubeAPIBurst: 10', 'contentType: application/json', 'nodeStatusMaxImages: -1',
      'registerWithTaints:', '- {key: dedicated, value: infra, effect: NoSchedule}', '- {key: quiet, effect: NoExecute}', '',
    ].join('\n'));
    assert.equal(config.kubeAPIQPS, 5);
    assert.equal(config.kubeAPIBurst, 10);
    assert.equal(config.contentType, 'application/json');
    assert.equal(config.nodeStatusMaxImages, -1);
    assert.deepEqual(config.registerWithTaints, [{ key: 'dedicated', value: 'infra', effect: 'NoSchedule' }, { key: 'quiet', effect: 'NoExecute' }]);
    assert.deepEqual(warnings, []);
  });

  it('refuses bad values, naming the field', async () => {
    for (const [body, field] of [
      ['kubeAPIQPS: -1', 'kubeAPIQPS'],
      ['kubeAPIBurst: -3', 'kubeAPIBurst'],
      ['contentType: text/plain', 'contentType'],
      ['nodeStatusMaxImages: -2', 'nodeStatusMaxImages'],
      ['registerWithTaints: [{key: a, effect: Sometimes}]', 'registerWithTaints[0].effect'],
      ['registerWithTaints: [{effect: NoSchedule}]', 'registerWithTaints[0].key'],
      ['registerWithTaints: {key: a}', 'registerWithTaints'],
    ] as const) {
      await assert.rejects(load(`${body}\n`), (err: unknown) => err instanceof ConfigError && err.field === field, body);
    }
  });

  it('--node-labels takes key=value pairs, repeated flags merging', () => {
    const { flags } = parseKubeletFlags(['--node-labels=role=infra,example.com/tier=', '--node-labels', 'zone=a']);
    assert.deepEqual(flags.nodeLabels, { role: 'infra', 'example.com/tier': '', zone: 'a' });
    assert.equal(parseKubeletFlags([]).flags.nodeLabels, undefined);
  });

  it('--node-labels refuses a pair without = and an invalid key or value, naming the flag', () => {
    assert.throws(() => parseKubeletFlags(['--node-labels=role']), /--node-labels.*"role" is not key=value/);
    assert.throws(() => parseKubeletFlags(['--node-labels=-bad=x']), /--node-labels.*not a valid label key/);
    assert.throws(() => parseKubeletFlags(['--node-labels=ok=has space']), /--node-labels.*not a valid label value/);
  });
});

describe('webhook authn/authz without an API server client (standalone)', () => {
  it('is refused as upstream, naming each field; off, or with --kubeconfig, it passes', async () => {
    const { config } = await load('');
    assert.throws(() => validateStandaloneAuth(config, undefined, '/c.yaml'), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.deepEqual(err.issues.map((i) => i.field), ['authentication.webhook.enabled', 'authorization.mode']);
      assert.match(err.message, /\/c\.yaml/);
      assert.match(err.message, /--kubeconfig/);
      return true;
    });
    validateStandaloneAuth(config, '/etc/kubelet.kubeconfig');
    const off = (await load('authentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n')).config;
    validateStandaloneAuth(off, undefined);
    // only authorization left on: only that field is named
    const authzOnly = (await load('authentication: {webhook: {enabled: false}}\n')).config;
    assert.throws(() => validateStandaloneAuth(authzOnly, ''), (err: unknown) => err instanceof ConfigError && err.field === 'authorization.mode' && err.issues.length === 1);
    // without --config the legacy defaults have both off
    validateStandaloneAuth((await loadConfig([], files({}))).config, undefined);
  });
});
