// Pods' user namespaces (upstream pkg/kubelet/userns, UsernsManager): each pod with
// `hostUsers: false` gets its own range of idsPerPod host IDs out of the kubelet's range
// (subids.ts), mapped to IDs 0.. inside the pod, the same range for UIDs and GIDs. The
// allocation is written to `<rootDir>/pods/<uid>/userns` (upstream's JSON) before the sandbox
// is asked for, read back after a restart, and freed when the pod's directory goes or no
// longer belongs to a known pod. A pod that asked for a user namespace never runs without one:
// a runtime handler that does not report user namespace support fails the sandbox.

import { mkdir, open, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pod } from '../../api/types.js';
import type { UserNamespaceInput } from '../../runtime/cri-types.js';
import { KubeletError } from '../../util/errors.js';
import type { Logger } from '../../util/log.js';
import { podDir } from '../../util/safe-path.js';
import { DEFAULT_SUBID_FILES, getKubeletMappings, type SubIDFiles } from './subids.js';

/** upstream userNsUnitLength: idsPerPod is a multiple of this. */
export const USERNS_UNIT_LENGTH = 65536;
/** upstream DefaultKubeletUserNamespacesIDsPerPod. */
export const DEFAULT_IDS_PER_POD = 65536;
/** upstream mappingsFile: the allocation's file in the pod directory. */
export const USERNS_MAPPINGS_FILE = 'userns';
/** The feature gate (beta, on by default since 1.33). */
export const USER_NAMESPACES_SUPPORT = 'UserNamespacesSupport';

/** One runtime handler as the CRI Status reports it (upstream kubecontainer.RuntimeHandler). */
export interface RuntimeHandlerSupport {
  name: string;
  supportsRecursiveReadOnlyMounts: boolean;
  supportsUserNamespaces: boolean;
}

interface IDMappingJSON {
  hostId: number;
  containerId: number;
  length: number;
}

/** upstream's userNamespace JSON, as written to the pod's `userns` file. */
export interface UserNamespaceFile {
  uidMappings: IDMappingJSON[];
  gidMappings: IDMappingJSON[];
}

export class UsernsError extends KubeletError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_USERNS', message, options);
  }
}

export interface UsernsManagerOptions {
  rootDir: string;
  /** KubeletConfiguration userNamespaces.idsPerPod (default 65536). */
  idsPerPod?: number;
  /** KubeletConfiguration maxPods: the range must hold this many pods. */
  maxPods: number;
  /** The UserNamespacesSupport feature gate. */
  gateEnabled: boolean;
  /** The runtime's handlers from its last ready Status; undefined before one (upstream runtimeState.runtimeHandlers()). */
  runtimeHandlers: () => RuntimeHandlerSupport[] | undefined;
  files?: SubIDFiles;
  /** Where a new allocation starts its search (upstream's bitmap allocator picks a random offset). */
  random?: () => number;
  log?: Logger;
}

/** UserNamespace mode NODE: what upstream sends for every pod without hostUsers: false while the gate is on. */
const NODE_MODE: UserNamespaceInput = { mode: 'NODE' };

