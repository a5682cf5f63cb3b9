// The container security context as upstream's kuberuntime builds it: AppArmor fields and
// annotations into the CRI apparmor profile and the deprecated string, procMount, Localhost
// seccomp profiles confined under <root-dir>/seccomp, and seccompDefault carried from the
// RuntimeManager's options to every container.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Container, Pod } from '../../src/api/types.js';
import {
  CreateContainerConfigError,
  DEFAULT_MASKED_PATHS,
  DEFAULT_READONLY_PATHS,
  confineLocalhostSeccompProfile,
  generateContainerSecurityContext,
  localhostSeccompPath,
} from '../../src/runtime/container-config.js';
import { RuntimeManager } from '../../src/runtime/runtime-manager.js';
import type { ContainerConfig, SecurityProfile } from '../../src/runtime/cri-types.js';
import { FakeClock } from '../../src/util/clock.js';
import { emptyStatus, loggerDouble, mkPod } from '../kubelet/doubles.js';

function pod(over: { podSc?: Pod['spec']['securityContext']; sc?: Container['securityContext']; annotations?: Record<string, string>; hostUsers?: boolean } = {}): Pod {
  const p = mkPod('sec');
  if (over.podSc) p.spec.securityContext = over.podSc;
  if (over.sc) p.spec.containers[0]!.securityContext = over.sc;
  if (over.annotations) p.metadata.annotations = over.annotations;
  if (over.hostUsers !== undefined) (p.spec as { hostUsers?: boolean }).hostUsers = over.hostUsers;
  return p;
}
const ctr = (p: Pod): Container => p.spec.containers[0]!;
const ann = (v: string) => ({ 'container.apparmor.security.beta.kubernetes.io/c': v });

describe('AppArmor into the CRI security context', () => {
  const rows: { name: string; p: Pod; apparmor?: SecurityProfile; deprecated?: string }[] = [
    { name: 'nothing asked: neither field', p: pod() },
    { name: 'container RuntimeDefault', p: pod({ sc: { appArmorProfile: { type: 'RuntimeDefault' } } }), apparmor: { profile_type: 'RuntimeDefault' }, deprecated: 'runtime/default' },
    { name: 'container Unconfined', p: pod({ sc: { appArmorProfile: { type: 'Unconfined' } } }), apparmor: { profile_type: 'Unconfined' }, deprecated: 'unconfined' },
    { name: 'container Localhost', p: pod({ sc: { appArmorProfile: { type: 'Localhost', localhostProfile: 'k8s-nginx' } } }), apparmor: { profile_type: 'Localhost', localhost_ref: 'k8s-nginx' }, deprecated: 'localhost/k8s-nginx' },
    { name: 'pod field when the container sets none', p: pod({ podSc: { appArmorProfile: { type: 'RuntimeDefault' } } }), apparmor: { profile_type: 'RuntimeDefault' }, deprecated: 'runtime/default' },
    { name: 'container field over the pod field', p: pod({ podSc: { appArmorProfile: { type: 'RuntimeDefault' } }, sc: { appArmorProfile: { type: 'Unconfined' } } }), apparmor: { profile_type: 'Unconfined' }, deprecated: 'unconfined' },
    { name: 'annotation runtime/default', p: pod({ annotations: ann('runtime/default') }), apparmor: { profile_type: 'RuntimeDefault' }, deprecated: 'runtime/default' },
    { name: 'annotation unconfined', p: pod({ annotations: ann('unconfined') }), apparmor: { profile_type: 'Unconfined' }, deprecated: 'unconfined' },
    { name: 'annotation localhost/<name>', p: pod({ annotations: ann('localhost/my-prof') }), apparmor: { profile_type: 'Localhost', localhost_ref: 'my-prof' }, deprecated: 'localhost/my-prof' },
    { name: 'annotation over the pod field', p: pod({ annotations: ann('unconfined'), podSc: { appArmorProfile: { type: 'RuntimeDefault' } } }), apparmor: { profile_type: 'Unconfined' }, deprecated: 'unconfined' },
    { name: 'container field over the annotation', p: pod({ annotations: ann('unconfined'), sc: { appArmorProfile: { type: 'RuntimeDefault' } } }), apparmor: { profile_type: 'RuntimeDefault' }, deprecated: 'runtime/default' },
    { name: 'an unknown annotation value falls back to the pod field', p: pod({ annotations: ann('bogus'), podSc: { appArmorProfile: { type: 'RuntimeDefault' } } }), apparmor: { profile_type: 'RuntimeDefault' }, deprecated: 'runtime/default' },
    { name: 'another container\'s annotation does not apply', p: pod({ annotations: { 'container.apparmor.security.beta.kubernetes.io/other': 'runtime/default' } }) },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const sc = generateContainerSecurityContext(r.p, ctr(r.p));
      assert.deepEqual(sc.apparmor, r.apparmor);
      assert.equal(sc.apparmor_profile, r.deprecated);
    });
  }
  it('an unknown type or a Localhost profile without a name is a CreateContainerConfigError', () => {
    const bogus = pod({ sc: { appArmorProfile: { type: 'Bogus' } } });
    assert.throws(() => generateContainerSecurityContext(bogus, ctr(bogus)), (e: unknown) => e instanceof CreateContainerConfigError && /unknown apparmor profile type: "Bogus"/.test(e.message));
    const p = pod({ sc: { appArmorProfile: { type: 'Localhost' } } });
    assert.throws(() => generateContainerSecurityContext(p, ctr(p)), /missing localhost apparmor profile name/);
  });
});

