// The CRI gRPC client (upstream: pkg/kubelet/cri/remote): one method per runtime.v1 RPC, with
// upstream's deadlines, message size limit and response checks. The .proto is loaded once per
// process, lazily and asynchronously, from the package's src/runtime/proto/api.proto.
import { access } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { decodeStatusExtras } from './runtime-handlers.js';
import { decodeRuntimeConfigResponse, RUNTIME_CONFIG_PATH, type RuntimeConfigResponse } from './runtime-config.js';
import { criEndpointToTarget } from './endpoint.js';
import { CriEndpointError } from './errors.js';
import { H2cUnary, LEAN_FLOW_CONTROL_WINDOW } from './h2c.js';
import {
  CRI_INVALID_RESPONSE,
  CRI_PROTO_LOAD,
  CriError,
  NO_GRPC_CODE,
  toCriError,
} from './cri-errors.js';
import type {
  AuthConfig,
  Container,
  ContainerConfig,
  ContainerEventResponse,
  ContainerFilter,
  ContainerStats,
  ContainerStatsFilter,
  ContainerStatus,
  ContainerStatusResponse,
  CreateContainerResponse,
  ExecSyncResponse,
  ExecRequest,
  AttachRequest,
  PortForwardRequest,
  Image,
  ImageFilter,
  ImageFsInfoResponse,
  ImageSpecInput,
  ImageStatusResponse,
  LinuxContainerResourcesInput,
  PodSandbox,
  PodSandboxConfig,
  PodSandboxFilter,
  PodSandboxStats,
  PodSandboxStatsFilter,
  PodSandboxStatus,
  PodSandboxStatusResponse,
  PullImageResponse,
  RunPodSandboxResponse,
  RuntimeConfig,
  StatusResponse,
  StringMap,
  VersionResponse,
} from './cri-types.js';

export { criEndpointToTarget };
export {
  CriError,
  isUnavailable,
  isNotFound,
  isDeadlineExceeded,
  CRI_INVALID_RESPONSE,
  CRI_PROTO_LOAD,
} from './cri-errors.js';

/** Upstream's --runtime-request-timeout default (2m). */
export const DEFAULT_RUNTIME_REQUEST_TIMEOUT_MS = 120_000;
/** Upstream's CRI client message size limit (16 MiB), both directions. */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/** The API version the kubelet sends in VersionRequest (upstream kubeRuntimeAPIVersion). */
export const KUBE_RUNTIME_API_VERSION = '0.1.0';

/** Loader options the types in cri-types.ts describe. */
export const CRI_PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

export interface CriClientOptions {
  /** `unix:///path/to/sock` (upstream form) or a bare absolute socket path. */
  runtimeEndpoint: string;
  /** Defaults to runtimeEndpoint, as upstream. */
  imageEndpoint?: string;
  /** Deadline of each unary call (upstream runtimeRequestTimeout). */
  timeoutMs: number;
  /** Max message size in both directions; default 16 MiB. */
  maxMessageBytes?: number;
}

export interface PullImageCallOptions {
  /** PullImage has no deadline (as upstream): abort it through this. */
  signal?: AbortSignal;
}

/** GetContainerEvents as an async iterable; cancel() ends it (iteration then just stops). */
export interface ContainerEventStream extends AsyncIterable<ContainerEventResponse> {
  cancel(): void;
  readonly cancelled: boolean;
}

// ---------------------------------------------------------------------------------------------
// proto loading

type MethodDefs = Record<string, protoLoader.MethodDefinition<object, object>>;
interface CriDefinitions {
  runtime: MethodDefs;
  image: MethodDefs;
}

const PROTO_RELATIVE_TO_ROOT = join('src', 'runtime', 'proto', 'api.proto');
let definitions: Promise<CriDefinitions> | undefined;

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** Candidate package roots: each dir holding package.json on the way up from `start`. */
async function packageRootsAbove(start: string): Promise<string[]> {
  const roots: string[] = [];
  for (let dir = resolve(start); ; dir = dirname(dir)) {
    if (await exists(join(dir, 'package.json'))) roots.push(dir);
    if (dirname(dir) === dir) return roots;
  }
}

/**
 * Where api.proto is: beside this module when run from source, else under the package root
 * found above this module (dist/src/runtime/ -> root), else under one above the working dir
 * (a build emitted outside the package).
 */
