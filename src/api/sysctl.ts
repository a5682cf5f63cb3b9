// Sysctls as upstream's kubelet judges them (pkg/kubelet/sysctl, component-helpers
// node/util/sysctl, policy validation's sysctl patterns): the kernel namespace a sysctl lives
// in, the safe set (some members only from the kernel release that namespaced them), and the
// allowlist (safe set + allowedUnsafeSysctls, with `prefix*` patterns) the kubelet admits by.

import { KubeletError } from '../util/errors.js';

/** A sysctl pattern the allowlist cannot take (upstream NewAllowlist fails the kubelet's start). */
export class SysctlPatternError extends KubeletError {
  constructor(message: string) {
    super('SysctlPatternError', message);
  }
}

/** The admission reason of a pod with a forbidden sysctl (upstream sysctl.ForbiddenReason). */
export const SysctlForbiddenReason = 'SysctlForbidden';

export type SysctlNamespace = 'IPC' | 'Net' | '';

/** Safe sysctls and the kernel release that namespaced them ('' = any): upstream's list. */
export const SAFE_SYSCTLS: readonly { name: string; kernel: string }[] = [
  { name: 'kernel.shm_rmid_forced', kernel: '' },
  { name: 'net.ipv4.ip_local_port_range', kernel: '' },
  { name: 'net.ipv4.tcp_syncookies', kernel: '' },
  { name: 'net.ipv4.ping_group_range', kernel: '' },
  { name: 'net.ipv4.ip_unprivileged_port_start', kernel: '' },
  { name: 'net.ipv4.ip_local_reserved_ports', kernel: '3.16' },
  { name: 'net.ipv4.tcp_keepalive_time', kernel: '4.5' },
  { name: 'net.ipv4.tcp_fin_timeout', kernel: '4.6' },
  { name: 'net.ipv4.tcp_keepalive_intvl', kernel: '4.5' },
  { name: 'net.ipv4.tcp_keepalive_probes', kernel: '4.5' },
  { name: 'net.ipv4.tcp_rmem', kernel: '4.15' },
  { name: 'net.ipv4.tcp_wmem', kernel: '4.15' },
];

/** Longest sysctl name (upstream validation.SysctlMaxLength). */
export const SYSCTL_MAX_LENGTH = 253;
const SEGMENT = '[a-z0-9]([-_a-z0-9]*[a-z0-9])?';
/** upstream policyvalidation.SysctlContainSlashPatternFmt, as printed in its error. */
export const SYSCTL_PATTERN_FMT = `(${SEGMENT}[\\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`;
const SYSCTL_PATTERN = new RegExp(`^${SYSCTL_PATTERN_FMT}$`);

const NAME_TO_NAMESPACE: Readonly<Record<string, SysctlNamespace>> = {
  'kernel.sem': 'IPC',
  'kernel.shmall': 'IPC',
  'kernel.shmmax': 'IPC',
  'kernel.shmmni': 'IPC',
  'kernel.shm_rmid_forced': 'IPC',
  'kernel.shm': 'IPC',
  'kernel.msgmax': 'IPC',
  'kernel.msgmnb': 'IPC',
  'kernel.msgmni': 'IPC',
  'kernel.msg': 'IPC',
};
const PREFIX_TO_NAMESPACE: readonly [string, SysctlNamespace][] = [
  ['net', 'Net'],
  ['fs.mqueue', 'IPC'],
];

/**
 * The dotted form of a sysctl name (upstream NormalizeName): a name whose first separator is
 * '/' has its '.' and '/' swapped (`net/ipv4/conf/eno2.100/rp_filter` →
 * `net.ipv4.conf.eno2/100.rp_filter`).
 */
export function normalizeSysctlName(name: string): string {
  const m = /[./]/.exec(name);
  if (!m || m[0] === '.') return name;
  return name.replace(/[./]/g, (c) => (c === '.' ? '/' : '.'));
}

