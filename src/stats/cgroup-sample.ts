// The layout shared by every cgroup reader backend (native addon and pure-TS fs reader):
// which files are read, which keys become which field, and the batch they fill.
// native/cgroup_reader.cc keeps the same tables; the native loader compares the
// addon's fieldNames() with CGROUP_FIELD_NAMES and refuses a mismatching build.

import type { CgroupRef } from '../cgroups/ref.js';

// The ref types live with cgroup discovery; re-exported for the readers' callers.
export type { CgroupRef, CgroupV1Ref, CgroupV2Ref } from '../cgroups/ref.js';

/** Where a file lives: the unified directory, or one v1 controller directory. */
export type CgroupSlot = 'unified' | 'cpu' | 'cpuacct' | 'memory' | 'pids' | 'blkio';
/** Slot order of the native call's path table (index = slot number). */
export const CGROUP_SLOTS: readonly CgroupSlot[] = ['unified', 'cpu', 'cpuacct', 'memory', 'pids', 'blkio'];

/**
 * Every field, in the order of the values array. A name is `<file>` for a one-value file
 * or `<file>:<key>`; a name shared by v1 and v2 (cpu.stat:nr_periods, pids.*) means the
 * same file and key in both. Units are the kernel's except where the name says otherwise.
 */
export const CGROUP_FIELD_NAMES = [
  // cpu.stat (v2; nr_periods/nr_throttled also v1), cpuacct (v1)
  'cpu.stat:usage_usec',
  'cpu.stat:user_usec',
  'cpu.stat:system_usec',
  'cpu.stat:nr_periods',
  'cpu.stat:nr_throttled',
  'cpu.stat:throttled_usec',
  'cpu.stat:throttled_time', // v1, ns
  'cpuacct.usage', // v1, ns
  'cpuacct.stat:user_ns', // v1, USER_HZ ticks converted to ns
  'cpuacct.stat:system_ns',
  // memory (v2)
  'memory.current',
  'memory.max',
  'memory.swap.current',
  'memory.stat:anon',
  'memory.stat:file',
  'memory.stat:kernel',
  'memory.stat:kernel_stack',
  'memory.stat:pagetables',
  'memory.stat:sock',
  'memory.stat:shmem',
  'memory.stat:file_mapped',
  'memory.stat:file_dirty',
  'memory.stat:file_writeback',
  'memory.stat:swapcached',
  'memory.stat:anon_thp',
  'memory.stat:inactive_anon',
  'memory.stat:active_anon',
  'memory.stat:inactive_file',
  'memory.stat:active_file',
  'memory.stat:unevictable',
  'memory.stat:slab_reclaimable',
  'memory.stat:slab_unreclaimable',
  'memory.stat:slab',
  'memory.stat:workingset_refault_anon',
  'memory.stat:workingset_refault_file',
  'memory.stat:pgfault',
  'memory.stat:pgmajfault',
  'memory.events:low',
  'memory.events:high',
  'memory.events:max',
  'memory.events:oom',
  'memory.events:oom_kill',
  // memory (v1)
  'memory.usage_in_bytes',
  'memory.limit_in_bytes',
  'memory.stat:total_cache',
  'memory.stat:total_rss',
  'memory.stat:total_rss_huge',
  'memory.stat:total_shmem',
  'memory.stat:total_mapped_file',
  'memory.stat:total_dirty',
  'memory.stat:total_writeback',
  'memory.stat:total_swap',
  'memory.stat:total_pgfault',
  'memory.stat:total_pgmajfault',
  'memory.stat:total_inactive_anon',
  'memory.stat:total_active_anon',
  'memory.stat:total_inactive_file',
  'memory.stat:total_active_file',
  'memory.stat:total_unevictable',
  'memory.stat:hierarchical_memory_limit',
  'memory.oom_control:oom_kill',
  'memory.oom_control:under_oom',
  // pids (v1 and v2)
  'pids.current',
  'pids.max',
  // io (v2), summed over devices
  'io.stat:rbytes',
  'io.stat:wbytes',
  'io.stat:rios',
  'io.stat:wios',
  'io.stat:dbytes',
  'io.stat:dios',
  // blkio (v1), Read/Write summed over devices; the _recursive files include child cgroups
  'blkio.throttle.io_service_bytes_recursive:read',
  'blkio.throttle.io_service_bytes_recursive:write',
  'blkio.throttle.io_serviced_recursive:read',
  'blkio.throttle.io_serviced_recursive:write',
  // PSI (v2, or the unified dir of a v1 ref): avgN in hundredths of a percent, total in us
  'cpu.pressure:some_avg10',
  'cpu.pressure:some_avg60',
  'cpu.pressure:some_avg300',
  'cpu.pressure:some_total',
  'cpu.pressure:full_avg10',
  'cpu.pressure:full_avg60',
  'cpu.pressure:full_avg300',
  'cpu.pressure:full_total',
  'memory.pressure:some_avg10',
  'memory.pressure:some_avg60',
  'memory.pressure:some_avg300',
  'memory.pressure:some_total',
  'memory.pressure:full_avg10',
  'memory.pressure:full_avg60',
  'memory.pressure:full_avg300',
  'memory.pressure:full_total',
  'io.pressure:some_avg10',
  'io.pressure:some_avg60',
  'io.pressure:some_avg300',
  'io.pressure:some_total',
  'io.pressure:full_avg10',
  'io.pressure:full_avg60',
  'io.pressure:full_avg300',
  'io.pressure:full_total',
] as const;

