// Where a relist reads the runtime from. LeanCriLister speaks runtime.v1 itself on a channel
// of its own: ListPodSandbox and ListContainers with the lean decoders of wire.ts as the grpc
// deserializers, GetContainerEvents for the evented PLEG, and single ContainerStatus /
// PodSandboxStatus reads decoded straight into the runtime view (wire-status.ts). RuntimePodsLister adapts any
// getPods() (the runtime manager's, or a test double) to the same interface.

import * as grpc from '@grpc/grpc-js';
import { criEndpointToTarget } from '../runtime/cri-client.js';
import { toCriError } from '../runtime/cri-errors.js';
import { labeledPodIdentityError } from '../runtime/labels.js';
import type { RuntimePod } from '../runtime/runtime-manager.js';
import type { ContainerRuntimeStatus, SandboxRuntimeStatus } from '../runtime/types.js';
import type { RecordState, RecordStore } from './records.js';
import type { ContainerStatusSource } from './status.js';
import { decodeContainerStatusResponse, decodeSandboxStatusResponse, decodeSandboxStatusWithContainers, encodeIdRequest } from './wire-status.js';
import { decodeContainerList, decodeSandboxList, emptyListStats, newListMemo, type ListDecodeStats } from './wire.js';
import { decodeContainerEvent, type ContainerEvent } from './wire-event.js';
import { Http2Unary, type UnaryTransport } from '../runtime/unary.js';
import { H2cUnary, LEAN_FLOW_CONTROL_WINDOW, ResponseScratch } from '../runtime/h2c.js';

export { LEAN_FLOW_CONTROL_WINDOW };

export interface RelistSource {
  /**
   * Lists every sandbox and container into the store as generation `gen`: known records get
   * listGen/listState, unknown ids get new (non-existent) records. Rejects when either list fails.
   */
  list(store: RecordStore, gen: number): Promise<ListDecodeStats>;
  close(): void;
}

export interface ContainerEventHandlers {
  /** The runtime accepted the stream (response headers arrived). */
  onReady(): void;
  onEvent(e: ContainerEvent): void;
  /** The stream ended (err undefined only when cancelled by us). */
  onEnd(err?: Error): void;
}

export interface ContainerEventSource {
  /** Opens GetContainerEvents; cancel() ends it without calling onEnd with an error. */
  openContainerEvents(h: ContainerEventHandlers): { cancel(): void };
}

const LIST_SANDBOXES = '/runtime.v1.RuntimeService/ListPodSandbox';
const CONTAINER_STATUS = '/runtime.v1.RuntimeService/ContainerStatus';
const SANDBOX_STATUS = '/runtime.v1.RuntimeService/PodSandboxStatus';
const LIST_CONTAINERS = '/runtime.v1.RuntimeService/ListContainers';
const GET_EVENTS = '/runtime.v1.RuntimeService/GetContainerEvents';
const EMPTY = Buffer.alloc(0);
const emptyRequest = (): Buffer => EMPTY;

export interface LeanCriListerOptions {
  /** `unix:///path` or an absolute socket path (as the CRI client). */
  runtimeEndpoint: string;
  /** Deadline of each list call (ms). */
  timeoutMs: number;
  /**
   * Receive limit. Larger than the CRI client's 16 MiB by default: upstream's relist fails
   * past ~20k containers at 16 MiB, and a lean decode has no reason to.
   */
  maxMessageBytes?: number;
  /** Runtime name for container IDs in the API (`containerd://<id>`). */
  runtimeName?: string;
  /** HTTP/2 receive window of the channel (bytes); default LEAN_FLOW_CONTROL_WINDOW. */
  flowControlWindow?: number;
  /**
   * How single status reads travel: `h2c` (default) on a multiplexed connection of their own
   * through the lean client (h2c.ts), `http2` the same through node:http2 (unary.ts), `grpc-js`
   * on the lister's grpc-js channel (the last two are the benchmark's baselines).
   */
  statusTransport?: StatusTransport;
}


