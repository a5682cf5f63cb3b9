// What the Kubelet is built from (upstream: kubelet.Dependencies): the CRI client and runtime,
// image service, clock, logger, cgroup manager, OOM watcher, PLEG and pod sources. The command
// builds the real ones (buildDependencies); tests pass doubles.

import { readFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import type { Pod } from '../api/types.js';
import type { KubeletConfig, KubeletFlags } from '../config/index.js';
import { CriClient } from '../runtime/cri-client.js';
import { RuntimeManager, type RuntimeManagerOptions } from '../runtime/runtime-manager.js';
import type { KubeletRuntime } from '../runtime/types.js';
import type { ProbeResultsView } from '../runtime/pod-actions.js';
import type { ProbeRunner } from '../prober/types.js';
import { createProbeRunner } from '../prober/runner.js';
import { ImageManager } from '../images/image-manager.js';
import { PullCredentials } from '../credentialprovider/index.js';
import { credentialProviderPluginMetrics } from '../credentialprovider/plugin.js';
import { registerCredentialProviderPlugins } from '../credentialprovider/plugin.js';
import { ApiObjectSource, StandaloneObjectSource } from '../volumemanager/object-source.js';
import type { PodCache } from '../pleg/cache.js';
import { createPLEG, type Pleg, type PodLifecycleEvent } from '../pleg/index.js';
import { createPlegMetrics } from '../pleg/metrics.js';
import { PodConfig, type PodUpdate } from '../sources/pod-config.js';
import type { ApiPodError, ManifestError } from '../sources/errors.js';
import { discoverCgroupMounts, cgroupRefFor, type CgroupMounts } from '../cgroups/index.js';
import { PodContainerManager } from '../cm/pod-container-manager.js';
import { PodCgroupResize } from '../cm/pod-cgroup-resize.js';
import { SystemdPodContainerManager } from '../cm/pod-container-manager-systemd.js';
import { resolveCgroupDriver } from '../cm/cgroup-driver.js';
import { systemdScopePrefixOfRuntime } from '../cm/cgroup-name.js';
import { DbusSystemdUnits, type SystemdUnits } from '../cm/systemd/units.js';
import { OomWatcher, type OomEvent } from '../oom/index.js';
import { Registry } from '../metrics/registry.js';
import { imageSizeBucket, kubeletMetrics, runtimeOperationsObserver } from '../metrics/kubelet-metrics.js';
import { podStartTracker } from './pod-start-metrics.js';
import { ContainerLogManager } from '../logs/rotation.js';
import { parseQuantity } from '../api/quantity.js';
import type { RestClient } from '../client/rest.js';
import { realClock, type Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { readMachineInfo } from '../nodestatus/machine-info.js';
import type { MachineInfo, NodeImage } from '../nodestatus/setters.js';
import type { SubIDFiles } from './userns/subids.js';
import { setupDataDirs } from './pod-sync.js';

/** The CRI calls the kubelet itself makes: the runtime's status, and close at shutdown. */
export type KubeletCri = Pick<CriClient, 'status' | 'close'>;

/** The pod cgroup manager (cm). */
export type PodCgroups = Pick<PodContainerManager, 'ensureExists' | 'remove' | 'listPodCgroups' | 'podCgroupName'>
  & Partial<Pick<PodContainerManager, 'containerCgroupName' | 'podsCgroupName'>>;

/** The OOM watcher as the kubelet uses it. */
export type KubeletOomWatcher = Pick<OomWatcher, 'start' | 'stop' | 'oomKills' | 'unwatch' | 'watched'> & {
  /** Watches a started container's cgroup (name relative to the cgroup root). */
  watchContainer(podUID: string, containerName: string, containerID: string, cgroupName: string, meta: { podName?: string; podNamespace?: string }): Promise<{ error?: string }>;
};

/** The PLEG as the kubelet starts, reads and closes it. */
export type KubeletPleg = Pick<Pleg, 'pleg' | 'close'>;

/** The merged pod sources. */
export type PodSources = Pick<PodConfig, 'startFileSource' | 'startUrlSource' | 'seenAllSources' | 'stop'> & Partial<Pick<PodConfig, 'startApiSource'>>;

export interface RuntimeHooks {
  /** Creates the pod's cgroup and returns its name. */
  ensurePodCgroup: (pod: Pod) => Promise<string>;
  /** Told of every container started (the OOM watcher watches it). */
  onContainerStarted: (pod: Pod, containerName: string, containerID: string) => void;
  /** The prober's liveness/startup results (computePodActions kills on a failure). */
  probeResults?: ProbeResultsView;
  /** The pod's RuntimeClass handler; the pod's user namespace; events about the pod (FailedCreatePodSandBox). */
  runtimeHandler?: RuntimeManagerOptions['runtimeHandler'];
  userNamespace?: RuntimeManagerOptions['userNamespace'];
  recordEvent?: RuntimeManagerOptions['recordEvent'];
  /** In-place resize: the allocation manager's side (the pod cgroup's side is added here). */
  resize?: Omit<NonNullable<RuntimeManagerOptions['resize']>, 'podCgroup'>;
}

export interface KubeletDependencies {
  clock: Clock;
  log: Logger;
  cri: KubeletCri;
  /** The kubelet's Prometheus registry (served at /metrics). */
  metrics: Registry;
  cgroups: PodCgroups;
  hostIPs: string[];
  memoryCapacityBytes: number;
  /** The kernel release (`uname -r`) the safe sysctls are chosen by; default: this host's. */
  kernelRelease?: string;
  /** AppArmor is enabled on the host; default: read from /sys at start. */
  appArmorEnabled?: boolean;
  /** The container runtime, given the kubelet's hooks into it. */
  runtime(hooks: RuntimeHooks): KubeletRuntime;
  pleg(o: { runtime: KubeletRuntime; cache: PodCache; emit: (e: PodLifecycleEvent) => boolean }): KubeletPleg;
  /** Undefined: no OOM watcher. */
  oomWatcher?(onEvent: (e: OomEvent) => void): KubeletOomWatcher;
  podSources(o: { onUpdate: (u: PodUpdate) => void; onError: (e: ManifestError) => void; onApiPodError?: (e: ApiPodError) => void }): PodSources;
  /** Rotates container logs (containerLogMaxSize/MaxFiles). Undefined: no rotation. */
  /** runningContainers: the PLEG's view of the running containers (undefined when not fresh). */
  containerLogManager?(runningContainers?: () => string[] | undefined): { start(): void; stop(): void };
  /** Runs probes (network kinds in the workers/ pool, exec through CRI ExecSync). Undefined: no prober. */
  probeRunner?(): ProbeRunner;
  /** The API server client (--kubeconfig). Undefined: standalone, no API server. */
  apiClient?: RestClient;
  /** Delay before a batch of pod status patches (0: batching off). Default the status manager's. */
  statusBatchDelayMs?: number;
  /** What the node status reports about the machine and the runtime (default: read from the host and CRI). */
  nodeFacts?: NodeFacts;
  /** Where the `kubelet` user's subordinate IDs are read (default /etc/passwd, /etc/group, /etc/subuid, /etc/subgid). */
  subIDFiles?: SubIDFiles;
}

/** Machine facts, the CRI Version answer and the images, for the node status. */
export interface NodeFacts {
  machineInfo(): Promise<MachineInfo>;
  runtimeVersion(): Promise<{ runtimeName: string; runtimeVersion: string }>;
  images(): Promise<NodeImage[]>;
}

/** The real dependencies for a node: containerd (or any CRI runtime), cgroupfs, the addon. */
export async function buildDependencies(config: KubeletConfig, flags: KubeletFlags, nodeName: string, log: Logger, clock: Clock = realClock, apiClient?: RestClient): Promise<KubeletDependencies & { cri: CriClient }> {
  const cri = new CriClient({
    runtimeEndpoint: config.containerRuntimeEndpoint,
    imageEndpoint: config.imageServiceEndpoint || undefined,
    timeoutMs: config.runtimeRequestTimeout,
  });
  const hostIPs = flags.nodeIP?.length ? [...flags.nodeIP] : defaultHostIPs();
  const memoryCapacityBytes = await readMemoryCapacity();
  const mounts = await discoverCgroupMounts();
  // the runtime's cgroup driver must be the configured one (refused at start otherwise)
  await resolveCgroupDriver({ cri, configured: config.cgroupDriver, featureGates: config.featureGates, log });
  const scopePrefix = config.cgroupDriver === 'systemd'
    ? await cri.version().then((v) => systemdScopePrefixOfRuntime(v.runtime_name), () => undefined)
    : undefined;
  const cgroups = podCgroupManager(config, mounts, log, scopePrefix);
  await setupDataDirs(flags.rootDir);
  const metrics = new Registry();
  const km = kubeletMetrics(metrics);
  cri.onCall = runtimeOperationsObserver(km);
  cgroups.onOperation = (op, seconds) => km.cgroupManagerDuration.withLabelValues(op).observe(seconds);
  // Pull secrets are read through the volumes' object source (GET per pull: always current);
  // standalone, reading one fails and the pull goes on without it, as upstream.
  const providers = flags.imageCredentialProviderConfig
    ? await registerCredentialProviderPlugins(flags.imageCredentialProviderConfig, flags.imageCredentialProviderBinDir, clock)
    : [];
  if (providers.length > 0) {
    // registered with the plugins, as upstream's RegisterCredentialProviderPlugins does
    const pluginMetrics = credentialProviderPluginMetrics(metrics);
    for (const p of providers) p.metrics = pluginMetrics;
  }
  const credentials = new PullCredentials({
    secrets: apiClient ? new ApiObjectSource({ client: apiClient, clock, strategy: 'Get' }) : new StandaloneObjectSource(),
    providers,
    log,
  });
  const images = new ImageManager({
    cri,
    clock,
    log,
    credentials,
    serializeImagePulls: config.serializeImagePulls,
    maxParallelImagePulls: config.maxParallelImagePulls ?? undefined,
    onPulled: (_pod, seconds, size) => km.imagePullDuration.withLabelValues(imageSizeBucket(size)).observe(seconds),
    onPulling: (pod, phase) => podStartTracker(metrics, clock).pulling(pod, phase),
  });
  return {
    clock,
    log,
    cri,
    metrics,
    cgroups,
    hostIPs,
    memoryCapacityBytes,
    runtime: (hooks) => {
      // upstream's Warning when a pull secret named by the pod cannot be read
      credentials.onSecretsMissing((pod, message) => hooks.recordEvent?.(pod, 'Warning', 'FailedToRetrieveImagePullSecret', message));
      return new RuntimeManager({
      cri,
      images,
      clock,
      log,
      nodeName,
      hostIPs: () => hostIPs,
      memoryCapacityBytes,
      podLogsDir: config.podLogsDir,
      rootDir: flags.rootDir,
      seccompDefault: config.seccompDefault,
      onContainerStart: (type, failed) => (failed === undefined ? km.startedContainers.withLabelValues(type).inc() : km.startedContainersErrors.withLabelValues(type, failed).inc()),
      ...hooks,
      resize: hooks.resize && { ...hooks.resize, podCgroup: new PodCgroupResize(mounts, (p) => cgroups.podCgroupName(p)) },
      });
    },
    pleg: ({ runtime, cache, emit }) => createPLEG({
      runtimeEndpoint: config.containerRuntimeEndpoint,
      timeoutMs: config.runtimeRequestTimeout,
      runtime,
      cache,
      clock,
      log,
      emit,
      metrics: createPlegMetrics(metrics),
      featureGates: config.featureGates,
    }),
    oomWatcher: (onEvent) => {
      const w = new OomWatcher({ mode: config.oomWatcher, registry: metrics, logger: log, clock, onEvent });
      return {
        start: () => w.start(),
        stop: () => w.stop(),
        oomKills: (id) => w.oomKills(id),
        unwatch: (id) => w.unwatch(id),
        watched: () => w.watched(),
        watchContainer: (podUID, name, id, cgroupName, meta) => w.watchContainer(podUID, name, id, cgroupRefFor(mounts, cgroupName), meta),
      };
    },
    probeRunner: () => createProbeRunner({ cri }),
    containerLogManager: (runningContainers) => new ContainerLogManager({
      runtime: cri,
      ...(runningContainers ? { runningContainers } : {}),
      clock,
      log,
      maxSizeBytes: parseQuantity(config.containerLogMaxSize).value(),
      maxFiles: config.containerLogMaxFiles,
      monitorIntervalMs: config.containerLogMonitorInterval,
      maxWorkers: config.containerLogMaxWorkers,
    }),
    nodeFacts: {
      machineInfo: () => readMachineInfo({ rootDir: flags.rootDir }),
      runtimeVersion: async () => {
        const v = await cri.version();
        return { runtimeName: v.runtime_name, runtimeVersion: v.runtime_version };
      },
      images: async () => (await cri.listImages()).map((i) => ({ id: i.id, repoTags: i.repo_tags ?? [], repoDigests: i.repo_digests ?? [], sizeBytes: Number(i.size ?? 0) })),
    },
    podSources: ({ onUpdate, onError, onApiPodError }) => new PodConfig({ nodeName, onUpdate, onError, ...(onApiPodError ? { onApiPodError } : {}), log: (msg) => log.info(msg), clock }),
  };
}

/** The pod cgroup manager the config asks for (cgroupDriver, cgroupRoot, podPidsLimit). */
export function podCgroupManager(
  config: Pick<KubeletConfig, 'cgroupRoot' | 'podPidsLimit'> & Partial<Pick<KubeletConfig, 'cgroupDriver'>>,
  mounts: CgroupMounts,
  log: Logger,
  scopePrefix?: string,
  units?: SystemdUnits,
): PodContainerManager | SystemdPodContainerManager {
  if (config.cgroupDriver === 'systemd') {
    return new SystemdPodContainerManager({ mounts, cgroupRoot: config.cgroupRoot ?? '', log, podPidsLimit: config.podPidsLimit, units: units ?? new DbusSystemdUnits(), ...(scopePrefix ? { scopePrefix } : {}) });
  }
  return new PodContainerManager({ mounts, cgroupRoot: config.cgroupRoot ?? '', log, podPidsLimit: config.podPidsLimit });
}

function defaultHostIPs(): string[] {
  const ips: string[] = [];
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (!a.internal && a.family === 'IPv4') ips.push(a.address);
  }
  return ips.length ? [ips[0]!] : ['127.0.0.1'];
}

async function readMemoryCapacity(): Promise<number> {
  const text = await readFile('/proc/meminfo', 'utf8');
  const m = /^MemTotal:\s+(\d+)\s+kB/m.exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}
