import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseKubeletFlags } from '../../src/config/flags.js';

describe('credential provider flags', () => {
  it('--image-credential-provider-config and --image-credential-provider-bin-dir are read, not deprecated', () => {
    const { flags, warnings } = parseKubeletFlags(['--image-credential-provider-config=/etc/kubernetes/cp.yaml', '--image-credential-provider-bin-dir', '/usr/libexec/kubelet-cp']);
    assert.equal(flags.imageCredentialProviderConfig, '/etc/kubernetes/cp.yaml');
    assert.equal(flags.imageCredentialProviderBinDir, '/usr/libexec/kubelet-cp');
    assert.deepEqual(warnings, []);
  });
  it('a missing value names the flag', () => {
    assert.throws(() => parseKubeletFlags(['--image-credential-provider-bin-dir']), /--image-credential-provider-bin-dir.*flag needs an argument/);
  });
});