/** Channel options of the lean lister (the benchmark's receive floor uses the same). */
export function leanChannelOptions(opts: { maxMessageBytes?: number; flowControlWindow?: number } = {}): grpc.ChannelOptions {
  return {
    'grpc.max_receive_message_length': opts.maxMessageBytes ?? 256 * 1024 * 1024,
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 3000,
    'grpc-node.flow_control_window': opts.flowControlWindow ?? LEAN_FLOW_CONTROL_WINDOW,
  };
}

/** How the lister's single status reads travel (LeanCriListerOptions.statusTransport). */
export type StatusTransport = 'h2c' | 'http2' | 'grpc-js';

export class LeanCriLister implements RelistSource, ContainerEventSource, ContainerStatusSource {
  readonly #client: grpc.Client;
  readonly #timeoutMs: number;
  readonly #runtimeName: string;
  readonly #unary?: UnaryTransport;
  /** With the h2c transport the two lists travel on it too, each assembled in a buffer kept between relists. */
  readonly #h2c?: H2cUnary;
  readonly #scratch = { sandboxes: new ResponseScratch(), containers: new ResponseScratch() };
  /** The last decode of each list: an answer byte for byte the same is not decoded again. */
  readonly listMemos = { sandboxes: newListMemo(), containers: newListMemo() };

  constructor(opts: LeanCriListerOptions) {
    this.#timeoutMs = opts.timeoutMs;
    this.#runtimeName = opts.runtimeName ?? 'containerd';
    this.#client = new grpc.Client(criEndpointToTarget(opts.runtimeEndpoint), grpc.credentials.createInsecure(), leanChannelOptions(opts));
    const transport = opts.statusTransport ?? 'h2c';
    if (transport !== 'grpc-js') {
      const unaryOpts = {
        runtimeEndpoint: opts.runtimeEndpoint,
        maxMessageBytes: opts.maxMessageBytes ?? 256 * 1024 * 1024,
        flowControlWindow: opts.flowControlWindow ?? LEAN_FLOW_CONTROL_WINDOW,
      };
      if (transport === 'h2c') this.#unary = this.#h2c = new H2cUnary(unaryOpts);
      else this.#unary = new Http2Unary(unaryOpts);
    }
  }

  close(): void {
    this.#client.close();
    this.#unary?.close();
  }

