// Errors the kubelet's own code raises (the subsystems have theirs).

import { KubeletError } from '../util/errors.js';

/** A pod's sync did not complete; the pod is retried after a backoff. Names the pod. */
export class PodSyncError extends KubeletError {
  constructor(readonly pod: string, readonly errors: string[]) {
    super('ERR_POD_SYNC', `syncing pod ${pod}: ${errors.join('; ')}`);
  }
}

/** Termination finished but the runtime still runs containers of the pod. */
export class PodStillRunningError extends KubeletError {
  constructor(readonly pod: string) {
    super('ERR_POD_STILL_RUNNING', `pod ${pod} still has running containers after termination`);
  }
}

/** A subsystem could not start; kubelet-ts exits non-zero. Names the subsystem and setting. */
export class KubeletStartError extends KubeletError {
  constructor(what: string, options?: { cause?: unknown }) {
    super('ERR_KUBELET_START', `${what}: ${options?.cause instanceof Error ? options.cause.message : String(options?.cause ?? 'failed')}`, options);
  }
}

/** A mirror pod could not be made for a static pod (its Node, its owner, is not readable yet). Names the node. */
export class MirrorPodError extends KubeletError {
  constructor(readonly node: string, message: string, options?: { cause?: unknown }) {
    super('ERR_MIRROR_POD', message, options);
  }
}
