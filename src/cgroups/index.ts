// cgroups: where the host's cgroup hierarchies are (v1, v2 or hybrid), and where a cgroup
// name lives in each. The pod-level cgroups built on this are src/cm's.
export * from './ref.js';
export * from './mounts.js';
export * from './paths.js';
