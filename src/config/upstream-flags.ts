// The rest of upstream's kubelet command line (cmd/kubelet/app/options of 1.33 and 1.34, the
// logging flags registered with it, --version), beside kubelet-ts's original flags in flags.ts.
// Each flag is one of: implemented (mapped to a KubeletConfig field or a KubeletFlags setting
// that kubelet-ts acts on); deprecated as upstream (the same warning, then mapped as above);
// or accepted and reported at start-up, by name, as not implemented when given a value other
// than upstream's default. An unknown flag stays an error, as upstream.

import { ConfigError } from './errors.js';
import type { FlagSpec } from './flags.js';
import type { RegisterTaint } from './kubelet-config.js';

/** upstream's deprecation message for every flag that maps to a KubeletConfiguration field. */
export const CONFIG_FLAG_DEPRECATION =
  "This parameter should be set via the config file specified by the Kubelet's --config flag. " +
  'See https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for more information.';

const GC_DEPRECATION = 'Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.';

/** A config flag kubelet-ts does not act on: deprecated as upstream, reported unless at upstream's default. */
function unmodeled(name: string, kind: FlagSpec['kind'], field: string, def: string, help: string): FlagSpec {
  return { name, kind, unmodeledField: field, notImplementedUnless: def, deprecated: CONFIG_FLAG_DEPRECATION, help, defaultText: def === '' ? undefined : def };
}

