// The native cgroup backend: one addon call per snapshot for the whole list of cgroups.
import { loadNative, type NativeAddon, type NativeLoadResult, type NativeRawCgroupBatch } from '../native.js';
import {
  CGROUP_FIELD_NAMES,
  CGROUP_SLOTS,
  CgroupSampleBatch,
  validateCgroupRef,
  type CgroupReader,
  type CgroupRef,
} from './cgroup-sample.js';

type ReadSync = (kinds: Uint8Array, paths: string) => NativeRawCgroupBatch;
type ReadAsync = (kinds: Uint8Array, paths: string) => Promise<NativeRawCgroupBatch>;

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

export class NativeCgroupReader implements CgroupReader {
  readonly backend = 'native' as const;
  /** USER_HZ the addon converts cpuacct.stat with (sysconf(_SC_CLK_TCK)). */
  readonly clockTicks: number;
  readonly #readSync: ReadSync;
  readonly #readAsync: ReadAsync;

  constructor(readSync: ReadSync, readAsync: ReadAsync, clockTicks = 100) {
    this.#readSync = readSync;
    this.#readAsync = readAsync;
    this.clockTicks = clockTicks;
  }

  /** Reads off the main thread (one libuv pool task for the whole list). */
  async readCgroups(list: readonly CgroupRef[]): Promise<CgroupSampleBatch> {
    const { kinds, paths } = encodeCgroupRefs(list);
    return new CgroupSampleBatch(await this.#readAsync(kinds, paths));
  }

  /** Reads on the calling thread: for benchmarks and tools, never the agent's main loop. */
  readCgroupsSync(list: readonly CgroupRef[]): CgroupSampleBatch {
    const { kinds, paths } = encodeCgroupRefs(list);
    return new CgroupSampleBatch(this.#readSync(kinds, paths));
  }
}

/**
 * The native reader, or the reason it cannot be used (addon absent or stale, or its field
 * table differs from CGROUP_FIELD_NAMES). `loaded` defaults to loadNative().
 */
export function createNativeCgroupReader(loaded: NativeLoadResult = loadNative()): {
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
  return { reader: new NativeCgroupReader(readCgroupsSync.bind(addon), readCgroupsAsync.bind(addon), ticks) };
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
