// SIMULATION. The simulated CRI runtime's gRPC server: runtime.v1 RuntimeService and
// ImageService (the same api.proto the kubelet's client loads) on a unix socket, answering
// from a SimRuntime. List responses are assembled from per-object encodings cached until the
// object changes (a repeated field is the concatenation of its elements' encodings), so the
// simulation can serve an 18k-container ListContainers every second without dominating the
// machine it shares with the kubelet it measures; status responses are cached the same way.

import { rm } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import { criDefinitions } from '../runtime/cri-client.js';
import type { PodSandboxConfig, ContainerConfig } from '../runtime/cri-types.js';
import {
  SIM_RUNTIME_NAME,
  SIM_RUNTIME_VERSION,
  SimRuntime,
  SimRuntimeError,
  nowNs,
  type SimContainer,
  type SimContainerEvent,
  type SimSandbox,
} from './sim-runtime.js';

type Handler = grpc.UntypedHandleCall;
type Unary = (call: grpc.ServerUnaryCall<any, unknown>, cb: grpc.sendUnaryData<unknown>) => void; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * How container events are shaped: `status` as every runtime implementing GetContainerEvents
 * sends them (cri-api 0.26+: the sandbox's status in field 4, the pod's container statuses in
 * field 5), `metadata` as the project's api.proto has it (sandbox metadata only).
 */
export type SimEventShape = 'status' | 'metadata';

export interface SimRuntimeServer {
  readonly runtime: SimRuntime;
  /** Shape of the events sent from now on. */
  eventShape: SimEventShape;
  readonly socketPath: string;
  /** `unix:///...`, the form --container-runtime-endpoint takes. */
  readonly endpoint: string;
  /** Calls answered, by method name. */
  readonly calls: Map<string, number>;
  /** Bytes of the last ListContainers / ListPodSandbox response. */
  readonly lastListBytes: { containers: number; sandboxes: number };
  /** Open GetContainerEvents streams. */
  eventStreams(): number;
  /** Ends every open event stream with UNAVAILABLE (a runtime restart, as the client sees it). */
  dropEventStreams(): void;
  /**
   * Per event sent since the last call: ms from its timestamp (created_at) to its bytes being
   * written to the socket, the simulator's own share of an event's delivery time.
   */
  takeEventSendLags(): number[];
  close(): Promise<void>;
}

export interface StartSimRuntimeServerOptions {
  runtime: SimRuntime;
  /** Absolute path of the unix socket; a stale socket file there is replaced. */
  socketPath: string;
  /** Default `status`. */
  eventShape?: SimEventShape;
}

const EVENT_TYPES = ['CONTAINER_CREATED_EVENT', 'CONTAINER_STARTED_EVENT', 'CONTAINER_STOPPED_EVENT', 'CONTAINER_DELETED_EVENT'];

