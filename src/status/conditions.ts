// The kubelet-owned pod conditions, as upstream's pkg/kubelet/status/generate.go builds them.
import type { ContainerStatus, Pod, PodCondition, PodPhase, PodStatus } from '../api/types.js';
import type { RuntimePodStatus } from '../runtime/types.js';
import { isRestartableInitContainer } from './phase.js';
import {
  ContainersNotInitialized,
  ContainersNotReady,
  ContainersReady,
  goStringList,
  PodCompleted,
  PodFailed,
  PodInitialized,
  PodReady,
  PodReadyToStartContainers,
  ReadinessGatesNotReady,
  UnknownContainerStatuses,
} from '../api/reasons.js';

function findStatus(statuses: readonly ContainerStatus[], name: string): ContainerStatus | undefined {
  return statuses.find((s) => s.name === name);
}

function condition(type: string, status: PodCondition['status'], reason?: string, message?: string): PodCondition {
  const c: PodCondition = { type, status };
  if (reason) c.reason = reason;
  if (message) c.message = message;
  return c;
}

function terminalPhaseCondition(type: string, phase: PodPhase): PodCondition {
  return condition(type, 'False', phase === 'Failed' ? PodFailed : phase === 'Succeeded' ? PodCompleted : undefined);
}

/** True once any regular container has run (its state is running or terminated). */
export function hasAnyRegularContainerStarted(pod: Pod, statuses: readonly ContainerStatus[]): boolean {
  const names = new Set((pod.spec.containers ?? []).map((c) => c.name));
  return statuses.some((s) => names.has(s.name) && (s.state.running !== undefined || s.state.terminated !== undefined));
}

/**
 * ContainersReady: True when every regular container and every sidecar is ready.
 * `statuses` holds init and regular container statuses together.
 */
export function generateContainersReadyCondition(
  pod: Pod,
  statuses: readonly ContainerStatus[] | undefined,
  phase: PodPhase,
): PodCondition {
  if (!statuses) return condition(ContainersReady, 'False', UnknownContainerStatuses);
  const unknown: string[] = [];
  const unready: string[] = [];
  const check = (name: string): void => {
    const s = findStatus(statuses, name);
    if (!s) unknown.push(name);
    else if (!s.ready) unready.push(name);
  };
  for (const c of pod.spec.initContainers ?? []) {
    if (isRestartableInitContainer(c)) check(c.name);
  }
  for (const c of pod.spec.containers ?? []) check(c.name);

  if (phase === 'Succeeded' && unknown.length === 0) return terminalPhaseCondition(ContainersReady, phase);
  // a failed pod's containers may still be terminating: never report them ready
  if (phase === 'Failed') return terminalPhaseCondition(ContainersReady, phase);

  const messages: string[] = [];
  if (unknown.length > 0) messages.push(`containers with unknown status: ${goStringList(unknown)}`);
  if (unready.length > 0) messages.push(`containers with unready status: ${goStringList(unready)}`);
  if (messages.length > 0) return condition(ContainersReady, 'False', ContainersNotReady, messages.join(', '));
  return condition(ContainersReady, 'True');
}

/** Ready: ContainersReady, and every readiness gate's condition True. */
export function generatePodReadyCondition(
  pod: Pod,
  conditions: readonly PodCondition[],
  statuses: readonly ContainerStatus[] | undefined,
  phase: PodPhase,
): PodCondition {
  const containersReady = generateContainersReadyCondition(pod, statuses, phase);
  if (containersReady.status !== 'True') {
    return condition(PodReady, containersReady.status, containersReady.reason, containersReady.message);
  }
  const gates = (pod.spec as { readinessGates?: { conditionType: string }[] }).readinessGates ?? [];
  const messages: string[] = [];
  for (const gate of gates) {
    const c = conditions.find((x) => x.type === gate.conditionType);
    if (!c) {
      messages.push(`corresponding condition of pod readiness gate ${JSON.stringify(gate.conditionType)} does not exist.`);
    } else if (c.status !== 'True') {
      messages.push(`the status of pod readiness gate ${JSON.stringify(gate.conditionType)} is not "True", but ${c.status}`);
    }
  }
  if (messages.length > 0) return condition(PodReady, 'False', ReadinessGatesNotReady, messages.join(', '));
  return condition(PodReady, 'True');
}

