// The sysctl and AppArmor admit handlers as upstream's kubelet: the safe set (kernel-gated
// members), allowedUnsafeSysctls with its prefix form, the host-namespace rules, the '/' form,
// upstream's reasons and messages; and the Kubelet refusing such a pod before any sync.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { SysctlAllowlist, normalizeSysctlName, safeSysctlAllowlist, sysctlPatternError } from '../../src/api/sysctl.js';
import { appArmorAdmitHandler, canAdmitPod, sysctlAdmitHandler, type AdmissionNode } from '../../src/kubelet/admission.js';
import { Kubelet } from '../../src/kubelet/kubelet.js';
import { harness, mkPod, settle, until } from './doubles.js';

function withSysctls(uid: string, sysctls: Record<string, string>, extra: Partial<Pod['spec']> = {}): Pod {
  const p = mkPod(uid);
  p.spec.securityContext = { sysctls: Object.entries(sysctls).map(([name, value]) => ({ name, value })) };
  Object.assign(p.spec, extra);
  return p;
}

describe('safeSysctlAllowlist', () => {
  const gated = ['net.ipv4.ip_local_reserved_ports', 'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes', 'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'];
  const rows: { kernel: string | undefined; has: string[]; lacks: string[] }[] = [
    { kernel: '6.18.44-fc', has: ['kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_unprivileged_port_start', ...gated], lacks: ['kernel.msgmax'] },
    { kernel: '3.10.0-1160.el7.x86_64', has: ['kernel.shm_rmid_forced'], lacks: gated },
    { kernel: '4.5.0', has: ['net.ipv4.ip_local_reserved_ports', 'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes'], lacks: ['net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'] },
    { kernel: '4.14.300', has: ['net.ipv4.tcp_fin_timeout'], lacks: ['net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'] },
    { kernel: '4.15', has: ['net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'], lacks: [] },
    { kernel: undefined, has: ['net.ipv4.ping_group_range'], lacks: gated },
  ];
  for (const r of rows) {
    it(`kernel ${r.kernel ?? '(unknown)'}`, () => {
      const list = safeSysctlAllowlist(r.kernel);
      for (const s of r.has) assert.ok(list.includes(s), `${s} is safe on ${r.kernel}`);
      for (const s of r.lacks) assert.ok(!list.includes(s), `${s} is not safe on ${r.kernel}`);
    });
  }
});

describe('sysctl names and patterns', () => {
  it('the / form is normalised as upstream', () => {
    assert.equal(normalizeSysctlName('kernel/shm_rmid_forced'), 'kernel.shm_rmid_forced');
    assert.equal(normalizeSysctlName('net/ipv4/conf/eno2.100/rp_filter'), 'net.ipv4.conf.eno2/100.rp_filter');
    assert.equal(normalizeSysctlName('net.ipv4.conf.eno2/100.rp_filter'), 'net.ipv4.conf.eno2/100.rp_filter');
  });
  it('patterns upstream refuses at start, with its messages', () => {
    assert.equal(sysctlPatternError('kernel.msg*'), undefined);
    assert.equal(sysctlPatternError('net.core.somaxconn'), undefined);
    assert.equal(sysctlPatternError('vm.swappiness'), 'the sysctls "vm.swappiness" are not known to be namespaced');
    assert.equal(sysctlPatternError('kernel.*'), 'the sysctls "kernel." are not known to be namespaced');
    assert.match(sysctlPatternError('Kernel.MSG')!, /^sysctl "Kernel.MSG" must have at most 253 characters and match regex /);
  });
});

