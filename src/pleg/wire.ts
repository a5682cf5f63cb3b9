// A lean decoder for the relist's two list responses and for container events, straight from
// the protobuf wire bytes (runtime.v1 field numbers). protobufjs builds every field of all
// 18k containers (~13 MB, ~250 ms, ~32 MB of heap); the relist needs an id and a state per
// item. For an id the store already knows, nothing is allocated: the id bytes are hashed and
// compared in place and only the state varint is read. Only new ids get strings, and only
// the few labels the PLEG groups by.

import { labeledPodIdentityError } from '../runtime/labels.js';
import {
  CONTAINER_STATE_NAMES,
  type RecordState,
  SANDBOX_STATE_NAMES,
  hashBytes,
  type RecordStore,
  type RuntimeRecord,
} from './records.js';
import { KubeletError } from '../util/errors.js';

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_I32 = 5;

/**
 * A malformed message: the response is not what the proto says. `path` names where, outermost
 * first (`ListContainersResponse.containers[3]`, `Container.labels`); `offset` is the byte.
 */
export class WireFormatError extends KubeletError {
  readonly reason: string;
  readonly offset: number;
  readonly path: readonly string[];

  constructor(reason: string, offset: number, path: readonly string[] = []) {
    super('ERR_CRI_WIRE_FORMAT', `${path.length > 0 ? `${path.join(' > ')}: ` : ''}${reason} at byte ${offset}`);
    this.reason = reason;
    this.offset = offset;
    this.path = path;
  }

  /** The same error seen from the enclosing message's field. */
  within(where: string): WireFormatError {
    return new WireFormatError(this.reason, this.offset, [where, ...this.path]);
  }
}

/**
 * What a decoder rethrows from its catch: a WireFormatError with `Message.field` prefixed to its
 * path; anything else unchanged (it is a decoder bug, not a bad frame, and must stay visible).
 */
export function wireErrorAt(err: unknown, message: string, fields: Readonly<Record<number, string>>, field: number): unknown {
  if (!(err instanceof WireFormatError)) return err;
  return err.within(field >= 0 ? `${message}.${fields[field] ?? `field${field}`}` : message);
}

/**
 * Cursor over one buffer; one instance per decode, reused field to field. No read goes past
 * `limit`, the end of the (sub)message being read: a nested message narrows it with enter().
 */
export class Reader {
  pos: number;
  limit: number;

  constructor(
    readonly buf: Buffer,
    pos = 0,
    limit = buf.length,
  ) {
    this.pos = pos;
    this.limit = limit;
  }

  varint32(): number {
    const buf = this.buf;
    let result = 0;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.limit) throw new WireFormatError('truncated varint', this.pos);
      const b = buf[this.pos++]!;
      if (shift < 28) result |= (b & 0x7f) << shift;
      else if (shift === 28) result |= (b & 0x0f) << 28; // upper bits of a 64-bit varint are dropped
      if (b < 0x80) return result >>> 0;
      shift += 7;
      if (shift > 63) throw new WireFormatError('varint too long', this.pos);
    }
  }

  /** An int64 varint as a (rounded) double; negative encodings read as 0. */
  varint64(): number {
    const buf = this.buf;
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.limit) throw new WireFormatError('truncated varint', this.pos);
      const b = buf[this.pos++]!;
      result += (b & 0x7f) * mul;
      if (b < 0x80) return i === 9 ? 0 : result;
      mul *= 128;
    }
    throw new WireFormatError('varint too long', this.pos);
  }

  /** An int64 varint of nanoseconds as whole milliseconds, exactly (0 for 0 or negative). */
  nanosToMs(): number {
    const buf = this.buf;
    let lo = 0;
    let hi = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.limit) throw new WireFormatError('truncated varint', this.pos);
      const b = buf[this.pos++]!;
      const bits = b & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= (bits & 0x0f) << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (shift - 32);
      if (b < 0x80) {
        if (i === 9 || hi < 0) return 0;
        const ns = (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0);
        return Number(ns / 1_000_000n);
      }
      shift += 7;
    }
    throw new WireFormatError('varint too long', this.pos);
  }

  /** Start of a length-delimited field; the end is returned, the cursor left at the start. */
  lenEnd(): number {
    const at = this.pos;
    const len = this.varint32();
    const end = this.pos + len;
    if (end > this.limit) throw new WireFormatError(`length ${len} past the end of the message`, at);
    return end;
  }

  /**
   * Narrows reads to the nested message ending at `end` (from lenEnd()); returns the outer
   * limit, restored with leave() once the cursor is at `end`.
   */
  enter(end: number): number {
    const outer = this.limit;
    this.limit = end;
    return outer;
  }

  leave(outer: number): void {
    this.limit = outer;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        for (;;) {
          if (this.pos >= this.limit) throw new WireFormatError('truncated varint', this.pos);
          if (this.buf[this.pos++]! < 0x80) return;
        }
      case WIRE_I64:
        if (this.pos + 8 > this.limit) throw new WireFormatError('truncated fixed64', this.pos);
        this.pos += 8;
        return;
      case WIRE_LEN:
        this.pos = this.lenEnd();
        return;
      case WIRE_I32:
        if (this.pos + 4 > this.limit) throw new WireFormatError('truncated fixed32', this.pos);
        this.pos += 4;
        return;
      default:
        // 3 and 4 are the deprecated groups no runtime.v1 message uses; 6 and 7 do not exist
        throw new WireFormatError(`unsupported wire type ${wireType}`, this.pos);
    }
  }
}

