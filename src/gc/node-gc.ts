// The kubelet's garbage collection loops (upstream StartGarbageCollection): container GC every
// minute, image GC every five minutes, both on the injected clock, and the CRI adapters they
// read the runtime through.

import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Container, PodSandbox } from '../runtime/cri-types.js';
import { KUBERNETES_CONTAINER_NAME_LABEL, KUBERNETES_POD_NAME_LABEL, KUBERNETES_POD_NAMESPACE_LABEL, KUBERNETES_POD_UID_LABEL } from '../runtime/labels.js';
import { IMAGE_GC_PERIOD_MS } from '../images/image-gc.js';
import type { Clock, Timer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import type { LeanGCLister } from './lean-lists.js';
import { CONTAINER_GC_PERIOD_MS, garbageCollectContainers, type ContainerGCOptions, type ContainerGCRuntime, type GCContainer, type GCSandbox } from './container-gc.js';

/** The CRI calls container GC makes. */
export interface ContainerGCCri {
  listContainers(): Promise<Container[]>;
  listPodSandbox(): Promise<PodSandbox[]>;
  removeContainer(id: string): Promise<void>;
  removePodSandbox(id: string): Promise<void>;
}

const nsToMs = (ns: string): number => Number(BigInt(ns || '0') / 1_000_000n);

/**
 * Containers and sandboxes as GC sees them: only those the kubelet labelled (a pod UID). With
 * `lean` the two lists are read through it (decoded on the wire, lean-lists.ts), else through `cri`.
 */
export function criContainerGCRuntime(cri: ContainerGCCri, podLogsDir: string, lean?: Pick<LeanGCLister, 'listContainers' | 'listSandboxes'>): ContainerGCRuntime {
  return {
    listContainers: async () => lean ? lean.listContainers() : (await cri.listContainers()).flatMap((c): GCContainer[] => {
      const podUID = c.labels[KUBERNETES_POD_UID_LABEL];
      const name = c.labels[KUBERNETES_CONTAINER_NAME_LABEL] ?? c.metadata?.name;
      if (!podUID || !name) return [];
      return [{ id: c.id, podUID, name, running: c.state === 'CONTAINER_RUNNING', createdAt: nsToMs(c.created_at), sandboxID: c.pod_sandbox_id }];
    }),
    listSandboxes: async () => lean ? lean.listSandboxes() : (await cri.listPodSandbox()).flatMap((s): GCSandbox[] => {
      const podUID = s.labels[KUBERNETES_POD_UID_LABEL] ?? s.metadata?.uid;
      if (!podUID) return [];
      return [{
        id: s.id, podUID, podName: s.labels[KUBERNETES_POD_NAME_LABEL] ?? s.metadata?.name ?? '',
        podNamespace: s.labels[KUBERNETES_POD_NAMESPACE_LABEL] ?? s.metadata?.namespace ?? '',
        ready: s.state === 'SANDBOX_READY', createdAt: nsToMs(s.created_at),
      }];
    }),
    removeContainer: (id) => cri.removeContainer(id),
    removeSandbox: (id) => cri.removePodSandbox(id),
    listPodLogDirs: async () => {
      const out = new Map<string, string>();
      let entries;
      try {
        entries = await readdir(podLogsDir, { withFileTypes: true });
      } catch {
        return out;
      }
      for (const e of entries) {
        // <namespace>_<name>_<uid>: neither namespace nor name holds an underscore
        const parts = e.name.split('_');
        if (e.isDirectory() && parts.length === 3 && parts[2]) out.set(join(podLogsDir, e.name), parts[2]);
      }
      return out;
    },
    removePodLogDir: (dir) => rm(dir, { recursive: true, force: true }),
  };
}

export interface GarbageCollectionOptions {
  clock: Clock;
  log: Logger;
  containerGC: ContainerGCOptions;
  imageGC?: { garbageCollect(): Promise<void> };
  containerPeriodMs?: number;
  imagePeriodMs?: number;
}

/** Starts both loops; returns their stop. */
export function startGarbageCollection(o: GarbageCollectionOptions): { stop(): void } {
  let running = true;
  const timers = new Set<Timer>();
  const every = (name: string, ms: number, fn: () => Promise<unknown>): void => {
    const arm = (): void => {
      const t = o.clock.setTimeout(() => {
        timers.delete(t);
        if (!running) return;
        void fn()
          .catch((err: unknown) => o.log.error(`${name} failed`, { err: (err as Error).message }))
          .finally(() => { if (running) arm(); });
      }, ms);
      timers.add(t);
    };
    arm();
  };
  every('Container garbage collection', o.containerPeriodMs ?? CONTAINER_GC_PERIOD_MS, () => garbageCollectContainers(o.containerGC));
  const image = o.imageGC;
  if (image) every('Image garbage collection', o.imagePeriodMs ?? IMAGE_GC_PERIOD_MS, () => image.garbageCollect());
  return {
    stop: () => {
      running = false;
      for (const t of timers) t.cancel();
      timers.clear();
    },
  };
}
