// The native cgroup backend: one addon call per snapshot for the whole list of cgroups.
import {
  loadNative,
  type NativeAddon,
  type NativeCgroupFdTable,
  type NativeLoadResult,
  type NativeRawCgroupBatch,
} from '../native.js';
import { realClock, type Clock } from '../util/clock.js';
import {
  CGROUP_FIELD_NAMES,
  CGROUP_SLOTS,
  CgroupSampleBatch,
  validateCgroupRef,
  type CgroupReader,
  type CgroupRef,
} from './cgroup-sample.js';

type Paths = string | Uint8Array;
type ReadSync = (kinds: Uint8Array, paths: Paths, keepOpen?: boolean, recheckAbsent?: boolean) => NativeRawCgroupBatch;
type ReadAsync = (kinds: Uint8Array, paths: Paths, keepOpen?: boolean, recheckAbsent?: boolean) => Promise<NativeRawCgroupBatch>;

/**
 * How often the kept-open table opens again the files it found absent (a v2 cgroup without a
 * memory controller, a v1 cgroup outside the unified hierarchy): a controller enabled later
 * shows up within this period; a cgroup made again (forget(), then a new entry) at once.
 */
export const ABSENT_RECHECK_MS = 60_000;

/** The addon's kept-open descriptor table, when the build has one. */
export interface NativeFdTableOps {
  forget(dirs: string): void;
  stats(): NativeCgroupFdTable;
  setBudget(n: number): number;
}

/** Every directory a ref names (the table keeps descriptors per directory). */
export function dirsOfRef(ref: CgroupRef): string[] {
  if (ref.version === 2) return [ref.dir];
  const out: string[] = [];
  for (const slot of CGROUP_SLOTS) {
    const dir = ref[slot];
    if (dir !== undefined && dir !== '') out.push(dir);
  }
  return out;
}

/** The addon's call arguments for a list: versions, and 6 NUL-terminated dirs per cgroup. */
export function encodeCgroupRefs(list: readonly CgroupRef[]): { kinds: Uint8Array; paths: string } {
  const kinds = new Uint8Array(list.length);
  const parts: string[] = new Array<string>(list.length * CGROUP_SLOTS.length);
  let at = 0;
  for (let i = 0; i < list.length; i++) {
    const ref = list[i]!;
    validateCgroupRef(ref, i);
    kinds[i] = ref.version;
    if (ref.version === 2) {
      if (ref.dir.includes('\0')) throw new TypeError(`cgroup ref ${i}: dir contains NUL`);
      parts[at++] = ref.dir;
      for (let s = 1; s < CGROUP_SLOTS.length; s++) parts[at++] = '';
    } else {
      for (const slot of CGROUP_SLOTS) {
        const dir = ref[slot];
        if (dir !== undefined && dir.includes('\0')) throw new TypeError(`cgroup ref ${i}: ${slot} contains NUL`);
        parts[at++] = dir ?? '';
      }
    }
  }
  return { kinds, paths: parts.length === 0 ? '' : parts.join('\0') + '\0' };
}

/**
 * The last list's encoding (versions and the paths as UTF-8 bytes), reused while the next list
 * names the same dirs: the stats provider reads the same cgroups every snapshot, and joining and
 * encoding 6 dirs per cgroup costs about a millisecond per thousand v1 cgroups.
 */
const utf8 = new TextEncoder();

export class EncodedRefsCache {
  #kinds: Uint8Array = new Uint8Array(0);
  /** CGROUP_SLOTS.length values per ref, as the ref gave them. */
  #slots: Array<string | undefined> = [];
  #paths: Uint8Array = new Uint8Array(0);

