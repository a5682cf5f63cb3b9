// The Kubelet: wires the subsystems and runs the syncLoop on the main thread. Pod sources,
// PLEG events, the resync tick and housekeeping all arrive here and are dispatched to the
// per-pod workers; nothing in the loop itself waits on I/O.

import { mkdir, readFile, rm } from 'node:fs/promises';
import { hostname, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import type { Pod, PodStatus } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { KubeletConfig, KubeletFlags } from '../config/index.js';
import { CriClient } from '../runtime/cri-client.js';
import { RuntimeManager } from '../runtime/runtime-manager.js';
import type { RuntimePodStatus, ContainerStartFailure } from '../runtime/types.js';
import { ImageManager } from '../images/image-manager.js';
import { PodCache } from '../pleg/cache.js';
import { createPLEG, isSyncPodWorthy, type Pleg, type PodLifecycleEvent } from '../pleg/index.js';
import { createPlegMetrics } from '../pleg/metrics.js';
import { PodConfig, type PodUpdate } from '../sources/pod-config.js';
import type { ManifestError } from '../sources/errors.js';
import { generateAPIPodStatus } from '../status/generate.js';
import { StatusManager } from '../status/status-manager.js';
import { discoverCgroupMounts, type CgroupMounts } from '../stats/cgroup-paths.js';
import { PodContainerManager } from '../cm/pod-container-manager.js';
import { evictableContainers } from '../gc/container-gc.js';
import { OomWatcher, crossCheckTerminatedReason, oomEventRecord, type OomEvent } from '../oom/index.js';
import { cgroupRefFor } from '../stats/cgroup-paths.js';
import { Registry } from '../metrics/registry.js';
import { EventRecorder } from './event-recorder.js';
import { PodManager } from './pod-manager.js';
import { PodWorkers } from './pod-workers.js';
import { WorkQueue } from './work-queue.js';
import { realClock, type Clock, type Timer } from '../util/clock.js';
import { rootLogger, type Logger } from '../util/log.js';
import { podDir } from '../util/safe-path.js';
import { buildPodLogsDirectory } from '../runtime/sandbox-config.js';

/** upstream: housekeepingPeriod. */
const HOUSEKEEPING_PERIOD_MS = 2_000;
/** upstream: plegChannelCapacity. */
const PLEG_CHANNEL_CAPACITY = 1000;
/** upstream: backOffPeriod for a pod whose sync failed. */
const SYNC_ERROR_BACKOFF_MS = 10_000;
const RUNTIME_CHECK_PERIOD_MS = 5_000;

export interface KubeletOptions {
  config: KubeletConfig;
  flags: KubeletFlags;
  clock?: Clock;
  log?: Logger;
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
  readonly cri: CriClient;
  readonly podManager = new PodManager();
  readonly statusManager = new StatusManager();
  readonly cache = new PodCache();
  readonly workQueue: WorkQueue;
  /** The kubelet's Prometheus registry (served at /metrics). */
  readonly metrics = new Registry();
  readonly events: EventRecorder;
  hostIPs: string[] = [];
  memoryCapacityBytes = 0;

  private runtime!: RuntimeManager;
  private plegs!: Pleg;
  private podWorkers!: PodWorkers;
  private podConfig?: PodConfig;
  private cgroups!: PodContainerManager;
  private oom?: OomWatcher;
  /** The node's cgroup mounts (known after start()). */
  mounts!: CgroupMounts;
  private readonly reasonCache = new Map<string, Map<string, ContainerStartFailure>>();
  private readonly plegChannel: PodLifecycleEvent[] = [];
  private plegDrainScheduled = false;
  private timers: Timer[] = [];
  private running = false;
  private lastSyncLoopIteration = 0;
  private runtimeError: string | undefined = 'container runtime status check may not have completed yet';
  readonly manifestErrors: ManifestError[] = [];

  constructor(opts: KubeletOptions) {
    this.config = opts.config;
    this.flags = opts.flags;
    this.clock = opts.clock ?? realClock;
    this.log = opts.log ?? rootLogger;
    this.nodeName = nodeNameFrom(opts.flags.hostnameOverride);
    this.workQueue = new WorkQueue(this.clock);
    this.events = new EventRecorder(this.log, () => this.clock.now());
    this.cri = new CriClient({
      runtimeEndpoint: opts.config.containerRuntimeEndpoint,
      imageEndpoint: opts.config.imageServiceEndpoint || undefined,
      timeoutMs: opts.config.runtimeRequestTimeout,
    });
  }

  async start(): Promise<void> {
    const { config } = this;
    this.hostIPs = this.flags.nodeIP?.length ? [...this.flags.nodeIP] : defaultHostIPs();
    this.memoryCapacityBytes = await readMemoryCapacity();
    this.mounts = await discoverCgroupMounts();
    this.cgroups = new PodContainerManager({ mounts: this.mounts, cgroupRoot: config.cgroupRoot ?? '', log: this.log });
    await mkdir(join(this.flags.rootDir, 'pods'), { recursive: true });

    this.oom = new OomWatcher({ mode: config.oomWatcher, registry: this.metrics, logger: this.log, clock: this.clock, onEvent: (e) => this.handleOomEvent(e) });
    try {
      const st = await this.oom.start();
      this.log.info('OOM watcher started', { mode: st.mode, sources: st.sources, ebpfUnavailable: st.ebpfUnavailableReason, nativeUnavailable: st.nativeUnavailableReason });
    } catch (err) {
      throw new Error(`oomWatcher ${config.oomWatcher}: ${(err as Error).message}`);
    }

    const images = new ImageManager({
      cri: this.cri,
      clock: this.clock,
      log: this.log,
      serializeImagePulls: config.serializeImagePulls,
      maxParallelImagePulls: config.maxParallelImagePulls ?? undefined,
    });
    this.runtime = new RuntimeManager({
      cri: this.cri,
      images,
      clock: this.clock,
      log: this.log,
      nodeName: this.nodeName,
      hostIPs: () => this.hostIPs,
      memoryCapacityBytes: this.memoryCapacityBytes,
      podLogsDir: config.podLogsDir,
      rootDir: this.flags.rootDir,
      ensurePodCgroup: (pod) => this.cgroups.ensureExists(pod),
      onContainerStarted: (pod, name, id) => this.watchForOom(pod, name, id),
    });
    this.podWorkers = new PodWorkers({
      cache: this.cache,
      clock: this.clock,
      log: this.log,
      hooks: {
        syncPod: (pod, status) => this.syncPod(pod, status),
        syncTerminatingPod: (pod, status, grace) => this.syncTerminatingPod(pod, status, grace),
        syncTerminatedPod: (pod, status, removed) => this.syncTerminatedPod(pod, status, removed),
      },
      onError: (pod) => this.workQueue.enqueue(pod.metadata.uid!, SYNC_ERROR_BACKOFF_MS),
    });
    this.plegs = createPLEG({
      runtimeEndpoint: config.containerRuntimeEndpoint,
      timeoutMs: config.runtimeRequestTimeout,
      runtime: this.runtime,
      cache: this.cache,
      clock: this.clock,
      log: this.log,
      emit: (e) => this.enqueuePlegEvent(e),
      metrics: createPlegMetrics(this.metrics),
      featureGates: config.featureGates,
    });

    this.running = true;
    await this.updateRuntimeUp();
    this.every(RUNTIME_CHECK_PERIOD_MS, () => this.updateRuntimeUp());
    this.plegs.pleg.start();

    this.podConfig = new PodConfig({
      nodeName: this.nodeName,
      onUpdate: (u) => this.handlePodUpdate(u),
      onError: (e) => this.handleManifestError(e),
      log: (msg) => this.log.info(msg),
    });
    if (config.staticPodPath) this.podConfig.startFileSource(config.staticPodPath, config.fileCheckFrequency);
    if (config.staticPodURL) this.podConfig.startUrlSource(config.staticPodURL, config.httpCheckFrequency, config.staticPodURLHeader);

    this.every(1_000, () => this.handleSyncTick());
    this.every(HOUSEKEEPING_PERIOD_MS, () => this.handleHousekeeping());
    this.lastSyncLoopIteration = this.clock.now();
    this.log.info('Started kubelet', { node: this.nodeName, hostIPs: this.hostIPs, staticPodPath: config.staticPodPath });
  }

  /** Stops the agent; running pods are left running, as upstream does on exit. */
  async stop(): Promise<void> {
    this.running = false;
    for (const t of this.timers) t.cancel();
    this.timers = [];
    this.plegs?.close();
    this.oom?.stop();
    await this.podConfig?.stop();
    await this.podWorkers?.idle();
    this.cri.close();
  }

  // ---- the syncLoop's handlers ----

  private handlePodUpdate(u: PodUpdate): void {
    this.lastSyncLoopIteration = this.clock.now();
    for (const pod of u.pods) {
      switch (u.op) {
        case 'ADD':
          this.log.info('SyncLoop ADD', { source: u.source, pod: podFullName(pod), podUID: pod.metadata.uid });
          this.podManager.addPod(pod);
          this.podWorkers.updatePod({ updateType: 'create', pod });
          break;
        case 'UPDATE':
          this.log.info('SyncLoop UPDATE', { source: u.source, pod: podFullName(pod), podUID: pod.metadata.uid });
          this.podManager.updatePod(pod);
          this.podWorkers.updatePod({ updateType: 'update', pod });
          break;
        case 'REMOVE':
        case 'DELETE':
          this.log.info(`SyncLoop ${u.op}`, { source: u.source, pod: podFullName(pod), podUID: pod.metadata.uid });
          this.podManager.removePod(pod);
          this.workQueue.forget(pod.metadata.uid!);
          this.podWorkers.updatePod({ updateType: 'kill', pod, removed: true });
          break;
        case 'RECONCILE':
          this.podManager.updatePod(pod);
          break;
      }
    }
  }

  private handleManifestError(e: ManifestError): void {
    this.manifestErrors.push(e);
    if (this.manifestErrors.length > 100) this.manifestErrors.shift();
    this.log.error('Invalid pod manifest; skipping it', { location: e.location, field: e.field, err: e.message });
  }

  private enqueuePlegEvent(e: PodLifecycleEvent): boolean {
    if (this.plegChannel.length >= PLEG_CHANNEL_CAPACITY) return false;
    this.plegChannel.push(e);
    if (!this.plegDrainScheduled) {
      this.plegDrainScheduled = true;
      setImmediate(() => this.drainPlegChannel());
    }
    return true;
  }

  private drainPlegChannel(): void {
    this.plegDrainScheduled = false;
    this.lastSyncLoopIteration = this.clock.now();
    const events = this.plegChannel.splice(0);
    const seen = new Set<string>();
    for (const e of events) {
      if (!isSyncPodWorthy(e) || seen.has(e.id)) continue;
      seen.add(e.id);
      const pod = this.podManager.getPodByUID(e.id);
      if (!pod) continue;
      this.log.v(2).info('SyncLoop (PLEG): event for pod', { pod: podFullName(pod), event: e });
      if (this.runtimeError === undefined) this.podWorkers.updatePod({ updateType: 'sync', pod });
    }
  }

  private handleSyncTick(): void {
    this.lastSyncLoopIteration = this.clock.now();
    if (this.runtimeError !== undefined) return;
    for (const uid of this.workQueue.getWork()) {
      const pod = this.podManager.getPodByUID(uid);
      if (pod) this.podWorkers.updatePod({ updateType: 'sync', pod });
    }
  }

  private async handleHousekeeping(): Promise<void> {
    this.lastSyncLoopIteration = this.clock.now();
    if (!this.podConfig?.seenAllSources() || this.runtimeError !== undefined) return;
    const desired = this.podManager.uids();
    // Pods the runtime runs that no source wants (deleted while we were down, or orphans).
    for (const [uid, rp] of this.plegs.pleg.knownPods()) {
      if (desired.has(uid) || this.podWorkers.has(uid)) continue;
      this.log.info('Cleaning up orphaned pod', { pod: `${rp.namespace}/${rp.name}`, podUID: uid });
      const pod: Pod = { metadata: { uid, name: rp.name, namespace: rp.namespace }, spec: { containers: [] } };
      this.podWorkers.updatePod({ updateType: 'kill', pod, removed: true });
    }
    // Pod cgroups nobody owns.
    try {
      const known = this.plegs.pleg.knownPods();
      for (const [uid, name] of await this.cgroups.listPodCgroups()) {
        if (desired.has(uid) || this.podWorkers.has(uid) || known.has(uid)) continue;
        this.log.info('Removing orphaned pod cgroup', { cgroup: name });
        await this.cgroups.remove(name).catch((err) => this.log.warn('Failed to remove orphaned pod cgroup', { cgroup: name, err: (err as Error).message }));
      }
    } catch (err) {
      this.log.warn('Housekeeping: listing pod cgroups failed', { err: (err as Error).message });
    }
    this.podWorkers.forgetFinished();
    const live = new Set([...desired, ...this.podWorkers.knownPods()]);
    this.statusManager.removeOrphanedStatuses(live);
    for (const uid of this.reasonCache.keys()) if (!live.has(uid)) this.reasonCache.delete(uid);
  }

  private async updateRuntimeUp(): Promise<void> {
    try {
      const st = await this.cri.status();
      const ready = st.status?.conditions.find((c) => c.type === 'RuntimeReady');
      const wasDown = this.runtimeError !== undefined;
      if (!ready?.status) {
        this.runtimeError = `container runtime not ready: RuntimeReady=false reason:${ready?.reason ?? ''} message:${ready?.message ?? ''}`;
      } else {
        this.runtimeError = undefined;
        if (wasDown) this.log.info('Container runtime is up');
      }
    } catch (err) {
      if (this.runtimeError === undefined) this.log.error('Container runtime is down', { err: (err as Error).message });
      this.runtimeError = `container runtime is down: ${(err as Error).message}`;
    }
  }

  // ---- the pod workers' hooks ----

  private generateStatus(pod: Pod, rs: RuntimePodStatus, podIsTerminal = false): PodStatus {
    return generateAPIPodStatus({
      pod,
      runtime: rs.sandboxStatuses.length || rs.containerStatuses.length ? this.withOomReasons(rs) : undefined,
      previous: this.statusManager.getPodStatus(pod.metadata.uid!),
      startFailures: this.reasonCache.get(pod.metadata.uid!),
      hostIPs: this.hostIPs,
      now: this.clock.now(),
      podIsTerminal,
    });
  }

  /** Exit reasons cross-checked with the OOM watcher: a kill it saw makes an exit-137 `OOMKilled`. */
  private withOomReasons(rs: RuntimePodStatus): RuntimePodStatus {
    if (!this.oom) return rs;
    let changed = false;
    const containerStatuses = rs.containerStatuses.map((c) => {
      if (c.state !== 'exited') return c;
      const { reason } = crossCheckTerminatedReason(c.reason, c.exitCode, this.oom!.oomKills(c.id));
      if (reason === c.reason) return c;
      changed = true;
      return { ...c, reason };
    });
    return changed ? { ...rs, containerStatuses } : rs;
  }

  private watchForOom(pod: Pod, containerName: string, containerID: string): void {
    if (!this.oom) return;
    const ref = cgroupRefFor(this.mounts, `${this.cgroups.podCgroupName(pod)}/${containerID}`);
    void this.oom.watchContainer(pod.metadata.uid!, containerName, containerID, ref, { podName: pod.metadata.name, podNamespace: pod.metadata.namespace })
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

  /** upstream's Kubelet.SyncPod: status first, then make the runtime match the spec. */
  private async syncPod(pod: Pod, rs: RuntimePodStatus): Promise<boolean> {
    const uid = pod.metadata.uid!;
    let status = this.generateStatus(pod, rs);
    this.statusManager.setPodStatus(pod, status);
    if (status.phase === 'Succeeded' || status.phase === 'Failed') return true;

    const dir = podDir(this.flags.rootDir, uid);
    await mkdir(join(dir, 'containers'), { recursive: true });
    await mkdir(join(dir, 'volumes'), { recursive: true });
    const result = await this.runtime.syncPod(pod, rs);
    this.reasonCache.set(uid, result.startFailures);
    await this.collectDeadContainers(pod, rs);
    if (result.startFailures.size) {
      status = this.generateStatus(pod, rs);
      this.statusManager.setPodStatus(pod, status);
    }
    const delay = result.errors.length ? SYNC_ERROR_BACKOFF_MS : (result.requeueAfterMs ?? this.config.syncFrequency);
    this.workQueue.enqueue(uid, Math.min(delay, this.config.syncFrequency));
    if (result.errors.length) throw new Error(result.errors.join('; '));
    return false;
  }

  /** Removes dead attempts beyond the newest one per container (upstream's MaxPerPodContainer). */
  private async collectDeadContainers(pod: Pod, rs: RuntimePodStatus): Promise<void> {
    for (const c of evictableContainers(rs)) {
      try {
        await this.cri.removeContainer(c.id);
        this.oom?.unwatch(c.id);
      } catch (err) {
        this.log.warn('Failed to remove dead container', { pod: podFullName(pod), container: c.name, containerID: c.id, err: (err as Error).message });
      }
    }
  }

  private async syncTerminatingPod(pod: Pod, rs: RuntimePodStatus, gracePeriodOverride: number | undefined): Promise<void> {
    this.log.info('Terminating pod', { pod: podFullName(pod), podUID: pod.metadata.uid });
    await this.runtime.killPod(pod, rs, gracePeriodOverride);
    const fresh = await this.runtime.getPodStatus(pod.metadata.uid!, rs.name || pod.metadata.name!, rs.namespace || pod.metadata.namespace!);
    if (this.podManager.getPodByUID(pod.metadata.uid!)) {
      this.statusManager.setPodStatus(pod, this.generateStatus(pod, fresh, true));
    }
  }

  private async syncTerminatedPod(pod: Pod, rs: RuntimePodStatus, removed: boolean): Promise<void> {
    const uid = pod.metadata.uid!;
    const fresh = await this.runtime.getPodStatus(uid, rs.name || pod.metadata.name!, rs.namespace || pod.metadata.namespace!);
    if (fresh.containerStatuses.some((c) => c.state === 'running')) {
      throw new Error('pod still has running containers after termination');
    }
    if (removed) {
      await this.runtime.removePod(fresh);
      for (const c of fresh.containerStatuses) this.oom?.unwatch(c.id);
      this.statusManager.deletePodStatus(uid);
      this.reasonCache.delete(uid);
      await rm(podDir(this.flags.rootDir, uid), { recursive: true, force: true });
      const ns = fresh.namespace || pod.metadata.namespace || '';
      const name = fresh.name || pod.metadata.name || '';
      await rm(buildPodLogsDirectory(this.config.podLogsDir, ns, name, uid), { recursive: true, force: true });
    }
    // Remove the pod cgroup wherever it is (the QoS class may be unknown for an orphan).
    for (const [cgUID, name] of await this.cgroups.listPodCgroups()) {
      if (cgUID === uid) await this.cgroups.remove(name);
    }
    this.log.info('Pod terminated and cleaned up', { pod: podFullName(pod), podUID: uid, removed });
  }

  // ---- what the servers read ----

  /** The desired pods with their latest status (the read-only /pods endpoint). */
  getPods(): Pod[] {
    return this.podManager.getPods().map((p) => {
      const status = this.statusManager.getPodStatus(p.metadata.uid!);
      return status ? { ...p, status } : p;
    });
  }

  /** The pod's cgroup name (`/kubepods/<qos>/pod<uid>`); a container's is `<that>/<container id>`. */
  podCgroupName(pod: Pod): string {
    return this.cgroups.podCgroupName(pod);
  }

  healthChecks(): HealthCheck[] {
    const now = this.clock.now();
    const syncloopMax = Math.max(2 * this.config.syncFrequency, 5 * 60_000);
    const sinceLoop = now - this.lastSyncLoopIteration;
    const pleg = this.plegs?.pleg.healthy() ?? { ok: false, message: 'pleg has not started' };
    return [
      { name: 'ping', ok: true, message: 'ok' },
      {
        name: 'syncloop',
        ok: this.running && sinceLoop <= syncloopMax,
        message: this.running ? (sinceLoop <= syncloopMax ? 'ok' : `sync Loop took longer than expected (${Math.round(sinceLoop / 1000)}s)`) : 'sync loop is not running',
      },
      { name: 'pleg', ok: pleg.ok, message: pleg.message },
      { name: 'runtime', ok: this.runtimeError === undefined, message: this.runtimeError ?? 'ok' },
    ];
  }

  private every(ms: number, fn: () => void | Promise<void>): void {
    const tick = (): void => {
      if (!this.running) return;
      void Promise.resolve()
        .then(fn)
        .catch((err) => this.log.error('Periodic task failed', { err: (err as Error).message }))
        .finally(() => { if (this.running) this.timers.push(this.clock.setTimeout(tick, ms)); });
    };
    this.timers.push(this.clock.setTimeout(tick, ms));
  }
}

/** upstream: the node name is --hostname-override or the host name, lower-cased. */
function nodeNameFrom(override: string | undefined): string {
  return (override || hostname()).trim().toLowerCase();
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
