// Status reads for delivery. A pod the cache already holds is refreshed in part: only the
// containers and sandboxes whose records moved are read (one CRI call each), the rest of the
// cached status stands (a container's status does not change without a state change). A pod
// the cache does not hold is read whole (upstream GetPodStatus). Every CRI call costs ~40 KB
// of heap in grpc-js alone, so at 18k containers this is what keeps a relist under churn small.

import type { ContainerRuntimeStatus, RuntimePodStatus, SandboxRuntimeStatus } from '../runtime/types.js';
import type { Clock } from '../util/clock.js';
import type { FetchResult } from './deliver.js';
import type { CarriedContainerStatus, CarriedSandboxStatus } from './wire-event.js';
import { PlegError } from './errors.js';
import { NON_EXISTENT, type RecordState, type RecordStore, type RuntimeRecord } from './records.js';
import {
  podIPs,
  withContainerStatus,
  withSandboxStatus,
  withoutContainer,
  withoutSandbox,
  type ContainerStatusSource,
} from './status.js';
import type { PodLifecycleEvent } from './types.js';

export interface StatusReadDeps {
  store: RecordStore;
  clock: Clock;
  runtime: { getPodStatus(uid: string, name: string, namespace: string): Promise<RuntimePodStatus> };
  status?: ContainerStatusSource;
}

export interface PodRef {
  uid: string;
  name: string;
  namespace: string;
}

const CONTAINER_STATE: Record<string, RecordState> = {
  created: 'CONTAINER_CREATED',
  running: 'CONTAINER_RUNNING',
  exited: 'CONTAINER_EXITED',
  unknown: 'CONTAINER_UNKNOWN',
};

export function containerRecordState(state: string): RecordState {
  return CONTAINER_STATE[state] ?? 'CONTAINER_UNKNOWN';
}

/**
 * Observes into a delivery's own event list (the status being cached shows these), keeping
 * the pod's pending events from elsewhere (e.g. the stream) for the next delivery. False when
 * the record already holds a newer observation.
 */
export function observeInto(store: RecordStore, rec: RuntimeRecord, state: RecordState, at: number, out: PodLifecycleEvent[]): boolean {
  const stash = store.dirty.get(rec.podUid);
  if (stash) store.dirty.delete(rec.podUid);
  const accepted = store.observe(rec, state, at);
  const mine = store.dirty.get(rec.podUid);
  if (mine) {
    for (const e of mine.events) out.push(e);
    store.dirty.delete(rec.podUid);
  }
  if (stash) store.dirty.set(rec.podUid, stash);
  return accepted;
}

/** The whole pod; with `reconcile`, its records follow what the runtime returned (new ids get records). */
export async function readWholePod(d: StatusReadDeps, pod: PodRef, reconcile: boolean): Promise<FetchResult> {
  const at = d.clock.now();
  const status = await d.runtime.getPodStatus(pod.uid, pod.name, pod.namespace);
  if (!reconcile) return { status, at, podReads: 1 };
  const { store } = d;
  const out: PodLifecycleEvent[] = [];
  const seen = new Set<string>();
  for (const ss of status.sandboxStatuses) {
    seen.add(ss.id);
    const rec = store.get(ss.id) ?? (store.removedSince(ss.id, at) ? undefined : store.create(ss.id, true, pod.uid, pod.name, pod.namespace, '', ss.createdAt, ss.attempt));
    if (rec) observeInto(store, rec, ss.state === 'ready' ? 'SANDBOX_READY' : 'SANDBOX_NOTREADY', at, out);
  }
  for (const cs of status.containerStatuses) {
    seen.add(cs.id);
    const rec = store.get(cs.id) ?? (store.removedSince(cs.id, at) ? undefined : store.create(cs.id, false, pod.uid, pod.name, pod.namespace, cs.name, cs.createdAt, cs.restartCount));
    if (rec) observeInto(store, rec, containerRecordState(cs.state), at, out);
  }
  const p = store.pods.get(pod.uid);
  if (p) for (const rec of [...p.sandboxes, ...p.containers]) if (!seen.has(rec.id)) observeInto(store, rec, NON_EXISTENT, at, out);
  if (!store.pods.has(pod.uid)) return { at, events: out, podReads: 1 };
  return { status, at, events: out, podReads: 1 };
}

