// The CreateContainer request for one container of a pod, as upstream builds it
// (kuberuntime_container.go generateContainerConfig/makeMounts, kuberuntime_container_linux.go,
// security_context.go, pkg/securitycontext). Pure: the caller creates the log directory and the
// termination-message file (createTerminationMessageFile) before sending it.

import { randomBytes } from 'node:crypto';
import { chmod, mkdir, realpath, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { confinedJoin } from '../util/safe-path.js';
import type { Container, Pod, ResourceList, SecurityContext } from '../api/types.js';
import type {
  Capability,
  ContainerConfig,
  KeyValue,
  LinuxContainerConfig,
  LinuxContainerSecurityContext,
  MountInput,
  SecurityProfile,
} from './cri-types.js';
import { CreateContainerConfigError, expandCommand, makeEnvironment, type KeyValueSource } from './env.js';
import { newContainerAnnotations, newContainerLabels } from './labels.js';
import { generateLinuxContainerResources, type LinuxResourceOptions } from './resources.js';
import { DEFAULT_POD_LOGS_DIR, buildPodLogsDirectory, namespacesForPod } from './sandbox-config.js';
import { appArmorSecurityProfile } from './apparmor.js';

export { CreateContainerConfigError } from './env.js';

/** Where localhost seccomp profiles live: <root-dir>/seccomp. */
export const DEFAULT_SECCOMP_PROFILE_ROOT = '/var/lib/kubelet/seccomp';

/** /proc and /sys paths hidden from unprivileged containers (upstream defaultMaskedPaths). */
export const DEFAULT_MASKED_PATHS: readonly string[] = [
  '/proc/asound',
  '/proc/acpi',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
];

/** /proc paths mounted read-only (upstream defaultReadonlyPaths). */
export const DEFAULT_READONLY_PATHS: readonly string[] = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

export interface ContainerConfigOptions extends LinuxResourceOptions {
  podIPs: string[];
  hostIPs: string[];
  nodeName: string;
  /** What the image manager resolved the image to (the runtime's image id or ref). */
  imageRef: string;
  /** Defaults to /var/log/pods. */
  podLogsDir?: string;
  /** Node memory capacity, for the Burstable oom_score_adj. */
  memoryCapacityBytes: number;
  /** Volume mounts, already resolved to host paths (the volume manager's). */
  mounts?: MountInput[];
  /** Host file made by createTerminationMessageFile, mounted at terminationMessagePath. */
  terminationMessageHostPath?: string;
  /** Node allocatable, the default for limits read through the downward API. */
  nodeAllocatable?: ResourceList;
  getConfigMap?: KeyValueSource;
  getSecret?: KeyValueSource;
  serviceAccountName?: string;
  /** The image's configured user (ImageStatus uid/username), for runAsNonRoot and run_as_user. */
  imageUser?: { uid?: number; username?: string };
  /** Extra annotations (upstream: device plugins'); the kubelet's own win. */
  annotations?: Record<string, string>;
  /** KubeletConfiguration seccompDefault: RuntimeDefault instead of Unconfined when nothing is set. */
  seccompDefault?: boolean;
  /** Defaults to /var/lib/kubelet/seccomp. */
  seccompProfileRoot?: string;
  /** Huge page sizes the node supports ('2MB', '1GB'). */
  hugePageSizes?: string[];
  swapControllerAvailable?: boolean;
}

/** `<podLogsDir>/<namespace>_<name>_<uid>/<container>` (upstream BuildContainerLogsDirectory). */
export function buildContainerLogsDirectory(podLogsDir: string, namespace: string, name: string, uid: string, containerName: string): string {
  return confinedJoin(buildPodLogsDirectory(podLogsDir, namespace, name, uid), containerName);
}

/** `<container>/<restartCount>.log`, relative to the sandbox's log directory (upstream buildContainerLogsPath). */
export function buildContainerLogsPath(containerName: string, restartCount: number): string {
  return posix.join(containerName, `${restartCount}.log`);
}

/** `<rootDir>/pods/<uid>/containers/<name>` (upstream getPodContainerDir). */
export function podContainerDir(rootDir: string, podUID: string, containerName: string): string {
  return confinedJoin(rootDir, 'pods', podUID, 'containers', containerName);
}

/**
 * Creates an empty, world-writable file for the termination message under the pod's container
 * directory, with a random name so each instance of the container has its own; returns its path.
 */
export async function createTerminationMessageFile(containerDir: string): Promise<string> {
  await mkdir(containerDir, { recursive: true, mode: 0o750 });
  const file = posix.join(containerDir, randomBytes(4).toString('hex'));
  await writeFile(file, '', { mode: 0o666 });
  // the mode given to open(2) is masked by the umask; the container user must be able to write
  await chmod(file, 0o666);
  return file;
}

/** Pod-level fields filled into the container's security context where it sets none (upstream DetermineEffectiveSecurityContext). */
export function determineEffectiveSecurityContext(pod: Pod, container: Container): SecurityContext {
  const podSc = pod.spec.securityContext;
  const effective: SecurityContext = { ...(container.securityContext ?? {}) };
  if (!podSc) return effective;
  if (effective.runAsUser === undefined && podSc.runAsUser !== undefined) effective.runAsUser = podSc.runAsUser;
  if (effective.runAsGroup === undefined && podSc.runAsGroup !== undefined) effective.runAsGroup = podSc.runAsGroup;
  if (effective.runAsNonRoot === undefined && podSc.runAsNonRoot !== undefined) effective.runAsNonRoot = podSc.runAsNonRoot;
  const podSeLinux = (podSc as { seLinuxOptions?: unknown }).seLinuxOptions;
  const ctr = effective as SecurityContext & { seLinuxOptions?: unknown };
  if (ctr.seLinuxOptions === undefined && podSeLinux !== undefined) ctr.seLinuxOptions = podSeLinux;
  return effective;
}

/** Refuses a container that must not run as root but would (upstream verifyRunAsNonRoot). */
export function verifyRunAsNonRoot(pod: Pod, container: Container, uid: number | undefined, username: string | undefined): void {
  const sc = determineEffectiveSecurityContext(pod, container);
  if (sc.runAsNonRoot !== true) return;
  const podDesc = `${pod.metadata.name ?? ''}_${pod.metadata.namespace ?? ''}(${pod.metadata.uid ?? ''})`;
  if (sc.runAsUser !== undefined) {
    if (sc.runAsUser === 0) {
      throw new CreateContainerConfigError(`container's runAsUser breaks non-root policy (pod: "${podDesc}", container: ${container.name})`);
    }
    return;
  }
  if (uid === 0) {
    throw new CreateContainerConfigError(`container has runAsNonRoot and image will run as root (pod: "${podDesc}", container: ${container.name})`);
  }
  if (uid === undefined && username) {
    throw new CreateContainerConfigError(
      `container has runAsNonRoot and image has non-numeric user (${username}), cannot verify user is non-root (pod: "${podDesc}", container: ${container.name})`,
    );
  }
}

/**
 * `<root>/<localhostProfile>` for a Localhost seccomp profile, refused (CreateContainerConfigError
 * naming it) when the name is absolute or climbs out of the root with `..`: upstream's API
 * validation refuses both, and a static pod never meets it.
 */
export function localhostSeccompPath(root: string, localhostProfile: string): string {
  if (posix.isAbsolute(localhostProfile)) {
    throw new CreateContainerConfigError(`seccomp localhostProfile ${JSON.stringify(localhostProfile)} must be a path relative to the seccomp profile root ${root}, not an absolute path`);
  }
  if (localhostProfile.split('/').includes('..')) {
    throw new CreateContainerConfigError(`seccomp localhostProfile ${JSON.stringify(localhostProfile)} must not contain '..' (it must stay under the seccomp profile root ${root})`);
  }
  return posix.join(root, localhostProfile);
}

/**
 * Resolves a Localhost profile's path on disk and checks that it stays under the profile root
 * once every symlink is followed; returns the resolved path (what the runtime is given, so it
 * reads no symlink). CreateContainerConfigError naming the profile when it resolves outside the
 * root. A profile (or root) that does not exist is given as it is: the runtime refuses it, which
 * is upstream's CreateContainerError naming the file.
 */
export async function confineLocalhostSeccompProfile(root: string, ref: string): Promise<string> {
  let realRoot: string;
  let real: string;
  try {
    realRoot = await realpath(root);
    real = await realpath(ref);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return ref;
    throw new CreateContainerConfigError(`seccomp localhost profile ${ref} cannot be read: ${(err as Error).message}`);
  }
  const rel = posix.relative(realRoot, real);
  if (rel === '' || rel === '..' || rel.startsWith('../') || posix.isAbsolute(rel)) {
    throw new CreateContainerConfigError(`seccomp localhost profile ${ref} resolves to ${real}, outside the seccomp profile root ${root}`);
  }
  return real;
}

function fieldSeccompProfile(
  profile: { type: string; localhostProfile?: string },
  root: string,
): SecurityProfile {
  if (profile.type === 'RuntimeDefault') return { profile_type: 'RuntimeDefault' };
  if (profile.type === 'Localhost') {
    if (!profile.localhostProfile) {
      throw new CreateContainerConfigError('localhostProfile must be set if seccompProfile type is Localhost.');
    }
    return { profile_type: 'Localhost', localhost_ref: localhostSeccompPath(root, profile.localhostProfile) };
  }
  return { profile_type: 'Unconfined' };
}

/** Container field first, then the pod's, then the kubelet default (upstream getSeccompProfile). */
export function getSeccompProfile(pod: Pod, container: Container, seccompDefault: boolean, root: string): SecurityProfile {
  const own = container.securityContext?.seccompProfile;
  if (own) return fieldSeccompProfile(own, root);
  const podLevel = pod.spec.securityContext?.seccompProfile;
  if (podLevel) return fieldSeccompProfile(podLevel, root);
  return { profile_type: seccompDefault ? 'RuntimeDefault' : 'Unconfined' };
}

/**
 * Whether the container's /proc is left unmasked. Upstream's API validation refuses
 * `Unmasked` unless the pod runs in a user namespace (`hostUsers: false`), so a pod that gets
 * here otherwise (a static pod) is refused by name rather than given the host's /proc; any
 * other value than Default/Unmasked is refused too.
 */
export function procMountUnmasked(pod: Pod, container: Container, procMount: string | undefined): boolean {
  if (procMount === undefined || procMount === 'Default') return false;
  if (procMount !== 'Unmasked') {
    throw new CreateContainerConfigError(`container ${container.name}: securityContext.procMount ${JSON.stringify(procMount)} is not supported (Default or Unmasked)`);
  }
  if ((pod.spec as { hostUsers?: boolean }).hostUsers !== false) {
    throw new CreateContainerConfigError(`container ${container.name}: securityContext.procMount "Unmasked" requires spec.hostUsers: false (a user namespace)`);
  }
  return true;
}

/**
 * The container's Linux security context (upstream determineEffectiveSecurityContext in
 * kuberuntime): capabilities, privileged, run-as user/group (the image's uid when none is
 * set), read-only rootfs, namespaces as the sandbox's, supplemental groups, no_new_privs when
 * allowPrivilegeEscalation is false, the default masked/read-only paths unless procMount is
 * Unmasked, and the seccomp profile.
 */
export function generateContainerSecurityContext(
  pod: Pod,
  container: Container,
  opts: Pick<ContainerConfigOptions, 'imageUser' | 'seccompDefault' | 'seccompProfileRoot'> = {},
): LinuxContainerSecurityContext {
  const eff = determineEffectiveSecurityContext(pod, container);
  const sc: LinuxContainerSecurityContext = {};
  if (eff.capabilities) {
    const caps: Capability = {
      add_capabilities: [...(eff.capabilities.add ?? [])],
      drop_capabilities: [...(eff.capabilities.drop ?? [])],
    };
    sc.capabilities = caps;
  }
  sc.privileged = eff.privileged === true;
  sc.readonly_rootfs = eff.readOnlyRootFilesystem === true;
  const seLinux = (eff as { seLinuxOptions?: { user?: string; role?: string; type?: string; level?: string } }).seLinuxOptions;
  if (seLinux) sc.selinux_options = { user: seLinux.user ?? '', role: seLinux.role ?? '', type: seLinux.type ?? '', level: seLinux.level ?? '' };
  if (typeof eff.runAsUser === 'number') {
    sc.run_as_user = { value: eff.runAsUser };
  } else {
    if (opts.imageUser?.uid !== undefined) sc.run_as_user = { value: opts.imageUser.uid };
    sc.run_as_username = opts.imageUser?.username ?? '';
  }
  if (typeof eff.runAsGroup === 'number') sc.run_as_group = { value: eff.runAsGroup };
  sc.seccomp = getSeccompProfile(pod, container, opts.seccompDefault === true, opts.seccompProfileRoot ?? DEFAULT_SECCOMP_PROFILE_ROOT);
  sc.namespace_options = namespacesForPod(pod);
  const podSc = pod.spec.securityContext;
  const groups: number[] = [];
  if (typeof podSc?.fsGroup === 'number') groups.push(podSc.fsGroup);
  for (const g of podSc?.supplementalGroups ?? []) groups.push(g);
  if (groups.length > 0) sc.supplemental_groups = groups;
  // only an explicit allowPrivilegeEscalation: false sets no_new_privs
  sc.no_new_privs = eff.allowPrivilegeEscalation === false;
  const unmasked = procMountUnmasked(pod, container, eff.procMount);
  Object.assign(sc, appArmorSecurityProfile(pod, container));
  sc.masked_paths = unmasked ? [] : [...DEFAULT_MASKED_PATHS];
  sc.readonly_paths = unmasked ? [] : [...DEFAULT_READONLY_PATHS];
  return sc;
}

/** Volume mounts, then the termination-message file at terminationMessagePath (upstream makeMounts). */
export function makeMounts(container: Container, opts: Pick<ContainerConfigOptions, 'mounts' | 'terminationMessageHostPath'>): MountInput[] {
  const mounts: MountInput[] = [...(opts.mounts ?? [])];
  if (opts.terminationMessageHostPath && container.terminationMessagePath) {
    mounts.push({ host_path: opts.terminationMessageHostPath, container_path: container.terminationMessagePath });
  }
  return mounts;
}

/**
 * The CreateContainer config for `container` of `pod` at attempt `restartCount`. Throws
 * CreateContainerConfigError (message as upstream's) when the environment cannot be built,
 * runAsNonRoot cannot hold, or the seccomp profile is invalid.
 */
export function generateContainerConfig(pod: Pod, container: Container, restartCount: number, opts: ContainerConfigOptions): ContainerConfig {
  const { envs } = makeEnvironment(pod, container, {
    nodeName: opts.nodeName,
    hostIPs: opts.hostIPs,
    podIPs: opts.podIPs,
    serviceAccountName: opts.serviceAccountName,
    nodeAllocatable: opts.nodeAllocatable,
    getConfigMap: opts.getConfigMap,
    getSecret: opts.getSecret,
  });
  verifyRunAsNonRoot(pod, container, opts.imageUser?.uid, opts.imageUser?.username);
  const { command, args } = expandCommand(container, envs);

  const config: ContainerConfig = {
    metadata: { name: container.name, attempt: restartCount },
    // upstream also sends user_specified_image (container.image); this CRI version has no such field
    image: { image: opts.imageRef },
  };
  if (command) config.command = command;
  if (args) config.args = args;
  if (container.workingDir) config.working_dir = container.workingDir;
  config.envs = envs.map((e): KeyValue => ({ key: e.key, value: e.value }));
  const mounts = makeMounts(container, opts);
  if (mounts.length > 0) config.mounts = mounts;
  config.labels = newContainerLabels(container, pod);
  config.annotations = newContainerAnnotations(container, pod, restartCount, opts.annotations);
  config.log_path = buildContainerLogsPath(container.name, restartCount);
  config.stdin = container.stdin === true;
  config.stdin_once = container.stdinOnce === true;
  config.tty = container.tty === true;
  const linux: LinuxContainerConfig = {
    resources: generateLinuxContainerResources(pod, container, opts),
    security_context: generateContainerSecurityContext(pod, container, opts),
  };
  config.linux = linux;
  return config;
}

/** The container's log directory, for the caller to create before CreateContainer. */
export function containerLogsDirectory(pod: Pod, container: Container, podLogsDir?: string): string {
  return buildContainerLogsDirectory(
    podLogsDir || DEFAULT_POD_LOGS_DIR,
    pod.metadata.namespace ?? '',
    pod.metadata.name ?? '',
    pod.metadata.uid ?? '',
    container.name,
  );
}
