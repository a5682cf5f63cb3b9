// Go time.Duration strings ("20s", "1h30m", "500ms", "1.5h") as used by metav1.Duration in
// the KubeletConfiguration and by duration flags.
//
// Parsing follows Go's time.ParseDuration: an optional sign, then one or more
// <decimal number><unit> pairs; units ns, us, µs, μs, ms, s, m, h; the bare string "0"
// is the only unit-less value accepted. Computation is exact in bigint nanoseconds;
// fractional nanoseconds are truncated as Go does, and values beyond int64 nanoseconds
// (~292 years) are rejected as Go does.
//
// Milliseconds: kubelet-ts keeps durations as integer milliseconds. A sub-millisecond
// remainder rounds the magnitude UP (away from zero): "1ns" → 1, "1500us" → 2,
// "-1ns" → -1. So a non-zero duration never becomes 0 ms (which the config treats as
// "unset → default") and never loses its sign.

import { KubeletError } from '../util/errors.js';

const NS_PER_MS = 1_000_000n;
const MAX_NS = (1n << 63n) - 1n; // Go's time.Duration is an int64 of nanoseconds
const MIN_NS = -(1n << 63n);

const UNIT_NS: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['\u00b5s', 1_000n], // U+00B5 micro sign
  ['\u03bcs', 1_000n], // U+03BC Greek small letter mu
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);

/** Bad duration input; the message is Go's (`time: unknown unit "x" in duration "1x"`). */
export class DurationError extends KubeletError {
  declare readonly code: 'InvalidDuration';
  readonly input: string;
  constructor(input: string, message: string) {
    super('InvalidDuration', message);
    this.input = input;
  }
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}

/** Parses a Go duration string into exact nanoseconds. Throws DurationError. */
export function parseDurationNs(input: string): bigint {
  const quoted = JSON.stringify(input);
  const invalid = (): DurationError => new DurationError(input, `time: invalid duration ${quoted}`);
  let s = input;
  let negative = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    negative = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw invalid();

  let total = 0n;
  let i = 0;
  while (i < s.length) {
    // The number: digits, optionally '.' and more digits; at least one digit overall.
    if (!(s[i] === '.' || isDigit(s[i]!))) throw invalid();
    const intStart = i;
    while (i < s.length && isDigit(s[i]!)) i++;
    const intDigits = s.slice(intStart, i);
    let fracDigits = '';
    if (i < s.length && s[i] === '.') {
      i++;
      const fracStart = i;
      while (i < s.length && isDigit(s[i]!)) i++;
      fracDigits = s.slice(fracStart, i);
    }
    if (intDigits === '' && fracDigits === '') throw invalid();

    // The unit: everything up to the next '.' or digit.
    const unitStart = i;
    while (i < s.length && s[i] !== '.' && !isDigit(s[i]!)) i++;
    const unit = s.slice(unitStart, i);
    if (unit === '') throw new DurationError(input, `time: missing unit in duration ${quoted}`);
    const unitNs = UNIT_NS.get(unit);
    if (unitNs === undefined) {
      throw new DurationError(input, `time: unknown unit ${JSON.stringify(unit)} in duration ${quoted}`);
    }

    // Go rejects an integer part beyond int64 and ignores fraction digits past int64's precision.
    const intSignificant = intDigits.replace(/^0+/, '');
    if (intSignificant.length > 19) throw invalid();
    let part = (intSignificant === '' ? 0n : BigInt(intSignificant)) * unitNs;
    const frac = fracDigits.slice(0, 18);
    if (frac !== '') {
      // Go truncates the fractional nanoseconds.
      part += (BigInt(frac) * unitNs) / 10n ** BigInt(frac.length);
    }
    total += part;
    if (total > MAX_NS + (negative ? 1n : 0n)) throw invalid();
  }
  return negative ? -total : total;
}

/** Converts nanoseconds to integer milliseconds, rounding a remainder away from zero. */
export function nsToMs(ns: bigint): number {
  const neg = ns < 0n;
  const mag = neg ? -ns : ns;
  let ms = mag / NS_PER_MS;
  if (mag % NS_PER_MS !== 0n) ms += 1n;
  return Number(neg ? -ms : ms);
}

/**
 * Parses a Go duration string into integer milliseconds (sub-millisecond remainders
 * round away from zero, see the file comment). Throws DurationError on bad input.
 */
export function parseDuration(input: string): number {
  return nsToMs(parseDurationNs(input));
}

/** Formats nanoseconds as Go's Duration.String() does ("1h2m3.5s", "500ms", "0s"). */
export function formatDurationNs(ns: bigint): string {
  if (ns === 0n) return '0s';
  if (ns < MIN_NS || ns > MAX_NS) throw new DurationError(`${ns}ns`, `time: duration ${ns}ns out of range`);
  const neg = ns < 0n;
  const mag = neg ? -ns : ns;
  const sign = neg ? '-' : '';
  const frac = (v: bigint, unit: bigint): string => {
    // v / unit with the fraction's trailing zeros dropped.
    const whole = v / unit;
    const rem = v % unit;
    if (rem === 0n) return whole.toString();
    const width = unit.toString().length - 1;
    return `${whole}.${rem.toString().padStart(width, '0').replace(/0+$/, '')}`;
  };
  if (mag < 1_000_000_000n) {
    if (mag < 1_000n) return `${sign}${mag}ns`;
    if (mag < 1_000_000n) return `${sign}${frac(mag, 1_000n)}\u00b5s`;
    return `${sign}${frac(mag, 1_000_000n)}ms`;
  }
  const h = mag / 3_600_000_000_000n;
  const m = (mag / 60_000_000_000n) % 60n;
  const secNs = mag % 60_000_000_000n;
  let out = sign;
  if (h > 0n) out += `${h}h`;
  if (h > 0n || m > 0n) out += `${m}m`;
  out += `${frac(secNs, 1_000_000_000n)}s`;
  return out;
}

/** Formats integer milliseconds as a Go duration string ("2m0s", "500ms"). */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new DurationError(`${ms}ms`, `time: duration ${ms}ms is not finite`);
  return formatDurationNs(BigInt(Math.round(ms)) * NS_PER_MS);
}