export type CgroupFieldName = (typeof CGROUP_FIELD_NAMES)[number];
export const CGROUP_FIELD_COUNT = CGROUP_FIELD_NAMES.length;

/** Field name → index into a cgroup's row of the values/state arrays. */
export const CGROUP_FIELD: Readonly<Record<CgroupFieldName, number>> = Object.freeze(
  Object.fromEntries(CGROUP_FIELD_NAMES.map((name, i) => [name, i])) as Record<CgroupFieldName, number>,
);

/** state[] values. */
export const FIELD_ABSENT = 0;
export const FIELD_PRESENT = 1;
/** The file said `max`; the value slot holds UNLIMITED. */
export const FIELD_MAX = 2;
export const UNLIMITED = 0xffff_ffff_ffff_ffffn;

/** status[] values. */
export const CGROUP_OK = 0;
/** A directory of the cgroup does not exist (never created, or removed before/while reading). */
export const CGROUP_MISSING = 1;

/** Per-device I/O columns (device values array: 4 per row). */
export const DEVICE_COLUMNS = ['rbytes', 'wbytes', 'rios', 'wios'] as const;
export type DeviceColumn = (typeof DEVICE_COLUMNS)[number];

/**
 * How a file is parsed. Grammar shared by both readers (blank = space or tab):
 * - single: whole file, leading/trailing blanks and newlines ignored; `max` or an unsigned
 *   decimal; empty or anything else → absent.
 * - keyed: lines `<key><blank+><value>...`; the key starts the line; value is `max` or an
 *   unsigned decimal (else the line is ignored); the last valid line of a key wins.
 * - ticks: keyed, and the value (USER_HZ ticks) is converted to ns.
 * - psi: lines `some|full avg10=A avg60=B avg300=C total=T`; avgs as hundredths.
 * - iostat: lines `MAJ:MIN k=v ...`; rbytes..dios summed over lines, plus one device row.
 * - blkio: lines `MAJ:MIN Read|Write N`; Read/Write summed over devices, plus device rows;
 *   other ops and the device-less `Total N` line are ignored.
 * Sums wrap at 2^64, as uint64 does.
 */
export type CgroupParse = 'single' | 'keyed' | 'ticks' | 'psi' | 'iostat' | 'blkio';

export interface CgroupFileSpec {
  readonly name: string;
  readonly slot: CgroupSlot;
  readonly parse: CgroupParse;
  /** single: the field; psi/iostat/blkio: the first of consecutive fields. */
  readonly field?: CgroupFieldName;
  /** keyed/ticks: file key → field. */
  readonly keys?: ReadonlyArray<readonly [string, CgroupFieldName]>;
  /** blkio: the device columns its Read and Write lines fill (0 = rbytes/wbytes, 2 = rios/wios). */
  readonly deviceColumn?: number;
}

const PSI_FILES: CgroupFileSpec[] = [
  { name: 'cpu.pressure', slot: 'unified', parse: 'psi', field: 'cpu.pressure:some_avg10' },
  { name: 'memory.pressure', slot: 'unified', parse: 'psi', field: 'memory.pressure:some_avg10' },
  { name: 'io.pressure', slot: 'unified', parse: 'psi', field: 'io.pressure:some_avg10' },
];

