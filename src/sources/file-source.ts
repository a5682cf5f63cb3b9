// The static pod directory source (upstream pkg/kubelet/config/file.go + file_linux.go):
// inotify (fs.watch) for prompt changes plus a full re-check every fileCheckFrequency, each
// delivering the whole set of pods found (SET semantics).
import { watch, type FSWatcher, type Stats } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { Pod } from '../api/types.js';
import { realClock, type Clock, type Timer } from '../util/clock.js';
import { errorMessage, KubeletError } from '../util/errors.js';
import { ENOENT, statBatch, type StatBatchResult } from '../util/stat-batch.js';
import { ManifestError } from './errors.js';
import { decodePodManifest, MaxManifestBytes } from './manifest.js';
import { FileSource as FILE_SOURCE } from './static-pod.js';

/** One pod of a source's set, with where it came from (file path or URL). */
export interface SourceEntry {
  pod: Pod;
  location: string;
}

export interface FileSourceOptions {
  /** The static pod directory, or a single manifest file. */
  path: string;
  nodeName: string;
  /** The full re-check period (fileCheckFrequency). */
  checkPeriodMs: number;
  /** Receives the full set of pods, ordered by file name. */
  onSet: (entries: SourceEntry[]) => void;
  onError: (e: ManifestError) => void;
  log?: (msg: string) => void;
  /** Quiet time after the last fs event before the changed files are read. */
  debounceMs?: number;
  /** Longest an fs event waits while events keep coming. */
  maxDebounceMs?: number;
  /** Use inotify (fs.watch) besides the periodic check; default true. */
  watch?: boolean;
  /** Times the periodic check and the event debounce; default the real clock. */
  clock?: Clock;
  /** Largest manifest read; default MaxManifestBytes. */
  maxManifestBytes?: number;
}

interface CachedFile {
  /** The content last read. */
  raw: string;
  /**
   * The file's identity when `raw` was read (device, inode, size, mtime, ctime), kept only once
   * its last change is old enough that a later write must move ctime: the same stamp then
   * means the same bytes, and the periodic check need not open the file.
   */
  stamp?: FileStamp;
  /** The pod of the last content that decoded; kept on a watch-event failure, as upstream. */
  pod?: Pod;
  /** The content whose decode failure was already reported. */
  reportedBadRaw?: string;
  /** That failure: the same bytes fail the same way, so they are not decoded again. */
  error?: ManifestError;
}

/** A file's identity and change times (ns as whole seconds and nanoseconds, both exact). */
interface FileStamp {
  dev: number;
  ino: number;
  size: number;
  mtimeSec: number;
  mtimeNsec: number;
  ctimeSec: number;
  ctimeNsec: number;
}

function sameStamp(a: FileStamp, st: StatBatchResult, i: number): boolean {
  return (
    a.ino === st.ino(i) && a.size === st.size(i) && a.mtimeNsec === st.mtimeNsec(i) && a.mtimeSec === st.mtimeSec(i) &&
    a.ctimeNsec === st.ctimeNsec(i) && a.ctimeSec === st.ctimeSec(i) && a.dev === st.dev(i)
  );
}

function stampOf(st: StatBatchResult, i: number): FileStamp {
  return { dev: st.dev(i), ino: st.ino(i), size: st.size(i), mtimeSec: st.mtimeSec(i), mtimeNsec: st.mtimeNsec(i), ctimeSec: st.ctimeSec(i), ctimeNsec: st.ctimeNsec(i) };
}

type Scan = { kind: 'full'; periodic: boolean } | { kind: 'files'; names: Set<string> };

/** Manifests read at once by a full check (each is a few file operations on the thread pool). */
export const MANIFEST_READ_CONCURRENCY = 16;
/**
 * How old a file's last change must be before its stamp stands for its content: timestamps
 * may be as coarse as a clock tick, so a write just after a read could leave them unchanged
 * (the "racy" case git's index also guards against).
 */
export const STAMP_SETTLE_MS = 2_000;

const FULL = Symbol('full');

export class FileSource {
  private readonly path: string;
  private readonly opts: FileSourceOptions;
  private readonly log: (msg: string) => void;
  private readonly files = new Map<string, CachedFile>();
  private watcher: FSWatcher | undefined;
  private watchedIno: number | undefined;
  private readonly clock: Clock;
  private readonly maxBytes: number;
  private periodicTimer: Timer | undefined;
  private debounceTimer: Timer | undefined;
  private firstPendingAt = 0;
  private pending = new Set<string | typeof FULL>();
  private queue: Promise<void> = Promise.resolve();
  private stopped = false;
  private started = false;
  private emittedOnce = false;
  private dirty = false;
  private missingLogged = false;
  private readonly loggedOnce = new Set<string>();

