// Node registration, as upstream's registerWithAPIServer: build the initial Node (default
// labels, --node-labels, registerWithTaints, the controller-managed attach-detach annotation,
// status filled), create it; when it already exists, get it and reconcile what the kubelet owns
// (attach-detach annotation, default labels, capacity of extended resources and huge pages)
// with one status patch instead of a duplicate. Retries sleep 100 ms doubling to 7 s.

import type { RestClient } from '../client/rest.js';
import { isAlreadyExists } from '../client/errors.js';
import { parseQuantity } from '../api/quantity.js';
import { realClock, type Clock } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import { rootLogger, type Logger } from '../util/log.js';
import { nodeStatusPatch } from './node-patch.js';
import { goArch, goOS } from './setters.js';
import { BUILD_ANNOTATION, KUBELET_TS_BUILD } from '../version.js';
import type { Node, ResourceList, Taint } from './types.js';

export const LABEL_HOSTNAME = 'kubernetes.io/hostname';
export const LABEL_OS = 'kubernetes.io/os';
export const LABEL_ARCH = 'kubernetes.io/arch';
export const LABEL_INSTANCE_TYPE = 'node.kubernetes.io/instance-type';
export const CONTROLLER_MANAGED_ATTACH_ANNOTATION = 'volumes.kubernetes.io/controller-managed-attach-detach';

/** The labels the kubelet keeps in step on an existing Node (upstream updateDefaultLabels). */
const defaultLabels = [
  LABEL_HOSTNAME, 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region',
  'failure-domain.beta.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/region',
  LABEL_INSTANCE_TYPE, 'beta.kubernetes.io/instance-type', LABEL_OS, LABEL_ARCH,
  'node.kubernetes.io/windows-build', 'beta.kubernetes.io/os', 'beta.kubernetes.io/arch',
];

export interface InitialNodeOptions {
  nodeName: string;
  /** The hostname (--hostname-override or the machine's), for the hostname label. */
  hostname: string;
  /** --node-labels: set over the defaults. */
  nodeLabels?: Record<string, string>;
  /** registerWithTaints. */
  registerWithTaints?: Taint[];
  /** --register-schedulable (default true): false makes the node unschedulable and taints it so. */
  registerSchedulable?: boolean;
  /** enableControllerAttachDetach (default true). */
  enableControllerAttachDetach?: boolean;
  /** Only where known (a cloud provider's instance type): sets the instance-type labels. */
  instanceType?: string;
  providerID?: string;
  /** --cloud-provider=external: registered with the uninitialized taint the cloud controller removes. */
  externalCloudProvider?: boolean;
  os?: string;
  arch?: string;
}

