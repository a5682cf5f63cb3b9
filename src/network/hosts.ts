// The kubelet-managed /etc/hosts (upstream ensureHostsFile in kubelet_pods.go): written before
// each container start at <podDir>/etc-hosts and bind-mounted into each container. A pod network pod gets the
// localhost lines, its IPs with its hostname (FQDN first when it has a subdomain) and its
// hostAliases; a host-network pod gets the node's /etc/hosts and its hostAliases.

import { chmod, readFile, writeFile } from 'node:fs/promises';
import type { HostAlias } from '../api/types.js';

export const ETC_HOSTS_PATH = '/etc/hosts';

export interface HostsFileInput {
  podIPs: string[];
  hostname: string;
  /** `<subdomain>.<namespace>.svc.<clusterDomain>` when the pod has a subdomain. */
  hostDomainName: string;
  hostAliases?: HostAlias[];
}

function hostAliasesBlock(aliases: readonly HostAlias[] | undefined): string {
  if (!aliases || aliases.length === 0) return '';
  let out = '\n# Entries added by HostAliases.\n';
  for (const a of aliases) out += `${a.ip}\t${(a.hostnames ?? []).join('\t')}\n`;
  return out;
}

/** upstream managedHostsFileContent. */
export function managedHostsFileContent(input: HostsFileInput): string {
  let out = '# Kubernetes-managed hosts file.\n'
    + '127.0.0.1\tlocalhost\n'
    + '::1\tlocalhost ip6-localhost ip6-loopback\n'
    + 'fe00::0\tip6-localnet\n'
    + 'fe00::0\tip6-mcastprefix\n'
    + 'fe00::1\tip6-allnodes\n'
    + 'fe00::2\tip6-allrouters\n';
  for (const ip of input.podIPs) {
    out += input.hostDomainName
      ? `${ip}\t${input.hostname}.${input.hostDomainName}\t${input.hostname}\n`
      : `${ip}\t${input.hostname}\n`;
  }
  return out + hostAliasesBlock(input.hostAliases);
}

/** upstream nodeHostsFileContent. */
export function nodeHostsFileContent(nodeHosts: string, aliases: readonly HostAlias[] | undefined): string {
  let out = '# Kubernetes-managed hosts file (host network).\n' + nodeHosts;
  const block = hostAliasesBlock(aliases);
  if (block) out += block;
  return out;
}

/** (Re)writes the pod's hosts file before a container of the pod starts, as upstream does. */
export async function ensureHostsFile(file: string, input: HostsFileInput, hostNetwork: boolean, nodeHostsFile = ETC_HOSTS_PATH): Promise<void> {
  const content = hostNetwork
    ? nodeHostsFileContent(await readFile(nodeHostsFile, 'utf8'), input.hostAliases)
    : managedHostsFileContent(input);
  await writeFile(file, content, { mode: 0o644 });
  await chmod(file, 0o644);
}
