// Kubernetes resource quantities ("100m", "0.5", "128Mi", "1G", "1e3"), as
// k8s.io/apimachinery/pkg/api/resource.Quantity reads and prints them.
//
// Grammar (upstream's):
//   <quantity>        ::= <sign>? <number> <suffix>
//   <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//   <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
//   <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
//   <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
//   <decimalExponent> ::= ("e" | "E") <sign>? <digits>
//
// A quantity is held exactly as a bigint count of nano-units (10^-9), the finest
// precision upstream keeps: finer input is rounded up (away from zero) to 1n as
// upstream does. milliValue() and value() round up (away from zero) like upstream's
// MilliValue() / Value(), so "100m" has value() 1 and "1n" has milliValue() 1.

import { KubeletError } from '../util/errors.js';

export type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

const NANO = 1_000_000_000n;
const MILLI_IN_NANO = 1_000_000n;

/** Upstream's error text for a malformed quantity. */
const FORMAT_HINT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/** Bad quantity input; the message names the input string. */
export class QuantityError extends KubeletError {
  declare readonly code: 'InvalidQuantity';
  readonly input: string;
  constructor(input: string, reason: string) {
    super('InvalidQuantity', `invalid quantity ${JSON.stringify(input)}: ${reason}`);
    this.input = input;
  }
}

const BINARY_SHIFT: ReadonlyMap<string, bigint> = new Map([
  ['Ki', 10n],
  ['Mi', 20n],
  ['Gi', 30n],
  ['Ti', 40n],
  ['Pi', 50n],
  ['Ei', 60n],
]);

const DECIMAL_EXP: ReadonlyMap<string, number> = new Map([
  ['n', -9],
  ['u', -6],
  ['m', -3],
  ['', 0],
  ['k', 3],
  ['M', 6],
  ['G', 9],
  ['T', 12],
  ['P', 15],
  ['E', 18],
]);

const DECIMAL_SUFFIX_BY_EXP: ReadonlyMap<number, string> = new Map(
  [...DECIMAL_EXP.entries()].map(([suffix, exp]) => [exp, suffix]),
);

const BINARY_SUFFIXES = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];

// Bound on the decimal exponent so "1e999999999" cannot allocate a giant bigint.
const MAX_EXPONENT = 100;

/** Integer division rounding away from zero. */
function divAway(n: bigint, d: bigint): bigint {
  const q = n / d;
  if (n % d === 0n) return q;
  return n < 0n ? q - 1n : q + 1n;
}

export class Quantity {
  /** The exact amount in nano-units (value × 10^9). */
  readonly nanos: bigint;
  /** How the quantity was written; drives toString() like upstream's Format. */
  readonly format: QuantityFormat;

  constructor(nanos: bigint, format: QuantityFormat = 'DecimalSI') {
    this.nanos = nanos;
    this.format = format;
  }

  /** A quantity of `value` whole units (e.g. bytes, cores). */
  static fromValue(value: number | bigint, format: QuantityFormat = 'DecimalSI'): Quantity {
    return new Quantity(toBigIntStrict(value, 'fromValue') * NANO, format);
  }

  /** A quantity of `milli` thousandths (e.g. millicores). */
  static fromMilli(milli: number | bigint, format: QuantityFormat = 'DecimalSI'): Quantity {
    return new Quantity(toBigIntStrict(milli, 'fromMilli') * MILLI_IN_NANO, format);
  }

  /** Thousandths, rounded away from zero (upstream MilliValue()). */
  milliValueBig(): bigint {
    return divAway(this.nanos, MILLI_IN_NANO);
  }

  /** Whole units, rounded away from zero (upstream Value()). */
  valueBig(): bigint {
    return divAway(this.nanos, NANO);
  }

  /** milliValueBig() as a number (exact up to 2^53). */
  milliValue(): number {
    return Number(this.milliValueBig());
  }

  /** valueBig() as a number (exact up to 2^53). */
  value(): number {
    return Number(this.valueBig());
  }

  /** The amount as a float, for ratios and display (upstream AsApproximateFloat64()). */
  asApproximateFloat64(): number {
    const whole = this.nanos / NANO;
    const rem = this.nanos % NANO;
    return Number(whole) + Number(rem) / 1e9;
  }

  isZero(): boolean {
    return this.nanos === 0n;
  }

  sign(): -1 | 0 | 1 {
    return this.nanos === 0n ? 0 : this.nanos < 0n ? -1 : 1;
  }

  /** -1, 0 or 1 as this is less than, equal to or greater than `other`. */
  cmp(other: Quantity): -1 | 0 | 1 {
    return this.nanos === other.nanos ? 0 : this.nanos < other.nanos ? -1 : 1;
  }

  add(other: Quantity): Quantity {
    return new Quantity(this.nanos + other.nanos, this.format);
  }

  sub(other: Quantity): Quantity {
    return new Quantity(this.nanos - other.nanos, this.format);
  }

  neg(): Quantity {
    return new Quantity(-this.nanos, this.format);
  }

  equals(other: Quantity): boolean {
    return this.nanos === other.nanos;
  }

