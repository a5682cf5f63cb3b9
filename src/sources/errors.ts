// Errors of the static pod sources (manifest directory and manifest URL).
import type { FieldError } from '../api/validation.js';
import { KubeletError } from '../util/errors.js';

export type ManifestSourceKind = 'file' | 'http';

/**
 * A manifest that could not become a pod: unreadable, too large, not YAML/JSON, not a v1 Pod,
 * a field of the wrong type, or invalid. The message always starts with the file path or URL
 * so an operator can find the culprit, and names the offending field when there is one.
 */
export class ManifestError extends KubeletError {
  declare readonly code: 'ManifestInvalid';
  readonly source: ManifestSourceKind;
  /** The manifest file path or the manifest URL. */
  readonly location: string;
  /** The first offending field (e.g. `spec.containers[0].image`), when one is known. */
  readonly field?: string;
  /** Every field error, when the manifest decoded but failed type checking or validation. */
  readonly fieldErrors?: FieldError[];

  constructor(
    source: ManifestSourceKind,
    location: string,
    detail: string,
    opts: { field?: string; fieldErrors?: FieldError[]; cause?: unknown } = {},
  ) {
    super('ManifestInvalid', `${location}: ${detail}`, { cause: opts.cause });
    this.source = source;
    this.location = location;
    if (opts.field !== undefined) this.field = opts.field;
    if (opts.fieldErrors !== undefined) this.fieldErrors = opts.fieldErrors;
  }
}

/**
 * A pod the API server sent that the kubelet cannot use (a field of the wrong type, a missing
 * UID, an invalid name): reported by namespace/name and skipped; the source's other pods stay.
 */
export class ApiPodError extends KubeletError {
  declare readonly code: 'ApiPodInvalid';
  readonly source = 'api' as const;
  /** `pod <namespace>/<name>`, what the kubelet reports it as. */
  readonly location: string;
  readonly field?: string;
  readonly fieldErrors?: FieldError[];

  constructor(namespace: string, name: string, detail: string, opts: { fieldErrors?: FieldError[] } = {}) {
    const location = `pod ${namespace}/${name}`;
    super('ApiPodInvalid', `${location} from the API server: ${detail}`);
    this.location = location;
    if (opts.fieldErrors?.length) {
      this.fieldErrors = opts.fieldErrors;
      this.field = opts.fieldErrors[0]!.field;
    }
  }
}

/** What a pod source reports: a manifest that is no pod, or an API pod that cannot run. */
export type PodSourceError = ManifestError | ApiPodError;
