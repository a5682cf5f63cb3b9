// The pure-TypeScript cgroup backend: same files, same grammar, same output arrays as the
// native reader, through fs.promises with bounded concurrency. Used when the addon is absent.
import { access, open } from 'node:fs/promises';

import {
  CGROUP_FIELD,
  CGROUP_FIELD_COUNT,
  CGROUP_MISSING,
  CGROUP_OK,
  CgroupSampleBatch,
  DEVICE_COLUMNS,
  FIELD_ABSENT,
  FIELD_MAX,
  FIELD_PRESENT,
  UNLIMITED,
  filesOfRef,
  validateCgroupRef,
  type CgroupFileSpec,
  type CgroupReader,
  type CgroupRef,
} from './cgroup-sample.js';

export interface FsCgroupReaderOptions {
  /** Cgroups read at once (each reads its files in sequence). Default 16. */
  concurrency?: number;
  /** USER_HZ for cpuacct.stat; Linux fixes it at 100 on every mainstream architecture. */
  clockTicksPerSecond?: number;
}

const INITIAL_BUFFER = 16384;
const U32_MAX = 0xffff_ffffn;

type State = typeof FIELD_ABSENT | typeof FIELD_PRESENT | typeof FIELD_MAX;

/** The whole string as `max` or an unsigned decimal fitting in 64 bits. */
function parseValue(s: string): [State, bigint] {
  if (s === 'max') return [FIELD_MAX, UNLIMITED];
  if (!/^[0-9]+$/.test(s)) return [FIELD_ABSENT, 0n];
  const v = BigInt(s);
  return v > UNLIMITED ? [FIELD_ABSENT, 0n] : [FIELD_PRESENT, v];
}

function parseHundredths(s: string): bigint | undefined {
  const dot = s.indexOf('.');
  const [st, whole] = parseValue(dot < 0 ? s : s.slice(0, dot));
  if (st !== FIELD_PRESENT) return undefined;
  let frac = 0n;
  if (dot >= 0) {
    const f = s.slice(dot + 1);
    if (!/^[0-9]+$/.test(f)) return undefined;
    frac = BigInt(f[0]!) * 10n + (f.length > 1 ? BigInt(f[1]!) : 0n);
  }
  const v = whole * 100n + frac;
  return v > UNLIMITED ? undefined : v;
}

function parseDevice(s: string): [number, number] | undefined {
  const colon = s.indexOf(':');
  if (colon < 0) return undefined;
  const [sa, a] = parseValue(s.slice(0, colon));
  const [sb, b] = parseValue(s.slice(colon + 1));
  if (sa !== FIELD_PRESENT || sb !== FIELD_PRESENT || a > U32_MAX || b > U32_MAX) return undefined;
  return [Number(a), Number(b)];
}

const BLANKS = /[ \t]+/;
const isBlank = (c: string | undefined): boolean => c === ' ' || c === '\t';
const trimSpace = (s: string): string => s.replace(/^[ \t\n\r]+|[ \t\n\r]+$/g, '');
const tokens = (line: string): string[] => line.split(BLANKS).filter((t) => t !== '');

interface DeviceRow {
  major: number;
  minor: number;
  v: bigint[];
}

/** Key table of keyed specs, built once. */
const keyMaps = new Map<CgroupFileSpec, Map<string, number>>();
function keyMap(spec: CgroupFileSpec): Map<string, number> {
  let m = keyMaps.get(spec);
  if (!m) {
    m = new Map((spec.keys ?? []).map(([k, f]) => [k, CGROUP_FIELD[f]]));
    keyMaps.set(spec, m);
  }
  return m;
}

/** Parses one file's text into cgroup row `base` (mirror of the native parser). */
class RowWriter {
  constructor(
    private readonly values: BigUint64Array,
    private readonly state: Uint8Array,
    private readonly base: number,
    private readonly devices: DeviceRow[],
    private readonly ticks: bigint,
  ) {}

  private set(field: number, v: bigint, s: State): void {
    this.values[this.base + field] = v;
    this.state[this.base + field] = s;
  }