/** The files read for a v2 cgroup, in reading order (all in its one directory). */
export const CGROUP_V2_FILES: readonly CgroupFileSpec[] = [
  {
    name: 'cpu.stat',
    slot: 'unified',
    parse: 'keyed',
    keys: [
      ['usage_usec', 'cpu.stat:usage_usec'],
      ['user_usec', 'cpu.stat:user_usec'],
      ['system_usec', 'cpu.stat:system_usec'],
      ['nr_periods', 'cpu.stat:nr_periods'],
      ['nr_throttled', 'cpu.stat:nr_throttled'],
      ['throttled_usec', 'cpu.stat:throttled_usec'],
    ],
  },
  { name: 'memory.current', slot: 'unified', parse: 'single', field: 'memory.current' },
  { name: 'memory.max', slot: 'unified', parse: 'single', field: 'memory.max' },
  {
    name: 'memory.stat',
    slot: 'unified',
    parse: 'keyed',
    // In the kernel's printing order, so the lookup usually hits on the first try.
    keys: [
      ['anon', 'memory.stat:anon'],
      ['file', 'memory.stat:file'],
      ['kernel', 'memory.stat:kernel'],
      ['kernel_stack', 'memory.stat:kernel_stack'],
      ['pagetables', 'memory.stat:pagetables'],
      ['sock', 'memory.stat:sock'],
      ['shmem', 'memory.stat:shmem'],
      ['file_mapped', 'memory.stat:file_mapped'],
      ['file_dirty', 'memory.stat:file_dirty'],
      ['file_writeback', 'memory.stat:file_writeback'],
      ['swapcached', 'memory.stat:swapcached'],
      ['anon_thp', 'memory.stat:anon_thp'],
      ['inactive_anon', 'memory.stat:inactive_anon'],
      ['active_anon', 'memory.stat:active_anon'],
      ['inactive_file', 'memory.stat:inactive_file'],
      ['active_file', 'memory.stat:active_file'],
      ['unevictable', 'memory.stat:unevictable'],
      ['slab_reclaimable', 'memory.stat:slab_reclaimable'],
      ['slab_unreclaimable', 'memory.stat:slab_unreclaimable'],
      ['slab', 'memory.stat:slab'],
      ['workingset_refault_anon', 'memory.stat:workingset_refault_anon'],
      ['workingset_refault_file', 'memory.stat:workingset_refault_file'],
      ['pgfault', 'memory.stat:pgfault'],
      ['pgmajfault', 'memory.stat:pgmajfault'],
    ],
  },
  {
    name: 'memory.events',
    slot: 'unified',
    parse: 'keyed',
    keys: [
      ['low', 'memory.events:low'],
      ['high', 'memory.events:high'],
      ['max', 'memory.events:max'],
      ['oom', 'memory.events:oom'],
      ['oom_kill', 'memory.events:oom_kill'],
    ],
  },
  { name: 'memory.swap.current', slot: 'unified', parse: 'single', field: 'memory.swap.current' },
  { name: 'pids.current', slot: 'unified', parse: 'single', field: 'pids.current' },
  { name: 'pids.max', slot: 'unified', parse: 'single', field: 'pids.max' },
  { name: 'io.stat', slot: 'unified', parse: 'iostat', field: 'io.stat:rbytes' },
  ...PSI_FILES,
];