  encode(list: readonly CgroupRef[]): { kinds: Uint8Array; paths: Uint8Array } {
    if (!this.#same(list)) {
      const { kinds, paths } = encodeCgroupRefs(list);
      const slots = new Array<string | undefined>(list.length * CGROUP_SLOTS.length);
      for (let i = 0; i < list.length; i++) {
        const ref = list[i]!;
        for (let s = 0; s < CGROUP_SLOTS.length; s++) {
          slots[i * CGROUP_SLOTS.length + s] = ref.version === 2 ? (s === 0 ? ref.dir : undefined) : ref[CGROUP_SLOTS[s]!];
        }
      }
      this.#kinds = kinds;
      this.#slots = slots;
      this.#paths = utf8.encode(paths);
    }
    return { kinds: this.#kinds, paths: this.#paths };
  }

  #same(list: readonly CgroupRef[]): boolean {
    if (list.length !== this.#kinds.length) return false;
    const slots = this.#slots;
    const n = CGROUP_SLOTS.length;
    for (let i = 0; i < list.length; i++) {
      const ref = list[i];
      if (ref === null || typeof ref !== 'object' || ref.version !== this.#kinds[i]) return false;
      if (ref.version === 2) {
        if (ref.dir !== slots[i * n]) return false;
        continue;
      }
      for (let s = 0; s < n; s++) if (ref[CGROUP_SLOTS[s]!] !== slots[i * n + s]) return false;
    }
    return true;
  }
}

export interface NativeCgroupReaderOptions {
  clockTicks?: number;
  /**
   * Read through descriptors kept open between snapshots (pread at offset 0), within the
   * addon's descriptor budget. Default: true when the addon has the table.
   */
  keepOpen?: boolean;
  fdTable?: NativeFdTableOps;
  /** Clock of the absent-file re-check period (default realClock). */
  clock?: Clock;
  /** Default ABSENT_RECHECK_MS. */
  absentRecheckMs?: number;
}

export class NativeCgroupReader implements CgroupReader {
  readonly backend = 'native' as const;
  /** USER_HZ the addon converts cpuacct.stat with (sysconf(_SC_CLK_TCK)). */
  readonly clockTicks: number;
  /** Whether reads go through kept-open descriptors. */
  readonly keepOpen: boolean;
  readonly #readSync: ReadSync;
  readonly #readAsync: ReadAsync;
  readonly #table?: NativeFdTableOps;
  readonly #clock: Clock;
  readonly #absentRecheckMs: number;
  #lastRecheck: number;
  readonly #encoded = new EncodedRefsCache();

  constructor(readSync: ReadSync, readAsync: ReadAsync, options: NativeCgroupReaderOptions | number = {}) {
    const o = typeof options === 'number' ? { clockTicks: options } : options;
    this.#readSync = readSync;
    this.#readAsync = readAsync;
    this.clockTicks = o.clockTicks ?? 100;
    this.#table = o.fdTable;
    this.keepOpen = (o.keepOpen ?? true) && o.fdTable !== undefined;
    this.#clock = o.clock ?? realClock;
    this.#absentRecheckMs = o.absentRecheckMs ?? ABSENT_RECHECK_MS;
    this.#lastRecheck = this.#clock.now();
  }

  /** The same addon, reading with or without kept-open descriptors (benchmarks compare both). */
  withKeepOpen(keepOpen: boolean): NativeCgroupReader {
    return new NativeCgroupReader(this.#readSync, this.#readAsync, {
      clockTicks: this.clockTicks,
      keepOpen,
      fdTable: this.#table,
      clock: this.#clock,
      absentRecheckMs: this.#absentRecheckMs,
    });
  }

  /** Reads off the main thread (one libuv pool task for the whole list). */
  async readCgroups(list: readonly CgroupRef[]): Promise<CgroupSampleBatch> {
    const { kinds, paths } = this.#encoded.encode(list);
    return new CgroupSampleBatch(await this.#readAsync(kinds, paths, this.keepOpen, this.#recheckDue()));
  }

  /** Reads on the calling thread: for benchmarks and tools, never the agent's main loop. */
  readCgroupsSync(list: readonly CgroupRef[]): CgroupSampleBatch {
    const { kinds, paths } = this.#encoded.encode(list);
    return new CgroupSampleBatch(this.#readSync(kinds, paths, this.keepOpen, this.#recheckDue()));
  }

  /** Whether this read opens again the files found absent (once per re-check period). */
  #recheckDue(): boolean {
    if (!this.keepOpen) return false;
    const now = this.#clock.now();
    if (now - this.#lastRecheck < this.#absentRecheckMs) return false;
    this.#lastRecheck = now;
    return true;
  }

  /** Closes the kept descriptors of cgroups no longer watched (a removed container). */
  forget(list: readonly CgroupRef[]): void {
    if (!this.#table || list.length === 0) return;
    const dirs = list.flatMap(dirsOfRef);
    if (dirs.length > 0) this.#table.forget(dirs.join('\0') + '\0');
  }

  /** The descriptor table's budget and counters, when the addon has one. */
  fdTable(): NativeCgroupFdTable | undefined {
    return this.#table?.stats();
  }

  /** Caps the kept descriptors (never above the derived budget); returns the budget in force. */
  setFdBudget(n: number): number | undefined {
    return this.#table?.setBudget(n);
  }
}

/**
 * The native reader, or the reason it cannot be used (addon absent or stale, or its field
 * table differs from CGROUP_FIELD_NAMES). `loaded` defaults to loadNative().
 */
export function createNativeCgroupReader(
  loaded: NativeLoadResult = loadNative(),
  options: { keepOpen?: boolean; clock?: Clock; absentRecheckMs?: number } = {},
): {
  reader?: NativeCgroupReader;
  error?: string;
} {
  const addon: NativeAddon | undefined = loaded.addon;
  if (!addon) return { error: loaded.error ?? 'native addon unavailable' };
  const { fieldNames, readCgroupsSync, readCgroupsAsync } = addon;
  if (typeof fieldNames !== 'function' || typeof readCgroupsSync !== 'function' || typeof readCgroupsAsync !== 'function') {
    return { error: 'native addon has no cgroup reader (stale build?): rebuild it (npm run build:native)' };
  }
  const names = fieldNames.call(addon);
  const mismatch = fieldTableMismatch(names);
  if (mismatch) return { error: `native cgroup reader field table differs from the TypeScript one: ${mismatch}` };
  const ticks = typeof addon.clockTicks === 'function' ? addon.clockTicks() : 100;
  const { forgetCgroups, cgroupFdTable, setCgroupFdBudget } = addon;
  const fdTable: NativeFdTableOps | undefined =
    typeof forgetCgroups === 'function' && typeof cgroupFdTable === 'function' && typeof setCgroupFdBudget === 'function'
      ? { forget: forgetCgroups.bind(addon), stats: cgroupFdTable.bind(addon), setBudget: setCgroupFdBudget.bind(addon) }
      : undefined;
  return {
    reader: new NativeCgroupReader(readCgroupsSync.bind(addon), readCgroupsAsync.bind(addon), {
      clockTicks: ticks,
      keepOpen: options.keepOpen,
      fdTable,
      clock: options.clock,
      absentRecheckMs: options.absentRecheckMs,
    }),
  };
}

function fieldTableMismatch(names: readonly string[]): string | undefined {
  if (!Array.isArray(names)) return 'fieldNames() did not return an array';
  const n = Math.max(names.length, CGROUP_FIELD_NAMES.length);
  for (let i = 0; i < n; i++) {
    if (names[i] !== CGROUP_FIELD_NAMES[i]) {
      return `field ${i} is ${JSON.stringify(names[i])} in the addon, ${JSON.stringify(CGROUP_FIELD_NAMES[i])} expected`;
    }
  }
  return undefined;
}
