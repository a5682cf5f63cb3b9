// The API pod status from the pod spec and the runtime's view, as upstream's kubelet
// generateAPIPodStatus / convertStatusToAPIStatus / convertToAPIContainerStatuses build it,
// with the prober's ready/started and the status manager's transition times and start time.
import { isIPv4, isIPv6 } from 'node:net';
import { getPodQOS } from '../api/qos.js';
import type {
  Container,
  ContainerState,
  ContainerStatus,
  Pod,
  PodCondition,
  PodIP,
  PodPhase,
  PodStatus,
} from '../api/types.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../runtime/types.js';
import { latestAttempt, shouldContainerBeRestarted } from '../runtime/restart-policy.js';
import { terminationMessageBudget } from '../runtime/termination-message.js';
import { ephemeralContainersOf } from '../runtime/ephemeral.js';
import {
  generateContainersReadyCondition,
  generatePodInitializedCondition,
  generatePodReadyCondition,
  generatePodReadyToStartContainersCondition,
  updateLastTransitionTime,
} from './conditions.js';
import { getPhase, isRestartableInitContainer } from './phase.js';
import {
  Completed,
  ContainerCreating,
  ContainersReady,
  ContainerStatusUnknown,
  ContainerStatusUnknownDeletedMessage,
  ContainerStatusUnknownTerminatedMessage,
  DisruptionTarget,
  ErrorReason,
  PodInitialized,
  PodInitializing,
  PodReady,
  PodReadyToStartContainers,
  PodScheduled,
  podConditionByKubelet,
} from '../api/reasons.js';

export interface StatusInputs {
  pod: Pod;
  /** undefined: nothing created yet. */
  runtime?: RuntimePodStatus;
  /** The last status we reported (carries lastTransitionTime, lastState, startTime, terminal phase). */
  previous?: PodStatus;
  /** Per container name: why its last start attempt failed (upstream's reason cache). */
  startFailures?: Map<string, { reason: string; message: string }>;
  /** Container ID (`containerd://…` or bare) → readiness probe result. */
  readiness?: Map<string, boolean>;
  /** Container ID (`containerd://…` or bare) → startup probe result. */
  startup?: Map<string, boolean>;
  hostIPs: string[];
  /** ms since epoch (injected clock). */
  now: number;
  /** Set when the kubelet terminated the pod (deleted, or all done). */
  podIsTerminal?: boolean;
}

/** RFC3339 with seconds precision, as metav1.Time serializes (`2024-05-01T10:00:00Z`). */
export function toRFC3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const clone = <T>(v: T): T => structuredClone(v);

function newestFirst(containers: readonly ContainerRuntimeStatus[]): ContainerRuntimeStatus[] {
  // stable sort: equal creation times keep the runtime's newest-first order
  return [...containers].sort((a, b) => b.createdAt - a.createdAt);
}

function runtimeContainerToAPI(cs: ContainerRuntimeStatus, spec: Container, old: ContainerStatus | undefined): ContainerStatus {
  const status: ContainerStatus = {
    name: cs.name,
    state: {},
    lastState: {},
    ready: false,
    restartCount: cs.restartCount,
    // The API reports the image as the spec named it; the runtime knows it by id.
    image: spec.image || cs.image || '',
    imageID: cs.imageRef,
  };
  if (cs.containerID) status.containerID = cs.containerID;
  switch (cs.state) {
    case 'running':
      status.state.running = { startedAt: toRFC3339(cs.startedAt) };
      break;
    case 'created':
      // created but not started yet is "waiting to be running"
      status.state.waiting = {};
      break;
    case 'exited': {
      const t: NonNullable<ContainerState['terminated']> = {
        exitCode: cs.exitCode,
        reason: cs.reason || (cs.exitCode === 0 ? Completed : ErrorReason),
        startedAt: toRFC3339(cs.startedAt),
        finishedAt: toRFC3339(cs.finishedAt),
      };
      if (cs.message) t.message = cs.message;
      if (cs.containerID) t.containerID = cs.containerID;
      status.state.terminated = t;
      break;
    }
    default:
      if (old?.state.running) {
        // it ran and the runtime lost it: report a failed run, not "never ran"
        status.state.terminated = {
          exitCode: 137,
          reason: ContainerStatusUnknown,
          message: ContainerStatusUnknownTerminatedMessage,
        };
        status.restartCount = old.restartCount + 1;
      } else {
        status.state.waiting = {};
      }
  }
  return status;
}

