// Errors of the API server client: Status answers as typed errors (code = the Status reason,
// as client-go's apierrors branch on it), kubeconfig problems naming file and field, and
// transport failures (connection, client-side timeout, abort).

import { KubeletError } from '../util/errors.js';

/** A metav1.Status as the API server sends it with an error. */
export interface ApiStatus {
  kind?: string;
  apiVersion?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
    retryAfterSeconds?: number;
  };
}

// Reasons client-go gives a non-Status error answer, by HTTP code (NewGenericServerResponse).
const reasonByHttpCode: Record<number, string> = {
  400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 405: 'MethodNotAllowed',
  406: 'NotAcceptable', 409: 'Conflict', 410: 'Gone', 413: 'RequestEntityTooLarge', 415: 'UnsupportedMediaType',
  422: 'Invalid', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout',
};

/** An error answer of the API server: `code` is the Status reason (NotFound, Conflict, Expired, ...). */
export class ApiStatusError extends KubeletError {
  readonly httpCode: number;
  readonly reason: string;
  readonly status: ApiStatus;
  /** Seconds the server asked to wait (Retry-After header or details.retryAfterSeconds). */
  readonly retryAfterSeconds?: number;

  constructor(httpCode: number, status: ApiStatus, what: string, retryAfterSeconds?: number) {
    const reason = status.reason || reasonByHttpCode[httpCode] || (httpCode >= 500 ? 'InternalError' : 'Unknown');
    super(reason, `${what}: ${httpCode} ${reason}: ${status.message ?? 'no message'}`);
    this.httpCode = httpCode;
    this.reason = reason;
    this.status = status;
    const ra = retryAfterSeconds ?? status.details?.retryAfterSeconds;
    if (ra !== undefined) this.retryAfterSeconds = ra;
  }
}

export function isApiStatus(err: unknown, reason?: string): err is ApiStatusError {
  return err instanceof ApiStatusError && (reason === undefined || err.reason === reason);
}

export const isNotFound = (err: unknown): boolean => isApiStatus(err) && err.httpCode === 404 && err.reason === 'NotFound';
export const isConflict = (err: unknown): boolean => isApiStatus(err, 'Conflict');
export const isAlreadyExists = (err: unknown): boolean => isApiStatus(err, 'AlreadyExists');
/** 410: a resourceVersion compacted away (reason Expired) or Gone; the cure is a fresh list. */
export const isGone = (err: unknown): boolean => isApiStatus(err) && err.httpCode === 410;

/** A kubeconfig that cannot be used: the message names the file and the field. */
export class KubeconfigError extends KubeletError {
  declare readonly code: 'ERR_KUBECONFIG' | 'ERR_KUBECONFIG_NOT_IMPLEMENTED';
  readonly file: string;
  readonly field?: string;

  constructor(file: string, field: string | undefined, detail: string, opts: { cause?: unknown; notImplemented?: boolean } = {}) {
    super(opts.notImplemented ? 'ERR_KUBECONFIG_NOT_IMPLEMENTED' : 'ERR_KUBECONFIG',
      `kubeconfig ${file}${field ? `: ${field}` : ''}: ${detail}`, { cause: opts.cause });
    this.file = file;
    if (field !== undefined) this.field = field;
  }
}

/** An exec credential plugin that failed, or answered something unusable. */
export class ExecCredentialError extends KubeletError {
  declare readonly code: 'ERR_EXEC_CREDENTIAL';
  readonly command: string;

  constructor(command: string, detail: string, opts: { cause?: unknown } = {}) {
    super('ERR_EXEC_CREDENTIAL', `exec credential plugin ${JSON.stringify(command)}: ${detail}`, opts);
    this.command = command;
  }
}

export type TransportErrorCode = 'ERR_API_CONNECTION' | 'ERR_API_TIMEOUT' | 'ERR_API_ABORTED' | 'ERR_API_RESPONSE';

/** The request never got an answer: connection refused/reset, client-side timeout, abort, bad body. */
export class ApiTransportError extends KubeletError {
  declare readonly code: TransportErrorCode;

  constructor(code: TransportErrorCode, what: string, detail: string, opts: { cause?: unknown } = {}) {
    super(code, `${what}: ${detail}`, opts);
  }
}
