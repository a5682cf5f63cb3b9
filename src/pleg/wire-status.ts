// Lean decoders for ContainerStatusResponse and PodSandboxStatusResponse, straight into the
// runtime view the PLEG caches (what status.ts builds from protobufjs objects), for the
// evented PLEG's one-container refreshes: one pass over the bytes, no intermediate message.

import * as labels from '../runtime/labels.js';
import type { ContainerRuntimeStatus, SandboxRuntimeStatus } from '../runtime/types.js';
import { Reader, StringInterner, WIRE_LEN, WIRE_VARINT, latin1, str, wireErrorAt } from './wire.js';

/** Label and annotation keys repeat in every status: decoded once per process. */
const keys = new StringInterner();

/** What upstream reads as an integer annotation: an optionally signed decimal in the safe range. */
function intAnnotation(v: string | undefined): number | undefined {
  if (v === undefined || !/^[+-]?\d+$/.test(v)) return undefined;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : undefined;
}

const CONTAINER_STATES: readonly ContainerRuntimeStatus['state'][] = ['created', 'running', 'exited', 'unknown'];
const NAMESPACE_NODE = 2;

/** A map<string,string> entry from the cursor up to `end` (its length prefix already read). */
function mapEntry(r: Reader, end: number, into: Record<string, string>): void {
  let k = '';
  let v = '';
  const outer = r.enter(end);
  while (r.pos < end) {
    const t = r.varint32();
    if (t === ((1 << 3) | WIRE_LEN)) {
      const e = r.lenEnd();
      k = keys.get(r.buf, r.pos, e);
      r.pos = e;
    } else if (t === ((2 << 3) | WIRE_LEN)) {
      const e = r.lenEnd();
      v = str(r.buf, r.pos, e);
      r.pos = e;
    } else r.skip(t & 7);
  }
  r.leave(outer);
  into[k] = v;
}

function string(r: Reader): string {
  const e = r.lenEnd();
  const s = str(r.buf, r.pos, e);
  r.pos = e;
  return s;
}

const RESPONSE_FIELDS: Readonly<Record<number, string>> = { 1: 'status', 2: 'info', 3: 'containers_statuses', 4: 'timestamp' };

/** ContainerStatusResponse → the runtime view (null when the response carries no status). */
export function decodeContainerStatusResponse(buf: Buffer, runtimeName: string): ContainerRuntimeStatus | null {
  const r = new Reader(buf);
  let field = -1;
  try {
    while (r.pos < buf.length) {
      const t = r.varint32();
      field = t >>> 3;
      if (t === ((1 << 3) | WIRE_LEN)) return containerStatusAt(r, r.lenEnd(), runtimeName);
      r.skip(t & 7);
    }
  } catch (err) {
    throw wireErrorAt(err, 'ContainerStatusResponse', RESPONSE_FIELDS, field);
  }
  return null;
}

const CONTAINER_STATUS_FIELDS: Readonly<Record<number, string>> = {
  1: 'id',
  2: 'metadata',
  3: 'state',
  4: 'created_at',
  5: 'started_at',
  6: 'finished_at',
  7: 'exit_code',
  8: 'image',
  9: 'image_ref',
  10: 'reason',
  11: 'message',
  12: 'labels',
  13: 'annotations',
  14: 'mounts',
  15: 'log_path',
  16: 'resources',
};

