// What a pod needs (upstream: kubeGenericRuntimeManager.computePodActions): from the pod's
// spec and the runtime's view of it, decide whether to kill it, recreate its sandbox, and which
// init and regular containers to start or kill. Pure: no I/O, no clock.

import type { Container, Pod } from '../api/types.js';
import type { ContainerRuntimeStatus, RuntimePodStatus } from './types.js';
import { containerHashMatches } from './container-hash.js';
import { shouldContainerBeRestarted } from './restart-policy.js';
import { computeContainerResizeAction, emptyResizeActions, type PodResizeActions } from './resize.js';
import { ephemeralContainersOf, ephemeralContainersToStart } from './ephemeral.js';

export interface ContainerToKill {
  id: string;
  name: string;
  container?: Container;
  reason: string;
  /** The probe-level terminationGracePeriodSeconds of the probe that failed, when it sets one. */
  gracePeriodOverride?: number;
}

/** The prober's liveness and startup results by container ID (`containerd://<id>`). */
export interface ProbeResultsView {
  liveness(containerID: string): 'Success' | 'Failure' | 'Unknown' | undefined;
  startup(containerID: string): 'Success' | 'Failure' | 'Unknown' | undefined;
}

/** upstream's podActions. */
export interface PodActions {
  killPod: boolean;
  createSandbox: boolean;
  sandboxID: string;
  attempt: number;
  /** Init containers (index into spec.initContainers) to start now, in order. */
  initContainersToStart: number[];
  /** Regular containers (index into spec.containers) to start. */
  containersToStart: number[];
  containersToKill: ContainerToKill[];
  /** In-place resize (present when the pod may be resized): containers to update, pod cgroup to follow. */
  resize?: PodResizeActions;
  /** Ephemeral containers (index into spec.ephemeralContainers) to start: started once, never restarted. */
  ephemeralContainersToStart: number[];
}

/** What computePodActions needs for in-place resize: what each container was last given (the actuated resources). */
export interface ResizeView {
  actuated(containerName: string, running: ContainerRuntimeStatus): import('../api/types.js').ResourceRequirements | undefined;
}

/** Newest status per container name (statuses are ordered newest first). */
export function latestByName(statuses: ContainerRuntimeStatus[]): Map<string, ContainerRuntimeStatus> {
  const m = new Map<string, ContainerRuntimeStatus>();
  for (const s of statuses) if (!m.has(s.name)) m.set(s.name, s);
  return m;
}

function isRestartableInit(c: Container): boolean {
  return c.restartPolicy === 'Always';
}

