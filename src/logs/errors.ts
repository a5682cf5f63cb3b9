// The container log subsystem's errors: bad /containerLogs parameters and unreadable log files.
import { KubeletError } from '../util/errors.js';

/** A /containerLogs query parameter that cannot be decoded (400) or is invalid (422, as upstream). */
export class LogOptionsError extends KubeletError {
  constructor(readonly param: string, readonly status: 400 | 422, message: string) {
    super('ERR_LOG_OPTIONS', `${param}: ${message}`);
  }
}

/** A container log file that could not be read. */
export class LogReadError extends KubeletError {
  constructor(readonly path: string, message: string, cause?: unknown) {
    super('ERR_LOG_READ', `failed to read log file ${JSON.stringify(path)}: ${message}`, { cause });
  }
}

/** A rotation step (rename, compress, reopen, prune) failed for one container's log. */
export class LogRotationError extends KubeletError {
  constructor(readonly path: string, readonly step: string, cause: unknown) {
    super('ERR_LOG_ROTATION', `container log ${JSON.stringify(path)}: ${step} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}
