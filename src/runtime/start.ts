// Starting one container (upstream: kubeGenericRuntimeManager.startContainer): restart backoff
// (CrashLoopBackOff), the image, the container config, create, start, and the postStart hook.
// A failure is returned as upstream's waiting reason and message, never thrown.

import { mkdir } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Container, EphemeralContainer, Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { CriClient } from './cri-client.js';
import type * as cri from './cri-types.js';
import type { ContainerRuntimeStatus, ContainerStartFailure, PodSyncExtras, PodSyncResult, RuntimePodStatus } from './types.js';
import { makeEnvironment } from './env.js';
import { hashContainer } from './container-hash.js';
import { confineLocalhostSeccompProfile, generateContainerConfig, podContainerDir } from './container-config.js';
import { createTerminationMessageFileFor } from './termination-message.js';
import type { HandlerRunner } from './hooks.js';
import type { PodKiller } from './kill.js';
import { latestByName } from './pod-actions.js';
import { applyTargetNamespace, targetContainerID } from './ephemeral.js';
import { isKubeletError } from '../util/errors.js';
import { Reasons, crashLoopBackOffMessage } from '../api/reasons.js';
import { Backoff } from '../util/backoff.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';

/** The image manager's failures carry these reasons as their code (images depends on runtime, not back). */
const IMAGE_REASONS: ReadonlySet<string> = new Set([Reasons.ErrImagePull, Reasons.ImagePullBackOff, Reasons.InvalidImageName, Reasons.ErrImageNeverPull, Reasons.ImageInspectError]);

import { grpcCodeName } from '../metrics/kubelet-metrics.js';

export type StartCri = Pick<CriClient, 'createContainer' | 'startContainer' | 'removeContainer' | 'imageStatus'>;

/**
 * The user the image runs as (upstream getImageUser): its numeric uid, else its user name;
 * neither set is root, as upstream treats it. Feeds runAsNonRoot and run_as_user.
 */
export async function getImageUser(cri: Pick<CriClient, 'imageStatus'>, imageRef: string): Promise<{ uid?: number; username?: string }> {
  const image = (await cri.imageStatus({ image: imageRef })).image;
  if (image?.uid) return { uid: Number(image.uid.value) };
  if (image?.username) return { username: image.username };
  return { uid: 0 };
}

/** What the starter needs of the image manager. */
export interface ImageService {
  ensureImageExists(pod: Pod, container: Container, sandboxConfig?: cri.PodSandboxConfig): Promise<string>;
  /** Forgets pull backoff entries gone quiet (they are per pod UID). */
  gcBackoff?(): void;
}

export interface ContainerStarterOptions {
  /** Told of each container start attempt (upstream's kubelet_started_containers_total), with the gRPC code name of a failure. */
  onContainerStart?: (containerType: 'container' | 'init_container' | 'ephemeral_container', failedCode?: string) => void;
  cri: StartCri;
  images: ImageService;
  hooks: HandlerRunner;
  killer: PodKiller;
  clock: Clock;
  log: Logger;
  nodeName: string;
  hostIPs: () => string[];
  memoryCapacityBytes: number;
  podLogsDir: string;
  rootDir: string;
  /** KubeletConfiguration seccompDefault: RuntimeDefault for containers that set no profile. */
  seccompDefault?: boolean;
  onContainerStarted?: (pod: Pod, containerName: string, containerID: string) => void;
}

/** Where the container goes: its sandbox, the sandbox's config and the pod's IPs. */
export interface StartPlace {
  sandboxID: string;
  sandboxConfig: cri.PodSandboxConfig;
  podIPs: string[];
  /** The kubelet's volume and /etc/hosts mounts for a container (PodSyncExtras.containerMounts). */
  containerMounts?: PodSyncExtras['containerMounts'];
  getConfigMap?: PodSyncExtras['getConfigMap'];
  getSecret?: PodSyncExtras['getSecret'];
}

export class ContainerStarter {
  /** Container restart backoff (CrashLoopBackOff): 10s doubling to 300s. */
  readonly crashBackoff: Backoff;

  constructor(private readonly opts: ContainerStarterOptions) {
    this.crashBackoff = new Backoff(opts.clock, 10_000, 300_000);
  }

  /**
   * Starts one container: backoff check, image, config, create, start. Returns why it failed.
   * `ephemeral`: c is an ephemeral container (its targetContainerName picks the PID namespace).
   */
  async start(pod: Pod, c: Container, status: RuntimePodStatus, place: StartPlace, result: PodSyncResult, ephemeral?: EphemeralContainer): Promise<ContainerStartFailure | undefined> {
    const { sandboxID, sandboxConfig, podIPs } = place;
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
      if (isKubeletError(err) && IMAGE_REASONS.has(err.code)) {
        result.requeueAfterMs = minDefined(result.requeueAfterMs, 10_000);
        return { reason: err.code, message: err.message };
      }
      throw err;
    }