/** A UTF-8 string of buf[start, end) (toString with bounds slices without a Buffer view). */
export function str(buf: Buffer, start: number, end: number): string {
  return buf.toString('utf8', start, end);
}

export function latin1(buf: Buffer, start: number, end: number): string {
  return buf.toString('latin1', start, end);
}

/**
 * Strings that repeat message after message (map keys: the kubelet's label and annotation
 * names), decoded once: a lookup by the bytes' hash instead of a new string each time.
 */
export class StringInterner {
  private readonly table = new Map<number, string[]>();
  private size = 0;
  constructor(private readonly max = 4096) {}

  get(buf: Buffer, start: number, end: number): string {
    const h = hashBytes(buf, start, end);
    const bucket = this.table.get(h);
    const len = end - start;
    if (bucket) {
      for (const s of bucket) {
        if (s.length !== len) continue;
        let i = 0;
        while (i < len && s.charCodeAt(i) === buf[start + i]) i++;
        if (i === len) return s;
      }
    }
    const s = str(buf, start, end);
    // only ASCII strings compare byte for byte; a full table stops growing
    if (s.length === len && this.size < this.max && /^[\x00-\x7f]*$/.test(s)) {
      if (bucket) bucket.push(s);
      else this.table.set(h, [s]);
      this.size++;
    }
    return s;
  }
}

export const KEY_POD_UID = Buffer.from('io.kubernetes.pod.uid');
export const KEY_POD_NAME = Buffer.from('io.kubernetes.pod.name');
export const KEY_POD_NAMESPACE = Buffer.from('io.kubernetes.pod.namespace');
export const KEY_CONTAINER_NAME = Buffer.from('io.kubernetes.container.name');

export function bytesEqual(buf: Buffer, start: number, end: number, want: Uint8Array): boolean {
  if (end - start !== want.length) return false;
  for (let i = 0; i < want.length; i++) if (buf[start + i] !== want[i]) return false;
  return true;
}

export interface ListDecodeStats {
  /** Items in the response. */
  items: number;
  /** Items with an id the store did not know (records created). */
  created: number;
  /** Items skipped for lack of a pod UID, or with an invalid pod identity (not the kubelet's). */
  foreign: number;
  /** Why items with a pod UID label were skipped: their identity labels are invalid. */
  invalid: string[];
  bytes: number;
  /** Time spent decoding (ms). */
  decodeMs: number;
}

export function emptyListStats(): ListDecodeStats {
  return { items: 0, created: 0, foreign: 0, invalid: [], bytes: 0, decodeMs: 0 };
}