export interface PartialRead {
  status: RuntimePodStatus;
  at: number;
  events: PodLifecycleEvent[];
  reads: number;
}

/**
 * Re-reads `ids` into `prev`. With `observe`, the states read move the records and their
 * transitions come back as events; ids the store does not know are read as a container, then
 * as a sandbox, and get records when found. Ids without a record and not found are dropped.
 */
export async function readPartial(d: StatusReadDeps, pod: PodRef, prev: RuntimePodStatus, ids: Iterable<string>, observe: boolean): Promise<PartialRead> {
  const src = d.status;
  if (!src) throw new PlegError('ERR_PLEG_NO_STATUS_SOURCE', `partial status read of pod ${pod.namespace}/${pod.name}: no container status source`);
  const { store } = d;
  const at = d.clock.now();
  let status = prev;
  const events: PodLifecycleEvent[] = [];
  let reads = 0;
  const apply = async (id: string): Promise<void> => {
    let rec = store.get(id);
    if (!rec && (!observe || store.removedSince(id, -Infinity))) {
      // removed: drop it from the status without asking
      status = withoutSandbox(withoutContainer(status, id, at), id, at);
      return;
    }
    if (!rec || !rec.sandbox) {
      reads++;
      const cs = await src.containerStatus(id);
      if (cs) {
        if (!rec && observe && !store.removedSince(id, at)) rec = store.create(id, false, pod.uid, pod.name, pod.namespace, cs.name, cs.createdAt, cs.restartCount);
        if (rec && cs.name && !rec.name) rec.name = cs.name;
        if (rec && observe) observeInto(store, rec, containerRecordState(cs.state), at, events);
        status = withContainerStatus(status, cs, at);
        return;
      }
      if (rec) {
        if (observe) observeInto(store, rec, NON_EXISTENT, at, events);
        status = withoutContainer(status, id, at);
        return;
      }
    }
    reads++;
    const ss = await src.sandboxStatus(id);
    if (ss) {
      if (!rec && observe && !store.removedSince(id, at)) rec = store.create(id, true, pod.uid, pod.name, pod.namespace, '', ss.createdAt, ss.attempt);
      if (rec && observe) observeInto(store, rec, ss.state === 'ready' ? 'SANDBOX_READY' : 'SANDBOX_NOTREADY', at, events);
      status = withSandboxStatus(status, ss, at);
    } else {
      if (rec && observe) observeInto(store, rec, NON_EXISTENT, at, events);
      status = withoutSandbox(status, id, at);
    }
  };
  await Promise.all([...ids].map(apply));
  return { status, at, events, reads };
}

/**
 * A pod the cache does not hold, from the ids the relist just listed. Sandboxes first: a runtime
 * that sends its containers' statuses with the sandbox's (cri-api 0.27+ containers_statuses)
 * answers for the pod in one call per sandbox; the containers it did not cover are then read
 * one by one (on containerd 1.6, all of them).
 */
