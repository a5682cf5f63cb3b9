// The generic runtime manager (upstream: kuberuntime's kubeGenericRuntimeManager): reads pods
// back from the CRI by their labels, decides what a pod needs (computePodActions) and does it
// (syncPod), and kills pods gracefully.

import { mkdir } from 'node:fs/promises';
import type { Container, LifecycleHandler, Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { CriClient } from './cri-client.js';
import type * as cri from './cri-types.js';
import type { ContainerRuntimeStatus, ContainerStartFailure, RuntimePodStatus, SandboxRuntimeStatus } from './types.js';
import { hashContainer } from './container-hash.js';
import { generatePodSandboxConfig } from './sandbox-config.js';
import { createTerminationMessageFile, generateContainerConfig, podContainerDir } from './container-config.js';
import { HandlerRunner } from './hooks.js';
import { nsToMs, toContainerRuntimeStatus, toSandboxRuntimeStatus } from './cri-status.js';
import * as labels from './labels.js';
import { ImageError, type ImageManager } from '../images/image-manager.js';
import { Reasons, crashLoopBackOffMessage } from '../api/reasons.js';
import { shouldContainerBeRestarted } from '../status/generate.js';
import { Backoff } from '../util/backoff.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';

/** Upstream's floor on a graceful stop. */
export const MINIMUM_GRACE_PERIOD_SECONDS = 2;

export interface RuntimeManagerOptions {
  cri: CriClient;
  images: ImageManager;
  clock: Clock;
  log: Logger;
  nodeName: string;
  hostIPs: () => string[];
  memoryCapacityBytes: number;
  podLogsDir: string;
  /** The kubelet's root dir: per-container files (termination message) live under pods/<uid>/containers. */
  rootDir: string;
  /** Creates the pod's cgroup and returns its name (the sandbox's cgroup_parent). */
  ensurePodCgroup: (pod: Pod) => Promise<string>;
  /** Told of every container started (the OOM watcher watches it). */
  onContainerStarted?: (pod: Pod, containerName: string, containerID: string) => void;
  /** Runtime name for container IDs in the API (`containerd://<id>`). */
  runtimeName?: string;
}

/** What relist sees of a pod: ids and states only, from two list calls. */
export interface RuntimePod {
  uid: string;
  name: string;
  namespace: string;
  sandboxes: { id: string; state: cri.PodSandboxState; createdAt: number }[];
  containers: { id: string; name: string; state: cri.ContainerState; createdAt: number }[];
}

export interface ContainerToKill {
  id: string;
  name: string;
  container?: Container;
  reason: string;
}

/** upstream's podActions. */
export interface PodActions {
  killPod: boolean;
  createSandbox: boolean;
  sandboxID: string;
  attempt: number;
  /** Init containers (index into spec.initContainers) to start now, in order. */
  initContainersToStart: number[];
  /** Regular containers (index into spec.containers) to start. */
  containersToStart: number[];
  containersToKill: ContainerToKill[];
}

export interface PodSyncResult {
  /** Per container name: why it could not be started this time. */
  startFailures: Map<string, ContainerStartFailure>;
  /** When the pod should be synced again for a pending backoff (ms from now). */
  requeueAfterMs?: number;
  errors: string[];
}

/** Newest status per container name (statuses are ordered newest first). */
export function latestByName(statuses: ContainerRuntimeStatus[]): Map<string, ContainerRuntimeStatus> {
  const m = new Map<string, ContainerRuntimeStatus>();
  for (const s of statuses) if (!m.has(s.name)) m.set(s.name, s);
  return m;
}

function isRestartableInit(c: Container): boolean {
  return c.restartPolicy === 'Always';
}

/** Decides what a pod needs, from its spec and the runtime's view of it. */
export function computePodActions(pod: Pod, status: RuntimePodStatus): PodActions {
  const actions: PodActions = {
    killPod: false,
    createSandbox: false,
    sandboxID: '',
    attempt: 0,
    initContainersToStart: [],
    containersToStart: [],
    containersToKill: [],
  };
  const policy = pod.spec.restartPolicy ?? 'Always';
  const latest = latestByName(status.containerStatuses);
  const initContainers = pod.spec.initContainers ?? [];

  // 1. The sandbox.
  const [createSandbox, attempt, sandboxID] = podSandboxChanged(pod, status);
  actions.createSandbox = createSandbox;
  actions.attempt = attempt;
  actions.sandboxID = sandboxID;
  if (createSandbox) {
    actions.killPod = true;
    // A Never pod whose sandbox died after its containers ran is done: do not start it again.
    if (policy === 'Never' && attempt !== 0 && status.containerStatuses.length > 0) {
      actions.createSandbox = false;
      return actions;
    }
    if (initContainers.length > 0) {
      actions.initContainersToStart = [0];
      return actions;
    }
    pod.spec.containers.forEach((c, i) => {
      const s = latest.get(c.name);
      if (policy === 'OnFailure' && s?.state === 'exited' && s.exitCode === 0) return;
      if (policy === 'Never' && s && s.state !== 'created') return;
      actions.containersToStart.push(i);
    });
    return actions;
  }

  // 2. Init containers, in order: each to success (restartable ones: to running) before the next.
  let initDone = true;
  for (let i = 0; i < initContainers.length; i++) {
    const c = initContainers[i]!;
    const s = latest.get(c.name);
    if (isRestartableInit(c)) {
      if (s?.state === 'running') {
        if (s.hash !== hashContainer(c)) {
          actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: 'Init container spec hash changed' });
          actions.initContainersToStart.push(i);
        }
        continue;
      }
      if (s?.state === 'unknown') actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: 'Container state unknown' });
      actions.initContainersToStart.push(i);
      initDone = initDone && s !== undefined && s.state !== 'created';
      if (!s || s.state === 'created') {
        initDone = false;
        break;
      }
      continue;
    }
    if (s?.state === 'exited' && s.exitCode === 0) continue;
    initDone = false;
    if (!s || s.state === 'created') {
      actions.initContainersToStart.push(i);
    } else if (s.state === 'exited' || s.state === 'unknown') {
      if (s.state === 'unknown') actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: 'Init container state unknown' });
      if (policy === 'Never') {
        // A failed init container fails a Never pod.
        actions.killPod = true;
        actions.initContainersToStart = [];
        return actions;
      }
      actions.initContainersToStart.push(i);
    }
    // Running: wait for it.
    break;
  }
  if (!initDone) {
    if (!actions.initContainersToStart.length && !hasRunning(status)) {
      // Nothing runs and nothing can start: only possible for a finished Never pod.
      actions.killPod = policy === 'Never';
    }
    return actions;
  }

  // 3. Regular containers.
  let keepCount = 0;
  const specNames = new Set<string>();
  pod.spec.containers.forEach((c, i) => {
    specNames.add(c.name);
    const s = latest.get(c.name);
    if (!s || s.state !== 'running') {
      if (s?.state === 'unknown') actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: 'Container state unknown' });
      if (shouldContainerBeRestarted(c, pod, status)) actions.containersToStart.push(i);
      return;
    }
    if (s.hash !== hashContainer(c)) {
      actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: `Container ${c.name} definition changed` });
      actions.containersToStart.push(i);
      return;
    }
    keepCount++;
  });
  for (const c of initContainers) {
    specNames.add(c.name);
    if (isRestartableInit(c) && latest.get(c.name)?.state === 'running') keepCount++;
  }
  // Running containers the spec no longer names, and older attempts still running.
  for (const s of status.containerStatuses) {
    if (s.state !== 'running') continue;
    if (!specNames.has(s.name) || latest.get(s.name) !== s) {
      if (!actions.containersToKill.some((k) => k.id === s.id)) {
        actions.containersToKill.push({ id: s.id, name: s.name, reason: 'Container is not in the pod spec' });
      }
    }
  }
  if (keepCount === 0 && actions.containersToStart.length === 0) actions.killPod = true;
  return actions;
}