  constructor(opts: FileSourceOptions) {
    // inotify paths are compared by name: no trailing slash
    this.path = resolve(opts.path);
    this.opts = opts;
    this.log = opts.log ?? (() => {});
    this.clock = opts.clock ?? realClock;
    this.maxBytes = opts.maxManifestBytes ?? MaxManifestBytes;
  }

  /** Starts the first full check now, the watch, and the periodic re-check. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.log(`Watching path ${JSON.stringify(this.path)}`);
    void this.periodicCheck();
  }

  /** Runs one full check (what the periodic timer runs) and resolves when it is done. */
  check(): Promise<void> {
    return this.enqueue({ kind: 'full', periodic: true });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.periodicTimer?.cancel();
    this.debounceTimer?.cancel();
    this.closeWatcher();
    await this.queue;
  }

  private async periodicCheck(): Promise<void> {
    await this.enqueue({ kind: 'full', periodic: true });
    if (this.stopped) return;
    // the next check starts a full period after this one ended (upstream wait.Forever)
    this.periodicTimer = this.clock.setTimeout(() => void this.periodicCheck(), this.opts.checkPeriodMs);
  }

  private enqueue(scan: Scan): Promise<void> {
    this.queue = this.queue.then(async () => {
      if (this.stopped) return;
      try {
        if (scan.kind === 'full') await this.fullScan(scan.periodic);
        else await this.scanFiles(scan.names);
        this.emit();
      } catch (e) {
        this.log(`Unable to read config path ${JSON.stringify(this.path)}: ${e instanceof Error ? e.message : String(e)}`);
      }
    });
    return this.queue;
  }

  private logOnce(key: string, msg: string): void {
    if (this.loggedOnce.has(key)) return;
    this.loggedOnce.add(key);
    this.log(msg);
  }

