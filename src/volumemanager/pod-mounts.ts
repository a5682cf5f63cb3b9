// Everything mounted into one container besides its termination-message file (upstream
// makeMounts): its volumeMounts, then the kubelet-managed /etc/hosts unless the container
// mounts its own there or the pod has no IP yet.

import type { Container, Pod } from '../api/types.js';
import { ensureHostsFile, ETC_HOSTS_PATH } from '../network/hosts.js';
import type { MountInput } from '../runtime/cri-types.js';
import { CreateContainerConfigError, type EnvKeyValue } from '../runtime/env.js';
import { generatePodHostname } from '../runtime/sandbox-config.js';
import { confinedJoin } from '../util/safe-path.js';
import type { Logger } from '../util/log.js';
import { makeVolumeMounts } from './container-mounts.js';
import type { SubPathMounter } from './subpath.js';
import type { PodVolumes } from './volume-manager.js';

export interface PodContainerMountsInput {
  pod: Pod;
  container: Container;
  volumes: PodVolumes;
  envs: readonly EnvKeyValue[];
  /** The pod's IPs (the node's for a host-network pod). */
  podIPs: string[];
  /** <rootDir>/pods/<uid>: the hosts file is <podDir>/etc-hosts. */
  podDir: string;
  clusterDomain: string;
  /** The node's hosts file (host-network pods copy it); defaults to /etc/hosts. */
  nodeHostsFile?: string;
  /** Who bind-mounts subPaths (the native mounter by default). */
  subPaths?: SubPathMounter;
  log?: Logger;
}

/** `<subdomain>.<namespace>.svc.<clusterDomain>` for a pod with a subdomain (upstream GeneratePodHostNameAndDomain). */
export function podHostDomain(pod: Pod, clusterDomain: string): string {
  return pod.spec.subdomain ? `${pod.spec.subdomain}.${pod.metadata.namespace ?? ''}.svc.${clusterDomain}` : '';
}

export async function podContainerMounts(input: PodContainerMountsInput): Promise<MountInput[]> {
  const { pod, container, podIPs } = input;
  const mounts = await makeVolumeMounts(container, input.volumes, input.envs, { podDir: input.podDir, subPaths: input.subPaths, log: input.log });
  const ownsHosts = (container.volumeMounts ?? []).some((m) => m.mountPath === ETC_HOSTS_PATH);
  if (podIPs.length > 0 && !ownsHosts) {
    const file = confinedJoin(input.podDir, 'etc-hosts');
    try {
      await ensureHostsFile(file, {
        podIPs,
        hostname: generatePodHostname({ ...pod, spec: { ...pod.spec, setHostnameAsFQDN: false } }),
        hostDomainName: podHostDomain(pod, input.clusterDomain),
        hostAliases: pod.spec.hostAliases,
      }, pod.spec.hostNetwork === true, input.nodeHostsFile);
    } catch (err) {
      throw new CreateContainerConfigError(`failed to write the pod's hosts file ${file}: ${(err as Error).message}`, { cause: err });
    }
    mounts.push({ container_path: ETC_HOSTS_PATH, host_path: file, readonly: false, selinux_relabel: true, propagation: 'PROPAGATION_PRIVATE' });
  }
  return mounts;
}