function hasRunning(status: RuntimePodStatus): boolean {
  return status.containerStatuses.some((c) => c.state === 'running');
}

/** upstream's podSandboxChanged: [createSandbox, attempt, sandboxID]. */
function podSandboxChanged(pod: Pod, status: RuntimePodStatus): [boolean, number, string] {
  const sandboxes = status.sandboxStatuses;
  if (sandboxes.length === 0) return [true, 0, ''];
  const newest = sandboxes[0]!;
  const readyCount = sandboxes.filter((s) => s.state === 'ready').length;
  if (readyCount > 1) return [true, newest.attempt + 1, newest.id];
  if (newest.state !== 'ready') return [true, newest.attempt + 1, newest.id];
  if (newest.hostNetwork !== Boolean(pod.spec.hostNetwork)) return [true, newest.attempt + 1, ''];
  if (!pod.spec.hostNetwork && !newest.ip) return [true, newest.attempt + 1, newest.id];
  return [false, newest.attempt, newest.id];
}

export class RuntimeManager {
  /** Container restart backoff (CrashLoopBackOff): 10s doubling to 300s. */
  readonly crashBackoff: Backoff;
  private readonly runtimeName: string;
  private readonly hooks: HandlerRunner;

  constructor(private readonly opts: RuntimeManagerOptions) {
    this.crashBackoff = new Backoff(opts.clock, 10_000, 300_000);
    this.hooks = new HandlerRunner(opts.cri);
    this.runtimeName = opts.runtimeName ?? 'containerd';
  }

