// A cgroup as the readers and watchers take it: one directory on v2, one directory per
// controller hierarchy on v1 (plus the unified one on hybrid hosts, for PSI).

/** One cgroup to read. v2: one directory. v1: one directory per controller hierarchy. */
export type CgroupRef = CgroupV2Ref | CgroupV1Ref;

export interface CgroupV2Ref {
  readonly version: 2;
  /** The cgroup's directory in the unified hierarchy. */
  readonly dir: string;
}

export interface CgroupV1Ref {
  readonly version: 1;
  readonly cpu?: string;
  readonly cpuacct?: string;
  readonly memory?: string;
  readonly pids?: string;
  readonly blkio?: string;
  /**
   * Hybrid hosts: the same cgroup in the cgroup2 mount, read for the PSI files only. Unlike
   * the controller dirs, its absence leaves PSI absent instead of making the cgroup missing.
   */
  readonly unified?: string;
}