  private add(field: number, v: bigint): void {
    const at = this.base + field;
    this.values[at] = this.state[at] === FIELD_PRESENT ? BigInt.asUintN(64, this.values[at]! + v) : v;
    this.state[at] = FIELD_PRESENT;
  }

  private device(major: number, minor: number): DeviceRow {
    for (const row of this.devices) if (row.major === major && row.minor === minor) return row;
    const row = { major, minor, v: [0n, 0n, 0n, 0n] };
    this.devices.push(row);
    return row;
  }

  parse(spec: CgroupFileSpec, text: string): void {
    if (spec.parse === 'single') {
      const [s, v] = parseValue(trimSpace(text));
      if (s !== FIELD_ABSENT) this.set(CGROUP_FIELD[spec.field!], v, s);
      return;
    }
    for (const line of text.split('\n')) this.line(spec, line);
  }

  private line(spec: CgroupFileSpec, line: string): void {
    switch (spec.parse) {
      case 'keyed':
      case 'ticks': {
        // The key starts the line and a blank must follow it.
        if (line === '' || isBlank(line[0])) return;
        const t = line.split(BLANKS);
        if (t.length < 2) return;
        const field = keyMap(spec).get(t[0]!);
        if (field === undefined) return;
        let [s, v] = parseValue(t[1]!);
        if (s === FIELD_ABSENT) return;
        if (s === FIELD_PRESENT && spec.parse === 'ticks') {
          v = (v * 1_000_000_000n) / this.ticks;
          if (v > UNLIMITED) return;
        }
        this.set(field, v, s);
        return;
      }
      case 'psi': {
        const t = tokens(line);
        if (t[0] !== 'some' && t[0] !== 'full') return;
        const base = CGROUP_FIELD[spec.field!] + (t[0] === 'some' ? 0 : 4);
        for (let k = 1; k < t.length; k++) {
          const eq = t[k]!.indexOf('=');
          if (eq < 0) continue;
          const key = t[k]!.slice(0, eq);
          const val = t[k]!.slice(eq + 1);
          const off = key === 'avg10' ? 0 : key === 'avg60' ? 1 : key === 'avg300' ? 2 : key === 'total' ? 3 : -1;
          if (off < 0) continue;
          if (off < 3) {
            const v = parseHundredths(val);
            if (v !== undefined) this.set(base + off, v, FIELD_PRESENT);
          } else {
            const [s, v] = parseValue(val);
            if (s === FIELD_PRESENT) this.set(base + off, v, FIELD_PRESENT);
          }
        }
        return;
      }
      case 'iostat': {
        const t = tokens(line);
        const dev = t.length > 0 ? parseDevice(t[0]!) : undefined;
        if (!dev) return;
        const row = this.device(dev[0], dev[1]);
        const first = CGROUP_FIELD[spec.field!];
        for (let k = 1; k < t.length; k++) {
          const eq = t[k]!.indexOf('=');
          if (eq < 0) continue;
          const off = IO_KEYS.indexOf(t[k]!.slice(0, eq));
          if (off < 0) continue;
          const [s, v] = parseValue(t[k]!.slice(eq + 1));
          if (s !== FIELD_PRESENT) continue;
          this.add(first + off, v);
          if (off < DEVICE_COLUMNS.length) row.v[off] = BigInt.asUintN(64, row.v[off]! + v);
        }
        return;
      }
      case 'blkio': {
        const t = tokens(line);
        const dev = t.length > 0 ? parseDevice(t[0]!) : undefined;
        if (!dev || t.length < 3) return;
        const off = t[1] === 'Read' ? 0 : t[1] === 'Write' ? 1 : -1;
        if (off < 0) return;
        const [s, v] = parseValue(t[2]!);
        if (s !== FIELD_PRESENT) return;
        this.add(CGROUP_FIELD[spec.field!] + off, v);
        const row = this.device(dev[0], dev[1]);
        const col = spec.deviceColumn! + off;
        row.v[col] = BigInt.asUintN(64, row.v[col]! + v);
        return;
      }
    }
  }
}

const IO_KEYS = ['rbytes', 'wbytes', 'rios', 'wios', 'dbytes', 'dios'];