/**
 * What the last decode of one list did, to redo it without decoding when the runtime answers
 * the same bytes again (the usual relist at rest: nothing changed). Valid while the store's
 * membership is what it was after that decode (no record created or forgotten since).
 */
export interface ListMemo {
  buf?: Buffer;
  /** The store the records are in, and its membership count then. */
  store?: RecordStore;
  membership: number;
  /** The records the items named, and the state each was listed in. */
  recs: RuntimeRecord[];
  states: RecordState[];
  items: number;
  foreign: number;
  invalid: string[];
  /** Decodes skipped because the bytes were the same (tests, benchmarks). */
  reused: number;
}

export function newListMemo(): ListMemo {
  return { membership: -1, recs: [], states: [], items: 0, foreign: 0, invalid: [], reused: 0 };
}

/** How one list response names its items: the state field and the record to create for a new id. */
interface ListShape {
  stateField: number;
  stateNames: readonly RecordState[];
  unknownState: RecordState;
  create: typeof newContainer;
  /** For errors: the response, its repeated field, the item message and the item's field names. */
  response: string;
  items: string;
  item: string;
  fields: Readonly<Record<number, string>>;
}

/**
 * Marks every item of a list response in the store as listed in generation `gen` with its
 * state; creates records (state non-existent) for ids it does not know. Only the id and the
 * state are read for a known id. A malformed response throws WireFormatError (items before
 * the bad one are marked already; the relist that failed is not used).
 */
