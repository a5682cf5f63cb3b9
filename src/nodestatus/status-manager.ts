// The node status manager, as upstream's syncNodeStatus: every nodeStatusUpdateFrequency (10 s,
// jittered by 4 %) register when needed, then compute the status from the Node as last read;
// patch nodes/<name>/status when it changed (heartbeats aside) or when nodeStatusReportFrequency
// (5 min) passed since the last report. Up to 5 tries per sync, each after the first reading
// the Node fresh from the API server (so a conflict or a stale copy cures itself).

import type { RestClient } from '../client/rest.js';
import { realClock, type Clock, type Timer } from '../util/clock.js';
import { KubeletError, errorMessage } from '../util/errors.js';
import { rootLogger, type Logger } from '../util/log.js';
import { nodeIPCandidates } from './machine-info.js';
import { nodeStatusPatch } from './node-patch.js';
import { initialNode, LABEL_ARCH, LABEL_OS, NodeRegistration, type InitialNodeOptions } from './registration.js';
import {
  allocatableReservation, DEFAULT_NODE_STATUS_MAX_IMAGES, DISK_PRESSURE, goArch, goOS, MEMORY_PRESSURE, nodeAddresses, nodeImages,
  nodeStatusHasChanged, PID_PRESSURE, setDaemonEndpoints, setMachineInfo, setPressureCondition, setReadyCondition, setRuntimeHandlers, setVersionInfo, type NodeRuntimeHandlerInfo,
  type EventRecorder, type MachineInfo, type NodeImage,
} from './setters.js';
import type { Node, NodeAddress, ResourceList } from './types.js';
import { externalCloudProviderAddresses, setNodeFeatures, setSwapStatus } from './node-features.js';

/**
 * What the kubelet tells the node status: machine facts, the CRI Version answer, what keeps the
 * node from Ready (RuntimeState.readyErrors()), images, and pressure (false until eviction exists).
 */
export interface NodeStatusSource {
  machineInfo(): Promise<MachineInfo>;
  /** CRI Version: runtime_name and runtime_version. */
  runtimeVersion(): Promise<{ runtimeName: string; runtimeVersion: string }>;
  readyErrors(): string[];
  images(): Promise<NodeImage[]>;
  pressure?(): { memory: boolean; disk: boolean; pid: boolean };
  /** The runtime's handlers from its last ready CRI Status (undefined before one). */
  runtimeHandlers?(): NodeRuntimeHandlerInfo[] | undefined;
  /** The runtime's features from its last ready CRI Status (undefined/null: none sent). */
  runtimeFeatures?(): { supplementalGroupsPolicy: boolean } | null | undefined;
}

export interface NodeStatusManagerOptions {
  client: RestClient;
  nodeName: string;
  hostname: string;
  source: NodeStatusSource;
  kubeletVersion: string;
  /** The kubelet API port (daemonEndpoints.kubeletEndpoint.Port). */
  kubeletPort: number;
  /** --node-ip ([] = find one for the node name). */
  nodeIPs?: string[];
  maxPods?: number;
  podsPerCore?: number;
  kubeReserved?: ResourceList;
  systemReserved?: ResourceList;
  evictionHard?: Record<string, string>;
  /** false: no ephemeral-storage capacity, and Ready does not require it (upstream). */
  localStorageCapacityIsolation?: boolean;
  nodeStatusMaxImages?: number;
  /** The RecursiveReadOnlyMounts and UserNamespacesSupport gates (both on by default): runtimeHandlers is set when either is. */
  runtimeHandlerGates?: { recursiveReadOnlyMounts: boolean; userNamespaces: boolean };
  /** The NodeSwap and SupplementalGroupsPolicy gates (both on by default): nodeInfo.swap and status.features. */
  nodeFeatureGates?: { nodeSwap: boolean; supplementalGroupsPolicy: boolean };
  /** --cloud-provider=external, with the --node-ip values as given ([] when none was). */
  externalCloudProvider?: { nodeIPs: string[] };
  /** nodeStatusUpdateFrequency in ms (10 s). */
  updateFrequencyMs?: number;
  /** nodeStatusReportFrequency in ms (5 min). */
  reportFrequencyMs?: number;
  /** Jitter factor of the sync period (upstream 0.04) and its random source. */
  jitter?: number;
  random?: () => number;
  /** registerNode: register before the first status update, with these settings. */
  registration?: Omit<InitialNodeOptions, 'nodeName' | 'hostname'> & { resetExtendedResources?: boolean; onRegistered?: (node: Node, created: boolean) => void };
  /** The Node as a watch of it last saw it (upstream's node lister); absent: a GET every sync. */
  nodeLister?: () => Node | undefined;
  /** Addresses the node name resolves to on this host (default: DNS and interfaces). */
  ipCandidates?: () => Promise<string[]>;
  recordEvent?: EventRecorder;
  /** Called after repeated failures in one sync (upstream: close the API connections). */
  onRepeatedHeartbeatFailure?: () => void;
  clock?: Clock;
  log?: Logger;
}