export class UsernsManager {
  /** Allocation bitmap, one byte per slot of idsPerPod IDs. */
  private readonly used: Uint8Array;
  /** Pod UID → first host ID of its range. */
  private readonly usedBy = new Map<string, number>();
  private lock: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly o: UsernsManagerOptions,
    readonly idsPerPod: number,
    /** First slot (host ID / idsPerPod) of the kubelet's range, and how many slots it has. */
    readonly off: number,
    readonly len: number,
  ) {
    this.used = new Uint8Array(len);
  }

  /**
   * upstream MakeUserNsManager: the kubelet's range checked against idsPerPod and maxPods, then
   * every pod directory's allocation recorded. Throws UsernsError (the kubelet does not start).
   */
  static async create(o: UsernsManagerOptions): Promise<UsernsManager> {
    const idsPerPod = o.idsPerPod ?? DEFAULT_IDS_PER_POD;
    if (!o.gateEnabled) return new UsernsManager(o, idsPerPod, 0, 0);
    let firstID: number;
    let length: number;
    try {
      ({ firstID, length } = await getKubeletMappings(idsPerPod, true, o.files ?? DEFAULT_SUBID_FILES));
    } catch (err) {
      throw new UsernsError(`kubelet mappings: ${(err as Error).message}`, { cause: err });
    }
    if (idsPerPod % USERNS_UNIT_LENGTH !== 0) throw new UsernsError(`kubelet user namespace length ${idsPerPod} is not a multiple of ${USERNS_UNIT_LENGTH}`);
    if (firstID % idsPerPod !== 0) throw new UsernsError(`kubelet user assigned ID ${firstID} is not a multiple of ${idsPerPod}`);
    // ID 0 of the host is never mapped: that would be root in the pod as root on the node
    if (firstID < idsPerPod) throw new UsernsError(`kubelet user assigned ID ${firstID} must be greater or equal to ${idsPerPod}`);
    if (length % idsPerPod !== 0) throw new UsernsError(`kubelet user assigned IDs length ${length} is not a multiple of ${idsPerPod}`);
    if (length / idsPerPod < o.maxPods) throw new UsernsError(`kubelet user assigned IDs are not enough to support ${o.maxPods} pods`);
    const m = new UsernsManager(o, idsPerPod, firstID / idsPerPod, length / idsPerPod);
    for (const uid of await m.podsOnDisk()) {
      const content = await m.readFile(uid);
      if (content === undefined || content === '') continue;
      try {
        m.parseAndRecord(uid, content);
      } catch (err) {
        throw new UsernsError(`record pod mappings for existing pod "${uid}": ${(err as Error).message}`, { cause: err });
      }
    }
    o.log?.v(5).info('User namespace manager mapping', { offset: m.off, length: m.len, idsPerPod });
    return m;
  }

  get gateEnabled(): boolean {
    return this.o.gateEnabled;
  }

  /** Pods holding a range, and their first host ID (for tests and debugging). */
  allocations(): ReadonlyMap<string, number> {
    return this.usedBy;
  }

  /**
   * upstream GetOrCreateUserNamespaceMappings: the UserNamespace the pod's sandbox and
   * containers get. hostUsers unset or true: NODE (gate on) or nothing (gate off); hostUsers
   * false: the pod's range (made and written to its directory the first time), or an error
   * when the gate is off or the runtime handler does not support user namespaces.
   */
  async getOrCreateUserNamespaceMappings(pod: Pod, runtimeHandler: string): Promise<UserNamespaceInput | null> {
    const hostUsers = pod.spec.hostUsers;
    if (hostUsers === undefined || hostUsers === null) return this.o.gateEnabled ? { ...NODE_MODE } : null;
    if (!this.o.gateEnabled) throw new UsernsError(`the feature gate "${USER_NAMESPACES_SUPPORT}" is disabled: can't set spec.HostUsers`);
    if (hostUsers === true) return { ...NODE_MODE };

    const support = this.handlerSupportsUserNamespaces(runtimeHandler);
    if (support !== true) {
      const msg = runtimeHandler !== ''
        ? `can't set \`spec.hostUsers: false\`, RuntimeClass handler "${runtimeHandler}" does not support user namespaces`
        : "can't set `spec.hostUsers: false`, runtime does not support user namespaces";
      throw new UsernsError(support === false ? msg : `${msg}: ${support}`);
    }
    const uid = pod.metadata.uid ?? '';
    return this.locked(async () => {
      const content = await this.readFile(uid);
      let ns: UserNamespaceFile;
      if (content !== undefined && content !== '') {
        try {
          ns = this.parseAndRecord(uid, content);
        } catch (err) {
          throw new UsernsError(`user namespace: ${(err as Error).message}`, { cause: err });
        }
      } else {
        try {
          ns = await this.createUserNs(uid);
        } catch (err) {
          throw new UsernsError(`create user namespace: ${(err as Error).message}`, { cause: err });
        }
      }
      const map = (m: IDMappingJSON) => ({ host_id: m.hostId, container_id: m.containerId, length: m.length });
      return { mode: 'POD', uids: ns.uidMappings.map(map), gids: ns.gidMappings.map(map) };
    });
  }

  /** upstream HandlerSupportsUserNamespaces: true, false, or why it cannot be told. */
  private handlerSupportsUserNamespaces(handler: string): boolean | string {
    const handlers = this.o.runtimeHandlers();
    if (handlers === undefined) return 'runtime handlers are not set';
    const h = handlers.find((x) => x.name === handler);
    if (!h) return `the handler "${handler}" is not known`;
    return h.supportsUserNamespaces;
  }

  /** upstream Release: frees the pod's range and removes its file. */
  release(uid: string): Promise<void> {
    if (!this.o.gateEnabled) return Promise.resolve();
    return this.locked(() => this.releaseLocked(uid));
  }

  /**
   * upstream CleanupOrphanedPodUsernsAllocations: frees the range of every pod directory that is
   * no known pod's, and of every allocation whose pod directory is gone.
   */
  cleanupOrphanedPodUsernsAllocations(knownPodUIDs: Iterable<string>): Promise<void> {
    if (!this.o.gateEnabled) return Promise.resolve();
    const known = new Set(knownPodUIDs);
    return this.locked(async () => {
      const found = await this.podsOnDisk();
      const onDisk = new Set(found);
      for (const uid of found) if (!known.has(uid)) await this.releaseLocked(uid);
      for (const uid of [...this.usedBy.keys()]) if (!onDisk.has(uid)) await this.releaseLocked(uid);
    });
  }

  private async releaseLocked(uid: string): Promise<void> {
    const from = this.usedBy.get(uid);
    if (from === undefined) return;
    this.usedBy.delete(uid);
    await rm(this.filePath(uid), { force: true }).catch((err) => this.o.log?.warn('Removing the user namespace file failed', { podUID: uid, err: (err as Error).message }));
    this.used[from / this.idsPerPod - this.off] = 0;
  }

  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  private filePath(uid: string): string {
    return join(podDir(this.o.rootDir, uid), USERNS_MAPPINGS_FILE);
  }

  private async readFile(uid: string): Promise<string | undefined> {
    try {
      return await readFile(this.filePath(uid), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** upstream listPodsFromDisk: the directories under <rootDir>/pods. */
  private async podsOnDisk(): Promise<string[]> {
    try {
      const entries = await readdir(join(this.o.rootDir, 'pods'), { withFileTypes: true });
      return entries.filter((e) => e.isDirectory()).map((e) => e.name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  /** upstream parseUserNsFileAndRecord: only what the kubelet itself writes is taken back. */
  private parseAndRecord(uid: string, content: string): UserNamespaceFile {
    let ns: UserNamespaceFile;
    try {
      ns = JSON.parse(content) as UserNamespaceFile;
    } catch (err) {
      throw new UsernsError(`invalid user namespace mappings file: ${(err as Error).message}`);
    }
    const uids = Array.isArray(ns?.uidMappings) ? ns.uidMappings : [];
    const gids = Array.isArray(ns?.gidMappings) ? ns.gidMappings : [];
    if (uids.length !== 1) throw new UsernsError('invalid user namespace configuration: no more than one mapping allowed.');
    if (uids.length !== gids.length) throw new UsernsError('invalid user namespace configuration: GID and UID mappings should be identical.');
    const u = uids[0]!;
    const g = gids[0]!;
    for (const m of [u, g]) {
      for (const k of ['hostId', 'containerId', 'length'] as const) {
        if (!Number.isInteger(m[k]) || m[k] < 0 || m[k] > 2 ** 32 - 1) throw new UsernsError(`invalid user namespace mappings file: ${k} ${JSON.stringify(m[k])} is not a uint32`);
      }
    }
    if (u.hostId !== g.hostId || u.containerId !== g.containerId || u.length !== g.length) {
      throw new UsernsError('invalid user namespace configuration: GID and UID mapping should be identical');
    }
    if (u.containerId !== 0) throw new UsernsError('invalid user namespace configuration: UID 0 must be mapped');
    this.record(uid, u.hostId, u.length);
    return { uidMappings: [{ ...u }], gidMappings: [{ ...g }] };
  }

  /** upstream record: a range read back must be aligned, in range and not another pod's. */
  private record(uid: string, from: number, length: number): void {
    if (length !== this.idsPerPod) throw new UsernsError(`wrong user namespace length ${length}`);
    if (from % this.idsPerPod !== 0) throw new UsernsError(`wrong user namespace offset specified ${from}`);
    const prev = this.usedBy.get(uid);
    if (prev !== undefined && prev !== from) throw new UsernsError(`different user namespace range already used by pod "${uid}"`);
    const index = from / this.idsPerPod - this.off;
    if (index < 0 || index >= this.len) throw new UsernsError(`id ${from} is out of range`);
    if (prev === undefined && this.used[index]) throw new UsernsError(`range picked for pod "${uid}" already taken`);
    this.used[index] = 1;
    this.usedBy.set(uid, from);
  }

  /** upstream allocateOne (random-scan bitmap) + createUserNs: the pod's range, written to its directory. */
  private async createUserNs(uid: string): Promise<UserNamespaceFile> {
    const start = Math.floor((this.o.random ?? Math.random)() * this.len) % Math.max(this.len, 1);
    let index = -1;
    for (let i = 0; i < this.len; i++) {
      const j = (start + i) % this.len;
      if (!this.used[j]) { index = j; break; }
    }
    if (index < 0) throw new UsernsError('could not find an empty slot to allocate a user namespace');
    const firstID = (index + this.off) * this.idsPerPod;
    this.used[index] = 1;
    this.usedBy.set(uid, firstID);
    const mapping = { containerId: 0, hostId: firstID, length: this.idsPerPod };
    const ns: UserNamespaceFile = { uidMappings: [{ ...mapping }], gidMappings: [{ ...mapping }] };
    try {
      await this.writeFileDurably(uid, JSON.stringify(ns));
    } catch (err) {
      await this.releaseLocked(uid);
      throw err;
    }
    return ns;
  }

  /** Written to a temporary file, renamed over the file, and the directory synced: there whole or not at all. */
  private async writeFileDurably(uid: string, data: string): Promise<void> {
    const dir = podDir(this.o.rootDir, uid);
    await mkdir(dir, { recursive: true, mode: 0o750 });
    const tmp = join(dir, `.${USERNS_MAPPINGS_FILE}.tmp`);
    await writeFile(tmp, data, { mode: 0o644 });
    const f = await open(tmp, 'r');
    try { await f.sync(); } finally { await f.close(); }
    await rename(tmp, this.filePath(uid));
    const d = await open(dir, 'r');
    try { await d.sync(); } finally { await d.close(); }
  }
}
