// The type check a Go API server does for free when it decodes JSON into its structs: a bool
// field takes only true/false, an int32 field only an integer in range, a string field only a
// string, a list only a list. Run on a decoded manifest before defaulting, so a wrong type is
// refused naming its field instead of being read as "unset" (`runAsNonRoot: "true"` must not
// switch the non-root check off). Fields the schema does not know pass through untouched.

import type { FieldError } from './validation.js';

export type Scalar = 'string' | 'boolean' | 'int32' | 'int64' | 'quantity' | 'intOrString' | 'object' | 'any';

/** A field's type: a scalar, a scalar with a range, a struct, a list or a string-keyed map. */
export type FieldType =
  | Scalar
  | { int: 'int32' | 'int64'; min?: number; max?: number }
  | { struct: Fields }
  | { list: FieldType }
  | { map: FieldType };

export interface Fields {
  [field: string]: FieldType;
}

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/** Errors past this many are dropped: one bad manifest must not build a megabyte message. */
export const MaxTypeErrors = 20;

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'object') return 'object';
  if (typeof v === 'string') {
    const s = v.length > 64 ? `${v.slice(0, 64)}...` : v;
    return `string ${JSON.stringify(s)}`;
  }
  if (typeof v === 'number') return `number ${String(v)}`;
  return `${typeof v} ${String(v)}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function has(o: Record<string, unknown>, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

class Checker {
  readonly errors: FieldError[] = [];
  private dropped = 0;

  fail(field: string, message: string): void {
    if (this.errors.length < MaxTypeErrors) this.errors.push({ field, message });
    else this.dropped++;
  }

  finish(): FieldError[] {
    if (this.dropped > 0) this.errors.push({ field: '', message: `and ${this.dropped} more type errors` });
    return this.errors;
  }

  /** Checks `v` against `t` at `path`. */
  check(path: string, v: unknown, t: FieldType): void {
    if (typeof t === 'string') return this.scalar(path, v, t);
    if ('int' in t) return this.int(path, v, t.int, t.min, t.max);
    if ('struct' in t) return this.struct(path, v, t.struct);
    if ('list' in t) {
      if (!Array.isArray(v)) return this.fail(path, `expected list, got ${describe(v)}`);
      v.forEach((x, i) => this.check(`${path}[${i}]`, x, t.list));
      return;
    }
    if (!isPlainObject(v)) return this.fail(path, `expected map, got ${describe(v)}`);
    for (const k of Object.keys(v)) this.check(`${path}[${k}]`, v[k], t.map);
  }

  private struct(path: string, v: unknown, fields: Fields): void {
    if (!isPlainObject(v)) return this.fail(path, `expected object, got ${describe(v)}`);
    for (const [k, ft] of Object.entries(fields)) {
      if (!has(v, k)) continue;
      const x = v[k];
      // JSON null on a Go field leaves it at its zero value: the same as leaving it out
      if (x === null) {
        delete v[k];
        continue;
      }
      this.check(path ? `${path}.${k}` : k, x, ft);
    }
  }

  private scalar(path: string, v: unknown, t: Scalar): void {
    switch (t) {
      case 'any':
        return;
      case 'object':
        if (!isPlainObject(v)) this.fail(path, `expected object, got ${describe(v)}`);
        return;
      case 'string':
      case 'boolean':
        if (typeof v !== t) this.fail(path, `expected ${t}, got ${describe(v)}`);
        return;
      case 'int32':
      case 'int64':
        return this.int(path, v, t);
      case 'quantity':
        // a quantity is written as a string or a number; its grammar is validation's job
        if (typeof v === 'string') return;
        if (typeof v !== 'number' || !Number.isFinite(v)) this.fail(path, `expected quantity (string or number), got ${describe(v)}`);
        return;
      case 'intOrString':
        if (typeof v === 'string') return;
        return this.int(path, v, 'int32', undefined, undefined, 'int32 or string');
    }
  }

  private int(path: string, v: unknown, kind: 'int32' | 'int64', min?: number, max?: number, what: string = kind): void {
    if (typeof v !== 'number' || !Number.isInteger(v)) return this.fail(path, `expected ${what}, got ${describe(v)}`);
    // int64 beyond 2^53 cannot be held exactly here: refuse it rather than round it
    const lo = kind === 'int32' ? INT32_MIN : -Number.MAX_SAFE_INTEGER;
    const hi = kind === 'int32' ? INT32_MAX : Number.MAX_SAFE_INTEGER;
    if (v < lo || v > hi) return this.fail(path, `expected ${what}, got ${describe(v)}: out of range [${lo}, ${hi}]`);
    if (min !== undefined && v < min) return this.fail(path, `Invalid value: ${v}: must be greater than or equal to ${min}`);
    if (max !== undefined && v > max) this.fail(path, `Invalid value: ${v}: must be less than or equal to ${max}`);
  }
}

/**
 * Type-checks `value` against a struct schema; an empty result means every known field has
 * its API type. Null-valued known fields are removed (Go reads them as unset).
 */
export function checkTypes(value: unknown, fields: Fields, path = ''): FieldError[] {
  const c = new Checker();
  c.check(path, value, { struct: fields });
  return c.finish();
}
