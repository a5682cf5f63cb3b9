// Which pod and container an OOM victim belongs to, from its memory cgroup path. The
// watcher's first choice is the cgroup inode (exact); the path is the fallback, and tells a
// victim inside a pod from one outside any pod (a node-level SystemOOM).

export interface PodCgroupRef {
  podUID: string;
  /** The last path element when it is a container's cgroup below the pod's (a container or sandbox id). */
  containerID?: string;
}

// cgroupfs: .../kubepods[/burstable|/besteffort]/pod<uid>[/<id>]
const CGROUPFS_POD = /(?:^|\/)kubepods(?:\/(?:burstable|besteffort))?\/pod([0-9a-fA-F-]{8,})(?:\/([^/]+))?\/?$/;
// systemd: .../kubepods[-qos]-pod<uid_with_underscores>.slice[/<runtime>-<id>.scope]
const SYSTEMD_POD = /(?:^|\/)kubepods(?:-burstable|-besteffort)?-pod([0-9a-fA-F_]{8,})\.slice(?:\/([^/]+))?\/?$/;
const KUBEPODS = /(?:^|\/)kubepods(?:[./-]|$)/;

/** The id of a container cgroup name: `<id>`, or systemd's `<runtime>-<id>.scope`. */
function containerIDFromName(name: string): string {
  const scope = /^(?:[a-z]+(?:-[a-z]+)*-)?([0-9a-f]{12,})\.scope$/.exec(name);
  return scope ? scope[1]! : name;
}

/** The pod (and container) of a cgroup path, or undefined when the path is not inside a pod. */
export function parsePodCgroupPath(cgroupPath: string): PodCgroupRef | undefined {
  const fs = CGROUPFS_POD.exec(cgroupPath);
  if (fs) return fs[2] ? { podUID: fs[1]!, containerID: containerIDFromName(fs[2]) } : { podUID: fs[1]! };
  const sd = SYSTEMD_POD.exec(cgroupPath);
  if (sd) {
    const podUID = sd[1]!.replace(/_/g, '-');
    return sd[2] ? { podUID, containerID: containerIDFromName(sd[2]) } : { podUID };
  }
  return undefined;
}

/** Whether a cgroup path lies under the kubelet's kubepods hierarchy (a pod or QoS cgroup). */
export function isUnderKubepods(cgroupPath: string): boolean {
  return KUBEPODS.test(cgroupPath);
}
