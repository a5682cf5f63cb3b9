// StatusResponse fields newer runtimes send (CRI since Kubernetes 1.30): runtime_handlers = 3
// (RuntimeHandler { name = 1; RuntimeHandlerFeatures features = 2 { recursive_read_only_mounts
// = 1; user_namespaces = 2 } }) and features = 4 (RuntimeFeatures { supplemental_groups_policy
// = 1 }). api.proto mirrors the runtime.v1 of the containerd this project runs on, whose
// descriptor has no such fields, so they are read here from the raw answer. A runtime that does
// not send them reports no handler at all, and so no user namespace support.

import type { RuntimeFeatures, RuntimeHandler } from './cri-types.js';
import { KubeletError } from '../util/errors.js';

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

export class StatusWireError extends KubeletError {
  constructor(message: string) {
    super('ERR_CRI_STATUS_WIRE', `StatusResponse: ${message}`);
  }
}

class Cursor {
  constructor(readonly buf: Buffer, public pos: number, readonly end: number) {}

  varint(): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new StatusWireError('truncated varint');
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) return result;
      mul *= 128;
    }
    throw new StatusWireError('varint longer than 10 bytes');
  }

  /** Returns [start, end) of a length-delimited field's bytes. */
  bytes(): [number, number] {
    const n = this.varint();
    const start = this.pos;
    if (n > this.end - start) throw new StatusWireError('length-delimited field past the end');
    this.pos = start + n;
    return [start, this.pos];
  }

  skip(wire: number): void {
    if (wire === VARINT) this.varint();
    else if (wire === I64) this.advance(8);
    else if (wire === LEN) this.bytes();
    else if (wire === I32) this.advance(4);
    else throw new StatusWireError(`unsupported wire type ${wire}`);
  }

  private advance(n: number): void {
    if (n > this.end - this.pos) throw new StatusWireError('fixed-size field past the end');
    this.pos += n;
  }
}

function fields(buf: Buffer, start: number, end: number, on: (field: number, wire: number, c: Cursor) => boolean): void {
  const c = new Cursor(buf, start, end);
  while (c.pos < end) {
    const key = c.varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (!on(field, wire, c)) c.skip(wire);
  }
}

function decodeHandlerFeatures(buf: Buffer, start: number, end: number): RuntimeHandler['features'] {
  const f = { recursive_read_only_mounts: false, user_namespaces: false };
  fields(buf, start, end, (field, wire, c) => {
    if (wire !== VARINT || (field !== 1 && field !== 2)) return false;
    const v = c.varint() !== 0;
    if (field === 1) f.recursive_read_only_mounts = v;
    else f.user_namespaces = v;
    return true;
  });
  return f;
}

function decodeHandler(buf: Buffer, start: number, end: number): RuntimeHandler {
  const h: RuntimeHandler = { name: '', features: null };
  fields(buf, start, end, (field, wire, c) => {
    if (wire !== LEN || (field !== 1 && field !== 2)) return false;
    const [s, e] = c.bytes();
    if (field === 1) h.name = buf.toString('utf8', s, e);
    else h.features = decodeHandlerFeatures(buf, s, e);
    return true;
  });
  return h;
}

/** runtime_handlers and features of a raw StatusResponse (empty / null when the runtime sent none). */
export function decodeStatusExtras(raw: Buffer): { runtime_handlers: RuntimeHandler[]; features: RuntimeFeatures | null } {
  const runtime_handlers: RuntimeHandler[] = [];
  let features: RuntimeFeatures | null = null;
  fields(raw, 0, raw.length, (field, wire, c) => {
    if (wire !== LEN || (field !== 3 && field !== 4)) return false;
    const [s, e] = c.bytes();
    if (field === 3) runtime_handlers.push(decodeHandler(raw, s, e));
    else {
      const f = { supplemental_groups_policy: false };
      fields(raw, s, e, (ff, fw, fc) => {
        if (ff !== 1 || fw !== VARINT) return false;
        f.supplemental_groups_policy = fc.varint() !== 0;
        return true;
      });
      features = f;
    }
    return true;
  });
  return { runtime_handlers, features };
}

/** What the kubelet keeps of a handler (upstream kubecontainer.RuntimeHandler). */
export interface RuntimeHandlerInfo {
  name: string;
  supportsRecursiveReadOnlyMounts: boolean;
  supportsUserNamespaces: boolean;
}

/** upstream toKubeRuntimeStatus's handler list: a handler without features supports neither. */
export function toRuntimeHandlerInfo(handlers: readonly RuntimeHandler[] | undefined): RuntimeHandlerInfo[] {
  return (handlers ?? []).map((h) => ({
    name: h.name,
    supportsRecursiveReadOnlyMounts: h.features?.recursive_read_only_mounts === true,
    supportsUserNamespaces: h.features?.user_namespaces === true,
  }));
}
