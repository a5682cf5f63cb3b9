// SIMULATION. The in-memory model behind the simulated CRI runtime (kubelet-ts sim-runtime):
// pod sandboxes and containers with the labels and annotations the kubelet really writes, the
// state machine containerd's CRI plugin follows (created → running → exited → removed), and
// container events as containerd 1.6 emits them (sandbox events carry the sandbox id). It runs
// nothing: it exists for density benchmarks far beyond what a machine can run for real.

import type { Container as ApiContainer, Pod } from '../api/types.js';
import type {
  ContainerConfig,
  ContainerEventType,
  ContainerState,
  Mount,
  PodSandboxConfig,
  PodSandboxMetadata,
  PodSandboxState,
  StringMap,
} from '../runtime/cri-types.js';
import * as labels from '../runtime/labels.js';
import { KubeletError } from '../util/errors.js';

export const SIM_RUNTIME_NAME = 'kubelet-ts-sim';
export const SIM_RUNTIME_VERSION = '0.1.0-simulated';

export type SimRuntimeErrorCode = 'NOT_FOUND' | 'FAILED_PRECONDITION' | 'ALREADY_EXISTS' | 'INVALID_ARGUMENT' | 'UNKNOWN';

/** A CRI-style error of the simulated runtime: `code` is the gRPC status the server answers with. */
export class SimRuntimeError extends KubeletError {
  declare readonly code: SimRuntimeErrorCode;
  constructor(code: SimRuntimeErrorCode, message: string) {
    super(code, message);
  }
}

export interface SimSandbox {
  readonly id: string;
  readonly metadata: PodSandboxMetadata;
  state: PodSandboxState;
  /** Nanoseconds since the epoch. */
  readonly createdAt: bigint;
  readonly labels: StringMap;
  readonly annotations: StringMap;
  readonly runtimeHandler: string;
  readonly ip: string;
  readonly hostNetwork: boolean;
  readonly cgroupParent: string;
  readonly logDirectory: string;
  /** Ids of the containers created in this sandbox and not yet removed. */
  readonly containers: Set<string>;
  /** Wire-encoding caches owned by the server (list item, status response); cleared on every change. */
  encoded?: Buffer;
  statusEncoded?: Buffer;
}

export interface SimContainer {
  readonly id: string;
  readonly sandboxId: string;
  readonly metadata: { name: string; attempt: number };
  readonly image: { image: string; annotations: StringMap };
  readonly imageRef: string;
  state: ContainerState;
  readonly createdAt: bigint;
  startedAt: bigint;
  finishedAt: bigint;
  exitCode: number;
  reason: string;
  message: string;
  readonly labels: StringMap;
  readonly annotations: StringMap;
  readonly logPath: string;
  readonly mounts: Mount[];
  /** The config it was created from (a restart reuses it). */
  readonly config: ContainerConfig;
  /** Wire-encoding caches owned by the server (list item, status response); cleared on every change. */
  encoded?: Buffer;
  statusEncoded?: Buffer;
}

/** One GetContainerEvents message (the proto's shape: sandbox metadata in field 4). */
export interface SimContainerEvent {
  container_id: string;
  container_event_type: ContainerEventType;
  /** Nanoseconds since the epoch, decimal. */
  created_at: string;
  pod_sandbox_metadata: PodSandboxMetadata | null;
  /** The sandbox as it is when the event is made (for the newer shape's statuses; not serialized). */
  sandbox?: SimSandbox;
}

export interface SimContainerFilter {
  id?: string;
  state?: { state: ContainerState } | null;
  pod_sandbox_id?: string;
  label_selector?: StringMap;
}

export interface SimSandboxFilter {
  id?: string;
  state?: { state: PodSandboxState } | null;
  label_selector?: StringMap;
}

export interface SimRuntimeHooks {
  /** A container started: its cgroup appears. */
  onContainerStarted?(c: SimContainer, sandbox: SimSandbox): void;
  /** A container exited or was removed: its cgroup goes away. */
  onContainerGone?(c: SimContainer, sandbox: SimSandbox): void;
}

