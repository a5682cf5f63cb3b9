// The insecure settings in force, named at start-up: what lets a network peer in without
// credentials (anonymous requests, AlwaysAllow, the read-only port), weak TLS (insecure cipher
// suites by name, a minimum below TLS 1.2), and what the CIS Kubernetes Benchmark's kubelet
// section asks for that is off (no client CA, streaming connections without an idle timeout).

import type { KubeletConfig } from './kubelet-config.js';
import { isInsecureCipherSuite } from './tls-names.js';

/** One line per insecure setting in force; [] when none is. */
export function insecureSettingWarnings(c: KubeletConfig): string[] {
  const out: string[] = [];
  const secure = `${c.address}:${c.port}`;
  if (c.enableServer) {
    if (c.authentication.anonymous.enabled) {
      out.push(`Insecure setting: anonymous requests are allowed on the kubelet API port ${secure} (authentication.anonymous.enabled=true, --anonymous-auth)` +
        (c.authorization.mode === 'AlwaysAllow' ? ' and authorized (AlwaysAllow): anyone who can reach the port can run commands in every pod' : ''));
    } else if (c.authentication.x509.clientCAFile === '') {
      out.push(`Insecure setting: no client CA (authentication.x509.clientCAFile, --client-ca-file): client certificates are not authenticated on ${secure}, only bearer tokens${c.authentication.webhook.enabled ? '' : ' (and webhook token authentication is off: nothing can authenticate)'}`);
    }
    if (c.authorization.mode === 'AlwaysAllow') {
      out.push(`Insecure setting: authorization mode AlwaysAllow (authorization.mode, --authorization-mode): every authenticated request on ${secure} is allowed`);
    }
    const weak = c.tlsCipherSuites.filter(isInsecureCipherSuite);
    if (weak.length > 0) {
      out.push(`Insecure setting: insecure TLS cipher suites in use on ${secure} (tlsCipherSuites, --tls-cipher-suites): ${weak.join(', ')}`);
    }
    if (c.tlsMinVersion === 'VersionTLS10' || c.tlsMinVersion === 'VersionTLS11') {
      out.push(`Insecure setting: TLS minimum version ${c.tlsMinVersion} is below TLS 1.2 (tlsMinVersion, --tls-min-version)`);
    }
  }
  if (c.readOnlyPort !== 0) {
    out.push(`Insecure setting: the read-only port ${c.address}:${c.readOnlyPort} is open without authentication or authorization (readOnlyPort, --read-only-port; 0 closes it)`);
  }
  if (c.streamingConnectionIdleTimeout === 0) {
    out.push('Insecure setting: streaming connections (exec, attach, port-forward) never time out when idle (streamingConnectionIdleTimeout 0, --streaming-connection-idle-timeout)');
  }
  return out;
}
