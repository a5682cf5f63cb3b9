// A small klog-shaped structured logger: `I1122 20:03:38.123456 msg key="value"`, with -v levels.

export type LogFields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Logs only when the process runs with -v >= level. */
  v(level: number): Pick<Logger, 'info'>;
  with(fields: LogFields): Logger;
}

let verbosity = 0;
let sink: (line: string) => void = (line) => process.stderr.write(line + '\n');

export function setVerbosity(v: number): void {
  verbosity = v;
}

export function setLogSink(fn: (line: string) => void): void {
  sink = fn;
}

function formatValue(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v instanceof Error) return JSON.stringify(v.message);
  if (typeof v === 'object' && v !== null) return JSON.stringify(v);
  return String(v);
}

function header(sev: string): string {
  const d = new Date();
  const p2 = (n: number) => String(n).padStart(2, '0');
  const micros = String(d.getUTCMilliseconds() * 1000).padStart(6, '0');
  return `${sev}${p2(d.getUTCMonth() + 1)}${p2(d.getUTCDate())} ${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}.${micros}`;
}

function emit(sev: string, msg: string, base: LogFields, fields?: LogFields): void {
  let line = `${header(sev)} ${msg}`;
  for (const [k, v] of Object.entries({ ...base, ...fields })) {
    if (v !== undefined) line += ` ${k}=${formatValue(v)}`;
  }
  sink(line);
}

export function createLogger(base: LogFields = {}): Logger {
  const logger: Logger = {
    info: (msg, fields) => emit('I', msg, base, fields),
    warn: (msg, fields) => emit('W', msg, base, fields),
    error: (msg, fields) => emit('E', msg, base, fields),
    v: (level) => ({ info: (msg, fields) => { if (verbosity >= level) emit('I', msg, base, fields); } }),
    with: (fields) => createLogger({ ...base, ...fields }),
  };
  return logger;
}

export const rootLogger = createLogger();
