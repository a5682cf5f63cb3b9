// Errors of the runtime layer that are not CRI answers (those are CriError, cri-errors.ts).

import { KubeletError } from '../util/errors.js';

/** A lifecycle hook (postStart, preStop) failed; the message has upstream's shape. */
export class LifecycleHookError extends KubeletError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_LIFECYCLE_HOOK', message, options);
  }
}

/** Some containers or sandboxes of a pod could not be stopped; names the pod and each failure. */
export class KillPodError extends KubeletError {
  constructor(readonly pod: string, readonly failures: string[]) {
    super('ERR_KILL_POD', `killing pod ${pod}: ${failures.join('; ')}`);
  }
}

/** Work abandoned because kubelet-ts is shutting down (pods keep running). */
export class ShutdownError extends KubeletError {
  constructor(what: string) {
    super('ERR_SHUTDOWN', `${what}: kubelet-ts is shutting down`);
  }
}

/** A CRI endpoint or client setting kubelet-ts cannot use; names the endpoint or setting. */
export class CriEndpointError extends KubeletError {
  constructor(message: string) {
    super('ERR_CRI_ENDPOINT', message);
  }
}
