// The Kubelet: wires the subsystems it is given (KubeletDependencies) and runs the syncLoop on
// the main thread. Pod sources, PLEG events, the resync tick and housekeeping all arrive here
// and are dispatched to the per-pod workers; nothing in the loop itself waits on I/O.

import { arch, cpus, hostname, release } from 'node:os';
import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { isAppArmorEnabled } from '../runtime/apparmor.js';
import { DisruptionTarget, Evicted } from '../api/reasons.js';
import { TERMINATION_BY_KUBELET } from '../eviction/api.js';
import type { KubeletConfig, KubeletFlags } from '../config/index.js';
import type { KubeletRuntime } from '../runtime/types.js';
import { PodCache } from '../pleg/cache.js';
import { GENERIC_RELIST_THRESHOLD_MS } from '../pleg/generic.js';
import { parseQuantity } from '../api/quantity.js';
import type { Node } from '../nodestatus/types.js';
import type { ApiPodError, ManifestError } from '../sources/errors.js';
import { isStaticPod } from '../sources/static-pod.js';
import { StatusManager } from '../status/status-manager.js';
import { oomEventRecord, type OomEvent } from '../oom/index.js';
import type { Registry } from '../metrics/registry.js';
import { kubeletMetrics } from '../metrics/kubelet-metrics.js';
import { podStartTracker, registerKubeletStateMetrics } from './pod-start-metrics.js';
import { ProbeManager } from '../prober/manager.js';
import type { ProbeRunner } from '../prober/types.js';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { KubeletCri, KubeletDependencies, KubeletOomWatcher, KubeletPleg, PodCgroups, PodSources } from './dependencies.js';
import { appArmorAdmitHandler, canAdmitPod, sysctlAdmitHandler, type AdmissionNode, type AdmitResult, type Taint } from './admission.js';
import { KubeletStartError } from './errors.js';
import { MirrorPods } from './mirror-pods.js';
import { ManagedObjectSource, ObjectManager } from './configmap-secret.js';
import { EventRecorder } from './event-recorder.js';
import { HOUSEKEEPING_PERIOD_MS, handleHousekeeping } from './housekeeping.js';
import { AllocationManager } from './allocation/allocation-manager.js';
import { resizeHooks } from './allocation/wiring.js';
import { PodManager } from './pod-manager.js';
import { PodSyncer, syncErrorBackoffMs } from './pod-sync.js';
import { PodWorkers, PREVIOUS_POD_NOT_TERMINATED, type WaitingOn } from './pod-workers.js';
import { previousStaticInstances } from './static-handover.js';
import { SyncLoop } from './sync-loop.js';
import { WorkQueue } from './work-queue.js';
import { VolumeManager } from '../volumemanager/volume-manager.js';
import { ApiObjectSource } from '../volumemanager/object-source.js';
import { CHECK_RESOLV_CONF_PERIOD_MS, DNSConfigurer } from '../network/dns.js';
import { NodeAgent } from './node-agent.js';
import { EventSink, type ObjectReference } from './event-sink.js';
import { RestClient } from '../client/rest.js';
import { isNotFound } from '../client/errors.js';
import { RuntimeClassError, RuntimeClassManager, type RuntimeClassObject } from '../runtime/runtime-class.js';
import { toRuntimeHandlerInfo, type RuntimeHandlerInfo } from '../runtime/runtime-handlers.js';
import { USER_NAMESPACES_SUPPORT, UsernsManager } from './userns/userns-manager.js';

const RUNTIME_CHECK_PERIOD_MS = 5_000;

/** A pod admit handler (upstream lifecycle.PodAdmitHandler). */
export type PodAdmitHandler = (pod: Pod) => { admit: boolean; reason?: string; message?: string };
/** upstream: the syncLoop's resync ticker. */
const SYNC_TICK_MS = 1_000;
/** How long stop() waits for pod workers after abandoning their work; pods keep running. */
export const STOP_TIMEOUT_MS = 3_000;

export interface KubeletOptions {
  config: KubeletConfig;
  flags: KubeletFlags;
  deps: KubeletDependencies;
}

export interface HealthCheck {
  name: string;
  ok: boolean;
  message: string;
}

export class Kubelet {
  readonly nodeName: string;
  readonly config: KubeletConfig;
  readonly flags: KubeletFlags;
  readonly clock: Clock;
  readonly log: Logger;
  readonly cri: KubeletCri;
  readonly podManager = new PodManager();
  readonly statusManager: StatusManager;
  /** Mirror pods of static pods in the API (undefined standalone). */
  readonly mirrorPods?: MirrorPods;
  /** ConfigMaps and Secrets for env and envFrom from the API (undefined standalone). */
  readonly objects?: ObjectManager;
  readonly cache = new PodCache();
  readonly workQueue: WorkQueue;
  /** The kubelet's Prometheus registry (served at /metrics). */
  readonly metrics: Registry;
  readonly events: EventRecorder;
  readonly hostIPs: string[];
  readonly memoryCapacityBytes: number;
  readonly manifestErrors: (ManifestError | ApiPodError)[] = [];
  /** The prober (undefined when the dependencies give no probe runner). */
  readonly probes?: ProbeManager;
  /** Registration, node status and lease (only with an API server: deps.apiClient). */
  readonly nodeAgent?: NodeAgent;
  /** Events to the API server (only with deps.apiClient). */
  readonly eventSink?: EventSink;

