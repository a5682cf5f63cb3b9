// Doubles for building a Kubelet and its parts without a runtime: a KubeletRuntime that records
// calls and can hold a call until released, PLEG/sources/cgroup doubles, and dependencies.

import type { Pod } from '../../src/api/types.js';
import type { KubeletConfig, KubeletFlags } from '../../src/config/index.js';
import { defaultKubeletConfig } from '../../src/config/index.js';
import type { KubeletDependencies, KubeletPleg, PodSources, RuntimeHooks } from '../../src/kubelet/dependencies.js';
import type { PodCache } from '../../src/pleg/cache.js';
import type { KnownPod, PodLifecycleEvent, PodLifecycleEventGenerator } from '../../src/pleg/types.js';
import type { PodUpdate } from '../../src/sources/pod-config.js';
import type { KubeletRuntime, PodSyncResult, RuntimePodStatus } from '../../src/runtime/types.js';
import { Registry } from '../../src/metrics/registry.js';
import { RuntimeManager, type RuntimeManagerOptions } from '../../src/runtime/runtime-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import type { Logger } from '../../src/util/log.js';

export function loggerDouble(lines: string[] = []): Logger {
  const l: Logger = {
    info: (m) => void lines.push(`I ${m}`),
    warn: (m) => void lines.push(`W ${m}`),
    error: (m) => void lines.push(`E ${m}`),
    v: () => ({ info: () => undefined }),
    with: () => l,
  };
  return l;
}

/** Lets pending promise callbacks and immediates run. */
export async function settle(rounds = 10): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

