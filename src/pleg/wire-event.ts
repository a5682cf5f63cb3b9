// The lean decoder for GetContainerEvents messages. Field 4 is PodSandboxMetadata in the
// cri-api the project's api.proto follows (v0.25) and PodSandboxStatus in the cri-api every
// runtime implementing the RPC speaks (v0.26+: containerd 1.7+, CRI-O), which also sends the
// statuses of the pod's containers in field 5. Both shapes are read: the two are told apart by
// their wire shape (a status has a varint field 3 and a message in field 2, metadata strings).

import type { ContainerRuntimeStatus, SandboxRuntimeStatus } from '../runtime/types.js';
import { Reader, WIRE_LEN, WIRE_VARINT, latin1, sandboxMetadata, wireErrorAt } from './wire.js';
import { containerStatusAt, sandboxStatusAt } from './wire-status.js';

/** Event types of runtime.v1 ContainerEventType, by number. */
export const CONTAINER_EVENT_TYPES = [
  'CONTAINER_CREATED_EVENT',
  'CONTAINER_STARTED_EVENT',
  'CONTAINER_STOPPED_EVENT',
  'CONTAINER_DELETED_EVENT',
] as const;
export type ContainerEventTypeName = (typeof CONTAINER_EVENT_TYPES)[number];

/** A decoded GetContainerEvents message. */
export interface ContainerEvent {
  containerId: string;
  type: ContainerEventTypeName;
  /** When the runtime generated it (ms since the epoch, sub-ms precision kept). */
  createdAt: number;
  /** The pod, from the sandbox metadata (undefined when the runtime sent none). */
  pod?: { uid: string; name: string; namespace: string; attempt: number };
  /** The sandbox id, when the runtime sends a sandbox status (newer CRI) rather than metadata. */
  sandboxId?: string;
  /** The sandbox's status (newer CRI), decoded on demand. */
  sandboxStatus?: CarriedSandboxStatus;
  /** The statuses of the pod's containers (newer CRI); undefined when the runtime sent none. */
  containerStatuses?: CarriedContainerStatus[];
}

/**
 * A container status carried by an event, decoded on demand: an event names one container,
 * the rest of the pod's statuses are usually unchanged and need no more than their state.
 */
export interface CarriedContainerStatus {
  id: string;
  state: ContainerRuntimeStatus['state'];
  decode(): ContainerRuntimeStatus;
}

/** A sandbox status carried by an event, decoded on demand (usually unchanged). */
export interface CarriedSandboxStatus {
  id: string;
  state: SandboxRuntimeStatus['state'];
  decode(): SandboxRuntimeStatus;
}

const CARRIED_STATES: readonly ContainerRuntimeStatus['state'][] = ['created', 'running', 'exited', 'unknown'];

/** Reads a ContainerStatus's id and state, leaving the rest for decode(). */
function carried(buf: Buffer, start: number, end: number, runtimeName: string): CarriedContainerStatus {
  const r = new Reader(buf, start, end);
  let id = '';
  let state = 0;
  let field = -1;
  try {
    while (r.pos < end) {
      const t = r.varint32();
      field = t >>> 3;
      if (t === ((1 << 3) | WIRE_LEN)) {
        const e = r.lenEnd();
        id = latin1(buf, r.pos, e);
        r.pos = e;
      } else if (t === ((3 << 3) | WIRE_VARINT)) state = r.varint32();
      else r.skip(t & 7);
    }
  } catch (err) {
    throw wireErrorAt(err, 'ContainerStatus', { 1: 'id', 3: 'state' }, field);
  }
  return {
    id,
    state: CARRIED_STATES[state] ?? 'unknown',
    decode(): ContainerRuntimeStatus {
      try {
        return containerStatusAt(new Reader(buf, start, end), end, runtimeName);
      } catch (err) {
        throw wireErrorAt(err, 'ContainerEventResponse', EVENT_FIELDS, 5);
      }
    },
  };
}

/** A carried status from an already decoded one (tests, other sources). */
export function carriedStatus(s: ContainerRuntimeStatus): CarriedContainerStatus {
  return { id: s.id, state: s.state, decode: () => s };
}

export function carriedSandboxStatus(s: SandboxRuntimeStatus): CarriedSandboxStatus {
  return { id: s.id, state: s.state, decode: () => s };
}

const EVENT_FIELDS: Readonly<Record<number, string>> = {
  1: 'container_id',
  2: 'container_event_type',
  3: 'created_at',
  4: 'pod_sandbox_status',
  5: 'containers_statuses',
};

