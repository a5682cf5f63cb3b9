import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { managedHostsFileContent, nodeHostsFileContent } from '../../src/network/hosts.js';

const HEADER = '# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n';

describe('managed /etc/hosts (upstream managedHostsFileContent cases)', () => {
  const cases: { name: string; in: Parameters<typeof managedHostsFileContent>[0]; want: string }[] = [
    { name: 'one IP, no domain', in: { podIPs: ['123.45.67.89'], hostname: 'podFoo', hostDomainName: '' }, want: `${HEADER}123.45.67.89\tpodFoo\n` },
    { name: 'one IP with a domain', in: { podIPs: ['203.0.113.1'], hostname: 'podFoo', hostDomainName: 'domainFoo' }, want: `${HEADER}203.0.113.1\tpodFoo.domainFoo\tpodFoo\n` },
    {
      name: 'host aliases',
      in: { podIPs: ['123.45.67.89'], hostname: 'podFoo', hostDomainName: 'domainFoo', hostAliases: [{ ip: '123.45.67.89', hostnames: ['foo', 'bar', 'baz'] }, { ip: '456.78.90.123', hostnames: ['park', 'doo', 'boo'] }] },
      want: `${HEADER}123.45.67.89\tpodFoo.domainFoo\tpodFoo\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\tbaz\n456.78.90.123\tpark\tdoo\tboo\n`,
    },
    { name: 'dual stack', in: { podIPs: ['203.0.113.1', 'fd00::6'], hostname: 'podFoo', hostDomainName: 'domainFoo' }, want: `${HEADER}203.0.113.1\tpodFoo.domainFoo\tpodFoo\nfd00::6\tpodFoo.domainFoo\tpodFoo\n` },
  ];
  for (const c of cases) {
    it(c.name, () => assert.equal(managedHostsFileContent(c.in), c.want));
  }

  it('host network: the node file as is, aliases appended', () => {
    assert.equal(nodeHostsFileContent('127.0.0.1 localhost\n', undefined), '# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n');
    assert.equal(nodeHostsFileContent('127.0.0.1 localhost\n', [{ ip: '1.2.3.4', hostnames: ['a'] }]), '# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n1.2.3.4\ta\n');
  });
});