function convertContainerStatuses(
  pod: Pod,
  runtime: RuntimePodStatus | undefined,
  previous: readonly ContainerStatus[] | undefined,
  containers: readonly Container[],
  hasInitContainers: boolean,
  isInit: boolean,
  startFailures: Map<string, { reason: string; message: string }> | undefined,
): ContainerStatus[] {
  const oldStatuses = new Map<string, ContainerStatus>();
  for (const s of previous ?? []) oldStatuses.set(s.name, s);
  const specByName = new Map(containers.map((c) => [c.name, c]));
  const defaultReason = hasInitContainers ? PodInitializing : ContainerCreating;

  const statuses = new Map<string, ContainerStatus>();
  for (const c of containers) {
    let status: ContainerStatus = {
      name: c.name,
      state: { waiting: { reason: defaultReason } },
      lastState: {},
      ready: false,
      restartCount: 0,
      image: c.image ?? '',
      imageID: '',
    };
    const old = oldStatuses.get(c.name);
    if (old) {
      if (old.state.terminated) {
        status = clone(old);
      } else {
        status.restartCount = old.restartCount;
        status.lastState = clone(old.lastState ?? {});
      }
    }
    statuses.set(c.name, status);
  }

  const runtimeNames = new Set((runtime?.containerStatuses ?? []).map((c) => c.name));
  for (const c of containers) {
    if (runtimeNames.has(c.name)) continue;
    // The container was running and is gone from the runtime: show it stopped, not waiting,
    // so the pod does not fall back to Pending.
    const old = oldStatuses.get(c.name);
    if (!old || old.state.terminated || !old.state.running) continue;
    const status = statuses.get(c.name)!;
    if (status.state.waiting?.reason !== defaultReason) continue;
    if (status.lastState.terminated) continue;
    status.lastState = {
      terminated: { exitCode: 137, reason: ContainerStatusUnknown, message: ContainerStatusUnknownDeletedMessage },
    };
    if (!pod.metadata.deletionTimestamp) status.restartCount += 1;
  }

  // Newest attempt gives the state; the one before it gives lastState.
  const seen = new Map<string, number>();
  for (const cs of newestFirst(runtime?.containerStatuses ?? [])) {
    const spec = specByName.get(cs.name);
    if (!spec) continue;
    const n = seen.get(cs.name) ?? 0;
    if (n >= 2) continue;
    const status = runtimeContainerToAPI(cs, spec, oldStatuses.get(cs.name));
    if (n === 0) statuses.set(cs.name, status);
    else statuses.get(cs.name)!.lastState = status.state;
    seen.set(cs.name, n + 1);
  }

  // Containers the next sync will (re)start show why the last start failed.
  for (const c of containers) {
    if (isInit) {
      const s = latestAttempt(runtime, c.name);
      // a succeeded init container is never started again
      if (s && s.state === 'exited' && s.exitCode === 0) continue;
    }
    if (!shouldContainerBeRestarted(c, pod, runtime)) continue;
    const failure = startFailures?.get(c.name);
    if (!failure) continue;
    const status = statuses.get(c.name)!;
    if (status.state.terminated) status.lastState = status.state;
    const waiting: NonNullable<ContainerState['waiting']> = { reason: failure.reason };
    if (failure.message) waiting.message = failure.message;
    status.state = { waiting };
  }

  const ordered = containers.map((c) => statuses.get(c.name)!);
  // upstream sorts regular container statuses by name; init ones stay in spec order
  if (!isInit) ordered.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return ordered;
}

