// Safe subPath mounts (upstream pkg/volume/util/subpath): the subPath is opened from the volume's
// root one component at a time with no symlink followed, and that descriptor is bind-mounted
// onto <podDir>/volume-subpaths/<volume>/<container>/<index>, the path the runtime is given. A
// check on a path string followed by the runtime's mount of the same string later lets a
// container swap a directory for a symlink in between and mount the host into its sibling.
// The syscalls are the native addon's (native/subpath.cc); without it subPath is refused.

import { loadNative, type NativeAddon } from '../native.js';
import { KubeletError } from '../util/errors.js';

export const SUBPATH_DIR = 'volume-subpaths';

export interface SubPathRequest {
  /** The volume's host path. */
  volumePath: string;
  /** Relative, without "..": checked before. */
  subPath: string;
  /** <rootDir>/pods/<uid> */
  podDir: string;
  volumeName: string;
  containerName: string;
  /** The volumeMount's index in the container's volumeMounts (upstream VolumeMountIndex). */
  index: number;
}

export interface SubPathMounter {
  /** Bind-mounts the subPath safely (made as directories when missing); the host path to give the runtime. */
  prepare(req: SubPathRequest): Promise<string>;
  /** upstream CleanSubPaths for the whole pod: unmounts and removes its volume-subpaths; the paths unmounted. */
  clean(podDir: string): Promise<string[]>;
}

/** A subPath step failed; `phase` is "create" when making the missing subPath failed (upstream's two messages). */
export class SubPathError extends KubeletError {
  constructor(readonly phase: string, message: string, options?: { cause?: unknown }) {
    super('ERR_SUBPATH', message, options);
  }
}

export interface NativeSubpathOpenResult {
  path: string;
  dev: number;
  ino: number;
  type: 'dir' | 'file' | 'symlink' | 'other';
  resolver: 'openat2' | 'openat';
}

/** The addon's subpath exports (native/subpath.h). */
export type SubpathAddon = NativeAddon & {
  subpathOpen?(volumePath: string, subPath: string, opts?: { create?: boolean; openat2?: boolean; resolve?: boolean }): Promise<NativeSubpathOpenResult>;
  subpathBind?(req: SubPathRequest & { openat2?: boolean }): Promise<{ hostPath: string; reused: boolean }>;
  subpathClean?(podDir: string, volumeName?: string): Promise<{ unmounted: string[]; errors: string[] }>;
};

/** The addon when it has the subpath exports (a stale build may not). */
export function nativeSubpath(): Required<Pick<SubpathAddon, 'subpathOpen' | 'subpathBind' | 'subpathClean'>> | undefined {
  const a = loadNative().addon as SubpathAddon | undefined;
  if (typeof a?.subpathBind !== 'function' || typeof a.subpathClean !== 'function' || typeof a.subpathOpen !== 'function') return undefined;
  return a as Required<Pick<SubpathAddon, 'subpathOpen' | 'subpathBind' | 'subpathClean'>>;
}

function wrap(err: unknown): SubPathError {
  const e = err as Error & { phase?: string };
  return new SubPathError(e.phase ?? 'open', e.message, { cause: err });
}

/** The native mounter, or undefined without the addon. */
export function nativeSubPathMounter(options: { openat2?: boolean } = {}): SubPathMounter | undefined {
  const a = nativeSubpath();
  if (!a) return undefined;
  return {
    async prepare(req) {
      try {
        return (await a.subpathBind({ ...req, openat2: options.openat2 ?? true })).hostPath;
      } catch (err) {
        throw wrap(err);
      }
    },
    async clean(podDir) {
      const r = await a.subpathClean(podDir);
      if (r.errors.length) throw new SubPathError('clean', `cleaning up subpath mounts of ${podDir} failed: ${r.errors.join('; ')}`);
      return r.unmounted;
    },
  };
}

/**
 * Without the addon a subPath cannot be opened safely from TypeScript (no O_PATH, no mount of
 * a descriptor): it is refused rather than checked and handed over as a path. Teardown then
 * relies on the volume manager's unmount of everything under the pod directory.
 */
export const refusingSubPathMounter: SubPathMounter = {
  async prepare() {
    throw new SubPathError('unavailable', 'subPath volume mounts need the native addon of kubelet-ts, which is not loaded');
  },
  async clean() {
    return [];
  },
};

let cached: SubPathMounter | undefined;

/** The process's subPath mounter: native, or refusing when the addon is missing. */
export function defaultSubPathMounter(): SubPathMounter {
  cached ??= nativeSubPathMounter() ?? refusingSubPathMounter;
  return cached;
}
