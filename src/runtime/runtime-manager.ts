// The generic runtime manager (upstream: kuberuntime's kubeGenericRuntimeManager): reads pods
// back from the CRI by their labels and does what computePodActions (pod-actions.ts) decides:
// kills through the PodKiller (kill.ts), starts through the ContainerStarter (start.ts).

import { cleanContainerLogs } from '../logs/rotation.js';
import { mkdir } from 'node:fs/promises';
import type { Container, Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { CriClient } from './cri-client.js';
import type { UserNamespaceInput } from './cri-types.js';
import { isNotFound } from './cri-errors.js';
import type { ContainerRuntimeStatus, KubeletRuntime, PodSyncExtras, PodSyncResult, RuntimePod, RuntimePodStatus, SandboxRuntimeStatus } from './types.js';
import { generatePodSandboxConfig } from './sandbox-config.js';
import { HandlerRunner } from './hooks.js';
import { PodKiller, type KillTarget } from './kill.js';
import { ContainerStarter, type ContainerStarterOptions, type ImageService } from './start.js';
import { computePodActions, type ProbeResultsView, type ResizeView } from './pod-actions.js';
import { doPodResizeAction, hasResizeWork, type PodResizeDeps } from './resize.js';
import { generateLinuxContainerResources } from './resources.js';
import type { ResourceRequirements } from '../api/types.js';
import { ephemeralContainersOf } from './ephemeral.js';
import { nsToMs, toContainerRuntimeStatus, toSandboxRuntimeStatus } from './cri-status.js';
import * as labels from './labels.js';
import type { Backoff } from '../util/backoff.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { KubeletError } from '../util/errors.js';

export { MINIMUM_GRACE_PERIOD_SECONDS } from './kill.js';
export { computePodActions, latestByName, type ContainerToKill, type PodActions, type ProbeResultsView } from './pod-actions.js';
export type { PodSyncResult, RuntimePod } from './types.js';

/** The CRI calls the runtime manager makes (a CriClient, or a test double). */
export type RuntimeCri = Pick<CriClient,
  | 'listPodSandbox' | 'listContainers' | 'podSandboxStatus' | 'containerStatus' | 'runPodSandbox'
  | 'stopPodSandbox' | 'removePodSandbox' | 'createContainer' | 'startContainer' | 'stopContainer'
  | 'removeContainer' | 'execSync' | 'imageStatus'> & Partial<Pick<CriClient, 'updateContainerResources'>>;

export interface RuntimeManagerOptions {
  /** Told of each container start attempt (upstream's kubelet_started_containers_total), with the gRPC code name of a failure. */
  onContainerStart?: ContainerStarterOptions['onContainerStart'];
  cri: RuntimeCri;
  images: ImageService;
  clock: Clock;
  log: Logger;
  nodeName: string;
  hostIPs: () => string[];
  memoryCapacityBytes: number;
  podLogsDir: string;
  /** The kubelet's root dir: per-container files (termination message) live under pods/<uid>/containers. */
  rootDir: string;
  /** KubeletConfiguration seccompDefault: RuntimeDefault for containers that set no profile. */
  seccompDefault?: boolean;
  /** Creates the pod's cgroup and returns its name (the sandbox's cgroup_parent). */
  ensurePodCgroup: (pod: Pod) => Promise<string>;
  /** Told of every container started (the OOM watcher watches it). */
  onContainerStarted?: (pod: Pod, containerName: string, containerID: string) => void;
  /** Runtime name for container IDs in the API (`containerd://<id>`). */
  runtimeName?: string;
  /** The prober's liveness/startup results: a failure kills and restarts the container. */
  probeResults?: ProbeResultsView;
  /** The pod's RuntimeClass handler ('' = the default); throws for a class that cannot be resolved. */
  runtimeHandler?: (pod: Pod) => Promise<string>;
  /** The pod's CRI UserNamespace for a handler (the userns manager); throws when it cannot have the one it asks for. */
  userNamespace?: (pod: Pod, runtimeHandler: string) => Promise<UserNamespaceInput | null>;
  /** Records an event about the pod (FailedCreatePodSandBox). */
  recordEvent?: (pod: Pod, type: 'Normal' | 'Warning', reason: string, message: string) => void;
  /** In-place pod resize (resize.ts); without it a running container's resources are left as they are. */
  resize?: RuntimeResizeOptions;
}

/** What the runtime needs of the kubelet for in-place resize (the allocation manager and the pod cgroups). */
export interface RuntimeResizeOptions extends Pick<PodResizeDeps, 'podCgroup' | 'setActuated'> {
  /** What the container was last given (undefined: not known). */
  actuated(pod: Pod, containerName: string, running: ContainerRuntimeStatus): ResourceRequirements | undefined;
  /** False for pods that cannot be resized in place (static pods). */
  resizable(pod: Pod): boolean;
  /** Told how an in-place resize went: an error message keeps it in progress with reason Error. */
  onResizeResult?(pod: Pod, error: string | undefined): void;
}

export class RuntimeManager implements KubeletRuntime {
  private readonly runtimeName: string;
  private readonly killer: PodKiller;
  private readonly starter: ContainerStarter;
  /** Aborted by stop(): running hooks are abandoned. */
  private readonly shutdown = new AbortController();

  constructor(private readonly opts: RuntimeManagerOptions) {
    this.runtimeName = opts.runtimeName ?? 'containerd';
    const hooks = new HandlerRunner({ cri: opts.cri, clock: opts.clock, signal: this.shutdown.signal });
    this.killer = new PodKiller({ cri: opts.cri, hooks, clock: opts.clock, log: opts.log, hostIPs: opts.hostIPs });
    this.starter = new ContainerStarter({ ...opts, hooks, killer: this.killer });
  }

  /** Container restart backoff (CrashLoopBackOff): 10s doubling to 300s. */
  get crashBackoff(): Backoff {
    return this.starter.crashBackoff;
  }

  gcBackoff(): void {
    this.starter.crashBackoff.gc();
    this.opts.images.gcBackoff?.();
  }

  backoffKey(pod: Pod, c: Container): string {
    return this.starter.backoffKey(pod, c);
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
  async syncPod(pod: Pod, status: RuntimePodStatus, extras: PodSyncExtras = {}): Promise<PodSyncResult> {
    const result: PodSyncResult = { startFailures: new Map(), errors: [] };
    const log = this.opts.log.with({ pod: podFullName(pod), podUID: pod.metadata.uid });
    const resize = this.opts.resize;
    const resizeView: ResizeView | undefined = resize?.resizable(pod) ? { actuated: (name, running) => resize.actuated(pod, name, running) } : undefined;
    const actions = computePodActions(pod, status, this.opts.probeResults, resizeView);
    log.v(4).info('computePodActions', { actions });

    if (actions.killPod) {
      if (actions.createSandbox && status.sandboxStatuses.length) log.info('Sandbox changed; killing the pod to recreate it');
      await this.killer.killPod(pod, status, undefined);
      if (!actions.createSandbox) return result;
    } else {
      await Promise.all(actions.containersToKill.map(async (k) => {
        log.info('Killing container', { container: k.name, containerID: k.id, reason: k.reason });
        try {
          const rs = status.containerStatuses.find((c) => c.id === k.id);
          await this.killer.killContainer(pod, { ...rs, id: k.id, name: k.name }, k.container, status.ips[0] ?? this.opts.hostIPs()[0] ?? '', k.gracePeriodOverride);
        } catch (err) {
          result.errors.push(`killing container ${k.name}: ${(err as Error).message}`);
        }
      }));
    }

    if (resize && hasResizeWork(actions.resize)) await this.resizePod(pod, actions.resize!, resize, result, log);

    let sandboxID = actions.sandboxID;
    let podIPs = status.ips;
    const cgroupParent = await this.opts.ensurePodCgroup(pod);
    // the sandbox config serves a sandbox or a container to start: a resync with nothing to start builds none
    if (!actions.createSandbox && actions.initContainersToStart.length === 0 && actions.containersToStart.length === 0 && actions.ephemeralContainersToStart.length === 0) return result;
    // upstream NamespacesForPod: the RuntimeClass's handler, then the user namespace it allows;
    // neither resolved, no sandbox is asked for and no container is created
    let runtimeHandler: string;
    let usernsOptions: UserNamespaceInput | null;
    try {
      runtimeHandler = (await this.opts.runtimeHandler?.(pod)) ?? '';
      usernsOptions = (await this.opts.userNamespace?.(pod, runtimeHandler)) ?? null;
    } catch (err) {
      const message = `Failed to create pod sandbox: ${(err as Error).message}`;
      log.error(actions.createSandbox ? 'CreatePodSandbox failed' : 'Failed to generate the pod sandbox config', { err: (err as Error).message });
      if (actions.createSandbox) this.opts.recordEvent?.(pod, 'Warning', 'FailedCreatePodSandBox', message);
      result.errors.push(message);
      return result;
    }
    const sandboxConfig = generatePodSandboxConfig(pod, actions.attempt, { cgroupParent, podLogsDir: this.opts.podLogsDir, dns: extras.dns, clusterDomain: extras.clusterDomain, usernsOptions });
    if (actions.createSandbox) {
      try {
        await mkdir(sandboxConfig.log_directory ?? '', { recursive: true, mode: 0o755 });
        log.info('Creating pod sandbox', { attempt: actions.attempt, ...(runtimeHandler ? { runtimeHandler } : {}) });
        sandboxID = (await this.opts.cri.runPodSandbox(sandboxConfig, runtimeHandler)).pod_sandbox_id;
        const st = (await this.opts.cri.podSandboxStatus(sandboxID)).status;
        podIPs = st?.network?.ip ? [st.network.ip, ...(st.network.additional_ips ?? []).map((p) => p.ip)] : [];
      } catch (err) {
        const message = `Failed to create pod sandbox: ${(err as Error).message}`;
        log.error('CreatePodSandbox failed', { err: message });
        this.opts.recordEvent?.(pod, 'Warning', 'FailedCreatePodSandBox', message);
        result.errors.push(message);
        result.requeueAfterMs = 10_000;
        return result;
      }
    }

    const start = async (c: Container, kind: 'init' | 'regular' | 'ephemeral'): Promise<boolean> => {
      const failure = await this.starter.start(pod, c, status, { sandboxID, sandboxConfig, podIPs, containerMounts: extras.containerMounts, getConfigMap: extras.getConfigMap, getSecret: extras.getSecret }, result, kind === 'ephemeral' ? c : undefined);
      if (failure) {
        result.startFailures.set(c.name, failure);
        log.info('Container start did not succeed', { container: c.name, kind, reason: failure.reason, message: failure.message });
        return false;
      }
      // started with its allocated resources: that is what it runs with
      resize?.setActuated(pod, c.name, c.resources ?? {});
      return true;
    };

    // Ephemeral containers first, as upstream: a debug container starts even while an init container fails.
    for (const i of actions.ephemeralContainersToStart) {
      await start(ephemeralContainersOf(pod)[i]!, 'ephemeral');
    }
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

  /** The in-place part of a resize (upstream doPodResizeAction); a failure keeps it in progress with the error. */
  private async resizePod(pod: Pod, actions: NonNullable<ReturnType<typeof computePodActions>['resize']>, resize: RuntimeResizeOptions, result: PodSyncResult, log: Logger): Promise<void> {
    const cri = this.opts.cri;
    try {
      await doPodResizeAction(pod, actions, {
        podCgroup: resize.podCgroup,
        setActuated: (p, name, res) => resize.setActuated(p, name, res),
        updateContainerResources: async (p, c, id) => {
          if (!cri.updateContainerResources) throw new KubeletError('ERR_CRI_UNSUPPORTED', 'the runtime client cannot update container resources');
          const linux = generateLinuxContainerResources(p, c, { memoryCapacityBytes: this.opts.memoryCapacityBytes });
          // what the container was created with stays: only cpu, memory and huge pages move
          delete linux.oom_score_adj;
          log.info('Updating container resources', { container: c.name, containerID: id, resources: c.resources });
          await cri.updateContainerResources(id, linux);
        },
      });
      resize.onResizeResult?.(pod, undefined);
    } catch (err) {
      const message = (err as Error).message;
      log.error('Pod resize failed', { err: message });
      resize.onResizeResult?.(pod, message);
      result.errors.push(`resizing pod: ${message}`);
    }
  }

  /** Stops every running container of the pod (in parallel), then its sandboxes. */
  killPod(pod: Pod | undefined, status: RuntimePodStatus, gracePeriodOverride: number | undefined): Promise<void> {
    return this.killer.killPod(pod, status, gracePeriodOverride);
  }

  /** Stops one container: preStop, then StopContainer with the rest of the grace period. */
  killContainer(pod: Pod | undefined, target: KillTarget, container: Container | undefined, podIP: string, gracePeriodOverride: number | undefined): Promise<void> {
    return this.killer.killContainer(pod, target, container, podIP, gracePeriodOverride);
  }

  /** Removes every container and sandbox the runtime holds for a pod (pod deleted for good). */
  async removePod(status: RuntimePodStatus): Promise<void> {
    for (const c of status.containerStatuses) {
      await this.opts.cri.removeContainer(c.id).catch((err) => { if (!isNotFound(err)) throw err; });
    }
    for (const sb of status.sandboxStatuses) {
      // killPod stopped it; a sandbox still ready (or unknown) is stopped first
      if (sb.state !== 'notready') await this.opts.cri.stopPodSandbox(sb.id).catch((err) => { if (!isNotFound(err)) throw err; });
      await this.opts.cri.removePodSandbox(sb.id).catch((err) => { if (!isNotFound(err)) throw err; });
    }
  }

  async removeContainer(containerID: string): Promise<void> {
    // the container's log and its rotations go with it (upstream removeContainerLog)
    const logPath = await this.opts.cri.containerStatus(containerID).then((r) => r.status?.log_path ?? '', () => '');
    await cleanContainerLogs(logPath).catch((err) => this.opts.log.warn('Failed to remove container logs', { containerID, path: logPath, err: (err as Error).message }));
    await this.opts.cri.removeContainer(containerID);
  }

  /** Abandons running hooks (shutdown); the CRI client's owner cancels its calls by closing it. */
  stop(): void {
    this.shutdown.abort();
  }
}