function namespaceOf(name: string): SysctlNamespace {
  const ns = Object.prototype.hasOwnProperty.call(NAME_TO_NAMESPACE, name) ? NAME_TO_NAMESPACE[name] : undefined;
  if (ns !== undefined) return ns;
  for (const [p, pns] of PREFIX_TO_NAMESPACE) if (name.startsWith(`${p}.`)) return pns;
  return '';
}

/** The namespace of a sysctl or pattern, its name or prefix (up to a '*'), and whether it is a prefix (upstream GetNamespace). */
export function sysctlNamespace(sysctl: string): { ns: SysctlNamespace; sysctlOrPrefix: string; prefixed: boolean } {
  let sysctlOrPrefix = normalizeSysctlName(sysctl);
  const star = sysctlOrPrefix.indexOf('*');
  const prefixed = star !== -1;
  if (prefixed) sysctlOrPrefix = sysctlOrPrefix.slice(0, star);
  return { ns: namespaceOf(sysctlOrPrefix), sysctlOrPrefix, prefixed };
}

/** A valid sysctl pattern (upstream IsValidSysctlPattern). */
export function isValidSysctlPattern(s: string): boolean {
  return s.length <= SYSCTL_MAX_LENGTH && SYSCTL_PATTERN.test(s);
}

/** Why `pattern` cannot be in the allowlist (upstream NewAllowlist's errors), or undefined. */
export function sysctlPatternError(pattern: string): string | undefined {
  if (!isValidSysctlPattern(pattern)) {
    return `sysctl ${JSON.stringify(pattern)} must have at most ${SYSCTL_MAX_LENGTH} characters and match regex ${SYSCTL_PATTERN_FMT}`;
  }
  const { ns, sysctlOrPrefix } = sysctlNamespace(pattern);
  if (ns === '') return `the sysctls ${JSON.stringify(sysctlOrPrefix)} are not known to be namespaced`;
  return undefined;
}

function versionAtLeast(release: string, min: string): boolean {
  const have = (/^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(release) ?? []).slice(1).map((x) => Number(x ?? 0));
  if (have.length === 0 || Number.isNaN(have[0])) return false;
  const want = min.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const a = have[i] ?? 0;
    const b = want[i] ?? 0;
    if (a !== b) return a > b;
  }
  return true;
}

/**
 * The safe sysctls on a kernel of release `kernelRelease` (`uname -r`); those namespaced later
 * than it are left out (upstream getSafeSysctlAllowlist). An unreadable release keeps only the
 * ungated ones.
 */
export function safeSysctlAllowlist(kernelRelease: string | undefined): string[] {
  return SAFE_SYSCTLS.filter((s) => s.kernel === '' || (kernelRelease !== undefined && versionAtLeast(kernelRelease, s.kernel))).map((s) => s.name);
}

/** The allowlist the kubelet admits by (upstream patternAllowlist). */
export class SysctlAllowlist {
  private readonly sysctls = new Map<string, SysctlNamespace>();
  private readonly prefixes = new Map<string, SysctlNamespace>();

  /** Throws SysctlPatternError (upstream's message) for a pattern that is invalid or not namespaced. */
  constructor(patterns: readonly string[]) {
    for (const p of patterns) {
      const err = sysctlPatternError(p);
      if (err) throw new SysctlPatternError(err);
      const { ns, sysctlOrPrefix, prefixed } = sysctlNamespace(p);
      (prefixed ? this.prefixes : this.sysctls).set(sysctlOrPrefix, ns);
    }
  }

  /** Why the pod may not set `name` (upstream validateSysctl), or undefined when it may. */
  validate(name: string, hostNet: boolean, hostIPC: boolean): string | undefined {
    const sysctl = normalizeSysctlName(name);
    const check = (ns: SysctlNamespace): string | undefined => {
      if ((ns === 'IPC' && hostIPC) || (ns === 'Net' && hostNet)) return `${JSON.stringify(sysctl)} not allowed with host ${ns} enabled`;
      return undefined;
    };
    const exact = this.sysctls.get(sysctl);
    if (exact !== undefined) return check(exact);
    for (const [p, ns] of this.prefixes) if (sysctl.startsWith(p)) return check(ns);
    return `${JSON.stringify(sysctl)} not allowlisted`;
  }
}
