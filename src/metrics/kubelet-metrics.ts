// The kubelet families of upstream's pkg/kubelet/metrics and component-base (REST client,
// build info, feature gates) that dashboards and alerts query, with upstream's names, help,
// types, labels and buckets. One set per registry (kubeletMetrics(registry)); each subsystem
// records into it where the event happens: the CRI client (runtime operations), the runtime
// manager and container starter (started pods and containers), the pod workers (sync duration),
// the image manager (pull duration), the pod cgroup manager (cgroup operations), the REST client
// (requests), and the kubelet's state read on each scrape (desired, active, mirror and working pods).

import { readdirSync, readFileSync } from 'node:fs';
import { setRestRequestObserver } from '../client/rest.js';
import { DEF_BUCKETS, exponentialBuckets, type Counter, type Gauge, type Histogram, type Registry } from './registry.js';

/** upstream podStartupDurationBuckets (seconds). */
export const POD_STARTUP_DURATION_BUCKETS: readonly number[] = [0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600];
/** upstream imagePullDurationBuckets (seconds). */
export const IMAGE_PULL_DURATION_BUCKETS: readonly number[] = [1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600];
/** component-base restclient latency buckets (seconds). */
export const REST_CLIENT_DURATION_BUCKETS: readonly number[] = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** upstream imageSizeBuckets: lower bound (exclusive) and label. */
const IMAGE_SIZE_BUCKETS: ReadonlyArray<readonly [number, string]> = [
  [0, '0-10MB'], [10 * MiB, '10MB-100MB'], [100 * MiB, '100MB-500MB'], [500 * MiB, '500MB-1GB'],
  [1 * GiB, '1GB-5GB'], [5 * GiB, '5GB-10GB'], [10 * GiB, '10GB-20GB'], [20 * GiB, '20GB-30GB'],
  [30 * GiB, '30GB-40GB'], [40 * GiB, '40GB-60GB'], [60 * GiB, '60GB-100GB'], [100 * GiB, 'GT100GB'],
];

/** upstream GetImageSizeBucket: "N/A" for an unknown (0) size. */
export function imageSizeBucket(sizeBytes: number): string {
  if (!(sizeBytes > 0)) return 'N/A';
  for (let i = IMAGE_SIZE_BUCKETS.length - 1; i >= 0; i--) {
    if (sizeBytes > IMAGE_SIZE_BUCKETS[i]![0]) return IMAGE_SIZE_BUCKETS[i]![1];
  }
  return '';
}

/** The CRI method names as upstream's instrumented services label them (operation_type). */
const CRI_OPERATION: Readonly<Record<string, string>> = {
  Version: 'version', RunPodSandbox: 'run_podsandbox', StopPodSandbox: 'stop_podsandbox',
  RemovePodSandbox: 'remove_podsandbox', PodSandboxStatus: 'podsandbox_status', ListPodSandbox: 'list_podsandbox',
  CreateContainer: 'create_container', StartContainer: 'start_container', StopContainer: 'stop_container',
  RemoveContainer: 'remove_container', ListContainers: 'list_containers', ContainerStatus: 'container_status',
  UpdateContainerResources: 'update_container_resources', ReopenContainerLog: 'reopen_container_log',
  ExecSync: 'exec_sync', Exec: 'exec', Attach: 'attach', PortForward: 'port_forward', Status: 'status',
  UpdateRuntimeConfig: 'update_runtime_config', ContainerStats: 'container_stats', ListContainerStats: 'list_container_stats',
  PodSandboxStats: 'podsandbox_stats', ListPodSandboxStats: 'list_podsandbox_stats', ListImages: 'list_images',
  ImageStatus: 'image_status', PullImage: 'pull_image', RemoveImage: 'remove_image', ImageFsInfo: 'image_fs_info',
  CheckpointContainer: 'checkpoint_container', GetContainerEvents: 'get_container_events',
  ListMetricDescriptors: 'list_metric_descriptors', ListPodSandboxMetrics: 'list_podsandbox_metrics',
  RuntimeConfig: 'runtime_config',
};

