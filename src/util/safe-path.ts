// Paths built from identifiers that come from outside (manifests, the URL source, the API,
// runtime labels) are confined under their root: every component must be one plain name
// (no separator, not `.` or `..`, no NUL), and the resolved result must stay inside the root.
// Callers build such paths only through these functions before any mkdir, write or rm.

import { isAbsolute, posix } from 'node:path';
import { KubeletError } from './errors.js';

export class PathEscapeError extends KubeletError {
  constructor(readonly root: string, readonly component: string, why: string) {
    super('ERR_PATH_ESCAPE', `refusing path component ${JSON.stringify(component)} under ${root}: ${why}`);
  }
}

/** Throws unless `c` is a single, plain path component. */
export function assertPathComponent(root: string, c: string): void {
  if (typeof c !== 'string' || c.length === 0) throw new PathEscapeError(root, String(c), 'empty');
  if (c === '.' || c === '..') throw new PathEscapeError(root, c, 'is a relative reference');
  if (c.includes('/')) throw new PathEscapeError(root, c, 'contains "/"');
  if (c.includes('\0')) throw new PathEscapeError(root, c, 'contains NUL');
  // NAME_MAX counts bytes: a 100-character name in a 3-byte script is 300 bytes
  if (Buffer.byteLength(c) > 255) throw new PathEscapeError(root, c, 'longer than 255 bytes');
}

/**
 * `root/c1/c2/...` with every component checked and the result verified to lie strictly
 * inside `root` (lexically; callers that follow links check with realpath as well).
 */
export function confinedJoin(root: string, ...components: string[]): string {
  if (!root || !isAbsolute(root)) throw new PathEscapeError(String(root), '', 'root is not an absolute path');
  // a root already in normal form (the usual case: every per-pod path, every sync) skips resolve()
  const base = isNormalAbsolute(root) ? root : posix.resolve(root);
  for (const c of components) assertPathComponent(base, c);
  if (components.length === 0) return base;
  // plain components (checked above) under a normal root: joining is all resolve() would do
  const prefix = base === '/' ? base : `${base}/`;
  const out = prefix + (components.length === 1 ? components[0]! : components.join('/'));
  if (!out.startsWith(prefix)) throw new PathEscapeError(base, components.join('/'), 'resolves outside the root');
  return out;
}

/** An absolute path posix.resolve() leaves as it is: no empty, `.` or `..` segment, no trailing slash. */
function isNormalAbsolute(p: string): boolean {
  if (p === '/') return true;
  if (p.charCodeAt(0) !== 47 || p.charCodeAt(p.length - 1) === 47) return false;
  return !p.includes('//') && !p.includes('/./') && !p.includes('/../') && !p.endsWith('/.') && !p.endsWith('/..');
}

/** `<rootDir>/pods/<uid>` (upstream getPodDir). */
export function podDir(rootDir: string, podUID: string): string {
  return confinedJoin(rootDir, 'pods', podUID);
}
