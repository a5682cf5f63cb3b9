// One probe of one container (upstream: prober.worker): a schedule on the injected clock and
// the threshold state machine. Startup gates liveness and readiness; a failed liveness or
// startup result holds the worker until the container is replaced (a new container ID).

import type { Container, ContainerStatus, Pod, PodStatus, Probe } from '../api/types.js';
import { podFullName } from '../api/types.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { ProberMetrics } from './metrics.js';
import type { ResultsManager } from './results.js';
import type { ProbeScheduler, ScheduledRun } from './scheduler.js';
import { probeRequest } from './target.js';
import type { ProbeOutcome, ProbeRequest, ProbeResult, ProbeRunner, ProbeType } from './types.js';

/** upstream: maxProbeRetries, for runs that error (unknown) before a result is taken. */
export const MAX_PROBE_RETRIES = 3;

export interface WorkerDeps {
  clock: Clock;
  /** The shared schedule (one timer for every probe worker). */
  scheduler: ProbeScheduler;
  log: Logger;
  runner: ProbeRunner;
  metrics: ProberMetrics;
  /** The pod's latest generated status (the status manager's). */
  podStatus(uid: string): PodStatus | undefined;
  recordEvent(pod: Pod, container: Container, type: 'Normal' | 'Warning', reason: string, message: string): void;
  /** When the probe manager started: workers created within one period of it start at a random offset. */
  managerStart: number;
  random(): number;
  onProbeStart?(probeType: ProbeType, lateMs: number): void;
}

export class ProbeWorker {
  private timer?: ScheduledRun;
  private stopped = false;
  private inFlight = false;
  private nextAt = 0;
  /** The container this worker last probed (`containerd://<id>`). */
  private containerID = '';
  private lastResult: ProbeResult = 'Unknown';
  private resultRun = 0;
  /** Set after a liveness/startup failure: nothing to probe until the container is replaced. */
  private onHold = false;
  private readonly initialValue: ProbeResult;
  private readonly labels: { container: string; pod: string; namespace: string; pod_uid: string };
  private readonly totals = new Map<string, { inc(): void }>();
  private cached?: { criID: string; ip: string; req: ProbeRequest };
  private criID?: { containerID: string; id: string };
  private startedAt?: { text: string; ms: number };
  private duration?: { observe(v: number): void };
  /** Called when the worker ends by itself (pod terminal, container not restarted). */
  onExit?: () => void;
  /** The result reported before a restart of kubelet-ts (the API's status), kept for that same container. */
  seed?: { containerID: string; passed: boolean };

  constructor(
    private readonly deps: WorkerDeps,
    private pod: Pod,
    readonly container: Container,
    readonly probeType: ProbeType,
    private readonly spec: Probe,
    private readonly results: ResultsManager,
  ) {
    this.initialValue = probeType === 'Readiness' ? 'Failure' : probeType === 'Liveness' ? 'Success' : 'Unknown';
    this.labels = { container: container.name, pod: pod.metadata.name ?? '', namespace: pod.metadata.namespace ?? '', pod_uid: pod.metadata.uid ?? '' };
  }

  private get periodMs(): number {
    return (this.spec.periodSeconds || 10) * 1000;
  }

  /** The newest pod object (spec updates that keep the container hash, deletionTimestamp). */
  updatePod(pod: Pod): void {
    this.pod = pod;
  }

  start(): void {
    const { clock } = this.deps;
    // After a restart of kubelet-ts every probe would fire at once: spread them over a period.
    const delay = clock.now() - this.deps.managerStart < this.periodMs ? Math.floor(this.deps.random() * this.periodMs) : 0;
    this.nextAt = clock.now() + delay;
    this.arm();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
    if (this.containerID) this.results.remove(this.containerID);
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = this.deps.scheduler.runAt(this.nextAt, this.onTick);
  }

  /** Bound once: the schedule's callback and the settling of a run (no closures per probe). */
  private readonly onTick = (): void => this.tick();
  private readonly onDone = (keepGoing: boolean): void => this.settled(keepGoing);
  private readonly onError = (err: unknown): void => {
    this.deps.log.error('Probe worker failed', { pod: podFullName(this.pod), container: this.container.name, probeType: this.probeType, err: errorMessage(err) });
    this.settled(true);
  };