  private readonly deps: KubeletDependencies;
  private readonly cgroups: PodCgroups;
  private readonly runtime: KubeletRuntime;
  private readonly podWorkers: PodWorkers;
  private readonly syncLoop: SyncLoop;
  private readonly syncer: PodSyncer;
  private readonly volumes: VolumeManager;
  private readonly dns: DNSConfigurer;
  private plegs?: KubeletPleg;
  private podConfig?: PodSources;
  private oom?: KubeletOomWatcher;
  private probeRunner?: ProbeRunner;
  private logManager?: { start(): void; stop(): void };
  /** One live timer per periodic task: each tick replaces its own. */
  private readonly timers = new Map<string, Timer>();
  private readonly admitHandlers: PodAdmitHandler[] = [];
  /** upstream's sysctl allowlist and AppArmor validator, around the node's fit. */
  private readonly sysctlAdmit: PodAdmitHandler;
  private readonly appArmorAdmit: PodAdmitHandler;
  private nodePressure: (() => { memory: boolean; disk: boolean; pid: boolean }) | undefined;
  private running = false;
  private stopping?: Promise<void>;
  private runtimeError: string | undefined = 'container runtime status check may not have completed yet';
  /** The runtime's handlers from its last ready Status (upstream runtimeState.runtimeHandlers()); undefined before one. */
  runtimeHandlers: RuntimeHandlerInfo[] | undefined;
  /** The runtime's features from its last ready Status (null: it sent none; undefined before one). */
  private runtimeFeatures: { supplementalGroupsPolicy: boolean } | null | undefined;
  /** Pods' user namespaces (made in start()). */
  userns?: UsernsManager;
  /** RuntimeClass handlers from the API (undefined standalone, as upstream). */
  readonly runtimeClasses?: RuntimeClassManager;
  /** Allocated and actuated resources, resize conditions (in-place pod resize). */
  readonly allocation: AllocationManager;

