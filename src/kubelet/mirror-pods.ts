// Mirror pods (upstream pkg/kubelet/pod/mirror_client.go and the kubelet's mirror handling):
// every static pod has a copy in the API, annotated kubernetes.io/config.mirror with the static
// pod's hash, so users see it with kubectl. A mirror pod that is missing, being deleted, or of
// an older version of the static pod is (re)created; one whose static pod is gone is deleted.
// Deletes carry grace 0 and the mirror's UID as a precondition. Nothing is sent while the API
// already matches.

import { MirrorPodError } from './errors.js';
import type { OwnerReference, Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { isAlreadyExists, isConflict, isNotFound } from '../client/errors.js';
import type { RestClient } from '../client/rest.js';
import { ConfigHashAnnotationKey, ConfigMirrorAnnotationKey } from '../sources/static-pod.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';

/** No mirror pod call may hold the next reconcile pass up longer than this. */
const MIRROR_CALL_TIMEOUT_MS = 30_000;

export interface MirrorPodsOptions {
  client: RestClient;
  nodeName: string;
  log: Logger;
  /** The static pods that should have a mirror pod now (not terminating). */
  staticPods: () => Pod[];
}

/** The hash a static pod's mirror pod carries: config.hash, else the UID (upstream's GetPodHash). */
export function staticPodHash(pod: Pod): string {
  return pod.metadata.annotations?.[ConfigHashAnnotationKey] ?? pod.metadata.uid ?? '';
}

/** True when `mirror` is the API copy of this version of `pod`. */
export function isMirrorPodOf(mirror: Pod, pod: Pod): boolean {
  return podFullName(mirror) === podFullName(pod) && mirror.metadata.annotations?.[ConfigMirrorAnnotationKey] === staticPodHash(pod);
}

export class MirrorPods {
  /** Mirror pods in the API, by full name (the API source's view, plus what we created since). */
  private mirrors = new Map<string, Pod>();
  private readonly busy = new Set<string>();
  private nodeUID: string | undefined;
  private reconciling: Promise<void> | undefined;
  private again = false;
  /** Counters for tests. */
  readonly stats = { creates: 0, deletes: 0 };

  constructor(private readonly o: MirrorPodsOptions) {}

  /** The API source's mirror pods for this node; reconciles against them. */
  setMirrorPods(pods: Pod[]): void {
    this.mirrors = new Map(pods.map((p) => [podFullName(p), p]));
    void this.reconcile();
  }

  /** The current mirror pod of a static pod (undefined while missing, stale or being deleted). */
  mirrorPodOf(pod: Pod): Pod | undefined {
    const m = this.mirrors.get(podFullName(pod));
    return m && !m.metadata.deletionTimestamp && isMirrorPodOf(m, pod) ? m : undefined;
  }

  /** Brings the API's mirror pods in line with the static pods; one pass at a time. */
  reconcile(): Promise<void> {
    if (this.reconciling) {
      this.again = true;
      return this.reconciling;
    }
    this.reconciling = (async () => {
      do {
        this.again = false;
        await this.pass();
      } while (this.again);
    })().finally(() => { this.reconciling = undefined; });
    return this.reconciling;
  }

  private async pass(): Promise<void> {
    const wanted = new Map(this.o.staticPods().map((p) => [podFullName(p), p]));
    const work: Promise<void>[] = [];
    for (const [name, pod] of wanted) {
      const m = this.mirrors.get(name);
      if (m && !m.metadata.deletionTimestamp && isMirrorPodOf(m, pod)) continue;
      work.push(this.once(name, async () => {
        if (m) await this.deleteMirror(m, m.metadata.deletionTimestamp ? 'being deleted' : 'of an older version of the static pod');
        await this.createMirror(pod);
      }));
    }
    for (const [name, m] of this.mirrors) {
      if (wanted.has(name)) continue;
      work.push(this.once(name, () => this.deleteMirror(m, 'its static pod is gone')));
    }
    await Promise.all(work);
  }

  /** One API operation per full name at a time. */
  private async once(name: string, fn: () => Promise<void>): Promise<void> {
    if (this.busy.has(name)) return;
    this.busy.add(name);
    try {
      await fn();
    } catch (err) {
      this.o.log.warn('Mirror pod update failed', { pod: name, err: errorMessage(err) });
    } finally {
      this.busy.delete(name);
    }
  }

  private async createMirror(pod: Pod): Promise<void> {
    const ns = pod.metadata.namespace ?? 'default';
    const body: Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: pod.metadata.name,
        namespace: ns,
        ...(pod.metadata.labels ? { labels: { ...pod.metadata.labels } } : {}),
        annotations: { ...(pod.metadata.annotations ?? {}), [ConfigMirrorAnnotationKey]: staticPodHash(pod) },
      },
      spec: structuredClone(pod.spec),
    };
    // upstream: no mirror pod without its Node as the owner; housekeeping tries again
    body.metadata.ownerReferences = [await this.nodeOwner()];
    const path = `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`;
    try {
      this.o.log.info('Creating a mirror pod for static pod', { pod: podFullName(pod) });
      this.stats.creates++;
      const created = await this.o.client.create<Pod>(path, body, { timeoutMs: MIRROR_CALL_TIMEOUT_MS });
      this.mirrors.set(podFullName(pod), created);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      // Created by an earlier pass whose watch event has not arrived: adopt it.
      const existing = await this.o.client.get<Pod>(`${path}/${encodeURIComponent(pod.metadata.name!)}`, { timeoutMs: MIRROR_CALL_TIMEOUT_MS });
      this.mirrors.set(podFullName(pod), existing);
      if (!isMirrorPodOf(existing, pod)) this.again = true;
    }
  }

  private async deleteMirror(m: Pod, why: string): Promise<void> {
    const ns = m.metadata.namespace ?? 'default';
    this.o.log.info('Deleting mirror pod', { pod: podFullName(m), podUID: m.metadata.uid, reason: why });
    this.stats.deletes++;
    try {
      await this.o.client.delete(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(m.metadata.name!)}`, {
        body: { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0, preconditions: { uid: m.metadata.uid } },
        timeoutMs: MIRROR_CALL_TIMEOUT_MS,
      });
    } catch (err) {
      // Gone already, or replaced by another object of that name: ours is gone either way.
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
    if (this.mirrors.get(podFullName(m)) === m) this.mirrors.delete(podFullName(m));
  }

  /** The Node as the mirror pods' owner; upstream creates no mirror pod without it. */
  private async nodeOwner(): Promise<OwnerReference> {
    if (!this.nodeUID) {
      let node: { metadata?: { uid?: string } } | undefined;
      try {
        node = await this.o.client.get<{ metadata?: { uid?: string } }>(`/api/v1/nodes/${encodeURIComponent(this.o.nodeName)}`, { timeoutMs: MIRROR_CALL_TIMEOUT_MS, maxRetries: 0 });
      } catch (err) {
        throw new MirrorPodError(this.o.nodeName, `failed to get node UID: ${errorMessage(err)}`, { cause: err });
      }
      if (!node?.metadata?.uid) throw new MirrorPodError(this.o.nodeName, `failed to get node UID: UID unset for node ${this.o.nodeName}`);
      this.nodeUID = node.metadata.uid;
    }
    return { apiVersion: 'v1', kind: 'Node', name: this.o.nodeName, uid: this.nodeUID, controller: false };
  }
}
