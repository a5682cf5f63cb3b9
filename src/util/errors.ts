// One error family for kubelet-ts (as undici's and fastify's): every error the agent raises
// derives from KubeletError and carries a stable `code` that callers and users can grep,
// the underlying `cause` when there is one, and names the thing it is about in its message.

export interface KubeletErrorOptions {
  cause?: unknown;
}

export class KubeletError extends Error {
  /** Stable, documented identifier of this kind of error (e.g. `ERR_PATH_ESCAPE`, `ErrImagePull`). */
  readonly code: string;

  constructor(code: string, message: string, options?: KubeletErrorOptions) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.code = code;
    this.name = new.target.name;
  }
}

/** True for any error of the family, optionally of one code. */
export function isKubeletError(err: unknown, code?: string): err is KubeletError {
  return err instanceof KubeletError && (code === undefined || err.code === code);
}

/** The message of anything thrown, for log lines. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