/** Upstream nodeStatusUpdateRetry. */
export const NODE_STATUS_UPDATE_RETRY = 5;

export class NodeStatusManager {
  /** The addresses last computed for the node (the serving certificate's names, as upstream's getLastObservedNodeAddresses). */
  lastObservedAddresses: NodeAddress[] = [];
  readonly registration: NodeRegistration | undefined;
  private readonly o: NodeStatusManagerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly path: string;
  private lastStatusReport = Number.NEGATIVE_INFINITY;
  private wake: (() => void) | undefined;
  /** Syncs finished by run() (tests). */
  syncs = 0;
  /** The Node as the last successful patch returned it. */
  latest: Node | undefined;

  constructor(o: NodeStatusManagerOptions) {
    this.o = o;
    this.clock = o.clock ?? realClock;
    this.log = (o.log ?? rootLogger).with({ node: o.nodeName });
    this.path = `/api/v1/nodes/${encodeURIComponent(o.nodeName)}`;
    if (o.registration) {
      this.registration = new NodeRegistration({
        client: o.client, clock: this.clock, log: this.log, initialNode: () => this.initialNode(),
        ...(o.registration.resetExtendedResources !== undefined ? { resetExtendedResources: o.registration.resetExtendedResources } : {}),
        ...(o.registration.onRegistered ? { onRegistered: o.registration.onRegistered } : {}),
      });
    }
  }

  get updateFrequencyMs(): number {
    return this.o.updateFrequencyMs ?? 10_000;
  }

  get reportFrequencyMs(): number {
    return this.o.reportFrequencyMs ?? 300_000;
  }

  /** The Node to register: initial metadata and spec, status computed. */
  async initialNode(): Promise<Node> {
    const { resetExtendedResources: _, onRegistered: __, ...reg } = this.o.registration ?? {};
    const node = initialNode({ ...reg, nodeName: this.o.nodeName, hostname: this.o.hostname });
    await this.setNodeStatus(node);
    return node;
  }

