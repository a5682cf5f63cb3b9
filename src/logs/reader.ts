// Reads a container's CRI-format log as upstream's /containerLogs does (kuberuntime ReadLogs),
// across its rotations (oldest first, `.gz` ones decompressed) and then the live file: partial
// records joined into lines, tailLines, since, timestamps and limitBytes applied; with follow,
// the live file is tailed through rotations (a recreated file is reopened) until the container
// is no longer running and the file has stopped growing.
import { watch, type FSWatcher } from 'node:fs';
import { open, readFile, stat, type FileHandle } from 'node:fs/promises';
import { gunzip } from 'node:zlib';
import { promisify } from 'node:util';
import type { Clock } from '../util/clock.js';
import { LineAssembler, formatTimestamp, parseCriRecord, splitLines, type CriLogRecord, type LogLine } from './cri-format.js';
import { LogReadError } from './errors.js';
import { rotatedLogs, type LogFile } from './files.js';
import { sinceBound, type ContainerLogOptions } from './options.js';

const gunzipAsync = promisify(gunzip);

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

function records(lines: Buffer[]): CriLogRecord[] {
  const out: CriLogRecord[] = [];
  for (const l of lines) {
    const r = parseCriRecord(l);
    if (r) out.push(r);
  }
  return out;
}

/**
 * A rotation's contents. The rotator may compress it (rename to .gz) or drop it as too old between
 * the listing and this read: the compressed copy is read instead, and a dropped one reads as empty.
 */
export async function readRotation(f: LogFile): Promise<Buffer> {
  const read = async (path: string, gz: boolean): Promise<Buffer | undefined> => {
    try {
      const data = await readFile(path);
      return gz ? await gunzipAsync(data) : data;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new LogReadError(path, (err as Error).message, err);
    }
  };
  return (await read(f.path, f.compressed)) ?? (f.compressed ? undefined : await read(`${f.path}.gz`, true)) ?? Buffer.alloc(0);
}

/** Records of the rotations needed for `tail` lines, oldest first, given the live file's records. */
async function tailRecords(rotations: LogFile[], live: CriLogRecord[], tail: number): Promise<CriLogRecord[]> {
  const fulls = (rs: CriLogRecord[]): number => rs.reduce((n, r) => n + (r.partial ? 0 : 1), 0);
  let have = fulls(live);
  const chunks: CriLogRecord[][] = [live];
  // one line more than asked, so the first kept line's partial records are in too
  for (let i = rotations.length - 1; i >= 0 && have <= tail; i--) {
    const rs = records(splitLines(await readRotation(rotations[i]!)).lines);
    chunks.unshift(rs);
    have += fulls(rs);
  }
  return chunks.flat();
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
    const first = splitLines(await live.readToEnd());
    live.rest = first.rest;
    const liveRecords = records(first.lines);
    if (opts.tailLines !== undefined) {
      const all = tailRecords(rotations, liveRecords, opts.tailLines);
      const lines: LogLine[] = [];
      for (const r of await all) {
        const l = assembler.push(r);
        if (l) lines.push(l);
      }
      for (const l of opts.tailLines === 0 ? [] : lines.slice(-opts.tailLines)) await out.line(l);
    } else {
      for (const f of rotations) {
        for (const r of records(splitLines(await readRotation(f)).lines)) {
          const l = assembler.push(r);
          if (l) await out.line(l);
          if (out.full) return;
        }
      }
      for (const r of liveRecords) {
        const l = assembler.push(r);
        if (l) await out.line(l);
        if (out.full) return;
      }
    }
    if (out.full) return;
    if (opts.follow) await follow(live, assembler, out, deps);
    // What is left: a last line without its newline, and partial records never completed.
    if (live.rest.length > 0) {
      const r = parseCriRecord(live.rest);
      const l = r && assembler.push(r);
      if (l) await out.line(l);
    }
    for (const l of assembler.pending()) await out.line(l);
  } finally {
    await live.close();
  }
}

/** The live file, reopened when the runtime recreates it (rotation). */
class LiveFile {
  pos = 0;
  rest: Buffer = Buffer.alloc(0);
  ino = -1;
  #watcher?: FSWatcher;
  #wake?: () => void;
  #changed = false;

  /** Without a file handle the live file did not exist when the read began: it reads as empty until it appears. */
  constructor(readonly path: string, public fh: FileHandle | undefined) {}

  async init(): Promise<void> {
    if (this.fh) this.ino = (await this.fh.stat()).ino;
  }

  /** Bytes from pos to the end of the open file. */
  async readToEnd(): Promise<Buffer> {
    if (this.ino < 0) await this.init();
    const fh = this.fh;
    if (!fh) return Buffer.alloc(0);
    const parts: Buffer[] = [];
    for (;;) {
      const buf = Buffer.allocUnsafe(READ_CHUNK);
      let n: number;
      try {
        ({ bytesRead: n } = await fh.read(buf, 0, buf.length, this.pos));
      } catch (err) {
        throw new LogReadError(this.path, (err as Error).message, err);
      }
      if (n === 0) break;
      this.pos += n;
      parts.push(buf.subarray(0, n));
    }
    return Buffer.concat(parts);
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
    this.pos = 0;
    this.ino = (await next.stat()).ino;
    // an unfinished last line of the old file is not continued in the new one
    this.rest = Buffer.alloc(0);
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

async function follow(live: LiveFile, assembler: LineAssembler, out: LineWriter, deps: LogReaderDeps): Promise<void> {
  let running = true;
  for (;;) {
    if (deps.signal?.aborted || out.full) return;
    const chunk = await live.readToEnd();
    if (chunk.length > 0) {
      const { lines, rest } = splitLines(live.rest.length ? Buffer.concat([live.rest, chunk]) : chunk);
      live.rest = rest;
      for (const r of records(lines)) {
        const l = assembler.push(r);
        if (l) await out.line(l);
      }
      continue;
    }
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