export const UPSTREAM_FLAG_SPECS: readonly FlagSpec[] = [
  // ---- KubeletFlags (not deprecated) ----
  { name: 'config-dir', kind: 'string', unmodeledField: 'KubeletDropinConfigDirectory', notImplementedUnless: '', notDeprecated: true,
    help: 'Path to a directory of KubeletConfiguration drop-ins applied over --config.' },
  // cloud-provider: implemented, declared in flags.ts ('' or 'external').
  { name: 'lock-file', kind: 'string', unmodeledField: 'LockFilePath', notImplementedUnless: '', notDeprecated: true,
    help: '<Warning: Alpha feature> The path to file for kubelet to use as a lock file.' },
  { name: 'exit-on-lock-contention', kind: 'bool', unmodeledField: 'ExitOnLockContention', notImplementedUnless: 'false', notDeprecated: true,
    help: 'Whether kubelet should exit upon lock-file contention.' },
  { name: 'runtime-cgroups', kind: 'string', unmodeledField: 'RuntimeCgroups', notImplementedUnless: '', notDeprecated: true,
    help: 'Optional absolute name of cgroups to create and run the runtime in.' },
  { name: 'provider-id', kind: 'string', unmodeledField: 'providerID', notImplementedUnless: '', notDeprecated: true,
    help: 'Unique identifier for identifying the node in a machine database, i.e cloudprovider.' },
  // ---- global flags: version and logging ----
  { name: 'version', kind: 'version', flagField: 'version', noOptValue: 'true', notDeprecated: true,
    help: '--version, --version=raw prints version information and quits; --version=vX.Y.Z... sets the reported version.' },
  { name: 'vmodule', kind: 'string', unmodeledField: 'logging.vmodule', notImplementedUnless: '', notDeprecated: true,
    help: 'comma-separated list of pattern=N settings for file-filtered logging (only works for text log format).' },
  // kubelet-ts writes each line as it logs it (nothing is buffered, so no period applies).
  { name: 'log-flush-frequency', kind: 'duration', unmodeledField: 'logging.flushFrequency', notImplementedUnless: '5s', notDeprecated: true, defaultText: '5s',
    help: 'Maximum number of seconds between log flushes (kubelet-ts writes each line at once).' },
  unmodeled('logging-format', 'string', 'logging.format', 'text', 'Sets the log format. Permitted formats: "json", "text" (kubelet-ts writes text).'),
  unmodeled('log-text-info-buffer-size', 'string', 'logging.options.text.infoBufferSize', '0', '[Alpha] In text format with split output streams, the info messages can be buffered for a while to increase performance.'),
  unmodeled('log-text-split-stream', 'bool', 'logging.options.text.splitStream', 'false', '[Alpha] In text format, write error messages to stderr and info messages to stdout.'),
  unmodeled('log-json-info-buffer-size', 'string', 'logging.options.json.infoBufferSize', '0', '[Alpha] In JSON format with split output streams, the info messages can be buffered for a while to increase performance.'),
  unmodeled('log-json-split-stream', 'bool', 'logging.options.json.splitStream', 'false', '[Alpha] In JSON format, write error messages to stderr and info messages to stdout.'),

  // ---- KubeletConfiguration flags kubelet-ts maps (deprecated as upstream) ----
  { name: 'enable-server', kind: 'bool', configField: 'enableServer', defaultText: 'true', help: "Enable the Kubelet's server." },
  { name: 'manifest-url-header', kind: 'headers', configField: 'staticPodURLHeader',
    help: "Comma-separated list of HTTP headers to use when accessing the url provided to --manifest-url, as 'name:value'. This flag can be repeatedly invoked." },
  { name: 'enable-debugging-handlers', kind: 'bool', configField: 'enableDebuggingHandlers', defaultText: 'true',
    help: 'Enables server endpoints for log collection and local running of containers and commands.' },
  { name: 'oom-score-adj', kind: 'int', configField: 'oomScoreAdj', defaultText: '-999',
    help: 'The oom-score-adj value for kubelet process. Values must be within the range [-1000, 1000].' },
  { name: 'cluster-domain', kind: 'string', configField: 'clusterDomain',
    help: "Domain for this cluster. If set, kubelet will configure all containers to search this domain in addition to the host's search domains." },
  { name: 'cluster-dns', kind: 'strings', configField: 'clusterDNS',
    help: 'Comma-separated list of DNS server IP address. This value is used for containers DNS server in case of Pods with "dnsPolicy=ClusterFirst".' },
  { name: 'node-status-update-frequency', kind: 'duration', configField: 'nodeStatusUpdateFrequency', defaultText: '10s',
    help: 'Specifies how often kubelet posts node status to master.' },
  { name: 'minimum-image-ttl-duration', kind: 'duration', configField: 'imageMinimumGCAge', defaultText: '2m0s',
    help: 'Minimum age for an unused image before it is garbage collected.' },
  { name: 'image-gc-high-threshold', kind: 'int', configField: 'imageGCHighThresholdPercent', defaultText: '85',
    help: 'The percent of disk usage after which image garbage collection is always run. To disable image garbage collection, set to 100.' },
  { name: 'image-gc-low-threshold', kind: 'int', configField: 'imageGCLowThresholdPercent', defaultText: '80',
    help: 'The percent of disk usage before which image garbage collection is never run.' },
  { name: 'volume-stats-agg-period', kind: 'duration', configField: 'volumeStatsAggPeriod', defaultText: '1m0s',
    help: 'Specifies interval for kubelet to calculate and cache the volume disk usage for all pods and volumes.' },
  { name: 'cgroups-per-qos', kind: 'bool', configField: 'cgroupsPerQOS', defaultText: 'true',
    help: 'Enable creation of QoS cgroup hierarchy, if true top level QoS and pod cgroups are created.' },
  { name: 'resolv-conf', kind: 'string', configField: 'resolvConf', defaultText: '/etc/resolv.conf',
    help: 'Resolver configuration file used as the basis for the container DNS resolution configuration.' },
  { name: 'container-log-max-size', kind: 'string', configField: 'containerLogMaxSize', defaultText: '10Mi',
    help: 'Set the maximum size (e.g. 10Mi) of container log file before it is rotated.' },
  { name: 'container-log-max-files', kind: 'int', configField: 'containerLogMaxFiles', defaultText: '5',
    help: 'Set the maximum number of container log files that can be present for a container. The number must be >= 2.' },
  { name: 'node-status-max-images', kind: 'int', configField: 'nodeStatusMaxImages', defaultText: '50',
    help: 'The maximum number of images to report in Node.Status.Images. If -1 is specified, no cap will be applied.' },
  { name: 'kernel-memcg-notification', kind: 'bool', configField: 'kernelMemcgNotification',
    help: 'If enabled, the kubelet will integrate with the kernel memcg notification to determine if memory eviction thresholds are crossed rather than polling.' },
  { name: 'local-storage-capacity-isolation', kind: 'bool', configField: 'localStorageCapacityIsolation', defaultText: 'true',
    help: 'If true, local ephemeral storage isolation is enabled.' },
  { name: 'kube-api-content-type', kind: 'string', configField: 'contentType', defaultText: 'application/vnd.kubernetes.protobuf',
    help: 'Content type of requests sent to apiserver.' },
  { name: 'kube-api-qps', kind: 'int', configField: 'kubeAPIQPS', defaultText: '50', help: 'QPS to use while talking with kubernetes apiserver.' },
  { name: 'kube-api-burst', kind: 'int', configField: 'kubeAPIBurst', defaultText: '100', help: 'Burst to use while talking with kubernetes apiserver.' },
  { name: 'serialize-image-pulls', kind: 'bool', configField: 'serializeImagePulls', defaultText: 'true', help: 'Pull images one at a time.' },
  { name: 'eviction-hard', kind: 'langleMap', configField: 'evictionHard',
    help: 'A set of eviction thresholds (e.g. memory.available<1Gi) that if met would trigger a pod eviction.' },
  { name: 'eviction-soft', kind: 'langleMap', configField: 'evictionSoft',
    help: 'A set of eviction thresholds (e.g. memory.available<1.5Gi) that if met over a corresponding grace period would trigger a pod eviction.' },
  { name: 'eviction-soft-grace-period', kind: 'map', configField: 'evictionSoftGracePeriod',
    help: 'A set of eviction grace periods (e.g. memory.available=1m30s) that correspond to how long a soft eviction threshold must hold before triggering a pod eviction.' },
  { name: 'eviction-pressure-transition-period', kind: 'duration', configField: 'evictionPressureTransitionPeriod', defaultText: '5m0s',
    help: 'Duration for which the kubelet has to wait before transitioning out of an eviction pressure condition.' },
  { name: 'eviction-max-pod-grace-period', kind: 'int', configField: 'evictionMaxPodGracePeriod',
    help: 'Maximum allowed grace period (in seconds) to use when terminating pods in response to a soft eviction threshold being met.' },
  { name: 'eviction-minimum-reclaim', kind: 'map', configField: 'evictionMinimumReclaim',
    help: 'A set of minimum reclaims (e.g. imagefs.available=2Gi) that describes the minimum amount of resource the kubelet will reclaim when performing a pod eviction.' },
  { name: 'system-reserved', kind: 'map', configField: 'systemReserved',
    help: 'A set of ResourceName=ResourceQuantity (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000) pairs that describe resources reserved for non-kubernetes components.' },
  { name: 'kube-reserved', kind: 'map', configField: 'kubeReserved',
    help: 'A set of ResourceName=ResourceQuantity (e.g. cpu=200m,memory=500Mi,ephemeral-storage=1Gi,pid=1000) pairs that describe resources reserved for kubernetes system components.' },
  { name: 'enforce-node-allocatable', kind: 'strings', configField: 'enforceNodeAllocatable', defaultText: 'pods',
    help: "A comma separated list of levels of node allocatable enforcement to be enforced by kubelet: 'none', 'pods', 'system-reserved', 'system-reserved-compressible', 'kube-reserved', 'kube-reserved-compressible'." },
  { name: 'system-reserved-cgroup', kind: 'string', configField: 'systemReservedCgroup',
    help: "Absolute name of the top level cgroup that is used to manage non-kubernetes components for which compute resources were reserved via '--system-reserved' flag." },
  { name: 'kube-reserved-cgroup', kind: 'string', configField: 'kubeReservedCgroup',
    help: "Absolute name of the top level cgroup that is used to manage kubernetes components for which compute resources were reserved via '--kube-reserved' flag." },
  { name: 'register-node', kind: 'bool', configField: 'registerNode', defaultText: 'true', help: 'Register the node with the apiserver.' },
  { name: 'register-with-taints', kind: 'taints', configField: 'registerWithTaints',
    help: 'Register the node with the given list of taints (comma separated "<key>=<value>:<effect>"). No-op if register-node is false.' },

  // ---- KubeletConfiguration flags kubelet-ts does not act on ----
  unmodeled('rotate-server-certificates', 'bool', 'serverTLSBootstrap', 'false', 'Auto-request and rotate the kubelet serving certificates.'),
  unmodeled('registry-qps', 'int', 'registryPullQPS', '5', 'If > 0, limit registry pull QPS to this value. If 0, unlimited.'),
  unmodeled('registry-burst', 'int', 'registryBurst', '10', 'Maximum size of a bursty pulls.'),
  unmodeled('contention-profiling', 'bool', 'enableContentionProfiling', 'false', 'Enable block profiling, if profiling is enabled.'),
  unmodeled('volume-plugin-dir', 'string', 'volumePluginDir', '/usr/libexec/kubernetes/kubelet-plugins/volume/exec/', 'The full path of the directory in which to search for additional third party volume plugins.'),
  unmodeled('kubelet-cgroups', 'string', 'kubeletCgroups', '', 'Optional absolute name of cgroups to create and run the Kubelet in.'),
  unmodeled('system-cgroups', 'string', 'systemCgroups', '', "Optional absolute name of cgroups in which to place all non-kernel processes that are not already inside a cgroup under '/'."),
  unmodeled('cpu-manager-policy', 'string', 'cpuManagerPolicy', 'none', "CPU Manager policy to use. Possible values: 'none', 'static'."),
  unmodeled('cpu-manager-policy-options', 'map', 'cpuManagerPolicyOptions', '', 'A set of key=value CPU Manager policy options to use.'),
  unmodeled('cpu-manager-reconcile-period', 'duration', 'cpuManagerReconcilePeriod', '10s', '<Warning: Alpha feature> CPU Manager reconciliation period.'),
  unmodeled('qos-reserved', 'map', 'qosReserved', '', '<Warning: Alpha feature> A set of ResourceName=Percentage (e.g. memory=50%) pairs.'),
  unmodeled('topology-manager-policy', 'string', 'topologyManagerPolicy', 'none', 'Topology Manager policy to use.'),
  unmodeled('topology-manager-scope', 'string', 'topologyManagerScope', 'container', 'Scope to which topology hints applied.'),
  unmodeled('topology-manager-policy-options', 'map', 'topologyManagerPolicyOptions', '', 'A set of key=value Topology Manager policy options to use.'),
  unmodeled('hairpin-mode', 'string', 'hairpinMode', 'promiscuous-bridge', 'How should the kubelet setup hairpin NAT.'),
  unmodeled('pod-cidr', 'string', 'podCIDR', '', 'The CIDR to use for pod IP addresses, only used in standalone mode.'),
  unmodeled('runonce', 'bool', 'runOnce', 'false', 'If true, exit after spawning pods from static pod files or remote urls.'),
  unmodeled('cpu-cfs-quota', 'bool', 'cpuCFSQuota', 'true', 'Enable CPU CFS quota enforcement for containers that specify CPU limits.'),
  unmodeled('cpu-cfs-quota-period', 'duration', 'cpuCFSQuotaPeriod', '100ms', 'Sets CPU CFS quota period value, cpu.cfs_period_us.'),
  unmodeled('enable-controller-attach-detach', 'bool', 'enableControllerAttachDetach', 'true', 'Enables the Attach/Detach controller to manage attachment/detachment of volumes scheduled to this node.'),
  unmodeled('max-open-files', 'int64', 'maxOpenFiles', '1000000', 'Number of files that can be opened by Kubelet process.'),
  unmodeled('pods-per-core', 'int', 'podsPerCore', '0', 'Number of Pods per core that can run on this Kubelet.'),
  unmodeled('reserved-cpus', 'string', 'reservedSystemCPUs', '', 'A comma-separated list of CPUs or CPU ranges that are reserved for system and kubernetes usage.'),
  unmodeled('memory-manager-policy', 'string', 'memoryManagerPolicy', 'None', "Memory Manager policy to use. Possible values: 'None', 'Static'."),
  unmodeled('reserved-memory', 'string', 'reservedMemory', '', 'A comma separated list of memory reservations for NUMA nodes.'),
  // a config field whose flag upstream does not mark deprecated
  { name: 'fail-cgroupv1', kind: 'bool', unmodeledField: 'failCgroupV1', notImplementedUnless: 'false', notDeprecated: true,
    help: 'Prevent the kubelet from starting on the host using cgroup v1.' },

  // ---- deprecated flags with their own messages ----
  { name: 'minimum-container-ttl-duration', kind: 'duration', flagField: 'containerGCPolicy', deprecated: GC_DEPRECATION,
    help: 'Minimum age for a finished container before it is garbage collected.' },
  { name: 'maximum-dead-containers-per-container', kind: 'int', flagField: 'containerGCPolicy', deprecated: GC_DEPRECATION, defaultText: '1',
    help: 'Maximum number of old instances to retain per container.' },
  { name: 'maximum-dead-containers', kind: 'int', flagField: 'containerGCPolicy', deprecated: GC_DEPRECATION, defaultText: '-1',
    help: 'Maximum number of old instances of containers to retain globally. To disable, set to a negative number.' },
  // kubelet-ts's image GC asks the runtime for its sandbox image and keeps it, as upstream 1.35 will.
  { name: 'pod-infra-container-image', kind: 'string', flagField: 'podInfraContainerImage',
    deprecated: 'will be removed in 1.35. Image garbage collector will get sandbox image information from CRI.',
    help: 'Specified image will not be pruned by the image garbage collector. CRI implementations have their own configuration to set this image.' },
  { name: 'experimental-allocatable-ignore-eviction', kind: 'bool', unmodeledField: 'ExperimentalNodeAllocatableIgnoreEvictionThreshold', notImplementedUnless: 'false',
    deprecated: 'will be removed in 1.25 or later.', help: 'When set to true, Hard Eviction Thresholds will be ignored while calculating Node Allocatable.' },
  { name: 'experimental-mounter-path', kind: 'string', unmodeledField: 'ExperimentalMounterPath', notImplementedUnless: '',
    deprecated: 'will be removed in 1.25 or later. in favor of using CSI.', help: '[Experimental] Path of mounter binary.' },
  // Registered by the releases before 1.34 (gone from its reference): accepted with their warning.
  { name: 'cloud-config', kind: 'string', unmodeledField: 'CloudConfigFile', notImplementedUnless: '',
    deprecated: 'will be removed in 1.25 or later, in favor of removing cloud provider code from Kubelet.', help: 'The path to the cloud provider configuration file.' },
  { name: 'register-schedulable', kind: 'bool', unmodeledField: 'RegisterSchedulable', notImplementedUnless: 'true',
    deprecated: 'will be removed in a future version', help: 'Register the node as schedulable.' },
  { name: 'keep-terminated-pod-volumes', kind: 'bool', unmodeledField: 'KeepTerminatedPodVolumes', notImplementedUnless: 'false',
    deprecated: 'will be removed in a future version', help: 'Keep terminated pod volumes mounted to the node after the pod terminates.' },
  { name: 'iptables-masquerade-bit', kind: 'int', unmodeledField: 'iptablesMasqueradeBit', notImplementedUnless: '14',
    deprecated: 'This flag has no effect and will be removed in a future version.', help: 'Has no effect.' },
  { name: 'iptables-drop-bit', kind: 'int', unmodeledField: 'iptablesDropBit', notImplementedUnless: '15',
    deprecated: 'This flag has no effect and will be removed in a future version.', help: 'Has no effect.' },
];