  private tick(): void {
    if (this.stopped) return;
    this.deps.onProbeStart?.(this.probeType, this.deps.clock.now() - this.nextAt);
    // A fixed-rate schedule as upstream's ticker: a tick that finds the last probe still running is dropped.
    this.nextAt += this.periodMs;
    if (this.nextAt <= this.deps.clock.now()) this.nextAt = this.deps.clock.now() + this.periodMs;
    if (this.inFlight) {
      this.arm();
      return;
    }
    this.inFlight = true;
    let r: boolean | Promise<boolean>;
    try {
      r = this.probeOnce();
    } catch (err) {
      this.onError(err);
      return;
    }
    // A tick that decides without probing settles now; a probe re-arms when its run settles.
    if (typeof r === 'boolean') this.settled(r);
    else r.then(this.onDone, this.onError);
  }

  private settled(keepGoing: boolean): void {
    this.inFlight = false;
    if (this.stopped) return;
    if (!keepGoing) {
      this.stop();
      this.onExit?.();
      return;
    }
    this.arm();
  }

  private findStatus(status: PodStatus): ContainerStatus | undefined {
    const name = this.container.name;
    for (const c of status.containerStatuses ?? []) if (c.name === name) return c;
    for (const c of status.initContainerStatuses ?? []) if (c.name === name) return c;
    return undefined;
  }

