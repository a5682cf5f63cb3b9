// Deep equality of JSON-shaped values, shared by the status manager (every pod sync compares its
// new status with the last) and the config's not-implemented check.
import { isDeepStrictEqual } from 'node:util';

/**
 * Deep equality of JSON-shaped values (plain objects, arrays, primitives) as isDeepStrictEqual
 * judges them there (a key holding undefined differs from a missing key), without its per-call
 * key arrays and sets.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const pa = Object.getPrototypeOf(a);
  if (pa !== Object.getPrototypeOf(b) || (pa !== Object.prototype && pa !== null)) return isDeepStrictEqual(a, b);
  const oa = a as Record<string, unknown>;
  const ob = b as Record<string, unknown>;
  let n = 0;
  for (const k in oa) {
    if (!Object.prototype.hasOwnProperty.call(oa, k)) continue;
    if (!Object.prototype.hasOwnProperty.call(ob, k) || !jsonEqual(oa[k], ob[k])) return false;
    n++;
  }
  for (const k in ob) if (Object.prototype.hasOwnProperty.call(ob, k)) n--;
  return n === 0;
}
