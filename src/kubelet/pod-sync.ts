// The pod workers' hooks (upstream: Kubelet.SyncPod, SyncTerminatingPod, SyncTerminatedPod):
// status first, then make the runtime match the spec; on termination kill the pod and, once it
// is removed from its source, clean up everything it left (containers, dirs, logs, cgroup).

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod, PodStatus } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { KubeletRuntime, ContainerStartFailure, PodSyncExtras, RuntimePodStatus } from '../runtime/types.js';
import { buildPodLogsDirectory } from '../runtime/sandbox-config.js';
import { withTerminationMessages } from '../runtime/termination-message.js';
import type { DNSConfigurer } from '../network/dns.js';
import type { VolumeManager } from '../volumemanager/volume-manager.js';
import { podContainerMounts } from '../volumemanager/pod-mounts.js';
import { jitter } from '../util/backoff.js';
import { isKubeletError } from '../util/errors.js';
import { generateAPIPodStatus } from '../status/generate.js';
import type { StatusManager } from '../status/status-manager.js';
import { evictableContainers } from '../gc/container-gc.js';
import { crossCheckTerminatedReason } from '../oom/index.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { podDir } from '../util/safe-path.js';

/** The mode of the kubelet's root dir, its pods dir and each pod's data dirs (upstream: 0750). */
export const POD_DIR_MODE = 0o750;

/** upstream setupDataDirs: the root dir and its pods dir, 0750 where they are made. */
export async function setupDataDirs(rootDir: string): Promise<void> {
  await mkdir(join(rootDir, 'pods'), { recursive: true, mode: POD_DIR_MODE });
}
import type { KubeletOomWatcher, PodCgroups } from './dependencies.js';
import { PodStillRunningError, PodSyncError } from './errors.js';
import { activeDeadlineLeftMs, DeadlineExceededMessage, DeadlineExceededReason } from './admission.js';
import type { ObjectManager } from './configmap-secret.js';
import type { PodManager } from './pod-manager.js';
import type { WorkQueue } from './work-queue.js';

/** upstream: backOffPeriod for a pod whose sync failed. */
export const SYNC_ERROR_BACKOFF_MS = 10_000;
/** upstream workerResyncIntervalJitterFactor: a pod's next resync is 1 to 1.5 syncFrequency away. */
export const RESYNC_JITTER_FACTOR = 0.5;
/** upstream workerBackOffPeriodJitterFactor: a failed sync is retried 1 to 1.5 backOffPeriod later. */
export const SYNC_ERROR_BACKOFF_JITTER_FACTOR = 0.5;

export interface PodSyncerOptions {
  runtime: KubeletRuntime;
  statusManager: StatusManager;
  podManager: PodManager;
  workQueue: WorkQueue;
  cgroups: PodCgroups;
  oom?: KubeletOomWatcher;
  clock: Clock;
  log: Logger;
  rootDir: string;
  podLogsDir: string;
  /** upstream syncFrequency: a pod's next resync is this far away, jittered by up to half as much again. */
  syncFrequencyMs: number;
  /** The jitter's source (default Math.random). */
  random?: () => number;
  hostIPs: () => string[];
  /** Sets the pod's volumes up before its containers start and tears them down after. */
  volumes?: VolumeManager;
  /** The sandbox's resolver config. */
  dns?: DNSConfigurer;
  clusterDomain?: string;
  /** Records an event about the pod (FailedMount). */
  recordEvent?: (pod: Pod, type: 'Normal' | 'Warning', reason: string, message: string) => void;
  /** ConfigMaps and Secrets from the API for env and envFrom (undefined standalone: none exist). */
  objects?: ObjectManager;
  /** The prober's readiness and startup results for the status (container ID → passed). */
  probeStatus?: (uid: string) => { readiness: Map<string, boolean>; startup: Map<string, boolean> };
  /** In-place resize: the pod the runtime gets (its allocation), the status's resize fields, and whether one is under way. */
  allocation?: {
    handleResize(pod: Pod): Pod;
    applyStatus(pod: Pod, status: PodStatus, rs: RuntimePodStatus): PodStatus;
    resizeActive(uid: string): boolean;
  };
}

