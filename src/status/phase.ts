// Pod phase from the API container statuses, as upstream's kubelet getPhase decides it.
import type { Container, ContainerStatus, Pod, PodPhase } from '../api/types.js';

/** An init container with restartPolicy Always: a sidecar that keeps running beside the app. */
export function isRestartableInitContainer(c: Container): boolean {
  return c.restartPolicy === 'Always';
}

/** Static pods carry the config source annotation with a source other than the API server. */
export function isStaticPod(pod: Pod): boolean {
  const source = pod.metadata.annotations?.['kubernetes.io/config.source'];
  return source !== undefined && source !== 'api';
}

function findStatus(statuses: readonly ContainerStatus[], name: string): ContainerStatus | undefined {
  return statuses.find((s) => s.name === name);
}

/**
 * The pod phase.
 * - Pending while a regular init container has not succeeded, a sidecar has not started (unless
 *   the pod already initialized: `podHasInitialized`), or any container waits for its first run.
 * - Failed when a regular init container failed and restartPolicy is Never.
 * - Running when every container has started and one runs; also when all have exited but
 *   will be restarted (Always, or OnFailure with a failure).
 * - Succeeded/Failed when all have exited for good (or the pod is terminal: `podIsTerminal`,
 *   except static pods, which upstream keeps non-terminal).
 * Upstream never reports Unknown from here: containers without a known state keep the pod Pending.
 */
export function getPhase(
  pod: Pod,
  containerStatuses: readonly ContainerStatus[],
  initContainerStatuses: readonly ContainerStatus[],
  podIsTerminal: boolean,
  podHasInitialized = false,
): PodPhase {
  const spec = pod.spec;
  const initContainers = spec.initContainers ?? [];
  let pendingRegularInit = 0;
  let pendingRestartableInit = 0;
  let failedInitialization = 0;

  for (const c of initContainers) {
    if (isRestartableInitContainer(c)) continue;
    const s = findStatus(initContainerStatuses, c.name);
    if (!s) {
      pendingRegularInit++;
      continue;
    }
    if (s.state.running) {
      pendingRegularInit++;
    } else if (s.state.terminated) {
      if (s.state.terminated.exitCode !== 0) failedInitialization++;
    } else if (s.state.waiting) {
      if (s.lastState?.terminated) {
        if (s.lastState.terminated.exitCode !== 0) failedInitialization++;
      } else {
        pendingRegularInit++;
      }
    } else {
      pendingRegularInit++;
    }
  }

  let unknown = 0;
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;

  for (const c of initContainers) {
    if (!isRestartableInitContainer(c)) continue;
    const s = findStatus(initContainerStatuses, c.name);
    if (!s) {
      unknown++;
      continue;
    }
    if (s.state.running) {
      if (!s.started) pendingRestartableInit++;
      running++;
    } else if (s.state.terminated) {
      // an exited sidecar does not count towards the phase
    } else if (s.state.waiting) {
      if (!s.lastState?.terminated) {
        pendingRestartableInit++;
        waiting++;
      }
    } else {
      pendingRestartableInit++;
      unknown++;
    }
  }

  for (const c of spec.containers ?? []) {
    const s = findStatus(containerStatuses, c.name);
    if (!s) {
      unknown++;
      continue;
    }
    if (s.state.running) {
      running++;
    } else if (s.state.terminated) {
      stopped++;
      if (s.state.terminated.exitCode === 0) succeeded++;
    } else if (s.state.waiting) {
      if (s.lastState?.terminated) stopped++;
      else waiting++;
    } else {
      unknown++;
    }
  }

  const restartPolicy = spec.restartPolicy ?? 'Always';
  if (failedInitialization > 0 && restartPolicy === 'Never') return 'Failed';

  if (pendingRegularInit > 0 || (pendingRestartableInit > 0 && !podHasInitialized) || waiting > 0) {
    return 'Pending';
  }
  if (running > 0 && unknown === 0) return 'Running';
  if (running === 0 && stopped > 0 && unknown === 0) {
    if (podIsTerminal && !isStaticPod(pod)) {
      return stopped === succeeded ? 'Succeeded' : 'Failed';
    }
    if (restartPolicy === 'Always') return 'Running';
    if (stopped === succeeded) return 'Succeeded';
    if (restartPolicy === 'Never') return 'Failed';
    return 'Running';
  }
  return 'Pending';
}
