// A container's log files: the live `<n>.log` the runtime writes, and its rotations
// `<n>.log.<YYYYMMDD-hhmmss>` (the newest stays plain, older ones `.gz`), as upstream's container
// log manager names them.
import { readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** upstream's rotation timestamp layout (Go "20060102-150405"). */
const ROTATED_SUFFIX = /^(\d{8}-\d{6})(\.gz)?$/;
export const COMPRESS_SUFFIX = '.gz';
/** A rotation being compressed: not a log file yet. */
export const TMP_SUFFIX = '.tmp';

export interface LogFile {
  path: string;
  compressed: boolean;
  /** The rotation timestamp; '' for the live file. */
  stamp: string;
}

/** `YYYYMMDD-hhmmss` of a time (UTC). */
export function rotationStamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${p(d.getUTCFullYear(), 4)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}-${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}`;
}

/** The rotations of `logPath`, oldest first (compressed or not; temporaries left out). */
export async function rotatedLogs(logPath: string): Promise<LogFile[]> {
  const dir = dirname(logPath);
  const prefix = `${basename(logPath)}.`;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: LogFile[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const m = ROTATED_SUFFIX.exec(name.slice(prefix.length));
    if (!m) continue;
    out.push({ path: join(dir, name), compressed: m[2] !== undefined, stamp: m[1]! });
  }
  // fixed-width stamps sort as times; a plain and a compressed copy of one stamp cannot both stay
  return out.sort((a, b) => (a.stamp < b.stamp ? -1 : a.stamp > b.stamp ? 1 : Number(a.compressed) - Number(b.compressed)));
}
