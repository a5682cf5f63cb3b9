// Termination ordering of sidecars (upstream: kuberuntime's terminationOrdering, SidecarContainers):
// when a pod with restartable init containers is killed, every container gets its preStop hook
// at once, but a sidecar's StopContainer waits until the regular containers have exited, and
// then until every sidecar declared after it has exited (so sidecars stop in reverse order).
// The wait counts against the container's grace period, which is shared.

import type { Container, Pod } from '../api/types.js';
import type { Clock } from '../util/clock.js';

interface Latch {
  done: boolean;
  promise: Promise<void>;
  release: () => void;
}

function latch(): Latch {
  let release!: () => void;
  const promise = new Promise<void>((r) => { release = r; });
  const l: Latch = { done: false, promise, release: () => { l.done = true; release(); } };
  return l;
}

const isRestartableInit = (c: Container): boolean => c.restartPolicy === 'Always';

export class TerminationOrdering {
  /** Per container name: released once the container of that name has exited. */
  private readonly terminated = new Map<string, Latch>();
  /** Per container name: what must have exited before its StopContainer. */
  private readonly prereqs = new Map<string, Latch[]>();

  /**
   * The ordering for a pod being killed, `running` naming the containers that run now (the
   * others count as already exited). undefined when the pod has no sidecar: nothing waits.
   */
  static forPod(pod: Pod | undefined, running: Iterable<string>): TerminationOrdering | undefined {
    const init = pod?.spec.initContainers ?? [];
    if (!pod || !init.some(isRestartableInit)) return undefined;
    return new TerminationOrdering(pod, new Set(running));
  }

  private constructor(pod: Pod, running: Set<string>) {
    const regular: Latch[] = [];
    const make = (name: string): Latch => {
      const l = latch();
      if (!running.has(name)) l.release();
      this.terminated.set(name, l);
      return l;
    };
    for (const c of pod.spec.containers ?? []) regular.push(make(c.name));
    const init = pod.spec.initContainers ?? [];
    let later: Latch | undefined;
    // from the last declared to the first: each sidecar waits for the regular containers and the next sidecar
    for (let i = init.length - 1; i >= 0; i--) {
      const c = init[i]!;
      const mine = make(c.name);
      if (!isRestartableInit(c)) continue;
      this.prereqs.set(c.name, later ? [...regular, later] : [...regular]);
      later = mine;
    }
  }

  /** The names a container waits for (still running ones), for logs and tests. */
  waitingFor(name: string): string[] {
    const pending = new Set(this.prereqs.get(name)?.filter((l) => !l.done) ?? []);
    return [...this.terminated].filter(([, l]) => pending.has(l)).map(([n]) => n);
  }

  /**
   * Waits until it is this container's turn to stop, at most `gracePeriodSeconds` (none when 0
   * or less). Returns the seconds waited (a fraction; the caller truncates it as upstream does).
   */
  async waitForTurn(name: string, gracePeriodSeconds: number, clock: Clock): Promise<number> {
    if (gracePeriodSeconds <= 0) return 0;
    const pending = (this.prereqs.get(name) ?? []).filter((l) => !l.done);
    if (pending.length === 0) return 0;
    const start = clock.now();
    let timer: { cancel(): void } | undefined;
    const expired = new Promise<void>((resolve) => { timer = clock.setTimeout(resolve, gracePeriodSeconds * 1000); });
    try {
      await Promise.race([Promise.all(pending.map((l) => l.promise)), expired]);
    } finally {
      timer?.cancel();
    }
    return (clock.now() - start) / 1000;
  }

  /** The container of that name has exited (its StopContainer returned). */
  containerTerminated(name: string): void {
    this.terminated.get(name)?.release();
  }
}