/** Field 1 (a string) of a status request; '' when absent. */
function readIdField(buf: Buffer): string {
  let at = 0;
  while (at < buf.length) {
    let tag = 0;
    let shift = 0;
    let b: number;
    do {
      b = buf[at++]!;
      tag |= (b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80 && at < buf.length);
    const wt = tag & 7;
    if (wt === 0) {
      while (at < buf.length && buf[at++]! & 0x80);
      continue;
    }
    if (wt !== 2) throw new SimRuntimeError('INVALID_ARGUMENT', `sim: unexpected wire type ${wt} in a status request`);
    let len = 0;
    shift = 0;
    do {
      b = buf[at++]!;
      len += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80 && at < buf.length);
    if (tag >>> 3 === 1) return buf.toString('utf8', at, at + len);
    at += len;
  }
  return '';
}

function varint(n: bigint | number): Buffer {
  let v = BigInt(n);
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}


function toCriSandbox(sb: SimSandbox): object {
  return {
    id: sb.id,
    metadata: sb.metadata,
    state: sb.state,
    created_at: sb.createdAt.toString(),
    labels: sb.labels,
    annotations: sb.annotations,
    runtime_handler: sb.runtimeHandler,
  };
}

function toCriSandboxStatus(sb: SimSandbox): object {
  return {
    ...toCriSandbox(sb),
    network: { ip: sb.ip, additional_ips: [] },
    linux: { namespaces: { options: { network: sb.hostNetwork ? 'NODE' : 'POD', pid: 'CONTAINER', ipc: 'POD', target_id: '' } } },
  };
}

function toCriContainer(c: SimContainer): object {
  return {
    id: c.id,
    pod_sandbox_id: c.sandboxId,
    metadata: c.metadata,
    image: c.image,
    image_ref: c.imageRef,
    state: c.state,
    created_at: c.createdAt.toString(),
    labels: c.labels,
    annotations: c.annotations,
  };
}

function toCriContainerStatus(c: SimContainer): object {
  return {
    id: c.id,
    metadata: c.metadata,
    state: c.state,
    created_at: c.createdAt.toString(),
    started_at: c.startedAt.toString(),
    finished_at: c.finishedAt.toString(),
    exit_code: c.exitCode,
    image: c.image,
    image_ref: c.imageRef,
    reason: c.reason,
    message: c.message,
    labels: c.labels,
    annotations: c.annotations,
    mounts: c.mounts,
    log_path: c.logPath,
    resources: null,
  };
}

function toGrpcError(err: unknown): grpc.ServiceError {
  const e = err as Error;
  const code = err instanceof SimRuntimeError ? grpc.status[err.code] : grpc.status.UNKNOWN;
  return Object.assign(new Error(e.message), { code, details: e.message, metadata: new grpc.Metadata() });
}

/** Synthetic usage: a running container uses ~5% of a core and a fixed working set. */
function containerStats(c: SimContainer, now: bigint): object {
  const seed = parseInt(c.id.slice(0, 6), 16);
  const ranNs = c.state === 'CONTAINER_RUNNING' && c.startedAt > 0n ? now - c.startedAt : 0n;
  const ts = now.toString();
  return {
    attributes: { id: c.id, metadata: c.metadata, labels: c.labels, annotations: c.annotations },
    cpu: { timestamp: ts, usage_core_nano_seconds: { value: (ranNs / 20n).toString() }, usage_nano_cores: { value: '50000000' } },
    memory: {
      timestamp: ts,
      working_set_bytes: { value: String((16 + (seed % 240)) * 1048576) },
      available_bytes: null,
      usage_bytes: { value: String((20 + (seed % 240)) * 1048576) },
      rss_bytes: { value: String((12 + (seed % 200)) * 1048576) },
      page_faults: { value: '1000' },
      major_page_faults: { value: '0' },
    },
    writable_layer: { timestamp: ts, fs_id: { mountpoint: '/var/lib/kubelet-ts-sim/snapshots' }, used_bytes: { value: '8192' }, inodes_used: { value: '2' } },
  };
}

export async function startSimRuntimeServer(opts: StartSimRuntimeServerOptions): Promise<SimRuntimeServer> {
  const { runtime, socketPath } = opts;
  const defs = await criDefinitions();
  const runtimeSvc = defs.runtime as unknown as grpc.ServiceDefinition;
  const imageSvc = defs.image as unknown as grpc.ServiceDefinition;
  const calls = new Map<string, number>();
  const lastListBytes = { containers: 0, sandboxes: 0 };
  const streams = new Set<grpc.ServerWritableStream<unknown, SimContainerEvent | Buffer>>();
  const state = { eventShape: opts.eventShape ?? ('status' as SimEventShape) };
  const sendLags: number[] = [];

  // Single-element list responses, concatenated per request (see the file comment).
  const listContainers = runtimeSvc.ListContainers!;
  const listSandboxes = runtimeSvc.ListPodSandbox!;
  const encodeContainer = (c: SimContainer): Buffer =>
    (c.encoded ??= listContainers.responseSerialize({ containers: [toCriContainer(c)] }));
  const encodeSandbox = (sb: SimSandbox): Buffer =>
    (sb.encoded ??= listSandboxes.responseSerialize({ items: [toCriSandbox(sb)] }));
  const rawSerializing = (def: grpc.MethodDefinition<unknown, unknown>): grpc.MethodDefinition<unknown, unknown> => ({
    ...def,
    responseSerialize: (v: unknown) => (Buffer.isBuffer(v) ? v : def.responseSerialize(v)),
  });
  const containerStatus = runtimeSvc.ContainerStatus!;
  const sandboxStatus = runtimeSvc.PodSandboxStatus!;
  const encodeContainerStatus = (c: SimContainer): Buffer =>
    (c.statusEncoded ??= containerStatus.responseSerialize({ status: toCriContainerStatus(c), info: {} }));
  const encodeSandboxStatus = (sb: SimSandbox): Buffer =>
    (sb.statusEncoded ??= sandboxStatus.responseSerialize({ status: toCriSandboxStatus(sb), info: {} }));
  /** The newer event shape, built when the event happens (the statuses of that moment), in one buffer. */
  const encodeStatusEvent = (e: SimContainerEvent): Buffer => {
    const id = Buffer.from(e.container_id);
    const idLen = varint(id.length);
    const type = EVENT_TYPES.indexOf(e.container_event_type);
    const typeBytes = type > 0 ? varint(type) : undefined;
    const created = varint(BigInt(e.created_at));
    // field 4: the sandbox status; field 5: each container's (their response encodings, re-tagged)
    const nested: Array<[number, Buffer]> = [];
    const sb = e.sandbox;
    if (sb) {
      nested.push([4, encodeSandboxStatus(sb)]);
      for (const cid of sb.containers) {
        const c = runtime.containers.get(cid);
        if (c) nested.push([5, encodeContainerStatus(c)]);
      }
    }
    let size = 1 + idLen.length + id.length + (typeBytes ? 1 + typeBytes.length : 0) + 1 + created.length;
    for (const [, b] of nested) size += b.length;
    const out = Buffer.allocUnsafe(size);
    let at = 0;
    out[at++] = 0x0a;
    at += idLen.copy(out, at);
    at += id.copy(out, at);
    if (typeBytes) {
      out[at++] = 0x10;
      at += typeBytes.copy(out, at);
    }
    out[at++] = 0x18;
    at += created.copy(out, at);
    for (const [field, b] of nested) {
      if (b[0] !== 0x0a) throw new SimRuntimeError('UNKNOWN', `sim: event field ${field}: expected a response encoding with field 1 first`);
      out[at++] = (field << 3) | 2;
      at += b.copy(out, at, 1);
    }
    return out;
  };
  /**
   * PodSandboxStatusResponse as a runtime implementing the evented CRI (cri-api 0.27+, the
   * `status` event shape) sends it: the sandbox (field 1), each of its containers' statuses
   * (field 3) and the time they were taken (field 4). With the `metadata` shape (containerd
   * 1.6-like) the sandbox alone. What it charges: the cached encodings, concatenated.
   */
  const encodeSandboxStatusResponse = (sb: SimSandbox): Buffer => {
    const base = encodeSandboxStatus(sb);
    if (state.eventShape !== 'status') return base;
    const parts: Buffer[] = [base];
    for (const cid of sb.containers) {
      const c = runtime.containers.get(cid);
      if (!c) continue;
      const b = encodeContainerStatus(c);
      if (b[0] !== 0x0a) throw new SimRuntimeError('UNKNOWN', 'sim: ContainerStatusResponse encoding does not start with field 1');
      parts.push(Buffer.from([(3 << 3) | 2]), b.subarray(1));
    }
    parts.push(Buffer.from([4 << 3]), varint(nowNs()));
    return Buffer.concat(parts);
  };
  // Status requests carry one id (field 1) and `verbose` (field 2, ignored here): read without protobufjs.
  const idRequest = (def: grpc.MethodDefinition<unknown, unknown>, key: string): grpc.MethodDefinition<unknown, unknown> => ({
    ...rawSerializing(def),
    requestDeserialize: (buf: Buffer) => ({ [key]: readIdField(buf) }),
  });
  const service: grpc.ServiceDefinition = {
    ...runtimeSvc,
    ListContainers: rawSerializing(listContainers),
    ListPodSandbox: rawSerializing(listSandboxes),
    ContainerStatus: idRequest(containerStatus, 'container_id'),
    PodSandboxStatus: idRequest(sandboxStatus, 'pod_sandbox_id'),
    GetContainerEvents: rawSerializing(runtimeSvc.GetContainerEvents!),
  };

  const unary = (name: string, fn: (req: any) => unknown): Unary => // eslint-disable-line @typescript-eslint/no-explicit-any
    (call, cb) => {
      calls.set(name, (calls.get(name) ?? 0) + 1);
      try {
        cb(null, fn(call.request));
      } catch (err) {
        cb(toGrpcError(err));
      }
    };

  const runtimeImpl: Record<string, Handler> = {
    Version: unary('Version', () => ({
      version: '0.1.0',
      runtime_name: SIM_RUNTIME_NAME,
      runtime_version: SIM_RUNTIME_VERSION,
      runtime_api_version: 'v1',
    })),
    Status: unary('Status', () => ({
      status: {
        conditions: [
          { type: 'RuntimeReady', status: true, reason: '', message: '' },
          { type: 'NetworkReady', status: true, reason: '', message: '' },
        ],
      },
      info: {},
    })),
    UpdateRuntimeConfig: unary('UpdateRuntimeConfig', () => ({})),
    RunPodSandbox: unary('RunPodSandbox', (r: { config: PodSandboxConfig; runtime_handler: string }) => ({
      pod_sandbox_id: runtime.runPodSandbox(r.config, r.runtime_handler),
    })),
    StopPodSandbox: unary('StopPodSandbox', (r: { pod_sandbox_id: string }) => (runtime.stopPodSandbox(r.pod_sandbox_id), {})),
    RemovePodSandbox: unary('RemovePodSandbox', (r: { pod_sandbox_id: string }) => (runtime.removePodSandbox(r.pod_sandbox_id), {})),
    PodSandboxStatus: unary('PodSandboxStatus', (r: { pod_sandbox_id: string }) => encodeSandboxStatusResponse(runtime.podSandboxStatus(r.pod_sandbox_id))),
    ListPodSandbox: unary('ListPodSandbox', (r: { filter: Parameters<SimRuntime['listPodSandbox']>[0] }) => {
      const buf = Buffer.concat(runtime.listPodSandbox(r.filter).map(encodeSandbox));
      lastListBytes.sandboxes = buf.length;
      return buf;
    }),
    CreateContainer: unary('CreateContainer', (r: { pod_sandbox_id: string; config: ContainerConfig }) => ({
      container_id: runtime.createContainer(r.pod_sandbox_id, r.config),
    })),
    StartContainer: unary('StartContainer', (r: { container_id: string }) => (runtime.startContainer(r.container_id), {})),
    StopContainer: unary('StopContainer', (r: { container_id: string; timeout: string }) => (runtime.stopContainer(r.container_id, Number(r.timeout)), {})),
    RemoveContainer: unary('RemoveContainer', (r: { container_id: string }) => (runtime.removeContainer(r.container_id), {})),
    ListContainers: unary('ListContainers', (r: { filter: Parameters<SimRuntime['listContainers']>[0] }) => {
      const buf = Buffer.concat(runtime.listContainers(r.filter).map(encodeContainer));
      lastListBytes.containers = buf.length;
      return buf;
    }),
    ContainerStatus: unary('ContainerStatus', (r: { container_id: string }) => encodeContainerStatus(runtime.containerStatus(r.container_id))),
    UpdateContainerResources: unary('UpdateContainerResources', (r: { container_id: string }) => (runtime.containerStatus(r.container_id), {})),
    ReopenContainerLog: unary('ReopenContainerLog', (r: { container_id: string }) => (runtime.containerStatus(r.container_id), {})),
    ExecSync: unary('ExecSync', (r: { container_id: string }) => {
      runtime.containerStatus(r.container_id);
      return { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), exit_code: 0 };
    }),
    ContainerStats: unary('ContainerStats', (r: { container_id: string }) => ({
      stats: containerStats(runtime.containerStatus(r.container_id), nowNs()),
    })),
    ListContainerStats: unary('ListContainerStats', (r: { filter: { id?: string; pod_sandbox_id?: string; label_selector?: Record<string, string> } | null }) => {
      const now = nowNs();
      const list = runtime.listContainers(r.filter ? { id: r.filter.id, pod_sandbox_id: r.filter.pod_sandbox_id, label_selector: r.filter.label_selector } : null);
      return { stats: list.filter((c) => c.state === 'CONTAINER_RUNNING').map((c) => containerStats(c, now)) };
    }),
    PodSandboxStats: unary('PodSandboxStats', (r: { pod_sandbox_id: string }) => {
      const sb = runtime.podSandboxStatus(r.pod_sandbox_id);
      return { stats: sandboxStats(runtime, sb, nowNs()) };
    }),
    ListPodSandboxStats: unary('ListPodSandboxStats', (r: { filter: { id?: string; label_selector?: Record<string, string> } | null }) => {
      const now = nowNs();
      return { stats: runtime.listPodSandbox(r.filter).map((sb) => sandboxStats(runtime, sb, now)) };
    }),
    GetContainerEvents: (call: grpc.ServerWritableStream<unknown, SimContainerEvent | Buffer>) => {
      calls.set('GetContainerEvents', (calls.get('GetContainerEvents') ?? 0) + 1);
      streams.add(call);
      // Headers go out at once so a client can tell the stream is established.
      call.sendMetadata(new grpc.Metadata());
      const unsubscribe = runtime.subscribe((e) => {
        if (call.cancelled || !call.writable) return;
        const createdMs = Number(BigInt(e.created_at) / 1000n) / 1000;
        call.write(state.eventShape === 'status' ? encodeStatusEvent(e) : { ...e, sandbox: undefined }, () => {
          if (sendLags.length < 100_000) sendLags.push(performance.timeOrigin + performance.now() - createdMs);
        });
      });
      const done = (): void => {
        unsubscribe();
        streams.delete(call);
      };
      call.on('cancelled', done);
      call.on('close', done);
      call.on('finish', done);
    },
  };

  const imageImpl: Record<string, Handler> = {
    ListImages: unary('ListImages', () => ({
      images: [...runtime.images].map(([name, ref]) => ({
        id: ref,
        repo_tags: [name],
        repo_digests: [],
        size: '12582912',
        uid: null,
        username: '',
        spec: { image: ref, annotations: {} },
        pinned: false,
      })),
    })),
    ImageStatus: unary('ImageStatus', (r: { image: { image: string } }) => {
      const name = r.image?.image ?? '';
      const ref = runtime.images.get(name) ?? ([...runtime.images.values()].includes(name) ? name : undefined);
      return {
        image: ref
          ? { id: ref, repo_tags: [name], repo_digests: [], size: '12582912', uid: null, username: '', spec: { image: ref, annotations: {} }, pinned: false }
          : null,
        info: {},
      };
    }),
    PullImage: unary('PullImage', (r: { image: { image: string } }) => {
      const name = r.image?.image ?? '';
      let ref = runtime.images.get(name);
      if (!ref) runtime.images.set(name, (ref = `sha256:${runtime.newId()}`));
      return { image_ref: ref };
    }),
    RemoveImage: unary('RemoveImage', (r: { image: { image: string } }) => {
      const name = r.image?.image ?? '';
      runtime.images.delete(name);
      for (const [k, v] of runtime.images) if (v === name) runtime.images.delete(k);
      return {};
    }),
    ImageFsInfo: unary('ImageFsInfo', () => ({
      image_filesystems: [
        {
          timestamp: nowNs().toString(),
          fs_id: { mountpoint: '/var/lib/kubelet-ts-sim/images' },
          used_bytes: { value: String(runtime.images.size * 12582912) },
          inodes_used: { value: String(runtime.images.size * 100) },
        },
      ],
    })),
  };

  // Status encodings are cached until the object changes; encoding them all now keeps the first
  // events about each pod (which carry its statuses) from paying for it while they are timed.
  for (const sb of runtime.sandboxes.values()) encodeSandboxStatus(sb);
  for (const c of runtime.containers.values()) encodeContainerStatus(c);

  const server = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  server.addService(service, runtimeImpl);
  server.addService(imageSvc, imageImpl);
  await rm(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
  });

  return {
    runtime,
    get eventShape(): SimEventShape {
      return state.eventShape;
    },
    set eventShape(v: SimEventShape) {
      state.eventShape = v;
    },
    socketPath,
    endpoint: `unix://${socketPath}`,
    calls,
    lastListBytes,
    eventStreams: () => streams.size,
    takeEventSendLags: () => sendLags.splice(0),
    dropEventStreams(): void {
      for (const call of [...streams]) {
        streams.delete(call);
        call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'simulated runtime dropped the event stream' });
      }
    },
    async close(): Promise<void> {
      for (const call of [...streams]) call.end();
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1000);
        server.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      });
      await rm(socketPath, { force: true });
    },
  };
}

function sandboxStats(runtime: SimRuntime, sb: SimSandbox, now: bigint): object {
  const containers = [...sb.containers].map((id) => runtime.containers.get(id)!).filter((c) => c.state === 'CONTAINER_RUNNING');
  return {
    attributes: { id: sb.id, metadata: sb.metadata, labels: sb.labels, annotations: sb.annotations },
    linux: {
      cpu: null,
      memory: null,
      network: null,
      process: { timestamp: now.toString(), process_count: { value: String(containers.length + 1) } },
      containers: containers.map((c) => containerStats(c, now)),
    },
  };
}