function probeResult(map: Map<string, boolean> | undefined, containerID: string | undefined): boolean | undefined {
  if (!map || !containerID) return undefined;
  const direct = map.get(containerID);
  if (direct !== undefined) return direct;
  const i = containerID.indexOf('://');
  return i >= 0 ? map.get(containerID.slice(i + 3)) : undefined;
}

/** Upstream prober manager isContainerStarted: running, and the startup probe (if any) passed. */
function isContainerStarted(spec: Container, s: ContainerStatus, startup: Map<string, boolean> | undefined): boolean {
  if (!s.state.running) return false;
  const r = probeResult(startup, s.containerID);
  if (r !== undefined) return r;
  return spec.startupProbe === undefined;
}

/** Running, started, and the readiness probe (if any) passed. */
function isContainerReady(spec: Container, s: ContainerStatus, readiness: Map<string, boolean> | undefined): boolean {
  if (!s.state.running) return false;
  if (probeResult(readiness, s.containerID) === true) return true;
  return spec.readinessProbe === undefined;
}

/** Upstream prober manager UpdatePodStatus: fills `started` and `ready`. */
function applyProbeResults(pod: Pod, status: PodStatus, inputs: StatusInputs): void {
  const regular = new Map((pod.spec.containers ?? []).map((c) => [c.name, c]));
  for (const s of status.containerStatuses ?? []) {
    const spec = regular.get(s.name);
    if (!spec) continue;
    s.started = isContainerStarted(spec, s, inputs.startup);
    s.ready = s.started && isContainerReady(spec, s, inputs.readiness);
  }
  const init = new Map((pod.spec.initContainers ?? []).map((c) => [c.name, c]));
  for (const s of status.initContainerStatuses ?? []) {
    const spec = init.get(s.name);
    if (!spec) continue;
    s.started = isContainerStarted(spec, s, inputs.startup);
    if (!isRestartableInitContainer(spec)) {
      // a regular init container is ready once it succeeded
      s.ready = s.state.terminated !== undefined && s.state.terminated.exitCode === 0;
      continue;
    }
    s.ready = s.started && isContainerReady(spec, s, inputs.readiness);
  }
}

/**
 * Pod IPs in the node's family preference: the first IP of the node's primary family, then
 * the first of the other family (upstream sortPodIPs).
 */
function sortPodIPs(ips: readonly string[], hostIPs: readonly string[]): string[] {
  const nodeV6 = hostIPs.length > 0 && isIPv6(hostIPs[0]!);
  const primary = nodeV6 ? isIPv6 : isIPv4;
  const secondary = nodeV6 ? isIPv4 : isIPv6;
  const out: string[] = [];
  const p = ips.find((ip) => primary(ip));
  if (p) out.push(p);
  const s = ips.find((ip) => secondary(ip));
  if (s) out.push(s);
  return out;
}

const ipFamily = (ip: string): number => (isIPv6(ip) ? 6 : 4);

/**
 * True once a regular container exists in the current (newest, ready) sandbox: the pod has
 * initialized before, so restarting sidecars must not send it back to Pending.
 */
function hasAnyActiveRegularContainerStarted(pod: Pod, runtime: RuntimePodStatus | undefined): boolean {
  const sandbox = runtime?.sandboxStatuses[0];
  if (!runtime || !sandbox || sandbox.state !== 'ready') return false;
  const names = new Set((pod.spec.containers ?? []).map((c) => c.name));
  // containers carry no sandbox id here: those created after the newest sandbox belong to it
  return runtime.containerStatuses.some((c) => names.has(c.name) && c.createdAt >= sandbox.createdAt);
}

const isTerminalPhase = (p: PodPhase | undefined): boolean => p === 'Succeeded' || p === 'Failed';