describe('sysctlAdmitHandler', () => {
  const kernel = '6.1.0';
  const rows: { name: string; pod: Pod; unsafe?: string[]; message?: string }[] = [
    { name: 'no sysctls', pod: mkPod('a') },
    { name: 'a safe sysctl', pod: withSysctls('a', { 'kernel.shm_rmid_forced': '1' }) },
    { name: 'a safe sysctl in the / form', pod: withSysctls('a', { 'net/ipv4/tcp_syncookies': '1' }) },
    { name: 'an unsafe sysctl', pod: withSysctls('a', { 'kernel.msgmax': '1024' }), message: 'forbidden sysctl: "kernel.msgmax" not allowlisted' },
    { name: 'an unsafe sysctl allowed by name', pod: withSysctls('a', { 'kernel.msgmax': '1024' }), unsafe: ['kernel.msgmax'] },
    { name: 'an unsafe sysctl allowed by prefix', pod: withSysctls('a', { 'kernel.msgmax': '1024', 'kernel.msgmnb': '2048' }), unsafe: ['kernel.msg*'] },
    { name: 'a prefix does not allow its neighbours', pod: withSysctls('a', { 'kernel.sem': '1 2 3 4' }), unsafe: ['kernel.msg*'], message: 'forbidden sysctl: "kernel.sem" not allowlisted' },
    { name: 'a net sysctl with hostNetwork', pod: withSysctls('a', { 'net.ipv4.tcp_syncookies': '1' }, { hostNetwork: true }), message: 'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled' },
    { name: 'an ipc sysctl with hostIPC', pod: withSysctls('a', { 'kernel.shm_rmid_forced': '1' }, { hostIPC: true }), message: 'forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled' },
    { name: 'an allowed unsafe ipc prefix with hostIPC', pod: withSysctls('a', { 'kernel.msgmax': '1' }, { hostIPC: true }), unsafe: ['kernel.msg*'], message: 'forbidden sysctl: "kernel.msgmax" not allowed with host IPC enabled' },
    { name: 'an ipc sysctl with hostNetwork only', pod: withSysctls('a', { 'kernel.shm_rmid_forced': '1' }, { hostNetwork: true }) },
    { name: 'the first forbidden one is named', pod: withSysctls('a', { 'kernel.shm_rmid_forced': '1', 'vm.swappiness': '1', 'kernel.msgmax': '1' }), message: 'forbidden sysctl: "vm.swappiness" not allowlisted' },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const got = sysctlAdmitHandler(r.unsafe ?? [], kernel)(r.pod);
      if (r.message === undefined) assert.deepEqual(got, { admit: true });
      else assert.deepEqual(got, { admit: false, reason: 'SysctlForbidden', message: r.message });
    });
  }
  it('a pattern upstream refuses fails the handler at construction', () => {
    assert.throws(() => sysctlAdmitHandler(['vm.*'], kernel), /the sysctls "vm." are not known to be namespaced/);
    assert.throws(() => new SysctlAllowlist(['not valid!']), /must have at most 253 characters/);
  });
});

describe('appArmorAdmitHandler', () => {
  const withProfile = (type: string, localhostProfile?: string, where: 'pod' | 'container' = 'container'): Pod => {
    const p = mkPod('aa');
    const profile = localhostProfile === undefined ? { type } : { type, localhostProfile };
    if (where === 'pod') p.spec.securityContext = { appArmorProfile: profile };
    else p.spec.containers[0]!.securityContext = { appArmorProfile: profile };
    return p;
  };
  const annotated = (value: string): Pod => {
    const p = mkPod('aa');
    p.metadata.annotations = { 'container.apparmor.security.beta.kubernetes.io/c': value };
    return p;
  };
  const notEnabled = { admit: false, reason: 'AppArmor', message: 'Cannot enforce AppArmor: AppArmor is not enabled on the host' };
  const rows: { name: string; pod: Pod; enabled: boolean; want: object }[] = [
    { name: 'nothing asked, host off', pod: mkPod('aa'), enabled: false, want: { admit: true } },
    { name: 'Unconfined, host off', pod: withProfile('Unconfined'), enabled: false, want: { admit: true } },
    { name: 'unconfined annotation, host off', pod: annotated('unconfined'), enabled: false, want: { admit: true } },
    { name: 'RuntimeDefault on the container, host off', pod: withProfile('RuntimeDefault'), enabled: false, want: notEnabled },
    { name: 'RuntimeDefault on the pod, host off', pod: withProfile('RuntimeDefault', undefined, 'pod'), enabled: false, want: notEnabled },
    { name: 'Localhost, host off', pod: withProfile('Localhost', 'k8s-nginx'), enabled: false, want: notEnabled },
    { name: 'runtime/default annotation, host off', pod: annotated('runtime/default'), enabled: false, want: notEnabled },
    { name: 'localhost/ annotation, host off', pod: annotated('localhost/k8s-nginx'), enabled: false, want: notEnabled },
    { name: 'RuntimeDefault, host on', pod: withProfile('RuntimeDefault'), enabled: true, want: { admit: true } },
    { name: 'Localhost with a name, host on', pod: withProfile('Localhost', 'k8s-nginx'), enabled: true, want: { admit: true } },
    {
      name: 'Localhost with an empty name, host on', pod: withProfile('Localhost', ' '), enabled: true,
      want: { admit: false, reason: 'AppArmor', message: 'Cannot enforce AppArmor: invalid empty AppArmor profile name: {"type":"Localhost","localhostProfile":" "}' },
    },
  ];
  for (const r of rows) {
    it(r.name, () => assert.deepEqual(appArmorAdmitHandler(r.enabled)(r.pod), r.want));
  }
  it('a pod already running is not checked again', () => {
    const p = withProfile('RuntimeDefault');
    p.status = { phase: 'Running' };
    assert.deepEqual(appArmorAdmitHandler(false)(p), { admit: true });
  });
});

