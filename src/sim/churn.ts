// SIMULATION. The churn generator: at a set rate of container state changes per second it
// makes simulated containers exit (crash, OOM kill, completion), restarts exited ones as the
// kubelet would (new attempt created and started, the older exited attempt removed), and
// replaces whole pods (one removed, a new one added). It stands in for the node's activity so
// the PLEG can be measured under change.

import type { SimContainer, SimRuntime } from './sim-runtime.js';

export interface ChurnOptions {
  /** Container state changes (CRI events) per second; 0 pauses. */
  eventsPerSecond: number;
  /** Share of operations that replace a whole pod (default 0.02). */
  podReplaceShare?: number;
  /** Exited containers kept around as a share of all containers before restarts win (default 0.05). */
  exitedTarget?: number;
  /** Containers per pod for added pods (default 3). */
  containersPerPod?: number;
  /** Tick period in ms (default 2: events spread over time as a real node's do, not in bursts). */
  tickMs?: number;
  /**
   * Most work one timer tick does (ms, default 1): the events of a tick reach the socket only
   * when it returns, so a tick catching up after a stall must not hold them for long; what it
   * leaves undone stays in the budget for the next ticks.
   */
  sliceMs?: number;
  /** Time source for the slice (tests step it); performance.now by default. */
  workNow?: () => number;
}

export interface ChurnStats {
  exits: number;
  restarts: number;
  podsReplaced: number;
  events: number;
}

const EXITS: ReadonlyArray<readonly [number, string]> = [
  [1, 'Error'],
  [137, 'OOMKilled'],
  [0, 'Completed'],
  [2, 'Error'],
];

export class ChurnGenerator {
  readonly stats: ChurnStats = { exits: 0, restarts: 0, podsReplaced: 0, events: 0 };
  private timer?: NodeJS.Timeout;
  private budget = 0;
  private last = 0;
  /** Container ids for O(1) random picks; stale ids are skipped and dropped lazily. */
  private ids: string[] = [];

  constructor(
    private readonly runtime: SimRuntime,
    private opts: ChurnOptions,
  ) {}

  setRate(eventsPerSecond: number): void {
    this.opts = { ...this.opts, eventsPerSecond };
    this.budget = 0;
  }

  get rate(): number {
    return this.opts.eventsPerSecond;
  }

  start(): void {
    if (this.timer) return;
    this.last = performance.now();
    this.timer = setInterval(() => this.tick(performance.now(), this.opts.sliceMs ?? 1), this.opts.tickMs ?? 2);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Advances by the elapsed time, working for at most `sliceMs`; exposed so tests can step it. */
  tick(now = performance.now(), sliceMs = Infinity): void {
    const dt = Math.max(0, now - this.last) / 1000;
    this.last = now;
    if (this.opts.eventsPerSecond <= 0) return;
    // Never bank more than a second of work after a stall.
    this.budget = Math.min(this.budget + dt * this.opts.eventsPerSecond, this.opts.eventsPerSecond);
    const workNow = this.opts.workNow ?? performance.now.bind(performance);
    const until = sliceMs === Infinity ? Infinity : workNow() + sliceMs;
    while (this.budget >= 1) {
      const n = this.step();
      if (n === 0) break;
      this.budget -= n;
      if (until !== Infinity && workNow() >= until) break;
    }
  }

  /** Performs one operation; returns how many CRI events it produced. */
  step(): number {
    const rt = this.runtime;
    const before = rt.eventsEmitted;
    const r = rt.random();
    if (r < (this.opts.podReplaceShare ?? 0.02)) {
      const victim = this.randomContainer(() => true);
      if (victim) {
        const sb = rt.sandboxes.get(victim.sandboxId)!;
        const n = sb.containers.size || (this.opts.containersPerPod ?? 3);
        rt.removePod(sb.metadata.uid);
        rt.addPod(rt.syntheticPod(n));
        this.stats.podsReplaced++;
      }
    } else {
      // Restart a crashed container when enough are down, else crash one; either way when the other has no candidate.
      const restart = this.exitedShare() >= (this.opts.exitedTarget ?? 0.05);
      const crashed = restart ? this.randomContainer((x) => x.state === 'CONTAINER_EXITED' && this.isNewestAttempt(x.id)) : undefined;
      if (crashed) {
        rt.restartContainer(crashed.id);
        this.stats.restarts++;
      } else {
        const c = this.randomContainer((x) => x.state === 'CONTAINER_RUNNING');
        if (c) {
          const [code, reason] = EXITS[Math.floor(rt.random() * EXITS.length)]!;
          rt.exitContainer(c.id, code, reason);
          this.stats.exits++;
        }
      }
    }
    const n = rt.eventsEmitted - before;
    this.stats.events += n;
    return n;
  }

  private exitedShare(): number {
    let exited = 0;
    let sampled = 0;
    // Sampling keeps a step O(1) at 18k containers.
    for (let i = 0; i < 64; i++) {
      const c = this.randomContainer(() => true);
      if (!c) break;
      sampled++;
      if (c.state === 'CONTAINER_EXITED' && this.isNewestAttempt(c.id)) exited++;
    }
    return sampled ? exited / sampled : 0;
  }

  private isNewestAttempt(id: string): boolean {
    const c = this.runtime.containers.get(id)!;
    const sb = this.runtime.sandboxes.get(c.sandboxId)!;
    for (const other of sb.containers) {
      const o = this.runtime.containers.get(other)!;
      if (o.metadata.name === c.metadata.name && o.metadata.attempt > c.metadata.attempt) return false;
    }
    return true;
  }

  private randomContainer(pred: (c: SimContainer) => boolean): SimContainer | undefined {
    const rt = this.runtime;
    // New containers join `ids` on a rebuild, which happens once 5% of it has gone stale.
    if (this.ids.length === 0 || this.ids.length < rt.containers.size * 0.95) this.ids = [...rt.containers.keys()];
    for (let tries = 0; tries < 256 && this.ids.length; tries++) {
      const i = Math.floor(rt.random() * this.ids.length);
      const c = rt.containers.get(this.ids[i]!);
      if (!c) {
        this.ids[i] = this.ids[this.ids.length - 1]!;
        this.ids.pop();
        continue;
      }
      if (pred(c)) return c;
    }
    this.ids = [...rt.containers.keys()];
    return undefined;
  }
}