export interface PopulateOptions {
  containers: number;
  /** Containers per pod (default 3). */
  containersPerPod?: number;
  /** Share of containers that get an exited previous attempt beside them (default 0). */
  exitedShare?: number;
}

// mulberry32: deterministic ids and names for a given seed.
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMESPACES = ['default', 'kube-system', 'payments', 'search-frontend', 'batch-jobs', 'observability', 'checkout-service'];
const APPS = ['api-gateway', 'order-processor', 'inventory-sync', 'recommendation-engine', 'session-cache', 'event-consumer', 'billing-worker'];
const CONTAINER_NAMES = ['app', 'istio-proxy', 'log-shipper', 'metrics-exporter', 'config-reloader', 'cache-warmer'];

/** Wall-clock nanoseconds with microsecond resolution (comparable across processes on a host). */
export function nowNs(): bigint {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n;
}

export class SimRuntime {
  readonly sandboxes = new Map<string, SimSandbox>();
  readonly containers = new Map<string, SimContainer>();
  /** Pod UID → sandbox ids (label selector index). */
  private readonly byPodUid = new Map<string, Set<string>>();
  /** containerd's name reservations: `<name>_<pod>_<ns>_<uid>_<attempt>` → id. */
  private readonly reservedNames = new Map<string, string>();
  private readonly listeners = new Set<(e: SimContainerEvent) => void>();
  private readonly rand: () => number;
  private nextIp = 1;
  readonly images = new Map<string, string>();
  eventsEmitted = 0;

  constructor(
    opts: { seed?: number } = {},
    private readonly hooks: SimRuntimeHooks = {},
  ) {
    this.rand = prng(opts.seed ?? 1);
  }

  // ---- events ----