  constructor(opts: KubeletOptions) {
    const { deps } = opts;
    this.deps = deps;
    this.config = opts.config;
    this.flags = opts.flags;
    this.clock = deps.clock;
    this.log = deps.log;
    this.cri = deps.cri;
    this.metrics = deps.metrics;
    this.cgroups = deps.cgroups;
    this.hostIPs = deps.hostIPs;
    this.memoryCapacityBytes = deps.memoryCapacityBytes;
    this.nodeName = nodeNameFrom(opts.flags.hostnameOverride);
    this.allocation = new AllocationManager({ rootDir: opts.flags.rootDir, log: deps.log, now: () => deps.clock.now() });
    const resize = resizeHooks({
      allocation: this.allocation,
      admissionNode: () => this.admissionNode(),
      admitPod: (pod, others) => this.admitPod(pod, others),
      activePods: () => this.activePods(),
    });
    this.workQueue = new WorkQueue(this.clock);
    this.events = new EventRecorder(this.log, () => this.clock.now());
    this.sysctlAdmit = sysctlAdmitHandler(this.config.allowedUnsafeSysctls ?? [], deps.kernelRelease ?? release());
    this.appArmorAdmit = appArmorAdmitHandler(deps.appArmorEnabled ?? isAppArmorEnabled());
    const apiClient = deps.apiClient;
    if (apiClient) {
      this.mirrorPods = new MirrorPods({
        client: apiClient,
        nodeName: this.nodeName,
        log: this.log,
        staticPods: () => this.podManager.getPods().filter((p) => isStaticPod(p) && !this.podWorkers.isTerminationRequested(p.metadata.uid!)),
      });
    }
    const mirrorPods = this.mirrorPods;
    if (apiClient) {
      this.objects = new ObjectManager({ client: apiClient, clock: this.clock, log: this.log, strategy: this.config.configMapAndSecretChangeDetectionStrategy });
    }
    this.statusManager = new StatusManager({
      client: apiClient,
      clock: this.clock,
      log: this.log,
      getPod: (uid) => this.podManager.getPodByUID(uid),
      isStatic: (pod) => isStaticPod(pod),
      mirrorPodOf: (pod) => mirrorPods?.mirrorPodOf(pod),
      ...(deps.statusBatchDelayMs !== undefined ? { batchDelayMs: deps.statusBatchDelayMs } : {}),
    });
    if (deps.apiClient) {
      // upstream's event client: its own limit (eventRecordQPS/eventBurst), not kubeAPIQPS.
      this.eventSink = new EventSink({
        client: new RestClient(deps.apiClient.config, { clock: this.clock, qps: 0, userAgent: 'kubelet-ts' }),
        clock: this.clock,
        log: this.log,
        host: this.nodeName,
        qps: this.config.eventRecordQPS,
        burst: this.config.eventBurst,
      });
      const sink = this.eventSink;
      this.events.sendTo({ ref: (object) => this.eventRef(object), post: (ref, type, reason, message) => sink.post(ref, type, reason, message) });
      this.nodeAgent = new NodeAgent({
        client: deps.apiClient,
        nodeName: this.nodeName,
        config: this.config,
        flags: this.flags,
        clock: this.clock,
        log: this.log,
        ...(deps.nodeFacts ? { facts: deps.nodeFacts } : {}),
        hostIPs: this.hostIPs,
        plegHealthy: () => this.plegs?.pleg.healthy() ?? { ok: false, message: 'pleg has not started' },
        recordEvent: (type, reason, message) => this.events.record(`Node ${this.nodeName}`, type, reason, message),
        pressure: () => this.nodePressure?.(),
        runtimeHandlers: () => this.runtimeHandlers,
        runtimeFeatures: () => this.runtimeFeatures,
      });
    }
    this.oom = deps.oomWatcher?.((e) => this.handleOomEvent(e));
    this.probeRunner = deps.probeRunner?.();
    if (this.probeRunner) {
      this.probes = new ProbeManager({
        clock: this.clock,
        log: this.log,
        runner: this.probeRunner,
        podStatus: (uid) => this.statusManager.getPodStatus(uid),
        recordEvent: (pod, c, type, reason, message) => this.events.record(`Pod ${podFullName(pod)}`, type, reason, message),
        onUpdate: (type, u) => this.syncLoop.handleProbeSync(u.podUID, type.toLowerCase(), u.result),
      });
    }
    const probes = this.probes;
    if (apiClient) {
      this.runtimeClasses = new RuntimeClassManager({
        clock: this.clock,
        get: (name) => apiClient.request<RuntimeClassObject>('GET', `/apis/node.k8s.io/v1/runtimeclasses/${encodeURIComponent(name)}`)
          .catch((err: unknown) => { if (isNotFound(err)) return undefined; throw err; }),
      });
    }
    this.runtime = deps.runtime({
      runtimeHandler: (pod) => this.runtimeHandlerFor(pod),
      userNamespace: (pod, handler) => this.userns ? this.userns.getOrCreateUserNamespaceMappings(pod, handler) : Promise.resolve(null),
      recordEvent: (pod, type, reason, message) => this.events.record(`Pod ${podFullName(pod)}`, type, reason, message),
      ensurePodCgroup: (pod) => this.cgroups.ensureExists(pod),
      onContainerStarted: (pod, name, id) => this.watchForOom(pod, name, id),
      probeResults: probes && { liveness: (id) => probes.liveness.get(id), startup: (id) => probes.startup.get(id) },
      resize: resize.runtime,
    });
    this.volumes = new VolumeManager({
      rootDir: this.flags.rootDir,
      clock: this.clock,
      log: this.log,
      nodeName: this.nodeName,
      hostIPs: () => this.hostIPs,
      nodeAllocatableMemoryBytes: () => this.admissionNode().allocatable.memory,
      objects: deps.apiClient && this.objects && new ManagedObjectSource(this.objects, new ApiObjectSource({ client: deps.apiClient, clock: this.clock, strategy: this.config.configMapAndSecretChangeDetectionStrategy })),
    });
    this.dns = new DNSConfigurer({
      clusterDNS: this.config.clusterDNS,
      clusterDomain: this.config.clusterDomain,
      resolvConf: this.config.resolvConf,
      nodeIPs: () => this.hostIPs,
      event: (pod, reason, message) => this.events.record(`Pod ${podFullName(pod)}`, 'Warning', reason, message),
    });
    this.syncer = new PodSyncer({
      runtime: this.runtime,
      statusManager: this.statusManager,
      podManager: this.podManager,
      workQueue: this.workQueue,
      cgroups: this.cgroups,
      oom: this.oom,
      clock: this.clock,
      log: this.log,
      rootDir: this.flags.rootDir,
      podLogsDir: this.config.podLogsDir,
      syncFrequencyMs: this.config.syncFrequency,
      hostIPs: () => this.hostIPs,
      volumes: this.volumes,
      dns: this.dns,
      clusterDomain: this.config.clusterDomain,
      recordEvent: (pod, type, reason, message) => this.events.record(`Pod ${podFullName(pod)}`, type, reason, message),
      probeStatus: probes && ((uid) => probes.statusInputs(uid)),
      allocation: resize.syncer,
      ...(this.objects ? { objects: this.objects } : {}),
    });
    const startTracker = podStartTracker(this.metrics, this.clock);
    this.podWorkers = new PodWorkers({
      cache: this.cache,
      clock: this.clock,
      log: this.log,
      hooks: {
        syncPod: async (pod, status) => {
          probes?.addPod(pod);
          startTracker.seen(pod);
          const terminal = await this.syncer.syncPod(pod, status);
          startTracker.observe(pod, this.statusManager.getPodStatus(pod.metadata.uid!));
          return terminal;
        },
        syncTerminatingPod: (pod, status, grace) => {
          probes?.stopLivenessAndStartup(pod);
          return this.syncer.syncTerminatingPod(pod, status, grace);
        },
        syncTerminatedPod: async (pod, status, removed, afterKill) => {
          probes?.removePod(pod);
          await this.syncer.syncTerminatedPod(pod, status, removed, afterKill);
          if (removed) startTracker.forget(pod.metadata.uid!);
          await this.userns?.release(pod.metadata.uid!);
          // Deleted in the API and its containers gone: the final delete (upstream's canBeDeleted).
          this.statusManager.podTerminated(this.podManager.getPodByUID(pod.metadata.uid!) ?? pod);
        },
      },
      onError: (pod) => this.workQueue.enqueue(pod.metadata.uid!, syncErrorBackoffMs()),
      recordEvent: (pod, type, reason, message) => this.events.record(`Pod ${podFullName(pod)}`, type, reason, message),
      previousInstances: (pod) => previousStaticInstances(pod, {
        clock: this.clock,
        knownPods: () => this.plegs?.pleg.knownPods() ?? new Map(),
        relistedAt: () => this.cache.globalTimestamp(),
        isTracked: (uid) => this.podManager.getPodByUID(uid) !== undefined || this.podWorkers.has(uid),
      }),
      onWaiting: (pod, on) => this.setWaitingStatus(pod, on),
      onSyncPodDuration: (type, seconds) => kubeletMetrics(this.metrics).podWorkerDuration.withLabelValues(type).observe(seconds),
    });
    registerKubeletStateMetrics(this.metrics, {
      nodeName: this.nodeName,
      desiredPods: () => this.podManager.getPods(),
      activePods: () => this.activePods(),
      mirrorPodCount: () => (this.mirrorPods ? this.podManager.getPods().filter((p) => isStaticPod(p)).length : 0),
      workingPods: () => this.podWorkers.workingPods(),
    });
    this.syncLoop = new SyncLoop({
      clock: this.clock,
      log: this.log,
      podManager: this.podManager,
      podWorkers: this.podWorkers,
      workQueue: this.workQueue,
      runtimeUp: () => this.runtimeError === undefined,
      onContainerRemoved: (id) => this.oom?.unwatch(id),
      admitPod: (pod, others) => resize.admitNewPod(pod, others),
      podStatus: (uid) => this.statusManager.getPodStatus(uid),
      rejectPod: (pod, reason, message, status) => {
        this.events.record(`Pod ${podFullName(pod)}`, 'Warning', reason, message);
        this.statusManager.setPodStatus(pod, status);
      },
      onPodsChanged: () => void this.mirrorPods?.reconcile(),
    });
  }