export function generateAPIPodStatus(inputs: StatusInputs): PodStatus {
  const { pod, runtime } = inputs;
  const apiStatus: PodStatus = pod.status ?? {};
  const oldStatus: PodStatus = inputs.previous ?? apiStatus;
  const nowRFC = toRFC3339(inputs.now);
  const hasInit = (pod.spec.initContainers ?? []).length > 0;

  const s: PodStatus = {};
  const podIPs = sortPodIPs(runtime?.ips ?? [], inputs.hostIPs);
  if (podIPs.length > 0) {
    s.podIPs = podIPs.map((ip) => ({ ip }));
    s.podIP = podIPs[0];
  }
  s.qosClass = getPodQOS(pod);
  s.containerStatuses = convertContainerStatuses(
    pod, runtime, oldStatus.containerStatuses, pod.spec.containers ?? [], hasInit, false, inputs.startFailures,
  );
  s.initContainerStatuses = convertContainerStatuses(
    pod, runtime, oldStatus.initContainerStatuses, pod.spec.initContainers ?? [], hasInit, true, inputs.startFailures,
  );
  // ephemeral containers are reported like regular ones (upstream), without probes: never ready
  const ephemeral = ephemeralContainersOf(pod);
  if (ephemeral.length > 0) {
    s.ephemeralContainerStatuses = convertContainerStatuses(
      pod, runtime, oldStatus.ephemeralContainerStatuses, ephemeral, hasInit, false, inputs.startFailures,
    );
  }

  // Phase, then the three-way merge that keeps a terminal phase terminal.
  let phase: PodPhase = getPhase(
    pod, s.containerStatuses, s.initContainerStatuses, inputs.podIsTerminal === true,
    hasAnyActiveRegularContainerStarted(pod, runtime),
  );
  // a terminal phase the kubelet already set wins over the containers' (an evicted pod whose
  // container exits 0 on SIGTERM stays Failed/Evicted; a pod past its deadline stays Failed)
  if (isTerminalPhase(oldStatus.phase)) phase = oldStatus.phase!;
  else if (!isTerminalPhase(phase) && isTerminalPhase(apiStatus.phase)) phase = apiStatus.phase!;
  if (phase === oldStatus.phase) {
    // the reason and message belong to the phase (e.g. Evicted, DeadlineExceeded)
    const reason = oldStatus.reason || apiStatus.reason;
    const message = oldStatus.message || apiStatus.message;
    if (reason) s.reason = reason;
    if (message) s.message = message;
  }
  if (isTerminalPhase(apiStatus.phase) && phase !== apiStatus.phase) {
    // the API server shows a terminal phase: no transition out of it
    phase = apiStatus.phase!;
  }
  s.phase = phase;

  applyProbeResults(pod, s, inputs);

  // Conditions: keep the ones other writers own, then the kubelet's in upstream's order.
  const conditions: PodCondition[] = [];
  for (const c of apiStatus.conditions ?? []) {
    if (!podConditionByKubelet(c.type)) conditions.push(clone(c));
  }
  const disruption = oldStatus.conditions?.find((c) => c.type === DisruptionTarget);
  if (disruption) {
    const i = conditions.findIndex((c) => c.type === DisruptionTarget);
    if (i >= 0) conditions[i] = clone(disruption);
    else conditions.push(clone(disruption));
  }
  const all = [...s.initContainerStatuses, ...s.containerStatuses];
  conditions.push(generatePodReadyToStartContainersCondition(pod, runtime));
  conditions.push(generatePodInitializedCondition(pod, all, phase));
  conditions.push(generatePodReadyCondition(pod, conditions, all, phase));
  conditions.push(generateContainersReadyCondition(pod, all, phase));
  conditions.push({ type: PodScheduled, status: 'True' });
  for (const c of conditions) {
    if (podConditionByKubelet(c.type) && c.lastProbeTime === undefined) c.lastProbeTime = null;
  }
  s.conditions = conditions;
  for (const type of [ContainersReady, PodReady, PodInitialized, PodReadyToStartContainers, PodScheduled, DisruptionTarget]) {
    updateLastTransitionTime(s, oldStatus, type, nowRFC);
  }

  // Host IPs, and the node's IPs as pod IPs for host-network pods.
  const hostIPs = inputs.hostIPs;
  if (hostIPs.length > 0) {
    s.hostIP = hostIPs[0];
    s.hostIPs = [{ ip: hostIPs[0]! }];
    if (hostIPs.length >= 2) s.hostIPs.push({ ip: hostIPs[1]! });
    if (pod.spec.hostNetwork) {
      if (!s.podIP) {
        s.podIP = hostIPs[0];
        s.podIPs = [{ ip: hostIPs[0]! }];
      }
      if (hostIPs.length >= 2 && s.podIPs!.length === 1 && ipFamily(s.podIPs![0]!.ip) !== ipFamily(hostIPs[1]!)) {
        s.podIPs!.push({ ip: hostIPs[1]! } satisfies PodIP);
      }
    }
  }

  // The start time never changes once set.
  s.startTime = oldStatus.startTime || nowRFC;
  truncateTerminationMessages(pod, s);

  return orderStatusFields(s);
}