export async function resolveCriProtoPath(): Promise<string> {
  const moduleDir = dirname(fileURLToPath(import.meta.url));
  const tried: string[] = [join(moduleDir, 'proto', 'api.proto')];
  for (const root of await packageRootsAbove(moduleDir)) tried.push(join(root, PROTO_RELATIVE_TO_ROOT));
  for (const root of await packageRootsAbove(process.cwd())) tried.push(join(root, PROTO_RELATIVE_TO_ROOT));
  for (const p of tried) if (await exists(p)) return p;
  throw new CriError('LoadProto', NO_GRPC_CODE, `api.proto not found; looked at ${tried.join(', ')}`, CRI_PROTO_LOAD);
}

async function loadDefinitions(): Promise<CriDefinitions> {
  const path = await resolveCriProtoPath();
  let pkg: protoLoader.PackageDefinition;
  try {
    pkg = await protoLoader.load(path, CRI_PROTO_LOADER_OPTIONS);
  } catch (err) {
    throw new CriError('LoadProto', NO_GRPC_CODE, `cannot load ${path}: ${String(err)}`, CRI_PROTO_LOAD, {
      cause: err,
    });
  }
  return {
    runtime: pkg['runtime.v1.RuntimeService'] as unknown as MethodDefs,
    image: pkg['runtime.v1.ImageService'] as unknown as MethodDefs,
  };
}

/** The loaded service definitions; loaded on first use, shared by every client. */
export function criDefinitions(): Promise<CriDefinitions> {
  if (!definitions) {
    definitions = loadDefinitions();
    // a failed load is retried on the next call rather than cached forever
    definitions.catch(() => {
      definitions = undefined;
    });
  }
  return definitions;
}

// ---------------------------------------------------------------------------------------------
// endpoints

// ---------------------------------------------------------------------------------------------
// client

type Deadline = number | null; // ms from now, or null for none

function imageSpec(image: ImageSpecInput | string): ImageSpecInput {
  return typeof image === 'string' ? { image } : image;
}

function invalid(method: string, details: string): CriError {
  return new CriError(method, NO_GRPC_CODE, details, CRI_INVALID_RESPONSE);
}

export class CriClient {
  readonly runtimeEndpoint: string;
  readonly imageEndpoint: string;
  readonly timeoutMs: number;
  readonly maxMessageBytes: number;
  readonly #runtime: grpc.Client;
  readonly #image: grpc.Client;
  /**
   * Unary calls with a deadline and no abort signal (all but PullImage and probes' ExecSync) go
   * over our own h2c connections (h2c.ts), one per endpoint, made on first use. grpc-js spent
   * about 1 ms of CPU and 40 KB of garbage per call, which on a 2-core node slowed the
   * runtime's own work when 100 pods started or stopped at once. PullImage, probes' ExecSync
   * and the event stream stay on grpc-js.
   */
  #h2cRuntime: H2cUnary | undefined;
  #h2cImage: H2cUnary | undefined;
  /** Both services on one endpoint (the usual case): one connection. */
  readonly #oneEndpoint: boolean;
  /** Calls in flight: close() cancels them, so a shutdown never waits out a deadline. */
  readonly #inflight = new Set<grpc.ClientUnaryCall>();
  #closed = false;
  /** Told of every unary call (method, seconds, error): the kubelet's runtime operation metrics. */
  onCall: ((method: string, seconds: number, err?: unknown) => void) | undefined;

  constructor(opts: CriClientOptions) {
    if (!(opts.timeoutMs > 0)) throw new CriEndpointError(`CRI client timeoutMs must be > 0, got ${opts.timeoutMs}`);
    this.runtimeEndpoint = opts.runtimeEndpoint;
    this.imageEndpoint = opts.imageEndpoint || opts.runtimeEndpoint;
    this.timeoutMs = opts.timeoutMs;
    this.maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const channelOptions: grpc.ChannelOptions = {
      'grpc.max_receive_message_length': this.maxMessageBytes,
      'grpc.max_send_message_length': this.maxMessageBytes,
      // upstream dials with a 100ms..3s reconnect backoff so a restarted runtime is found quickly
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 3000,
    };
    const runtimeTarget = criEndpointToTarget(this.runtimeEndpoint);
    const imageTarget = criEndpointToTarget(this.imageEndpoint);
    this.#runtime = new grpc.Client(runtimeTarget, grpc.credentials.createInsecure(), channelOptions);
    this.#oneEndpoint = imageTarget === runtimeTarget;
    this.#image =
      imageTarget === runtimeTarget
        ? new grpc.Client(imageTarget, grpc.credentials.createInsecure(), {
            ...channelOptions,
            channelOverride: this.#runtime.getChannel(),
          })
        : new grpc.Client(imageTarget, grpc.credentials.createInsecure(), channelOptions);
  }