  /**
   * A pod held back by a namesake that cannot be stopped (a static pod's previous UID) says so
   * in its status, naming that pod and why; the reason goes once the pod starts.
   */
  private setWaitingStatus(pod: Pod, on: WaitingOn | undefined): void {
    const uid = pod.metadata.uid!;
    // never synced: what its first sync would show with nothing in the runtime (Pending, waiting containers)
    const prev = this.statusManager.getPodStatus(uid) ?? this.syncer.generateStatus(pod, {
      uid, name: pod.metadata.name ?? '', namespace: pod.metadata.namespace ?? '', ips: [], sandboxStatuses: [], containerStatuses: [], timestamp: 0,
    });
    if (prev.phase === 'Failed' || prev.phase === 'Succeeded') return;
    if (!on) {
      if (prev.reason !== PREVIOUS_POD_NOT_TERMINATED) return;
      const { reason: _r, message: _m, ...rest } = prev;
      this.statusManager.setPodStatus(pod, rest);
      return;
    }
    const message = `waiting for the previous pod ${podFullName(on.pod)} (UID ${on.pod.metadata.uid}) to terminate: it cannot be stopped: ${on.error}`;
    this.statusManager.setPodStatus(pod, { ...prev, phase: prev.phase ?? 'Pending', reason: PREVIOUS_POD_NOT_TERMINATED, message });
  }

  /** Where the node's pressure conditions come from (the eviction manager). */
  setNodePressureSource(fn: () => { memory: boolean; disk: boolean; pid: boolean }): void {
    this.nodePressure = fn;
  }

  /** Adds a pod admit handler (the eviction manager's); every handler must admit a new pod. */
  addPodAdmitHandler(h: PodAdmitHandler): void {
    this.admitHandlers.push(h);
  }

  /** upstream canAdmitPod: the admit handlers (eviction's first), then the node's fit. */
  private admitPod(pod: Pod, others: Pod[]): AdmitResult {
    for (const h of this.admitHandlers) {
      const r = h(pod);
      if (!r.admit) return r;
    }
    const sysctls = this.sysctlAdmit(pod);
    if (!sysctls.admit) return sysctls;
    const fit = canAdmitPod(pod, others, this.admissionNode(), isStaticPod(pod));
    if (!fit.admit) return fit;
    return this.appArmorAdmit(pod);
  }

  /** Pods admitted and not finished: not terminal, no termination requested (upstream GetActivePods). */
  activePods(): Pod[] {
    return this.podManager.getPods().filter((p) => {
      const uid = p.metadata.uid!;
      const phase = this.statusManager.getPodStatus(uid)?.phase;
      if (phase === 'Failed' || phase === 'Succeeded') return false;
      return !this.podWorkers.isTerminationRequested(uid);
    });
  }

