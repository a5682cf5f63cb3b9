// The CRI container log format (upstream: kuberuntime logs): one record per line,
// `<RFC3339Nano timestamp> <stdout|stderr> <P|F> <content>`; a P (partial) record's content
// continues in the stream's next record, an F (full) record ends the line.

export type LogStream = 'stdout' | 'stderr';

export interface CriLogRecord {
  /** The timestamp as written (RFC3339Nano). */
  timestamp: string;
  /** Milliseconds since the epoch (NaN when the timestamp does not parse). */
  timeMs: number;
  stream: LogStream;
  partial: boolean;
  /** The content, without the line's newline. */
  content: Buffer;
}

const SPACE = 0x20;

// time.Parse(time.RFC3339Nano, ...): 'T' and 'Z' upper case, every field in range (Date.parse
// alone also takes "2026", "Tue, 01 Jan 2026", Feb 30 and 24:00).
const RFC3339_NANO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|[+-](\d{2}):(\d{2}))$/;

/** Milliseconds since the epoch of an RFC3339Nano timestamp, NaN when it is not one. */
export function parseRfc3339Nano(ts: string): number {
  const m = RFC3339_NANO.exec(ts);
  if (!m) return NaN;
  const [y, mo, d, h, mi, s] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number];
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const monthDays = mo === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(mo) ? 30 : 31;
  if (mo < 1 || mo > 12 || d < 1 || d > monthDays || h > 23 || mi > 59 || s > 59) return NaN;
  if (m[7] !== undefined && (Number(m[7]) > 23 || Number(m[8]) > 59)) return NaN;
  return Date.parse(ts);
}

/** Parses one record (without its trailing newline); undefined for a line that is not CRI format. */
export function parseCriRecord(line: Buffer): CriLogRecord | undefined {
  const a = line.indexOf(SPACE);
  if (a <= 0) return undefined;
  const b = line.indexOf(SPACE, a + 1);
  if (b < 0) return undefined;
  const stream = line.toString('latin1', a + 1, b);
  if (stream !== 'stdout' && stream !== 'stderr') return undefined;
  const timestamp = line.toString('latin1', 0, a);
  const timeMs = parseRfc3339Nano(timestamp);
  if (Number.isNaN(timeMs)) return undefined;
  // Tag and content; a record whose tag is missing is a full line (the pre-tag format).
  const c = line.indexOf(SPACE, b + 1);
  const tag = line.toString('latin1', b + 1, c < 0 ? line.length : c);
  if (tag === 'P' || tag === 'F') {
    return { timestamp, timeMs, stream, partial: tag === 'P', content: c < 0 ? Buffer.alloc(0) : line.subarray(c + 1) };
  }
  return { timestamp, timeMs, stream, partial: false, content: line.subarray(b + 1) };
}

/**
 * A timestamp as Go's RFC3339Nano prints it (what upstream writes with `timestamps`): trailing
 * zeros of the fraction dropped, and the fraction with them when it is all zeros.
 */
export function formatTimestamp(ts: string): string {
  return ts.replace(/\.(\d*?)0+(?=Z|[+-]\d\d:\d\d$)/, (_m, digits: string) => (digits ? `.${digits}` : ''));
}

/** A logical line: the records of one stream joined up to an F record (or the end of the input). */
export interface LogLine {
  /** The first record's timestamp and time. */
  timestamp: string;
  timeMs: number;
  stream: LogStream;
  /** The joined content, with a newline when the line was ended by an F record. */
  content: Buffer;
}

/**
 * The most bytes of one line kept: a record (a line of the file) or a line joined from partial
 * records is cut there, the rest of it dropped. The runtime splits what a container writes into
 * records of at most 16 KiB (containerd's max_container_log_line_size default; upstream's reader
 * writes partial records out as they come and joins nothing); lines are joined here, so this cap is
 * what bounds the memory a log file can make the reader hold.
 */
export const MAX_LINE_BYTES = 1 << 20;

/** Room for a record's timestamp, stream and tag before its content, beside MAX_LINE_BYTES. */
const RECORD_HEAD_ROOM = 256;