  #call(path: string, method: string, decode: (buf: Buffer) => void, scratch: ResponseScratch): Promise<void> {
    const h2c = this.#h2c;
    if (h2c) {
      return h2c.callDecoded(path, EMPTY, this.#timeoutMs, decode, scratch).then(
        () => undefined,
        (err: { code: number; details: string }) => {
          throw toCriError(method, err);
        },
      );
    }
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest<Buffer, true>(
        path,
        emptyRequest,
        (buf: Buffer) => {
          decode(buf);
          return true;
        },
        EMPTY,
        new grpc.Metadata(),
        { deadline: Date.now() + this.#timeoutMs },
        (err) => (err ? reject(toCriError(method, err)) : resolve()),
      );
    });
  }

  #status<T>(path: string, method: string, id: string, decode: (buf: Buffer) => T | null): Promise<T | null> {
    const unary = this.#unary;
    if (unary) {
      return unary.call(path, encodeIdRequest(id), this.#timeoutMs).then(
        (buf) => decode(buf) ?? null,
        (err: { code: number }) => {
          if (err.code === grpc.status.NOT_FOUND) return null;
          throw toCriError(method, err);
        },
      );
    }
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest<string, T | null>(
        path,
        encodeIdRequest,
        decode,
        id,
        new grpc.Metadata(),
        { deadline: Date.now() + this.#timeoutMs },
        (err, value) => {
          if (!err) resolve(value ?? null);
          else if (err.code === grpc.status.NOT_FOUND) resolve(null);
          else reject(toCriError(method, err));
        },
      );
    });
  }

  /** One container's status, decoded lean; null when the runtime no longer has it. */
  containerStatus(id: string): Promise<ContainerRuntimeStatus | null> {
    return this.#status(CONTAINER_STATUS, 'ContainerStatus', id, (buf) => decodeContainerStatusResponse(buf, this.#runtimeName));
  }

  sandboxStatus(id: string): Promise<SandboxRuntimeStatus | null> {
    return this.#status(SANDBOX_STATUS, 'PodSandboxStatus', id, decodeSandboxStatusResponse);
  }

  /** PodSandboxStatus read whole: with its containers' statuses when the runtime sends them. */
  async sandboxStatusWithContainers(id: string): Promise<{ sandbox: SandboxRuntimeStatus; containers?: ContainerRuntimeStatus[] } | null> {
    const got = await this.#status(SANDBOX_STATUS, 'PodSandboxStatus', id, (buf) => decodeSandboxStatusWithContainers(buf, this.#runtimeName));
    if (!got?.sandbox) return null;
    return got.containers ? { sandbox: got.sandbox, containers: got.containers } : { sandbox: got.sandbox };
  }

  async list(store: RecordStore, gen: number): Promise<ListDecodeStats> {
    const stats = emptyListStats();
    await Promise.all([
      this.#call(LIST_SANDBOXES, 'ListPodSandbox', (buf) => decodeSandboxList(buf, store, gen, stats, this.listMemos.sandboxes), this.#scratch.sandboxes),
      this.#call(LIST_CONTAINERS, 'ListContainers', (buf) => decodeContainerList(buf, store, gen, stats, this.listMemos.containers), this.#scratch.containers),
    ]);
    return stats;
  }

  openContainerEvents(h: ContainerEventHandlers): { cancel(): void } {
    let cancelled = false;
    let ended = false;
    const call = this.#client.makeServerStreamRequest<Buffer, ContainerEvent>(
      GET_EVENTS,
      emptyRequest,
      (buf: Buffer) => decodeContainerEvent(buf, this.#runtimeName),
      EMPTY,
      new grpc.Metadata(),
      {},
    );
    const end = (err?: Error): void => {
      if (ended) return;
      ended = true;
      h.onEnd(cancelled ? undefined : err);
    };
    call.on('metadata', () => h.onReady());
    call.on('data', (e: ContainerEvent) => h.onEvent(e));
    call.on('error', (err) => end(toCriError('GetContainerEvents', err)));
    call.on('status', (s: grpc.StatusObject) => {
      if (s.code === grpc.status.OK) end(toCriError('GetContainerEvents', { code: grpc.status.UNAVAILABLE, details: 'event stream ended by the runtime' }));
    });
    return {
      cancel(): void {
        if (cancelled) return;
        cancelled = true;
        call.cancel();
        end();
      },
    };
  }
}

/** Adapts a getPods() snapshot (RuntimeManager's, or a test double) to a RelistSource. */
export class RuntimePodsLister implements RelistSource {
  constructor(private readonly getPods: () => Promise<Map<string, RuntimePod>>) {}

  async list(store: RecordStore, gen: number): Promise<ListDecodeStats> {
    const pods = await this.getPods();
    const stats = emptyListStats();
    const t1 = performance.now();
    const mark = (id: string, sandbox: boolean, p: RuntimePod, name: string, state: RecordState, createdAt: number): void => {
      stats.items++;
      let rec = store.get(id);
      if (!rec) {
        const bad = labeledPodIdentityError(p.uid, p.name, p.namespace, sandbox ? undefined : name);
        if (bad !== undefined) {
          stats.foreign++;
          stats.invalid.push(`${sandbox ? 'sandbox' : 'container'} ${id}: ${bad}`);
          return;
        }
        rec = store.create(id, sandbox, p.uid, p.name, p.namespace, name, createdAt, 0);
        stats.created++;
      }
      rec.listGen = gen;
      rec.listState = state;
    };
    for (const p of pods.values()) {
      for (const s of p.sandboxes) mark(s.id, true, p, '', s.state, s.createdAt);
      for (const c of p.containers) mark(c.id, false, p, c.name, c.state, c.createdAt);
    }
    // getPods() decodes inside its call; what is timed here is the marking
    stats.decodeMs = performance.now() - t1;
    return stats;
  }

  close(): void {}
}