/** The Node the kubelet registers, before its status is filled (upstream initialNode). */
export function initialNode(o: InitialNodeOptions): Node {
  const os = o.os ?? goOS();
  const arch = o.arch ?? goArch();
  const schedulable = o.registerSchedulable ?? true;
  const node: Node = {
    apiVersion: 'v1', kind: 'Node',
    metadata: {
      name: o.nodeName,
      labels: { [LABEL_HOSTNAME]: o.hostname, [LABEL_OS]: os, [LABEL_ARCH]: arch, 'beta.kubernetes.io/os': os, 'beta.kubernetes.io/arch': arch },
    },
    spec: schedulable ? {} : { unschedulable: true },
  };
  const taints: Taint[] = [...(o.registerWithTaints ?? [])];
  if (!schedulable && !taints.some((t) => t.key === 'node.kubernetes.io/unschedulable' && t.effect === 'NoSchedule')) {
    taints.push({ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' });
  }
  if (o.externalCloudProvider) taints.push({ key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' });
  if (taints.length) node.spec!.taints = taints;
  if (o.enableControllerAttachDetach ?? true) node.metadata.annotations = { [CONTROLLER_MANAGED_ATTACH_ANNOTATION]: 'true' };
  // kubelet-ts's own build (nodeInfo.kubeletVersion names the Kubernetes release it implements)
  (node.metadata.annotations ??= {})[BUILD_ANNOTATION] = KUBELET_TS_BUILD;
  Object.assign(node.metadata.labels!, o.nodeLabels ?? {});
  if (o.providerID) node.spec!.providerID = o.providerID;
  if (o.instanceType) {
    node.metadata.labels![LABEL_INSTANCE_TYPE] = o.instanceType;
    node.metadata.labels!['beta.kubernetes.io/instance-type'] = o.instanceType;
  }
  return node;
}

// ---- reconciling an existing Node (each mutates `existing`, true when it changed it) ----

export function reconcileAttachDetachAnnotation(initial: Node, existing: Node): boolean {
  const want = initial.metadata.annotations?.[CONTROLLER_MANAGED_ATTACH_ANNOTATION];
  const have = existing.metadata.annotations?.[CONTROLLER_MANAGED_ATTACH_ANNOTATION];
  if ((want ?? '') === (have ?? '')) return false;
  if (want === undefined) delete existing.metadata.annotations![CONTROLLER_MANAGED_ATTACH_ANNOTATION];
  else (existing.metadata.annotations ??= {})[CONTROLLER_MANAGED_ATTACH_ANNOTATION] = want;
  return true;
}

/** The build annotation kept in step on an existing Node (a kubelet-ts upgrade shows at once). */
export function reconcileBuildAnnotation(initial: Node, existing: Node): boolean {
  const want = initial.metadata.annotations?.[BUILD_ANNOTATION];
  if (want === undefined || existing.metadata.annotations?.[BUILD_ANNOTATION] === want) return false;
  (existing.metadata.annotations ??= {})[BUILD_ANNOTATION] = want;
  return true;
}

export function updateDefaultLabels(initial: Node, existing: Node): boolean {
  const labels = (existing.metadata.labels ??= {});
  let changed = false;
  for (const l of defaultLabels) {
    const want = initial.metadata.labels?.[l];
    if (want === undefined) continue;
    if (labels[l] !== want) {
      labels[l] = want;
      changed = true;
    }
    if (labels[l] === '') delete labels[l];
  }
  return changed;
}

/** Capacity and allocatable copied from the initial Node where the existing one has none. */
function updateDefaultResources(initial: Node, existing: Node): boolean {
  const status = (existing.status ??= {});
  let changed = false;
  for (const f of ['capacity', 'allocatable'] as const) {
    if (status[f] !== undefined) continue;
    if (initial.status?.[f] !== undefined) {
      status[f] = { ...initial.status[f] };
      changed = true;
    } else status[f] = {};
  }
  return changed;
}

const isExtendedResource = (k: string) => k.includes('/') && !k.startsWith('kubernetes.io/') && !k.startsWith('requests.');

/** Extended resources zeroed until a device plugin advertises them again (there are none here, as after a node is recreated). */
export function reconcileExtendedResources(initial: Node, existing: Node, reset = true): boolean {
  let changed = updateDefaultResources(initial, existing);
  if (!reset) return changed;
  const s = existing.status!;
  for (const k of Object.keys(s.capacity!)) {
    if (!isExtendedResource(k) || (s.capacity![k] === '0' && s.allocatable![k] === '0')) continue;
    s.capacity![k] = '0';
    s.allocatable![k] = '0';
    changed = true;
  }
  return changed;
}

const sameQuantity = (a: string | undefined, b: string | undefined) => a !== undefined && b !== undefined && parseQuantity(a).equals(parseQuantity(b));

/** Huge page sizes as the machine has them now: added or resized, and removed when gone. */
export function reconcileHugePages(initial: Node, existing: Node): boolean {
  let changed = updateDefaultResources(initial, existing);
  const s = existing.status!;
  const cap = s.capacity as ResourceList;
  const alloc = s.allocatable as ResourceList;
  const supported = new Set<string>();
  for (const [k, v] of Object.entries(initial.status?.capacity ?? {})) {
    if (!k.startsWith('hugepages-')) continue;
    supported.add(k);
    const known = k in cap;
    if (!known || !sameQuantity(cap[k], v)) { cap[k] = v; changed = true; }
    const a = initial.status?.allocatable?.[k];
    if (a !== undefined && (!known || !sameQuantity(alloc[k], a))) { alloc[k] = a; changed = true; }
  }
  for (const k of Object.keys(cap)) {
    if (!k.startsWith('hugepages-') || supported.has(k)) continue;
    delete cap[k];
    delete alloc[k];
    changed = true;
  }
  return changed;
}

// ---- the registration loop ----

export interface NodeRegistrationOptions {
  client: RestClient;
  /** The Node to register, status filled (built anew for every attempt, as upstream). */
  initialNode: () => Promise<Node>;
  clock?: Clock;
  /** Zero extended resources of an existing Node (true: kubelet-ts has no device plugins). */
  resetExtendedResources?: boolean;
  /** Told once when registration succeeded; `created`: this kubelet created the Node (not reconciled). */
  onRegistered?: (node: Node, created: boolean) => void;
  log?: Logger;
}

const maxBackoffMs = 7_000;

export class NodeRegistration {
  private readonly o: NodeRegistrationOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** Attempts made (tests, metrics). */
  attempts = 0;
  registered: Node | undefined;
  /** Whether the last successful attempt created the Node (false: an existing one was reconciled). */
  created = false;

  constructor(o: NodeRegistrationOptions) {
    this.o = o;
    this.clock = o.clock ?? realClock;
    this.log = o.log ?? rootLogger;
  }

  /** Registers until it succeeds (or `signal` aborts: resolves undefined); the Node as the API server holds it. */
  async register(signal?: AbortSignal): Promise<Node | undefined> {
    if (this.registered) return this.registered;
    let step = 100;
    while (!signal?.aborted) {
      // Upstream sleeps before every attempt, the first too.
      await this.sleep(step, signal);
      step = Math.min(step * 2, maxBackoffMs);
      if (signal?.aborted) break;
      let node: Node;
      try {
        node = await this.o.initialNode();
      } catch (err) {
        this.log.error('Unable to construct v1.Node object for kubelet', { err: errorMessage(err) });
        continue;
      }
      this.log.info('Attempting to register node', { node: node.metadata.name });
      const done = await this.tryRegister(node, signal);
      if (done) {
        this.log.info('Successfully registered node', { node: node.metadata.name });
        this.registered = done;
        this.o.onRegistered?.(done, this.created);
        return done;
      }
    }
    return undefined;
  }

  /** One attempt: the registered Node, or undefined (logged) when it must be retried. */
  async tryRegister(node: Node, signal?: AbortSignal): Promise<Node | undefined> {
    this.attempts++;
    const c = this.o.client;
    const name = node.metadata.name;
    const opts = { signal, maxRetries: 0 };
    try {
      const created = await c.create<Node>('/api/v1/nodes', node, opts);
      this.created = true;
      return created;
    } catch (err) {
      if (!isAlreadyExists(err)) {
        this.log.error('Unable to register node with API server', { node: name, err: errorMessage(err) });
        return undefined;
      }
    }
    let existing: Node;
    try {
      existing = await c.get<Node>(`/api/v1/nodes/${encodeURIComponent(name)}`, opts);
    } catch (err) {
      this.log.error('Unable to register node with API server, error getting existing node', { node: name, err: errorMessage(err) });
      return undefined;
    }
    this.log.info('Node was previously registered', { node: name });
    this.created = false;
    const original = structuredClone(existing);
    let changed = reconcileAttachDetachAnnotation(node, existing);
    changed = reconcileBuildAnnotation(node, existing) || changed;
    changed = updateDefaultLabels(node, existing) || changed;
    changed = reconcileExtendedResources(node, existing, this.o.resetExtendedResources ?? true) || changed;
    changed = reconcileHugePages(node, existing) || changed;
    if (!changed) return existing;
    const patch = nodeStatusPatch(original, existing);
    if (!patch) return existing;
    try {
      return await c.patch<Node>(`/api/v1/nodes/${encodeURIComponent(name)}/status`, 'strategic', patch, opts);
    } catch (err) {
      this.log.error('Unable to reconcile node with API server, error updating node', { node: name, err: errorMessage(err) });
      return undefined;
    }
  }

  private sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const onAbort = () => { timer.cancel(); resolve(); };
      const timer = this.clock.setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
