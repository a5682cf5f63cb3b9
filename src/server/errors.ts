// The HTTP servers' errors.
import { KubeletError } from '../util/errors.js';

/** A server could not bind its address (in use, not local, no permission). */
export class ServerListenError extends KubeletError {
  constructor(readonly server: string, readonly address: string, readonly port: number, cause: Error) {
    super('ERR_SERVER_LISTEN', `cannot serve ${server} on ${address}:${port}: ${cause.message}`, { cause });
  }
}

/** Server limits that contradict each other. */
export class ServerLimitsError extends KubeletError {
  constructor(readonly field: string, message: string) {
    super('ERR_SERVER_LIMITS', `server limits: ${field}: ${message}`);
  }
}

/** The serving certificate could not be read or generated (file named). */
export class ServingCertError extends KubeletError {
  constructor(readonly file: string, message: string, cause?: unknown) {
    super('ERR_SERVING_CERT', `serving certificate ${file}: ${message}`, { cause });
  }
}

/** The secure server cannot be built as configured (the field is named). */
export class ServerAuthConfigError extends KubeletError {
  constructor(readonly field: string, message: string) {
    super('ERR_SERVER_AUTH_CONFIG', `${field}: ${message}`);
  }
}
