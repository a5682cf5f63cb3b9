import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Container, Pod } from '../../src/api/types.js';
import { CreateContainerConfigError } from '../../src/runtime/env.js';
import { expandSubPathExpr, makeVolumeMounts, resolveSubPath, translateMountPropagation } from '../../src/volumemanager/container-mounts.js';
import { podContainerMounts } from '../../src/volumemanager/pod-mounts.js';
import type { PodVolumes } from '../../src/volumemanager/volume-manager.js';

let root: string;
let vol: string;
let outside: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'kts-sub-'));
  vol = join(root, 'vol');
  outside = join(root, 'outside');
  await mkdir(join(vol, 'inner'), { recursive: true });
  await mkdir(outside);
  await writeFile(join(outside, 'secret'), 'host data');
  await symlink(outside, join(vol, 'escape'));
  await symlink('../..', join(vol, 'inner', 'up'));
  await symlink('inner', join(vol, 'inside-link'));
});
after(async () => { await rm(root, { recursive: true, force: true }); });

const refused = (err: unknown): boolean => err instanceof CreateContainerConfigError && /^failed to prepare subPath for volumeMount/.test(err.message);

describe('subPath confinement', () => {
  it('resolves an existing subPath, and a symlink that stays inside', async () => {
    assert.equal(await resolveSubPath(vol, 'inner', 'm'), join(vol, 'inner'));
    assert.equal(await resolveSubPath(vol, 'inside-link', 'm'), join(vol, 'inner'));
  });

  it('creates a missing subPath as a directory inside the volume', async () => {
    const p = await resolveSubPath(vol, 'new/deeper', 'm');
    assert.equal(p, join(vol, 'new', 'deeper'));
    assert.ok((await stat(p)).isDirectory());
  });

  it('refuses a symlink out of the volume, directly or further down', async () => {
    await assert.rejects(resolveSubPath(vol, 'escape', 'm'), refused);
    await assert.rejects(resolveSubPath(vol, 'escape/secret', 'm'), refused);
    await assert.rejects(resolveSubPath(vol, 'inner/up', 'm'), refused);
  });

  it('never creates anything through an escaping link', async () => {
    await assert.rejects(resolveSubPath(vol, 'escape/made-here', 'm'), refused);
    await assert.rejects(stat(join(outside, 'made-here')));
  });

  it('refuses ".." and absolute subPaths with upstream messages', async () => {
    await assert.rejects(resolveSubPath(vol, '../outside', 'm'), { message: "unable to provision SubPath `../outside`: must not contain '..'" });
    await assert.rejects(resolveSubPath(vol, '/etc', 'm'), { message: 'error SubPath "/etc" must not be an absolute path' });
  });
});