function decodeList(buf: Buffer, store: RecordStore, gen: number, stats: ListDecodeStats, shape: ListShape, memo?: ListMemo): void {
  const t0 = performance.now();
  stats.bytes += buf.length;
  if (memo?.buf && memo.store === store && memo.membership === store.membership && memo.buf.length === buf.length && memo.buf.equals(buf)) {
    // the same answer as last time, and every record it named is still in the store
    const { recs, states } = memo;
    for (let i = 0; i < recs.length; i++) {
      const rec = recs[i]!;
      rec.listGen = gen;
      rec.listState = states[i]!;
    }
    stats.items += memo.items;
    stats.foreign += memo.foreign;
    for (const why of memo.invalid) stats.invalid.push(why);
    memo.reused++;
    stats.decodeMs += performance.now() - t0;
    return;
  }
  const items0 = stats.items;
  const foreign0 = stats.foreign;
  const invalid0 = stats.invalid.length;
  const recs: RuntimeRecord[] | undefined = memo ? [] : undefined;
  const states: RecordState[] | undefined = memo ? [] : undefined;
  if (memo) memo.buf = undefined;
  const r = new Reader(buf);
  let index = 0;
  // the response's field being read, and the item's field in the loop below (-1 outside it;
  // create() names its own)
  let top = -1;
  let field = -1;
  const stateTag = (shape.stateField << 3) | WIRE_VARINT;
  try {
    while (r.pos < buf.length) {
      const tag = r.varint32();
      top = tag >>> 3;
      if (tag !== ((1 << 3) | WIRE_LEN)) {
        r.skip(tag & 7);
        continue;
      }
      const end = r.lenEnd();
      const outer = r.enter(end);
      const start = r.pos;
      let idStart = -1;
      let idEnd = -1;
      let state = 0;
      // Fast scan of the item (one-byte tags, lengths under 16 KiB, a one-byte state: what
      // runtimes send); anything else, including any malformed byte, is read again from the
      // item's start by the exact loop below, which names the error.
      let p = start;
      for (;;) {
        if (p >= end) {
          if (p === end) p = -1;
          break;
        }
        const t = buf[p++]!;
        if (t === stateTag) {
          if (p >= end) break;
          const v = buf[p++]!;
          if (v >= 0x80) break;
          state = v;
          continue;
        }
        if (t >= 0x80 || p >= end) break;
        if ((t & 7) === WIRE_VARINT) {
          // created_at and other varints: skipped to their last byte
          const stop = Math.min(end, p + 10);
          while (p < stop && buf[p]! >= 0x80) p++;
          if (p === stop) break;
          p++;
          continue;
        }
        if ((t & 7) !== WIRE_LEN) break;
        let len = buf[p++]!;
        if (len >= 0x80) {
          if (p >= end) break;
          const hi = buf[p++]!;
          if (hi >= 0x80) break;
          len = (len & 0x7f) | (hi << 7);
        }
        if (p + len > end) break;
        if (t === ((1 << 3) | WIRE_LEN)) {
          idStart = p;
          idEnd = p + len;
        }
        p += len;
      }
      if (p !== -1) {
        idStart = idEnd = -1;
        state = 0;
        r.pos = start;
        while (r.pos < end) {
          const t = r.varint32();
          field = t >>> 3;
          if (field === 1 && (t & 7) === WIRE_LEN) {
            idEnd = r.lenEnd();
            idStart = r.pos;
            r.pos = idEnd;
          } else if (field === shape.stateField && (t & 7) === WIRE_VARINT) {
            state = r.varint32();
          } else {
            r.skip(t & 7);
          }
        }
        field = -1;
      }
      stats.items++;
      if (idStart >= 0) {
        const hash = hashBytes(buf, idStart, idEnd);
        const rec = store.findBytes(buf, idStart, idEnd, hash);
        const listed = shape.stateNames[state] ?? shape.unknownState;
        if (rec) {
          rec.listGen = gen;
          rec.listState = listed;
          recs?.push(rec);
          states?.push(listed);
        } else {
          r.pos = start;
          const made = shape.create(r, end, store, gen, listed, hash, idStart, idEnd, stats);
          if (made) {
            recs?.push(made);
            states?.push(listed);
          }
        }
      }
      r.leave(outer);
      r.pos = end;
      index++;
    }
    if (memo) {
      // a copy: the transport owns the bytes it handed over
      memo.buf = Buffer.from(buf);
      memo.store = store;
      memo.membership = store.membership;
      memo.recs = recs!;
      memo.states = states!;
      memo.items = stats.items - items0;
      memo.foreign = stats.foreign - foreign0;
      memo.invalid = stats.invalid.slice(invalid0);
    }
  } catch (err) {
    if (!(err instanceof WireFormatError)) throw err;
    if (top !== 1) throw err.within(`${shape.response}.${top < 0 ? shape.items : `field${top}`}`);
    const where = `${shape.response}.${shape.items}[${index}]`;
    throw field >= 0 ? err.within(`${shape.item}.${shape.fields[field] ?? `field${field}`}`).within(where) : err.within(where);
  } finally {
    stats.decodeMs += performance.now() - t0;
  }
}

/** ListContainersResponse into the store (Container.state is field 6). */
export function decodeContainerList(buf: Buffer, store: RecordStore, gen: number, stats: ListDecodeStats, memo?: ListMemo): void {
  decodeList(buf, store, gen, stats, CONTAINER_LIST, memo);
}

/** A map<string,string> entry's key and value bounds, the cursor at the entry's start, up to `end`. */
export interface EntryBounds {
  kS: number;
  kE: number;
  vS: number;
  vE: number;
}

export function entryBounds(r: Reader, end: number, e: EntryBounds): void {
  e.kS = e.kE = e.vS = e.vE = 0;
  const outer = r.enter(end);
  while (r.pos < end) {
    const et = r.varint32();
    if (et === ((1 << 3) | WIRE_LEN)) {
      e.kE = r.lenEnd();
      e.kS = r.pos;
      r.pos = e.kE;
    } else if (et === ((2 << 3) | WIRE_LEN)) {
      e.vE = r.lenEnd();
      e.vS = r.pos;
      r.pos = e.vE;
    } else r.skip(et & 7);
  }
  r.leave(outer);
}

const CONTAINER_FIELDS: Readonly<Record<number, string>> = {
  1: 'id',
  2: 'pod_sandbox_id',
  3: 'metadata',
  4: 'image',
  5: 'image_ref',
  6: 'state',
  7: 'created_at',
  8: 'labels',
  9: 'annotations',
};

