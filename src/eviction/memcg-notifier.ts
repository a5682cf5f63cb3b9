// Fast memory-pressure detection (upstream: kernelMemcgNotification). cgroup v1: the native
// watcher thread holds an eventfd registered on memory.usage_in_bytes of the root or pods
// memory cgroup at the usage where the working set reaches the eviction threshold; when the
// kernel signals it the eviction manager runs at once. cgroup v2 has no usage thresholds:
// memcg-notifier-v2.ts watches memory.events and PSI instead (memory-notifier.ts chooses).

import { cgroupRefFor, type CgroupMounts } from '../cgroups/index.js';
import type { NativeOomEvent, NativeOomExports, NativeOomWatcherHandle } from '../oom/native-types.js';
import { KubeletError } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { MemcgThresholdNotifier } from './eviction-manager.js';

/** A threshold could not be armed (naming the cgroup and the step). */
export class MemcgNotifierError extends KubeletError {
  constructor(readonly cgroup: string, message: string, options?: { cause?: unknown }) {
    super('ERR_MEMCG_NOTIFIER', `memcg threshold on ${cgroup || '/'}: ${message}`, options);
  }
}

export interface NativeMemcgNotifierOptions {
  native: NativeOomExports;
  mounts: CgroupMounts;
  log: Logger;
  onCross: (key: string) => void;
  /** The memory cgroup directory of a cgroup name (default: from the mounts). */
  memoryDir?: (cgroup: string) => string | undefined;
}

/** v1 usage thresholds on the native watcher thread; undefined (with why) where it cannot work. */
export function createNativeMemcgNotifier(o: NativeMemcgNotifierOptions): { notifier?: NativeMemcgNotifier; reason?: string } {
  const Handle = o.native.OomWatcherHandle;
  if (typeof Handle !== 'function') return { reason: 'native addon has no watcher' };
  if (!o.memoryDir && !o.mounts.v1.memory) return { reason: 'no cgroup v1 memory hierarchy (cgroup v2: memcg usage thresholds do not exist)' };
  let n: NativeMemcgNotifier | undefined;
  const handle = new Handle((events) => n?.handle(events));
  if (typeof handle.watchMemoryThreshold !== 'function') {
    handle.close();
    return { reason: 'native addon has no memory thresholds (stale build: rebuild it)' };
  }
  // The eviction loop keeps the process alive, not the notifier.
  handle.unref();
  n = new NativeMemcgNotifier(handle, o);
  return { notifier: n };
}

export class NativeMemcgNotifier implements MemcgThresholdNotifier {
  readonly #ids = new Map<string, number>();
  readonly #keys = new Map<number, string>();
  readonly #armed = new Map<string, { dir: string; bytes: bigint }>();
  #next = 1;
  #closed = false;
  /** When the last crossing reached JS (process.hrtime ns) and when the thread saw it. */
  lastCross?: { key: string; observedTimeNs: bigint; deliveredTimeNs: bigint };

  constructor(private readonly native: NativeOomWatcherHandle, private readonly o: NativeMemcgNotifierOptions) {}

  setThreshold(key: string, cgroup: string, usageBytes: bigint): void {
    if (this.#closed) return;
    const dir = this.o.memoryDir ? this.o.memoryDir(cgroup) : v1MemoryDir(this.o.mounts, cgroup);
    if (!dir) throw new MemcgNotifierError(cgroup, 'no v1 memory cgroup directory');
    const prev = this.#armed.get(key);
    if (prev && prev.dir === dir && prev.bytes === usageBytes) return;
    let id = this.#ids.get(key);
    if (id === undefined) {
      id = this.#next++;
      this.#ids.set(key, id);
      this.#keys.set(id, key);
    }
    try {
      this.native.watchMemoryThreshold!(id, dir, usageBytes);
    } catch (err) {
      throw new MemcgNotifierError(cgroup, (err as Error).message, { cause: err });
    }
    this.#armed.set(key, { dir, bytes: usageBytes });
    this.o.log.v(2).info('Eviction manager: memcg threshold armed', { key, cgroup: dir, usageBytes: String(usageBytes) });
  }

  /** Events from the native thread. */
  handle(events: NativeOomEvent[]): void {
    const delivered = process.hrtime.bigint();
    for (const e of events) {
      if (e.kind !== 'memory_threshold' || e.id === undefined) continue;
      const key = this.#keys.get(e.id);
      if (!key) continue;
      this.lastCross = { key, observedTimeNs: e.observedTimeNs, deliveredTimeNs: delivered };
      this.o.onCross(key);
    }
  }

  /** Thresholds armed now. */
  armed(): ReadonlyMap<string, { dir: string; bytes: bigint }> {
    return this.#armed;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.native.close();
  }
}

function v1MemoryDir(mounts: CgroupMounts, cgroup: string): string | undefined {
  const ref = cgroupRefFor(mounts, cgroup || '/');
  return ref.version === 1 ? ref.memory : undefined;
}