/** ContainerEventResponse, either shape (see the file comment). */
export function decodeContainerEvent(buf: Buffer, runtimeName = 'containerd'): ContainerEvent {
  const r = new Reader(buf);
  const ev: ContainerEvent = { containerId: '', type: 'CONTAINER_CREATED_EVENT', createdAt: 0 };
  let field = -1;
  try {
    while (r.pos < buf.length) {
      const t = r.varint32();
      field = t >>> 3;
      const wt = t & 7;
      if (field === 1 && wt === WIRE_LEN) {
        const e = r.lenEnd();
        ev.containerId = latin1(buf, r.pos, e);
        r.pos = e;
      } else if (field === 2 && wt === WIRE_VARINT) {
        ev.type = CONTAINER_EVENT_TYPES[r.varint32()] ?? 'CONTAINER_CREATED_EVENT';
      } else if (field === 3 && wt === WIRE_VARINT) {
        ev.createdAt = r.varint64() / 1e6;
      } else if (field === 4 && wt === WIRE_LEN) {
        const e = r.lenEnd();
        const start = r.pos;
        const outer = r.enter(e);
        if (isSandboxStatus(r, e)) {
          r.pos = start;
          ev.sandboxStatus = carriedSandbox(r, start, e, ev);
        } else {
          r.pos = start;
          ev.pod = sandboxMetadata(r, e);
        }
        r.leave(outer);
        r.pos = e;
      } else if (field === 5 && wt === WIRE_LEN) {
        const e = r.lenEnd();
        (ev.containerStatuses ??= []).push(carried(buf, r.pos, e, runtimeName));
        r.pos = e;
      } else {
        r.skip(wt);
      }
    }
  } catch (err) {
    throw wireErrorAt(err, 'ContainerEventResponse', EVENT_FIELDS, field);
  }
  // a sandbox status without container statuses still says the pod has none
  if (ev.sandboxStatus && !ev.containerStatuses) ev.containerStatuses = [];
  if (ev.pod && !ev.pod.uid) ev.pod = undefined;
  return ev;
}

/** A PodSandboxStatus in field 4 (newer CRI): its id, metadata and state now, the rest on demand. */
function carriedSandbox(r: Reader, start: number, e: number, ev: ContainerEvent): CarriedSandboxStatus {
  const buf = r.buf;
  let sbState = 0;
  let field = -1;
  try {
    while (r.pos < e) {
      const st = r.varint32();
      field = st >>> 3;
      if (st === ((1 << 3) | WIRE_LEN)) {
        const ie = r.lenEnd();
        ev.sandboxId = latin1(buf, r.pos, ie);
        r.pos = ie;
      } else if (st === ((2 << 3) | WIRE_LEN)) {
        ev.pod = sandboxMetadata(r, r.lenEnd());
      } else if (st === ((3 << 3) | WIRE_VARINT)) sbState = r.varint32();
      else r.skip(st & 7);
    }
  } catch (err) {
    throw wireErrorAt(err, 'PodSandboxStatus', { 1: 'id', 2: 'metadata', 3: 'state' }, field);
  }
  return {
    id: ev.sandboxId ?? '',
    state: sbState === 0 ? 'ready' : 'notready',
    decode(): SandboxRuntimeStatus {
      try {
        return sandboxStatusAt(new Reader(buf, start, e), e);
      } catch (err) {
        throw wireErrorAt(err, 'ContainerEventResponse', EVENT_FIELDS, 4);
      }
    },
  };
}

function isSandboxStatus(r: Reader, end: number): boolean {
  while (r.pos < end) {
    const t = r.varint32();
    // field 2 is the uid (a string) in metadata, the metadata (a message) in a status
    if (t >>> 3 === 2 && (t & 7) === WIRE_LEN) return lenHoldsMessage(r);
    // field 3 is the namespace (a string) in metadata, the state (a varint) in a status
    if (t >>> 3 === 3) return (t & 7) === WIRE_VARINT;
    r.skip(t & 7);
  }
  return false;
}

/** Field 2 is a uid string in metadata and a message in a status: a uid never starts with tag 0x0a. */
function lenHoldsMessage(r: Reader): boolean {
  const e = r.lenEnd();
  const first = e > r.pos ? r.buf[r.pos] : undefined;
  r.pos = e;
  return first === 0x0a;
}