function newContainer(
  r: Reader,
  end: number,
  store: RecordStore,
  gen: number,
  state: (typeof CONTAINER_STATE_NAMES)[number],
  hash: number,
  idStart: number,
  idEnd: number,
  stats: ListDecodeStats,
): RuntimeRecord | undefined {
  const buf = r.buf;
  let createdAt = 0;
  let metaName = '';
  let attempt = 0;
  let uid = '';
  let podName = '';
  let podNamespace = '';
  let containerName = '';
  const entry: EntryBounds = { kS: 0, kE: 0, vS: 0, vE: 0 };
  let field = -1;
  try {
    while (r.pos < end) {
      const t = r.varint32();
      field = t >>> 3;
      const wt = t & 7;
      if (field === 3 && wt === WIRE_LEN) {
        // ContainerMetadata { name = 1; attempt = 2 }
        const mEnd = r.lenEnd();
        const outer = r.enter(mEnd);
        while (r.pos < mEnd) {
          const mt = r.varint32();
          if (mt === ((1 << 3) | WIRE_LEN)) {
            const e = r.lenEnd();
            metaName = str(buf, r.pos, e);
            r.pos = e;
          } else if (mt === ((2 << 3) | WIRE_VARINT)) attempt = r.varint32();
          else r.skip(mt & 7);
        }
        r.leave(outer);
      } else if (field === 7 && wt === WIRE_VARINT) {
        createdAt = Math.floor(r.varint64() / 1e6);
      } else if (field === 8 && wt === WIRE_LEN) {
        // map<string,string> labels: each entry { key = 1; value = 2 }
        entryBounds(r, r.lenEnd(), entry);
        const { kS, kE, vS, vE } = entry;
        if (bytesEqual(buf, kS, kE, KEY_POD_UID)) uid = str(buf, vS, vE);
        else if (bytesEqual(buf, kS, kE, KEY_POD_NAME)) podName = str(buf, vS, vE);
        else if (bytesEqual(buf, kS, kE, KEY_POD_NAMESPACE)) podNamespace = str(buf, vS, vE);
        else if (bytesEqual(buf, kS, kE, KEY_CONTAINER_NAME)) containerName = str(buf, vS, vE);
      } else {
        r.skip(wt);
      }
    }
  } catch (err) {
    throw wireErrorAt(err, 'Container', CONTAINER_FIELDS, field);
  }
  if (!uid) {
    // not created by a kubelet: no pod to attribute it to
    stats.foreign++;
    return undefined;
  }
  const bad = labeledPodIdentityError(uid, podName, podNamespace, containerName || metaName);
  if (bad !== undefined) {
    stats.foreign++;
    stats.invalid.push(`container ${latin1(buf, idStart, idEnd)}: ${bad}`);
    return;
  }
  const rec = store.create(latin1(buf, idStart, idEnd), false, uid, podName, podNamespace, containerName || metaName, createdAt, attempt, hash);
  rec.listGen = gen;
  rec.listState = state;
  stats.created++;
  return rec;
}

/** ListPodSandboxResponse into the store (PodSandbox.state is field 3). */
export function decodeSandboxList(buf: Buffer, store: RecordStore, gen: number, stats: ListDecodeStats, memo?: ListMemo): void {
  decodeList(buf, store, gen, stats, SANDBOX_LIST, memo);
}

export interface SandboxMeta {
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
}

const SANDBOX_METADATA_FIELDS: Readonly<Record<number, string>> = { 1: 'name', 2: 'uid', 3: 'namespace', 4: 'attempt' };