/** When a pod whose sync failed is tried again (upstream: backOffPeriod, jittered). */
/** upstream's event reason for a pod that could not be killed (events.FailedToKillPod). */
export const FAILED_KILL_POD = 'FailedKillPod';

export function syncErrorBackoffMs(random?: () => number): number {
  return jitter(SYNC_ERROR_BACKOFF_MS, SYNC_ERROR_BACKOFF_JITTER_FACTOR, random);
}

export class PodSyncer {
  /** Per pod UID, per container name: why its last start failed (upstream's reasonCache). */
  readonly reasonCache = new Map<string, Map<string, ContainerStartFailure>>();
  /**
   * Pods whose data dirs (containers/, volumes/) this process made: a resync does not make them
   * again (1000 pods: 2000 mkdir and 2000 stat calls a minute through the threadpool). Dropped
   * with the pod's dir, and by housekeeping with the pod.
   */
  readonly podDirsMade = new Map<string, true>();

  constructor(private readonly opts: PodSyncerOptions) {}

  generateStatus(pod: Pod, rs: RuntimePodStatus, podIsTerminal = false): PodStatus {
    let status = generateAPIPodStatus({
      pod,
      runtime: rs.sandboxStatuses.length || rs.containerStatuses.length ? this.withOomReasons(rs) : undefined,
      previous: this.opts.statusManager.getPodStatus(pod.metadata.uid!),
      startFailures: this.reasonCache.get(pod.metadata.uid!),
      hostIPs: this.opts.hostIPs(),
      now: this.opts.clock.now(),
      podIsTerminal,
      ...this.opts.probeStatus?.(pod.metadata.uid!),
    });
    if (this.opts.allocation) status = this.opts.allocation.applyStatus(pod, status, rs);
    // upstream: a pod past activeDeadlineSeconds is Failed, whatever its containers do
    const left = activeDeadlineLeftMs(pod, status.startTime, this.opts.clock.now());
    if (left !== undefined && left <= 0) return { ...status, phase: 'Failed', reason: DeadlineExceededReason, message: DeadlineExceededMessage };
    return status;
  }

  /** Exit reasons cross-checked with the OOM watcher: a kill it saw makes an exit-137 `OOMKilled`. */
  private withOomReasons(rs: RuntimePodStatus): RuntimePodStatus {
    const oom = this.opts.oom;
    if (!oom) return rs;
    let changed = false;
    const containerStatuses = rs.containerStatuses.map((c) => {
      if (c.state !== 'exited') return c;
      const { reason } = crossCheckTerminatedReason(c.reason, c.exitCode, oom.oomKills(c.id));
      if (reason === c.reason) return c;
      changed = true;
      return { ...c, reason };
    });
    return changed ? { ...rs, containerStatuses } : rs;
  }