describe('makeVolumeMounts', () => {
  const vols = (): PodVolumes => new Map([
    ['data', { plugin: 'kubernetes.io~empty-dir', hostPath: vol, readOnly: false }],
    ['info', { plugin: 'kubernetes.io~downward-api', hostPath: join(root, 'info'), readOnly: true }],
  ]);

  it('maps readOnly, forced read-only plugins, subPath, subPathExpr and propagation', async () => {
    const c: Container = {
      name: 'app',
      image: 'x',
      volumeMounts: [
        { name: 'data', mountPath: '/data' },
        { name: 'data', mountPath: '/ro', readOnly: true, mountPropagation: 'HostToContainer' },
        { name: 'info', mountPath: '/info' },
        { name: 'data', mountPath: '/sub', subPath: 'inner', mountPropagation: 'Bidirectional' },
        { name: 'data', mountPath: '/expr', subPathExpr: 'per-pod/$(POD_NAME)', mountPropagation: 'None' } as Container['volumeMounts'] extends (infer M)[] | undefined ? M : never,
      ],
    };
    const mounts = await makeVolumeMounts(c, vols(), [{ key: 'POD_NAME', value: 'web' }]);
    assert.deepEqual(mounts.map((m) => [m.container_path, m.host_path, m.readonly, m.propagation]), [
      ['/data', vol, false, 'PROPAGATION_PRIVATE'],
      ['/ro', vol, true, 'PROPAGATION_HOST_TO_CONTAINER'],
      ['/info', join(root, 'info'), true, 'PROPAGATION_PRIVATE'],
      ['/sub', join(vol, 'inner'), false, 'PROPAGATION_BIDIRECTIONAL'],
      ['/expr', join(vol, 'per-pod', 'web'), false, 'PROPAGATION_PRIVATE'],
    ]);
  });

  it('refuses an unknown volume, an unexpandable subPathExpr and a bad propagation mode', async () => {
    await assert.rejects(makeVolumeMounts({ name: 'app', image: 'x', volumeMounts: [{ name: 'nope', mountPath: '/n' }] }, vols(), []),
      { message: 'cannot find volume "nope" to mount into container "app"' });
    assert.throws(() => expandSubPathExpr('$(A)/$(B)', [{ key: 'A', value: 'a' }]), { message: 'missing value for B' });
    assert.throws(() => translateMountPropagation('Sideways'), { message: 'invalid MountPropagation mode: "Sideways"' });
  });

  it('refuses a subPathExpr that expands to ".."', async () => {
    const c = { name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/e', subPathExpr: '$(X)' }] } as unknown as Container;
    await assert.rejects(makeVolumeMounts(c, vols(), [{ key: 'X', value: '..' }]), /must not contain '\.\.'/);
  });
});

describe('podContainerMounts and /etc/hosts', () => {
  const pod = (spec: Partial<Pod['spec']>): Pod => ({
    metadata: { name: 'web', namespace: 'prod', uid: 'u1' },
    spec: { containers: [{ name: 'app', image: 'x' }], ...spec },
  }) as Pod;

  it('writes <podDir>/etc-hosts and mounts it at /etc/hosts', async () => {
    const podDirectory = join(root, 'pod-a');
    await mkdir(podDirectory);
    const p = pod({ hostname: 'h', subdomain: 'sub', hostAliases: [{ ip: '10.1.1.1', hostnames: ['foo', 'bar'] }] });
    const mounts = await podContainerMounts({ pod: p, container: p.spec.containers[0]!, volumes: new Map(), envs: [], podIPs: ['10.2.0.5'], podDir: podDirectory, clusterDomain: 'cluster.local' });
    assert.deepEqual(mounts, [{ container_path: '/etc/hosts', host_path: join(podDirectory, 'etc-hosts'), readonly: false, selinux_relabel: true, propagation: 'PROPAGATION_PRIVATE' }]);
    const text = await readFile(join(podDirectory, 'etc-hosts'), 'utf8');
    assert.match(text, /\n10\.2\.0\.5\th\.sub\.prod\.svc\.cluster\.local\th\n/);
    assert.match(text, /# Entries added by HostAliases\.\n10\.1\.1\.1\tfoo\tbar\n$/);
  });

  it('no hosts mount before the pod has an IP, nor over a container\'s own /etc/hosts', async () => {
    const podDirectory = join(root, 'pod-b');
    await mkdir(podDirectory);
    const p = pod({ volumes: [{ name: 'h', emptyDir: {} }] });
    assert.deepEqual(await podContainerMounts({ pod: p, container: p.spec.containers[0]!, volumes: new Map(), envs: [], podIPs: [], podDir: podDirectory, clusterDomain: '' }), []);
    const own: Container = { name: 'app', image: 'x', volumeMounts: [{ name: 'h', mountPath: '/etc/hosts' }] };
    const mounts = await podContainerMounts({ pod: p, container: own, volumes: new Map([['h', { plugin: 'p', hostPath: vol, readOnly: false }]]), envs: [], podIPs: ['10.0.0.2'], podDir: podDirectory, clusterDomain: '' });
    assert.deepEqual(mounts.map((m) => m.host_path), [vol]);
  });

  it('a host-network pod gets the node\'s hosts file plus its aliases', async () => {
    const podDirectory = join(root, 'pod-c');
    await mkdir(podDirectory);
    const nodeHosts = join(root, 'node-hosts');
    await writeFile(nodeHosts, '127.0.0.1 localhost\n192.168.1.1 node1\n');
    const p = pod({ hostNetwork: true, hostAliases: [{ ip: '1.2.3.4', hostnames: ['x'] }] });
    await podContainerMounts({ pod: p, container: p.spec.containers[0]!, volumes: new Map(), envs: [], podIPs: ['192.168.1.1'], podDir: podDirectory, clusterDomain: '', nodeHostsFile: nodeHosts });
    assert.equal(await readFile(join(podDirectory, 'etc-hosts'), 'utf8'),
      '# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.168.1.1 node1\n\n# Entries added by HostAliases.\n1.2.3.4\tx\n');
  });
});
