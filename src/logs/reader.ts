// Reads a container's CRI-format log as upstream's /containerLogs does (kuberuntime ReadLogs),
// across its rotations (oldest first, `.gz` ones decompressed) and then the live file: partial
// records joined into lines, tailLines, since, timestamps and limitBytes applied; with follow,
// the live file is tailed through rotations (a recreated file is reopened) until the container
// is no longer running and the file has stopped growing.
//
// Memory is bounded whatever the files hold: they are read in chunks, a line (a record, or a line
// joined from partial records) is cut at MAX_LINE_BYTES, and tailLines is found from the end: plain
// files are read backwards in chunks, counting complete lines, until the start of the last N is
// known; a compressed rotation is counted in one streaming pass. Nothing reads a whole file.
import { watch, type FSWatcher } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { createGunzip } from 'node:zlib';
import type { Clock } from '../util/clock.js';
import { LineAssembler, LineSplitter, MAX_LINE_BYTES, formatTimestamp, parseCriRecord, type LogLine } from './cri-format.js';
import { LogReadError } from './errors.js';
import { rotatedLogs, type LogFile } from './files.js';
import { sinceBound, type ContainerLogOptions } from './options.js';

/** upstream logForceCheckPeriod: a followed file is re-read at least this often. */
export const LOG_FORCE_CHECK_PERIOD_MS = 1_000;
const READ_CHUNK = 64 * 1024;

export interface LogSink {
  /** Resolves when the sink can take more (backpressure). */
  write(chunk: Buffer): void | Promise<void>;
}

export interface LogReaderDeps {
  clock: Clock;
  /** Whether the container still runs (upstream isContainerRunning: a missing container is not). */
  isRunning(): Promise<boolean>;
  /** Ends a follow (the client went away). */
  signal?: AbortSignal;
}

/** Writes lines to the sink with the request's since, timestamps and limitBytes applied. */
class LineWriter {
  #remaining: number;
  constructor(private readonly sink: LogSink, private readonly since: number | undefined, private readonly timestamps: boolean, limitBytes: number | undefined) {
    this.#remaining = limitBytes ?? Infinity;
  }

  get full(): boolean {
    return this.#remaining <= 0;
  }

  async line(l: LogLine): Promise<void> {
    if (this.full) return;
    if (this.since !== undefined && l.timeMs < this.since) return;
    const body = this.timestamps ? Buffer.concat([Buffer.from(`${formatTimestamp(l.timestamp)} `), l.content]) : l.content;
    const out = body.length > this.#remaining ? body.subarray(0, this.#remaining) : body;
    this.#remaining -= out.length;
    await this.sink.write(out);
  }
}

/**
 * A rotation's contents, whole. The rotator may compress it (rename to .gz) or drop it as too old
 * between the listing and this read: the compressed copy is read instead, and a dropped one reads
 * as empty. (The reader itself streams rotations through rotationChunks; this is for small files.)
 */
export async function readRotation(f: LogFile): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of rotationChunks(f, 0)) parts.push(c);
  return Buffer.concat(parts);
}

/** A rotation's bytes from `from` (decompressed), in chunks; the .gz copy or nothing as readRotation. */
async function* rotationChunks(f: LogFile, from: number): AsyncGenerator<Buffer> {
  const chunks = async function* (path: string, gz: boolean): AsyncGenerator<Buffer> {
    const fh = await open(path, 'r');
    const src = fh.createReadStream({ highWaterMark: READ_CHUNK });
    let stream: AsyncIterable<Buffer> = src;
    if (gz) {
      const gunzip = createGunzip({ chunkSize: READ_CHUNK });
      src.on('error', (err) => gunzip.destroy(err));
      stream = src.pipe(gunzip);
    }
    let skip = from;
    try {
      for await (const c of stream) {
        if (skip >= c.length) { skip -= c.length; continue; }
        yield skip > 0 ? c.subarray(skip) : c;
        skip = 0;
      }
    } finally {
      src.destroy();
    }
  };
  const attempt = async function* (path: string, gz: boolean): AsyncGenerator<Buffer, boolean> {
    try {
      yield* chunks(path, gz);
      return true;
    } catch (err) {
      if (errno(err) === 'ENOENT') return false;
      throw new LogReadError(path, (err as Error).message, err);
    }
  };
  if (yield* attempt(f.path, f.compressed)) return;
  if (!f.compressed) yield* attempt(`${f.path}.gz`, true);
}

