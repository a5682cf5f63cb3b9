// /containerLogs query parameters, decoded as upstream decodes v1.PodLogOptions (a value that does
// not decode is a 400) and validated as upstream's ValidatePodLogOptions (a 422). Both name the
// parameter.
import { LogOptionsError } from './errors.js';

export interface ContainerLogOptions {
  follow: boolean;
  previous: boolean;
  timestamps: boolean;
  /** Undefined: every line. */
  tailLines?: number;
  /** Undefined: no limit. */
  limitBytes?: number;
  sinceSeconds?: number;
  /** ms since the epoch (from sinceTime). */
  sinceTime?: number;
}

const INT = /^[+-]?\d+$/;

// apimachinery's query conversion: "0" and "false" (any case) are false, any other value true.
function decodeBool(v: string): boolean {
  return !(v === '0' || v.toLowerCase() === 'false');
}

function decodeInt(name: string, v: string): number {
  if (!INT.test(v)) throw new LogOptionsError(name, 400, `cannot decode ${JSON.stringify(v)} as an integer`);
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new LogOptionsError(name, 400, `${v} is out of range`);
  return n;
}

// metav1.Time decodes RFC3339 (with an optional fraction), as time.Parse(time.RFC3339, ...).
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

function decodeTime(name: string, v: string): number {
  const ms = RFC3339.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(ms)) throw new LogOptionsError(name, 400, `cannot decode ${JSON.stringify(v)} as an RFC3339 time`);
  return ms;
}

/** The options of a /containerLogs request; `now` turns sinceSeconds into a time. */
export function parseContainerLogOptions(query: URLSearchParams): ContainerLogOptions {
  const first = (k: string): string | undefined => query.get(k) ?? undefined;
  const opts: ContainerLogOptions = { follow: false, previous: false, timestamps: false };
  for (const k of ['follow', 'previous', 'timestamps'] as const) {
    const v = first(k);
    if (v !== undefined) opts[k] = decodeBool(v);
  }
  // the legacy `tail` parameter stands for tailLines; "all" means no tail
  let tail = first('tailLines');
  const legacy = first('tail');
  let tailName = 'tailLines';
  if (legacy !== undefined && legacy !== '') {
    tail = legacy === 'all' ? undefined : legacy;
    tailName = 'tail';
  }
  if (tail !== undefined) opts.tailLines = decodeInt(tailName, tail);
  const limit = first('limitBytes');
  if (limit !== undefined) opts.limitBytes = decodeInt('limitBytes', limit);
  const since = first('sinceSeconds');
  if (since !== undefined) opts.sinceSeconds = decodeInt('sinceSeconds', since);
  const sinceTime = first('sinceTime');
  if (sinceTime !== undefined) opts.sinceTime = decodeTime('sinceTime', sinceTime);

  if (opts.tailLines !== undefined && opts.tailLines < 0) throw new LogOptionsError(tailName, 422, 'must be greater than or equal to 0');
  if (opts.limitBytes !== undefined && opts.limitBytes < 1) throw new LogOptionsError('limitBytes', 422, 'must be greater than 0');
  if (opts.sinceSeconds !== undefined && opts.sinceTime !== undefined) {
    throw new LogOptionsError('sinceSeconds', 422, 'at most one of `sinceTime` or `sinceSeconds` may be specified');
  }
  if (opts.sinceSeconds !== undefined && opts.sinceSeconds < 1) throw new LogOptionsError('sinceSeconds', 422, 'must be greater than 0');
  return opts;
}

/** The earliest time a line may carry to be shown (ms), or undefined for no bound. */
export function sinceBound(opts: ContainerLogOptions, now: number): number | undefined {
  if (opts.sinceTime !== undefined) return opts.sinceTime;
  if (opts.sinceSeconds !== undefined) return now - opts.sinceSeconds * 1000;
  return undefined;
}