  get cri(): CriClient {
    return this.opts.cri;
  }

  /** Every pod the runtime holds, from one ListPodSandbox and one ListContainers call. */
  async getPods(): Promise<Map<string, RuntimePod>> {
    const [sandboxes, containers] = await Promise.all([
      this.opts.cri.listPodSandbox(),
      this.opts.cri.listContainers(),
    ]);
    const pods = new Map<string, RuntimePod>();
    const podOf = (l: Record<string, string>): RuntimePod | undefined => {
      const uid = l[labels.KUBERNETES_POD_UID_LABEL];
      if (!uid) return undefined;
      let p = pods.get(uid);
      if (!p) {
        p = { uid, name: l[labels.KUBERNETES_POD_NAME_LABEL] ?? '', namespace: l[labels.KUBERNETES_POD_NAMESPACE_LABEL] ?? '', sandboxes: [], containers: [] };
        pods.set(uid, p);
      }
      return p;
    };
    for (const s of sandboxes) {
      podOf(s.labels)?.sandboxes.push({ id: s.id, state: s.state, createdAt: nsToMs(s.created_at) });
    }
    for (const c of containers) {
      podOf(c.labels)?.containers.push({
        id: c.id,
        name: c.labels[labels.KUBERNETES_CONTAINER_NAME_LABEL] ?? c.metadata?.name ?? '',
        state: c.state,
        createdAt: nsToMs(c.created_at),
      });
    }
    return pods;
  }