/** operation_type of a CRI method (snake case for one upstream does not list). */
export function criOperationType(method: string): string {
  return CRI_OPERATION[method] ?? method.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** gRPC code names as Go's codes.Code.String() spells them (the `code` label of started_containers_errors_total). */
const GRPC_CODE_NAMES = ['OK', 'Canceled', 'Unknown', 'InvalidArgument', 'DeadlineExceeded', 'NotFound', 'AlreadyExists',
  'PermissionDenied', 'ResourceExhausted', 'FailedPrecondition', 'Aborted', 'OutOfRange', 'Unimplemented', 'Internal',
  'Unavailable', 'DataLoss', 'Unauthenticated'];

/** The Go name of an error's gRPC code; Unknown for an error that carries none (as grpc status.FromError). */
export function grpcCodeName(err: unknown): string {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && GRPC_CODE_NAMES[code] ? GRPC_CODE_NAMES[code]! : 'Unknown';
}

export interface KubeletMetrics {
  nodeName: Gauge;
  podStartDuration: Histogram;
  podStartSLIDuration: Histogram;
  podWorkerDuration: Histogram;
  runtimeOperations: Counter;
  runtimeOperationsErrors: Counter;
  runtimeOperationsDuration: Histogram;
  startedPods: Counter;
  startedPodsErrors: Counter;
  startedContainers: Counter;
  startedContainersErrors: Counter;
  desiredPods: Gauge;
  activePods: Gauge;
  mirrorPods: Gauge;
  workingPods: Gauge;
  imagePullDuration: Histogram;
  cgroupManagerDuration: Histogram;
  restClientRequests: Counter;
  restClientDuration: Histogram;
  buildInfo: Gauge;
  featureEnabled: Gauge;
}

const byRegistry = new WeakMap<Registry, KubeletMetrics>();

/** The kubelet families of `registry`, registered on first use. */
export function kubeletMetrics(registry: Registry): KubeletMetrics {
  let m = byRegistry.get(registry);
  if (m) return m;
  m = {
    nodeName: registry.gauge({ name: 'kubelet_node_name', help: "The node's name. The count is always 1.", labelNames: ['node'] }),
    podStartDuration: registry.histogram({
      name: 'kubelet_pod_start_duration_seconds',
      help: 'Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run',
      buckets: POD_STARTUP_DURATION_BUCKETS,
    }),
    podStartSLIDuration: registry.histogram({
      name: 'kubelet_pod_start_sli_duration_seconds',
      help: 'Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch',
      buckets: POD_STARTUP_DURATION_BUCKETS,
    }),
    podWorkerDuration: registry.histogram({
      name: 'kubelet_pod_worker_duration_seconds',
      help: 'Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync',
      labelNames: ['operation_type'],
      buckets: DEF_BUCKETS,
    }),
    runtimeOperations: registry.counter({ name: 'kubelet_runtime_operations_total', help: 'Cumulative number of runtime operations by operation type.', labelNames: ['operation_type'] }),
    runtimeOperationsErrors: registry.counter({ name: 'kubelet_runtime_operations_errors_total', help: 'Cumulative number of runtime operation errors by operation type.', labelNames: ['operation_type'] }),
    runtimeOperationsDuration: registry.histogram({
      name: 'kubelet_runtime_operations_duration_seconds',
      help: 'Duration in seconds of runtime operations. Broken down by operation type.',
      labelNames: ['operation_type'],
      buckets: exponentialBuckets(0.005, 2.5, 14),
    }),
    startedPods: registry.counter({ name: 'kubelet_started_pods_total', help: 'Cumulative number of pods started' }),
    startedPodsErrors: registry.counter({ name: 'kubelet_started_pods_errors_total', help: 'Cumulative number of errors when starting pods' }),
    startedContainers: registry.counter({ name: 'kubelet_started_containers_total', help: 'Cumulative number of containers started', labelNames: ['container_type'] }),
    startedContainersErrors: registry.counter({
      name: 'kubelet_started_containers_errors_total',
      help: 'Cumulative number of errors when starting containers',
      labelNames: ['container_type', 'code'],
    }),
    desiredPods: registry.gauge({
      name: 'kubelet_desired_pods',
      help: 'The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.',
      labelNames: ['static'],
    }),
    activePods: registry.gauge({
      name: 'kubelet_active_pods',
      help: 'The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver.',
      labelNames: ['static'],
    }),
    mirrorPods: registry.gauge({ name: 'kubelet_mirror_pods', help: 'The number of mirror pods the kubelet will try to create (one per admitted static pod)' }),
    workingPods: registry.gauge({
      name: 'kubelet_working_pods',
      help: 'Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.',
      labelNames: ['lifecycle', 'config', 'static'],
    }),
    imagePullDuration: registry.histogram({
      name: 'kubelet_image_pull_duration_seconds',
      help: 'Duration in seconds to pull an image.',
      labelNames: ['image_size_in_bytes'],
      buckets: IMAGE_PULL_DURATION_BUCKETS,
    }),
    cgroupManagerDuration: registry.histogram({
      name: 'kubelet_cgroup_manager_duration_seconds',
      help: 'Duration in seconds for cgroup manager operations. Broken down by method.',
      labelNames: ['operation_type'],
      buckets: DEF_BUCKETS,
    }),
    restClientRequests: registry.counter({
      name: 'rest_client_requests_total',
      help: 'Number of HTTP requests, partitioned by status code, method, and host.',
      labelNames: ['code', 'method', 'host'],
    }),
    restClientDuration: registry.histogram({
      name: 'rest_client_request_duration_seconds',
      help: 'Request latency in seconds. Broken down by verb, and host.',
      labelNames: ['verb', 'host'],
      buckets: REST_CLIENT_DURATION_BUCKETS,
    }),
    buildInfo: registry.gauge({
      name: 'kubernetes_build_info',
      help: "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
      labelNames: ['major', 'minor', 'git_version', 'git_commit', 'git_tree_state', 'build_date', 'go_version', 'compiler', 'platform'],
    }),
    featureEnabled: registry.gauge({
      name: 'kubernetes_feature_enabled',
      help: 'This metric records the data about the stage and enablement of a k8s feature.',
      labelNames: ['name', 'stage'],
      stabilityLevel: 'BETA',
    }),
  };
  byRegistry.set(registry, m);
  return m;
}

/** A CRI call as the client saw it: method name, seconds, the error if it failed. */
export type CriCallObserver = (method: string, seconds: number, err?: unknown) => void;

/** Records CRI calls as upstream's instrumented runtime and image services do. */
export function runtimeOperationsObserver(m: KubeletMetrics): CriCallObserver {
  return (method, seconds, err) => {
    const op = criOperationType(method);
    m.runtimeOperations.withLabelValues(op).inc();
    m.runtimeOperationsDuration.withLabelValues(op).observe(seconds);
    if (err !== undefined) m.runtimeOperationsErrors.withLabelValues(op).inc();
    // upstream counts a pod start per sandbox created (createPodSandbox), and its failures
    if (method === 'RunPodSandbox') {
      m.startedPods.inc();
      if (err !== undefined) m.startedPodsErrors.inc();
    }
  };
}

/** One REST request as client-go's metrics see it: code is the status or "<error>". */
export type RestRequestObserver = (method: string, host: string, code: string, seconds: number) => void;

export function restClientObserver(m: KubeletMetrics): RestRequestObserver {
  return (method, host, code, seconds) => {
    m.restClientRequests.withLabelValues(code, method, host).inc();
    m.restClientDuration.withLabelValues(method, host).observe(seconds);
  };
}

/** The upstream release whose behaviour kubelet-ts follows (node status reports the same). */
export interface BuildInfo {
  gitVersion: string;
  gitCommit?: string;
  buildDate?: string;
}

/** kubernetes_build_info: kubelet-ts's version; go_version and compiler say what runs it. */
export function setBuildInfo(m: KubeletMetrics, info: BuildInfo): void {
  const v = /^v?(\d+)\.(\d+)/.exec(info.gitVersion);
  m.buildInfo.withLabelValues(
    v?.[1] ?? '', v?.[2] ?? '', info.gitVersion, info.gitCommit ?? '', 'clean', info.buildDate ?? '1970-01-01T00:00:00Z',
    `node${process.versions.node}`, 'tsc', `${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}`,
  ).set(1);
}

/** kubernetes_feature_enabled for each gate: stage ALPHA, BETA, DEPRECATED, or "" for GA. */
export function setFeatureGates(m: KubeletMetrics, gates: Iterable<{ name: string; stage: string; enabled: boolean }>): void {
  for (const g of gates) m.featureEnabled.withLabelValues(g.name, g.stage === 'GA' ? '' : g.stage).set(g.enabled ? 1 : 0);
}

/** The count of one pod per (lifecycle, config, static) as upstream's HandlePodCleanups sets kubelet_working_pods. */
export interface WorkingPod {
  lifecycle: 'sync' | 'terminating' | 'terminated';
  /** Removed from its source (orphan) or known only from the runtime (runtime_only). */
  config: 'desired' | 'orphan' | 'runtime_only';
  static: boolean;
}

export function setWorkingPods(m: KubeletMetrics, pods: Iterable<WorkingPod>): void {
  const counts = new Map<string, number>();
  for (const p of pods) {
    const key = `${p.lifecycle}/${p.config}/${p.config === 'runtime_only' ? 'unknown' : p.static ? 'true' : ''}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  // every valid combination is set, zero included, as upstream does
  const combos: Array<[string, string]> = [['desired', 'true'], ['desired', ''], ['orphan', 'true'], ['orphan', ''], ['runtime_only', 'unknown']];
  for (const [config, stat] of combos) {
    for (const lifecycle of ['sync', 'terminating', 'terminated']) {
      m.workingPods.withLabelValues(lifecycle, config, stat).set(counts.get(`${lifecycle}/${config}/${stat}`) ?? 0);
    }
  }
}

/** desired and active pods by static ("true" for a pod not from the API server, "" otherwise), and mirror pods. */
export function setPodCounts(m: KubeletMetrics, desired: Array<{ static: boolean }>, active: Array<{ static: boolean }>, mirrorPods: number): void {
  const count = (ps: Array<{ static: boolean }>, s: boolean) => ps.filter((p) => p.static === s).length;
  m.desiredPods.withLabelValues('').set(count(desired, false));
  m.desiredPods.withLabelValues('true').set(count(desired, true));
  m.activePods.withLabelValues('').set(count(active, false));
  m.activePods.withLabelValues('true').set(count(active, true));
  m.mirrorPods.set(mirrorPods);
}

// ---- process collector (client_golang's process_* families) ----

/** process_cpu_seconds_total, process_open_fds, process_max_fds and process_virtual_memory_bytes, read on scrape from /proc/self. */
export function registerProcessCollector(registry: Registry): void {
  const internal = { stabilityLevel: 'INTERNAL' as const };
  const cpu = registry.counter({ name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', ...internal });
  let last = 0;
  registry.onCollect(() => {
    const u = process.cpuUsage();
    const now = (u.user + u.system) / 1e6;
    if (now > last) cpu.inc(now - last);
    last = Math.max(last, now);
  });
  registry.gaugeFunc({ name: 'process_open_fds', help: 'Number of open file descriptors.', ...internal }, () => {
    try {
      return readdirSync('/proc/self/fd').length;
    } catch {
      return NaN;
    }
  });
  registry.gaugeFunc({ name: 'process_max_fds', help: 'Maximum number of open file descriptors.', ...internal }, () => {
    try {
      const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
      const v = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
      return v === undefined ? NaN : v === 'unlimited' ? Infinity : Number(v);
    } catch {
      return NaN;
    }
  });
  registry.gaugeFunc({ name: 'process_virtual_memory_bytes', help: 'Virtual memory size in bytes.', ...internal }, () => {
    try {
      // field 23 (vsize) of /proc/self/stat, after the parenthesised command name
      const stat = readFileSync('/proc/self/stat', 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[20]);
    } catch {
      return NaN;
    }
  });
}

/**
 * Stage and default, in the upstream release kubelet-ts follows, of the gates kubelet-ts acts
 * on; kubernetes_feature_enabled lists these (a gate kubelet-ts ignores is left out rather
 * than reported with a stage it cannot vouch for).
 */
export const FEATURE_GATE_STAGES: Readonly<Record<string, { stage: 'ALPHA' | 'BETA' | 'GA' | 'DEPRECATED'; default: boolean }>> = {
  EventedPLEG: { stage: 'ALPHA', default: false },
  KubeletFineGrainedAuthz: { stage: 'BETA', default: true },
  UserNamespacesSupport: { stage: 'BETA', default: true },
};

/**
 * The component families every upstream binary serves: the process collector, build info,
 * feature gates, and the REST client's requests (process-wide, as client-go's).
 */
export function registerComponentMetrics(registry: Registry, opts: { version: string; featureGates: Readonly<Record<string, boolean>> }): void {
  const m = kubeletMetrics(registry);
  registerProcessCollector(registry);
  setBuildInfo(m, { gitVersion: opts.version });
  setFeatureGates(m, Object.entries(FEATURE_GATE_STAGES).map(([name, g]) => ({ name, stage: g.stage, enabled: opts.featureGates[name] ?? g.default })));
  setRestRequestObserver(restClientObserver(m));
}