/** A ContainerStatus message from the cursor up to `end`. */
export function containerStatusAt(r: Reader, end: number, runtimeName: string): ContainerRuntimeStatus {
  let id = '';
  let metaName = '';
  let attempt = 0;
  let state = 0;
  let createdAt = 0;
  let startedAt = 0;
  let finishedAt = 0;
  let exitCode = 0;
  let image = '';
  let imageRef = '';
  let reason = '';
  let message = '';
  const lbl: Record<string, string> = {};
  const ann: Record<string, string> = {};
  const outer = r.enter(end);
  let field = -1;
  try {
    while (r.pos < end) {
      const t = r.varint32();
      field = t >>> 3;
      const wt = t & 7;
      if (wt === WIRE_VARINT) {
        switch (field) {
          case 3: state = r.varint32(); continue;
          case 4: createdAt = r.nanosToMs(); continue;
          case 5: startedAt = r.nanosToMs(); continue;
          case 6: finishedAt = r.nanosToMs(); continue;
          case 7: exitCode = r.varint32() | 0; continue;
        }
      } else if (wt === WIRE_LEN) {
        switch (field) {
          case 1: {
            const e = r.lenEnd();
            id = latin1(r.buf, r.pos, e);
            r.pos = e;
            continue;
          }
          case 2: {
            const e = r.lenEnd();
            const o = r.enter(e);
            while (r.pos < e) {
              const mt = r.varint32();
              if (mt === ((1 << 3) | WIRE_LEN)) metaName = string(r);
              else if (mt === ((2 << 3) | WIRE_VARINT)) attempt = r.varint32();
              else r.skip(mt & 7);
            }
            r.leave(o);
            continue;
          }
          case 8: {
            const e = r.lenEnd();
            const o = r.enter(e);
            while (r.pos < e) {
              const it = r.varint32();
              if (it === ((1 << 3) | WIRE_LEN)) image = string(r);
              else r.skip(it & 7);
            }
            r.leave(o);
            continue;
          }
          case 9: imageRef = string(r); continue;
          case 10: reason = string(r); continue;
          case 11: message = string(r); continue;
          case 12: mapEntry(r, r.lenEnd(), lbl); continue;
          case 13: mapEntry(r, r.lenEnd(), ann); continue;
        }
      }
      r.skip(wt);
    }
  } catch (err) {
    throw wireErrorAt(err, 'ContainerStatus', CONTAINER_STATUS_FIELDS, field);
  }
  r.leave(outer);
  // The fields the runtime manager takes from labels.getContainerInfoFromLabels; of the JSON
  // annotations only preStop is kept (killing an adopted container runs it), parsed when present.
  return {
    id,
    containerID: `${runtimeName}://${id}`,
    name: lbl[labels.KUBERNETES_CONTAINER_NAME_LABEL] || metaName,
    state: CONTAINER_STATES[state] ?? 'unknown',
    createdAt,
    startedAt,
    finishedAt,
    exitCode,
    image,
    imageRef,
    hash: ann[labels.CONTAINER_HASH_LABEL] ?? '',
    restartCount: intAnnotation(ann[labels.CONTAINER_RESTART_COUNT_LABEL]) ?? attempt,
    reason,
    message,
    terminationGracePeriodSeconds: intAnnotation(ann[labels.POD_TERMINATION_GRACE_PERIOD_LABEL]),
    preStopHandler: ann[labels.CONTAINER_PRE_STOP_HANDLER_LABEL] ? labels.getContainerInfoFromAnnotations(ann).preStopHandler : undefined,
    labels: lbl,
    annotations: ann,
  };
}

/** PodSandboxStatusResponse → the runtime view (null when the response carries no status). */
export function decodeSandboxStatusResponse(buf: Buffer): SandboxRuntimeStatus | null {
  const r = new Reader(buf);
  let field = -1;
  try {
    while (r.pos < buf.length) {
      const t = r.varint32();
      field = t >>> 3;
      if (t === ((1 << 3) | WIRE_LEN)) return sandboxStatusAt(r, r.lenEnd());
      r.skip(t & 7);
    }
  } catch (err) {
    throw wireErrorAt(err, 'PodSandboxStatusResponse', RESPONSE_FIELDS, field);
  }
  return null;
}

/** PodSandboxStatusResponse with the statuses a newer runtime adds (cri-api 0.27+, fields 3 and 4). */
export interface SandboxStatusWithContainers {
  sandbox: SandboxRuntimeStatus | null;
  /**
   * The statuses of the sandbox's containers as of `timestamp`, when the runtime fills them
   * (its timestamp is non-zero); undefined otherwise (containerd 1.6 does not).
   */
  containers?: ContainerRuntimeStatus[];
  /** ms since the epoch; 0 when the runtime sent none. */
  timestamp: number;
}

/** PodSandboxStatusResponse whole: the sandbox, and its containers' statuses when the runtime sent them. */
export function decodeSandboxStatusWithContainers(buf: Buffer, runtimeName: string): SandboxStatusWithContainers {
  const r = new Reader(buf);
  let field = -1;
  let sandbox: SandboxRuntimeStatus | null = null;
  const containers: ContainerRuntimeStatus[] = [];
  let timestamp = 0;
  try {
    while (r.pos < buf.length) {
      const t = r.varint32();
      field = t >>> 3;
      if (t === ((1 << 3) | WIRE_LEN)) sandbox = sandboxStatusAt(r, r.lenEnd());
      else if (t === ((3 << 3) | WIRE_LEN)) containers.push(containerStatusAt(r, r.lenEnd(), runtimeName));
      else if (t === ((4 << 3) | WIRE_VARINT)) timestamp = r.nanosToMs();
      else r.skip(t & 7);
    }
  } catch (err) {
    throw wireErrorAt(err, 'PodSandboxStatusResponse', RESPONSE_FIELDS, field);
  }
  // Upstream reads the statuses only when the runtime stamped them (timestamp != 0).
  return timestamp > 0 ? { sandbox, containers, timestamp } : { sandbox, timestamp: 0 };
}

