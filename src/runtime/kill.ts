// Graceful kill (upstream: kubeGenericRuntimeManager.killPodWithSyncResult / killContainer):
// each container's preStop hook, then StopContainer with what is left of the grace period,
// then the pod's sandboxes. Every wait is bounded: the hook by the grace period, the CRI call
// by its deadline, and both by the shutdown signal (through the runner and the CRI client).

import type { Container, LifecycleHandler, Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { CriClient } from './cri-client.js';
import { isNotFound } from './cri-errors.js';
import { KillPodError } from './errors.js';
import type { HandlerRunner } from './hooks.js';
import type { RuntimePodStatus } from './types.js';
import { TerminationOrdering } from './termination-ordering.js';
import { ephemeralContainersOf } from './ephemeral.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';

/** Upstream's floor on a graceful stop. */
export const MINIMUM_GRACE_PERIOD_SECONDS = 2;

export type KillCri = Pick<CriClient, 'stopContainer' | 'stopPodSandbox'>;

export interface KillTarget {
  id: string;
  name: string;
  /** preStop as recorded at creation (runs even when the spec is gone). */
  preStopHandler?: LifecycleHandler;
  terminationGracePeriodSeconds?: number;
}

export interface PodKillerOptions {
  cri: KillCri;
  hooks: HandlerRunner;
  clock: Clock;
  log: Logger;
  hostIPs: () => string[];
}

export class PodKiller {
  constructor(private readonly opts: PodKillerOptions) {}

  /** Stops every running container of the pod (in parallel), then its sandboxes. */
  async killPod(pod: Pod | undefined, status: RuntimePodStatus, gracePeriodOverride: number | undefined): Promise<void> {
    const byName = new Map<string, Container>();
    for (const c of [...(pod?.spec.initContainers ?? []), ...(pod?.spec.containers ?? []), ...ephemeralContainersOf(pod)]) byName.set(c.name, c);
    const running = status.containerStatuses.filter((c) => c.state === 'running' || c.state === 'unknown' || c.state === 'created');
    const podIP = pod?.spec.hostNetwork ? (this.opts.hostIPs()[0] ?? '') : (status.ips[0] ?? '');
    const errors: string[] = [];
    // sidecars stop after the regular containers, in reverse order (upstream's termination ordering)
    const ordering = TerminationOrdering.forPod(pod, running.map((c) => c.name));
    await Promise.all(running.map(async (c) => {
      try {
        await this.killContainer(pod, c, byName.get(c.name), podIP, gracePeriodOverride, ordering);
      } catch (err) {
        errors.push(`${c.name}: ${(err as Error).message}`);
      }
    }));
    for (const sb of status.sandboxStatuses) {
      if (sb.state !== 'ready') continue;
      try {
        await this.opts.cri.stopPodSandbox(sb.id);
      } catch (err) {
        if (!isNotFound(err)) errors.push(`sandbox ${sb.id}: ${(err as Error).message}`);
      }
    }
    if (errors.length) throw new KillPodError(`${status.namespace}/${status.name}`, errors);
  }

  /**
   * Stops one container: its preStop hook first (from the spec, or as recorded at creation),
   * then StopContainer with what is left of the grace period (at least upstream's 2s floor).
   */
  async killContainer(pod: Pod | undefined, target: KillTarget, container: Container | undefined, podIP: string, gracePeriodOverride: number | undefined, ordering?: TerminationOrdering): Promise<void> {
    let grace = pod?.metadata.deletionGracePeriodSeconds ?? pod?.spec.terminationGracePeriodSeconds ?? target.terminationGracePeriodSeconds ?? 30;
    if (gracePeriodOverride !== undefined) grace = gracePeriodOverride;
    const preStop = container ? container.lifecycle?.preStop : target.preStopHandler;
    if (preStop && grace > 0 && pod) {
      const started = this.opts.clock.now();
      try {
        await this.opts.hooks.run({ pod, container, containerName: target.name, containerID: target.id, podIP }, preStop, grace);
      } catch (err) {
        this.opts.log.warn('PreStopHook failed', { pod: podFullName(pod), container: target.name, err: (err as Error).message });
      }
      grace -= Math.floor((this.opts.clock.now() - started) / 1000);
    }
    if (ordering && grace > 0) {
      const waitingFor = ordering.waitingFor(target.name);
      if (waitingFor.length) this.opts.log.v(3).info('Sidecar waits for its turn to stop', { pod: pod ? podFullName(pod) : '', container: target.name, waitingFor });
      // the seconds waited come off the grace period, truncated as upstream does
      grace -= Math.trunc(await ordering.waitForTurn(target.name, grace, this.opts.clock));
    }
    grace = Math.max(grace, MINIMUM_GRACE_PERIOD_SECONDS);
    try {
      await this.opts.cri.stopContainer(target.id, grace);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    ordering?.containerTerminated(target.name);
  }
}
