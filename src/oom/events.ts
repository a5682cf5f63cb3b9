// What kubelet-ts records for an OOM kill: a Kubernetes event (SystemOOM on the node as
// upstream's oom_watcher_linux.go does; OOMKilling on the pod, the reason node-problem-detector
// uses for kernel OOM kills), and the container status reason cross-check.
import { OOMKilled } from '../api/reasons.js';
import type { OomEvent } from './types.js';

/** Upstream's node event reason for a victim outside any pod. */
export const SystemOOM = 'SystemOOM';
/** The pod event reason for an OOM kill inside one of its containers. */
export const OOMKilling = 'OOMKilling';

export interface OomEventRecord {
  /** What the event is about: the node, or the pod named by podUID. */
  object: 'node' | 'pod';
  podUID?: string;
  type: 'Warning';
  reason: string;
  message: string;
}

/** The Kubernetes event to record for an OOM event, or undefined when it names neither a pod nor the node. */
export function oomEventRecord(e: OomEvent): OomEventRecord | undefined {
  const victim = e.comm !== undefined && e.pid !== undefined ? `, victim process: ${e.comm}, pid: ${e.pid}` : '';
  if (e.scope === 'system') {
    // Upstream's wording: "System OOM encountered, victim process: %s, pid: %d".
    return { object: 'node', type: 'Warning', reason: SystemOOM, message: `System OOM encountered${victim}` };
  }
  if ((e.scope === 'container' || e.scope === 'pod') && e.podUID) {
    const where = e.containerName ? `container ${e.containerName}` : 'pod cgroup';
    const what = e.count > 1 ? `${e.count} processes` : 'a process';
    return { object: 'pod', podUID: e.podUID, type: 'Warning', reason: OOMKilling, message: `Memory cgroup out of memory: killed ${what} in ${where}${victim}` };
  }
  return undefined;
}

/**
 * The terminated reason to report for a container: the runtime's, upgraded to OOMKilled when
 * the runtime only says it was killed (exit 137, reason Error or empty) while the watcher saw an
 * OOM kill in it. `agrees` is false when the two disagree (worth a log line).
 */
export function crossCheckTerminatedReason(runtimeReason: string, exitCode: number, oomKillsSeen: number): { reason: string; agrees: boolean } {
  if (runtimeReason === OOMKilled) return { reason: OOMKilled, agrees: oomKillsSeen > 0 };
  if (oomKillsSeen > 0 && exitCode === 137 && (runtimeReason === '' || runtimeReason === 'Error')) {
    return { reason: OOMKilled, agrees: false };
  }
  return { reason: runtimeReason, agrees: oomKillsSeen === 0 || exitCode !== 137 };
}
