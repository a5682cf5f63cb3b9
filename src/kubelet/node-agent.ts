// The kubelet as a node of a cluster (only with --kubeconfig): registration and node status
// (NodeStatusManager, every nodeStatusUpdateFrequency, reading the Node from a watch of it as
// upstream's node informer) and the node lease (NodeLeaseController, every quarter of
// nodeLeaseDurationSeconds), all on the injected clock. Neither ever blocks
// the syncLoop, and stop() abandons calls in flight instead of waiting on the API server.

import { RestClient } from '../client/rest.js';
import { Reflector } from '../client/reflector.js';
import type { KubeletConfig, KubeletFlags } from '../config/index.js';
import { NodeLeaseController } from '../nodestatus/lease.js';
import { readMachineInfo } from '../nodestatus/machine-info.js';
import { RuntimeState, type RuntimeConditionLike } from '../nodestatus/runtime-state.js';
import { NodeStatusManager } from '../nodestatus/status-manager.js';
import type { Node } from '../nodestatus/types.js';
import type { NodeRuntimeHandlerInfo } from '../nodestatus/setters.js';
import type { Clock, Timer } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { NodeFacts } from './dependencies.js';
import { KUBERNETES_VERSION, parseVersionFlag } from '../version.js';


/** How long stop() waits for the status and lease loops to notice the abort. */
export const NODE_AGENT_STOP_MS = 1_000;

/**
 * The version the Node reports (nodeInfo.kubeletVersion): the Kubernetes release kubelet-ts
 * implements (src/version.ts; kubelet-ts's own build is the Node's kubelet-ts.io/build annotation).
 */
export const KUBELET_VERSION = KUBERNETES_VERSION;

export type NodeEventRecorder = (type: 'Normal' | 'Warning', reason: string, message: string) => void;

export interface NodeAgentOptions {
  client: RestClient;
  nodeName: string;
  config: KubeletConfig;
  flags: KubeletFlags;
  clock: Clock;
  log: Logger;
  /** Machine, runtime version and images (default: the host and nothing else). */
  facts?: NodeFacts;
  /** The hostIPs the kubelet uses for pods (--node-ip or the detected one). */
  hostIPs?: string[];
  /** PLEG's health (`PLEG is not healthy: ...` keeps the node NotReady). */
  plegHealthy?: () => { ok: boolean; message: string };
  recordEvent: NodeEventRecorder;
  /** The eviction manager's pressure (MemoryPressure, DiskPressure, PIDPressure); false without one. */
  pressure?: () => { memory: boolean; disk: boolean; pid: boolean } | undefined;
  /** The runtime's handlers from its last ready CRI Status (status.runtimeHandlers). */
  runtimeHandlers?: () => NodeRuntimeHandlerInfo[] | undefined;
  /** The runtime's features from its last ready CRI Status (status.features). */
  runtimeFeatures?: () => { supplementalGroupsPolicy: boolean } | null | undefined;
}

export class NodeAgent {
  readonly runtimeState: RuntimeState;
  readonly status: NodeStatusManager;
  readonly lease: NodeLeaseController;
  /** upstream's node informer: this Node as a watch last saw it, so a status sync needs no GET. */
  readonly nodeReflector: Reflector;
  /** upstream's heartbeat client: no client-side rate limit, each call bounded by the update period. */
  readonly heartbeatClient: RestClient;
  private readonly o: NodeAgentOptions;
  private ctl: AbortController | undefined;
  private loops: Promise<unknown>[] = [];