/** PodSandboxMetadata { name = 1; uid = 2; namespace = 3; attempt = 4 } from the cursor up to `end`. */
export function sandboxMetadata(r: Reader, end: number): SandboxMeta {
  const m: SandboxMeta = { name: '', uid: '', namespace: '', attempt: 0 };
  const outer = r.enter(end);
  let field = -1;
  try {
    while (r.pos < end) {
      const t = r.varint32();
      field = t >>> 3;
      if ((t & 7) === WIRE_LEN && field >= 1 && field <= 3) {
        const e = r.lenEnd();
        const v = str(r.buf, r.pos, e);
        r.pos = e;
        if (field === 1) m.name = v;
        else if (field === 2) m.uid = v;
        else m.namespace = v;
      } else if (field === 4 && (t & 7) === WIRE_VARINT) {
        m.attempt = r.varint32();
      } else r.skip(t & 7);
    }
  } catch (err) {
    throw wireErrorAt(err, 'PodSandboxMetadata', SANDBOX_METADATA_FIELDS, field);
  }
  r.leave(outer);
  return m;
}

const SANDBOX_FIELDS: Readonly<Record<number, string>> = {
  1: 'id',
  2: 'metadata',
  3: 'state',
  4: 'created_at',
  5: 'labels',
  6: 'annotations',
  7: 'runtime_handler',
};

function newSandbox(
  r: Reader,
  end: number,
  store: RecordStore,
  gen: number,
  state: (typeof SANDBOX_STATE_NAMES)[number],
  hash: number,
  idStart: number,
  idEnd: number,
  stats: ListDecodeStats,
): RuntimeRecord | undefined {
  const buf = r.buf;
  let meta: SandboxMeta | undefined;
  let createdAt = 0;
  let labelUid = '';
  let labelName = '';
  let labelNamespace = '';
  const entry: EntryBounds = { kS: 0, kE: 0, vS: 0, vE: 0 };
  let field = -1;
  try {
    while (r.pos < end) {
      const t = r.varint32();
      field = t >>> 3;
      const wt = t & 7;
      if (field === 2 && wt === WIRE_LEN) {
        meta = sandboxMetadata(r, r.lenEnd());
      } else if (field === 4 && wt === WIRE_VARINT) {
        createdAt = Math.floor(r.varint64() / 1e6);
      } else if (field === 5 && wt === WIRE_LEN) {
        entryBounds(r, r.lenEnd(), entry);
        const { kS, kE, vS, vE } = entry;
        if (bytesEqual(buf, kS, kE, KEY_POD_UID)) labelUid = str(buf, vS, vE);
        else if (bytesEqual(buf, kS, kE, KEY_POD_NAME)) labelName = str(buf, vS, vE);
        else if (bytesEqual(buf, kS, kE, KEY_POD_NAMESPACE)) labelNamespace = str(buf, vS, vE);
      } else {
        r.skip(wt);
      }
    }
  } catch (err) {
    throw wireErrorAt(err, 'PodSandbox', SANDBOX_FIELDS, field);
  }
  // upstream takes a sandbox's pod from its metadata; the labels are the fallback
  const uid = meta?.uid || labelUid;
  if (!uid) {
    stats.foreign++;
    return undefined;
  }
  const bad = labeledPodIdentityError(uid, meta?.name || labelName, meta?.namespace || labelNamespace);
  if (bad !== undefined) {
    stats.foreign++;
    stats.invalid.push(`sandbox ${latin1(buf, idStart, idEnd)}: ${bad}`);
    return;
  }
  const rec = store.create(
    latin1(buf, idStart, idEnd),
    true,
    uid,
    meta?.name || labelName,
    meta?.namespace || labelNamespace,
    '',
    createdAt,
    meta?.attempt ?? 0,
    hash,
  );
  rec.listGen = gen;
  rec.listState = state;
  stats.created++;
  return rec;
}

const CONTAINER_LIST: ListShape = {
  stateField: 6,
  stateNames: CONTAINER_STATE_NAMES,
  unknownState: 'CONTAINER_UNKNOWN',
  create: newContainer,
  response: 'ListContainersResponse',
  items: 'containers',
  item: 'Container',
  fields: CONTAINER_FIELDS,
};
const SANDBOX_LIST: ListShape = {
  stateField: 3,
  stateNames: SANDBOX_STATE_NAMES,
  unknownState: 'SANDBOX_NOTREADY',
  create: newSandbox,
  response: 'ListPodSandboxResponse',
  items: 'items',
  item: 'PodSandbox',
  fields: SANDBOX_FIELDS,
};