const SANDBOX_STATUS_FIELDS: Readonly<Record<number, string>> = {
  1: 'id',
  2: 'metadata',
  3: 'state',
  4: 'created_at',
  5: 'network',
  6: 'linux',
  7: 'labels',
  8: 'annotations',
  9: 'runtime_handler',
};

/** A PodSandboxStatus message from the cursor up to `end`. */
export function sandboxStatusAt(r: Reader, end: number): SandboxRuntimeStatus {
  let id = '';
  let attempt = 0;
  let state = 0;
  let createdAt = 0;
  let ip = '';
  const additionalIps: string[] = [];
  let hostNetwork = false;
  const lbl: Record<string, string> = {};
  const ann: Record<string, string> = {};
  const outer = r.enter(end);
  let field = -1;
  try {
    while (r.pos < end) {
      const t = r.varint32();
      field = t >>> 3;
      const wt = t & 7;
      if (wt === WIRE_VARINT && field === 3) state = r.varint32();
      else if (wt === WIRE_VARINT && field === 4) createdAt = r.nanosToMs();
      else if (wt === WIRE_LEN && field === 1) id = string(r);
      else if (wt === WIRE_LEN && field === 2) {
        const e = r.lenEnd();
        const o = r.enter(e);
        while (r.pos < e) {
          const mt = r.varint32();
          if (mt === ((4 << 3) | WIRE_VARINT)) attempt = r.varint32();
          else r.skip(mt & 7);
        }
        r.leave(o);
      } else if (wt === WIRE_LEN && field === 5) {
        // PodSandboxNetworkStatus { ip = 1; repeated PodIP additional_ips = 2 { ip = 1 } }
        const e = r.lenEnd();
        const o = r.enter(e);
        while (r.pos < e) {
          const nt = r.varint32();
          if (nt === ((1 << 3) | WIRE_LEN)) ip = string(r);
          else if (nt === ((2 << 3) | WIRE_LEN)) {
            const pe = r.lenEnd();
            const po = r.enter(pe);
            while (r.pos < pe) {
              const pt = r.varint32();
              if (pt === ((1 << 3) | WIRE_LEN)) additionalIps.push(string(r));
              else r.skip(pt & 7);
            }
            r.leave(po);
          } else r.skip(nt & 7);
        }
        r.leave(o);
      } else if (wt === WIRE_LEN && field === 6) {
        // LinuxPodSandboxStatus { namespaces = 1 { options = 2 { network = 1 } } }
        const e = r.lenEnd();
        const o = r.enter(e);
        while (r.pos < e) {
          const lt = r.varint32();
          if (lt !== ((1 << 3) | WIRE_LEN)) {
            r.skip(lt & 7);
            continue;
          }
          const ne = r.lenEnd();
          const no = r.enter(ne);
          while (r.pos < ne) {
            const nt = r.varint32();
            if (nt !== ((2 << 3) | WIRE_LEN)) {
              r.skip(nt & 7);
              continue;
            }
            const oe = r.lenEnd();
            const oo = r.enter(oe);
            while (r.pos < oe) {
              const ot = r.varint32();
              if (ot === ((1 << 3) | WIRE_VARINT)) hostNetwork = r.varint32() === NAMESPACE_NODE;
              else r.skip(ot & 7);
            }
            r.leave(oo);
          }
          r.leave(no);
        }
        r.leave(o);
      } else if (wt === WIRE_LEN && field === 7) mapEntry(r, r.lenEnd(), lbl);
      else if (wt === WIRE_LEN && field === 8) mapEntry(r, r.lenEnd(), ann);
      else r.skip(wt);
    }
  } catch (err) {
    throw wireErrorAt(err, 'PodSandboxStatus', SANDBOX_STATUS_FIELDS, field);
  }
  r.leave(outer);
  return {
    id,
    state: state === 0 ? 'ready' : 'notready',
    createdAt,
    attempt,
    ip,
    additionalIps,
    hostNetwork,
    labels: lbl,
    annotations: ann,
  };
}

/** A request whose only field is string field 1 (ContainerStatusRequest, PodSandboxStatusRequest). */
export function encodeIdRequest(id: string): Buffer {
  const body = Buffer.from(id, 'utf8');
  const len: number[] = [];
  let n = body.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([0x0a, ...len]), body]);
}