export async function readListedPod(d: StatusReadDeps, pod: PodRef, sandboxIds: readonly string[], containerIds: readonly string[]): Promise<PartialRead> {
  const empty: RuntimePodStatus = { uid: pod.uid, name: pod.name, namespace: pod.namespace, ips: [], sandboxStatuses: [], containerStatuses: [], timestamp: 0 };
  const src = d.status;
  if (!src?.sandboxStatusWithContainers || sandboxIds.length === 0) return readPartial(d, pod, empty, [...sandboxIds, ...containerIds], false);
  const withContainers = src.sandboxStatusWithContainers.bind(src);
  const at = d.clock.now();
  let reads = 0;
  const listed = new Set(containerIds);
  // Assembled once (sorted newest first, as the with* updates keep them), not copied per entry.
  const sandboxStatuses: SandboxRuntimeStatus[] = [];
  const byId = new Map<string, ContainerRuntimeStatus>();
  await Promise.all(
    sandboxIds.map(async (id) => {
      reads++;
      const got = await withContainers(id);
      if (!got) return;
      sandboxStatuses.push(got.sandbox);
      for (const cs of got.containers ?? []) {
        // A container the relist did not list is left to the next relist, as readPartial does.
        if (listed.has(cs.id)) byId.set(cs.id, cs);
      }
    }),
  );
  if (sandboxStatuses.length > 1) sandboxStatuses.sort((a, b) => b.createdAt - a.createdAt || b.attempt - a.attempt);
  const containerStatuses = [...byId.values()];
  if (containerStatuses.length > 1) containerStatuses.sort((a, b) => b.createdAt - a.createdAt);
  const status: RuntimePodStatus = { ...empty, sandboxStatuses, containerStatuses, ips: podIPs(sandboxStatuses), timestamp: at };
  if (byId.size === containerIds.length) return { status, at, events: [], reads };
  const rest = containerIds.filter((id) => !byId.has(id));
  const r = await readPartial(d, pod, status, rest, false);
  return { status: r.status, at, events: r.events, reads: reads + r.reads };
}

/** The statuses a (newer-CRI) container event carried, as of the event's time. */
export interface EventStatuses {
  at: number;
  /** The container (or sandbox) the event is about. */
  eventId: string;
  sandbox?: CarriedSandboxStatus;
  containers: CarriedContainerStatus[];
}

/**
 * Applies statuses carried by events (no CRI call): each moves its record (new ids get
 * records) and replaces its entry in the status, unless the record already holds a newer
 * observation. Returns the ids covered.
 */
export function applyEventStatuses(
  store: RecordStore,
  pod: PodRef,
  base: RuntimePodStatus,
  payloads: readonly EventStatuses[],
  out: PodLifecycleEvent[],
): { status: RuntimePodStatus; covered: Set<string> } {
  let status = base;
  const covered = new Set<string>();
  for (const p of payloads) {
    const carriedSb = p.sandbox;
    if (carriedSb) {
      covered.add(carriedSb.id);
      const state = carriedSb.state === 'ready' ? 'SANDBOX_READY' : 'SANDBOX_NOTREADY';
      let rec = store.get(carriedSb.id);
      if (rec && carriedSb.id !== p.eventId && rec.state === state && status.sandboxStatuses.some((x) => x.id === carriedSb.id)) {
        observeInto(store, rec, state, p.at, out);
      } else if (rec || !store.removedSince(carriedSb.id, p.at)) {
        const sb = carriedSb.decode();
        rec ??= store.create(sb.id, true, pod.uid, pod.name, pod.namespace, '', sb.createdAt, sb.attempt);
        if (observeInto(store, rec, state, p.at, out)) status = withSandboxStatus(status, sb, p.at);
      }
    }
    for (const carried of p.containers) {
      covered.add(carried.id);
      const state = containerRecordState(carried.state);
      let rec = store.get(carried.id);
      // Unchanged and cached: its status stands, only its record's time moves.
      if (rec && carried.id !== p.eventId && rec.state === state && status.containerStatuses.some((c) => c.id === carried.id)) {
        observeInto(store, rec, state, p.at, out);
        continue;
      }
      if (!rec && store.removedSince(carried.id, p.at)) continue;
      const cs = carried.decode();
      rec ??= store.create(cs.id, false, pod.uid, pod.name, pod.namespace, cs.name, cs.createdAt, cs.restartCount);
      if (observeInto(store, rec, state, p.at, out)) status = withContainerStatus(status, cs, p.at);
    }
  }
  return { status, covered };
}