/** The files read for a v1 cgroup, in reading order; a file whose slot has no dir is skipped. */
export const CGROUP_V1_FILES: readonly CgroupFileSpec[] = [
  {
    name: 'cpu.stat',
    slot: 'cpu',
    parse: 'keyed',
    keys: [
      ['nr_periods', 'cpu.stat:nr_periods'],
      ['nr_throttled', 'cpu.stat:nr_throttled'],
      ['throttled_time', 'cpu.stat:throttled_time'],
    ],
  },
  { name: 'cpuacct.usage', slot: 'cpuacct', parse: 'single', field: 'cpuacct.usage' },
  {
    name: 'cpuacct.stat',
    slot: 'cpuacct',
    parse: 'ticks',
    keys: [
      ['user', 'cpuacct.stat:user_ns'],
      ['system', 'cpuacct.stat:system_ns'],
    ],
  },
  { name: 'memory.usage_in_bytes', slot: 'memory', parse: 'single', field: 'memory.usage_in_bytes' },
  { name: 'memory.limit_in_bytes', slot: 'memory', parse: 'single', field: 'memory.limit_in_bytes' },
  {
    name: 'memory.stat',
    slot: 'memory',
    parse: 'keyed',
    keys: [
      ['hierarchical_memory_limit', 'memory.stat:hierarchical_memory_limit'],
      ['total_cache', 'memory.stat:total_cache'],
      ['total_rss', 'memory.stat:total_rss'],
      ['total_rss_huge', 'memory.stat:total_rss_huge'],
      ['total_shmem', 'memory.stat:total_shmem'],
      ['total_mapped_file', 'memory.stat:total_mapped_file'],
      ['total_dirty', 'memory.stat:total_dirty'],
      ['total_writeback', 'memory.stat:total_writeback'],
      ['total_swap', 'memory.stat:total_swap'],
      ['total_pgfault', 'memory.stat:total_pgfault'],
      ['total_pgmajfault', 'memory.stat:total_pgmajfault'],
      ['total_inactive_anon', 'memory.stat:total_inactive_anon'],
      ['total_active_anon', 'memory.stat:total_active_anon'],
      ['total_inactive_file', 'memory.stat:total_inactive_file'],
      ['total_active_file', 'memory.stat:total_active_file'],
      ['total_unevictable', 'memory.stat:total_unevictable'],
    ],
  },
  {
    name: 'memory.oom_control',
    slot: 'memory',
    parse: 'keyed',
    keys: [
      ['under_oom', 'memory.oom_control:under_oom'],
      ['oom_kill', 'memory.oom_control:oom_kill'],
    ],
  },
  { name: 'pids.current', slot: 'pids', parse: 'single', field: 'pids.current' },
  { name: 'pids.max', slot: 'pids', parse: 'single', field: 'pids.max' },
  {
    name: 'blkio.throttle.io_service_bytes_recursive',
    slot: 'blkio',
    parse: 'blkio',
    field: 'blkio.throttle.io_service_bytes_recursive:read',
    deviceColumn: 0,
  },
  {
    name: 'blkio.throttle.io_serviced_recursive',
    slot: 'blkio',
    parse: 'blkio',
    field: 'blkio.throttle.io_serviced_recursive:read',
    deviceColumn: 2,
  },
  ...PSI_FILES,
];

/** Directory of a slot in a ref, or undefined when the ref has none there. */
export function slotDir(ref: CgroupRef, slot: CgroupSlot): string | undefined {
  if (ref.version === 2) return slot === 'unified' ? ref.dir : undefined;
  return ref[slot];
}

/** The files a reader opens for a ref: [spec, directory] in reading order. */
export function filesOfRef(ref: CgroupRef): Array<readonly [CgroupFileSpec, string]> {
  const out: Array<readonly [CgroupFileSpec, string]> = [];
  if (ref.version === 2) {
    for (const spec of CGROUP_V2_FILES) out.push([spec, ref.dir]);
    return out;
  }
  for (const spec of CGROUP_V1_FILES) {
    const dir = ref[spec.slot];
    if (dir) out.push([spec, dir]);
  }
  return out;
}

/** The files the readers open for a ref, in reading order. */
export function cgroupFilesFor(ref: CgroupRef): string[] {
  return filesOfRef(ref).map(([spec, dir]) => `${dir}/${spec.name}`);
}

/** Throws a TypeError naming the entry when a ref cannot be read at all. */
export function validateCgroupRef(ref: CgroupRef, index: number): void {
  if (ref === null || typeof ref !== 'object') throw new TypeError(`cgroup ref ${index}: not an object`);
  if (ref.version === 2) {
    if (typeof ref.dir !== 'string' || ref.dir === '') throw new TypeError(`cgroup ref ${index}: v2 ref needs a dir`);
    return;
  }
  if (ref.version === 1) {
    let any = false;
    for (const slot of CGROUP_SLOTS) {
      const dir = ref[slot];
      if (dir === undefined) continue;
      if (typeof dir !== 'string') throw new TypeError(`cgroup ref ${index}: ${slot} must be a string`);
      if (dir !== '') any = true;
    }
    if (!any) throw new TypeError(`cgroup ref ${index}: v1 ref needs at least one controller dir`);
    return;
  }
  throw new TypeError(`cgroup ref ${index}: version must be 1 or 2`);
}

/** The arrays a backend fills; identical in layout for every backend. */
export interface RawCgroupBatch {
  /** [count]: CGROUP_OK or CGROUP_MISSING. */
  readonly status: Uint8Array;
  /** [count * CGROUP_FIELD_COUNT]: field values; 0 when absent, UNLIMITED when `max`. */
  readonly values: BigUint64Array;
  /** [count * CGROUP_FIELD_COUNT]: FIELD_ABSENT / FIELD_PRESENT / FIELD_MAX. */
  readonly state: Uint8Array;
  /** [rows * 3]: cgroup index, device major, device minor. */
  readonly devIds: Uint32Array;
  /** [rows * 4]: DEVICE_COLUMNS; 0 when the kernel printed no such key for the device. */
  readonly devValues: BigUint64Array;
}