  /** Closes both channels and cancels the calls in flight (they fail CANCELLED); calls after this fail. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const call of this.#inflight) call.cancel();
    this.#inflight.clear();
    this.#h2cRuntime?.close();
    this.#h2cImage?.close();
    this.#h2cRuntime = this.#h2cImage = undefined;
    this.#image.close();
    this.#runtime.close();
  }

  async #unary<Res>(
    service: 'runtime' | 'image',
    method: string,
    request: object,
    deadlineMs: Deadline,
    signal?: AbortSignal,
    withRaw?: (raw: Buffer, decoded: object) => object,
  ): Promise<Res> {
    const observe = this.onCall;
    if (!observe) return this.#unaryCall<Res>(service, method, request, deadlineMs, signal, withRaw);
    const start = performance.now();
    try {
      const res = await this.#unaryCall<Res>(service, method, request, deadlineMs, signal, withRaw);
      observe(method, (performance.now() - start) / 1000);
      return res;
    } catch (err) {
      observe(method, (performance.now() - start) / 1000, err);
      throw err;
    }
  }

  async #unaryCall<Res>(
    service: 'runtime' | 'image',
    method: string,
    request: object,
    deadlineMs: Deadline,
    signal?: AbortSignal,
    withRaw?: (raw: Buffer, decoded: object) => object,
  ): Promise<Res> {
    const defs = await criDefinitions();
    const found = defs[service][method];
    if (!found) throw new CriError(method, NO_GRPC_CODE, `method not in api.proto`, CRI_PROTO_LOAD);
    // a caller that reads fields api.proto cannot declare decodes them from the raw answer too
    const def = withRaw ? { ...found, responseDeserialize: (raw: Buffer) => withRaw(raw, found.responseDeserialize(raw) as object) } : found;
    if (signal?.aborted) throw new CriError(method, grpc.status.CANCELLED, 'aborted before the call');
    if (this.#closed) throw new CriError(method, grpc.status.CANCELLED, 'the CRI client is closed');
    if (deadlineMs !== null && !signal) return this.#h2cCall<Res>(service, method, def, request, deadlineMs);
    const client = service === 'runtime' ? this.#runtime : this.#image;
    const callOptions: grpc.CallOptions = deadlineMs === null ? {} : { deadline: Date.now() + deadlineMs };
    const inflight = this.#inflight;
    return new Promise<Res>((resolvePromise, reject) => {
      const call = client.makeUnaryRequest<object, object>(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        request,
        new grpc.Metadata(),
        callOptions,
        (err, value) => {
          inflight.delete(call);
          signal?.removeEventListener('abort', onAbort);
          if (err) reject(toCriError(method, err));
          else resolvePromise(value as Res);
        },
      );
      inflight.add(call);
      function onAbort(): void {
        call.cancel();
      }
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** One unary call over the h2c connection, with grpc-js's checks: message sizes both ways, the deadline, and CANCELLED once closed. */
  async #h2cCall<Res>(service: 'runtime' | 'image', method: string, def: protoLoader.MethodDefinition<object, object>, request: object, deadlineMs: number): Promise<Res> {
    const body = def.requestSerialize(request);
    if (body.length > this.maxMessageBytes) {
      throw new CriError(method, grpc.status.RESOURCE_EXHAUSTED, `Sent message larger than max (${body.length} vs. ${this.maxMessageBytes})`);
    }
    const h2c = this.#h2cFor(service);
    try {
      return (await h2c.callDecoded(def.path, body, deadlineMs, def.responseDeserialize)) as Res;
    } catch (err) {
      if (this.#closed) throw new CriError(method, grpc.status.CANCELLED, 'the CRI client is closed', undefined, { cause: err });
      throw toCriError(method, err);
    }
  }