/** Where the lines kept begin: lines completed before it are read (for their partial records) and dropped. */
interface Cutoff {
  file: number;
  /** In a plain file: lines whose completing record starts before this offset are dropped. */
  offset?: number;
  /** In a compressed one: lines completed by its first `ordinal` full records are dropped. */
  ordinal?: number;
}

/** Bytes of a record's start parsed when scanning backwards (timestamp, stream and tag fit). */
const HEADER_BYTES = 128;

/**
 * The complete lines of fh's first `end` bytes, last first, each with its start and (up to
 * HEADER_BYTES of) its head, read backwards in chunks; nothing below `bound.floor` is read (a
 * line reaching below it ends the scan).
 */
async function* linesBackward(fh: FileHandle, path: string, end: number, bound = { floor: 0 }): AsyncGenerator<{ start: number; end: number; head: Buffer }> {
  const read = async (pos: number, len: number): Promise<Buffer> => {
    const buf = Buffer.allocUnsafe(len);
    let got = 0;
    try {
      while (got < len) {
        const { bytesRead } = await fh.read(buf, got, len - got, pos + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
    } catch (err) {
      throw new LogReadError(path, (err as Error).message, err);
    }
    return buf.subarray(0, got);
  };
  let cEnd = end;
  let cStart = end;
  let chunk: Buffer = Buffer.alloc(0);
  let lineEnd = end;
  // the newline ending the current line is at lineEnd - 1; its start follows the newline before
  let searchBelow = lineEnd - 1;
  while (lineEnd > 0) {
    let nl = -1;
    while (nl < 0) {
      if (searchBelow > cStart) {
        const i = chunk.lastIndexOf(0x0a, searchBelow - cStart - 1);
        if (i >= 0) { nl = cStart + i; break; }
      }
      if (cStart === 0) break;
      if (cStart <= bound.floor) return;
      cEnd = cStart;
      cStart = Math.max(0, cStart - READ_CHUNK);
      chunk = await read(cStart, cEnd - cStart);
      if (chunk.length !== cEnd - cStart) return; // the file shrank under us: stop here
    }
    const start = nl + 1;
    const headEnd = Math.min(lineEnd - 1, start + HEADER_BYTES);
    const head = headEnd <= cEnd && start >= cStart ? chunk.subarray(start - cStart, headEnd - cStart) : await read(start, headEnd - start);
    yield { start, end: lineEnd, head };
    lineEnd = start;
    searchBelow = nl;
  }
}

/** Offset just past fh's last newline within its first `size` bytes (0 without one). */
async function completeEnd(fh: FileHandle, path: string, size: number): Promise<number> {
  const buf = Buffer.allocUnsafe(READ_CHUNK);
  for (let end = size; end > 0;) {
    const start = Math.max(0, end - READ_CHUNK);
    let n: number;
    try {
      ({ bytesRead: n } = await fh.read(buf, 0, end - start, start));
    } catch (err) {
      throw new LogReadError(path, (err as Error).message, err);
    }
    const i = buf.subarray(0, n).lastIndexOf(0x0a);
    if (i >= 0) return start + i + 1;
    end = start;
  }
  return 0;
}

/** Bytes scanned before the kept lines for the partial records of their first lines. */
const EXTEND_BYTES = 2 * MAX_LINE_BYTES;

/**
 * Where to start reading, and which lines to drop, for the last `tail` lines of the files (the
 * rotations oldest first, then the live file, open as `liveFh` with `liveEnd` complete bytes).
 * Counting full (F) records from the end, the (tail+1)-th one from the end marks the cutoff;
 * the reading starts earlier where a kept line's partial records began before it.
 */
async function tailStart(files: LogFile[], liveFh: FileHandle | undefined, liveEnd: number, tail: number): Promise<{ file: number; offset: number; cut?: Cutoff }> {
  let remaining = tail;
  let cut: Cutoff | undefined;
  let start = { file: 0, offset: 0 };
  // streams whose line before the cutoff is complete: earlier partial records are not theirs
  const closed = new Set<string>();
  let extended = 0;
  const live = files.length;
  for (let i = live; i >= 0; i--) {
    if (i === live && !liveFh) continue;
    const f = i === live ? undefined : files[i]!;
    if (f?.compressed) {
      if (cut) return { file: i, offset: 0, cut };
      let count = 0;
      const splitter = new LineSplitter();
      for await (const c of rotationChunks(f, 0)) {
        for (const { line } of splitter.push(c)) {
          const r = parseCriRecord(line);
          if (r && !r.partial) count++;
        }
      }
      if (count > remaining) return { file: i, offset: 0, cut: { file: i, ordinal: count - remaining } };
      remaining -= count;
      continue;
    }
    let fh = liveFh!;
    let end = liveEnd;
    let own: FileHandle | undefined;
    if (f) {
      const opened = await openRotation(f);
      if (!opened) continue;
      if (opened.compressed) {
        // compressed since the listing: counted as one
        await opened.fh.close();
        files[i] = { ...f, path: opened.path, compressed: true };
        i++;
        continue;
      }
      fh = own = opened.fh;
      end = await completeEnd(fh, f.path, (await fh.stat()).size);
    }
    // once the cutoff is known, the scan for the kept lines' partial records is bounded
    const bound = { floor: cut ? Math.max(0, end - (EXTEND_BYTES - extended)) : 0 };
    try {
      for await (const l of linesBackward(fh, f?.path ?? '', end, bound)) {
        const r = parseCriRecord(l.head);
        if (!r) continue;
        if (!cut) {
          if (r.partial) continue;
          if (remaining > 0) { remaining--; continue; }
          cut = { file: i, offset: l.end };
          start = { file: i, offset: l.end };
          closed.add(r.stream);
          bound.floor = Math.max(0, l.end - EXTEND_BYTES);
          continue;
        }
        extended += l.end - l.start;
        if (!r.partial) closed.add(r.stream);
        else if (!closed.has(r.stream)) start = { file: i, offset: l.start };
        if (closed.size >= 2 || extended > EXTEND_BYTES) return { ...start, cut };
      }
    } finally {
      await own?.close();
    }
    if (cut && (extended > EXTEND_BYTES || bound.floor > 0)) return { ...start, cut };
  }
  return cut ? { ...start, cut } : { file: 0, offset: 0 };
}

/** A plain rotation opened (or, compressed since the listing, its .gz path); undefined if dropped. */
async function openRotation(f: LogFile): Promise<{ fh: FileHandle; path: string; compressed: boolean } | undefined> {
  try {
    return { fh: await open(f.path, 'r'), path: f.path, compressed: false };
  } catch (err) {
    if (errno(err) !== 'ENOENT') throw new LogReadError(f.path, (err as Error).message, err);
  }
  try {
    return { fh: await open(`${f.path}.gz`, 'r'), path: `${f.path}.gz`, compressed: true };
  } catch (err) {
    if (errno(err) !== 'ENOENT') throw new LogReadError(`${f.path}.gz`, (err as Error).message, err);
  }
  return undefined;
}

/** Lines into the writer, dropping those completed before the cutoff. */
class Pump {
  #ordinal = 0;
  #file = -1;
  constructor(readonly out: LineWriter, readonly assembler: LineAssembler, private readonly cut: Cutoff | undefined) {}

  async line(raw: Buffer, file: number, start: number): Promise<void> {
    if (file !== this.#file) { this.#file = file; this.#ordinal = 0; }
    const r = parseCriRecord(raw);
    if (!r) return;
    const ordinal = r.partial ? -1 : this.#ordinal++;
    const l = this.assembler.push(r);
    if (!l) return;
    const c = this.cut;
    if (c && (file < c.file || (file === c.file && (c.offset !== undefined ? start < c.offset : ordinal < c.ordinal!)))) return;
    await this.out.line(l);
  }
}

/** How long a live file absent between a rotation's rename and the runtime's reopen is waited for. */
export const LIVE_REOPEN_WAIT_MS = 200;
const LIVE_RETRY_MS = 20;

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException).code;

/**
 * The live file, open, and the rotations before it, as one consistent view. The live file is opened
 * first and the rotations listed after; if the path names another file by then, the open one was
 * rotated in between (it is in the listing) and the view is taken again. Between the rotator's rename
 * and the runtime's reopen there is no live file: that is waited for up to LIVE_REOPEN_WAIT_MS on the
 * clock, after which the rotations alone are read (the live file is then picked up when it appears,
 * if following).
 */
async function snapshot(logPath: string, clock: Clock): Promise<{ rotations: LogFile[]; fh: FileHandle | undefined }> {
  const list = (): Promise<LogFile[]> => rotatedLogs(logPath).catch((err) => { throw new LogReadError(logPath, (err as Error).message, err); });
  for (let waited = 0; ; ) {
    let fh: FileHandle;
    try {
      fh = await open(logPath, 'r');
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw new LogReadError(logPath, (err as Error).message, err);
      const rotations = await list();
      // no rotation either: the container never wrote a log file
      if (rotations.length === 0 || waited >= LIVE_REOPEN_WAIT_MS) {
        if (rotations.length === 0) throw new LogReadError(logPath, (err as Error).message, err);
        return { rotations, fh: undefined };
      }
      await clock.sleep(LIVE_RETRY_MS);
      waited += LIVE_RETRY_MS;
      continue;
    }
    try {
      const rotations = await list();
      const [held, named] = await Promise.all([fh.stat(), stat(logPath).catch(() => undefined)]);
      if (named && named.ino === held.ino && named.dev === held.dev) return { rotations, fh };
    } catch (err) {
      await fh.close().catch(() => undefined);
      throw err;
    }
    // rotated between the open and the listing: take the view again
    await fh.close().catch(() => undefined);
  }
}

/** Reads the logs of the container whose live log file is `logPath` into `sink`. */
export async function readContainerLogs(logPath: string, opts: ContainerLogOptions, sink: LogSink, deps: LogReaderDeps): Promise<void> {
  const out = new LineWriter(sink, sinceBound(opts, deps.clock.now()), opts.timestamps, opts.limitBytes);
  const assembler = new LineAssembler();
  const { rotations, fh } = await snapshot(logPath, deps.clock);
  const live = new LiveFile(logPath, fh);
  try {
    await live.init();
    let begin = { file: 0, offset: 0 } as { file: number; offset: number; cut?: Cutoff };
    if (opts.tailLines !== undefined) {
      const liveEnd = fh ? await completeEnd(fh, logPath, live.size) : 0;
      begin = await tailStart(rotations, fh, liveEnd, opts.tailLines);
    }
    const pump = new Pump(out, assembler, begin.cut);
    for (let i = begin.file; i < rotations.length; i++) {
      const splitter = new LineSplitter(i === begin.file ? begin.offset : 0);
      for await (const c of rotationChunks(rotations[i]!, i === begin.file ? begin.offset : 0)) {
        for (const { line, start } of splitter.push(c)) {
          await pump.line(line, i, start);
          if (out.full) return;
        }
      }
    }
    const liveIndex = rotations.length;
    live.seek(begin.file === liveIndex ? begin.offset : 0);
    // the live file up to where it ended when the read began, then (following) what comes after
    await drain(live, pump, liveIndex, live.size);
    if (out.full) return;
    if (opts.follow) await follow(live, pump, liveIndex, deps);
    if (out.full) return;
    // What is left: a last line without its newline, and partial records never completed.
    const rest = live.splitter.rest();
    if (rest.length > 0) {
      const r = parseCriRecord(rest);
      const l = r && assembler.push(r);
      if (l) await out.line(l);
    }
    for (const l of assembler.pending()) await out.line(l);
  } finally {
    await live.close();
  }
}

/** The live file's lines from its position up to `until` (or its end), chunk by chunk. */
async function drain(live: LiveFile, pump: Pump, index: number, until = Infinity): Promise<boolean> {
  let any = false;
  for (;;) {
    if (pump.out.full) return any;
    const chunk = await live.readChunk(until);
    if (chunk.length === 0) return any;
    any = true;
    for (const { line, start } of live.splitter.push(chunk)) {
      await pump.line(line, index, start);
      if (pump.out.full) return any;
    }
  }
}

/** The live file, reopened when the runtime recreates it (rotation). */
class LiveFile {
  pos = 0;
  ino = -1;
  /** Its size when the read began. */
  size = 0;
  /** Its lines, split as they are read (an unfinished last line held, capped). */
  readonly splitter = new LineSplitter();
  #watcher?: FSWatcher;
  #wake?: () => void;
  #changed = false;

  /** Without a file handle the live file did not exist when the read began: it reads as empty until it appears. */
  constructor(readonly path: string, public fh: FileHandle | undefined) {}

  async init(): Promise<void> {
    if (!this.fh) return;
    const st = await this.fh.stat();
    this.ino = st.ino;
    this.size = st.size;
  }

  seek(offset: number): void {
    this.pos = offset;
    this.splitter.reset(offset);
  }

  /** The next bytes from pos (at most READ_CHUNK, and none at or past `until`); empty at the end. */
  async readChunk(until = Infinity): Promise<Buffer> {
    const fh = this.fh;
    if (!fh || this.pos >= until) return Buffer.alloc(0);
    const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK, until - this.pos));
    let n: number;
    try {
      ({ bytesRead: n } = await fh.read(buf, 0, buf.length, this.pos));
    } catch (err) {
      throw new LogReadError(this.path, (err as Error).message, err);
    }
    this.pos += n;
    return buf.subarray(0, n);
  }

  /** True when the path now names another file (the runtime reopened its log after a rotation). */
  async recreated(): Promise<boolean> {
    try {
      return (await stat(this.path)).ino !== this.ino;
    } catch {
      return false;
    }
  }

  async reopen(): Promise<boolean> {
    let next: FileHandle;
    try {
      next = await open(this.path, 'r');
    } catch {
      return false;
    }
    await this.fh?.close().catch(() => undefined);
    this.fh = next;
    this.ino = (await next.stat()).ino;
    // an unfinished last line of the old file is not continued in the new one
    this.seek(0);
    this.unwatch();
    return true;
  }

  /** Resolves on a change of the file, after `ms` on the clock, or on abort. */
  wait(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
    if (!this.#watcher) {
      try {
        this.#watcher = watch(this.path, () => { this.#changed = true; this.#wake?.(); });
        this.#watcher.on('error', () => this.unwatch());
      } catch {
        // no watch (the file is gone): the clock alone paces the reads
      }
    }
    if (this.#changed) {
      this.#changed = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        timer.cancel();
        signal?.removeEventListener('abort', done);
        this.#wake = undefined;
        this.#changed = false;
        resolve();
      };
      const timer = clock.setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.#wake = done;
    });
  }

  unwatch(): void {
    this.#watcher?.close();
    this.#watcher = undefined;
  }

  async close(): Promise<void> {
    this.unwatch();
    await this.fh?.close().catch(() => undefined);
  }
}

async function follow(live: LiveFile, pump: Pump, index: number, deps: LogReaderDeps): Promise<void> {
  let running = true;
  for (;;) {
    if (deps.signal?.aborted || pump.out.full) return;
    if (await drain(live, pump, index)) continue;
    // At the end of the file: a container that has exited ends the follow here, as upstream.
    if (!running) return;
    if (await live.recreated()) {
      if (await live.reopen()) continue;
    }
    running = await deps.isRunning();
    // not running: read what was written up to the exit, then end at the next end of file
    if (!running) continue;
    await live.wait(deps.clock, LOG_FORCE_CHECK_PERIOD_MS, deps.signal);
  }
}
