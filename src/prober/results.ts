// Results managers (upstream: prober/results.Manager): the latest result per container ID for
// one probe type, and an update stream the kubelet turns into pod syncs. Only changes are sent.

import type { ProbeResult } from './types.js';

export interface ResultUpdate {
  /** `containerd://<id>` as the pod status names it. */
  containerID: string;
  result: ProbeResult;
  podUID: string;
}

export class ResultsManager {
  private readonly results = new Map<string, { result: ProbeResult; podUID: string }>();
  private readonly listeners: ((u: ResultUpdate) => void)[] = [];

  get(containerID: string): ProbeResult | undefined {
    return this.results.get(containerID)?.result;
  }

  /** Records a result; listeners hear of it only when it differs from the one held. */
  set(containerID: string, result: ProbeResult, podUID: string): void {
    const prev = this.results.get(containerID);
    if (prev?.result === result) return;
    this.results.set(containerID, { result, podUID });
    for (const l of this.listeners) l({ containerID, result, podUID });
  }

  remove(containerID: string): void {
    this.results.delete(containerID);
  }

  onUpdate(l: (u: ResultUpdate) => void): void {
    this.listeners.push(l);
  }

  /** Results of one pod's containers as the status generator takes them (id → passed). */
  passedByContainer(podUID: string): Map<string, boolean> {
    const m = new Map<string, boolean>();
    for (const [id, r] of this.results) if (r.podUID === podUID && r.result !== 'Unknown') m.set(id, r.result === 'Success');
    return m;
  }

  size(): number {
    return this.results.size;
  }
}
