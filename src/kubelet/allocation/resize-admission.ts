// Whether a pod's resize can be allocated now (upstream canResizePod, 1.33): a static pod cannot
// be resized (Infeasible); requests beyond the node's allocatable can never fit (Infeasible,
// "Node didn't have enough capacity: <resource>, requested: N, capacity: M", memory checked
// first); otherwise the resized pod is admitted as a new pod would be against the allocated
// pods, and a refusal is Deferred with the admission's message.

import type { Pod } from '../../api/types.js';
import { podRequests, type AdmissionNode, type AdmitResult } from '../admission.js';
import { PodReasonDeferred, PodReasonInfeasible, StaticPodResizeMessage, type ResizeFit } from './allocation-manager.js';

export function canResizePod(pod: Pod, isStatic: boolean, node: AdmissionNode, admit: () => AdmitResult): ResizeFit {
  if (isStatic) return { fit: false, reason: PodReasonInfeasible, message: StaticPodResizeMessage };
  const req = podRequests(pod);
  const cpuAvailable = node.allocatable.cpu;
  const memAvailable = node.allocatable.memory;
  const memOver = memAvailable !== undefined && req.memory > memAvailable;
  const cpuOver = cpuAvailable !== undefined && req.cpu > cpuAvailable;
  if (memOver || cpuOver) {
    const detail = memOver ? `memory, requested: ${req.memory}, capacity: ${memAvailable}` : `cpu, requested: ${req.cpu}, capacity: ${cpuAvailable}`;
    return { fit: false, reason: PodReasonInfeasible, message: `Node didn't have enough capacity: ${detail}` };
  }
  const r = admit();
  if (!r.admit) return { fit: false, reason: PodReasonDeferred, message: r.message ?? '' };
  return { fit: true };
}
