// Signal observations from one stats Summary (upstream makeSignalObservations): memory from
// the node (root cgroup) and the pods cgroup, filesystems from statfs of the kubelet's root
// dir and the runtime's image store, pids from the node's task limit and count.

import type { Summary } from '../stats/summary.js';
import { SYSTEM_CONTAINER_PODS } from '../stats/summary.js';
import type { Signal, SignalObservation, SignalObservations } from './api.js';

export interface ObservationInputs {
  summary: Summary;
  /** Node memory capacity and its allocatable reservation (kube+system reserved, hard eviction). */
  allocatableMemory?: { capacity: bigint; reserved: bigint };
  /** When the Summary was taken (ms); figures without their own time get it. */
  now: number;
  /** Every pod's working set summed; absent: summed from the Summary's pods (which must then be all of them). */
  podsWorkingSetBytes?: bigint;
}

const t = (d: Date | null | undefined, now: number): number => (d ? d.getTime() : now);

export function makeSignalObservations(inputs: ObservationInputs): SignalObservations {
  const { summary, now } = inputs;
  const out: SignalObservations = new Map();
  const set = (s: Signal, o: SignalObservation): void => void out.set(s, o);
  const mem = summary.node.memory;
  if (mem?.availableBytes !== undefined && mem.workingSetBytes !== undefined) {
    // upstream: capacity = available + working set (the root cgroup's limit is the machine)
    set('memory.available', { available: mem.availableBytes, capacity: mem.availableBytes + mem.workingSetBytes, time: t(mem.time, now) });
  }
  if (inputs.allocatableMemory !== undefined) {
    // upstream: capacity minus the reservation minus every pod's working set
    const { capacity, reserved } = inputs.allocatableMemory;
    let used = inputs.podsWorkingSetBytes;
    if (used === undefined) {
      used = 0n;
      for (const p of summary.pods) used += p.memory?.workingSetBytes ?? 0n;
    }
    const pods = summary.node.systemContainers?.find((c) => c.name === SYSTEM_CONTAINER_PODS);
    set('allocatableMemory.available', { available: capacity - reserved - used, capacity, time: t(pods?.memory?.time, now) });
  }
  const fs = summary.node.fs;
  if (fs?.availableBytes !== undefined && fs.capacityBytes !== undefined) {
    set('nodefs.available', { available: fs.availableBytes, capacity: fs.capacityBytes, time: t(fs.time, now) });
  }
  if (fs?.inodesFree !== undefined && fs.inodes !== undefined) {
    set('nodefs.inodesFree', { available: fs.inodesFree, capacity: fs.inodes, time: t(fs.time, now) });
  }
  const img = summary.node.runtime?.imageFs;
  if (img?.availableBytes !== undefined && img.capacityBytes !== undefined) {
    set('imagefs.available', { available: img.availableBytes, capacity: img.capacityBytes, time: t(img.time, now) });
  }
  if (img?.inodesFree !== undefined && img.inodes !== undefined) {
    set('imagefs.inodesFree', { available: img.inodesFree, capacity: img.inodes, time: t(img.time, now) });
  }
  const r = summary.node.rlimit;
  if (r?.maxpid !== undefined && r.curproc !== undefined) {
    set('pid.available', { available: r.maxpid - r.curproc, capacity: r.maxpid, time: t(r.time, now) });
  }
  return out;
}
