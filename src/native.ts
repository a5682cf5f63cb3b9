// Loader of the native addon (build/Release/kubelet_ts_native.node under the package root).
// Never throws: when the addon cannot be used it returns a reason, and each feature falls
// back to its pure-TypeScript path and says so.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The addon ABI level this build of kubelet-ts expects (native/addon.cc kAddonAbi). */
export const EXPECTED_ADDON_ABI = 1;

/** What the native cgroup reader returns (layout in src/stats/cgroup-sample.ts). */
export interface NativeRawCgroupBatch {
  status: Uint8Array;
  values: BigUint64Array;
  state: Uint8Array;
  devIds: Uint32Array;
  devValues: BigUint64Array;
}

/** The addon's exports. Feature groups may be missing from a stale build: check before use. */
export interface NativeAddon {
  addonAbi(): number;
  // Cgroup batch reader (native/cgroup_reader.cc).
  fieldNames?(): string[];
  clockTicks?(): number;
  /** kinds[i] = cgroup version; paths = 6 NUL-terminated dirs per cgroup (CGROUP_SLOTS order), or their UTF-8 bytes. */
  /** recheckAbsent: open again the files the kept-open table remembers as absent. */
  readCgroupsSync?(kinds: Uint8Array, paths: string | Uint8Array, keepOpen?: boolean, recheckAbsent?: boolean): NativeRawCgroupBatch;
  readCgroupsAsync?(
    kinds: Uint8Array,
    paths: string | Uint8Array,
    keepOpen?: boolean,
    recheckAbsent?: boolean,
  ): Promise<NativeRawCgroupBatch>;
  /** Closes the kept-open descriptors of each NUL-terminated cgroup dir. */
  forgetCgroups?(dirs: string): void;
  cgroupFdTable?(): NativeCgroupFdTable;
  /** Caps the kept-open descriptors (never above the derived budget); returns the budget. */
  setCgroupFdBudget?(n: number): number;
  // Process controls (native/process_control.cc).
  /** Replaces this process image (same pid); returns only by throwing (err.errno). */
  execve?(file: string, argv: string[], env: string[]): never;
  /** glibc malloc_trim(0); true when memory went back to the kernel. */
  mallocTrim?(): boolean;
  mallocInfo?(): { arenaBytes?: number; inUseBytes?: number; freeBytes?: number; mmapBytes?: number };
}

/** The native reader's kept-open descriptor table (native/cgroup_reader.cc). */
export interface NativeCgroupFdTable {
  /** RLIMIT_NOFILE soft limit seen when the table was made. */
  softLimit: number;
  /** softLimit - max(1024, softLimit/4): no kept descriptor is numbered at or past it. */
  highWater: number;
  /** Descriptors the table may keep. */
  budget: number;
  open: number;
  dirs: number;
  keptReads: number;
  opens: number;
  fallbacks: number;
  evictions: number;
  gone: number;
  forgotten: number;
}

export interface NativeLoadResult {
  addon?: NativeAddon;
  /** Why the addon is unavailable (set exactly when addon is not). */
  error?: string;
}

/** The nearest directory at or above `from` (a file URL or path) holding a package.json. */
export function findPackageRoot(from: string | URL = import.meta.url): string | undefined {
  let dir = path.dirname(typeof from === 'string' && !from.startsWith('file:') ? from : fileURLToPath(from));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** Default location of the built addon, or undefined when no package root is found. */
export function defaultAddonPath(): string | undefined {
  const root = findPackageRoot();
  return root === undefined ? undefined : path.join(root, 'build', 'Release', 'kubelet_ts_native.node');
}

let cached: NativeLoadResult | undefined;

/**
 * Loads the addon once (cached) from the default path, or from `options.path` (uncached,
 * for tests and tools). Sync fs here is a one-time startup cost.
 */
export function loadNative(options: { path?: string } = {}): NativeLoadResult {
  if (options.path === undefined && cached) return cached;
  const file = options.path ?? defaultAddonPath();
  const result = load(file);
  if (options.path === undefined) cached = result;
  return result;
}

function load(file: string | undefined): NativeLoadResult {
  if (file === undefined) return { error: 'native addon not found: no package root (package.json) above the module' };
  if (!existsSync(file)) {
    return { error: `native addon not built: ${file} does not exist (run npm run build:native)` };
  }
  let addon: NativeAddon;
  try {
    addon = createRequire(import.meta.url)(file) as NativeAddon;
  } catch (err) {
    return { error: `native addon failed to load from ${file}: ${(err as Error).message}` };
  }
  if (typeof addon?.addonAbi !== 'function') return { error: `native addon at ${file} has no addonAbi(): not a kubelet-ts build` };
  const abi = addon.addonAbi();
  if (abi !== EXPECTED_ADDON_ABI) {
    return { error: `native addon ABI ${abi} does not match expected ${EXPECTED_ADDON_ABI}: rebuild it (npm run build:native)` };
  }
  return { addon };
}