/** Field order as the API server serializes v1.PodStatus, so JSON diffs stay readable; empty lists omitted. */
function orderStatusFields(s: PodStatus): PodStatus {
  const out: PodStatus = {};
  const keys: (keyof PodStatus)[] = [
    'phase', 'conditions', 'message', 'reason', 'hostIP', 'hostIPs', 'podIP', 'podIPs',
    'startTime', 'initContainerStatuses', 'containerStatuses', 'qosClass', 'ephemeralContainerStatuses',
  ];
  for (const k of keys) {
    const v = s[k];
    // Go's omitempty drops empty lists (a pod without init containers has no initContainerStatuses)
    if (v === undefined || (Array.isArray(v) && v.length === 0)) continue;
    (out as Record<string, unknown>)[k] = v;
  }
  return out;
}

function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v as object).sort()) {
      const x = (v as Record<string, unknown>)[k];
      if (x === undefined || x === null) continue;
      out[k] = normalize(x);
    }
    return out;
  }
  return v;
}

function conditionKey(c: PodCondition): string {
  return JSON.stringify([c.status, c.reason ?? '', c.message ?? '']);
}

/**
 * Whether two statuses say the same thing (upstream isPodStatusByKubeletEqual, made symmetric):
 * conditions are compared by type on status/reason/message only, so lastProbeTime and
 * lastTransitionTime and condition order do not count; absent and null fields are equal.
 */
export function podStatusEqual(a: PodStatus, b: PodStatus): boolean {
  const ca = new Map((a.conditions ?? []).map((c) => [c.type, conditionKey(c)]));
  const cb = new Map((b.conditions ?? []).map((c) => [c.type, conditionKey(c)]));
  if (ca.size !== cb.size) return false;
  for (const [type, key] of ca) {
    if (cb.get(type) !== key) return false;
  }
  const rest = (s: PodStatus): unknown => normalize({ ...s, conditions: undefined });
  return JSON.stringify(rest(a)) === JSON.stringify(rest(b));
}

/** The pod's 12 KiB of termination messages shared by its containers (upstream normalizeStatus). */
function truncateTerminationMessages(pod: Pod, s: PodStatus): void {
  const count = (pod.spec.containers?.length ?? 0) + (pod.spec.initContainers?.length ?? 0)
    + (Array.isArray(pod.spec.ephemeralContainers) ? pod.spec.ephemeralContainers.length : 0);
  const budget = terminationMessageBudget(count);
  for (const cs of [...(s.containerStatuses ?? []), ...(s.initContainerStatuses ?? []), ...(s.ephemeralContainerStatuses ?? [])]) {
    for (const st of [cs.state, cs.lastState]) {
      const t = st?.terminated;
      // upstream cuts bytes of the Go string; a cut inside a character is dropped whole here
      if (t?.message && Buffer.byteLength(t.message) > budget) t.message = Buffer.from(t.message).subarray(0, budget).toString('utf8').replace(/\uFFFD$/, '');
    }
  }
}