  /**
   * Canonical form, as upstream's String(): no fractional digits, the largest suffix
   * that keeps the number whole ("1000" → "1k", "0.5" → "500m", "1536Mi" → "1536Mi",
   * "1024Mi" → "1Gi"). BinarySI values that are fractional or under 1024 print as
   * DecimalSI ("100m", "512").
   */
  toString(): string {
    if (this.nanos === 0n) return '0';
    if (this.format === 'BinarySI' && this.nanos % NANO === 0n) {
      const units = this.nanos / NANO;
      const mag = units < 0n ? -units : units;
      if (mag >= 1024n) {
        let k = 0;
        let m = units;
        while (k < BINARY_SUFFIXES.length - 1 && m % 1024n === 0n) {
          m /= 1024n;
          k++;
        }
        return `${m}${BINARY_SUFFIXES[k]}`;
      }
    }
    // Mantissa × 10^exp with exp a multiple of 3 and as large as possible.
    let mantissa = this.nanos;
    let exp = -9;
    while (mantissa % 10n === 0n) {
      mantissa /= 10n;
      exp++;
    }
    const extra = ((exp % 3) + 3) % 3;
    exp -= extra;
    mantissa *= 10n ** BigInt(extra);
    if (this.format === 'DecimalExponent') {
      return exp === 0 ? `${mantissa}` : `${mantissa}e${exp}`;
    }
    if (exp > 18) {
      mantissa *= 10n ** BigInt(exp - 18);
      exp = 18;
    }
    return `${mantissa}${DECIMAL_SUFFIX_BY_EXP.get(exp)!}`;
  }

  toJSON(): string {
    return this.toString();
  }
}

function toBigIntStrict(v: number | bigint, what: string): bigint {
  if (typeof v === 'bigint') return v;
  if (!Number.isSafeInteger(v)) throw new QuantityError(String(v), `Quantity.${what} takes a safe integer`);
  return BigInt(v);
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

/**
 * Parses a resource quantity. Numbers (as YAML/JSON may carry them) are accepted and
 * read through their decimal string form. Surrounding whitespace is ignored, as
 * upstream's JSON unmarshalling does. Throws QuantityError naming the input.
 */
export function parseQuantity(q: string | number): Quantity {
  let input: string;
  if (typeof q === 'number') {
    if (!Number.isFinite(q)) throw new QuantityError(String(q), 'not a finite number');
    input = String(q);
  } else if (typeof q === 'string') {
    input = q;
  } else {
    throw new QuantityError(String(q), `expected a string or number, got ${typeof q}`);
  }
  const s = input.trim();
  if (s === '') throw new QuantityError(input, FORMAT_HINT);

  let i = 0;
  let negative = false;
  if (s[0] === '+' || s[0] === '-') {
    negative = s[0] === '-';
    i++;
  }
  const intStart = i;
  while (isDigit(s[i])) i++;
  const intDigits = s.slice(intStart, i);
  let fracDigits = '';
  if (s[i] === '.') {
    i++;
    const fracStart = i;
    while (isDigit(s[i])) i++;
    fracDigits = s.slice(fracStart, i);
  }
  if (intDigits === '' && fracDigits === '') throw new QuantityError(input, FORMAT_HINT);

  const suffix = s.slice(i);
  let format: QuantityFormat;
  let exp10 = 0; // decimal exponent
  let shift2 = 0n; // binary exponent
  const binary = BINARY_SHIFT.get(suffix);
  const decimal = DECIMAL_EXP.get(suffix);
  if (binary !== undefined) {
    format = 'BinarySI';
    shift2 = binary;
  } else if (decimal !== undefined) {
    format = 'DecimalSI';
    exp10 = decimal;
  } else if ((suffix[0] === 'e' || suffix[0] === 'E') && /^[eE][+-]?[0-9]+$/.test(suffix)) {
    format = 'DecimalExponent';
    const e = Number(suffix.slice(1));
    if (Math.abs(e) > MAX_EXPONENT) throw new QuantityError(input, `exponent ${suffix.slice(1)} out of range`);
    exp10 = e;
  } else if (/^[eEinumkKMGTP]*[-+]?[0-9]*$/.test(suffix)) {
    throw new QuantityError(input, "unable to parse quantity's suffix");
  } else {
    throw new QuantityError(input, FORMAT_HINT);
  }

  // value = digits × 10^(exp10 - fracLen) × 2^shift2, in nano-units (× 10^9).
  const digits = BigInt((intDigits + fracDigits).replace(/^0+(?=\d)/, '') || '0');
  const numerator = digits << shift2;
  const pow = exp10 - fracDigits.length + 9;
  let nanos: bigint;
  if (pow >= 0) {
    nanos = numerator * 10n ** BigInt(pow);
  } else {
    // Finer than a nano-unit: round up (away from zero), as upstream does.
    const d = 10n ** BigInt(-pow);
    nanos = numerator / d;
    if (numerator % d !== 0n) nanos += 1n;
  }
  return new Quantity(negative ? -nanos : nanos, format);
}

/** True when `q` parses as a quantity. */
export function isQuantity(q: string | number): boolean {
  try {
    parseQuantity(q);
    return true;
  } catch {
    return false;
  }
}