/** Decides what a pod needs, from its spec and the runtime's view of it. */
export function computePodActions(pod: Pod, status: RuntimePodStatus, probes?: ProbeResultsView, resizeView?: ResizeView): PodActions {
  const actions: PodActions = {
    killPod: false,
    createSandbox: false,
    sandboxID: '',
    attempt: 0,
    initContainersToStart: [],
    containersToStart: [],
    containersToKill: [],
    ephemeralContainersToStart: [],
  };
  const policy = pod.spec.restartPolicy ?? 'Always';
  const latest = latestByName(status.containerStatuses);
  const initContainers = pod.spec.initContainers ?? [];

  // 1. The sandbox.
  const [createSandbox, attempt, sandboxID] = podSandboxChanged(pod, status);
  actions.createSandbox = createSandbox;
  actions.attempt = attempt;
  actions.sandboxID = sandboxID;
  if (createSandbox) {
    actions.killPod = true;
    // A Never pod whose sandbox died after its containers ran is done: do not start it again.
    if (policy === 'Never' && attempt !== 0 && status.containerStatuses.length > 0) {
      actions.createSandbox = false;
      return actions;
    }
    const toStart: number[] = [];
    pod.spec.containers.forEach((c, i) => {
      const s = latest.get(c.name);
      if (policy === 'OnFailure' && s?.state === 'exited' && s.exitCode === 0) return;
      if (policy === 'Never' && s && s.state !== 'created') return;
      toStart.push(i);
    });
    // Initialized and nothing left to start (an OnFailure pod that succeeded): only kill it.
    if (toStart.length === 0 && initializationDone(pod, latest)) {
      actions.createSandbox = false;
      return actions;
    }
    if (initContainers.length > 0) {
      actions.initContainersToStart = [0];
      return actions;
    }
    actions.containersToStart = toStart;
    return actions;
  }

  // Ephemeral containers may start before initialization is complete (upstream).
  actions.ephemeralContainersToStart = ephemeralContainersToStart(pod, status);

  // 2. Init containers, in order: each to success (restartable ones: to running) before the next.
  let initDone = true;
  for (let i = 0; i < initContainers.length; i++) {
    const c = initContainers[i]!;
    const s = latest.get(c.name);
    if (isRestartableInit(c)) {
      if (s?.state === 'running') {
        if (!containerHashMatches(c, s.hash)) {
          actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: `Init container ${c.name} definition changed` });
          actions.initContainersToStart.push(i);
        } else if (resizeView && computeContainerResizeAction(c, s, resizeView.actuated(c.name, s), (actions.resize ??= emptyResizeActions())) === 'restart') {
          actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: `Container ${c.name} resize requires restart` });
          actions.initContainersToStart.push(i);
        }
        const gate = sidecarProbeGate(c, s, i, actions, probes, initializedBefore(pod, latest));
        if (gate === 'wait') {
          initDone = false;
          break;
        }
        continue;
      }
      if (s?.state === 'unknown') actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: 'Container state unknown' });
      actions.initContainersToStart.push(i);
      initDone = initDone && s !== undefined && s.state !== 'created';
      if (!s || s.state === 'created') {
        initDone = false;
        break;
      }
      continue;
    }
    if (s?.state === 'exited' && s.exitCode === 0) continue;
    initDone = false;
    if (!s || s.state === 'created') {
      actions.initContainersToStart.push(i);
    } else if (s.state === 'exited' || s.state === 'unknown') {
      if (s.state === 'unknown') actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: 'Init container state unknown' });
      if (policy === 'Never') {
        // A failed init container fails a Never pod.
        actions.killPod = true;
        actions.initContainersToStart = [];
        return actions;
      }
      actions.initContainersToStart.push(i);
    }
    // Running: wait for it.
    break;
  }
  if (!initDone) {
    if (!actions.initContainersToStart.length && !hasRunning(status)) {
      // Nothing runs and nothing can start: only possible for a finished Never pod.
      actions.killPod = policy === 'Never';
    }
    return actions;
  }

  // 3. Regular containers.
  let keepCount = 0;
  const specNames = new Set<string>();
  pod.spec.containers.forEach((c, i) => {
    specNames.add(c.name);
    const s = latest.get(c.name);
    if (!s || s.state !== 'running') {
      if (s?.state === 'unknown') actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: 'Container state unknown' });
      if (shouldContainerBeRestarted(c, pod, status)) actions.containersToStart.push(i);
      return;
    }
    if (!containerHashMatches(c, s.hash)) {
      // upstream restarts on a definition change whatever the policy, and says so
      actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: `Container ${c.name} definition changed, will be restarted` });
      actions.containersToStart.push(i);
      return;
    }
    // in-place resize (upstream computePodResizeAction): updated where it runs, restarted when its resizePolicy says so
    if (resizeView && computeContainerResizeAction(c, s, resizeView.actuated(c.name, s), (actions.resize ??= emptyResizeActions())) === 'restart') {
      actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: `Container ${c.name} resize requires restart` });
      actions.containersToStart.push(i);
      return;
    }
    // A failed liveness or startup probe kills the container (upstream's message); it restarts unless the pod is Never.
    let failed: 'liveness' | 'startup' | undefined;
    if (probes?.liveness(s.containerID) === 'Failure') failed = 'liveness';
    else if (probes?.startup(s.containerID) === 'Failure') failed = 'startup';
    if (failed) {
      const restart = policy !== 'Never';
      const grace = (failed === 'liveness' ? c.livenessProbe : c.startupProbe)?.terminationGracePeriodSeconds;
      const kill: ContainerToKill = { id: s.id, name: c.name, container: c, reason: `Container ${c.name} failed ${failed} probe${restart ? ', will be restarted' : ''}` };
      if (grace !== undefined && grace !== null) kill.gracePeriodOverride = grace;
      actions.containersToKill.push(kill);
      if (restart) actions.containersToStart.push(i);
      return;
    }
    keepCount++;
  });
  for (const c of [...initContainers, ...ephemeralContainersOf(pod)]) specNames.add(c.name);
  // Running containers the spec no longer names, and older attempts still running.
  for (const s of status.containerStatuses) {
    if (s.state !== 'running') continue;
    if (!specNames.has(s.name) || latest.get(s.name) !== s) {
      if (!actions.containersToKill.some((k) => k.id === s.id)) {
        actions.containersToKill.push({ id: s.id, name: s.name, reason: 'Container is not in the pod spec' });
      }
    }
  }
  // Sidecars do not keep a pod alive: with no regular container to keep or start, it is done.
  if (keepCount === 0 && actions.containersToStart.length === 0) {
    actions.killPod = true;
    actions.initContainersToStart = [];
    actions.ephemeralContainersToStart = [];
  }
  return actions;
}

