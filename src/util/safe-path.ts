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
  const base = posix.resolve(root);
  for (const c of components) assertPathComponent(base, c);
  const out = posix.resolve(base, ...components);
  const prefix = base.endsWith('/') ? base : `${base}/`;
  if (components.length > 0 && !out.startsWith(prefix)) throw new PathEscapeError(base, components.join('/'), 'resolves outside the root');
  return out;
}

/** `<rootDir>/pods/<uid>` (upstream getPodDir). */
export function podDir(rootDir: string, podUID: string): string {
  return confinedJoin(rootDir, 'pods', podUID);
}