  /** Runs every setter in upstream's order on `node`; a setter that fails is logged, the others still run. */
  async setNodeStatus(node: Node): Promise<void> {
    const o = this.o;
    const now = this.clock.now();
    const [machine, runtime, images, candidates] = await Promise.all([
      o.source.machineInfo().catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))),
      o.source.runtimeVersion().catch((e: unknown) => { this.log.warn('cannot get the container runtime version', { err: errorMessage(e) }); return undefined; }),
      o.source.images().catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))),
      this.needsCandidates() ? (o.ipCandidates ?? (() => nodeIPCandidates(o.nodeName)))().catch(() => []) : Promise.resolve([]),
    ]);
    const status = (node.status ??= {});
    const cloudOwnsAddresses = externalCloudProviderAddresses(node, { externalCloudProvider: o.externalCloudProvider !== undefined, nodeIPs: o.externalCloudProvider?.nodeIPs ?? [] });
    try {
      if (!cloudOwnsAddresses) status.addresses = nodeAddresses({ nodeIPs: o.nodeIPs ?? [], hostname: o.hostname, candidates });
      this.lastObservedAddresses = status.addresses ?? [];
    } catch (err) {
      this.log.error('Failed to set some node status fields', { err: errorMessage(err) });
    }
    if (machine instanceof Error) this.log.error('Error getting machine info', { err: machine.message });
    setMachineInfo(node, machine, {
      maxPods: o.maxPods ?? 110, podsPerCore: o.podsPerCore ?? 0, recordEvent: o.recordEvent, localStorageCapacityIsolation: o.localStorageCapacityIsolation,
      reserved: (capacity) => allocatableReservation(capacity, [o.systemReserved, o.kubeReserved], o.evictionHard),
    });
    if (!(machine instanceof Error)) {
      setSwapStatus(node, machine.swapCapacityBytes, o.nodeFeatureGates?.nodeSwap ?? true);
      setVersionInfo(node, { kernelVersion: machine.kernelVersion, osImage: machine.osImage, runtime, kubeletVersion: o.kubeletVersion });
    }
    setDaemonEndpoints(node, o.kubeletPort);
    if (images instanceof Error) {
      delete status.images;
      this.log.error('Failed to set some node status fields', { err: `error getting image list: ${images.message}` });
    } else {
      const list = nodeImages(images, o.nodeStatusMaxImages ?? DEFAULT_NODE_STATUS_MAX_IMAGES);
      if (list) status.images = list;
      else delete status.images;
    }
    const p = o.source.pressure?.() ?? { memory: false, disk: false, pid: false };
    setPressureCondition(node, MEMORY_PRESSURE, p.memory, now, o.recordEvent);
    setPressureCondition(node, DISK_PRESSURE, p.disk, now, o.recordEvent);
    setPressureCondition(node, PID_PRESSURE, p.pid, now, o.recordEvent);
    setReadyCondition(node, o.source.readyErrors(), now, o.recordEvent, { localStorageCapacityIsolation: o.localStorageCapacityIsolation });
    setRuntimeHandlers(node, o.source.runtimeHandlers?.(), o.runtimeHandlerGates);
    setNodeFeatures(node, o.source.runtimeFeatures?.(), o.nodeFeatureGates?.supplementalGroupsPolicy ?? true);
  }

  private needsCandidates(): boolean {
    if (this.o.externalCloudProvider) return false;
    const ip = this.o.nodeIPs?.[0];
    return !ip || ip === '0.0.0.0' || ip === '::';
  }

  /** Syncs every update period (jittered, measured from the end of the last sync) until aborted. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.sync(signal).catch((err) => {
        if (!signal.aborted) this.log.error('Unable to update node status', { err: errorMessage(err) });
      });
      this.syncs++;
      if (signal.aborted) break;
      const jitter = this.o.jitter ?? 0.04;
      await this.sleep(this.updateFrequencyMs * (1 + jitter * (this.o.random ?? Math.random)()), signal);
    }
  }

  /** Starts the next sync now (e.g. the runtime just became ready: report it without waiting the period). */
  syncSoon(): void {
    this.wake?.();
  }

  /** One sync: register first when asked to, then update the status. */
  async sync(signal?: AbortSignal): Promise<void> {
    if (this.registration) {
      const node = await this.registration.register(signal);
      if (!node) return;
      this.latest ??= node;
    }
    await this.updateNodeStatus(signal);
  }

  async updateNodeStatus(signal?: AbortSignal): Promise<void> {
    for (let i = 0; i < NODE_STATUS_UPDATE_RETRY; i++) {
      try {
        await this.tryUpdateNodeStatus(i, signal);
        return;
      } catch (err) {
        if (signal?.aborted) throw err;
        if (i > 0) this.o.onRepeatedHeartbeatFailure?.();
        this.log.error('Error updating node status, will retry', { err: errorMessage(err), attempt: i + 1 });
      }
    }
    throw new KubeletError('ERR_NODE_STATUS_UPDATE', `update of node ${this.o.nodeName} status exceeds retry count (${NODE_STATUS_UPDATE_RETRY})`);
  }

  /** One try: read the Node (the lister's copy first, fresh after a failure), compute, patch when due. */
  async tryUpdateNodeStatus(tryNumber: number, signal?: AbortSignal): Promise<void> {
    const cached = tryNumber === 0 ? this.o.nodeLister?.() : undefined;
    const original = cached ?? await this.o.client.get<Node>(this.path, { signal, maxRetries: 0 });
    const node = structuredClone(original);
    const labels = (node.metadata.labels ??= {});
    let labelsChanged = false;
    for (const [k, v] of [[LABEL_OS, goOS()], [LABEL_ARCH, goArch()]] as const) {
      if (labels[k] !== v) { labels[k] = v; labelsChanged = true; }
    }
    await this.setNodeStatus(node);
    const changed = labelsChanged || nodeStatusHasChanged(original.status, node.status);
    if (!changed && this.clock.now() - this.lastStatusReport < this.reportFrequencyMs) return;
    const patch = nodeStatusPatch(original, node);
    // Nothing differs, heartbeats included: the API server holds this very status (as just registered).
    if (!patch) {
      this.lastStatusReport = this.clock.now();
      return;
    }
    this.latest = await this.o.client.patch<Node>(`${this.path}/status`, 'strategic', patch, { signal, maxRetries: 0 });
    this.lastStatusReport = this.clock.now();
  }

  private sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      let timer: Timer | undefined;
      const done = () => {
        timer?.cancel();
        signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      timer = this.clock.setTimeout(done, ms);
      this.wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
