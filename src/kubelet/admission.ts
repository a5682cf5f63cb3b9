// Pod admission as upstream's kubelet does it (pkg/kubelet/lifecycle/predicate.go and the
// scheduler's AdmissionCheck): the pod count (maxPods) and cpu/memory/ephemeral-storage
// requests against allocatable, then required node affinity and nodeSelector, the node name,
// host ports, and (for pods not from a file or URL) NoExecute taints. The first failure gives
// the reason and message; a rejected pod becomes Failed with "Pod was rejected: <message>".
// Also activeDeadlineSeconds (upstream's activeDeadlineHandler), and the sysctl and AppArmor
// admit handlers (upstream's sysctl allowlist and AppArmor validator).

import type { Container, Pod, PodStatus, Toleration } from '../api/types.js';
import { parseQuantity } from '../api/quantity.js';
import { SysctlAllowlist, SysctlForbiddenReason, safeSysctlAllowlist } from '../api/sysctl.js';
import { AppArmorNotAdmittedReason, validateAppArmor } from '../runtime/apparmor.js';

export const OutOfCPU = 'OutOfcpu';
export const OutOfMemory = 'OutOfmemory';
export const OutOfEphemeralStorage = 'OutOfephemeral-storage';
export const OutOfPods = 'OutOfpods';
export const PodOSSelectorNodeLabelDoesNotMatch = 'PodOSSelectorNodeLabelDoesNotMatch';
export const PodOSNotSupported = 'PodOSNotSupported';
export const SupplementalGroupsPolicyNotSupported = 'SupplementalGroupsPolicyNotSupported';
export const DeadlineExceededReason = 'DeadlineExceeded';
export const DeadlineExceededMessage = 'Pod was active on the node longer than the specified deadline';

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

/** What admission reads of the node: its labels, taints and allocatable. */
export interface AdmissionNode {
  name: string;
  labels: Record<string, string>;
  taints: Taint[];
  /** cpu in millicores, memory and ephemeral-storage in bytes, pods a count; absent: not checked. */
  allocatable: { cpu?: number; memory?: number; 'ephemeral-storage'?: number; pods: number };
}

export interface AdmitResult {
  admit: boolean;
  reason?: string;
  message?: string;
}

type Resource = 'cpu' | 'memory' | 'ephemeral-storage';
const RESOURCES: Resource[] = ['cpu', 'memory', 'ephemeral-storage'];

function amount(r: Resource, q: string | number | undefined): number {
  if (q === undefined) return 0;
  try {
    const v = parseQuantity(q);
    return r === 'cpu' ? v.milliValue() : v.value();
  } catch {
    return 0;
  }
}

/**
 * The pod's effective requests (upstream's computePodResourceRequest): the sum over its
 * containers (restartable init containers, i.e. sidecars, included), or the largest init
 * container plus the sidecars started before it when that is more; plus the pod overhead.
 */
export function podRequests(pod: Pod): Record<Resource, number> {
  const out = { cpu: 0, memory: 0, 'ephemeral-storage': 0 } as Record<Resource, number>;
  const req = (c: Container, r: Resource) => amount(r, c.resources?.requests?.[r]);
  for (const r of RESOURCES) {
    let sum = 0;
    for (const c of pod.spec.containers ?? []) sum += req(c, r);
    let sidecars = 0;
    let initMax = 0;
    for (const c of pod.spec.initContainers ?? []) {
      if (c.restartPolicy === 'Always') {
        sidecars += req(c, r);
        initMax = Math.max(initMax, sidecars);
      } else {
        initMax = Math.max(initMax, sidecars + req(c, r));
      }
    }
    out[r] = Math.max(sum + sidecars, initMax) + amount(r, pod.spec.overhead?.[r]);
  }
  return out;
}

/** Host ports the pod asks for, as `protocol/hostIP/port` (0.0.0.0 conflicts with any IP). */
function hostPorts(pod: Pod): { protocol: string; ip: string; port: number }[] {
  const out: { protocol: string; ip: string; port: number }[] = [];
  for (const c of [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? [])]) {
    for (const p of c.ports ?? []) {
      if (!p.hostPort) continue;
      out.push({ protocol: p.protocol ?? 'TCP', ip: p.hostIP || '0.0.0.0', port: p.hostPort });
    }
  }
  return out;
}