/**
 * A running sidecar's probes (upstream computeInitContainerActions): a failed liveness or startup
 * probe restarts it; until its startup probe has succeeded the next init container (and the
 * regular containers) wait, unless the pod has initialized before (a regular container exists).
 */
function sidecarProbeGate(c: Container, s: ContainerRuntimeStatus, i: number, actions: PodActions, probes: ProbeResultsView | undefined, initialized: boolean): 'wait' | 'go' {
  const restarting = actions.initContainersToStart.includes(i);
  const restart = (probe: string) => {
    if (restarting) return;
    actions.containersToKill.push({ id: s.id, name: c.name, container: c, reason: `Init container ${c.name} failed ${probe} probe` });
    actions.initContainersToStart.push(i);
  };
  if (c.livenessProbe && probes?.liveness(s.containerID) === 'Failure') restart('liveness');
  if (!c.startupProbe) return 'go';
  const startup = probes?.startup(s.containerID);
  if (startup === 'Failure') restart('startup');
  return startup === 'Success' || initialized ? 'go' : 'wait';
}

/** upstream hasAnyRegularContainerCreated: the pod has initialized once, sidecars no longer gate it. */
function initializedBefore(pod: Pod, latest: Map<string, ContainerRuntimeStatus>): boolean {
  return pod.spec.containers.some((c) => latest.has(c.name));
}

/** Every init container has done its part: run-to-completion ones succeeded, sidecars started (upstream: findNextInitContainerToRun's done, or a regular container started). */
function initializationDone(pod: Pod, latest: Map<string, ContainerRuntimeStatus>): boolean {
  const init = pod.spec.initContainers ?? [];
  if (init.some(isRestartableInit)) return pod.spec.containers.some((c) => latest.has(c.name) && latest.get(c.name)!.state !== 'created');
  return init.every((c) => {
    const s = latest.get(c.name);
    return s?.state === 'exited' && s.exitCode === 0;
  });
}

function hasRunning(status: RuntimePodStatus): boolean {
  return status.containerStatuses.some((c) => c.state === 'running');
}

/** upstream's podSandboxChanged: [createSandbox, attempt, sandboxID]. */
function podSandboxChanged(pod: Pod, status: RuntimePodStatus): [boolean, number, string] {
  const sandboxes = status.sandboxStatuses;
  if (sandboxes.length === 0) return [true, 0, ''];
  const newest = sandboxes[0]!;
  const readyCount = sandboxes.filter((s) => s.state === 'ready').length;
  if (readyCount > 1) return [true, newest.attempt + 1, newest.id];
  if (newest.state !== 'ready') return [true, newest.attempt + 1, newest.id];
  if (newest.hostNetwork !== Boolean(pod.spec.hostNetwork)) return [true, newest.attempt + 1, ''];
  if (!pod.spec.hostNetwork && !newest.ip) return [true, newest.attempt + 1, newest.id];
  return [false, newest.attempt, newest.id];
}