/** Lets work run until cond holds (real fs calls take a few turns); fails after 5s. */
export async function until(cond: () => boolean, what = 'condition'): Promise<void> {
  const end = Date.now() + 5_000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

export function mkPod(uid: string, name = `pod-${uid}`, namespace = 'default'): Pod {
  return { metadata: { uid, name, namespace }, spec: { containers: [{ name: 'c', image: 'busybox' }] } };
}

export function emptyStatus(uid: string, name = `pod-${uid}`, namespace = 'default'): RuntimePodStatus {
  return { uid, name, namespace, ips: [], sandboxStatuses: [], containerStatuses: [], timestamp: 0 };
}

/** A promise with its resolve, for holding a call until the test lets it go. */
export interface Gate {
  promise: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((r) => { open = r; });
  return { promise, open };
}

/** A KubeletRuntime that records calls; `hold` makes a method wait on a gate. */
export class RuntimeRecorder implements KubeletRuntime {
  calls: string[] = [];
  stopped = false;
  hold: Partial<Record<'syncPod' | 'killPod' | 'getPodStatus', Gate>> = {};

  async getPodStatus(uid: string, name: string, namespace: string): Promise<RuntimePodStatus> {
    this.calls.push(`getPodStatus ${uid}`);
    await this.hold.getPodStatus?.promise;
    return emptyStatus(uid, name, namespace);
  }

  async syncPod(pod: Pod): Promise<PodSyncResult> {
    this.calls.push(`syncPod ${pod.metadata.uid}`);
    await this.hold.syncPod?.promise;
    return { startFailures: new Map(), errors: [] };
  }

  async killPod(pod: Pod | undefined, status: RuntimePodStatus): Promise<void> {
    this.calls.push(`killPod ${pod?.metadata.uid ?? status.uid}`);
    await this.hold.killPod?.promise;
  }

  async removePod(status: RuntimePodStatus): Promise<void> {
    this.calls.push(`removePod ${status.uid}`);
  }

  async removeContainer(id: string): Promise<void> {
    this.calls.push(`removeContainer ${id}`);
  }

  stop(): void {
    this.stopped = true;
  }

  gcBackoff(): void {
    this.calls.push('gcBackoff');
  }
}

export class PlegDouble implements PodLifecycleEventGenerator {
  known = new Map<string, KnownPod>();
  started = false;
  closed = false;
  start(): void { this.started = true; }
  stop(): void { this.started = false; }
  healthy(): { ok: boolean; message: string } { return { ok: true, message: 'ok' }; }
  knownPods(): ReadonlyMap<string, KnownPod> { return this.known; }
  /** What lastSeen() reports: when the last successful list started (0: none yet). */
  listedAt = 0;
  lastSeen(): number { return this.listedAt; }
  async relist(): Promise<void> {}
}

export class SourcesDouble implements PodSources {
  onUpdate!: (u: PodUpdate) => void;
  seen = true;
  stopped = false;
  startFileSource(): void {}
  startUrlSource(): void {}
  seenAllSources(): boolean { return this.seen; }
  async stop(): Promise<void> { this.stopped = true; }
}

export class CgroupsDouble {
  cgroups = new Map<string, string>();
  removed: string[] = [];
  podCgroupName(pod: Pod): string { return `/kubepods/pod${pod.metadata.uid}`; }
  async ensureExists(pod: Pod): Promise<string> { return this.podCgroupName(pod); }
  async remove(name: string): Promise<void> {
    this.removed.push(name);
    for (const [uid, n] of this.cgroups) if (n === name) this.cgroups.delete(uid);
  }
  async listPodCgroups(): Promise<Map<string, string>> { return new Map(this.cgroups); }
}

/** A pod as the PLEG knows it, with its containers' ids. */
export function knownPod(uid: string, containerIDs: string[]): KnownPod {
  return {
    uid, name: `pod-${uid}`, namespace: 'default', sandboxes: [],
    containers: containerIDs.map((id) => ({ id, name: 'c', state: 'CONTAINER_RUNNING', createdAt: 0 })),
  };
}

export interface Harness {
  deps: KubeletDependencies;
  config: KubeletConfig;
  flags: KubeletFlags;
  clock: FakeClock;
  runtime: RuntimeRecorder;
  pleg: PlegDouble;
  sources: SourcesDouble;
  cgroups: CgroupsDouble;
  cri: { closed: boolean; ready: boolean };
  logs: string[];
  /** What the kubelet gave the PLEG factory. */
  plegWiring?: { cache: PodCache; emit: (e: PodLifecycleEvent) => boolean };
  runtimeHooks?: RuntimeHooks;
}

export function harness(rootDir: string): Harness {
  const clock = new FakeClock();
  const logs: string[] = [];
  const runtime = new RuntimeRecorder();
  const pleg = new PlegDouble();
  const sources = new SourcesDouble();
  const cgroups = new CgroupsDouble();
  const cri = { closed: false, ready: true };
  const config = defaultKubeletConfig();
  config.podLogsDir = `${rootDir}/logs`;
  const flags: KubeletFlags = { rootDir, nodeIP: [], verbosity: 0, help: false, hostnameOverride: 'node-a' };
  const h: Harness = { config, flags, clock, runtime, pleg, sources, cgroups, cri, logs, deps: undefined as unknown as KubeletDependencies };
  h.deps = {
    clock,
    log: loggerDouble(logs),
    cri: {
      status: async () => ({ status: { conditions: [{ type: 'RuntimeReady', status: cri.ready, reason: '', message: '' }, { type: 'NetworkReady', status: true, reason: '', message: '' }] }, info: {} }),
      close: () => { cri.closed = true; },
    },
    metrics: new Registry(),
    cgroups,
    hostIPs: ['10.0.0.1'],
    memoryCapacityBytes: 1 << 30,
    runtime: (hooks) => {
      h.runtimeHooks = hooks;
      return runtime;
    },
    pleg: ({ cache, emit }): KubeletPleg => {
      h.plegWiring = { cache, emit };
      return { pleg, close: () => { pleg.closed = true; pleg.stop(); } };
    },
    podSources: ({ onUpdate }) => {
      sources.onUpdate = onUpdate;
      return sources;
    },
    // no `kubelet` user: the default ID range, whatever the host has
    subIDFiles: { passwd: `${rootDir}/no-passwd`, group: `${rootDir}/no-group`, subuid: `${rootDir}/no-subuid`, subgid: `${rootDir}/no-subgid` },
  };
  return h;
}

/** A RuntimeManager on this CRI double (only the calls a test makes need exist), with no image work and paths that are never touched. */
export function runtimeManagerOn(cri: Partial<RuntimeManagerOptions['cri']>, clock = new FakeClock(), images?: RuntimeManagerOptions['images']): RuntimeManager {
  return new RuntimeManager({
    cri: cri as RuntimeManagerOptions['cri'],
    images: images ?? { ensureImageExists: async () => 'sha256:x', gcBackoff: () => undefined },
    clock,
    log: loggerDouble(),
    nodeName: 'node-a',
    hostIPs: () => ['10.0.0.1'],
    memoryCapacityBytes: 1 << 30,
    podLogsDir: '/nonexistent/logs',
    rootDir: '/nonexistent/root',
    ensurePodCgroup: async () => '/kubepods/pod',
  });
}
