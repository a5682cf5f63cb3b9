// The kubelet's own state on /metrics: the node name, pods desired, active, mirrored and worked
// on (read on each scrape, as upstream's housekeeping sets them), and the pod start durations
// (upstream's syncPod for kubelet_pod_start_duration_seconds and the pod startup latency
// tracker for kubelet_pod_start_sli_duration_seconds).

import type { Pod, PodStatus } from '../api/types.js';
import { kubeletMetrics, setPodCounts, setWorkingPods, type KubeletMetrics, type WorkingPod } from '../metrics/kubelet-metrics.js';
import type { Registry } from '../metrics/registry.js';
import { ConfigFirstSeenAnnotationKey, isStaticPod } from '../sources/static-pod.js';
import type { Clock } from '../util/clock.js';

/** What the scrape reads of the kubelet. */
export interface KubeletState {
  nodeName: string;
  desiredPods(): Pod[];
  activePods(): Pod[];
  /** Static pods a mirror pod is kept for (0 standalone: there is no API server to mirror to). */
  mirrorPodCount(): number;
  workingPods(): Array<{ pod: Pod; phase: 'sync' | 'terminating' | 'terminated'; removed: boolean }>;
}

/** Registers the state families on `registry`, read from `state` on each scrape. */
export function registerKubeletStateMetrics(registry: Registry, state: KubeletState): KubeletMetrics {
  const m = kubeletMetrics(registry);
  m.nodeName.withLabelValues(state.nodeName).set(1);
  registry.onCollect(() => {
    const s = (p: Pod) => ({ static: isStaticPod(p) });
    setPodCounts(m, state.desiredPods().map(s), state.activePods().map(s), state.mirrorPodCount());
    const desired = new Set(state.desiredPods().map((p) => p.metadata.uid));
    const working: WorkingPod[] = state.workingPods().map((w) => ({
      lifecycle: w.phase,
      config: !w.removed && desired.has(w.pod.metadata.uid) ? 'desired' : 'orphan',
      static: isStaticPod(w.pod),
    }));
    setWorkingPods(m, working);
  });
  return m;
}

interface StartState {
  firstStartedPulling?: number;
  lastFinishedPulling?: number;
  pulling: number;
  startRecorded: boolean;
  sliRecorded: boolean;
}

/**
 * Per pod: pulls seen (first start, last end) and whether its start was recorded. A pod's
 * start is recorded once, when its status first shows it Running; the SLI once all its
 * containers run, less the time spent pulling images.
 */
export class PodStartTracker {
  readonly #pods = new Map<string, StartState>();
  readonly #firstSeen = new Map<string, number>();

  constructor(private readonly m: KubeletMetrics, private readonly clock: Clock) {}

  #state(uid: string): StartState {
    let s = this.#pods.get(uid);
    if (!s) {
      s = { pulling: 0, startRecorded: false, sliRecorded: false };
      this.#pods.set(uid, s);
    }
    return s;
  }

  /** The kubelet saw the pod (first time only counts). */
  seen(pod: Pod): void {
    const uid = pod.metadata.uid!;
    if (!this.#firstSeen.has(uid)) {
      const annotated = Date.parse(pod.metadata.annotations?.[ConfigFirstSeenAnnotationKey] ?? '');
      this.#firstSeen.set(uid, Number.isFinite(annotated) ? annotated : this.clock.now());
    }
  }

  pulling(pod: Pod, phase: 'start' | 'end'): void {
    const s = this.#state(pod.metadata.uid!);
    const now = this.clock.now();
    if (phase === 'start') s.firstStartedPulling ??= now;
    else s.lastFinishedPulling = now;
  }

  /** After a sync: the status the kubelet now reports for the pod. */
  observe(pod: Pod, status: PodStatus | undefined): void {
    if (status?.phase !== 'Running') return;
    const uid = pod.metadata.uid!;
    const s = this.#state(uid);
    const now = this.clock.now();
    if (!s.startRecorded) {
      s.startRecorded = true;
      const first = this.#firstSeen.get(uid);
      if (first !== undefined) this.m.podStartDuration.observe(Math.max(0, now - first) / 1000);
    }
    if (!s.sliRecorded) {
      const statuses = status.containerStatuses ?? [];
      const all = pod.spec.containers.every((c) => statuses.some((st) => st.name === c.name && st.state?.running));
      if (!all) return;
      s.sliRecorded = true;
      const created = Date.parse(pod.metadata.creationTimestamp ?? '');
      const from = Number.isFinite(created) ? created : this.#firstSeen.get(uid);
      if (from === undefined) return;
      const pulling = s.firstStartedPulling !== undefined && s.lastFinishedPulling !== undefined ? Math.max(0, s.lastFinishedPulling - s.firstStartedPulling) : 0;
      this.m.podStartSLIDuration.observe(Math.max(0, now - from - pulling) / 1000);
    }
  }

  forget(uid: string): void {
    this.#pods.delete(uid);
    this.#firstSeen.delete(uid);
  }
}

const trackers = new WeakMap<Registry, PodStartTracker>();

/** The pod start tracker recording into `registry` (one per registry: the image manager and the kubelet share it). */
export function podStartTracker(registry: Registry, clock: Clock): PodStartTracker {
  let t = trackers.get(registry);
  if (!t) {
    t = new PodStartTracker(kubeletMetrics(registry), clock);
    trackers.set(registry, t);
  }
  return t;
}
