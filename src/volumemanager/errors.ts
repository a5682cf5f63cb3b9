// The volume manager's errors. A pod whose volumes cannot be set up waits in ContainerCreating
// and gets a FailedMount event carrying the VolumeMountError's message.

import { KubeletError } from '../util/errors.js';

/** One volume of one pod could not be set up; `volume` names it. */
export class VolumeSetupError extends KubeletError {
  constructor(readonly volume: string, message: string, options?: { cause?: unknown }) {
    super('ERR_VOLUME_SETUP', message, options);
  }
}

/** A pod's volumes could not all be set up (upstream's WaitForAttachAndMount failure). */
export class VolumeMountError extends KubeletError {
  declare readonly code: 'FailedMount';
  constructor(readonly pod: string, readonly failed: readonly VolumeSetupError[]) {
    const names = failed.map((f) => f.volume).sort();
    // upstream: "unmounted volumes=[..], unattached volumes=[..], failed to process volumes=[..]: <err>"
    super(
      'FailedMount',
      `Unable to attach or mount volumes: unmounted volumes=[${names.join(' ')}], unattached volumes=[], failed to process volumes=[${names.join(' ')}]: ${failed.map((f) => f.message).join('; ')}`,
      { cause: failed[0] },
    );
  }
}

/** A volume's data could not be put together (a missing key, a source kubelet-ts lacks); upstream's text. */
export class VolumePayloadError extends KubeletError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_VOLUME_PAYLOAD', message, options);
  }
}
