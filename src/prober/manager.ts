// The probe manager (upstream: prober.Manager) on the main thread: one worker per container
// probe, the liveness/readiness/startup results managers, and what the status generator and
// computePodActions read from them. Probe execution is the runner's (workers/ pool, CRI exec).

import type { Container, Pod, Probe } from '../api/types.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { createProberMetrics, type ProberMetrics } from './metrics.js';
import { ResultsManager, type ResultUpdate } from './results.js';
import type { ProbeRunner, ProbeType } from './types.js';
import { ProbeWorker } from './worker.js';
import { ProbeScheduler } from './scheduler.js';
import type { PodStatus } from '../api/types.js';

export interface ProbeManagerOptions {
  clock: Clock;
  log: Logger;
  runner: ProbeRunner;
  metrics?: ProberMetrics;
  podStatus(uid: string): PodStatus | undefined;
  recordEvent(pod: Pod, container: Container, type: 'Normal' | 'Warning', reason: string, message: string): void;
  /** Told of every result change (the syncLoop syncs the pod). */
  onUpdate?(probeType: ProbeType, u: ResultUpdate): void;
  random?: () => number;
  /** Told how late each probe run started against its schedule (benchmarks measure jitter with it). */
  onProbeStart?(probeType: ProbeType, lateMs: number): void;
}

const PROBES: [ProbeType, 'livenessProbe' | 'readinessProbe' | 'startupProbe'][] = [
  ['Liveness', 'livenessProbe'],
  ['Readiness', 'readinessProbe'],
  ['Startup', 'startupProbe'],
];

export class ProbeManager {
  readonly liveness = new ResultsManager();
  readonly readiness = new ResultsManager();
  readonly startup = new ResultsManager();
  readonly metrics: ProberMetrics;
  /** `<uid>/<container>/<type>` → worker. */
  private readonly workers = new Map<string, ProbeWorker>();
  private readonly start: number;
  private readonly scheduler: ProbeScheduler;

  constructor(private readonly opts: ProbeManagerOptions) {
    this.metrics = opts.metrics ?? createProberMetrics();
    this.start = opts.clock.now();
    this.scheduler = new ProbeScheduler(opts.clock);
    for (const [type, rm] of [['Liveness', this.liveness], ['Readiness', this.readiness], ['Startup', this.startup]] as const) {
      rm.onUpdate((u) => opts.onUpdate?.(type, u));
    }
  }

  private results(type: ProbeType): ResultsManager {
    return type === 'Liveness' ? this.liveness : type === 'Readiness' ? this.readiness : this.startup;
  }

  /** Starts a worker for every probe of the pod's containers (sidecars included) not yet probed. */
  addPod(pod: Pod): void {
    const uid = pod.metadata.uid!;
    const containers = [...pod.spec.containers, ...(pod.spec.initContainers ?? []).filter((c) => c.restartPolicy === 'Always')];
    for (const c of containers) {
      for (const [type, field] of PROBES) {
        const key = `${uid}/${c.name}/${type}`;
        const existing = this.workers.get(key);
        if (existing) {
          existing.updatePod(pod);
          continue;
        }
        const spec: Probe | undefined = c[field];
        if (!spec) continue;
        const w = new ProbeWorker({
          clock: this.opts.clock,
          scheduler: this.scheduler,
          log: this.opts.log,
          runner: this.opts.runner,
          metrics: this.metrics,
          podStatus: (id) => this.opts.podStatus(id),
          recordEvent: (p, ctr, t, r, m) => this.opts.recordEvent(p, ctr, t, r, m),
          managerStart: this.start,
          random: this.opts.random ?? Math.random,
          onProbeStart: this.opts.onProbeStart,
        }, pod, c, type, spec, this.results(type));
        const reported = [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])].find((s) => s.name === c.name);
        if (reported?.containerID && type !== 'Liveness') {
          w.seed = { containerID: reported.containerID, passed: type === 'Readiness' ? reported.ready : reported.started === true };
        }
        w.onExit = () => { if (this.workers.get(key) === w) this.workers.delete(key); };
        this.workers.set(key, w);
        w.start();
      }
    }
  }

  /** upstream StopLivenessAndStartup: a terminating pod is not restarted by its probes. */
  stopLivenessAndStartup(pod: Pod): void {
    this.removeWhere(pod.metadata.uid!, (t) => t !== 'Readiness');
  }

  removePod(pod: Pod): void {
    this.removeWhere(pod.metadata.uid!, () => true);
  }

  /** Stops the workers of pods no longer desired (housekeeping). */
  cleanupPods(desired: ReadonlySet<string>): void {
    for (const [key, w] of this.workers) {
      if (!desired.has(key.slice(0, key.indexOf('/')))) {
        w.stop();
        this.workers.delete(key);
      }
    }
  }

  private removeWhere(uid: string, which: (t: ProbeType) => boolean): void {
    for (const [key, w] of this.workers) {
      if (key.startsWith(`${uid}/`) && which(w.probeType)) {
        w.stop();
        this.workers.delete(key);
      }
    }
  }

  /** What the status generator takes: container ID → readiness / startup passed. */
  statusInputs(uid: string): { readiness: Map<string, boolean>; startup: Map<string, boolean> } {
    return { readiness: this.readiness.passedByContainer(uid), startup: this.startup.passedByContainer(uid) };
  }

  workerCount(): number {
    return this.workers.size;
  }

  stop(): void {
    for (const w of this.workers.values()) w.stop();
    this.workers.clear();
    this.scheduler.stop();
  }
}
