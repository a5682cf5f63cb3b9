// CRI RuntimeConfig (runtime.v1, Kubernetes 1.28+): the runtime's cgroup driver. containerd 1.6
// (Debian 12) predates it and answers UNIMPLEMENTED, and api.proto is kept equal to the
// descriptor containerd embeds, so the two messages are encoded and decoded here by hand:
//   RuntimeConfigRequest {}
//   RuntimeConfigResponse { LinuxRuntimeConfiguration linux = 1; }
//   LinuxRuntimeConfiguration { CgroupDriver cgroup_driver = 1; }   enum CgroupDriver { SYSTEMD = 0; CGROUPFS = 1; }
import { KubeletError } from '../util/errors.js';

export const RUNTIME_CONFIG_PATH = '/runtime.v1.RuntimeService/RuntimeConfig';

export const CGROUP_DRIVER_SYSTEMD = 0;
export const CGROUP_DRIVER_CGROUPFS = 1;

export interface RuntimeConfigResponse {
  /** Absent when the runtime set no linux section. */
  linux?: { cgroup_driver: number };
}

function readVarint(buf: Buffer, pos: number): [value: number, next: number] {
  let v = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (pos >= buf.length) throw new KubeletError('ERR_CRI_DECODE', 'RuntimeConfigResponse: truncated varint');
    const b = buf[pos++]!;
    v += (b & 0x7f) * mul;
    if ((b & 0x80) === 0) return [v, pos];
    mul *= 128;
  }
  throw new KubeletError('ERR_CRI_DECODE', 'RuntimeConfigResponse: varint too long');
}

/** Skips one field of wire type `wt` at `pos`; returns the next position. */
function skip(buf: Buffer, pos: number, wt: number): number {
  if (wt === 0) return readVarint(buf, pos)[1];
  if (wt === 1) return pos + 8;
  if (wt === 5) return pos + 4;
  if (wt === 2) {
    const [len, p] = readVarint(buf, pos);
    return p + len;
  }
  throw new KubeletError('ERR_CRI_DECODE', `RuntimeConfigResponse: unsupported wire type ${wt}`);
}

/** Decodes a RuntimeConfigResponse; unknown fields are skipped, as protobuf does. */
export function decodeRuntimeConfigResponse(buf: Buffer): RuntimeConfigResponse {
  const out: RuntimeConfigResponse = {};
  let pos = 0;
  while (pos < buf.length) {
    const [tag, p] = readVarint(buf, pos);
    const field = Math.floor(tag / 8);
    const wt = tag & 7;
    if (field === 1 && wt === 2) {
      const [len, start] = readVarint(buf, p);
      const end = start + len;
      if (end > buf.length) throw new KubeletError('ERR_CRI_DECODE', 'RuntimeConfigResponse: truncated linux field');
      const linux = { cgroup_driver: CGROUP_DRIVER_SYSTEMD };
      let q = start;
      while (q < end) {
        const [t, q2] = readVarint(buf, q);
        if (Math.floor(t / 8) === 1 && (t & 7) === 0) {
          const [v, q3] = readVarint(buf, q2);
          linux.cgroup_driver = v;
          q = q3;
        } else {
          q = skip(buf, q2, t & 7);
        }
      }
      out.linux = linux;
      pos = end;
    } else {
      pos = skip(buf, p, wt);
    }
  }
  return out;
}

/** Encodes a RuntimeConfigResponse (for test runtimes). */
export function encodeRuntimeConfigResponse(r: RuntimeConfigResponse): Buffer {
  if (!r.linux) return Buffer.alloc(0);
  const inner = r.linux.cgroup_driver === 0 ? Buffer.alloc(0) : Buffer.from([0x08, r.linux.cgroup_driver]);
  return Buffer.concat([Buffer.from([0x0a, inner.length]), inner]);
}