  /** The connection of a service's endpoint; one shared when both services are on one endpoint. */
  #h2cFor(service: 'runtime' | 'image'): H2cUnary {
    const make = (endpoint: string): H2cUnary => new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: this.maxMessageBytes, flowControlWindow: LEAN_FLOW_CONTROL_WINDOW });
    if (service === 'runtime' || this.#oneEndpoint) return (this.#h2cRuntime ??= make(this.runtimeEndpoint));
    return (this.#h2cImage ??= make(this.imageEndpoint));
  }

  #runtimeCall<Res>(method: string, request: object, deadlineMs: Deadline = this.timeoutMs): Promise<Res> {
    return this.#unary<Res>('runtime', method, request, deadlineMs);
  }

  #imageCall<Res>(method: string, request: object, deadlineMs: Deadline = this.timeoutMs): Promise<Res> {
    return this.#unary<Res>('image', method, request, deadlineMs);
  }

  // ---- runtime service ----

  /** Fails unless every field is set (as upstream). */
  async version(apiVersion: string = KUBE_RUNTIME_API_VERSION): Promise<VersionResponse> {
    const res = await this.#runtimeCall<VersionResponse>('Version', { version: apiVersion });
    if (!res.version || !res.runtime_name || !res.runtime_version || !res.runtime_api_version) {
      throw invalid('Version', `not all fields are set in VersionResponse ${JSON.stringify(res)}`);
    }
    return res;
  }

  /** Creates and starts a sandbox; `pod_sandbox_id` is never empty. */
  async runPodSandbox(config: PodSandboxConfig, runtimeHandler = ''): Promise<RunPodSandboxResponse> {
    // upstream gives sandbox creation twice the request timeout (network setup is slow)
    const res = await this.#runtimeCall<RunPodSandboxResponse>(
      'RunPodSandbox',
      { config, runtime_handler: runtimeHandler },
      this.timeoutMs * 2,
    );
    if (!res.pod_sandbox_id) {
      throw invalid('RunPodSandbox', `PodSandboxId is not set for sandbox ${JSON.stringify(config.metadata)}`);
    }
    return res;
  }

  async stopPodSandbox(podSandboxId: string): Promise<void> {
    await this.#runtimeCall('StopPodSandbox', { pod_sandbox_id: podSandboxId });
  }

  async removePodSandbox(podSandboxId: string): Promise<void> {
    await this.#runtimeCall('RemovePodSandbox', { pod_sandbox_id: podSandboxId });
  }

  async podSandboxStatus(podSandboxId: string, verbose = false): Promise<PodSandboxStatusResponse> {
    const res = await this.#runtimeCall<PodSandboxStatusResponse>('PodSandboxStatus', {
      pod_sandbox_id: podSandboxId,
      verbose,
    });
    if (res.status) verifySandboxStatus(res.status);
    return res;
  }

  async listPodSandbox(filter?: PodSandboxFilter | null): Promise<PodSandbox[]> {
    const res = await this.#runtimeCall<{ items: PodSandbox[] }>('ListPodSandbox', { filter: filter ?? null });
    return res.items;
  }

  /** `container_id` of the response is never empty. */
  async createContainer(
    podSandboxId: string,
    config: ContainerConfig,
    sandboxConfig: PodSandboxConfig,
  ): Promise<CreateContainerResponse> {
    const res = await this.#runtimeCall<CreateContainerResponse>('CreateContainer', {
      pod_sandbox_id: podSandboxId,
      config,
      sandbox_config: sandboxConfig,
    });
    if (!res.container_id) {
      throw invalid('CreateContainer', `ContainerId is not set for container ${JSON.stringify(config.metadata)}`);
    }
    return res;
  }

  async startContainer(containerId: string): Promise<void> {
    await this.#runtimeCall('StartContainer', { container_id: containerId });
  }

  /** Gives the runtime timeoutSeconds of grace, plus the request timeout for the kill and the trip. */
  async stopContainer(containerId: string, timeoutSeconds: number): Promise<void> {
    await this.#runtimeCall(
      'StopContainer',
      { container_id: containerId, timeout: timeoutSeconds },
      this.timeoutMs + Math.max(0, timeoutSeconds) * 1000,
    );
  }

  async removeContainer(containerId: string): Promise<void> {
    await this.#runtimeCall('RemoveContainer', { container_id: containerId });
  }

  async listContainers(filter?: ContainerFilter | null): Promise<Container[]> {
    const res = await this.#runtimeCall<{ containers: Container[] }>('ListContainers', { filter: filter ?? null });
    return res.containers;
  }

  async containerStatus(containerId: string, verbose = false): Promise<ContainerStatusResponse> {
    const res = await this.#runtimeCall<ContainerStatusResponse>('ContainerStatus', {
      container_id: containerId,
      verbose,
    });
    if (res.status) verifyContainerStatus(res.status);
    return res;
  }

  async updateContainerResources(
    containerId: string,
    linux: LinuxContainerResourcesInput | null,
    annotations?: StringMap,
  ): Promise<void> {
    await this.#runtimeCall('UpdateContainerResources', {
      container_id: containerId,
      linux,
      annotations: annotations ?? {},
    });
  }

  async reopenContainerLog(containerId: string): Promise<void> {
    await this.#runtimeCall('ReopenContainerLog', { container_id: containerId });
  }

  /**
   * Runs cmd in the container and returns its output and exit code (a non-zero exit is not an
   * error here). timeoutSeconds 0 means no deadline, as upstream; else it is added to the request timeout.
   */
  execSync(containerId: string, cmd: string[], timeoutSeconds: number, signal?: AbortSignal): Promise<ExecSyncResponse> {
    const deadline = timeoutSeconds > 0 ? this.timeoutMs + timeoutSeconds * 1000 : null;
    return this.#unary<ExecSyncResponse>(
      'runtime',
      'ExecSync',
      { container_id: containerId, cmd, timeout: Math.max(0, timeoutSeconds) },
      deadline,
      signal,
    );
  }

  /** A streaming exec session: the runtime's streaming server URL the client's connection goes to. */
  async exec(req: ExecRequest): Promise<string> {
    return this.#streamingUrl('Exec', req);
  }

  /** A streaming attach session to the container's main process. */
  async attach(req: AttachRequest): Promise<string> {
    return this.#streamingUrl('Attach', req);
  }

  /** A port-forward session into the sandbox's network namespace (ports may be empty: SPDY names them per stream). */
  async portForward(req: PortForwardRequest): Promise<string> {
    return this.#streamingUrl('PortForward', req);
  }

  async #streamingUrl(method: string, req: object): Promise<string> {
    const res = await this.#runtimeCall<{ url: string }>(method, req);
    // upstream refuses a response without a URL
    if (!res.url) throw invalid(method, 'URL is not set');
    return res.url;
  }

  /** The runtime's conditions; fails unless RuntimeReady and NetworkReady are both reported (as upstream). */
  async status(verbose = false): Promise<StatusResponse> {
    const res = await this.#unary<StatusResponse>('runtime', 'Status', { verbose }, this.timeoutMs, undefined, (raw, decoded) => ({ ...decoded, ...decodeStatusExtras(raw) }));
    if (!res.status || res.status.conditions.length < 2) {
      throw invalid('Status', 'RuntimeReady or NetworkReady condition are not set');
    }
    return res;
  }

  /** The runtime's own configuration (its cgroup driver); runtimes before CRI 1.28 answer UNIMPLEMENTED. */
  async runtimeConfig(): Promise<RuntimeConfigResponse> {
    if (this.#closed) throw new CriError('RuntimeConfig', grpc.status.CANCELLED, 'the CRI client is closed');
    const def = {
      path: RUNTIME_CONFIG_PATH,
      requestSerialize: () => Buffer.alloc(0),
      responseDeserialize: (raw: Buffer) => decodeRuntimeConfigResponse(raw),
    } as unknown as protoLoader.MethodDefinition<object, object>;
    return this.#h2cCall<RuntimeConfigResponse>('runtime', 'RuntimeConfig', def, {}, this.timeoutMs);
  }

  async updateRuntimeConfig(runtimeConfig: RuntimeConfig): Promise<void> {
    await this.#runtimeCall('UpdateRuntimeConfig', { runtime_config: runtimeConfig });
  }

  async containerStats(containerId: string): Promise<ContainerStats | null> {
    const res = await this.#runtimeCall<{ stats: ContainerStats | null }>('ContainerStats', {
      container_id: containerId,
    });
    return res.stats;
  }

  async listContainerStats(filter?: ContainerStatsFilter | null): Promise<ContainerStats[]> {
    const res = await this.#runtimeCall<{ stats: ContainerStats[] }>('ListContainerStats', { filter: filter ?? null });
    return res.stats;
  }

  async podSandboxStats(podSandboxId: string): Promise<PodSandboxStats | null> {
    const res = await this.#runtimeCall<{ stats: PodSandboxStats | null }>('PodSandboxStats', {
      pod_sandbox_id: podSandboxId,
    });
    return res.stats;
  }

  async listPodSandboxStats(filter?: PodSandboxStatsFilter | null): Promise<PodSandboxStats[]> {
    const res = await this.#runtimeCall<{ stats: PodSandboxStats[] }>('ListPodSandboxStats', {
      filter: filter ?? null,
    });
    return res.stats;
  }

  /**
   * The runtime's container event stream (no deadline). Iterate it with for-await; errors
   * arrive as CriError (UNAVAILABLE when the runtime is down or goes away).
   */
  getContainerEvents(): ContainerEventStream {
    let stream: grpc.ClientReadableStream<ContainerEventResponse> | undefined;
    let cancelled = false;
    const client = this.#runtime;
    const method = 'GetContainerEvents';
    async function* iterate(): AsyncGenerator<ContainerEventResponse> {
      const defs = await criDefinitions();
      if (cancelled) return;
      const def = defs.runtime[method]!;
      stream = client.makeServerStreamRequest<object, ContainerEventResponse>(
        def.path,
        def.requestSerialize,
        def.responseDeserialize as (b: Buffer) => ContainerEventResponse,
        {},
        new grpc.Metadata(),
        {},
      );
      try {
        for await (const event of stream) yield event as ContainerEventResponse;
      } catch (err) {
        if (cancelled) return;
        throw toCriError(method, err);
      } finally {
        // leaving the loop early (break/return) must end the call too
        if (!cancelled) {
          cancelled = true;
          stream.cancel();
        }
      }
    }
    const generator = iterate();
    return {
      [Symbol.asyncIterator]: () => generator,
      cancel(): void {
        if (cancelled) return;
        cancelled = true;
        stream?.cancel();
      },
      get cancelled(): boolean {
        return cancelled;
      },
    };
  }

  // ---- image service ----

  async listImages(filter?: ImageFilter | null): Promise<Image[]> {
    const res = await this.#imageCall<{ images: Image[] }>('ListImages', { filter: filter ?? null });
    return res.images;
  }

  /** `image` is null in the response when the runtime does not have it (not an error). */
  async imageStatus(image: ImageSpecInput | string, verbose = false): Promise<ImageStatusResponse> {
    const spec = imageSpec(image);
    const res = await this.#imageCall<ImageStatusResponse>('ImageStatus', { image: spec, verbose });
    if (res.image && (!res.image.id || res.image.size === '0')) {
      throw invalid('ImageStatus', `Id or size of image ${JSON.stringify(spec.image)} is not set`);
    }
    return res;
  }

  /** `image_ref` (never empty) is the pulled image's reference. No deadline, as upstream; abort via opts.signal. */
  async pullImage(
    image: ImageSpecInput | string,
    auth?: AuthConfig | null,
    sandboxConfig?: PodSandboxConfig | null,
    opts: PullImageCallOptions = {},
  ): Promise<PullImageResponse> {
    const spec = imageSpec(image);
    const res = await this.#unary<PullImageResponse>(
      'image',
      'PullImage',
      { image: spec, auth: auth ?? null, sandbox_config: sandboxConfig ?? null },
      null,
      opts.signal,
    );
    if (!res.image_ref) throw invalid('PullImage', `imageRef of image ${JSON.stringify(spec.image)} is not set`);
    return res;
  }

  async removeImage(image: ImageSpecInput | string): Promise<void> {
    await this.#imageCall('RemoveImage', { image: imageSpec(image) });
  }

  imageFsInfo(): Promise<ImageFsInfoResponse> {
    return this.#imageCall<ImageFsInfoResponse>('ImageFsInfo', {});
  }
}