export type CgroupFieldValue = bigint | 'max';

/** A plain object for one cgroup: present fields only (tests, Summary API). */
export interface CgroupSampleObject {
  status: 'ok' | 'missing';
  fields: Partial<Record<CgroupFieldName, CgroupFieldValue>>;
  devices: Array<{ major: number; minor: number } & Record<DeviceColumn, bigint>>;
}

/** One snapshot of a list of cgroups, in the order of the list. */
export class CgroupSampleBatch implements RawCgroupBatch {
  readonly count: number;
  readonly fieldCount = CGROUP_FIELD_COUNT;
  readonly status: Uint8Array;
  readonly values: BigUint64Array;
  readonly state: Uint8Array;
  readonly devIds: Uint32Array;
  readonly devValues: BigUint64Array;

  constructor(raw: RawCgroupBatch) {
    const count = raw.status.length;
    if (raw.values.length !== count * CGROUP_FIELD_COUNT || raw.state.length !== count * CGROUP_FIELD_COUNT) {
      throw new RangeError('cgroup batch: values/state length does not match count * field count');
    }
    if (raw.devIds.length % 3 !== 0 || raw.devValues.length !== (raw.devIds.length / 3) * DEVICE_COLUMNS.length) {
      throw new RangeError('cgroup batch: device arrays do not match');
    }
    this.count = count;
    this.status = raw.status;
    this.values = raw.values;
    this.state = raw.state;
    this.devIds = raw.devIds;
    this.devValues = raw.devValues;
  }

  ok(i: number): boolean {
    return this.status[i] === CGROUP_OK;
  }

  has(i: number, field: CgroupFieldName): boolean {
    return this.state[i * CGROUP_FIELD_COUNT + CGROUP_FIELD[field]] !== FIELD_ABSENT;
  }

  /** The field's value, 'max' when unlimited, undefined when absent. */
  get(i: number, field: CgroupFieldName): CgroupFieldValue | undefined {
    const at = i * CGROUP_FIELD_COUNT + CGROUP_FIELD[field];
    const s = this.state[at];
    if (s === FIELD_PRESENT) return this.values[at];
    if (s === FIELD_MAX) return 'max';
    return undefined;
  }

  /** The value as a number (rounded past 2^53), Infinity for 'max', undefined when absent. */
  number(i: number, field: CgroupFieldName): number | undefined {
    const at = i * CGROUP_FIELD_COUNT + CGROUP_FIELD[field];
    const s = this.state[at];
    if (s === FIELD_PRESENT) return Number(this.values[at]);
    if (s === FIELD_MAX) return Infinity;
    return undefined;
  }

  /** Device rows of cgroup i, as indexes into devIds/3 and devValues/4. */
  deviceRows(i: number): number[] {
    const rows: number[] = [];
    for (let r = 0; r * 3 < this.devIds.length; r++) if (this.devIds[r * 3] === i) rows.push(r);
    return rows;
  }

  toObject(i: number): CgroupSampleObject {
    if (!Number.isInteger(i) || i < 0 || i >= this.count) throw new RangeError(`cgroup index ${i} out of range`);
    const fields: Partial<Record<CgroupFieldName, CgroupFieldValue>> = {};
    for (const name of CGROUP_FIELD_NAMES) {
      const v = this.get(i, name);
      if (v !== undefined) fields[name] = v;
    }
    const devices = this.deviceRows(i).map((r) => ({
      major: this.devIds[r * 3 + 1],
      minor: this.devIds[r * 3 + 2],
      rbytes: this.devValues[r * 4],
      wbytes: this.devValues[r * 4 + 1],
      rios: this.devValues[r * 4 + 2],
      wios: this.devValues[r * 4 + 3],
    }));
    return { status: this.status[i] === CGROUP_OK ? 'ok' : 'missing', fields, devices };
  }
}

/** A cgroup counter backend (native addon or fs). */
export interface CgroupReader {
  readonly backend: 'native' | 'fs';
  readCgroups(list: readonly CgroupRef[]): Promise<CgroupSampleBatch>;
  /** Releases what the reader keeps for cgroups no longer read (kept-open descriptors). */
  forget?(list: readonly CgroupRef[]): void;
}
