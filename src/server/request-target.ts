// The request target of an HTTP request, read as Go's net/http and ServeMux read it (upstream's
// servers are Go's): origin-form or absolute-form, strict percent-decoding of the path (a bad
// escape is a 400), and the path cleaned as ServeMux cleans it (an unclean path is redirected).
// Nothing here throws: every input ends as a target, a rejection, or a redirect.

export type RequestTarget =
  /** A path to route on (decoded, clean) and its raw query. */
  | { kind: 'path'; path: string; rawQuery: string }
  /** `OPTIONS *`: answered by the server itself (Go: 200, empty body). */
  | { kind: 'options-asterisk' }
  /** The path is not clean (`//`, `.`, `..`): redirect to `location` (escaped, query kept). */
  | { kind: 'redirect'; location: string }
  | { kind: 'bad'; reason: string };

// scheme "://" authority, then the rest (absolute-form, RFC 9112 section 3.2.2).
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?]*/;

export function parseRequestTarget(method: string, raw: string): RequestTarget {
  if (raw === '*') {
    // Go answers OPTIONS * itself; any other method with * is a 400 from ServeMux.
    return method === 'OPTIONS' ? { kind: 'options-asterisk' } : { kind: 'bad', reason: `asterisk-form target with ${method}` };
  }
  let rest = raw;
  if (!rest.startsWith('/')) {
    const m = ABSOLUTE_FORM.exec(rest);
    if (!m) return { kind: 'bad', reason: 'request target is neither origin-form nor absolute-form' };
    rest = rest.slice(m[0].length);
  }
  const q = rest.indexOf('?');
  const rawPath = q < 0 ? rest : rest.slice(0, q);
  const rawQuery = q < 0 ? '' : rest.slice(q + 1);
  const decoded = decodePath(rawPath);
  if (decoded === undefined) return { kind: 'bad', reason: 'invalid URL escape in path' };
  const path = cleanPath(decoded);
  if (path !== decoded) return { kind: 'redirect', location: escapePath(path) + (q < 0 ? '' : `?${rawQuery}`) };
  return { kind: 'path', path, rawQuery };
}

/** Percent-decodes a path; undefined when a `%` is not followed by two hex digits (Go: 400). */
export function decodePath(raw: string): string | undefined {
  if (!raw.includes('%')) return raw;
  const bytes: number[] = [];
  const src = Buffer.from(raw, 'utf8');
  for (let i = 0; i < src.length; i++) {
    const b = src[i]!;
    if (b !== 0x25) { bytes.push(b); continue; }
    const hi = hexValue(src[i + 1]);
    const lo = hexValue(src[i + 2]);
    if (hi < 0 || lo < 0) return undefined;
    bytes.push(hi * 16 + lo);
    i += 2;
  }
  // Invalid UTF-8 becomes U+FFFD: no route has such a name, so it is a 404, never an exception.
  return Buffer.from(bytes).toString('utf8');
}

function hexValue(b: number | undefined): number {
  if (b === undefined) return -1;
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x41 && b <= 0x46) return b - 0x41 + 10;
  if (b >= 0x61 && b <= 0x66) return b - 0x61 + 10;
  return -1;
}

/**
 * ServeMux's cleanPath: one leading slash, no empty, `.` or `..` segments (`..` never climbs
 * above the root), and a trailing slash kept when the request had one.
 */
export function cleanPath(p: string): string {
  if (p === '') return '/';
  const out: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  let clean = '/' + out.join('/');
  if (p.endsWith('/') && clean !== '/') clean += '/';
  return clean;
}

// What may stay unescaped in a path (RFC 3986 pchar and '/'); everything else is %XX of its UTF-8.
const PATH_SAFE = /[A-Za-z0-9\-._~!$&'()*+,;=:@/]/;

/** A decoded path escaped again for a Location header: no control bytes, spaces or non-ASCII. */
export function escapePath(p: string): string {
  let out = '';
  for (const ch of p) {
    if (PATH_SAFE.test(ch)) out += ch;
    else for (const b of Buffer.from(ch, 'utf8')) out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