  /**
   * Evicts a pod (upstream killPodFunc with a status function): Failed with reason Evicted and
   * the message, a DisruptionTarget condition (not for local storage limits), then killed
   * with the grace period given.
   */
  evictPod(pod: Pod, gracePeriodSeconds: number, message: string, opts: { disruptionTarget?: boolean } = {}): void {
    const uid = pod.metadata.uid!;
    const prev = this.statusManager.getPodStatus(uid) ?? pod.status ?? {};
    const now = new Date(this.clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    let conditions = prev.conditions ?? [];
    // upstream gives local storage evictions no DisruptionTarget condition
    if (opts.disruptionTarget !== false) {
      conditions = conditions.filter((c) => c.type !== DisruptionTarget);
      conditions.push({ type: DisruptionTarget, status: 'True', reason: TERMINATION_BY_KUBELET, message, lastTransitionTime: now });
    }
    this.statusManager.setPodStatus(pod, { ...prev, phase: 'Failed', reason: Evicted, message, conditions });
    this.podWorkers.updatePod({ updateType: 'kill', pod, gracePeriodOverride: gracePeriodSeconds });
  }

  /** Every pod source has delivered its first list (GC waits for it before judging pods gone). */
  sourcesReady(): boolean {
    return Boolean(this.podConfig?.seenAllSources());
  }

  /** upstream ShouldPodContentBeRemoved: the pod is gone from every source and its worker is done. */
  podContentRemovable(uid: string): boolean {
    return !this.podManager.getPodByUID(uid) && this.podTerminated(uid);
  }

  /** upstream ShouldPodRuntimeBeRemoved: content removable, or the pod has terminated. */
  podRuntimeRemovable(uid: string): boolean {
    return this.podContentRemovable(uid) || this.podWorkers.isTerminated(uid);
  }

  /** The pod's worker has terminated it (its containers are stopped). */
  podTerminated(uid: string): boolean {
    return this.podWorkers.isTerminated(uid) || !this.podWorkers.has(uid);
  }

  /** When the syncLoop last handled anything. */
  private get lastSyncLoopIteration(): number {
    return this.syncLoop.lastIteration;
  }

  async start(): Promise<void> {
    const { config } = this;
    await this.allocation.load();
    if (this.oom) {
      try {
        const st = await this.oom.start();
        this.log.info('OOM watcher started', { mode: st.mode, sources: st.sources, ebpfUnavailable: st.ebpfUnavailableReason, nativeUnavailable: st.nativeUnavailableReason });
      } catch (err) {
        throw new KubeletStartError(`oomWatcher ${config.oomWatcher}`, { cause: err });
      }
    }
    this.plegs = this.deps.pleg({ runtime: this.runtime, cache: this.cache, emit: (e) => this.syncLoop.enqueuePlegEvent(e) });

    // The actual state of volumes is what is on disk and in the mount table (nothing to replay);
    // housekeeping removes what belongs to no pod once every source was listed.
    const found = await this.volumes.reconstruct().catch((err) => {
      this.log.warn('Reading volumes from disk failed', { err: (err as Error).message });
      return new Map();
    });
    const vols = [...found.values()].flat();
    this.log.info('Reconstructed volumes from disk', { pods: found.size, volumes: vols.length, tmpfs: vols.filter((v) => v.tmpfs).length });

    try {
      this.userns = await UsernsManager.create({
        rootDir: this.flags.rootDir,
        idsPerPod: config.userNamespaces.idsPerPod,
        maxPods: config.maxPods,
        gateEnabled: config.featureGates[USER_NAMESPACES_SUPPORT] ?? true,
        runtimeHandlers: () => this.runtimeHandlers,
        log: this.log,
        ...(this.deps.subIDFiles ? { files: this.deps.subIDFiles } : {}),
      });
    } catch (err) {
      throw new KubeletStartError('create user namespace manager', { cause: err });
    }

    this.running = true;
    this.events.record(`Node ${this.nodeName}`, 'Normal', 'Starting', 'Starting kubelet.');
    await this.updateRuntimeUp();
    this.nodeAgent?.start();
    this.every('runtime-check', RUNTIME_CHECK_PERIOD_MS, () => this.updateRuntimeUp());
    this.plegs.pleg.start();
    this.logManager = this.deps.containerLogManager?.(() => this.runningContainerIds());
    this.logManager?.start();

    this.podConfig = this.deps.podSources({
      onUpdate: (u) => this.syncLoop.handlePodUpdate(u),
      onError: (e) => this.handleManifestError(e),
      onApiPodError: (e) => this.handleManifestError(e),
    });
    if (config.staticPodPath) this.podConfig.startFileSource(config.staticPodPath, config.fileCheckFrequency);
    if (config.staticPodURL) this.podConfig.startUrlSource(config.staticPodURL, config.httpCheckFrequency, config.staticPodURLHeader);
    if (this.deps.apiClient) {
      if (!this.podConfig.startApiSource) this.log.warn('The pod sources given cannot watch the API server: pods bound to this node are not run');
      else this.podConfig.startApiSource(this.deps.apiClient, { onMirrorPods: (pods) => {
          this.mirrorPods?.setMirrorPods(pods);
          this.statusManager.mirrorPodsChanged();
        }, logger: this.log });
    }

    // The syncLoop's tick is what keeps the process alive until it is stopped (as upstream's
    // syncLoop blocks main); every other timer is unref'd.
    this.every('sync', SYNC_TICK_MS, () => this.syncLoop.handleSyncTick(), { keepAlive: true });
    this.every('housekeeping', HOUSEKEEPING_PERIOD_MS, () => this.housekeeping());
    if (config.resolvConf) {
      // upstream checks the host resolv.conf against the resolver's limits at start and every 30 s
      void this.checkResolvConf();
      this.every('resolv-conf-check', CHECK_RESOLV_CONF_PERIOD_MS, () => this.checkResolvConf());
    }
    this.syncLoop.lastIteration = this.clock.now();
    this.log.info('Started kubelet', { node: this.nodeName, hostIPs: this.hostIPs, staticPodPath: config.staticPodPath });
  }

  /**
   * Stops the agent within a bounded time; running pods are left running, as upstream does on
   * exit. In-flight work (kills, hooks, pulls, CRI calls) is abandoned, never waited out.
   */
  stop(timeoutMs = STOP_TIMEOUT_MS): Promise<void> {
    this.stopping ??= this.doStop(timeoutMs);
    return this.stopping;
  }

  private async doStop(timeoutMs: number): Promise<void> {
    this.running = false;
    for (const t of this.timers.values()) t.cancel();
    this.timers.clear();
    // Bounded on its own: calls to a hung API server are aborted, not waited out.
    const agentStopped = this.nodeAgent?.stop();
    this.eventSink?.stop();
    this.podWorkers.stop();
    this.statusManager.stop();
    this.objects?.stop();
    this.plegs?.close();
    this.oom?.stop();
    this.logManager?.stop();
    this.probes?.stop();
    const runnerClosed = this.probeRunner?.close().catch((err) => this.log.warn('Closing the probe runner failed', { err: (err as Error).message }));
    // Hooks abort on the runtime's signal; CRI calls in flight (StopContainer, PullImage, ...) are cancelled.
    this.runtime.stop();
    this.cri.close();
    const sources = this.podConfig?.stop().catch((err) => this.log.warn('Stopping pod sources failed', { err: (err as Error).message }));
    const done = Promise.all([sources, runnerClosed, agentStopped, this.podWorkers.idle()]).then(() => true);
    let timer: Timer | undefined;
    const expired = new Promise<boolean>((resolve) => { timer = this.clock.setTimeout(() => resolve(false), timeoutMs); });
    const finished = await Promise.race([done, expired]);
    timer?.cancel();
    if (!finished) this.log.warn('Pod workers still busy at shutdown; abandoning them (pods keep running)', { timeoutMs });
    this.deps.apiClient?.close();
  }

  /** Live periodic timers (one per task; bounded however long the kubelet runs). */
  liveTimers(): number {
    return this.timers.size;
  }

  private handleManifestError(e: ManifestError | ApiPodError): void {
    this.manifestErrors.push(e);
    if (this.manifestErrors.length > 100) this.manifestErrors.shift();
    this.log.error('Invalid pod manifest; skipping it', { location: e.location, field: e.field, err: e.message });
  }

  private async housekeeping(): Promise<void> {
    this.syncLoop.lastIteration = this.clock.now();
    void this.mirrorPods?.reconcile();
    this.probes?.cleanupPods(this.podManager.uids());
    if (this.podConfig?.seenAllSources()) this.allocation.removeOrphanedPods(new Set(this.podManager.uids()));
    this.runtimeClasses?.prune();
    await this.housekeepingPass();
    // upstream HandlePodCleanups: ranges of pods neither desired nor in the runtime are freed
    if (this.userns && this.podConfig?.seenAllSources() && this.runtimeError === undefined) {
      const known = [...this.podManager.uids(), ...this.plegs!.pleg.knownPods().keys()];
      await this.userns.cleanupOrphanedPodUsernsAllocations(known).catch((err) => this.log.error('Failed cleaning up orphaned pod user namespaces allocations', { err: (err as Error).message }));
    }
  }

  /**
   * upstream LookupRuntimeHandler. Standalone, upstream has no RuntimeClass manager and runs the
   * pod with the default handler; a runtime class is a security setting (it may name a sandboxed
   * runtime), so here a pod naming one cannot start without an API server to resolve it.
   */
  private async runtimeHandlerFor(pod: Pod): Promise<string> {
    const name = pod.spec.runtimeClassName;
    if (!name) return '';
    if (!this.runtimeClasses) {
      throw new RuntimeClassError('ERR_RUNTIME_CLASS_LOOKUP', `failed to lookup RuntimeClass ${name}: RuntimeClass cannot be resolved without an API server (standalone mode)`);
    }
    const handler = await this.runtimeClasses.lookupRuntimeHandler(name);
    if (handler !== '') this.log.v(2).info('Running pod with runtime handler', { pod: podFullName(pod), runtimeHandler: handler });
    return handler;
  }

  private housekeepingPass(): Promise<void> {
    return handleHousekeeping({
      log: this.log,
      podManager: this.podManager,
      podWorkers: this.podWorkers,
      pleg: this.plegs!.pleg,
      cgroups: this.cgroups,
      statusManager: this.statusManager,
      runtime: this.runtime,
      oom: this.oom,
      caches: [this.syncer.reasonCache, this.syncer.podDirsMade],
      volumes: this.volumes,
      ready: () => Boolean(this.podConfig?.seenAllSources()) && this.runtimeError === undefined,
      podLogsDir: this.config.podLogsDir,
      clock: this.clock,
    });
  }

  private async checkResolvConf(): Promise<void> {
    const warning = await this.dns.checkLimitsForResolvConf();
    if (warning) this.events.record(`Node ${this.nodeName}`, 'Warning', 'CheckLimitsForResolvConf', warning);
  }

  private async updateRuntimeUp(): Promise<void> {
    try {
      const st = await this.cri.status();
      this.nodeAgent?.observeRuntimeStatus(st.status?.conditions ?? []);
      const ready = st.status?.conditions.find((c) => c.type === 'RuntimeReady');
      const wasDown = this.runtimeError !== undefined;
      if (!ready?.status) {
        this.runtimeError = `container runtime not ready: RuntimeReady=false reason:${ready?.reason ?? ''} message:${ready?.message ?? ''}`;
      } else {
        this.runtimeError = undefined;
        this.runtimeHandlers = toRuntimeHandlerInfo(st.runtime_handlers);
        this.runtimeFeatures = st.features ? { supplementalGroupsPolicy: st.features.supplemental_groups_policy } : null;
        if (wasDown) this.log.info('Container runtime is up');
      }
    } catch (err) {
      if (!this.running) return;
      this.nodeAgent?.observeRuntimeStatus(err as Error);
      if (this.runtimeError === undefined) this.log.error('Container runtime is down', { err: (err as Error).message });
      this.runtimeError = `container runtime is down: ${(err as Error).message}`;
    }
  }

  private watchForOom(pod: Pod, containerName: string, containerID: string): void {
    if (!this.oom) return;
    const podPath = this.cgroups.podCgroupName(pod);
    const cgroupName = this.cgroups.containerCgroupName?.(podPath, containerID) ?? `${podPath}/${containerID}`;
    void this.oom.watchContainer(pod.metadata.uid!, containerName, containerID, cgroupName, { podName: pod.metadata.name, podNamespace: pod.metadata.namespace })
      .then((r) => { if (r.error) this.log.v(2).info('OOM watch not set', { pod: podFullName(pod), container: containerName, err: r.error }); });
  }

  private handleOomEvent(e: OomEvent): void {
    const rec = oomEventRecord(e);
    if (!rec) return;
    if (rec.object === 'node') {
      this.events.record(`Node ${this.nodeName}`, rec.type, rec.reason, rec.message);
    } else {
      const pod = rec.podUID ? this.podManager.getPodByUID(rec.podUID) : undefined;
      this.events.record(pod ? `Pod ${podFullName(pod)}` : `Pod ${e.podNamespace ?? ''}/${e.podName ?? rec.podUID}`, rec.type, rec.reason, rec.message);
      // Let the pod's worker see the container's end promptly.
      if (pod) this.podWorkers.updatePod({ updateType: 'sync', pod });
    }
  }

  /**
   * The node as admission sees it: the API's Node as the node agent last saw it (labels,
   * taints, allocatable), else what this machine has (maxPods, its CPUs and memory, upstream's
   * default labels).
   */
  admissionNode(): AdmissionNode {
    const n = this.nodeAgent?.node() as { metadata?: { labels?: Record<string, string> }; spec?: { taints?: Taint[] }; status?: { allocatable?: Record<string, string | number> } } | undefined;
    const alloc = n?.status?.allocatable ?? {};
    const parse = (k: string, milli = false): number | undefined => {
      if (alloc[k] === undefined) return undefined;
      try { const q = parseQuantity(alloc[k]!); return milli ? q.milliValue() : q.value(); } catch { return undefined; }
    };
    const ephemeral = parse('ephemeral-storage');
    return {
      name: this.nodeName,
      labels: n?.metadata?.labels ?? { 'kubernetes.io/hostname': this.nodeName, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': goArch() },
      taints: n?.spec?.taints ?? [],
      allocatable: {
        pods: parse('pods') ?? this.config.maxPods,
        cpu: parse('cpu', true) ?? cpus().length * 1000,
        memory: parse('memory') ?? this.memoryCapacityBytes,
        ...(ephemeral !== undefined ? { 'ephemeral-storage': ephemeral } : {}),
      },
    };
  }

  /** The involvedObject of `Node n` or `Pod ns/name` (a pod the kubelet no longer knows: by name only). */
  private eventRef(object: string): ObjectReference | undefined {
    const sp = object.indexOf(' ');
    const kind = object.slice(0, sp);
    const id = object.slice(sp + 1);
    // upstream's nodeRef: the node's name stands in for its UID.
    if (kind === 'Node') return { kind: 'Node', name: id, uid: id };
    if (kind !== 'Pod') return undefined;
    const pod = this.podManager.getPodByFullName(id);
    const slash = id.indexOf('/');
    const ref: ObjectReference = { kind: 'Pod', apiVersion: 'v1', namespace: pod?.metadata.namespace ?? id.slice(0, slash), name: pod?.metadata.name ?? id.slice(slash + 1) };
    if (pod?.metadata.uid) ref.uid = pod.metadata.uid;
    return ref;
  }

  // ---- what the servers read ----

  /**
   * The running containers as the PLEG's last successful relist saw them; undefined when that
   * relist is older than the relist threshold (the log manager then lists the runtime itself).
   */
  private runningContainerIds(): string[] | undefined {
    const pleg = this.plegs?.pleg;
    const seen = pleg?.lastSeen() ?? 0;
    if (!pleg || seen === 0 || this.clock.now() - seen > GENERIC_RELIST_THRESHOLD_MS) return undefined;
    const ids: string[] = [];
    for (const p of pleg.knownPods().values()) for (const c of p.containers) if (c.state === 'CONTAINER_RUNNING') ids.push(c.id);
    return ids;
  }

  /** The desired pods with their latest status (the read-only /pods endpoint). */
  getPods(): Pod[] {
    return this.podManager.getPods().map((p) => {
      const status = this.statusManager.getPodStatus(p.metadata.uid!);
      return status ? { ...p, status } : p;
    });
  }

  /** The pods the runtime runs (/runningpods/): upstream's ToAPIPod of the running pods in the cache. */
  runningPods(): Pod[] {
    const pods: Pod[] = [];
    for (const uid of this.cache.uids()) {
      const s = this.cache.get(uid).status;
      const running = s?.containerStatuses.filter((c) => c.state === 'running') ?? [];
      if (!s || (running.length === 0 && !s.sandboxStatuses.some((b) => b.state === 'ready'))) continue;
      pods.push({
        metadata: { name: s.name, namespace: s.namespace, uid: s.uid },
        spec: { containers: running.map((c) => ({ name: c.name, image: c.image })) },
      } as Pod);
    }
    return pods;
  }

  /** The pod's cgroup name (`/kubepods/<qos>/pod<uid>`); a container's is `<that>/<container id>`. */
  podCgroupName(pod: Pod): string {
    return this.cgroups.podCgroupName(pod);
  }

  /** A container's cgroup under its pod's, as the cgroup driver names it. */
  containerCgroupName(podPath: string, containerID: string): string {
    return this.cgroups.containerCgroupName?.(podPath, containerID) ?? `${podPath}/${containerID}`;
  }

  /** The kubepods cgroup ("<cgroupRoot>/kubepods", or "/kubepods.slice" with systemd). */
  podsCgroupName(): string {
    return this.cgroups.podsCgroupName?.() ?? `${(this.config.cgroupRoot ?? '').replace(/\/+$/, '')}/kubepods`;
  }

  healthChecks(): HealthCheck[] {
    const now = this.clock.now();
    const syncloopMax = Math.max(2 * this.config.syncFrequency, 5 * 60_000);
    const entered = this.lastSyncLoopIteration;
    const sinceLoop = now - entered;
    const pleg = this.plegs?.pleg.healthy() ?? { ok: false, message: 'pleg has not started' };
    // upstream: a loop never entered yet passes; only a loop not entered for too long fails.
    // Once stopped, the loop never runs again: that fails at once.
    const stopped = this.stopping !== undefined;
    const stale = entered !== 0 && sinceLoop > syncloopMax;
    return [
      { name: 'ping', ok: true, message: 'ok' },
      {
        name: 'syncloop',
        ok: !stopped && !stale,
        message: stopped ? 'sync loop is not running' : stale ? `sync Loop took longer than expected (${Math.round(sinceLoop / 1000)}s)` : 'ok',
      },
      { name: 'pleg', ok: pleg.ok, message: pleg.message },
      { name: 'runtime', ok: this.runtimeError === undefined, message: this.runtimeError ?? 'ok' },
    ];
  }

  private every(name: string, ms: number, fn: () => void | Promise<void>, opts: { keepAlive?: boolean } = {}): void {
    const arm = (): void => {
      const t = this.clock.setTimeout(tick, ms);
      if (opts.keepAlive) t.ref?.();
      this.timers.set(name, t);
    };
    const tick = (): void => {
      this.timers.delete(name);
      if (!this.running) return;
      void Promise.resolve()
        .then(fn)
        .catch((err) => this.log.error('Periodic task failed', { task: name, err: (err as Error).message }))
        .finally(() => { if (this.running) arm(); });
    };
    arm();
  }
}

/** Go's GOARCH for this machine (the kubernetes.io/arch label). */
function goArch(): string {
  const a = arch();
  return a === 'x64' ? 'amd64' : a === 'ia32' ? '386' : a;
}

/** upstream: the node name is --hostname-override or the host name, lower-cased. */
export function nodeNameFrom(override: string | undefined): string {
  return (override || hostname()).trim().toLowerCase();
}
