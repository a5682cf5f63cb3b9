// Upstream's AtomicWriter (pkg/volume/util/atomic_writer.go): a volume's files are written into
// a fresh timestamped directory `..<ts>`, a `..data_tmp` symlink to it is renamed over `..data`
// (one rename: readers see the old set or the new one, never a mix), each top-level entry is a
// symlink `<name>` → `..data/<name>`, and the previous timestamped directory is removed.

import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readFile, readdir, readlink, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Clock } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';

export const DATA_DIR_NAME = '..data';
const DATA_DIR_TMP_NAME = '..data_tmp';

export interface FileProjection {
  data: Buffer | string;
  mode: number;
}

export class AtomicWriteError extends KubeletError {
  constructor(readonly targetDir: string, message: string, options?: { cause?: unknown }) {
    super('ERR_ATOMIC_WRITE', `${targetDir}: ${message}`, options);
  }
}

/**
 * Checks one payload path as upstream's validatePath does: relative, no `..` element, no
 * element starting with `..` (those names are the writer's own), at most 4096 bytes.
 */
export function validatePayloadPath(p: string): string | undefined {
  if (p === '') return 'invalid path: must not be empty';
  if (Buffer.byteLength(p) > 4096) return `invalid path: must be less than or equal to 4096 characters`;
  if (p.startsWith('/')) return 'invalid path: must be relative path';
  for (const item of p.split('/')) {
    if (item === '..') return "invalid path: must not contain '..'";
  }
  if (p.startsWith('..')) return "invalid path: must not start with '..'";
  return undefined;
}

function timestampDirName(now: number): string {
  // ..2006_01_02_15_04_05.<random>, as upstream's MkdirTemp pattern
  const d = new Date(now);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const ts = `${d.getUTCFullYear()}_${pad(d.getUTCMonth() + 1)}_${pad(d.getUTCDate())}_${pad(d.getUTCHours())}_${pad(d.getUTCMinutes())}_${pad(d.getUTCSeconds())}`;
  return `..${ts}.${randomBytes(5).readUInt32BE(0)}`;
}

async function currentPayload(dataDir: string, paths: readonly string[]): Promise<Map<string, Buffer> | undefined> {
  const out = new Map<string, Buffer>();
  for (const p of paths) {
    try {
      out.set(p, await readFile(posix.join(dataDir, p)));
    } catch {
      return undefined;
    }
  }
  return out;
}

export interface WriteOptions {
  /** Run on the whole target dir once the new files are written, before they are swapped in (upstream's setPerms: fsGroup ownership). */
  setPerms?: (targetDir: string) => Promise<void>;
}

/**
 * Writes `payload` (relative path → content) into `targetDir` atomically. Returns false when
 * the directory already held exactly this payload (nothing written).
 */
export async function writeAtomically(targetDir: string, payload: ReadonlyMap<string, FileProjection>, clock: Clock, opts: WriteOptions = {}): Promise<boolean> {
  for (const p of payload.keys()) {
    const why = validatePayloadPath(p);
    if (why) throw new AtomicWriteError(targetDir, `${why}: ${JSON.stringify(p)}`);
  }
  await mkdir(targetDir, { recursive: true });
  const dataLink = posix.join(targetDir, DATA_DIR_NAME);
  let oldTsName: string | undefined;
  try {
    oldTsName = await readlink(dataLink);
  } catch {
    oldTsName = undefined;
  }
  if (oldTsName !== undefined) {
    const existing = await readdirNames(posix.join(targetDir, oldTsName));
    const current = await currentPayload(posix.join(targetDir, oldTsName), [...payload.keys()]);
    const wanted = [...payload.keys()].map((p) => p.split('/')[0]!);
    const same = current !== undefined
      && existing.length === new Set(wanted).size
      && [...payload].every(([p, f]) => Buffer.from(f.data).equals(current.get(p)!));
    if (same) return false;
  }

  const tsName = timestampDirName(clock.now());
  const tsDir = posix.join(targetDir, tsName);
  await mkdir(tsDir, { mode: 0o755 });
  try {
    for (const [p, f] of payload) {
      const full = posix.join(tsDir, p);
      await mkdir(posix.dirname(full), { recursive: true, mode: 0o755 });
      await writeFile(full, f.data, { mode: f.mode });
      // open(2) masks the mode with the umask; the projection's mode is what the user asked
      await chmod(full, f.mode);
    }
    if (opts.setPerms) await opts.setPerms(targetDir);
    const tmpLink = posix.join(targetDir, DATA_DIR_TMP_NAME);
    await rm(tmpLink, { force: true });
    await symlink(tsName, tmpLink);
    await rename(tmpLink, dataLink);
  } catch (err) {
    await rm(tsDir, { recursive: true, force: true });
    throw new AtomicWriteError(targetDir, `writing the payload failed: ${(err as Error).message}`, { cause: err });
  }

  // user-visible top-level names: symlinks through ..data; stale ones go
  const top = new Set([...payload.keys()].map((p) => p.split('/')[0]!));
  for (const name of top) {
    const link = posix.join(targetDir, name);
    const st = await lstat(link).catch(() => undefined);
    if (st?.isSymbolicLink()) continue;
    if (st) await rm(link, { recursive: true, force: true });
    await symlink(posix.join(DATA_DIR_NAME, name), link);
  }
  for (const name of await readdirNames(targetDir)) {
    if (name.startsWith('..') || top.has(name)) continue;
    const st = await lstat(posix.join(targetDir, name)).catch(() => undefined);
    if (st?.isSymbolicLink()) await unlink(posix.join(targetDir, name)).catch(() => undefined);
  }
  if (oldTsName !== undefined && oldTsName !== tsName && oldTsName.startsWith('..') && !oldTsName.includes('/')) {
    await rm(posix.join(targetDir, oldTsName), { recursive: true, force: true });
  }
  return true;
}

async function readdirNames(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}