function bad(display: string, value: string, detail: string): ConfigError {
  return new ConfigError(display, `invalid argument ${JSON.stringify(value)}: ${detail}`);
}

function pairs(value: string): string[] {
  return value.split(',').map((x) => x.trim()).filter((x) => x !== '');
}

function setKey<T>(out: Record<string, T>, k: string, v: T): void {
  Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/**
 * Parses a value of the kinds this file adds (map, langleMap, taints, headers); `prev` is the
 * value an earlier use of the same flag gave (repeats merge, as pflag's map flags).
 */
export function parseFlagValue(kind: FlagSpec['kind'], display: string, value: string, prev: unknown): unknown {
  switch (kind) {
    case 'map':
    case 'langleMap': {
      const sep = kind === 'map' ? '=' : '<';
      const out: Record<string, string> = { ...(prev as Record<string, string> | undefined) };
      for (const item of pairs(value)) {
        const at = item.indexOf(sep);
        if (at <= 0) throw bad(display, value, `malformed pair, expect string${sep}string`);
        setKey(out, item.slice(0, at).trim(), item.slice(at + 1).trim());
      }
      return out;
    }
    case 'headers': {
      const out: Record<string, string[]> = { ...(prev as Record<string, string[]> | undefined) };
      for (const item of pairs(value)) {
        const at = item.indexOf(':');
        if (at <= 0) throw bad(display, value, 'malformed pair, expect string:string');
        const k = item.slice(0, at).trim();
        setKey(out, k, [...(Object.hasOwn(out, k) ? out[k]! : []), item.slice(at + 1).trim()]);
      }
      return out;
    }
    case 'taints': {
      const out: RegisterTaint[] = [...((prev as RegisterTaint[] | undefined) ?? [])];
      for (const item of pairs(value)) {
        const colon = item.lastIndexOf(':');
        if (colon <= 0) throw bad(display, value, `invalid taint spec: ${item}`);
        const effect = item.slice(colon + 1);
        if (effect !== 'NoSchedule' && effect !== 'PreferNoSchedule' && effect !== 'NoExecute') {
          throw bad(display, value, `invalid taint effect: ${effect}, unsupported taint effect`);
        }
        const kv = item.slice(0, colon);
        const eq = kv.indexOf('=');
        const key = eq === -1 ? kv : kv.slice(0, eq);
        const v = eq === -1 ? '' : kv.slice(eq + 1);
        if (key === '') throw bad(display, value, `invalid taint spec: ${item}`);
        out.push(v === '' ? { key, effect } : { key, value: v, effect });
      }
      return out;
    }
    default:
      return value;
  }
}
