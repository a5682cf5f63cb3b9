// userNamespaces.idsPerPod: read from the file (no "not implemented" warning), defaulted to
// 65536, and checked as upstream's Linux validation does.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseKubeletConfigFile } from '../../src/config/decode.js';
import { featureGateWarnings } from '../../src/config/feature-gates.js';
import { resolveKubeletConfig, validateKubeletConfig } from '../../src/config/index.js';

function load(extra: string): ReturnType<typeof resolveKubeletConfig> & { warnings: string[] } {
  const { config, warnings } = parseKubeletConfigFile(`apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n${extra}`, 'k.yaml');
  return Object.assign(resolveKubeletConfig(config, warnings, 'k.yaml'), { warnings });
}

test('userNamespaces.idsPerPod: default 65536, read from the file without a warning', () => {
  assert.equal(load('').userNamespaces.idsPerPod, 65536);
  const c = load('userNamespaces:\n  idsPerPod: 131072\n');
  assert.equal(c.userNamespaces.idsPerPod, 131072);
  assert.deepEqual(c.warnings, []);
  validateKubeletConfig(c);
  assert.deepEqual(featureGateWarnings({ UserNamespacesSupport: false }), [], 'the gate is acted on');
});

test('userNamespaces.idsPerPod is refused as upstream refuses it', () => {
  for (const [v, msg] of [[1000, /must not be less than 65536/], [100000, /must be a multiple of 65536/], [2 ** 32, /must not be more than 4294967295/]] as const) {
    assert.throws(() => validateKubeletConfig(load(`userNamespaces:\n  idsPerPod: ${v}\n`)), (err: Error) => /userNamespaces\.idsPerPod/.test(err.message) && msg.test(err.message), String(v));
  }
  assert.throws(() => load('userNamespaces:\n  idsPerPod: "lots"\n'), /userNamespaces\.idsPerPod.*expected an integer/);
});
