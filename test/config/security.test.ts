// The insecure settings named at start-up.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { applyLegacyDefaults, defaultKubeletConfig, type KubeletConfig } from '../../src/config/index.js';
import { insecureSettingWarnings } from '../../src/config/security.js';

function config(patch: (c: KubeletConfig) => void = () => undefined): KubeletConfig {
  const c = defaultKubeletConfig();
  patch(c);
  return c;
}

describe('insecure settings in force', () => {
  it('the command line\'s legacy defaults: anonymous requests, AlwaysAllow, the read-only port', () => {
    const w = insecureSettingWarnings(config(applyLegacyDefaults));
    assert.equal(w.length, 3, JSON.stringify(w));
    assert.match(w[0]!, /anonymous requests are allowed on the kubelet API port 0\.0\.0\.0:10250 .*and authorized \(AlwaysAllow\)/);
    assert.match(w[1]!, /authorization mode AlwaysAllow/);
    assert.match(w[2]!, /the read-only port 0\.0\.0\.0:10255 is open without authentication or authorization/);
  });

  it('the config file\'s defaults with a client CA: nothing', () => {
    assert.deepEqual(insecureSettingWarnings(config((c) => { c.authentication.x509.clientCAFile = '/ca.crt'; })), []);
  });

  it('anonymous off without a client CA is named', () => {
    const w = insecureSettingWarnings(config());
    assert.equal(w.length, 1);
    assert.match(w[0]!, /no client CA \(authentication\.x509\.clientCAFile, --client-ca-file\)/);
  });

  it('insecure cipher suites by name, a TLS minimum below 1.2, no idle timeout', () => {
    const w = insecureSettingWarnings(config((c) => {
      c.authentication.x509.clientCAFile = '/ca.crt';
      c.tlsCipherSuites = ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_RSA_WITH_3DES_EDE_CBC_SHA', 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256'];
      c.tlsMinVersion = 'VersionTLS11';
      c.streamingConnectionIdleTimeout = 0;
    }));
    assert.equal(w.length, 3, JSON.stringify(w));
    assert.match(w[0]!, /insecure TLS cipher suites in use .*: TLS_RSA_WITH_3DES_EDE_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256$/);
    assert.match(w[1]!, /TLS minimum version VersionTLS11 is below TLS 1\.2/);
    assert.match(w[2]!, /never time out/);
  });

  it('with the secure server off, only the read-only port is named', () => {
    const w = insecureSettingWarnings(config((c) => { applyLegacyDefaults(c); c.enableServer = false; }));
    assert.equal(w.length, 1);
    assert.match(w[0]!, /read-only port/);
  });
});
