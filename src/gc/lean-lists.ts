// Container GC's two lists decoded on the wire over a lean h2c connection. Through the generic
// client (protobufjs, then toObject) a list of 1000 containers and their sandboxes built every
// field of every item once a minute, ~3 MB of objects that lived long enough to be promoted into
// V8's old generation; GC needs six fields of each. Field numbers are runtime.v1's (api.proto):
// Container id 1, pod_sandbox_id 2, metadata 3 (name 1), state 6, created_at 7, labels 8;
// PodSandbox id 1, metadata 2 (name 1, uid 2, namespace 3), state 3, created_at 4, labels 5.

import { LeanRuntimeCalls, type LeanRuntimeCallsOptions } from '../runtime/lean-call.js';
import {
  KEY_CONTAINER_NAME,
  KEY_POD_NAME,
  KEY_POD_NAMESPACE,
  KEY_POD_UID,
  Reader,
  WIRE_LEN,
  WIRE_VARINT,
  bytesEqual,
  entryBounds,
  str,
  type EntryBounds,
} from '../pleg/wire.js';
import type { GCContainer, GCSandbox } from './container-gc.js';

/** CONTAINER_RUNNING (runtime.v1 ContainerState). */
const CONTAINER_RUNNING = 1;
/** SANDBOX_READY (runtime.v1 PodSandboxState). */
const SANDBOX_READY = 0;

/** The string of the length-delimited field at the cursor. */
function readString(r: Reader): string {
  const end = r.lenEnd();
  const s = str(r.buf, r.pos, end);
  r.pos = end;
  return s;
}

/** Calls `each` with every item of the repeated field 1 (the list of a List*Response), the cursor at its start. */
function eachItem(buf: Buffer, each: (r: Reader, end: number) => void): void {
  const r = new Reader(buf);
  while (r.pos < r.limit) {
    const tag = r.varint32();
    if (tag !== ((1 << 3) | WIRE_LEN)) {
      r.skip(tag & 7);
      continue;
    }
    const end = r.lenEnd();
    const outer = r.enter(end);
    each(r, end);
    r.pos = end;
    r.leave(outer);
  }
}

/** Metadata's string fields by number (ContainerMetadata name 1; PodSandboxMetadata name 1, uid 2, namespace 3). */
function metadataStrings(r: Reader, out: (string | undefined)[]): void {
  const end = r.lenEnd();
  const outer = r.enter(end);
  while (r.pos < end) {
    const tag = r.varint32();
    const field = tag >>> 3;
    if ((tag & 7) === WIRE_LEN && field < out.length) out[field] = readString(r);
    else r.skip(tag & 7);
  }
  r.leave(outer);
}

/**
 * A ListContainersResponse as GC sees it: the containers the kubelet labelled with a pod UID and
 * a name (the container-name label, else the metadata name). Malformed input throws a WireFormatError.
 */
export function decodeGCContainers(buf: Buffer): GCContainer[] {
  const out: GCContainer[] = [];
  const e: EntryBounds = { kS: 0, kE: 0, vS: 0, vE: 0 };
  const meta: (string | undefined)[] = [undefined, undefined];
  eachItem(buf, (r, end) => {
    let id = '';
    let sandboxID = '';
    let state = 0;
    let createdAt = 0;
    let podUID: string | undefined;
    let labelName: string | undefined;
    meta[1] = undefined;
    while (r.pos < end) {
      const tag = r.varint32();
      const field = tag >>> 3;
      const wt = tag & 7;
      if (field === 1 && wt === WIRE_LEN) id = readString(r);
      else if (field === 2 && wt === WIRE_LEN) sandboxID = readString(r);
      else if (field === 3 && wt === WIRE_LEN) metadataStrings(r, meta);
      else if (field === 6 && wt === WIRE_VARINT) state = r.varint32();
      else if (field === 7 && wt === WIRE_VARINT) createdAt = r.nanosToMs();
      else if (field === 8 && wt === WIRE_LEN) {
        entryBounds(r, r.lenEnd(), e);
        if (bytesEqual(r.buf, e.kS, e.kE, KEY_POD_UID)) podUID = str(r.buf, e.vS, e.vE);
        else if (bytesEqual(r.buf, e.kS, e.kE, KEY_CONTAINER_NAME)) labelName = str(r.buf, e.vS, e.vE);
      } else r.skip(wt);
    }
    const name = labelName ?? meta[1];
    if (!podUID || !name) return;
    out.push({ id, podUID, name, running: state === CONTAINER_RUNNING, createdAt, sandboxID });
  });
  return out;
}

/**
 * A ListPodSandboxResponse as GC sees it: sandboxes with a pod UID (label, else metadata), their
 * pod's name and namespace (labels, else metadata). Malformed input throws a WireFormatError.
 */
export function decodeGCSandboxes(buf: Buffer): GCSandbox[] {
  const out: GCSandbox[] = [];
  const e: EntryBounds = { kS: 0, kE: 0, vS: 0, vE: 0 };
  const meta: (string | undefined)[] = [undefined, undefined, undefined, undefined];
  eachItem(buf, (r, end) => {
    let id = '';
    let state = 0;
    let createdAt = 0;
    let uid: string | undefined;
    let podName: string | undefined;
    let podNamespace: string | undefined;
    meta[1] = meta[2] = meta[3] = undefined;
    while (r.pos < end) {
      const tag = r.varint32();
      const field = tag >>> 3;
      const wt = tag & 7;
      if (field === 1 && wt === WIRE_LEN) id = readString(r);
      else if (field === 2 && wt === WIRE_LEN) metadataStrings(r, meta);
      else if (field === 3 && wt === WIRE_VARINT) state = r.varint32();
      else if (field === 4 && wt === WIRE_VARINT) createdAt = r.nanosToMs();
      else if (field === 5 && wt === WIRE_LEN) {
        entryBounds(r, r.lenEnd(), e);
        if (bytesEqual(r.buf, e.kS, e.kE, KEY_POD_UID)) uid = str(r.buf, e.vS, e.vE);
        else if (bytesEqual(r.buf, e.kS, e.kE, KEY_POD_NAME)) podName = str(r.buf, e.vS, e.vE);
        else if (bytesEqual(r.buf, e.kS, e.kE, KEY_POD_NAMESPACE)) podNamespace = str(r.buf, e.vS, e.vE);
      } else r.skip(wt);
    }
    const podUID = uid ?? meta[2];
    if (!podUID) return;
    out.push({ id, podUID, podName: podName ?? meta[1] ?? '', podNamespace: podNamespace ?? meta[3] ?? '', ready: state === SANDBOX_READY, createdAt });
  });
  return out;
}

/** GC's two lists; the connection is made on the first call. Errors are CriErrors of the method. */
export class LeanGCLister {
  readonly #calls: LeanRuntimeCalls;

  constructor(opts: LeanRuntimeCallsOptions) {
    this.#calls = new LeanRuntimeCalls(opts);
  }

  listContainers(): Promise<GCContainer[]> {
    return this.#calls.call('ListContainers', decodeGCContainers);
  }

  listSandboxes(): Promise<GCSandbox[]> {
    return this.#calls.call('ListPodSandbox', decodeGCSandboxes);
  }

  close(): void {
    this.#calls.close();
  }
}