    const restartCount = previous ? (previous.state === 'created' ? previous.restartCount : previous.restartCount + 1) : 0;
    const hostNetwork = Boolean(pod.spec.hostNetwork);
    let config: cri.ContainerConfig;
    // upstream: <root-dir>/seccomp
    const seccompProfileRoot = posix.join(this.opts.rootDir, 'seccomp');
    try {
      const terminationMessageHostPath = c.terminationMessagePath
        ? await createTerminationMessageFileFor(podContainerDir(this.opts.rootDir, pod.metadata.uid!, c.name), restartCount)
        : undefined;
      const containerPodIPs = hostNetwork ? this.opts.hostIPs() : podIPs;
      let mounts: cri.MountInput[] | undefined;
      if (place.containerMounts) {
        // the environment again, for subPathExpr; generateContainerConfig builds it the same way
        const { envs } = makeEnvironment(pod, c, { nodeName: this.opts.nodeName, hostIPs: this.opts.hostIPs(), podIPs: containerPodIPs, getConfigMap: place.getConfigMap, getSecret: place.getSecret });
        mounts = await place.containerMounts(c, envs, containerPodIPs);
      }
      const imageUser = await getImageUser(this.opts.cri, imageRef);
      config = generateContainerConfig(pod, c, restartCount, {
        imageUser,
        mounts,
        terminationMessageHostPath,
        podIPs: containerPodIPs,
        hostIPs: this.opts.hostIPs(),
        nodeName: this.opts.nodeName,
        imageRef,
        podLogsDir: this.opts.podLogsDir,
        memoryCapacityBytes: this.opts.memoryCapacityBytes,
        getConfigMap: place.getConfigMap,
        getSecret: place.getSecret,
        seccompDefault: this.opts.seccompDefault === true,
        seccompProfileRoot,
      });
      if (ephemeral) applyTargetNamespace(config, targetContainerID(ephemeral, status));
      const seccomp = config.linux?.security_context?.seccomp;
      if (seccomp?.profile_type === 'Localhost' && seccomp.localhost_ref) {
        seccomp.localhost_ref = await confineLocalhostSeccompProfile(seccompProfileRoot, seccomp.localhost_ref);
      }
    } catch (err) {
      return { reason: Reasons.CreateContainerConfigError, message: (err as Error).message };
    }
    // upstream NamespacesForPod gives the containers the sandbox's user namespace too
    const userns = sandboxConfig.linux?.security_context?.namespace_options?.userns_options;
    const containerNs = config.linux?.security_context?.namespace_options;
    if (userns && containerNs) containerNs.userns_options = userns;
    await mkdir(`${sandboxConfig.log_directory}/${c.name}`, { recursive: true, mode: 0o755 }).catch(() => undefined);

    // A container created earlier but never started is replaced, not reused.
    if (previous && previous.state === 'created') {
      await this.opts.cri.removeContainer(previous.id).catch(() => undefined);
    }
    let containerID: string;
    const containerType = pod.spec.initContainers?.some((i) => i.name === c.name) ? 'init_container'
      : (pod.spec as { ephemeralContainers?: Array<{ name: string }> }).ephemeralContainers?.some((e) => e.name === c.name) ? 'ephemeral_container' : 'container';
    this.opts.onContainerStart?.(containerType);
    try {
      containerID = (await this.opts.cri.createContainer(sandboxID, config, sandboxConfig)).container_id;
    } catch (err) {
      this.opts.onContainerStart?.(containerType, grpcCodeName(err));
      return { reason: Reasons.CreateContainerError, message: (err as Error).message };
    }
    try {
      await this.opts.cri.startContainer(containerID);
    } catch (err) {
      this.opts.onContainerStart?.(containerType, grpcCodeName(err));
      return { reason: Reasons.RunContainerError, message: (err as Error).message };
    }
    this.opts.log.info('Started container', { pod: podFullName(pod), container: c.name, containerID, restartCount });
    this.opts.onContainerStarted?.(pod, c.name, containerID);
    if (c.lifecycle?.postStart) {
      const podIP = hostNetwork ? (this.opts.hostIPs()[0] ?? '') : (podIPs[0] ?? '');
      try {
        await this.opts.hooks.run({ pod, container: c, containerName: c.name, containerID, podIP }, c.lifecycle.postStart, pod.spec.terminationGracePeriodSeconds ?? 30);
      } catch (err) {
        const message = (err as Error).message;
        this.opts.log.warn('PostStartHook failed; killing the container', { pod: podFullName(pod), container: c.name, err: message });
        await this.opts.killer.killContainer(pod, { id: containerID, name: c.name }, c, podIP, undefined).catch(() => undefined);
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
}

export function minDefined(a: number | undefined, b: number): number {
  return a === undefined ? b : Math.min(a, b);
}
