// Errors raised while loading the kubelet configuration (file + flags).

import { KubeletError } from '../util/errors.js';

/** One problem found in the configuration: the field path and what is wrong with it. */
export interface ConfigIssue {
  /** Field path as written in the config (`maxPods`, `authentication.webhook.cacheTTL`,
   *  `evictionHard[memory.available]`), or a flag name (`--max-pods`), or '' for the whole file. */
  field: string;
  /** What is wrong, e.g. `expected an integer, got "lots"`. */
  detail: string;
}

/**
 * An invalid kubelet configuration. `code` is stable so callers and users can grep for it;
 * `field` names the first offending field (or flag), `issues` holds all of them when
 * validation found several (upstream aggregates validation errors the same way).
 */
export class ConfigError extends KubeletError {
  declare readonly code: 'KubeletConfigInvalid';
  readonly field: string;
  readonly detail: string;
  readonly file?: string;
  readonly issues: ConfigIssue[];

  constructor(field: string, detail: string, file?: string, issues?: ConfigIssue[], options?: { cause?: unknown }) {
    const all = issues && issues.length > 0 ? issues : [{ field, detail }];
    super('KubeletConfigInvalid', formatConfigMessage(all, file), options);
    this.field = field;
    this.detail = detail;
    this.file = file;
    this.issues = all;
  }

  /** A copy of this error attributed to `file` (used once the source is known). */
  withFile(file: string | undefined): ConfigError {
    if (file === undefined || this.file !== undefined) return this;
    return new ConfigError(this.field, this.detail, file, this.issues, { cause: this.cause });
  }
}

function describeIssue(issue: ConfigIssue): string {
  if (issue.field === '') return issue.detail;
  if (issue.field.startsWith('-')) return `flag ${issue.field}: ${issue.detail}`;
  return `field ${issue.field}: ${issue.detail}`;
}

function formatConfigMessage(issues: ConfigIssue[], file: string | undefined): string {
  const prefix = file !== undefined ? `kubelet config ${file}` : 'kubelet config';
  return `${prefix}: ${issues.map(describeIssue).join('; ')}`;
}

/** Renders a bad value for an error message: strings quoted, everything else as JSON. */
export function showValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'bigint') return value.toString();
  // JSON would print Infinity and NaN as null.
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  let s: string | undefined;
  try {
    s = JSON.stringify(value);
  } catch {
    // Too deep to print (or cyclic): say what it is rather than recurse again.
    s = undefined;
  }
  if (s === undefined) s = Array.isArray(value) ? '[...]' : typeof value === 'object' ? '{...}' : typeof value;
  return s.length > 120 ? `${s.slice(0, 117)}...` : s;
}