/** Joins partial records into lines, per stream (stdout's P continues in stdout's next record). */
export class LineAssembler {
  readonly #pending = new Map<LogStream, { first: CriLogRecord; parts: Buffer[]; len: number }>();

  /** A joined line longer than `maxLineBytes` keeps its first `maxLineBytes` bytes (and its newline). */
  constructor(private readonly maxLineBytes = MAX_LINE_BYTES) {}

  #append(p: { parts: Buffer[]; len: number }, content: Buffer): void {
    const room = this.maxLineBytes - p.len;
    if (room <= 0) return;
    // a copy: the record may be a view of a large read buffer
    const kept = Buffer.from(content.length > room ? content.subarray(0, room) : content);
    p.parts.push(kept);
    p.len += kept.length;
  }

  /** The line a record completes, if any. */
  push(rec: CriLogRecord): LogLine | undefined {
    let p = this.#pending.get(rec.stream);
    if (rec.partial) {
      if (!p) this.#pending.set(rec.stream, (p = { first: rec, parts: [], len: 0 }));
      this.#append(p, rec.content);
      return undefined;
    }
    this.#pending.delete(rec.stream);
    const first = p?.first ?? rec;
    const line = p ?? { parts: [], len: 0 };
    this.#append(line, rec.content);
    return { timestamp: first.timestamp, timeMs: first.timeMs, stream: rec.stream, content: Buffer.concat([...line.parts, NEWLINE]) };
  }

  /** Lines still open (partial records with no F yet), oldest first; they stay open. */
  pending(): LogLine[] {
    return [...this.#pending.values()]
      .sort((x, y) => x.first.timeMs - y.first.timeMs)
      .map(({ first, parts }) => ({ timestamp: first.timestamp, timeMs: first.timeMs, stream: first.stream, content: Buffer.concat(parts) }));
  }
}

const NEWLINE = Buffer.from('\n');

/** Splits a buffer into complete lines; `rest` is what follows the last newline. */
export function splitLines(buf: Buffer): { lines: Buffer[]; rest: Buffer } {
  const lines: Buffer[] = [];
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(0x0a, start);
    if (nl < 0) break;
    lines.push(buf.subarray(start, nl));
    start = nl + 1;
  }
  return { lines, rest: buf.subarray(start) };
}

/**
 * Splits a stream of bytes into lines as it arrives, holding at most `maxLineBytes` of an
 * unfinished line: a longer line is cut there and the rest of it, up to its newline, dropped.
 * Each line comes with the offset of its first byte in the stream.
 */
export class LineSplitter {
  #parts: Buffer[] = [];
  #len = 0;
  #start: number;
  #pos: number;

  constructor(startOffset = 0, private readonly maxLineBytes = MAX_LINE_BYTES + RECORD_HEAD_ROOM) {
    this.#start = startOffset;
    this.#pos = startOffset;
  }

  /** The lines the chunk completes, in order. */
  push(chunk: Buffer): { line: Buffer; start: number }[] {
    const out: { line: Buffer; start: number }[] = [];
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, from);
      if (nl < 0) break;
      this.#keep(chunk.subarray(from, nl), false);
      out.push({ line: this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, this.#len), start: this.#start });
      this.#parts = [];
      this.#len = 0;
      from = nl + 1;
      this.#start = this.#pos + from;
    }
    this.#keep(chunk.subarray(from), true);
    this.#pos += chunk.length;
    return out;
  }

  #keep(b: Buffer, copy: boolean): void {
    const room = this.maxLineBytes - this.#len;
    if (room <= 0 || b.length === 0) return;
    const part = b.length > room ? b.subarray(0, room) : b;
    // what stays past this call is copied: the caller may reuse its buffer
    this.#parts.push(copy ? Buffer.from(part) : part);
    this.#len += part.length;
  }

  /** The unfinished line (at most maxLineBytes of it). */
  rest(): Buffer {
    return Buffer.concat(this.#parts, this.#len);
  }

  /** Drops the unfinished line; the next bytes start a new one at `offset`. */
  reset(offset: number): void {
    this.#parts = [];
    this.#len = 0;
    this.#start = offset;
    this.#pos = offset;
  }
}