  /** The full runtime status of one pod (upstream's GetPodStatus). */
  async getPodStatus(uid: string, name: string, namespace: string): Promise<RuntimePodStatus> {
    const selector = { [labels.KUBERNETES_POD_UID_LABEL]: uid };
    const timestamp = this.opts.clock.now();
    const [sandboxes, containers] = await Promise.all([
      this.opts.cri.listPodSandbox({ label_selector: selector }),
      this.opts.cri.listContainers({ label_selector: selector }),
    ]);
    const sandboxStatuses: SandboxRuntimeStatus[] = [];
    await Promise.all(sandboxes.map(async (sb) => {
      try {
        const res = await this.opts.cri.podSandboxStatus(sb.id);
        const st = res.status;
        if (!st) return;
        sandboxStatuses.push(toSandboxRuntimeStatus(st));
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }));
    sandboxStatuses.sort((a, b) => b.createdAt - a.createdAt || b.attempt - a.attempt);

    const containerStatuses: ContainerRuntimeStatus[] = [];
    await Promise.all(containers.map(async (c) => {
      try {
        const res = await this.opts.cri.containerStatus(c.id);
        if (res.status) containerStatuses.push(toContainerRuntimeStatus(res.status, this.runtimeName));
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }));
    containerStatuses.sort((a, b) => b.createdAt - a.createdAt);

    const ready = sandboxStatuses.find((s) => s.state === 'ready');
    const ips = ready && ready.ip ? [ready.ip, ...ready.additionalIps] : [];
    return { uid, name, namespace, ips, sandboxStatuses, containerStatuses, timestamp };
  }

  /** Brings the pod to what its spec asks, as far as one pass can. */
  async syncPod(pod: Pod, status: RuntimePodStatus): Promise<PodSyncResult> {
    const result: PodSyncResult = { startFailures: new Map(), errors: [] };
    const log = this.opts.log.with({ pod: podFullName(pod), podUID: pod.metadata.uid });
    const actions = computePodActions(pod, status);
    log.v(4).info('computePodActions', { actions });

    if (actions.killPod) {
      if (actions.createSandbox && status.sandboxStatuses.length) log.info('Sandbox changed; killing the pod to recreate it');
      await this.killPod(pod, status, undefined);
      if (!actions.createSandbox) return result;
    } else {
      await Promise.all(actions.containersToKill.map(async (k) => {
        log.info('Killing container', { container: k.name, containerID: k.id, reason: k.reason });
        try {
          const rs = status.containerStatuses.find((c) => c.id === k.id);
          await this.killContainer(pod, { ...rs, id: k.id, name: k.name }, k.container, status.ips[0] ?? this.opts.hostIPs()[0] ?? '', undefined);
        } catch (err) {
          result.errors.push(`killing container ${k.name}: ${(err as Error).message}`);
        }
      }));
    }

    let sandboxID = actions.sandboxID;
    let sandboxConfig: cri.PodSandboxConfig;
    let podIPs = status.ips;
    const cgroupParent = await this.opts.ensurePodCgroup(pod);
    sandboxConfig = generatePodSandboxConfig(pod, actions.attempt, { cgroupParent, podLogsDir: this.opts.podLogsDir });
    if (actions.createSandbox) {
      try {
        await mkdir(sandboxConfig.log_directory ?? '', { recursive: true, mode: 0o755 });
        log.info('Creating pod sandbox', { attempt: actions.attempt });
        sandboxID = (await this.opts.cri.runPodSandbox(sandboxConfig)).pod_sandbox_id;
        const st = (await this.opts.cri.podSandboxStatus(sandboxID)).status;
        podIPs = st?.network?.ip ? [st.network.ip, ...(st.network.additional_ips ?? []).map((p) => p.ip)] : [];
      } catch (err) {
        const message = `Failed to create pod sandbox: ${(err as Error).message}`;
        log.error('CreatePodSandbox failed', { err: message });
        result.errors.push(message);
        result.requeueAfterMs = 10_000;
        return result;
      }
    }

    const start = async (c: Container, kind: 'init' | 'regular'): Promise<boolean> => {
      const failure = await this.startContainer(pod, c, status, sandboxID, sandboxConfig, podIPs, result);
      if (failure) {
        result.startFailures.set(c.name, failure);
        log.info('Container start did not succeed', { container: c.name, kind, reason: failure.reason, message: failure.message });
        return false;
      }
      return true;
    };

    // Init containers strictly one after another; stop at the first that does not start.
    for (const i of actions.initContainersToStart) {
      const c = pod.spec.initContainers![i]!;
      if (!(await start(c, 'init'))) break;
    }
    // Regular containers in spec order (upstream starts them one by one too).
    for (const i of actions.containersToStart) {
      await start(pod.spec.containers[i]!, 'regular');
    }
    return result;
  }

  /** Starts one container: backoff check, image, config, create, start. Returns why it failed. */
  private async startContainer(
    pod: Pod, c: Container, status: RuntimePodStatus, sandboxID: string,
    sandboxConfig: cri.PodSandboxConfig, podIPs: string[], result: PodSyncResult,
  ): Promise<ContainerStartFailure | undefined> {
    const previous = latestByName(status.containerStatuses).get(c.name);
    // Restart backoff applies when an earlier attempt of this container has exited.
    if (previous && previous.state === 'exited') {
      const key = this.backoffKey(pod, c);
      if (!this.crashBackoff.has(key)) this.rebuildBackoff(key, previous, status);
      if (this.crashBackoff.isInBackOffSince(key, previous.finishedAt)) {
        const wait = this.crashBackoff.get(key);
        result.requeueAfterMs = minDefined(result.requeueAfterMs, this.crashBackoff.remaining(key, previous.finishedAt) + 50);
        return { reason: Reasons.CrashLoopBackOff, message: crashLoopBackOffMessage(wait, c.name, pod) };
      }
      this.crashBackoff.next(key);
    }

    let imageRef: string;
    try {
      imageRef = await this.opts.images.ensureImageExists(pod, c, sandboxConfig);
    } catch (err) {
      if (err instanceof ImageError) {
        result.requeueAfterMs = minDefined(result.requeueAfterMs, 10_000);
        return { reason: err.code, message: err.message };
      }
      throw err;
    }

    const restartCount = previous ? (previous.state === 'created' ? previous.restartCount : previous.restartCount + 1) : 0;
    const hostNetwork = Boolean(pod.spec.hostNetwork);
    let config: cri.ContainerConfig;
    try {
      const terminationMessageHostPath = c.terminationMessagePath
        ? await createTerminationMessageFile(podContainerDir(this.opts.rootDir, pod.metadata.uid!, c.name))
        : undefined;
      config = generateContainerConfig(pod, c, restartCount, {
        terminationMessageHostPath,
        podIPs: hostNetwork ? this.opts.hostIPs() : podIPs,
        hostIPs: this.opts.hostIPs(),
        nodeName: this.opts.nodeName,
        imageRef,
        podLogsDir: this.opts.podLogsDir,
        memoryCapacityBytes: this.opts.memoryCapacityBytes,
      });
    } catch (err) {
      return { reason: Reasons.CreateContainerConfigError, message: (err as Error).message };
    }
    await mkdir(`${sandboxConfig.log_directory}/${c.name}`, { recursive: true, mode: 0o755 }).catch(() => undefined);

    // A container created earlier but never started is replaced, not reused.
    if (previous && previous.state === 'created') {
      await this.opts.cri.removeContainer(previous.id).catch(() => undefined);
    }
    let containerID: string;
    try {
      containerID = (await this.opts.cri.createContainer(sandboxID, config, sandboxConfig)).container_id;
    } catch (err) {
      return { reason: Reasons.CreateContainerError, message: (err as Error).message };
    }
    try {
      await this.opts.cri.startContainer(containerID);
    } catch (err) {
      return { reason: Reasons.RunContainerError, message: (err as Error).message };
    }
    this.opts.log.info('Started container', { pod: podFullName(pod), container: c.name, containerID, restartCount });
    this.opts.onContainerStarted?.(pod, c.name, containerID);
    if (c.lifecycle?.postStart) {
      const podIP = hostNetwork ? (this.opts.hostIPs()[0] ?? '') : (podIPs[0] ?? '');
      try {
        await this.hooks.run({ pod, container: c, containerName: c.name, containerID, podIP }, c.lifecycle.postStart, pod.spec.terminationGracePeriodSeconds ?? 30);
      } catch (err) {
        const message = (err as Error).message;
        this.opts.log.warn('PostStartHook failed; killing the container', { pod: podFullName(pod), container: c.name, err: message });
        await this.killContainer(pod, { id: containerID, name: c.name }, c, podIP, undefined).catch(() => undefined);
        return { reason: Reasons.PostStartHookError, message };
      }
    }
    return undefined;
  }

  /**
   * After a restart of kubelet-ts the restart backoff is rebuilt from the runtime: the window
   * that preceded the previous attempt is the gap between it and the attempt before it, and
   * its successor is twice that (10s after a quiet period longer than 2 x 300s).
   */
  private rebuildBackoff(key: string, previous: ContainerRuntimeStatus, status: RuntimePodStatus): void {
    if (previous.restartCount === 0) return;
    const older = status.containerStatuses.find((c) => c.name === previous.name && c.restartCount === previous.restartCount - 1);
    const { initialMs, maxMs } = this.crashBackoff;
    let backoffMs: number;
    if (older && older.finishedAt && previous.startedAt) {
      const gap = previous.startedAt - older.finishedAt;
      let window = 0;
      for (let b = initialMs; b <= gap && b <= maxMs; b *= 2) window = b;
      backoffMs = gap > 2 * maxMs || window === 0 ? initialMs : Math.min(window * 2, maxMs);
    } else {
      backoffMs = initialMs * 2 ** (previous.restartCount - 1);
    }
    this.crashBackoff.seed(key, backoffMs, previous.startedAt || previous.createdAt);
  }

  backoffKey(pod: Pod, c: Container): string {
    return `${pod.metadata.name}_${pod.metadata.namespace}_${pod.metadata.uid}_${c.name}_${hashContainer(c)}`;
  }

  /** Stops every running container of the pod (in parallel), then its sandboxes. */
  async killPod(pod: Pod | undefined, status: RuntimePodStatus, gracePeriodOverride: number | undefined): Promise<void> {
    const byName = new Map<string, Container>();
    for (const c of [...(pod?.spec.initContainers ?? []), ...(pod?.spec.containers ?? [])]) byName.set(c.name, c);
    const running = status.containerStatuses.filter((c) => c.state === 'running' || c.state === 'unknown' || c.state === 'created');
    const podIP = pod?.spec.hostNetwork ? (this.opts.hostIPs()[0] ?? '') : (status.ips[0] ?? '');
    const errors: string[] = [];
    await Promise.all(running.map(async (c) => {
      try {
        await this.killContainer(pod, c, byName.get(c.name), podIP, gracePeriodOverride);
      } catch (err) {
        errors.push(`${c.name}: ${(err as Error).message}`);
      }
    }));
    for (const sb of status.sandboxStatuses) {
      if (sb.state !== 'ready') continue;
      try {
        await this.opts.cri.stopPodSandbox(sb.id);
      } catch (err) {
        if (!isNotFound(err)) errors.push(`sandbox ${sb.id}: ${(err as Error).message}`);
      }
    }
    if (errors.length) throw new Error(`killing pod ${status.namespace}/${status.name}: ${errors.join('; ')}`);
  }

  /**
   * Stops one container: its preStop hook first (from the spec, or as recorded at creation),
   * then StopContainer with what is left of the grace period (at least upstream's 2s floor).
   */
  async killContainer(
    pod: Pod | undefined,
    target: { id: string; name: string; preStopHandler?: LifecycleHandler; terminationGracePeriodSeconds?: number },
    container: Container | undefined,
    podIP: string,
    gracePeriodOverride: number | undefined,
  ): Promise<void> {
    let grace = pod?.metadata.deletionGracePeriodSeconds ?? pod?.spec.terminationGracePeriodSeconds ?? target.terminationGracePeriodSeconds ?? 30;
    if (gracePeriodOverride !== undefined) grace = gracePeriodOverride;
    const preStop = container ? container.lifecycle?.preStop : target.preStopHandler;
    if (preStop && grace > 0 && pod) {
      const started = this.opts.clock.now();
      try {
        await this.hooks.run({ pod, container, containerName: target.name, containerID: target.id, podIP }, preStop, grace);
      } catch (err) {
        this.opts.log.warn('PreStopHook failed', { pod: podFullName(pod), container: target.name, err: (err as Error).message });
      }
      grace -= Math.floor((this.opts.clock.now() - started) / 1000);
    }
    grace = Math.max(grace, MINIMUM_GRACE_PERIOD_SECONDS);
    try {
      await this.opts.cri.stopContainer(target.id, grace);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** Removes every container and sandbox the runtime holds for a pod (pod deleted for good). */
  async removePod(status: RuntimePodStatus): Promise<void> {
    for (const c of status.containerStatuses) {
      await this.opts.cri.removeContainer(c.id).catch((err) => { if (!isNotFound(err)) throw err; });
    }
    for (const sb of status.sandboxStatuses) {
      await this.opts.cri.stopPodSandbox(sb.id).catch((err) => { if (!isNotFound(err)) throw err; });
      await this.opts.cri.removePodSandbox(sb.id).catch((err) => { if (!isNotFound(err)) throw err; });
    }
  }
}

export function isNotFound(err: unknown): boolean {
  const e = err as { grpcCode?: number; code?: unknown };
  return e?.grpcCode === 5 || e?.code === 5;
}

function minDefined(a: number | undefined, b: number): number {
  return a === undefined ? b : Math.min(a, b);
}