// ---------------------------------------------------------------------------------------------
// response checks (the fields upstream refuses to do without)

function verifySandboxStatus(s: PodSandboxStatus): void {
  const m = 'PodSandboxStatus';
  if (!s.id) throw invalid(m, 'status.Id is not set');
  if (!s.metadata) throw invalid(m, 'status.Metadata is not set');
  if (!s.metadata.name || !s.metadata.namespace || !s.metadata.uid) {
    throw invalid(m, `metadata.Name, metadata.Namespace or metadata.Uid is not in metadata ${JSON.stringify(s.metadata)}`);
  }
  if (s.created_at === '0') throw invalid(m, 'status.CreatedAt is not set');
}

function verifyContainerStatus(s: ContainerStatus): void {
  const m = 'ContainerStatus';
  if (!s.id) throw invalid(m, 'status.Id is not set');
  if (!s.metadata) throw invalid(m, 'status.Metadata is not set');
  if (!s.metadata.name) throw invalid(m, `metadata.Name is not in metadata ${JSON.stringify(s.metadata)}`);
  if (s.created_at === '0') throw invalid(m, 'status.CreatedAt is not set');
  if (!s.image || !s.image.image) throw invalid(m, 'status.Image is not set');
  if (!s.image_ref) throw invalid(m, 'status.ImageRef is not set');
}