  constructor(o: NodeAgentOptions) {
    this.o = o;
    const { config, flags, clock, log, nodeName } = o;
    // As upstream: heartbeats never queue behind other API calls, and a hung API server costs
    // one update period (at most the lease duration), not a stalled loop.
    this.heartbeatClient = new RestClient(o.client.config, {
      clock,
      qps: 0,
      timeoutMs: Math.min(config.nodeStatusUpdateFrequency, config.nodeLeaseDurationSeconds * 1000),
      userAgent: 'kubelet-ts',
    });
    this.runtimeState = new RuntimeState(clock);
    if (o.plegHealthy) this.runtimeState.addHealthCheck({ name: 'PLEG', check: o.plegHealthy });
    const facts = o.facts ?? {
      machineInfo: () => readMachineInfo({ rootDir: flags.rootDir }),
      runtimeVersion: () => Promise.reject(new Error('no CRI Version answer')),
      images: async () => [],
    };
    this.nodeReflector = new Reflector({
      client: o.client,
      path: '/api/v1/nodes',
      fieldSelector: `metadata.name=${nodeName}`,
      handler: () => undefined,
      clock,
      log,
    });
    const nodeEvent = (type: 'Normal' | 'Warning', reason: string, message?: string) =>
      o.recordEvent(type, reason, message ?? `Node ${nodeName} status is now: ${reason}`);
    this.status = new NodeStatusManager({
      client: this.heartbeatClient,
      nodeName,
      // upstream: the hostname label and address are the node name unless overridden
      hostname: nodeName,
      source: {
        machineInfo: () => facts.machineInfo(),
        runtimeVersion: () => facts.runtimeVersion(),
        images: () => facts.images(),
        readyErrors: () => this.runtimeState.readyErrors(),
        pressure: () => o.pressure?.() ?? { memory: false, disk: false, pid: false },
        runtimeHandlers: () => o.runtimeHandlers?.(),
        runtimeFeatures: () => o.runtimeFeatures?.(),
      },
      nodeFeatureGates: { nodeSwap: config.featureGates.NodeSwap ?? true, supplementalGroupsPolicy: config.featureGates.SupplementalGroupsPolicy ?? true },
      ...(flags.cloudProvider === 'external' ? { externalCloudProvider: { nodeIPs: flags.nodeIP } } : {}),
      runtimeHandlerGates: {
        recursiveReadOnlyMounts: config.featureGates.RecursiveReadOnlyMounts ?? true,
        userNamespaces: config.featureGates.UserNamespacesSupport ?? true,
      },
      // --version=vX.Y.Z sets the reported version, as upstream's verflag
      kubeletVersion: parseVersionFlag(flags.version).override ?? KUBELET_VERSION,
      // The secured kubelet API's port, where the API server proxies nodes/proxy, logs and exec.
      kubeletPort: config.port,
      nodeIPs: flags.nodeIP.length ? flags.nodeIP : (o.hostIPs ?? []),
      maxPods: config.maxPods,
      kubeReserved: config.kubeReserved,
      systemReserved: config.systemReserved,
      evictionHard: config.evictionHard,
      localStorageCapacityIsolation: config.localStorageCapacityIsolation,
      nodeStatusMaxImages: config.nodeStatusMaxImages,
      updateFrequencyMs: config.nodeStatusUpdateFrequency,
      reportFrequencyMs: config.nodeStatusReportFrequency,
      ...(config.registerNode ? {
        registration: {
          nodeLabels: flags.nodeLabels ?? {},
          registerWithTaints: config.registerWithTaints.map((t) => ({ ...t })),
          externalCloudProvider: flags.cloudProvider === 'external',
          // RegisteredNode once this kubelet created its Node (not for a reconciled one).
          onRegistered: (_node: Node, created: boolean) => {
            if (created) o.recordEvent('Normal', 'RegisteredNode', `Node ${nodeName} registered with the API server`);
          },
        },
      } : {}),
      nodeLister: () => this.nodeReflector.items()[0] as Node | undefined,
      recordEvent: nodeEvent,
      // upstream: repeated heartbeat failures close the connections, so a restarted API server is reached anew.
      onRepeatedHeartbeatFailure: () => this.heartbeatClient.close(),
      clock,
      log,
    });
    this.lease = new NodeLeaseController({
      client: this.heartbeatClient,
      nodeName,
      clock,
      leaseDurationSeconds: config.nodeLeaseDurationSeconds,
      onRepeatedHeartbeatFailure: () => this.heartbeatClient.close(),
      log,
    });
  }

  /** The CRI Status answer (or its failure), as the kubelet's runtime check gets it every 5 s. */
  observeRuntimeStatus(conditions: RuntimeConditionLike[] | Error): void {
    const before = this.runtimeState.runtimeErrors().length === 0;
    this.runtimeState.observeRuntimeStatus(conditions);
    // The runtime just came up: report Ready now rather than a period later.
    if (!before && this.runtimeState.runtimeErrors().length === 0) this.status.syncSoon();
  }

  /** The Node as the API server last returned it (undefined before registration). */
  node(): Node | undefined {
    return this.status.latest ?? this.status.registration?.registered;
  }

  start(): void {
    if (this.ctl) return;
    const ctl = (this.ctl = new AbortController());
    const { log } = this.o;
    this.loops = [this.status.run(ctl.signal), this.lease.run(ctl.signal), this.nodeReflector.run(ctl.signal)].map((p) => p.catch((err) => { if (!ctl.signal.aborted) log.error('Node agent loop ended', { err: errorMessage(err) }); }));
    log.info('Node agent started', { node: this.o.nodeName, registerNode: this.o.config.registerNode, leaseDurationSeconds: this.lease.leaseDurationSeconds });
  }

  /** Aborts every call in flight and waits at most `timeoutMs` for the loops to end. */
  async stop(timeoutMs = NODE_AGENT_STOP_MS): Promise<void> {
    const ctl = this.ctl;
    if (!ctl) return;
    ctl.abort();
    let timer: Timer | undefined;
    const expired = new Promise<boolean>((resolve) => { timer = this.o.clock.setTimeout(() => resolve(false), timeoutMs); });
    const done = await Promise.race([Promise.all(this.loops).then(() => true), expired]);
    timer?.cancel();
    if (!done) this.o.log.warn('Node status and lease loops still busy at shutdown; abandoning them', { timeoutMs });
    this.heartbeatClient.close();
  }
}
