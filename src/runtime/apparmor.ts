// AppArmor as upstream's kubelet handles it (pkg/security/apparmor helpers and validate,
// kuberuntime getAppArmorProfile): the profile a container gets (its own field, then the
// deprecated per-container annotation, then the pod's field), its CRI form, and the admission
// check that refuses a pod asking for confinement the host cannot give.

import { existsSync, readFileSync } from 'node:fs';
import type { Container, Pod } from '../api/types.js';
import type { SecurityProfile } from './cri-types.js';
import { CreateContainerConfigError } from './env.js';

export interface AppArmorProfile {
  type: string;
  localhostProfile?: string;
}

/** The admission reason of a pod refused for AppArmor (upstream AppArmorNotAdmittedReason). */
export const AppArmorNotAdmittedReason = 'AppArmor';
/** The deprecated per-container annotation, followed by the container name. */
export const APPARMOR_ANNOTATION_PREFIX = 'container.apparmor.security.beta.kubernetes.io/';
const ANNOTATION_RUNTIME_DEFAULT = 'runtime/default';
const ANNOTATION_UNCONFINED = 'unconfined';
const ANNOTATION_LOCALHOST_PREFIX = 'localhost/';

function allContainers(pod: Pod): Container[] {
  const ephemeral = Array.isArray(pod.spec.ephemeralContainers) ? (pod.spec.ephemeralContainers as Container[]) : [];
  return [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? []), ...ephemeral];
}

/** The profile an annotation value names; undefined for a value upstream does not know. */
function profileFromAnnotation(value: string): AppArmorProfile | undefined {
  if (value === ANNOTATION_RUNTIME_DEFAULT) return { type: 'RuntimeDefault' };
  if (value === ANNOTATION_UNCONFINED) return { type: 'Unconfined' };
  if (value.startsWith(ANNOTATION_LOCALHOST_PREFIX)) return { type: 'Localhost', localhostProfile: value.slice(ANNOTATION_LOCALHOST_PREFIX.length) };
  return undefined;
}

/** The container's profile (upstream apparmor.GetProfile), undefined when none is asked for. */
export function getAppArmorProfile(pod: Pod, container: Container): AppArmorProfile | undefined {
  const own = container.securityContext?.appArmorProfile;
  if (own) return own;
  // static pods may carry only the annotation: it comes before the pod's field, as upstream
  const annotation = pod.metadata.annotations?.[APPARMOR_ANNOTATION_PREFIX + container.name];
  if (annotation !== undefined) {
    const p = profileFromAnnotation(annotation);
    if (p) return p;
  }
  return pod.spec.securityContext?.appArmorProfile ?? undefined;
}

/**
 * The CRI `apparmor` profile and the deprecated `apparmor_profile` string for a container
 * (upstream getAppArmorProfile); both absent when the pod asks for nothing. Throws
 * CreateContainerConfigError for a Localhost profile without a name or an unknown type.
 */
export function appArmorSecurityProfile(pod: Pod, container: Container): { apparmor?: SecurityProfile; apparmor_profile?: string } {
  const profile = getAppArmorProfile(pod, container);
  if (!profile) return {};
  switch (profile.type) {
    case 'RuntimeDefault':
      return { apparmor: { profile_type: 'RuntimeDefault' }, apparmor_profile: ANNOTATION_RUNTIME_DEFAULT };
    case 'Unconfined':
      return { apparmor: { profile_type: 'Unconfined' }, apparmor_profile: ANNOTATION_UNCONFINED };
    case 'Localhost':
      if (profile.localhostProfile === undefined) throw new CreateContainerConfigError('missing localhost apparmor profile name');
      return {
        apparmor: { profile_type: 'Localhost', localhost_ref: profile.localhostProfile },
        apparmor_profile: ANNOTATION_LOCALHOST_PREFIX + profile.localhostProfile,
      };
    default:
      throw new CreateContainerConfigError(`unknown apparmor profile type: ${JSON.stringify(profile.type)}`);
  }
}

/** The pod asks for AppArmor confinement anywhere (upstream isRequired). */
export function appArmorRequired(pod: Pod): boolean {
  const podProfile = pod.spec.securityContext?.appArmorProfile;
  if (podProfile && podProfile.type !== 'Unconfined') return true;
  if (allContainers(pod).some((c) => c.securityContext?.appArmorProfile && c.securityContext.appArmorProfile.type !== 'Unconfined')) return true;
  for (const [key, value] of Object.entries(pod.metadata.annotations ?? {})) {
    if (key.startsWith(APPARMOR_ANNOTATION_PREFIX)) return value !== ANNOTATION_UNCONFINED;
  }
  return false;
}

/**
 * Why the pod cannot be confined as it asks on this host (upstream validator.Validate), or
 * undefined: AppArmor off on the host, or a Localhost profile with an empty name.
 */
export function validateAppArmor(pod: Pod, hostEnabled: boolean): string | undefined {
  if (!appArmorRequired(pod)) return undefined;
  if (!hostEnabled) return 'AppArmor is not enabled on the host';
  for (const c of allContainers(pod)) {
    const p = getAppArmorProfile(pod, c);
    if (p?.type === 'Localhost' && (p.localhostProfile === undefined || p.localhostProfile.trim() === '')) {
      return `invalid empty AppArmor profile name: ${JSON.stringify(p)}`;
    }
  }
  return undefined;
}

/**
 * AppArmor is enabled on this host (runc's IsEnabled): securityfs shows apparmor and the
 * module's `enabled` parameter starts with Y. Read once at start-up.
 */
export function isAppArmorEnabled(root = '/sys'): boolean {
  if (!existsSync(`${root}/kernel/security/apparmor`)) return false;
  try {
    return readFileSync(`${root}/module/apparmor/parameters/enabled`, 'utf8').startsWith('Y');
  } catch {
    return false;
  }
}