  /** One probe; false ends the worker (upstream: doProbe's keepGoing). */
  doProbe(): Promise<boolean> {
    try {
      return Promise.resolve(this.probeOnce());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * One probe (upstream: doProbe): decided at once (a boolean) when there is nothing to run,
   * else the run's promise. Thousands run a second, so the common path allocates little.
   */
  private probeOnce(): boolean | Promise<boolean> {
    const { clock, log } = this.deps;
    const uid = this.pod.metadata.uid!;
    const status = this.deps.podStatus(uid);
    if (!status) {
      log.v(3).info('No status for pod', { pod: podFullName(this.pod) });
      return true;
    }
    if (status.phase === 'Failed' || status.phase === 'Succeeded') return false;
    const c = this.findStatus(status);
    if (!c || !c.containerID) return true;
    if (this.containerID !== c.containerID) {
      if (this.containerID) this.results.remove(this.containerID);
      this.containerID = c.containerID;
      const seeded = this.seed?.containerID === c.containerID && this.seed.passed;
      this.results.set(this.containerID, seeded ? 'Success' : this.initialValue, uid);
      this.seed = undefined;
      this.onHold = false;
      this.lastResult = 'Unknown';
      this.resultRun = 0;
    }
    if (this.onHold) return true;
    if (!c.state.running) {
      this.results.set(this.containerID, 'Failure', uid);
      // Nothing more to probe when the container will not run again.
      return !(c.state.terminated && this.pod.spec.restartPolicy === 'Never');
    }
    // A pod being deleted is no longer restarted by its probes.
    if (this.pod.metadata.deletionTimestamp && this.probeType !== 'Readiness') {
      this.results.set(this.containerID, 'Success', uid);
      return true;
    }
    const startedAt = this.startedAtMs(c.state.running.startedAt);
    if (Math.floor((clock.now() - startedAt) / 1000) < (this.spec.initialDelaySeconds ?? 0)) return true;
    if (c.started) {
      // Started: the startup probe is done for this container (the worker stays for its next one).
      if (this.probeType === 'Startup') return true;
    } else if (this.probeType !== 'Startup') {
      // Liveness and readiness wait for the startup probe.
      return true;
    }

    if (this.criID?.containerID !== c.containerID) {
      const id = c.containerID;
      this.criID = { containerID: id, id: id.includes('://') ? id.slice(id.indexOf('://') + 3) : id };
    }
    // One run in flight per worker: its state lives on the worker, not in closures.
    this.runStatus = status;
    this.runBegan = clock.now();
    this.retriesLeft = MAX_PROBE_RETRIES - 1;
    return this.runOnce().then(this.onOutcome, this.onRunError);
  }

  /** The run in flight: the status it was started from, when, and how many retries are left. */
  private runStatus?: PodStatus;
  private runBegan = 0;
  private retriesLeft = 0;
  private readonly onOutcome = (o: ProbeOutcome): boolean | Promise<boolean> => this.outcome(o);
  private readonly onRunError = (err: unknown): boolean | Promise<boolean> => this.outcome({ result: 'unknown', output: errorMessage(err) });

  private runOnce(): Promise<ProbeOutcome> {
    try {
      return this.deps.runner.run(this.request(this.runStatus!, this.criID!.id));
    } catch (err) {
      return Promise.resolve({ result: 'unknown', output: errorMessage(err) });
    }
  }

  /** A run's outcome: an error (unknown) is retried up to MAX_PROBE_RETRIES runs, then recorded and judged. */
  private outcome(o: ProbeOutcome): boolean | Promise<boolean> {
    if (o.result === 'unknown' && this.retriesLeft > 0 && !this.stopped) {
      this.retriesLeft--;
      return this.runOnce().then(this.onOutcome, this.onRunError);
    }
    this.runStatus = undefined;
    this.record(o, this.runBegan);
    return this.takeOutcome(o);
  }

  /** The thresholds over a run's outcome (upstream: the end of doProbe). */
  private takeOutcome(outcome: ProbeOutcome): boolean {
    if (this.stopped) return false;
    const uid = this.pod.metadata.uid!;
    const result: ProbeResult | undefined = outcome.result === 'failure' ? 'Failure' : outcome.result === 'unknown' ? undefined : 'Success';
    if (result === undefined) return true;
    if (this.lastResult === result) this.resultRun++;
    else {
      this.lastResult = result;
      this.resultRun = 1;
    }
    if ((result === 'Failure' && this.resultRun < (this.spec.failureThreshold || 3)) || (result === 'Success' && this.resultRun < (this.spec.successThreshold || 1))) {
      return true;
    }
    this.results.set(this.containerID, result, uid);
    if (result === 'Failure' && this.probeType !== 'Readiness') {
      // The container will be killed: wait for its replacement before probing again.
      this.onHold = true;
      this.resultRun = 0;
    }
    return true;
  }

  /** The request of this probe, built again only when the container or the pod IP changes. */
  private request(status: PodStatus, criID: string): ProbeRequest {
    const ip = status.podIP ?? status.podIPs?.[0]?.ip ?? '';
    const c = this.cached;
    if (c && c.criID === criID && c.ip === ip) return c.req;
    const req = probeRequest(this.pod, this.container, this.spec, status, criID);
    this.cached = { criID, ip, req };
    return req;
  }

  /** `started_at` of the running container in ms, parsed once per value. */
  private startedAtMs(startedAt: string | undefined): number {
    if (!startedAt) return 0;
    if (this.startedAt?.text !== startedAt) this.startedAt = { text: startedAt, ms: Date.parse(startedAt) };
    return this.startedAt.ms;
  }

  /** prober_probe_total, prober_probe_duration_seconds and the probe's events for one run. */
  private record(outcome: ProbeOutcome, began: number): void {
    const { clock, metrics } = this.deps;
    const l = this.labels;
    const label = outcome.result === 'failure' ? 'failed' : outcome.result === 'unknown' ? 'unknown' : 'successful';
    // The metric children are looked up once per worker, not once per probe.
    let total = this.totals.get(label);
    if (!total) this.totals.set(label, total = metrics.probeTotal.with({ probe_type: this.probeType, result: label, ...l }));
    total.inc();
    if (outcome.result !== 'unknown') {
      this.duration ??= metrics.probeDuration.with({ probe_type: this.probeType, container: l.container, pod: l.pod, namespace: l.namespace });
      this.duration.observe((clock.now() - began) / 1000);
    }
    if (outcome.result === 'success') return;
    const output = outcome.output.trim();
    if (outcome.result === 'failure') this.deps.recordEvent(this.pod, this.container, 'Warning', 'Unhealthy', `${this.probeType} probe failed: ${output}`);
    else if (outcome.result === 'warning') this.deps.recordEvent(this.pod, this.container, 'Warning', 'ProbeWarning', `${this.probeType} probe warning: ${output}`);
    else this.deps.recordEvent(this.pod, this.container, 'Warning', 'Unhealthy', `${this.probeType} probe errored and resulted in unknown state: ${output}`);
  }
}
