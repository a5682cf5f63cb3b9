import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Container, Pod } from '../../src/api/types.js';
import { CreateContainerConfigError } from '../../src/runtime/env.js';
import { expandSubPathExpr, makeVolumeMounts, translateMountPropagation } from '../../src/volumemanager/container-mounts.js';
import { podContainerMounts } from '../../src/volumemanager/pod-mounts.js';
import { refusingSubPathMounter, SubPathError, type SubPathMounter, type SubPathRequest } from '../../src/volumemanager/subpath.js';
import type { PodVolumes } from '../../src/volumemanager/volume-manager.js';
import { loggerDouble } from '../kubelet/doubles.js';

let root: string;
let vol: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'kts-sub-'));
  vol = join(root, 'vol');
  await mkdir(join(vol, 'inner'), { recursive: true });
});
after(async () => { await rm(root, { recursive: true, force: true }); });

/** Records what makeVolumeMounts asks for and answers the stable path (the bind mount is the native mounter's). */
class RecordingSubPaths implements SubPathMounter {
  readonly calls: SubPathRequest[] = [];
  fail?: SubPathError;
  async prepare(req: SubPathRequest): Promise<string> {
    this.calls.push(req);
    if (this.fail) throw this.fail;
    return join(req.podDir, 'volume-subpaths', req.volumeName, req.containerName, String(req.index));
  }
  async clean(): Promise<string[]> { return []; }
}

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
    const subPaths = new RecordingSubPaths();
    const podDirectory = join(root, 'pod-m');
    const mounts = await makeVolumeMounts(c, vols(), [{ key: 'POD_NAME', value: 'web' }], { podDir: podDirectory, subPaths });
    const sp = join(podDirectory, 'volume-subpaths', 'data', 'app');
    assert.deepEqual(mounts.map((m) => [m.container_path, m.host_path, m.readonly, m.propagation]), [
      ['/data', vol, false, 'PROPAGATION_PRIVATE'],
      ['/ro', vol, true, 'PROPAGATION_HOST_TO_CONTAINER'],
      ['/info', join(root, 'info'), true, 'PROPAGATION_PRIVATE'],
      ['/sub', join(sp, '3'), false, 'PROPAGATION_BIDIRECTIONAL'],
      ['/expr', join(sp, '4'), false, 'PROPAGATION_PRIVATE'],
    ]);
    // upstream's index scheme: the volumeMount's index in the container, so a restart finds the mount again
    assert.deepEqual(subPaths.calls, [
      { volumePath: vol, subPath: 'inner', podDir: podDirectory, volumeName: 'data', containerName: 'app', index: 3 },
      { volumePath: vol, subPath: 'per-pod/web', podDir: podDirectory, volumeName: 'data', containerName: 'app', index: 4 },
    ]);
  });

  it('a subPath that cannot be made or opened is upstream\'s CreateContainerConfigError, without host details', async () => {
    const c: Container = { name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/s', subPath: 'escape' }] };
    const subPaths = new RecordingSubPaths();
    const lines: string[] = [];
    const log = { ...loggerDouble(lines), error: (m: string, f?: Record<string, unknown>) => void lines.push(`E ${m} ${JSON.stringify(f)}`) };
    subPaths.fail = new SubPathError('open', `subpath not within volume path '${vol}/escape'`);
    await assert.rejects(makeVolumeMounts(c, vols(), [], { podDir: root, subPaths, log }), (err: unknown) =>
      err instanceof CreateContainerConfigError && err.message === 'failed to prepare subPath for volumeMount "data" of container "app"');
    assert.ok(lines.some((l) => l.includes('Failed to prepare subPath') && l.includes('not within volume path')), 'the log has the details');
    subPaths.fail = new SubPathError('create', 'mkdirat: Permission denied');
    await assert.rejects(makeVolumeMounts(c, vols(), [], { podDir: root, subPaths, log }), { message: 'failed to create subPath directory for volumeMount "data" of container "app"' });
  });

  it('without the native addon a subPath is refused, saying why; a mount without subPath still works', async () => {
    const c: Container = { name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/d' }, { name: 'data', mountPath: '/s', subPath: 'inner' }] };
    await assert.rejects(makeVolumeMounts(c, vols(), [], { podDir: root, subPaths: refusingSubPathMounter, log: loggerDouble([]) }), {
      message: 'failed to prepare subPath for volumeMount "data" of container "app": subPath volume mounts need the native addon of kubelet-ts, which is not loaded',
    });
    const plain = await makeVolumeMounts({ ...c, volumeMounts: [c.volumeMounts![0]!] }, vols(), [], { podDir: root, subPaths: refusingSubPathMounter });
    assert.deepEqual(plain.map((m) => m.host_path), [vol]);
  });

  it('refuses ".." and absolute subPaths with upstream messages before touching the disk', async () => {
    const subPaths = new RecordingSubPaths();
    const mk = (subPath: string) => makeVolumeMounts({ name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/s', subPath }] }, vols(), [], { podDir: root, subPaths });
    await assert.rejects(mk('../outside'), { message: "unable to provision SubPath `../outside`: must not contain '..'" });
    await assert.rejects(mk('/etc'), { message: 'error SubPath "/etc" must not be an absolute path' });
    assert.deepEqual(subPaths.calls, []);
  });

  it('refuses an unknown volume, an unexpandable subPathExpr and a bad propagation mode', async () => {
    await assert.rejects(makeVolumeMounts({ name: 'app', image: 'x', volumeMounts: [{ name: 'nope', mountPath: '/n' }] }, vols(), [], { podDir: root }),
      { message: 'cannot find volume "nope" to mount into container "app"' });
    assert.throws(() => expandSubPathExpr('$(A)/$(B)', [{ key: 'A', value: 'a' }]), { message: 'missing value for B' });
    assert.throws(() => translateMountPropagation('Sideways'), { message: 'invalid MountPropagation mode: "Sideways"' });
  });

  it('refuses a subPathExpr that expands to ".."', async () => {
    const c = { name: 'app', image: 'x', volumeMounts: [{ name: 'data', mountPath: '/e', subPathExpr: '$(X)' }] } as unknown as Container;
    await assert.rejects(makeVolumeMounts(c, vols(), [{ key: 'X', value: '..' }], { podDir: root, subPaths: new RecordingSubPaths() }), /must not contain '\.\.'/);
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