  private async fullScan(periodic: boolean): Promise<void> {
    let st: Stats;
    try {
      st = await stat(this.path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      if (!this.missingLogged) {
        this.log(`Unable to read config path ${JSON.stringify(this.path)}: path does not exist, ignoring`);
        this.missingLogged = true;
      }
      this.closeWatcher();
      if (this.files.size > 0) this.dirty = true;
      this.files.clear();
      // an empty set still marks the source as seen
      return;
    }
    if (this.missingLogged) {
      this.log(`Config path ${JSON.stringify(this.path)} exists now`);
      this.missingLogged = false;
    }
    if (st.isDirectory()) {
      this.ensureWatcher(this.path, st.ino);
      const dirents = await readdir(this.path, { withFileTypes: true });
      const names = dirents
        .map((d) => d.name)
        .filter((n) => !n.startsWith('.'))
        .sort();
      const present = new Set(names.map((n) => join(this.path, n)));
      for (const file of [...this.files.keys()]) {
        if (!present.has(file)) this.dropFile(file);
      }
      // one batched stat for the directory, then read a bounded number at once, apply in name order
      const results = await this.readManifests(names.map((n) => join(this.path, n)));
      for (const r of results) this.applyRead(r, periodic);
    } else if (st.isFile()) {
      const dir = dirname(this.path);
      try {
        this.ensureWatcher(dir, (await stat(dir)).ino);
      } catch {
        // the periodic check still sees changes
      }
      for (const file of [...this.files.keys()]) if (file !== this.path) this.dropFile(file);
      this.applyRead((await this.readManifests([this.path]))[0]!, periodic);
    } else {
      throw new KubeletError('StaticPodPathInvalid', `${this.path}: not a directory or a file`);
    }
  }

  private async scanFiles(names: Set<string>): Promise<void> {
    const results = await this.readManifests([...names].sort());
    // an event-driven read that fails keeps the last good pod until the next full check
    for (const r of results) this.applyRead(r, false);
  }

  private dropFile(file: string): void {
    const cached = this.files.get(file);
    if (cached?.pod) this.dirty = true;
    this.files.delete(file);
  }

  /**
   * Every file's read result, in order: one batched stat for all, then only the files whose
   * stat does not settle it (changed, new, unsettled, or a stat error to word) are opened.
   */
  private async readManifests(files: readonly string[]): Promise<ReadResult[]> {
    const st = await statBatch(files);
    const results = new Array<ReadResult>(files.length);
    const toRead: number[] = [];
    for (let i = 0; i < files.length; i++) {
      const r = this.fromStat(files[i]!, st, i);
      if (r) results[i] = r;
      else toRead.push(i);
    }
    if (toRead.length > 0) {
      await mapBounded(toRead, MANIFEST_READ_CONCURRENCY, async (i) => {
        results[i] = await this.readManifest(files[i]!, st, i);
      });
    }
    return results;
  }

  /** What the stat alone decides (gone, not a file, too large, unchanged since a settled read), or undefined. */
  private fromStat(file: string, st: StatBatchResult, i: number): ReadResult | undefined {
    if (!st.ok(i)) return st.errno(i) === ENOENT ? { file, kind: 'gone' } : undefined;
    if (st.isDirectory(i)) return { file, kind: 'skip', why: `Not recursing into manifest path ${JSON.stringify(file)}` };
    if (!st.isFile(i)) return { file, kind: 'skip', why: `Manifest path ${JSON.stringify(file)} is not a directory or file` };
    if (st.size(i) > this.maxBytes) return this.tooLarge(file, st, i, String(st.size(i)));
    const cached = this.files.get(file);
    if (cached?.stamp && sameStamp(cached.stamp, st, i)) {
      const stamp = cached.stamp;
      // the cache entry stays as it is: no result object per unchanged file per check
      if (cached.pod && cached.reportedBadRaw === undefined) return UNCHANGED;
      if (cached.reportedBadRaw === cached.raw && cached.error) return { file, kind: 'bad', raw: cached.raw, error: cached.error, stamp };
    }
    return undefined;
  }

  private tooLarge(file: string, st: StatBatchResult, i: number, size: string): ReadResult {
    return {
      file,
      kind: 'bad',
      raw: `size:${size}:${st.mtimeSec(i)}.${st.mtimeNsec(i)}`,
      error: this.error(file, `manifest is ${size} bytes, more than the limit of ${this.maxBytes} bytes`),
    };
  }

  /** Reads a file the stat (row i of st) did not settle. */
  private async readManifest(file: string, st: StatBatchResult, i: number): Promise<ReadResult> {
    if (!st.ok(i)) {
      // fs.stat words the error as before (the batch has only its errno)
      try {
        await stat(file);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { file, kind: 'gone' };
        return { file, kind: 'skip', why: `Can't get metadata for ${JSON.stringify(file)}: ${(e as Error).message}` };
      }
      return { file, kind: 'skip', why: `Can't get metadata for ${JSON.stringify(file)}: ${st.code(i)}` };
    }
    const cached = this.files.get(file);
    // the clock is wall time here, as the file's ctime is; settled when its ctime is older than now - STAMP_SETTLE_MS
    const settleMs = Math.floor(this.clock.now() - STAMP_SETTLE_MS);
    const settleSec = Math.floor(settleMs / 1000);
    const settleNsec = (settleMs - settleSec * 1000) * 1_000_000;
    const settled = settleSec > st.ctimeSec(i) || (settleSec === st.ctimeSec(i) && settleNsec > st.ctimeNsec(i)) ? stampOf(st, i) : undefined;
    let raw: string;
    try {
      const data = await readAtMost(file, this.maxBytes, st.size(i));
      // the file grew after stat, or reports no size (procfs): the read itself is bounded
      if (data === undefined) return this.tooLarge(file, st, i, `more than ${this.maxBytes}`);
      raw = data;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { file, kind: 'gone' };
      return { file, kind: 'bad', raw: '', error: this.error(file, `can't read manifest: ${errorMessage(e)}`, e) };
    }
    // unchanged bytes decode to the same pod (same UID): skip the decode
    if (cached && cached.raw === raw) {
      if (cached.pod && cached.reportedBadRaw === undefined) return { file, kind: 'good', raw, pod: cached.pod, stamp: settled };
      if (cached.reportedBadRaw === raw && cached.error) return { file, kind: 'bad', raw, error: cached.error, stamp: settled };
    }
    try {
      const pod = decodePodManifest(raw, { source: FILE_SOURCE, location: file, nodeName: this.opts.nodeName });
      return { file, kind: 'good', raw, pod, stamp: settled };
    } catch (e) {
      const err = e instanceof ManifestError ? e : this.error(file, `couldn't decode manifest: ${errorMessage(e)}`, e);
      return { file, kind: 'bad', raw, error: err, stamp: settled };
    }
  }

  private error(file: string, detail: string, cause?: unknown): ManifestError {
    return new ManifestError(FILE_SOURCE, file, detail, { cause });
  }

  private applyRead(r: ReadResult, periodic: boolean): void {
    if (r.kind === 'same') return;
    if (r.kind === 'gone') {
      this.dropFile(r.file);
      return;
    }
    if (r.kind === 'skip') {
      this.logOnce(r.why, r.why);
      this.dropFile(r.file);
      return;
    }
    const cached = this.files.get(r.file);
    if (r.kind === 'good') {
      if (cached?.pod !== r.pod) this.dirty = true;
      this.files.set(r.file, { raw: r.raw, pod: r.pod, ...(r.stamp ? { stamp: r.stamp } : {}) });
      return;
    }
    // a bad manifest is reported once per content, and its pod dropped by the full check
    if (cached?.reportedBadRaw !== r.raw) this.opts.onError(r.error);
    const keep = periodic ? undefined : cached?.pod;
    if (cached?.pod && !keep) this.dirty = true;
    const next: CachedFile = { raw: r.raw, reportedBadRaw: r.raw, error: r.error };
    if (keep) next.pod = keep;
    if (r.stamp) next.stamp = r.stamp;
    this.files.set(r.file, next);
  }

  private emit(): void {
    if (this.stopped || (this.emittedOnce && !this.dirty)) return;
    this.emittedOnce = true;
    this.dirty = false;
    const entries: SourceEntry[] = [];
    for (const file of [...this.files.keys()].sort()) {
      const pod = this.files.get(file)!.pod;
      if (pod) entries.push({ pod, location: file });
    }
    this.opts.onSet(entries);
  }

  private ensureWatcher(dir: string, ino: number): void {
    if (this.stopped || this.opts.watch === false) return;
    // a directory removed and created again is a new inode: watch the new one
    if (this.watcher && this.watchedIno === ino) return;
    this.closeWatcher();
    try {
      const w = watch(dir, { persistent: true }, (_event, filename) => this.onFsEvent(dir, filename));
      w.on('error', (e) => {
        this.log(`Error while watching ${JSON.stringify(dir)}: ${e.message}`);
        if (this.watcher === w) this.closeWatcher();
      });
      this.watcher = w;
      this.watchedIno = ino;
    } catch (e) {
      // e.g. out of inotify watches: the periodic check still sees every change
      this.logOnce(`watch:${dir}`, `Unable to create inotify for path ${JSON.stringify(dir)}: ${(e as Error).message}`);
    }
  }

  private closeWatcher(): void {
    this.watcher?.close();
    this.watcher = undefined;
    this.watchedIno = undefined;
  }

  private onFsEvent(dir: string, filename: string | Buffer | null): void {
    if (this.stopped) return;
    const name = filename === null ? null : filename.toString();
    if (dir !== this.path) {
      // single-file mode: only the manifest itself matters
      if (name !== null && name !== basename(this.path)) return;
      this.pending.add(this.path);
    } else {
      // dotfiles (editor swap files, atomic-writer temporaries) are never manifests
      if (name !== null && name.startsWith('.')) return;
      this.pending.add(name === null ? FULL : join(dir, name));
    }
    const now = this.clock.now();
    if (this.debounceTimer === undefined) this.firstPendingAt = now;
    else this.debounceTimer.cancel();
    const debounce = this.opts.debounceMs ?? 100;
    const maxWait = this.opts.maxDebounceMs ?? 1000;
    const wait = Math.max(0, Math.min(debounce, this.firstPendingAt + maxWait - now));
    this.debounceTimer = this.clock.setTimeout(() => this.flushEvents(), wait);
  }

  private flushEvents(): void {
    this.debounceTimer = undefined;
    const pending = this.pending;
    this.pending = new Set();
    if (pending.has(FULL)) void this.enqueue({ kind: 'full', periodic: false });
    else void this.enqueue({ kind: 'files', names: pending as Set<string> });
  }
}

type ReadResult =
  | { kind: 'same'; file?: undefined }
  | { file: string; kind: 'gone' }
  | { file: string; kind: 'skip'; why: string }
  | { file: string; kind: 'good'; raw: string; pod: Pod; stamp?: FileStamp | undefined }
  | { file: string; kind: 'bad'; raw: string; error: ManifestError; stamp?: FileStamp | undefined };

const UNCHANGED: ReadResult = Object.freeze({ kind: 'same' as const });

/** fn over items with at most `limit` in flight; results in the items' order. */
async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Reads a file as UTF-8, or undefined when it holds more than `limit` bytes. */
async function readAtMost(file: string, limit: number, sizeHint: number): Promise<string | undefined> {
  const fh = await open(file, 'r');
  try {
    // the size it had at stat (room to see EOF in one read), not 64 KiB for a 400-byte manifest
    const buf = Buffer.allocUnsafe(Math.min(limit + 1, 64 * 1024, Math.max(sizeHint + 1, 1024)));
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, limit + 1 - total), null);
      if (bytesRead === 0) break;
      chunks.push(Buffer.from(buf.subarray(0, bytesRead)));
      total += bytesRead;
      if (total > limit) return undefined;
    }
    return Buffer.concat(chunks, total).toString('utf8');
  } finally {
    await fh.close();
  }
}
