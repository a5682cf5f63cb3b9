// The writable layers of every container, read once per accounting period: ListContainerStats
// decoded on the wire over a lean h2c connection of its own. The generic client (protobufjs, then toObject with 64-bit numbers as strings) builds every field of
// every container: for 1000 containers ListContainerStats made ~4 MB of objects a minute that
// lived long enough to be promoted into V8's old generation. These read the wire format directly
// (field numbers from runtime.v1's api.proto) and keeps each container's layer figures only.

import { LeanRuntimeCalls, type LeanRuntimeCallsOptions } from '../runtime/lean-call.js';
import { Reader, WIRE_LEN, WIRE_VARINT, str } from '../pleg/wire.js';

/** A container's writable layer (ContainerStats.writable_layer, a FilesystemUsage). */
export interface WritableLayerFigures {
  /** used_bytes.value; the layer is only reported when the runtime gives it. */
  usedBytes: number;
  /** inodes_used.value, when given. */
  inodesUsed?: number;
  /** timestamp (ns) as ms; undefined when 0 or absent. */
  timeMs?: number;
}

// ListContainerStatsResponse.stats = 1; ContainerStats.attributes = 1, .writable_layer = 4;
// ContainerAttributes.id = 1; FilesystemUsage.timestamp = 1, .used_bytes = 3, .inodes_used = 4;
// UInt64Value.value = 1.

/** UInt64Value's value at the cursor (a length-delimited submessage). */
function uint64Value(r: Reader): number {
  const end = r.lenEnd();
  const outer = r.enter(end);
  let v = 0;
  while (r.pos < end) {
    const tag = r.varint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_VARINT) v = r.varint64();
    else r.skip(tag & 7);
  }
  r.leave(outer);
  return v;
}

function filesystemUsage(r: Reader): WritableLayerFigures | undefined {
  const end = r.lenEnd();
  const outer = r.enter(end);
  let used: number | undefined;
  let inodes: number | undefined;
  let timeMs: number | undefined;
  while (r.pos < end) {
    const tag = r.varint32();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === WIRE_VARINT) timeMs = r.nanosToMs() || undefined;
    else if (field === 3 && wt === WIRE_LEN) used = uint64Value(r);
    else if (field === 4 && wt === WIRE_LEN) inodes = uint64Value(r);
    else r.skip(wt);
  }
  r.leave(outer);
  if (used === undefined) return undefined;
  const out: WritableLayerFigures = { usedBytes: used };
  if (inodes !== undefined) out.inodesUsed = inodes;
  if (timeMs !== undefined) out.timeMs = timeMs;
  return out;
}

function attributesId(r: Reader): string | undefined {
  const end = r.lenEnd();
  const outer = r.enter(end);
  let id: string | undefined;
  while (r.pos < end) {
    const tag = r.varint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_LEN) {
      const e = r.lenEnd();
      id = str(r.buf, r.pos, e);
      r.pos = e;
    } else r.skip(tag & 7);
  }
  r.leave(outer);
  return id;
}

/**
 * A ListContainerStatsResponse as each container's writable layer by container id (containers
 * without an id or a layer are left out). Malformed input throws a WireFormatError.
 */
export function decodeWritableLayers(buf: Buffer): Map<string, WritableLayerFigures> {
  const out = new Map<string, WritableLayerFigures>();
  const r = new Reader(buf);
  while (r.pos < r.limit) {
    const tag = r.varint32();
    if (tag >>> 3 !== 1 || (tag & 7) !== WIRE_LEN) {
      r.skip(tag & 7);
      continue;
    }
    const end = r.lenEnd();
    const outer = r.enter(end);
    let id: string | undefined;
    let layer: WritableLayerFigures | undefined;
    while (r.pos < end) {
      const t = r.varint32();
      const field = t >>> 3;
      const wt = t & 7;
      if (field === 1 && wt === WIRE_LEN) id = attributesId(r);
      else if (field === 4 && wt === WIRE_LEN) layer = filesystemUsage(r);
      else r.skip(wt);
    }
    r.leave(outer);
    if (id && layer) out.set(id, layer);
  }
  return out;
}

/** Reads every container's writable layer; the connection is made on the first read. */
export class WritableLayerReader {
  readonly #calls: LeanRuntimeCalls;

  constructor(opts: LeanRuntimeCallsOptions) {
    this.#calls = new LeanRuntimeCalls(opts);
  }

  /** Fails as a CriError of ListContainerStats (the runtime's code and message, or CANCELLED after close()). */
  read(): Promise<Map<string, WritableLayerFigures>> {
    return this.#calls.call('ListContainerStats', decodeWritableLayers);
  }

  close(): void {
    this.#calls.close();
  }
}
