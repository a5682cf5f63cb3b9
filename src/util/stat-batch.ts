// stat(2) of a whole list of paths at once: the addon runs them all in one threadpool job and
// resolves one Float64Array, so a periodic pass over 1000 files makes one promise and no Stats
// objects. Without the addon, fs.promises.stat fills the same rows (bounded concurrency).
import { constants as osConstants } from 'node:os';
import { stat } from 'node:fs/promises';
import { loadNative, type NativeAddon } from '../native.js';
import { KubeletError } from './errors.js';

/** The row's fields, in order (native/stat_batch.h). */
export const STAT_ROW_FIELDS = ['errno', 'mode', 'size', 'ino', 'dev', 'mtimeSec', 'mtimeNsec', 'ctimeSec', 'ctimeNsec'] as const;
export const STAT_ROW = STAT_ROW_FIELDS.length;
const ERRNO = 0, MODE = 1, SIZE = 2, INO = 3, DEV = 4, MTIME_SEC = 5, MTIME_NSEC = 6, CTIME_SEC = 7, CTIME_NSEC = 8;

/** stats in flight at once by the fallback (each is a threadpool job). */
export const STAT_FALLBACK_CONCURRENCY = 16;

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;

/** errno number → code ('ENOENT'), for messages and checks. */
const errnoCodes = new Map<number, string>();
for (const [code, n] of Object.entries(osConstants.errno)) if (!errnoCodes.has(n)) errnoCodes.set(n, code);
export const ENOENT = osConstants.errno.ENOENT;

/**
 * The result of one batch: accessors by index into one Float64Array (no object per path).
 * A failed stat has errno(i) != 0 and every other field 0.
 */
export class StatBatchResult {
  constructor(
    /** STAT_ROW numbers per path, in the order given. */
    readonly rows: Float64Array,
  ) {}

  get length(): number {
    return this.rows.length / STAT_ROW;
  }

  /** 0 when stat succeeded, else the (positive) errno. */
  errno(i: number): number {
    return this.rows[i * STAT_ROW + ERRNO]!;
  }

  /** The error code ('ENOENT'), or undefined when stat succeeded. */
  code(i: number): string | undefined {
    const e = this.errno(i);
    return e === 0 ? undefined : (errnoCodes.get(e) ?? `errno ${e}`);
  }

  ok(i: number): boolean {
    return this.errno(i) === 0;
  }

  mode(i: number): number {
    return this.rows[i * STAT_ROW + MODE]!;
  }

  isFile(i: number): boolean {
    return this.ok(i) && (this.mode(i) & S_IFMT) === S_IFREG;
  }

  isDirectory(i: number): boolean {
    return this.ok(i) && (this.mode(i) & S_IFMT) === S_IFDIR;
  }

  size(i: number): number {
    return this.rows[i * STAT_ROW + SIZE]!;
  }

  ino(i: number): number {
    return this.rows[i * STAT_ROW + INO]!;
  }

  dev(i: number): number {
    return this.rows[i * STAT_ROW + DEV]!;
  }

  mtimeSec(i: number): number {
    return this.rows[i * STAT_ROW + MTIME_SEC]!;
  }

  mtimeNsec(i: number): number {
    return this.rows[i * STAT_ROW + MTIME_NSEC]!;
  }

  /** mtime in ms with the sub-ms part (about 0.2 µs resolution today). */
  mtimeMs(i: number): number {
    return this.mtimeSec(i) * 1000 + this.mtimeNsec(i) / 1e6;
  }

  ctimeSec(i: number): number {
    return this.rows[i * STAT_ROW + CTIME_SEC]!;
  }

  ctimeNsec(i: number): number {
    return this.rows[i * STAT_ROW + CTIME_NSEC]!;
  }

  ctimeMs(i: number): number {
    return this.ctimeSec(i) * 1000 + this.ctimeNsec(i) / 1e6;
  }
}

type StatBatchAddon = NativeAddon & {
  statBatch?(paths: readonly string[] | Uint8Array): Promise<Float64Array>;
  statBatchFields?(): string[];
};

export type StatBatchBackend = 'native' | 'fallback';

