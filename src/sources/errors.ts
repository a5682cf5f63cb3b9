// Errors of the static pod sources (manifest directory and manifest URL).
import type { FieldError } from '../api/validation.js';

export type ManifestSourceKind = 'file' | 'http';

/**
 * A manifest that could not become a pod: unreadable, not YAML/JSON, not a v1 Pod, or invalid.
 * The message always starts with the file path or URL so an operator can find the culprit.
 */
export class ManifestError extends Error {
  readonly code = 'ManifestInvalid';
  readonly source: ManifestSourceKind;
  /** The manifest file path or the manifest URL. */
  readonly location: string;
  /** The first offending field (e.g. `spec.containers[0].image`), when one is known. */
  readonly field?: string;
  /** Every validation error, when the manifest decoded but failed validation. */
  readonly fieldErrors?: FieldError[];

  constructor(
    source: ManifestSourceKind,
    location: string,
    detail: string,
    opts: { field?: string; fieldErrors?: FieldError[]; cause?: unknown } = {},
  ) {
    super(`${location}: ${detail}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'ManifestError';
    this.source = source;
    this.location = location;
    if (opts.field !== undefined) this.field = opts.field;
    if (opts.fieldErrors !== undefined) this.fieldErrors = opts.fieldErrors;
  }
}
