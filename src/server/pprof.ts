// /debug/pprof/heap as upstream serves it: a sampled allocation profile in pprof's format
// (profile.proto, gzip-compressed), never the heap's contents. V8's sampling heap profiler
// (HeapProfiler.startSampling through node:inspector) records, for about one allocation in every
// `samplingInterval` bytes, the call stack that made it; a profile is those stacks with the
// objects and bytes still live that each one allocated (Go's inuse_objects and inuse_space). The
// only strings in it are function names and script URLs: code, not data.

import { gzipSync } from 'node:zlib';

/** The V8 sampling heap profile (HeapProfiler.getSamplingProfile's `profile`). */
export interface SamplingHeapProfile {
  head: SamplingHeapProfileNode;
  samples?: { size: number; nodeId: number; ordinal: number }[];
}

export interface SamplingHeapProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number; scriptId?: string };
  selfSize: number;
  id: number;
  children: SamplingHeapProfileNode[];
}

/** A minimal protobuf writer: varints, length-delimited fields and packed repeated varints. */
class ProtoWriter {
  private readonly parts: Buffer[] = [];
  private len = 0;

  private push(b: Buffer): void {
    this.parts.push(b);
    this.len += b.length;
  }

  private static varint(v: number | bigint): Buffer {
    let n = BigInt.asUintN(64, BigInt(v));
    const out: number[] = [];
    while (n >= 0x80n) {
      out.push(Number(n & 0x7fn) | 0x80);
      n >>= 7n;
    }
    out.push(Number(n));
    return Buffer.from(out);
  }

  /** A varint field (wire type 0); zero is left out, as proto3 does. */
  uint(field: number, v: number | bigint): this {
    if (v === 0 || v === 0n) return this;
    this.push(ProtoWriter.varint(field << 3));
    this.push(ProtoWriter.varint(v));
    return this;
  }

  /** A length-delimited field (wire type 2). */
  bytes(field: number, b: Buffer): this {
    this.push(ProtoWriter.varint((field << 3) | 2));
    this.push(ProtoWriter.varint(b.length));
    this.push(b);
    return this;
  }

  message(field: number, w: ProtoWriter): this {
    return this.bytes(field, w.finish());
  }

  string(field: number, s: string): this {
    return this.bytes(field, Buffer.from(s, 'utf8'));
  }

  /** A packed repeated varint field. */
  packed(field: number, vs: readonly (number | bigint)[]): this {
    if (vs.length === 0) return this;
    return this.bytes(field, Buffer.concat(vs.map((v) => ProtoWriter.varint(v))));
  }

  finish(): Buffer {
    return Buffer.concat(this.parts, this.len);
  }
}

/** The sample types of the profile, in order (Go's heap profile's in-use pair). */
export const HEAP_SAMPLE_TYPES = [['inuse_objects', 'count'], ['inuse_space', 'bytes']] as const;

/**
 * Encodes a V8 sampling heap profile as pprof's profile.proto (uncompressed). Each node that
 * allocated (selfSize > 0) is a sample whose stack runs from it up to the root; its bytes are
 * V8's estimate (selfSize) and its objects the samples taken there, scaled as its bytes were.
 */
export function encodeHeapProfile(p: SamplingHeapProfile, o: { timeNanos: bigint; periodBytes: number }): Buffer {
  const strings = new Map<string, number>([['', 0]]);
  const str = (s: string): number => {
    let i = strings.get(s);
    if (i === undefined) strings.set(s, (i = strings.size));
    return i;
  };
  const sampled = new Map<number, { count: number; bytes: number }>();
  for (const s of p.samples ?? []) {
    const e = sampled.get(s.nodeId) ?? { count: 0, bytes: 0 };
    e.count++;
    e.bytes += s.size;
    sampled.set(s.nodeId, e);
  }

  const out = new ProtoWriter();
  for (const [type, unit] of HEAP_SAMPLE_TYPES) out.message(1, new ProtoWriter().uint(1, str(type)).uint(2, str(unit)));

  const functions = new Map<string, number>();
  const functionMsgs: ProtoWriter[] = [];
  const locationMsgs: ProtoWriter[] = [];
  const locationOf = new Map<number, number>();
  const location = (n: SamplingHeapProfileNode): number => {
    let id = locationOf.get(n.id);
    if (id !== undefined) return id;
    const { functionName, url, lineNumber, columnNumber } = n.callFrame;
    const name = functionName || '(anonymous)';
    const key = `${name}\0${url}\0${lineNumber}\0${columnNumber}`;
    let fid = functions.get(key);
    if (fid === undefined) {
      fid = functions.size + 1;
      functions.set(key, fid);
      functionMsgs.push(new ProtoWriter().uint(1, fid).uint(2, str(name)).uint(3, str(name)).uint(4, str(url)).uint(5, Math.max(0, lineNumber + 1)));
    }
    id = locationMsgs.length + 1;
    locationOf.set(n.id, id);
    const line = new ProtoWriter().uint(1, fid).uint(2, Math.max(0, lineNumber + 1)).uint(3, Math.max(0, columnNumber + 1));
    locationMsgs.push(new ProtoWriter().uint(1, id).message(4, line));
    return id;
  };

  // Depth first with an explicit stack (a deep call tree must not overflow ours).
  const todo: { node: SamplingHeapProfileNode; stack: number[] }[] = [{ node: p.head, stack: [] }];
  while (todo.length > 0) {
    const { node, stack } = todo.pop()!;
    const isRoot = node === p.head;
    const here = isRoot ? stack : [location(node), ...stack];
    if (!isRoot && node.selfSize > 0) {
      const s = sampled.get(node.id);
      const objects = s && s.bytes > 0 ? Math.max(1, Math.round((s.count * node.selfSize) / s.bytes)) : Math.max(1, Math.round(node.selfSize / o.periodBytes));
      out.message(2, new ProtoWriter().packed(1, here).packed(2, [objects, Math.round(node.selfSize)]));
    }
    for (const c of node.children) todo.push({ node: c, stack: here });
  }
  for (const l of locationMsgs) out.message(4, l);
  for (const f of functionMsgs) out.message(5, f);
  const periodType = new ProtoWriter().uint(1, str('space')).uint(2, str('bytes'));
  for (const s of strings.keys()) out.string(6, s);
  out.uint(9, o.timeNanos);
  out.message(11, periodType);
  out.uint(12, o.periodBytes);
  return out.finish();
}

/** The profile as /debug/pprof/heap sends it: profile.proto, gzip-compressed. */
export function heapProfileBody(p: SamplingHeapProfile, o: { timeNanos: bigint; periodBytes: number }): Buffer {
  return gzipSync(encodeHeapProfile(p, o));
}