function portsConflict(a: Pod, others: Pod[]): boolean {
  const want = hostPorts(a);
  if (want.length === 0) return false;
  const used = others.flatMap(hostPorts);
  return want.some((w) => used.some((u) => u.port === w.port && u.protocol === w.protocol && (u.ip === w.ip || u.ip === '0.0.0.0' || w.ip === '0.0.0.0')));
}

interface Requirement {
  key: string;
  operator: string;
  values?: string[];
}

function matchRequirement(labels: Record<string, string>, r: Requirement): boolean {
  const v = labels[r.key];
  switch (r.operator) {
    case 'In': return v !== undefined && (r.values ?? []).includes(v);
    case 'NotIn': return v === undefined || !(r.values ?? []).includes(v);
    case 'Exists': return v !== undefined;
    case 'DoesNotExist': return v === undefined;
    case 'Gt':
    case 'Lt': {
      if (v === undefined || !/^-?\d+$/.test(v) || (r.values ?? []).length !== 1 || !/^-?\d+$/.test(r.values![0]!)) return false;
      return r.operator === 'Gt' ? Number(v) > Number(r.values![0]) : Number(v) < Number(r.values![0]);
    }
    default: return false;
  }
}

/** nodeSelector and requiredDuringSchedulingIgnoredDuringExecution (terms ORed, expressions ANDed). */
export function matchesNodeSelectorAndAffinity(pod: Pod, node: AdmissionNode): boolean {
  for (const [k, v] of Object.entries(pod.spec.nodeSelector ?? {})) if (node.labels[k] !== v) return false;
  const required = (pod.spec.affinity as { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: unknown[] } } } | undefined)
    ?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!required) return true;
  const terms = (required.nodeSelectorTerms ?? []) as { matchExpressions?: Requirement[]; matchFields?: Requirement[] }[];
  return terms.some((t) => {
    const exprs = t.matchExpressions ?? [];
    const fields = t.matchFields ?? [];
    // an empty term matches nothing, as upstream
    if (exprs.length === 0 && fields.length === 0) return false;
    return exprs.every((r) => matchRequirement(node.labels, r)) && fields.every((r) => r.key === 'metadata.name' && matchRequirement({ 'metadata.name': node.name }, r));
  });
}

/** upstream's ToleratesTaint. */
function tolerates(t: Toleration, taint: Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  if (!t.key && t.operator !== 'Exists') return false;
  if (t.operator === 'Exists') return true;
  return (t.operator ?? 'Equal') === 'Equal' && (t.value ?? '') === (taint.value ?? '');
}

/**
 * Whether `pod` can run next to `others` (the active pods already admitted) on `node`. Static
 * pods skip the taint check, as upstream.
 */