  subscribe(fn: (e: SimContainerEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  get subscribers(): number {
    return this.listeners.size;
  }

  private emit(id: string, type: ContainerEventType, sandbox: SimSandbox | undefined): void {
    this.eventsEmitted++;
    if (this.listeners.size === 0) return;
    const e: SimContainerEvent = {
      container_id: id,
      container_event_type: type,
      created_at: nowNs().toString(),
      pod_sandbox_metadata: sandbox ? { ...sandbox.metadata } : null,
      sandbox,
    };
    for (const fn of this.listeners) fn(e);
  }

  // ---- ids ----

  newId(): string {
    let s = '';
    for (let i = 0; i < 8; i++) s += Math.floor(this.rand() * 0x100000000).toString(16).padStart(8, '0');
    return s;
  }

  newUid(): string {
    const h = this.newId();
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
  }

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rand() * xs.length)]!;
  }

  random(): number {
    return this.rand();
  }

  // ---- sandboxes ----

  runPodSandbox(config: PodSandboxConfig, runtimeHandler = ''): string {
    const md = config.metadata;
    if (!md?.name || !md.uid || !md.namespace) throw new SimRuntimeError('INVALID_ARGUMENT', 'sandbox config must include metadata name, uid and namespace');
    const hostNetwork = config.linux?.security_context?.namespace_options?.network === 'NODE';
    const id = this.newId();
    const n = this.nextIp++;
    const sb: SimSandbox = {
      id,
      metadata: { name: md.name, uid: md.uid, namespace: md.namespace, attempt: md.attempt ?? 0 },
      state: 'SANDBOX_READY',
      createdAt: nowNs(),
      labels: { ...(config.labels ?? {}) },
      annotations: { ...(config.annotations ?? {}) },
      runtimeHandler,
      ip: hostNetwork ? '' : `10.${88 + ((n >> 16) & 0x7f)}.${(n >> 8) & 0xff}.${n & 0xff}`,
      hostNetwork,
      cgroupParent: config.linux?.cgroup_parent ?? '',
      logDirectory: config.log_directory ?? '',
      containers: new Set(),
    };
    this.sandboxes.set(id, sb);
    let set = this.byPodUid.get(md.uid);
    if (!set) this.byPodUid.set(md.uid, (set = new Set()));
    set.add(id);
    this.emit(id, 'CONTAINER_CREATED_EVENT', sb);
    this.emit(id, 'CONTAINER_STARTED_EVENT', sb);
    return id;
  }

  private sandbox(id: string): SimSandbox {
    const sb = this.sandboxes.get(id);
    if (!sb) throw new SimRuntimeError('NOT_FOUND', `an error occurred when try to find sandbox "${id}": not found`);
    return sb;
  }

  stopPodSandbox(id: string): void {
    const sb = this.sandbox(id);
    for (const cid of sb.containers) {
      const c = this.containers.get(cid)!;
      if (c.state === 'CONTAINER_RUNNING') this.finish(c, 137, 'Error', '');
    }
    if (sb.state === 'SANDBOX_READY') {
      sb.state = 'SANDBOX_NOTREADY';
      touch(sb);
      this.emit(id, 'CONTAINER_STOPPED_EVENT', sb);
    }
  }

  /** Idempotent, as containerd: a sandbox that is gone is not an error. */
  removePodSandbox(id: string): void {
    const sb = this.sandboxes.get(id);
    if (!sb) return;
    this.stopPodSandbox(id);
    for (const cid of [...sb.containers]) this.removeContainer(cid);
    this.sandboxes.delete(id);
    const set = this.byPodUid.get(sb.metadata.uid);
    set?.delete(id);
    if (set && set.size === 0) this.byPodUid.delete(sb.metadata.uid);
    this.emit(id, 'CONTAINER_DELETED_EVENT', sb);
  }

  podSandboxStatus(id: string): SimSandbox {
    return this.sandbox(id);
  }

  listPodSandbox(filter?: SimSandboxFilter | null): SimSandbox[] {
    let candidates: Iterable<SimSandbox> = this.sandboxes.values();
    const uid = filter?.label_selector?.[labels.KUBERNETES_POD_UID_LABEL];
    if (filter?.id) {
      const sb = this.findById(this.sandboxes, filter.id);
      candidates = sb ? [sb] : [];
    } else if (uid !== undefined) {
      candidates = [...(this.byPodUid.get(uid) ?? [])].map((id) => this.sandboxes.get(id)!);
    }
    const out: SimSandbox[] = [];
    for (const sb of candidates) {
      if (filter?.state && sb.state !== filter.state.state) continue;
      if (!matches(sb.labels, filter?.label_selector)) continue;
      out.push(sb);
    }
    return out;
  }

  // ---- containers ----

  createContainer(sandboxId: string, config: ContainerConfig): string {
    const sb = this.sandbox(sandboxId);
    if (sb.state !== 'SANDBOX_READY') throw new SimRuntimeError('FAILED_PRECONDITION', `sandbox ${sandboxId} is not ready`);
    if (!config.metadata?.name) throw new SimRuntimeError('INVALID_ARGUMENT', 'container config must include metadata');
    const attempt = config.metadata.attempt ?? 0;
    const md = sb.metadata;
    const reserved = `${config.metadata.name}_${md.name}_${md.namespace}_${md.uid}_${attempt}`;
    const holder = this.reservedNames.get(reserved);
    if (holder !== undefined) {
      throw new SimRuntimeError('UNKNOWN', `failed to reserve container name "${reserved}": name "${reserved}" is reserved for "${holder}"`);
    }
    const id = this.newId();
    const image = config.image?.image ?? '';
    let imageRef = this.images.get(image);
    if (!imageRef) {
      imageRef = `sha256:${this.newId()}`;
      this.images.set(image, imageRef);
    }
    const c: SimContainer = {
      id,
      sandboxId,
      metadata: { name: config.metadata.name, attempt },
      image: { image, annotations: { ...(config.image?.annotations ?? {}) } },
      imageRef,
      state: 'CONTAINER_CREATED',
      createdAt: nowNs(),
      startedAt: 0n,
      finishedAt: 0n,
      exitCode: 0,
      reason: '',
      message: '',
      labels: { ...(config.labels ?? {}) },
      annotations: { ...(config.annotations ?? {}) },
      logPath: config.log_path ? `${sb.logDirectory}/${config.log_path}` : '',
      mounts: (config.mounts ?? []).map((m) => ({
        container_path: m.container_path,
        host_path: m.host_path,
        readonly: m.readonly ?? false,
        selinux_relabel: m.selinux_relabel ?? false,
        propagation: m.propagation ?? 'PROPAGATION_PRIVATE',
      })),
      config,
    };
    this.containers.set(id, c);
    this.reservedNames.set(reserved, id);
    sb.containers.add(id);
    this.emit(id, 'CONTAINER_CREATED_EVENT', sb);
    return id;
  }

  private container(id: string): SimContainer {
    const c = this.containers.get(id);
    if (!c) throw new SimRuntimeError('NOT_FOUND', `an error occurred when try to find container "${id}": not found`);
    return c;
  }

  startContainer(id: string): void {
    const c = this.container(id);
    if (c.state !== 'CONTAINER_CREATED') {
      throw new SimRuntimeError('UNKNOWN', `container ${id} is in ${c.state} state, not CONTAINER_CREATED`);
    }
    const sb = this.sandboxes.get(c.sandboxId)!;
    c.state = 'CONTAINER_RUNNING';
    c.startedAt = nowNs();
    touch(c);
    this.hooks.onContainerStarted?.(c, sb);
    this.emit(id, 'CONTAINER_STARTED_EVENT', sb);
  }

  /** A graceful stop exits 0 ("Completed"); timeout 0 kills (137). Stopping a non-running container is a no-op. */
  stopContainer(id: string, timeoutSeconds = 0): void {
    const c = this.container(id);
    if (c.state === 'CONTAINER_RUNNING') {
      if (timeoutSeconds > 0) this.finish(c, 0, 'Completed', '');
      else this.finish(c, 137, 'Error', '');
    } else if (c.state === 'CONTAINER_CREATED') {
      // containerd marks a never-started container exited on stop
      this.finish(c, 0, 'Completed', '', false);
    }
  }

  /** The container exits by itself (the churn generator's crash, OOM kill or completion). */
  exitContainer(id: string, exitCode: number, reason: string, message = ''): void {
    const c = this.container(id);
    if (c.state !== 'CONTAINER_RUNNING') throw new SimRuntimeError('FAILED_PRECONDITION', `container ${id} is not running`);
    this.finish(c, exitCode, reason, message);
  }

  private finish(c: SimContainer, exitCode: number, reason: string, message: string, started = true): void {
    const sb = this.sandboxes.get(c.sandboxId)!;
    c.state = 'CONTAINER_EXITED';
    c.finishedAt = nowNs();
    c.exitCode = exitCode;
    c.reason = reason;
    c.message = message;
    touch(c);
    if (started) this.hooks.onContainerGone?.(c, sb);
    this.emit(c.id, 'CONTAINER_STOPPED_EVENT', sb);
  }

  /** Idempotent, as containerd; a running container is stopped first. */
  removeContainer(id: string): void {
    const c = this.containers.get(id);
    if (!c) return;
    if (c.state === 'CONTAINER_RUNNING') this.finish(c, 137, 'Error', '');
    const sb = this.sandboxes.get(c.sandboxId)!;
    this.containers.delete(id);
    sb.containers.delete(id);
    const md = sb.metadata;
    this.reservedNames.delete(`${c.metadata.name}_${md.name}_${md.namespace}_${md.uid}_${c.metadata.attempt}`);
    this.emit(id, 'CONTAINER_DELETED_EVENT', sb);
  }

  containerStatus(id: string): SimContainer {
    return this.container(id);
  }

  listContainers(filter?: SimContainerFilter | null): SimContainer[] {
    let candidates: Iterable<SimContainer> = this.containers.values();
    const uid = filter?.label_selector?.[labels.KUBERNETES_POD_UID_LABEL];
    if (filter?.id) {
      const c = this.findById(this.containers, filter.id);
      candidates = c ? [c] : [];
    } else if (filter?.pod_sandbox_id) {
      const sb = this.sandboxes.get(filter.pod_sandbox_id);
      candidates = sb ? [...sb.containers].map((id) => this.containers.get(id)!) : [];
    } else if (uid !== undefined) {
      const out: SimContainer[] = [];
      for (const sid of this.byPodUid.get(uid) ?? []) for (const id of this.sandboxes.get(sid)!.containers) out.push(this.containers.get(id)!);
      candidates = out;
    }
    const out: SimContainer[] = [];
    for (const c of candidates) {
      if (filter?.pod_sandbox_id && c.sandboxId !== filter.pod_sandbox_id) continue;
      if (filter?.state && c.state !== filter.state.state) continue;
      if (!matches(c.labels, filter?.label_selector)) continue;
      out.push(c);
    }
    return out;
  }

  /** Exact id, else a unique prefix (containerd's truncindex). */
  private findById<T>(m: Map<string, T>, id: string): T | undefined {
    const exact = m.get(id);
    if (exact) return exact;
    let found: T | undefined;
    for (const [k, v] of m) {
      if (!k.startsWith(id)) continue;
      if (found) return undefined;
      found = v;
    }
    return found;
  }

  // ---- what the churn generator and the benchmarks drive ----

  /** Creates the next attempt of an exited container and starts it; removes older exited attempts beyond `keepExited`. */
  restartContainer(id: string, keepExited = 1): string {
    const old = this.container(id);
    if (old.state !== 'CONTAINER_EXITED') throw new SimRuntimeError('FAILED_PRECONDITION', `container ${id} has not exited`);
    const attempt = old.metadata.attempt + 1;
    const config: ContainerConfig = {
      ...old.config,
      metadata: { name: old.metadata.name, attempt },
      annotations: { ...(old.config.annotations ?? {}), [labels.CONTAINER_RESTART_COUNT_LABEL]: String(attempt) },
    };
    const nid = this.createContainer(old.sandboxId, config);
    this.startContainer(nid);
    const sb = this.sandboxes.get(old.sandboxId)!;
    const exited = [...sb.containers]
      .map((cid) => this.containers.get(cid)!)
      .filter((c) => c.metadata.name === old.metadata.name && c.state === 'CONTAINER_EXITED')
      .sort((a, b) => b.metadata.attempt - a.metadata.attempt);
    for (const c of exited.slice(keepExited)) this.removeContainer(c.id);
    return nid;
  }

  /** Adds a pod as the kubelet would create it: sandbox, then each container created and started. */
  addPod(pod: Pod): string {
    const sid = this.runPodSandbox(sandboxConfigFor(pod));
    for (const c of pod.spec.containers) {
      const id = this.createContainer(sid, containerConfigFor(c, pod, 0));
      this.startContainer(id);
    }
    return sid;
  }

  /** Stops and removes every sandbox of a pod UID and their containers. */
  removePod(uid: string): void {
    for (const sid of [...(this.byPodUid.get(uid) ?? [])]) this.removePodSandbox(sid);
  }

  /** A deployment-style pod with `n` containers and upstream-realistic metadata. */
  syntheticPod(n: number): Pod {
    const ns = this.pick(NAMESPACES);
    const app = this.pick(APPS);
    const templateHash = this.newId().slice(0, 10);
    const name = `${app}-${templateHash}-${this.newId().slice(0, 5)}`;
    const uid = this.newUid();
    const containers: ApiContainer[] = [];
    for (let i = 0; i < n; i++) {
      const cname = i < CONTAINER_NAMES.length ? CONTAINER_NAMES[i]! : `worker-${i}`;
      const c: ApiContainer = {
        name: cname,
        image: `ghcr.io/example/${i === 0 ? app : cname}:v1.${Math.floor(this.random() * 40)}.${Math.floor(this.random() * 10)}`,
        terminationMessagePath: '/dev/termination-log',
        terminationMessagePolicy: 'File',
        imagePullPolicy: 'IfNotPresent',
      };
      if (i === 0) c.ports = [{ name: 'http', containerPort: 8080, protocol: 'TCP' }];
      // About one app in four drains on stop (a preStop hook, carried as an annotation).
      if (i === 0 && this.random() < 0.25) c.lifecycle = { preStop: { exec: { command: ['/bin/sh', '-c', 'sleep 5'] } } };
      containers.push(c);
    }
    return {
      metadata: {
        name,
        namespace: ns,
        uid,
        labels: { app, 'pod-template-hash': templateHash, 'app.kubernetes.io/part-of': `${ns}-platform` },
        annotations: {
          'kubernetes.io/config.seen': new Date().toISOString(),
          'kubernetes.io/config.source': 'api',
        },
      },
      spec: { containers, restartPolicy: 'Always', terminationGracePeriodSeconds: 30 },
    };
  }

  /** Fills the runtime with running pods until it holds `containers` containers. */
  populate(opts: PopulateOptions): void {
    const per = Math.max(1, opts.containersPerPod ?? 3);
    const exitedShare = opts.exitedShare ?? 0;
    let made = 0;
    while (made < opts.containers) {
      const n = Math.min(per, opts.containers - made);
      const pod = this.syntheticPod(n);
      const sid = this.addPod(pod);
      made += n;
      if (exitedShare > 0) {
        for (const cid of [...this.sandboxes.get(sid)!.containers]) {
          if (made >= opts.containers || this.random() >= exitedShare) continue;
          // the container crashed once: its exited attempt stays beside the running one
          this.exitContainer(cid, 1, 'Error');
          this.restartContainer(cid);
          made++;
        }
      }
    }
  }

  counts(): { sandboxes: number; containers: number; running: number; exited: number } {
    let running = 0;
    let exited = 0;
    for (const c of this.containers.values()) {
      if (c.state === 'CONTAINER_RUNNING') running++;
      else if (c.state === 'CONTAINER_EXITED') exited++;
    }
    return { sandboxes: this.sandboxes.size, containers: this.containers.size, running, exited };
  }
}