  /** upstream's Kubelet.SyncPod: status first, then make the runtime match the spec. Returns true when terminal. */
  async syncPod(pod: Pod, cached: RuntimePodStatus): Promise<boolean> {
    const { statusManager, runtime, workQueue, syncFrequencyMs } = this.opts;
    const uid = pod.metadata.uid!;
    const rs = await this.withTerminationMessages(pod, cached);
    // a resize is admitted (or held Deferred/Infeasible) before the status: the runtime gets the allocated pod
    const runPod = this.opts.allocation?.handleResize(pod) ?? pod;
    let status = this.generateStatus(pod, rs);
    const wasPastDeadline = statusManager.getPodStatus(uid)?.reason === DeadlineExceededReason;
    statusManager.setPodStatus(pod, status);
    if (status.reason === DeadlineExceededReason && !wasPastDeadline) {
      this.opts.recordEvent?.(pod, 'Normal', DeadlineExceededReason, DeadlineExceededMessage);
    }
    // the status manager keeps a terminal phase terminal (an API copy already Failed, say)
    const phase = statusManager.getPodStatus(uid)?.phase ?? status.phase;
    if (phase === 'Succeeded' || phase === 'Failed') return true;

    const dir = podDir(this.opts.rootDir, uid);
    if (!this.podDirsMade.has(uid)) {
      // 0750 as upstream's makePodDataDirs: a pod's data is no other user's to read
      await mkdir(join(dir, 'containers'), { recursive: true, mode: POD_DIR_MODE });
      await mkdir(join(dir, 'volumes'), { recursive: true, mode: POD_DIR_MODE });
      this.podDirsMade.set(uid, true);
    }
    const extras = await this.podSyncExtras(pod, rs, dir);
    const result = await runtime.syncPod(runPod, rs, extras);
    this.reasonCache.set(uid, result.startFailures);
    await this.collectDeadContainers(pod, rs);
    if (result.startFailures.size || this.opts.allocation?.resizeActive(uid)) {
      // after a resize the runtime reports the new resources: read them again
      const now = this.opts.allocation?.resizeActive(uid) ? await runtime.getPodStatus(uid, pod.metadata.name ?? '', pod.metadata.namespace ?? '').catch(() => rs) : rs;
      status = this.generateStatus(pod, now === rs ? rs : await this.withTerminationMessages(pod, now));
      statusManager.setPodStatus(pod, status);
    }
    // upstream completeWork: the regular resync and the error backoff are jittered, so pods
    // started together (1000 at once) spread their resyncs instead of all coming due each minute
    const delay = result.errors.length
      ? Math.min(syncErrorBackoffMs(this.opts.random), syncFrequencyMs)
      : result.requeueAfterMs !== undefined
        ? Math.min(result.requeueAfterMs, syncFrequencyMs)
        : jitter(syncFrequencyMs, RESYNC_JITTER_FACTOR, this.opts.random);
    // a pod with activeDeadlineSeconds is synced again when its deadline passes
    const deadline = activeDeadlineLeftMs(pod, status.startTime, this.opts.clock.now());
    workQueue.enqueue(uid, Math.max(0, Math.min(delay, deadline ?? Infinity)));
    if (result.errors.length) throw new PodSyncError(podFullName(pod), result.errors);
    return false;
  }

  /**
   * Volumes set up (a failure is a FailedMount event and no container starts: the pod waits in
   * ContainerCreating and the sync is retried after the error backoff), then the DNS config.
   */
  private async podSyncExtras(pod: Pod, rs: RuntimePodStatus, dir: string): Promise<PodSyncExtras> {
    const { volumes, dns, clusterDomain } = this.opts;
    const extras: PodSyncExtras = { clusterDomain };
    // the pod's ConfigMaps and Secrets first: env and the volumes read what this fetched
    const objects = this.opts.objects;
    if (objects) {
      await objects.prefetch(pod);
      extras.getConfigMap = objects.lookup('configmaps');
      extras.getSecret = objects.lookup('secrets');
    }
    if (volumes) {
      let podVolumes;
      try {
        podVolumes = await volumes.mountPod(pod, rs.ips);
      } catch (err) {
        if (!isKubeletError(err, 'FailedMount')) throw err;
        this.opts.recordEvent?.(pod, 'Warning', 'FailedMount', err.message);
        throw new PodSyncError(podFullName(pod), [err.message]);
      }
      extras.containerMounts = (c, envs, podIPs) => podContainerMounts({ pod, container: c, volumes: podVolumes, envs, podIPs, podDir: dir, clusterDomain: clusterDomain ?? '' });
    }
    if (dns) extras.dns = await dns.podDNS(pod);
    return extras;
  }

  /** Exited containers' termination messages, read from the pod's files (upstream does it in the runtime's status read). */
  private withTerminationMessages(pod: Pod, rs: RuntimePodStatus): Promise<RuntimePodStatus> {
    const { rootDir, podLogsDir } = this.opts;
    return withTerminationMessages(rs, rs.namespace || pod.metadata.namespace || '', rs.name || pod.metadata.name || '', { rootDir, podLogsDir });
  }