describe('procMount', () => {
  const rows: { name: string; procMount?: string; hostUsers?: boolean; masked?: readonly string[]; error?: RegExp }[] = [
    { name: 'unset: the default lists', masked: DEFAULT_MASKED_PATHS },
    { name: 'Default: the default lists', procMount: 'Default', masked: DEFAULT_MASKED_PATHS },
    { name: 'Unmasked with hostUsers: false: empty lists', procMount: 'Unmasked', hostUsers: false, masked: [] },
    { name: 'Unmasked without a user namespace: refused by name', procMount: 'Unmasked', error: /procMount "Unmasked" requires spec.hostUsers: false/ },
    { name: 'Unmasked with hostUsers: true: refused', procMount: 'Unmasked', hostUsers: true, error: /requires spec.hostUsers: false/ },
    { name: 'an unknown value: refused', procMount: 'Sideways', error: /procMount "Sideways" is not supported/ },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const p = pod({ sc: r.procMount === undefined ? {} : { procMount: r.procMount }, ...(r.hostUsers !== undefined ? { hostUsers: r.hostUsers } : {}) });
      if (r.error) {
        assert.throws(() => generateContainerSecurityContext(p, ctr(p)), (e: unknown) => e instanceof CreateContainerConfigError && r.error!.test(e.message));
        return;
      }
      const sc = generateContainerSecurityContext(p, ctr(p));
      assert.deepEqual(sc.masked_paths, [...r.masked!]);
      assert.deepEqual(sc.readonly_paths, r.masked!.length === 0 ? [] : [...DEFAULT_READONLY_PATHS]);
    });
  }
  it('the default lists are upstream\'s', () => {
    assert.deepEqual([...DEFAULT_MASKED_PATHS], ['/proc/asound', '/proc/acpi', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug', '/proc/scsi', '/sys/firmware', '/sys/devices/virtual/powercap']);
    assert.deepEqual([...DEFAULT_READONLY_PATHS], ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger']);
  });
});

describe('Localhost seccomp profiles stay under <root-dir>/seccomp', () => {
  it('an absolute name or one climbing out with .. is refused, naming it', () => {
    const rows: { name: string; error?: RegExp; path?: string }[] = [
      { name: 'audit.json', path: '/r/seccomp/audit.json' },
      { name: 'profiles/audit.json', path: '/r/seccomp/profiles/audit.json' },
      { name: '/etc/passwd', error: /seccomp localhostProfile "\/etc\/passwd" must be a path relative/ },
      { name: '../../etc/passwd', error: /seccomp localhostProfile "..\/..\/etc\/passwd" must not contain '..'/ },
      { name: 'profiles/../../x.json', error: /must not contain '..'/ },
    ];
    for (const r of rows) {
      if (r.error) assert.throws(() => localhostSeccompPath('/r/seccomp', r.name), (e: unknown) => e instanceof CreateContainerConfigError && r.error!.test(e.message), r.name);
      else assert.equal(localhostSeccompPath('/r/seccomp', r.name), r.path);
    }
    const p = pod({ sc: { seccompProfile: { type: 'Localhost', localhostProfile: '../x.json' } } });
    assert.throws(() => generateContainerSecurityContext(p, ctr(p), { seccompProfileRoot: '/r/seccomp' }), /must not contain '..'/);
  });

  it('a profile whose symlinks lead out of the root is refused; one that stays inside resolves', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-seccomp-'));
    try {
      const root = join(dir, 'seccomp');
      await mkdir(join(root, 'sub'), { recursive: true });
      await writeFile(join(root, 'ok.json'), '{}');
      await writeFile(join(dir, 'outside.json'), '{}');
      await symlink(join(dir, 'outside.json'), join(root, 'escape.json'));
      await symlink('../..', join(root, 'sub', 'up'));
      await symlink('ok.json', join(root, 'alias.json'));
      const real = await realpath(root);
      assert.equal(await confineLocalhostSeccompProfile(root, join(root, 'ok.json')), join(real, 'ok.json'));
      assert.equal(await confineLocalhostSeccompProfile(root, join(root, 'alias.json')), join(real, 'ok.json'));
      await assert.rejects(confineLocalhostSeccompProfile(root, join(root, 'escape.json')), (e: unknown) => e instanceof CreateContainerConfigError && /escape.json resolves to .*outside.json, outside the seccomp profile root/.test(e.message));
      await assert.rejects(confineLocalhostSeccompProfile(root, join(root, 'sub', 'up', 'outside.json')), /outside the seccomp profile root/);
      // missing: given as it is, for the runtime to refuse (upstream's CreateContainerError)
      assert.equal(await confineLocalhostSeccompProfile(root, join(root, 'missing.json')), join(root, 'missing.json'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the RuntimeManager gives containers seccompDefault and <root-dir>/seccomp', () => {
  async function createdConfig(p: Pod, opts: { seccompDefault?: boolean; rootDir: string; image?: { uid?: string; username?: string } }): Promise<{ config?: ContainerConfig; failure?: { reason: string; message: string } }> {
    let config: ContainerConfig | undefined;
    const rm = new RuntimeManager({
      cri: {
        runPodSandbox: async () => ({ pod_sandbox_id: 'sb-1' }),
        podSandboxStatus: async () => ({ status: { network: { ip: '10.1.0.5' } } }),
        createContainer: async (_sb: string, c: ContainerConfig) => { config = c; return { container_id: 'c-1' }; },
        startContainer: async () => ({}),
        removeContainer: async () => ({}),
        imageStatus: async () => ({
          image: { id: 'sha256:x', uid: opts.image?.uid !== undefined ? { value: opts.image.uid } : null, username: opts.image?.username ?? '' },
          info: {},
        }),
      } as unknown as ConstructorParameters<typeof RuntimeManager>[0]['cri'],
      images: { ensureImageExists: async () => 'sha256:x', gcBackoff: () => undefined },
      clock: new FakeClock(),
      log: loggerDouble(),
      nodeName: 'node-a',
      hostIPs: () => ['10.0.0.1'],
      memoryCapacityBytes: 1 << 30,
      podLogsDir: join(opts.rootDir, 'logs'),
      rootDir: opts.rootDir,
      ensurePodCgroup: async () => '/kubepods/pod',
      ...(opts.seccompDefault !== undefined ? { seccompDefault: opts.seccompDefault } : {}),
    });
    const result = await rm.syncPod(p, emptyStatus(p.metadata.uid!, p.metadata.name, p.metadata.namespace));
    const failure = result.startFailures.get('c');
    return { config, ...(failure ? { failure } : {}) };
  }

  it('seccompDefault on: RuntimeDefault for a container that sets nothing; off: Unconfined; a set profile wins', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-seccomp-rm-'));
    try {
      assert.deepEqual((await createdConfig(pod(), { seccompDefault: true, rootDir: dir })).config?.linux?.security_context?.seccomp, { profile_type: 'RuntimeDefault' });
      assert.deepEqual((await createdConfig(pod(), { rootDir: dir })).config?.linux?.security_context?.seccomp, { profile_type: 'Unconfined' });
      const unconfined = pod({ sc: { seccompProfile: { type: 'Unconfined' } } });
      assert.deepEqual((await createdConfig(unconfined, { seccompDefault: true, rootDir: dir })).config?.linux?.security_context?.seccomp, { profile_type: 'Unconfined' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a Localhost profile is looked up under the --root-dir given, and refused when it escapes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-seccomp-rm-'));
    try {
      await mkdir(join(dir, 'seccomp'), { recursive: true });
      await writeFile(join(dir, 'seccomp', 'audit.json'), '{"defaultAction":"SCMP_ACT_LOG"}');
      await writeFile(join(dir, 'host-only.json'), '{}');
      await symlink(join(dir, 'host-only.json'), join(dir, 'seccomp', 'link.json'));
      const real = await realpath(dir);
      const ok = await createdConfig(pod({ sc: { seccompProfile: { type: 'Localhost', localhostProfile: 'audit.json' } } }), { rootDir: dir });
      assert.deepEqual(ok.config?.linux?.security_context?.seccomp, { profile_type: 'Localhost', localhost_ref: join(real, 'seccomp', 'audit.json') });
      const esc = await createdConfig(pod({ sc: { seccompProfile: { type: 'Localhost', localhostProfile: 'link.json' } } }), { rootDir: dir });
      assert.equal(esc.config, undefined, 'no CreateContainer for an escaping profile');
      assert.equal(esc.failure?.reason, 'CreateContainerConfigError');
      assert.match(esc.failure!.message, /seccomp localhost profile .*link.json resolves to .*host-only.json, outside the seccomp profile root/);
      const dots = await createdConfig(pod({ podSc: { seccompProfile: { type: 'Localhost', localhostProfile: '../host-only.json' } } }), { rootDir: dir });
      assert.equal(dots.failure?.reason, 'CreateContainerConfigError');
      assert.match(dots.failure!.message, /seccomp localhostProfile "..\/host-only.json" must not contain '..'/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('runAsNonRoot is checked against the image\'s user (upstream getImageUser)', () => {
  async function start(p: Pod, image: { uid?: string; username?: string }): Promise<{ config?: ContainerConfig; failure?: { reason: string; message: string } }> {
    let config: ContainerConfig | undefined;
    const m = new RuntimeManager({
      cri: {
        runPodSandbox: async () => ({ pod_sandbox_id: 'sb-1' }),
        podSandboxStatus: async () => ({ status: { network: { ip: '10.1.0.5' } } }),
        createContainer: async (_sb: string, c: ContainerConfig) => { config = c; return { container_id: 'c-1' }; },
        startContainer: async () => ({}),
        removeContainer: async () => ({}),
        imageStatus: async () => ({ image: { id: 'sha256:x', uid: image.uid !== undefined ? { value: image.uid } : null, username: image.username ?? '' }, info: {} }),
      } as unknown as ConstructorParameters<typeof RuntimeManager>[0]['cri'],
      images: { ensureImageExists: async () => 'sha256:x', gcBackoff: () => undefined },
      clock: new FakeClock(),
      log: loggerDouble(),
      nodeName: 'node-a',
      hostIPs: () => ['10.0.0.1'],
      memoryCapacityBytes: 1 << 30,
      podLogsDir: join(tmpdir(), 'kts-nonroot-logs'),
      rootDir: join(tmpdir(), 'kts-nonroot-root'),
      ensurePodCgroup: async () => '/kubepods/pod',
    });
    const result = await m.syncPod(p, emptyStatus(p.metadata.uid!, p.metadata.name, p.metadata.namespace));
    const failure = result.startFailures.get('c');
    return { config, ...(failure ? { failure } : {}) };
  }
  const nonRoot = (): Pod => pod({ podSc: { runAsNonRoot: true } });
  const rows: { name: string; p: () => Pod; image: { uid?: string; username?: string }; error?: RegExp; runAs?: number; username?: string }[] = [
    { name: 'an image running as root is refused', p: nonRoot, image: { uid: '0' }, error: /container has runAsNonRoot and image will run as root/ },
    { name: 'an image with no user at all is root, refused', p: nonRoot, image: {}, error: /container has runAsNonRoot and image will run as root/ },
    { name: 'an image with a non-numeric user cannot be verified', p: nonRoot, image: { username: 'nobody' }, error: /image has non-numeric user \(nobody\), cannot verify user is non-root/ },
    { name: 'an image running as 1000 starts, as 1000', p: nonRoot, image: { uid: '1000' }, runAs: 1000 },
    { name: 'runAsUser 1000 over a root image starts', p: () => pod({ podSc: { runAsNonRoot: true, runAsUser: 1000 } }), image: { uid: '0' }, runAs: 1000 },
    { name: 'without runAsNonRoot the image user is carried as run_as_username', p: () => pod(), image: { username: 'nobody' }, username: 'nobody' },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const got = await start(r.p(), r.image);
      if (r.error) {
        assert.equal(got.config, undefined, 'no CreateContainer');
        assert.equal(got.failure?.reason, 'CreateContainerConfigError');
        assert.match(got.failure!.message, r.error);
        return;
      }
      assert.equal(got.failure, undefined);
      if (r.runAs !== undefined) assert.equal(Number(got.config?.linux?.security_context?.run_as_user?.value), r.runAs);
      if (r.username !== undefined) assert.equal(got.config?.linux?.security_context?.run_as_username, r.username);
    });
  }
});
