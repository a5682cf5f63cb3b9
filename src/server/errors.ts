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

/** A container whose status gives no log to read (upstream validateContainerLogStatus). */
export class ContainerLogStatusError extends KubeletError {
  constructor(readonly container: string, readonly pod: string, message: string) {
    super('ERR_CONTAINER_LOG_STATUS', message);
  }
}

/** A streaming request (exec, attach, portForward, run) refused before any runtime session. */
export class StreamingRequestError extends KubeletError {
  constructor(readonly status: number, message: string) {
    super('ERR_STREAMING_REQUEST', message);
  }
}

/** The runtime gave no log file for a container instance. */
export class ContainerLogPathError extends KubeletError {
  constructor(readonly containerID: string, message: string, cause?: unknown) {
    super('ERR_CONTAINER_LOG_PATH', message, { cause });
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