export function canAdmitPod(pod: Pod, others: Pod[], node: AdmissionNode, isStatic = false): AdmitResult {
  const podLabels = pod.metadata.labels ?? {};
  const osLabel = podLabels['kubernetes.io/os'];
  if (osLabel !== undefined && osLabel !== (node.labels['kubernetes.io/os'] ?? 'linux')) {
    return { admit: false, reason: PodOSSelectorNodeLabelDoesNotMatch, message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label" };
  }
  if (pod.spec.os?.name !== undefined && pod.spec.os.name !== 'linux') {
    return { admit: false, reason: PodOSNotSupported, message: "Failed to admit pod as the OS field doesn't match node OS" };
  }
  // upstream (1.33): Strict on a node whose runtime cannot enforce it is refused, not run as Merge;
  // kubelet-ts's CRI has no supplemental_groups_policy field, so no runtime here enforces it
  const groupsPolicy = pod.spec.securityContext?.supplementalGroupsPolicy;
  if (groupsPolicy !== undefined && groupsPolicy !== 'Merge') {
    return { admit: false, reason: SupplementalGroupsPolicyNotSupported, message: `SupplementalGroupsPolicy=${groupsPolicy} is not supported in this node` };
  }
  // The resources: pods first, then cpu, memory, ephemeral-storage (the first failure wins).
  const insufficient = (name: string, requested: number, used: number, capacity: number): AdmitResult => ({
    admit: false,
    reason: name === 'pods' ? OutOfPods : `OutOf${name}`,
    message: `Node didn't have enough resource: ${name}, requested: ${requested}, used: ${used}, capacity: ${capacity}`,
  });
  if (others.length + 1 > node.allocatable.pods) return insufficient('pods', 1, others.length, node.allocatable.pods);
  const want = podRequests(pod);
  if (want.cpu > 0 || want.memory > 0 || want['ephemeral-storage'] > 0) {
    const used = { cpu: 0, memory: 0, 'ephemeral-storage': 0 } as Record<Resource, number>;
    for (const o of others) {
      const r = podRequests(o);
      for (const k of RESOURCES) used[k] += r[k];
    }
    for (const k of RESOURCES) {
      const cap = node.allocatable[k];
      if (cap === undefined || want[k] === 0) continue;
      if (want[k] > cap - used[k]) return insufficient(k, want[k], used[k], cap);
    }
  }
  const predicate = (name: string, desc: string): AdmitResult => ({ admit: false, reason: name, message: `Predicate ${name} failed: ${desc}` });
  if (!matchesNodeSelectorAndAffinity(pod, node)) return predicate('NodeAffinity', "node(s) didn't match Pod's node affinity/selector");
  if (pod.spec.nodeName && pod.spec.nodeName !== node.name) return predicate('NodeName', "node(s) didn't match the requested node name");
  if (portsConflict(pod, others)) return predicate('NodePorts', "node(s) didn't have free ports for the requested pod ports");
  if (!isStatic) {
    const tolerations = pod.spec.tolerations ?? [];
    const untolerated = node.taints.find((t) => t.effect === 'NoExecute' && !tolerations.some((x) => tolerates(x, t)));
    if (untolerated) return predicate('TaintToleration', "node(s) had taints that the pod didn't tolerate");
  }
  return { admit: true };
}

/** The status of a rejected pod (upstream's rejectPod). */
export function rejectedStatus(pod: Pod, reason: string, message: string, qosClass?: PodStatus['qosClass']): PodStatus {
  return {
    ...(qosClass ?? pod.status?.qosClass ? { qosClass: qosClass ?? pod.status?.qosClass } : {}),
    phase: 'Failed',
    reason,
    message: `Pod was rejected: ${message}`,
  };
}

/**
 * activeDeadlineSeconds: past it once the pod has run that long since its startTime. Returns
 * the milliseconds left (≤ 0: past), or undefined when the pod has no deadline or no start.
 */
export function activeDeadlineLeftMs(pod: Pod, startTime: string | undefined, now: number): number | undefined {
  const d = pod.spec.activeDeadlineSeconds;
  if (typeof d !== 'number' || !startTime) return undefined;
  const started = Date.parse(startTime);
  if (Number.isNaN(started)) return undefined;
  return started + d * 1000 - now;
}

/**
 * The sysctl admit handler (upstream's patternAllowlist): the safe set for this kernel plus
 * allowedUnsafeSysctls; a pod setting anything else, or a net (ipc) sysctl with hostNetwork
 * (hostIPC), is refused with SysctlForbidden. Throws on a pattern upstream refuses at start.
 */
export function sysctlAdmitHandler(allowedUnsafeSysctls: readonly string[], kernelRelease: string | undefined): (pod: Pod) => AdmitResult {
  const allowlist = new SysctlAllowlist([...safeSysctlAllowlist(kernelRelease), ...allowedUnsafeSysctls]);
  return (pod) => {
    for (const s of pod.spec.securityContext?.sysctls ?? []) {
      const err = allowlist.validate(s.name, pod.spec.hostNetwork === true, pod.spec.hostIPC === true);
      if (err) return { admit: false, reason: SysctlForbiddenReason, message: `forbidden sysctl: ${err}` };
    }
    return { admit: true };
  };
}

/**
 * The AppArmor admit handler (upstream's appArmorAdmitHandler): a pending pod asking for a
 * profile other than unconfined is refused when AppArmor is not enabled on the host, or when
 * a Localhost profile has no name.
 */
export function appArmorAdmitHandler(hostEnabled: boolean): (pod: Pod) => AdmitResult {
  return (pod) => {
    const phase = pod.status?.phase;
    if (phase !== undefined && phase !== 'Pending') return { admit: true };
    const err = validateAppArmor(pod, hostEnabled);
    if (!err) return { admit: true };
    return { admit: false, reason: AppArmorNotAdmittedReason, message: `Cannot enforce AppArmor: ${err}` };
  };
}
