// SIMULATION. A synthetic cgroup tree for the simulated runtime's containers: when a simulated
// container starts, its cgroup directory appears under <root> at the path a real node uses
// (/kubepods/<qos>/pod<uid>/<container-id>, in every v1 hierarchy or the unified one) with every
// file the stats readers open; when it exits, the directory goes, as runc removes it. Writes
// are asynchronous and bounded, so a churning simulation does not stall its gRPC server.

import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cgroupRefFor, V1_CONTROLLERS, type CgroupMounts } from '../cgroups/index.js';
import { filesOfRef, type CgroupFileSpec, type CgroupRef } from '../stats/cgroup-sample.js';

export interface SimCgroupTreeOptions {
  /** Directory that stands for /sys/fs/cgroup (tmpfs such as /dev/shm for large trees). */
  root: string;
  version: 1 | 2;
  /** Concurrent file operations (default 32). */
  concurrency?: number;
}

/** The synthetic hierarchies' mounts, as cgroup discovery would report them. */
export function simCgroupMounts(root: string, version: 1 | 2): CgroupMounts {
  if (version === 2) return { unified: { mountPoint: join(root, 'unified'), root: '/' }, v1: {} };
  return {
    unified: { mountPoint: join(root, 'unified'), root: '/' },
    v1: Object.fromEntries(V1_CONTROLLERS.map((c) => [c, { mountPoint: join(root, c), root: '/' }])),
  };
}

/** A plausible value per counter, stable for a given seed (the container's position). */
function valueFor(key: string, seed: number): string {
  const x = (Math.imul(seed + 1, 2654435761) >>> 0) % 1000;
  if (key.endsWith('max') || key === 'limit_in_bytes') return seed % 3 === 0 ? 'max' : String(268435456 * (1 + (seed % 8)));
  if (key.includes('usec') || key.includes('time') || key === 'usage') return String(1_000_000 * (x + 1));
  if (key === 'user' || key === 'system') return String(1000 * (x + 1));
  if (key.startsWith('nr_') || key.startsWith('oom') || key === 'low' || key === 'high') return String(x % 7);
  if (key.includes('current') || key.includes('usage') || key.includes('bytes')) return String(4096 * (x + 100) * 16);
  return String(4096 * (x + 10));
}

function fileContent(spec: CgroupFileSpec, seed: number, version: 1 | 2): string {
  switch (spec.parse) {
    case 'single':
      if (spec.name === 'memory.limit_in_bytes') return seed % 3 === 0 ? '9223372036854771712\n' : `${268435456 * (1 + (seed % 8))}\n`;
      return `${valueFor(spec.name, seed)}\n`;
    case 'keyed':
    case 'ticks':
      return (spec.keys ?? []).map(([k]) => `${k} ${valueFor(k, seed)}\n`).join('');
    case 'psi':
      return ['some', 'full'].map((k) => `${k} avg10=0.${seed % 10}0 avg60=0.05 avg300=0.01 total=${1000 * (seed + 1)}\n`).join('');
    case 'iostat':
      return `8:0 rbytes=${4096 * (seed + 1)} wbytes=${8192 * (seed + 1)} rios=${seed + 1} wios=${2 * (seed + 1)} dbytes=0 dios=0\n`;
    case 'blkio': {
      const n = spec.deviceColumn === 0 ? 4096 * (seed + 1) : seed + 1;
      return `8:0 Read ${n}\n8:0 Write ${2 * n}\n8:0 Sync ${n}\n8:0 Async ${2 * n}\n8:0 Discard 0\n8:0 Total ${3 * n}\nTotal ${3 * n}\n`;
    }
  }
  void version;
  return '0\n';
}

/** Runs at most `limit` async jobs at once. */
class Limiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.queue.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.queue.shift()?.();
    }
  }
}

export class SimCgroupTree {
  readonly mounts: CgroupMounts;
  private readonly limiter: Limiter;
  private seq = 0;
  private readonly pending = new Set<Promise<unknown>>();
  /** Container id → its cgroup path, for the containers whose cgroup exists. */
  readonly paths = new Map<string, string>();
  /** Container id → its last queued operation, so a removal never overtakes the creation. */
  private readonly lastOp = new Map<string, Promise<unknown>>();

  constructor(private readonly opts: SimCgroupTreeOptions) {
    this.mounts = simCgroupMounts(opts.root, opts.version);
    this.limiter = new Limiter(opts.concurrency ?? 32);
  }

  /** The cgroup path a container of this pod gets (cgroupfs driver layout). */
  static containerPath(podUid: string, containerId: string, qos: 'guaranteed' | 'burstable' | 'besteffort' = 'burstable'): string {
    return qos === 'guaranteed' ? `/kubepods/pod${podUid}/${containerId}` : `/kubepods/${qos}/pod${podUid}/${containerId}`;
  }

  refFor(cgroupPath: string): CgroupRef {
    return cgroupRefFor(this.mounts, cgroupPath);
  }

  /** Creates the container's cgroup with every file the readers open. */
  add(podUid: string, containerId: string): void {
    const path = SimCgroupTree.containerPath(podUid, containerId);
    const seed = this.seq++;
    this.paths.set(containerId, path);
    const ref = this.refFor(path);
    this.chain(containerId, () =>
      this.limiter.run(async () => {
        const byDir = new Map<string, CgroupFileSpec[]>();
        for (const [spec, dir] of filesOfRef(ref)) {
          let specs = byDir.get(dir);
          if (!specs) byDir.set(dir, (specs = []));
          specs.push(spec);
        }
        for (const [dir, specs] of byDir) {
          await mkdir(dir, { recursive: true });
          await Promise.all(specs.map((s) => writeFile(join(dir, s.name), fileContent(s, seed, this.opts.version))));
        }
      }),
    );
  }

  /** Removes the container's cgroup (the pod's parent stays, as on a real node). */
  remove(containerId: string): void {
    const path = this.paths.get(containerId);
    if (!path) return;
    this.paths.delete(containerId);
    const ref = this.refFor(path);
    const dirs = new Set(filesOfRef(ref).map(([, dir]) => dir));
    this.chain(containerId, () => this.limiter.run(() => Promise.all([...dirs].map((d) => rm(d, { recursive: true, force: true })))));
  }

  private chain(id: string, op: () => Promise<unknown>): void {
    const prev = this.lastOp.get(id) ?? Promise.resolve();
    const q: Promise<unknown> = prev
      .then(op)
      .catch(() => undefined)
      .finally(() => {
        this.pending.delete(q);
        if (this.lastOp.get(id) === q) this.lastOp.delete(id);
      });
    this.lastOp.set(id, q);
    this.pending.add(q);
  }

  /** Resolves when every queued write and removal is done. */
  async flush(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }
}
