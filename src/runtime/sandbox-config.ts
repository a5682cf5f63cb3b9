// The RunPodSandbox request for a pod, as upstream builds it (kuberuntime_sandbox.go
// generatePodSandboxConfig, kuberuntime_sandbox_linux.go, kuberuntime/util NamespacesForPod).

import { posix } from 'node:path';
import { confinedJoin } from '../util/safe-path.js';
import type { Container, Pod } from '../api/types.js';
import type {
  DNSConfig,
  LinuxPodSandboxConfig,
  NamespaceMode,
  NamespaceOptionInput,
  PodSandboxConfig,
  PortMapping,
  Protocol,
  UserNamespaceInput,
} from './cri-types.js';
import { CreateContainerConfigError } from './env.js';
import { newPodAnnotations, newPodLabels } from './labels.js';
import { calculateSandboxResources, convertOverheadToLinuxResources, type LinuxResourceOptions } from './resources.js';

/** Where the kubelet keeps pod logs (KubeletConfiguration podLogsDir default). */
export const DEFAULT_POD_LOGS_DIR = '/var/log/pods';

/** Longest hostname the kernel takes, and the cap upstream truncates pod hostnames to. */
const MAX_HOSTNAME_LENGTH = 63;
const MAX_FQDN_LENGTH = 64;

export interface SandboxConfigOptions extends LinuxResourceOptions {
  /** The pod cgroup (from the pod container manager). */
  cgroupParent: string;
  /** Defaults to /var/log/pods. */
  podLogsDir?: string;
  /** The pod's resolver config (from the DNS configurer); host-network pods get one too. */
  dns?: DNSConfig | null;
  /** Cluster domain, for setHostnameAsFQDN. */
  clusterDomain?: string;
  /** The pod's user namespace (the userns manager's answer); null/absent sends none. */
  usernsOptions?: UserNamespaceInput | null;
}

/** `<podLogsDir>/<namespace>_<name>_<uid>` (upstream BuildPodLogsDirectory). */
export function buildPodLogsDirectory(podLogsDir: string, namespace: string, name: string, uid: string): string {
  return confinedJoin(podLogsDir, `${namespace}_${name}_${uid}`);
}

/** The pod's network, PID and IPC namespaces (upstream NamespacesForPod). */
export function namespacesForPod(pod: Pod): Required<Pick<NamespaceOptionInput, 'network' | 'pid' | 'ipc'>> {
  return {
    network: pod.spec.hostNetwork ? 'NODE' : 'POD',
    pid: pidNamespaceForPod(pod),
    ipc: pod.spec.hostIPC ? 'NODE' : 'POD',
  };
}

function pidNamespaceForPod(pod: Pod): NamespaceMode {
  if (pod.spec.hostPID) return 'NODE';
  if (pod.spec.shareProcessNamespace) return 'POD';
  return 'CONTAINER';
}

function allContainers(pod: Pod): Container[] {
  const ephemeral = Array.isArray(pod.spec.ephemeralContainers) ? (pod.spec.ephemeralContainers as Container[]) : [];
  return [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? []), ...ephemeral];
}

/** Any container (init and ephemeral ones too) asks to be privileged (upstream HasPrivilegedContainer). */
export function hasPrivilegedContainer(pod: Pod): boolean {
  return allContainers(pod).some((c) => c.securityContext?.privileged === true);
}

function toRuntimeProtocol(p: string | undefined): Protocol {
  return p === 'UDP' || p === 'SCTP' ? p : 'TCP';
}

/**
 * Port mappings from every regular container's ports (upstream MakePortMappings): one per port,
 * hostPort 0 included (the runtime maps only non-zero host ports); a second port with the same
 * name (or, unnamed, the same family/protocol/hostIP/ports) in one container is dropped.
 */
export function makePortMappings(pod: Pod): PortMapping[] {
  const mappings: PortMapping[] = [];
  for (const c of pod.spec.containers ?? []) {
    const names = new Set<string>();
    for (const p of c.ports ?? []) {
      const family = p.hostIP ? (p.hostIP.includes(':') ? 'v6' : 'v4') : 'any';
      const name = p.name || `${family}-${p.protocol ?? ''}-${p.hostIP ?? ''}:${p.containerPort}:${p.hostPort ?? 0}`;
      if (names.has(name)) continue;
      names.add(name);
      mappings.push({
        protocol: toRuntimeProtocol(p.protocol),
        container_port: p.containerPort,
        host_port: p.hostPort ?? 0,
        host_ip: p.hostIP ?? '',
      });
    }
  }
  return mappings;
}