/** Drops the cached wire encodings of a changed object. */
function touch(o: { encoded?: Buffer; statusEncoded?: Buffer }): void {
  o.encoded = undefined;
  o.statusEncoded = undefined;
}

function matches(have: StringMap, want: StringMap | undefined): boolean {
  if (!want) return true;
  for (const k in want) if (have[k] !== want[k]) return false;
  return true;
}

/** The sandbox config the kubelet would send for a pod (labels and annotations as upstream). */
export function sandboxConfigFor(pod: Pod): PodSandboxConfig {
  return {
    metadata: { name: pod.metadata.name!, namespace: pod.metadata.namespace!, uid: pod.metadata.uid!, attempt: 0 },
    hostname: pod.metadata.name,
    log_directory: `/var/log/pods/${pod.metadata.namespace}_${pod.metadata.name}_${pod.metadata.uid}`,
    labels: labels.newPodLabels(pod),
    annotations: labels.newPodAnnotations(pod),
    linux: { cgroup_parent: `/kubepods/burstable/pod${pod.metadata.uid}` },
  };
}

/** The container config the kubelet would send (labels and annotations as upstream). */
export function containerConfigFor(c: ApiContainer, pod: Pod, restartCount: number): ContainerConfig {
  return {
    metadata: { name: c.name, attempt: restartCount },
    image: { image: c.image ?? '' },
    labels: labels.newContainerLabels(c, pod),
    annotations: labels.newContainerAnnotations(c, pod, restartCount),
    log_path: `${c.name}/${restartCount}.log`,
    mounts: [
      { container_path: '/var/run/secrets/kubernetes.io/serviceaccount', host_path: `/var/lib/kubelet/pods/${pod.metadata.uid}/volumes/kubernetes.io~projected/kube-api-access`, readonly: true },
      { container_path: '/dev/termination-log', host_path: `/var/lib/kubelet/pods/${pod.metadata.uid}/containers/${c.name}/${restartCount}` },
    ],
  };
}
