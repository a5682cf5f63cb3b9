// The node lease controller, as upstream's (component-helpers lease controller, kubelet
// settings): a coordination.k8s.io/v1 Lease named after the node in kube-node-lease, held by
// the node, leaseDurationSeconds 40, renewed every quarter of that (10 s). A renewal starts
// from the last lease written; when that fails it gets (or creates) the lease with backoff
// 200 ms doubling to 7 s, then updates up to 5 times, fetching again after a 409 Conflict.
// Every wait is on the injected clock.

import type { RestClient } from '../client/rest.js';
import { isConflict, isNotFound } from '../client/errors.js';
import { realClock, type Clock } from '../util/clock.js';
import { KubeletError, errorMessage } from '../util/errors.js';
import { rootLogger, type Logger } from '../util/log.js';

export const NODE_LEASE_NAMESPACE = 'kube-node-lease';
export const DEFAULT_NODE_LEASE_DURATION_SECONDS = 40;
/** Renew interval as a fraction of the lease duration (kubelet: nodeLeaseRenewIntervalFraction). */
export const NODE_LEASE_RENEW_FRACTION = 0.25;
const maxUpdateRetries = 5;
const maxBackoffMs = 7_000;

export interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    resourceVersion?: string;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string }[];
    [k: string]: unknown;
  };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string; [k: string]: unknown };
}

export interface NodeLeaseOptions {
  client: RestClient;
  nodeName: string;
  clock?: Clock;
  leaseDurationSeconds?: number;
  /** Called after repeated update failures (upstream: the kubelet closes idle connections). */
  onRepeatedHeartbeatFailure?: () => void;
  log?: Logger;
}

/** metav1.MicroTime: RFC 3339 with microseconds, UTC. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class NodeLeaseController {
  readonly leaseDurationSeconds: number;
  readonly renewIntervalMs: number;
  private readonly o: NodeLeaseOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly path: string;
  /** The lease as last written by this controller; renewals start from it. */
  latestLease: Lease | undefined;
  /** Renewals finished by run() (each followed by a wait of renewIntervalMs). */
  syncs = 0;

  constructor(o: NodeLeaseOptions) {
    this.o = o;
    this.clock = o.clock ?? realClock;
    this.leaseDurationSeconds = o.leaseDurationSeconds ?? DEFAULT_NODE_LEASE_DURATION_SECONDS;
    this.renewIntervalMs = this.leaseDurationSeconds * 1000 * NODE_LEASE_RENEW_FRACTION;
    this.log = (o.log ?? rootLogger).with({ lease: `${NODE_LEASE_NAMESPACE}/${o.nodeName}` });
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${NODE_LEASE_NAMESPACE}/leases`;
  }

  /** Renews every renew interval (measured from the end of the last renewal) until aborted. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.sync(signal).catch((err) => {
        if (!signal.aborted) this.log.error('failed to renew the node lease', { err: errorMessage(err) });
      });
      this.syncs++;
      if (signal.aborted) break;
      await this.sleep(this.renewIntervalMs, signal);
    }
  }

  /** One renewal. */
  async sync(signal?: AbortSignal): Promise<void> {
    if (this.latestLease) {
      // The common case: one PUT from the lease we wrote last, no GET.
      try {
        this.latestLease = await this.update(this.newLease(this.latestLease), signal);
        return;
      } catch (err) {
        if (signal?.aborted) throw err;
        this.log.warn('failed to update the lease from the last one written, fetching it', { err: errorMessage(err) });
      }
    }
    const { lease, created } = await this.backoffEnsureLease(signal);
    if (created) return;
    await this.retryUpdateLease(lease, signal);
  }

  private async retryUpdateLease(base: Lease, signal?: AbortSignal): Promise<void> {
    for (let i = 0; i < maxUpdateRetries; i++) {
      try {
        this.latestLease = await this.update(this.newLease(base), signal);
        return;
      } catch (err) {
        if (signal?.aborted) throw err;
        this.log.warn('failed to update the lease', { err: errorMessage(err), attempt: i + 1 });
        // Someone else wrote it: only a fresh copy can be updated.
        if (isConflict(err)) {
          base = (await this.backoffEnsureLease(signal)).lease;
          continue;
        }
        if (i > 0) this.o.onRepeatedHeartbeatFailure?.();
      }
    }
    throw new KubeletError('ERR_NODE_LEASE', `failed ${maxUpdateRetries} attempts to update the lease ${NODE_LEASE_NAMESPACE}/${this.o.nodeName}`);
  }

  /** Gets the lease, creating it when missing; retries with backoff 200 ms doubling to 7 s. */
  private async backoffEnsureLease(signal?: AbortSignal): Promise<{ lease: Lease; created: boolean }> {
    let sleepMs = 100;
    for (;;) {
      try {
        return await this.ensureLease(signal);
      } catch (err) {
        if (signal?.aborted) throw err;
        sleepMs = Math.min(2 * sleepMs, maxBackoffMs);
        this.log.error('failed to ensure the lease exists, will retry', { err: errorMessage(err), retryInMs: sleepMs });
        await this.sleep(sleepMs, signal);
        if (signal?.aborted) throw signal.reason;
      }
    }
  }

  private async ensureLease(signal?: AbortSignal): Promise<{ lease: Lease; created: boolean }> {
    const c = this.o.client;
    const opts = { signal, timeoutMs: this.renewIntervalMs, maxRetries: 0 };
    try {
      return { lease: await c.get<Lease>(`${this.path}/${this.o.nodeName}`, opts), created: false };
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const lease = await c.create<Lease>(this.path, await this.withOwner(this.newLease(undefined), signal), opts);
    this.latestLease = lease;
    return { lease, created: true };
  }

  private async update(lease: Lease, signal?: AbortSignal): Promise<Lease> {
    return this.o.client.update<Lease>(`${this.path}/${this.o.nodeName}`, await this.withOwner(lease, signal), { signal, timeoutMs: this.renewIntervalMs, maxRetries: 0 });
  }

  /** A lease to write: a copy of `base` (or a new one) held by this node, renewed now. */
  private newLease(base: Lease | undefined): Lease {
    const lease: Lease = base
      ? structuredClone(base)
      : { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.o.nodeName, namespace: NODE_LEASE_NAMESPACE } };
    lease.spec = { ...lease.spec, holderIdentity: this.o.nodeName, leaseDurationSeconds: this.leaseDurationSeconds, renewTime: microTime(this.clock.now()) };
    return lease;
  }

  /** As the kubelet: the lease is owned by the Node object, when that exists, so it goes with it. */
  private async withOwner(lease: Lease, signal?: AbortSignal): Promise<Lease> {
    if (lease.metadata.ownerReferences?.length) return lease;
    try {
      const node = await this.o.client.get<{ metadata: { name: string; uid: string } }>(`/api/v1/nodes/${this.o.nodeName}`, { signal, timeoutMs: this.renewIntervalMs, maxRetries: 0 });
      lease.metadata.ownerReferences = [{ apiVersion: 'v1', kind: 'Node', name: node.metadata.name, uid: node.metadata.uid }];
    } catch (err) {
      if (!isNotFound(err)) this.log.warn('cannot read the node to own the lease', { err: errorMessage(err) });
    }
    return lease;
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