let nativeFn: ((paths: readonly string[]) => Promise<Float64Array>) | null | undefined;
let nativeError: string | undefined;

function native(): ((paths: readonly string[]) => Promise<Float64Array>) | null {
  if (nativeFn !== undefined) return nativeFn;
  const { addon, error } = loadNative();
  const a = addon as StatBatchAddon | undefined;
  if (!a) {
    nativeError = error;
    nativeFn = null;
  } else if (typeof a.statBatch !== 'function' || typeof a.statBatchFields !== 'function') {
    nativeError = 'native addon has no statBatch (stale build?): rebuild it (npm run build:native)';
    nativeFn = null;
  } else if (a.statBatchFields().join() !== STAT_ROW_FIELDS.join()) {
    nativeError = `native statBatch rows (${a.statBatchFields().join()}) differ from the TypeScript ones`;
    nativeFn = null;
  } else {
    const fn = a.statBatch.bind(a);
    nativeFn = (paths) => fn(paths);
  }
  return nativeFn;
}

/** Which backend statBatch uses, and why not the native one. */
export function statBatchBackend(): { backend: StatBatchBackend; error?: string } {
  return native() ? { backend: 'native' } : { backend: 'fallback', ...(nativeError ? { error: nativeError } : {}) };
}

function validate(paths: readonly string[]): void {
  if (!Array.isArray(paths)) throw new TypeError('statBatch: paths must be an array of strings');
  for (let i = 0; i < paths.length; i++) {
    const p = paths[i];
    if (typeof p !== 'string') throw new TypeError(`statBatch: paths[${i}] is not a string`);
    if (p.includes('\0')) throw new TypeError(`statBatch: paths[${i}] contains a NUL byte`);
  }
}

/**
 * stat(2) (following symlinks, as fs.stat) of every path; one row per path in order. Never
 * rejects for a path that cannot be stat'ed (its row carries the errno); throws a TypeError
 * for a non-array, a non-string entry or a path with a NUL byte.
 */
export async function statBatch(paths: readonly string[], options: { backend?: StatBatchBackend } = {}): Promise<StatBatchResult> {
  validate(paths);
  const fn = options.backend === 'fallback' ? null : native();
  if (options.backend === 'native' && !fn) throw new KubeletError('StatBatchNativeUnavailable', `statBatch: native backend unavailable: ${nativeError ?? 'unknown'}`);
  if (paths.length === 0) return new StatBatchResult(new Float64Array(0));
  return new StatBatchResult(fn ? await fn(paths) : await statFallback(paths));
}

const NS_PER_SEC = 1_000_000_000n;

function putTime(rows: Float64Array, at: number, ns: bigint): void {
  let sec = ns / NS_PER_SEC;
  let nsec = ns % NS_PER_SEC;
  // timespec keeps tv_nsec in [0, 1e9) also before 1970
  if (nsec < 0n) {
    sec -= 1n;
    nsec += NS_PER_SEC;
  }
  rows[at] = Number(sec);
  rows[at + 1] = Number(nsec);
}

/** The same rows from fs.promises.stat, at most STAT_FALLBACK_CONCURRENCY at a time. */
async function statFallback(paths: readonly string[]): Promise<Float64Array> {
  const rows = new Float64Array(paths.length * STAT_ROW);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < paths.length) {
      const i = next++;
      const at = i * STAT_ROW;
      try {
        const st = await stat(paths[i]!, { bigint: true });
        rows[at + MODE] = Number(st.mode);
        rows[at + SIZE] = Number(st.size);
        rows[at + INO] = Number(st.ino);
        rows[at + DEV] = Number(st.dev);
        putTime(rows, at + MTIME_SEC, st.mtimeNs);
        putTime(rows, at + CTIME_SEC, st.ctimeNs);
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        const n = typeof e.errno === 'number' ? Math.abs(e.errno) : e.code ? (osConstants.errno as Record<string, number>)[e.code] : undefined;
        if (n === undefined) throw err;
        rows[at + ERRNO] = n;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(STAT_FALLBACK_CONCURRENCY, paths.length) }, worker));
  return rows;
}
