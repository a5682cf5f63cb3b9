// RuntimeClass lookup (upstream pkg/kubelet/runtimeclass Manager.LookupRuntimeHandler): a pod's
// spec.runtimeClassName names a cluster-scoped node.k8s.io/v1 RuntimeClass whose `handler` goes
// to RunPodSandbox. Upstream reads them from an informer; here each class is a GET cached for a
// short TTL (found or not). Without an API server (standalone) upstream has no manager and runs
// the pod with the default handler; kubelet-ts refuses the sandbox instead (the kubelet's
// runtimeHandlerFor), since the class may name a sandboxed runtime the pod relies on.

import type { Clock } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';

/** The parts of a RuntimeClass the kubelet reads. Overhead and scheduling are applied by API server admission. */
export interface RuntimeClassObject {
  metadata?: { name?: string };
  handler?: string;
  overhead?: { podFixed?: Record<string, string> };
}

export class RuntimeClassError extends KubeletError {
  constructor(code: 'ERR_RUNTIME_CLASS_NOT_FOUND' | 'ERR_RUNTIME_CLASS_LOOKUP', message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

export interface RuntimeClassManagerOptions {
  /** GET node.k8s.io/v1 runtimeclasses/<name>; undefined when the API says NotFound; throws otherwise. */
  get(name: string): Promise<RuntimeClassObject | undefined>;
  clock: Clock;
  /** How long an answer is reused (default 5 s). */
  ttlMs?: number;
}

export const RUNTIME_CLASS_TTL_MS = 5_000;

export class RuntimeClassManager {
  private readonly cache = new Map<string, { at: number; rc: RuntimeClassObject | undefined }>();

  constructor(private readonly o: RuntimeClassManagerOptions) {}

  /**
   * The handler for a pod's runtimeClassName: '' for none (the default handler); the class's
   * handler; a RuntimeClassError with upstream's lister text (`runtimeclass.node.k8s.io "x" not
   * found`) for an unknown class, or `failed to lookup RuntimeClass x: ...` when the API fails.
   */
  async lookupRuntimeHandler(runtimeClassName: string | undefined | null): Promise<string> {
    if (!runtimeClassName) return '';
    const ttl = this.o.ttlMs ?? RUNTIME_CLASS_TTL_MS;
    const now = this.o.clock.now();
    let hit = this.cache.get(runtimeClassName);
    if (!hit || now - hit.at >= ttl) {
      let rc: RuntimeClassObject | undefined;
      try {
        rc = await this.o.get(runtimeClassName);
      } catch (err) {
        throw new RuntimeClassError('ERR_RUNTIME_CLASS_LOOKUP', `failed to lookup RuntimeClass ${runtimeClassName}: ${(err as Error).message}`, { cause: err });
      }
      hit = { at: now, rc };
      this.cache.set(runtimeClassName, hit);
    }
    if (!hit.rc) throw new RuntimeClassError('ERR_RUNTIME_CLASS_NOT_FOUND', `runtimeclass.node.k8s.io "${runtimeClassName}" not found`);
    return hit.rc.handler ?? '';
  }

  /** Drops answers older than the TTL (housekeeping). */
  prune(): void {
    const ttl = this.o.ttlMs ?? RUNTIME_CLASS_TTL_MS;
    const now = this.o.clock.now();
    for (const [k, v] of this.cache) if (now - v.at >= ttl) this.cache.delete(k);
  }
}