  /** Removes dead attempts beyond the newest one per container (upstream's MaxPerPodContainer). */
  private async collectDeadContainers(pod: Pod, rs: RuntimePodStatus): Promise<void> {
    for (const c of evictableContainers(rs)) {
      try {
        await this.opts.runtime.removeContainer(c.id);
        this.opts.oom?.unwatch(c.id);
      } catch (err) {
        this.opts.log.warn('Failed to remove dead container', { pod: podFullName(pod), container: c.name, containerID: c.id, err: (err as Error).message });
      }
    }
  }

  /** Kills the pod and returns the runtime's status read after the kill. */
  async syncTerminatingPod(pod: Pod, rs: RuntimePodStatus, gracePeriodOverride: number | undefined): Promise<RuntimePodStatus> {
    const { runtime, podManager, statusManager } = this.opts;
    this.opts.log.info('Terminating pod', { pod: podFullName(pod), podUID: pod.metadata.uid });
    try {
      await runtime.killPod(pod, rs, gracePeriodOverride);
    } catch (err) {
      // upstream's event for a failed kill, with the runtime's message (a sandbox that cannot
      // be stopped keeps its pod, and a static pod's replacement, waiting)
      this.opts.recordEvent?.(pod, 'Warning', FAILED_KILL_POD, `error killing pod: ${(err as Error).message}`);
      throw err;
    }
    const afterKill = await runtime.getPodStatus(pod.metadata.uid!, rs.name || pod.metadata.name!, rs.namespace || pod.metadata.namespace!);
    if (podManager.getPodByUID(pod.metadata.uid!)) {
      statusManager.setPodStatus(pod, this.generateStatus(pod, await this.withTerminationMessages(pod, afterKill), true));
    }
    return afterKill;
  }

  /**
   * Cleans up a pod whose containers are all stopped. `afterKill`: `rs` was read right after
   * this pod's kill, by the terminating step just before (no container of the pod starts in
   * between); otherwise the runtime is read again.
   */
  async syncTerminatedPod(pod: Pod, rs: RuntimePodStatus, removed: boolean, afterKill = false): Promise<void> {
    const { runtime, statusManager, cgroups } = this.opts;
    const uid = pod.metadata.uid!;
    const fresh = afterKill ? rs : await runtime.getPodStatus(uid, rs.name || pod.metadata.name!, rs.namespace || pod.metadata.namespace!);
    if (fresh.containerStatuses.some((c) => c.state === 'running')) {
      throw new PodStillRunningError(podFullName(pod));
    }
    if (removed) {
      try {
        await runtime.removePod(fresh);
      } catch (err) {
        // the sandboxes stay in the runtime: say so on the pod, under the failed kill's reason
        this.opts.recordEvent?.(pod, 'Warning', FAILED_KILL_POD, `error removing pod: ${(err as Error).message}`);
        throw err;
      }
      for (const c of fresh.containerStatuses) this.opts.oom?.unwatch(c.id);
      statusManager.deletePodStatus(uid);
      this.opts.objects?.unregisterPod(uid);
      this.reasonCache.delete(uid);
      this.podDirsMade.delete(uid);
      // mounts under the pod dir first: rm must never descend into a live tmpfs or bind mount
      await this.opts.volumes?.unmountPod(uid);
      await rm(podDir(this.opts.rootDir, uid), { recursive: true, force: true });
      const ns = fresh.namespace || pod.metadata.namespace || '';
      const name = fresh.name || pod.metadata.name || '';
      await rm(buildPodLogsDirectory(this.opts.podLogsDir, ns, name, uid), { recursive: true, force: true });
    } else {
      // still wanted (an evicted or finished pod): its volumes go, its directory and logs stay
      await this.opts.volumes?.tearDownPodVolumes(uid).catch((err: unknown) =>
        this.opts.log.warn('Failed to tear down the volumes of a terminated pod', { pod: podFullName(pod), podUID: uid, err: (err as Error).message }));
    }
    // Remove the pod cgroup wherever it is (the QoS class may be unknown for an orphan).
    for (const [cgUID, name] of await cgroups.listPodCgroups()) {
      if (cgUID === uid) await cgroups.remove(name);
    }
    this.opts.log.info('Pod terminated and cleaned up', { pod: podFullName(pod), podUID: uid, removed });
  }
}
