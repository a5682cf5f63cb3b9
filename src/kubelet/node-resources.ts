// Node resource management as the command wires it (upstream: the container manager's node
// allocatable, the eviction manager, StartGarbageCollection): the kubepods cgroup limited to
// allocatable, the eviction manager (admission, the memcg notifier, container and image GC as
// its node-level reclaim), and the periodic container and image GC loops.

import type { KubeletConfig, KubeletFlags } from '../config/index.js';
import { notImplementedMessage } from '../config/schema.js';
import { discoverCgroupMounts } from '../cgroups/index.js';
import { enforceNodeAllocatable, enforceReservedCgroup, nodeCapacity, podsCgroupLimits, RESERVED_ENFORCEMENT_KEYS } from '../cm/node-allocatable.js';
import { DbusSystemdUnits } from '../cm/systemd/units.js';
import { createEvictionManager, dedicatedImageFs, evictionHost } from '../eviction/build.js';
import type { EvictionManager } from '../eviction/eviction-manager.js';
import { createMemoryNotifier } from '../eviction/memory-notifier.js';
import { garbageCollectContainers, type ContainerGCOptions } from '../gc/container-gc.js';
import { criContainerGCRuntime, startGarbageCollection } from '../gc/node-gc.js';
import { LeanGCLister } from '../gc/lean-lists.js';
import { ImageGCManager, runtimeSandboxImage } from '../images/image-gc.js';
import { loadOomNative } from '../oom/oom-watcher.js';
import type { CriClient } from '../runtime/cri-client.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { Kubelet } from './kubelet.js';
import { KubeletError } from '../util/errors.js';

export interface NodeResourcesOptions {
  config: KubeletConfig;
  flags: KubeletFlags;
  cri: CriClient;
  clock: Clock;
  log: Logger;
  memoryCapacityBytes: number;
  kubelet: Kubelet;
  stats: Parameters<typeof evictionHost>[1];
}

export interface NodeResources {
  eviction: EvictionManager;
  imageGC: ImageGCManager;
  /** Starts eviction and the GC loops (after the stats provider). */
  start(): void;
  stop(): void;
}

/** Enforces node allocatable and builds the eviction manager and GC; throws on a bad setting. */
export async function setupNodeResources(o: NodeResourcesOptions): Promise<NodeResources> {
  const { config, flags, cri, clock, log, kubelet, stats } = o;
  const mounts = await discoverCgroupMounts();
  const systemd = config.cgroupDriver === 'systemd' ? new DbusSystemdUnits() : undefined;
  await enforceNodeAllocatable({
    mounts,
    cgroupRoot: config.cgroupRoot ?? '',
    limits: podsCgroupLimits(await nodeCapacity(o.memoryCapacityBytes), [config.systemReserved, config.kubeReserved], config.enforceNodeAllocatable),
    log,
    ...(systemd ? { systemd } : {}),
  });
  // The reserved cgroups (validation insists on their names when their keys are listed).
  for (const key of config.enforceNodeAllocatable) {
    if (key === 'pods' || key === 'none') continue;
    const k = RESERVED_ENFORCEMENT_KEYS[key as keyof typeof RESERVED_ENFORCEMENT_KEYS];
    if (!k) {
      log.warn(notImplementedMessage(`enforceNodeAllocatable key ${JSON.stringify(key)}`));
      continue;
    }
    const cgroupName = k.which === 'system' ? config.systemReservedCgroup : config.kubeReservedCgroup;
    const reserved = (k.which === 'system' ? config.systemReserved : config.kubeReserved) ?? {};
    try {
      await enforceReservedCgroup({ mounts, cgroupName, reserved, compressibleOnly: k.compressibleOnly, log, ...(systemd ? { systemd } : {}) });
    } catch (err) {
      // upstream fails the start here, with this wording
      throw new KubeletError('ERR_RESERVED_CGROUP', `Failed to enforce ${k.which === 'system' ? 'System' : 'Kube'} Reserved Cgroup Limits on "${cgroupName}": ${(err as Error).message}`, { cause: err });
    }
  }
  const imageGC = new ImageGCManager({
    runtime: cri,
    imageFsStats: async () => {
      const fs = (await stats.refresh()).summary.node.runtime?.imageFs;
      return fs?.capacityBytes !== undefined && fs.availableBytes !== undefined ? { capacityBytes: fs.capacityBytes, availableBytes: fs.availableBytes } : undefined;
    },
    policy: {
      highThresholdPercent: config.imageGCHighThresholdPercent,
      lowThresholdPercent: config.imageGCLowThresholdPercent,
      minAgeMs: config.imageMinimumGCAge,
      maxAgeMs: config.imageMaximumGCAge,
    },
    clock,
    log,
    registry: kubelet.metrics,
    recordEvent: (type, reason, message) => kubelet.events.record(`Node ${kubelet.nodeName}`, type, reason, message),
    // --pod-infra-container-image (deprecated) names the image to keep; else the runtime's sandbox image
    sandboxImage: async () => flags.podInfraContainerImage ?? runtimeSandboxImage(cri),
  });
  // GC's lists decoded on the wire (lean-lists.ts): protobufjs objects of every container once a minute otherwise
  const gcLister = new LeanGCLister({ runtimeEndpoint: cri.runtimeEndpoint, timeoutMs: cri.timeoutMs, maxMessageBytes: cri.maxMessageBytes, clock });
  const containerGC: ContainerGCOptions = {
    runtime: criContainerGCRuntime({
      listContainers: () => cri.listContainers(),
      listPodSandbox: () => cri.listPodSandbox(),
      removeContainer: (id) => cri.removeContainer(id),
      removePodSandbox: (id) => cri.removePodSandbox(id),
    }, config.podLogsDir, gcLister),
    policy: flags.containerGCPolicy,
    state: { shouldPodContentBeRemoved: (uid) => kubelet.podContentRemovable(uid), shouldPodRuntimeBeRemoved: (uid) => kubelet.podRuntimeRemovable(uid) },
    allSourcesReady: () => kubelet.sourcesReady(),
    now: () => clock.now(),
    log,
  };
  const podsCgroupName = kubelet.podsCgroupName();
  const eviction = createEvictionManager(config, o.memoryCapacityBytes, {
    host: evictionHost(kubelet, stats),
    clock,
    log,
    registry: kubelet.metrics,
    podsCgroupName,
    containerGC: async () => void (await garbageCollectContainers(containerGC, true)),
    imageGC: async () => void (await imageGC.deleteUnusedImages()),
    dedicatedImageFs: await dedicatedImageFs(cri, flags.rootDir),
    memcgNotifier: (onCross) => {
      const enabled = config.kernelMemcgNotification;
      const r = createMemoryNotifier({ enabled, native: enabled ? loadOomNative() : {}, mounts, podsCgroupName, clock, log, onCross });
      if (!r.notifier && enabled) log.warn('Eviction manager: kernel memory notification unavailable; polling only', { reason: r.reason });
      return r.notifier;
    },
  });
  kubelet.addPodAdmitHandler((pod) => eviction.admit(pod));
  kubelet.setNodePressureSource(() => eviction.pressure());
  let gc: { stop(): void } | undefined;
  return {
    eviction,
    imageGC,
    start: () => {
      // first, so that eviction's image reclaim finds the images of before the start already aged
      imageGC.start().catch((err: unknown) => log.warn('Image GC: initial image detection failed', { err: (err as Error).message }));
      eviction.start();
      gc ??= startGarbageCollection({ clock, log, containerGC, imageGC });
    },
    stop: () => {
      eviction.stop();
      gc?.stop();
      gcLister.close();
    },
  };
}
