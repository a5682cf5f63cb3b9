// What the Ready condition is made of, as upstream's runtimeState: when the runtime was last
// seen ready (CRI Status every 5 s; older than 30 s = "container runtime is down"), the
// RuntimeReady and NetworkReady conditions of that answer, and health checks such as PLEG's.

import type { Clock } from '../util/clock.js';

/** A CRI RuntimeCondition (runtime.v1), as the CRI client returns it. */
export interface RuntimeConditionLike {
  type: string;
  status: boolean;
  reason: string;
  message: string;
}

export interface HealthCheck {
  name: string;
  /** PLEG's healthy(): ok, or a message such as "pleg was last seen active 3m0s ago; threshold is 3m0s". */
  check: () => { ok: boolean; message: string };
}

/** Upstream maxWaitForContainerRuntime: the runtime counts as down once its last good status is this old. */
export const RUNTIME_SYNC_THRESHOLD_MS = 30_000;

/** Go's %v of a *RuntimeCondition: `NetworkReady=false reason:X message:Y`, or <nil>. */
function formatCondition(c: RuntimeConditionLike | undefined): string {
  return c ? `${c.type}=${c.status} reason:${c.reason} message:${c.message}` : '<nil>';
}

export class RuntimeState {
  private lastRuntimeSync = 0;
  private runtimeError: string | undefined;
  private networkError: string | undefined;
  private readonly healthChecks: HealthCheck[] = [];

  constructor(private readonly clock: Clock, private readonly thresholdMs = RUNTIME_SYNC_THRESHOLD_MS) {}

  addHealthCheck(h: HealthCheck): void {
    this.healthChecks.push(h);
  }

  /** Upstream updateRuntimeUp with the CRI Status answer's conditions; an error (no answer) changes nothing. */
  observeRuntimeStatus(conditions: RuntimeConditionLike[] | Error): void {
    if (conditions instanceof Error) return;
    const network = conditions.find((c) => c.type === 'NetworkReady');
    this.networkError = network?.status ? undefined : `container runtime network not ready: ${formatCondition(network)}`;
    const runtime = conditions.find((c) => c.type === 'RuntimeReady');
    if (!runtime?.status) {
      this.runtimeError = `container runtime not ready: ${formatCondition(runtime)}`;
      return;
    }
    this.runtimeError = undefined;
    this.lastRuntimeSync = this.clock.now();
  }

  /** Upstream runtimeErrors(): sync age, health checks, the runtime's own condition. */
  runtimeErrors(): string[] {
    const errs: string[] = [];
    if (this.lastRuntimeSync === 0) errs.push('container runtime status check may not have completed yet');
    else if (this.lastRuntimeSync + this.thresholdMs <= this.clock.now()) errs.push('container runtime is down');
    for (const h of this.healthChecks) {
      const r = h.check();
      if (!r.ok) errs.push(`${h.name} is not healthy: ${r.message}`);
    }
    if (this.runtimeError) errs.push(this.runtimeError);
    return errs;
  }

  networkErrors(): string[] {
    return this.networkError ? [this.networkError] : [];
  }

  /** Everything that keeps the node from Ready, in upstream's order. */
  readyErrors(): string[] {
    return [...this.runtimeErrors(), ...this.networkErrors()];
  }
}
