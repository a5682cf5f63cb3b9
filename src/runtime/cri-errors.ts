// Errors from CRI calls. Each carries a stable code (`CRI_<GRPC_STATUS>`, e.g. CRI_NOT_FOUND,
// CRI_UNAVAILABLE) so callers branch on the code, never on the runtime's message text.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { KubeletError } from '../util/errors.js';

/** Set when the runtime answered but the answer broke the CRI contract (upstream verifies these too). */
export const CRI_INVALID_RESPONSE = 'CRI_INVALID_RESPONSE';
/** Set when the .proto could not be found or parsed: a packaging fault, not a runtime fault. */
export const CRI_PROTO_LOAD = 'CRI_PROTO_LOAD';

/** grpcCode used for errors that did not come from a gRPC status. */
export const NO_GRPC_CODE = -1;

/** `code` is `CRI_<GRPC_STATUS_NAME>` or one of the CRI_* constants above. */
export class CriError extends KubeletError {
  /** The gRPC status code, or NO_GRPC_CODE (-1). */
  readonly grpcCode: number;
  /** The CRI method, e.g. 'ContainerStatus'. */
  readonly method: string;
  /** The runtime's own message (gRPC status details). */
  readonly details: string;

  constructor(method: string, grpcCode: number, details: string, code?: string, options?: { cause?: unknown }) {
    const statusName = grpcStatusName(grpcCode);
    super(code ?? `CRI_${statusName}`, `CRI ${method} failed: ${code ?? statusName}: ${details}`, options);
    this.method = method;
    this.grpcCode = grpcCode;
    this.details = details;
  }

  /** The runtime cannot be reached (socket missing, connection refused, runtime restarting). */
  get unavailable(): boolean {
    return this.grpcCode === GrpcStatus.UNAVAILABLE;
  }

  get notFound(): boolean {
    return this.grpcCode === GrpcStatus.NOT_FOUND;
  }

  get deadlineExceeded(): boolean {
    return this.grpcCode === GrpcStatus.DEADLINE_EXCEEDED;
  }
}

export function grpcStatusName(code: number): string {
  const name = (GrpcStatus as unknown as Record<number, string | undefined>)[code];
  return typeof name === 'string' ? name : code === NO_GRPC_CODE ? 'ERROR' : `STATUS_${code}`;
}

/** True when err says the runtime could not be reached, so the caller reports the runtime as down. */
export function isUnavailable(err: unknown): boolean {
  return err instanceof CriError && err.unavailable;
}

/** True when err is the runtime's NotFound (the container, sandbox or image is gone). */
export function isNotFound(err: unknown): boolean {
  return err instanceof CriError && err.notFound;
}

export function isDeadlineExceeded(err: unknown): boolean {
  return err instanceof CriError && err.deadlineExceeded;
}

/** Turns a grpc-js ServiceError (or anything thrown) from `method` into a CriError. */
export function toCriError(method: string, err: unknown): CriError {
  if (err instanceof CriError) return err;
  const e = err as { code?: unknown; details?: unknown; message?: unknown } | null;
  const grpcCode = typeof e?.code === 'number' ? e.code : GrpcStatus.UNKNOWN;
  const details =
    typeof e?.details === 'string' && e.details !== ''
      ? e.details
      : typeof e?.message === 'string'
        ? e.message
        : String(err);
  return new CriError(method, grpcCode, details, undefined, { cause: err });
}