describe('the Kubelet refuses a pod by sysctl or AppArmor before any sync', () => {
  async function run(setup: (h: ReturnType<typeof harness>) => void, pod: Pod): Promise<{ calls: string[]; status: ReturnType<Kubelet['statusManager']['getPodStatus']> }> {
    const dir = await mkdtemp(join(tmpdir(), 'kts-podsec-'));
    const h = harness(dir);
    h.deps.kernelRelease = '6.1.0';
    h.deps.appArmorEnabled = false;
    setup(h);
    const k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
    try {
      await k.start();
      h.plegWiring!.cache.updateTime(Number.MAX_SAFE_INTEGER);
      h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
      await until(() => h.runtime.calls.length > 0 || k.statusManager.getPodStatus(pod.metadata.uid!)?.phase === 'Failed', 'admission');
      await settle(20);
      return { calls: [...h.runtime.calls], status: k.statusManager.getPodStatus(pod.metadata.uid!) };
    } finally {
      await k.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }

  it('kernel.msgmax: Failed, SysctlForbidden, never synced', async () => {
    const { calls, status } = await run(() => undefined, withSysctls('msg', { 'kernel.msgmax': '65536' }));
    assert.deepEqual(calls, []);
    assert.equal(status?.phase, 'Failed');
    assert.equal(status?.reason, 'SysctlForbidden');
    assert.equal(status?.message, 'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted');
  });

  it('a safe sysctl runs', async () => {
    const { calls } = await run(() => undefined, withSysctls('safe', { 'kernel.shm_rmid_forced': '1' }));
    assert.deepEqual(calls, ['syncPod safe']);
  });

  it('an unsafe sysctl allowed by allowedUnsafeSysctls (prefix form) runs', async () => {
    const { calls } = await run((h) => { h.config.allowedUnsafeSysctls = ['kernel.msg*']; }, withSysctls('unsafe', { 'kernel.msgmax': '65536' }));
    assert.deepEqual(calls, ['syncPod unsafe']);
  });

  it('AppArmor RuntimeDefault on a host without AppArmor: Failed, AppArmor, never synced', async () => {
    const p = mkPod('aa');
    p.spec.containers[0]!.securityContext = { appArmorProfile: { type: 'RuntimeDefault' } };
    const { calls, status } = await run(() => undefined, p);
    assert.deepEqual(calls, []);
    assert.equal(status?.reason, 'AppArmor');
    assert.equal(status?.message, 'Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host');
  });
});

describe('supplementalGroupsPolicy at admission (upstream 1.33: Strict refused where the runtime cannot enforce it)', () => {
  const node: AdmissionNode = { name: 'n1', labels: { 'kubernetes.io/os': 'linux' }, taints: [], allocatable: { pods: 110 } };
  const withPolicy = (policy?: string): Pod => {
    const p = mkPod('g');
    p.spec.securityContext = { supplementalGroups: [5000], ...(policy !== undefined ? { supplementalGroupsPolicy: policy } : {}) };
    return p;
  };
  const rows: { policy?: string; want: object }[] = [
    { want: { admit: true } },
    { policy: 'Merge', want: { admit: true } },
    { policy: 'Strict', want: { admit: false, reason: 'SupplementalGroupsPolicyNotSupported', message: 'SupplementalGroupsPolicy=Strict is not supported in this node' } },
    { policy: 'Loose', want: { admit: false, reason: 'SupplementalGroupsPolicyNotSupported', message: 'SupplementalGroupsPolicy=Loose is not supported in this node' } },
  ];
  for (const r of rows) {
    it(`policy ${r.policy ?? '(unset)'}`, () => assert.deepEqual(canAdmitPod(withPolicy(r.policy), [], node), r.want));
  }
});