/**
 * The pod's hostname (upstream GeneratePodHostNameAndDomain + GetNodenameForKernel):
 * spec.hostname or the pod name, cut to 63 characters without a trailing '-' or '.'; the FQDN
 * when setHostnameAsFQDN is set and the pod has a subdomain.
 */
export function generatePodHostname(pod: Pod, clusterDomain?: string): string {
  let hostname = pod.spec.hostname || pod.metadata.name || '';
  if (hostname.length > MAX_HOSTNAME_LENGTH) {
    hostname = hostname.slice(0, MAX_HOSTNAME_LENGTH).replace(/[-.]+$/, '');
  }
  const subdomain = pod.spec.subdomain;
  if (pod.spec.setHostnameAsFQDN === true && subdomain && clusterDomain) {
    const fqdn = `${hostname}.${subdomain}.${pod.metadata.namespace ?? ''}.svc.${clusterDomain}`;
    if (fqdn.length > MAX_FQDN_LENGTH) {
      throw new CreateContainerConfigError(
        `failed to construct FQDN from pod hostname and cluster domain, FQDN ${fqdn} is too long (${MAX_FQDN_LENGTH} characters is the max, ${fqdn.length} characters requested)`,
      );
    }
    return fqdn;
  }
  return hostname;
}

/**
 * The Linux part of the sandbox config (upstream generatePodSandboxLinuxConfig): cgroup parent,
 * sysctls, namespaces, run-as user/group, supplemental groups (fsGroup first), privileged when
 * any container is, and the runtime's default seccomp profile for the sandbox itself.
 */
export function generatePodSandboxLinuxConfig(pod: Pod, cgroupParent: string): LinuxPodSandboxConfig {
  const sc = pod.spec.securityContext;
  const sysctls: Record<string, string> = {};
  for (const s of sc?.sysctls ?? []) sysctls[s.name] = s.value;
  const securityContext: NonNullable<LinuxPodSandboxConfig['security_context']> = {
    // upstream sets namespaces only with a pod securityContext, which API defaulting always adds
    namespace_options: namespacesForPod(pod),
    privileged: hasPrivilegedContainer(pod),
    // least privilege for the pause process whatever the containers ask
    seccomp: { profile_type: 'RuntimeDefault' },
  };
  if (typeof sc?.runAsUser === 'number') securityContext.run_as_user = { value: sc.runAsUser };
  if (typeof sc?.runAsGroup === 'number') securityContext.run_as_group = { value: sc.runAsGroup };
  const groups: number[] = [];
  if (typeof sc?.fsGroup === 'number') groups.push(sc.fsGroup);
  for (const g of sc?.supplementalGroups ?? []) groups.push(g);
  if (groups.length > 0) securityContext.supplemental_groups = groups;
  const seLinux = (sc as { seLinuxOptions?: { user?: string; role?: string; type?: string; level?: string } } | undefined)?.seLinuxOptions;
  if (seLinux) securityContext.selinux_options = { user: seLinux.user ?? '', role: seLinux.role ?? '', type: seLinux.type ?? '', level: seLinux.level ?? '' };
  return { cgroup_parent: cgroupParent, security_context: securityContext, sysctls };
}

/**
 * The RunPodSandbox config: metadata, hostname (not for host-network pods: they share the
 * node's UTS namespace), log directory, DNS, port mappings, labels/annotations, Linux config
 * with the pod's resources and overhead. Throws CreateContainerConfigError for an invalid FQDN.
 */
export function generatePodSandboxConfig(pod: Pod, attempt: number, opts: SandboxConfigOptions): PodSandboxConfig {
  const name = pod.metadata.name ?? '';
  const namespace = pod.metadata.namespace ?? '';
  const uid = pod.metadata.uid ?? '';
  const config: PodSandboxConfig = {
    metadata: { name, namespace, uid, attempt },
    labels: newPodLabels(pod),
    annotations: newPodAnnotations(pod),
  };
  if (opts.dns) config.dns_config = opts.dns;
  if (!pod.spec.hostNetwork) config.hostname = generatePodHostname(pod, opts.clusterDomain);
  config.log_directory = buildPodLogsDirectory(opts.podLogsDir || DEFAULT_POD_LOGS_DIR, namespace, name, uid);
  const ports = makePortMappings(pod);
  if (ports.length > 0) config.port_mappings = ports;
  const linux = generatePodSandboxLinuxConfig(pod, opts.cgroupParent);
  const nsOptions = linux.security_context?.namespace_options;
  if (opts.usernsOptions && nsOptions) nsOptions.userns_options = opts.usernsOptions;
  linux.resources = calculateSandboxResources(pod, opts);
  linux.overhead = convertOverheadToLinuxResources(pod, opts);
  config.linux = linux;
  return config;
}
