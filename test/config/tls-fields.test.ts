// The secure server's TLS fields: read from the file, defaulted, and refused by name when
// upstream would refuse them (an unknown cipher suite or TLS version).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError } from '../../src/config/errors.js';
import { defaultKubeletConfig, parseKubeletConfigFile, resolveKubeletConfig, validateKubeletConfig } from '../../src/config/index.js';

function fromYaml(body: string) {
  const parsed = parseKubeletConfigFile(`apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n${body}`, 'c.yaml');
  const warnings = [...parsed.warnings];
  return { config: resolveKubeletConfig(parsed.config, warnings, 'c.yaml'), warnings };
}

function refused(body: string, field: string, fragment: string): void {
  const { config } = fromYaml(body);
  assert.throws(() => validateKubeletConfig(config, 'c.yaml'), (err: unknown) => {
    assert.ok(err instanceof ConfigError, String(err));
    assert.ok(err.message.includes(field), err.message);
    assert.ok(err.message.includes(fragment), err.message);
    return true;
  });
}

describe('tls and handler fields', () => {
  it('default to empty TLS settings and enabled log and profiling handlers', () => {
    const c = defaultKubeletConfig();
    assert.equal(c.tlsCertFile, '');
    assert.equal(c.tlsPrivateKeyFile, '');
    assert.deepEqual(c.tlsCipherSuites, []);
    assert.equal(c.tlsMinVersion, '');
    assert.equal(c.enableSystemLogHandler, true);
    assert.equal(c.enableProfilingHandler, true);
  });

  it('are read from the file and validated without warnings', () => {
    const { config, warnings } = fromYaml('tlsCertFile: /etc/k/kubelet.crt\ntlsPrivateKeyFile: /etc/k/kubelet.key\ntlsMinVersion: VersionTLS12\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\nenableSystemLogHandler: false\nenableProfilingHandler: false\n');
    assert.deepEqual(warnings, []);
    assert.equal(config.tlsCertFile, '/etc/k/kubelet.crt');
    assert.equal(config.tlsMinVersion, 'VersionTLS12');
    assert.deepEqual(config.tlsCipherSuites, ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256']);
    assert.equal(config.enableSystemLogHandler, false);
    assert.equal(config.enableProfilingHandler, false);
    validateKubeletConfig(config);
  });

  it('an unknown cipher suite is refused naming it and its index', () => {
    refused('tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_FANCY_NEW]\n', 'tlsCipherSuites[1]', 'TLS_FANCY_NEW');
  });

  it('an unknown TLS version is refused', () => {
    refused('tlsMinVersion: VersionTLS14\n', 'tlsMinVersion', 'VersionTLS14');
  });

  it('cipher suites with TLS 1.3 as the minimum are refused, as upstream', () => {
    refused('tlsMinVersion: VersionTLS13\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n', 'tlsCipherSuites', 'VersionTLS13');
  });

  it('a certificate without its key is refused', () => {
    refused('tlsCertFile: /etc/k/kubelet.crt\n', 'tlsPrivateKeyFile', 'together');
  });
});