/** A regular init container counts once it succeeded (ready); a sidecar once it started. */
function isInitContainerInitialized(restartable: boolean, s: ContainerStatus): boolean {
  return restartable ? s.started === true : s.ready;
}

/** Initialized: True once every init container completed (sidecars: started). */
export function generatePodInitializedCondition(
  pod: Pod,
  statuses: readonly ContainerStatus[] | undefined,
  phase: PodPhase,
): PodCondition {
  const initContainers = pod.spec.initContainers ?? [];
  if (!statuses && initContainers.length > 0) {
    return condition(PodInitialized, 'False', UnknownContainerStatuses);
  }
  const all = statuses ?? [];
  const unknown: string[] = [];
  const incomplete: string[] = [];
  for (const c of initContainers) {
    const s = findStatus(all, c.name);
    if (!s) {
      unknown.push(c.name);
      continue;
    }
    if (!isInitContainerInitialized(isRestartableInitContainer(c), s)) incomplete.push(c.name);
  }
  if (phase === 'Succeeded' && unknown.length === 0) return condition(PodInitialized, 'True', PodCompleted);
  // a regular container ran, so initialization finished before (sidecars may be restarting now)
  if (hasAnyRegularContainerStarted(pod, all)) return condition(PodInitialized, 'True');

  const messages: string[] = [];
  if (unknown.length > 0) messages.push(`containers with unknown status: ${goStringList(unknown)}`);
  if (incomplete.length > 0) messages.push(`containers with incomplete status: ${goStringList(incomplete)}`);
  if (messages.length > 0) return condition(PodInitialized, 'False', ContainersNotInitialized, messages.join(', '));
  return condition(PodInitialized, 'True');
}

/**
 * Whether the kubelet must create a new sandbox (upstream PodSandboxChanged): none exists,
 * several are ready, the newest is not ready, its network mode differs from the spec, or a
 * pod-network sandbox has no IP.
 */
export function podSandboxChanged(pod: Pod, runtime: RuntimePodStatus | undefined): boolean {
  const sandboxes = runtime?.sandboxStatuses ?? [];
  if (sandboxes.length === 0) return true;
  const readyCount = sandboxes.filter((s) => s.state === 'ready').length;
  if (readyCount > 1) return true;
  const newest = sandboxes[0]!;
  if (newest.state !== 'ready') return true;
  const hostNetwork = pod.spec.hostNetwork === true;
  if (newest.hostNetwork !== hostNetwork) return true;
  if (!hostNetwork && !newest.ip) return true;
  return false;
}

/** PodReadyToStartContainers: True while a ready sandbox with networking exists. */
export function generatePodReadyToStartContainersCondition(pod: Pod, runtime: RuntimePodStatus | undefined): PodCondition {
  return condition(PodReadyToStartContainers, podSandboxChanged(pod, runtime) ? 'False' : 'True');
}

/**
 * Keeps the old lastTransitionTime when the condition's status did not change, else stamps
 * `nowRFC3339` (upstream status manager updateLastTransitionTime).
 */
export function updateLastTransitionTime(
  status: PodStatus,
  oldStatus: PodStatus | undefined,
  type: string,
  nowRFC3339: string,
): void {
  const c = status.conditions?.find((x) => x.type === type);
  if (!c) return;
  const old = oldStatus?.conditions?.find((x) => x.type === type);
  c.lastTransitionTime = old && old.status === c.status && old.lastTransitionTime ? old.lastTransitionTime : nowRFC3339;
}