type ReadOutcome = { text: string } | { code: string };

/** open/read/close into a reused buffer; a short read is the whole file, as in the native reader. */
async function readWhole(file: string, scratch: { buf: Buffer }): Promise<ReadOutcome> {
  let fh;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    return { code: (err as NodeJS.ErrnoException).code ?? 'EIO' };
  }
  try {
    let { buf } = scratch;
    let len = (await fh.read(buf, 0, buf.length, null)).bytesRead;
    while (len === buf.length) {
      const bigger = Buffer.allocUnsafe(buf.length * 2);
      buf.copy(bigger, 0, 0, len);
      scratch.buf = buf = bigger;
      const n = (await fh.read(buf, len, buf.length - len, null)).bytesRead;
      if (n === 0) break;
      len += n;
    }
    return { text: buf.toString('latin1', 0, len) };
  } catch (err) {
    return { code: (err as NodeJS.ErrnoException).code ?? 'EIO' };
  } finally {
    await fh.close().catch(() => undefined);
  }
}

async function dirGone(dir: string): Promise<boolean> {
  try {
    await access(dir);
    return false;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR';
  }
}

export class FsCgroupReader implements CgroupReader {
  readonly backend = 'fs' as const;
  readonly #concurrency: number;
  readonly #ticks: bigint;

  constructor(options: FsCgroupReaderOptions = {}) {
    const concurrency = options.concurrency ?? 16;
    const ticks = options.clockTicksPerSecond ?? 100;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('concurrency must be a positive integer');
    if (!Number.isInteger(ticks) || ticks < 1) throw new RangeError('clockTicksPerSecond must be a positive integer');
    this.#concurrency = concurrency;
    this.#ticks = BigInt(ticks);
  }

  async readCgroups(list: readonly CgroupRef[]): Promise<CgroupSampleBatch> {
    list.forEach(validateCgroupRef);
    const count = list.length;
    const status = new Uint8Array(count);
    const values = new BigUint64Array(count * CGROUP_FIELD_COUNT);
    const state = new Uint8Array(count * CGROUP_FIELD_COUNT);
    const devices: DeviceRow[][] = new Array<DeviceRow[]>(count);

    let next = 0;
    const worker = async (): Promise<void> => {
      const scratch = { buf: Buffer.allocUnsafe(INITIAL_BUFFER) };
      while (next < count) {
        const i = next++;
        const rows: DeviceRow[] = [];
        const base = i * CGROUP_FIELD_COUNT;
        const writer = new RowWriter(values, state, base, rows, this.#ticks);
        let missing = false;
        const ref = list[i]!;
        for (const [spec, dir] of filesOfRef(ref)) {
          const got = await readWhole(`${dir}/${spec.name}`, scratch);
          if ('code' in got) {
            // A missing file is an absent field unless its whole directory is gone; a v1
            // cgroup's unified dir only adds PSI, so its absence does not make it missing.
            const vanishes = ref.version === 2 || spec.slot !== 'unified';
            if ((got.code === 'ENOENT' || got.code === 'ENODEV') && vanishes && (await dirGone(dir))) {
              missing = true;
              break;
            }
            continue;
          }
          writer.parse(spec, got.text);
        }
        if (missing) {
          values.fill(0n, base, base + CGROUP_FIELD_COUNT);
          state.fill(FIELD_ABSENT, base, base + CGROUP_FIELD_COUNT);
          rows.length = 0;
        }
        status[i] = missing ? CGROUP_MISSING : CGROUP_OK;
        devices[i] = rows;
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, count) }, worker));

    let nrows = 0;
    for (const rows of devices) nrows += rows.length;
    const devIds = new Uint32Array(nrows * 3);
    const devValues = new BigUint64Array(nrows * DEVICE_COLUMNS.length);
    let r = 0;
    for (let i = 0; i < count; i++) {
      for (const row of devices[i]!) {
        devIds.set([i, row.major, row.minor], r * 3);
        devValues.set(row.v, r * DEVICE_COLUMNS.length);
        r++;
      }
    }
    return new CgroupSampleBatch({ status, values, state, devIds, devValues });
  }
}
