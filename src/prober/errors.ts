// The prober's errors: a probe whose target cannot be resolved from the pod (a named port the
// container does not declare, a missing pod IP) is reported, never thrown out of a timer.

import { KubeletError } from '../util/errors.js';

export class ProbeTargetError extends KubeletError {
  constructor(readonly pod: string, readonly container: string, detail: string) {
    super('ERR_PROBE_TARGET', `probe of container ${container} in pod ${pod}: ${detail}`);
  }
}

/** A probe run that could not complete (pool down, CRI exec failed); the result is unknown. */
export class ProbeRunError extends KubeletError {
  constructor(readonly kind: string, detail: string, options?: { cause?: unknown }) {
    super('ERR_PROBE_RUN', `${kind} probe: ${detail}`, options);
  }
}
