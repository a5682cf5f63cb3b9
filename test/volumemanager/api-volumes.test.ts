// The configMap, secret and projected plugins through the VolumeManager on temp dirs (no root):
// objects from an in-memory source, tmpfs through a fake mounter, atomic updates on a resync,
// projected service account tokens rotated at 80% of their lifetime or after 24 h.

import assert from 'node:assert/strict';
import { lstat, mkdtemp, readFile, readdir, readlink, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { FakeClock, type Clock } from '../../src/util/clock.js';
import { VolumeMountError } from '../../src/volumemanager/errors.js';
import type { Mounter, MountPoint } from '../../src/volumemanager/mounter.js';
import { VolumeObjectError, type BoundPod, type ConfigMapObject, type SecretObject, type ServiceAccountToken, type VolumeObjectSource } from '../../src/volumemanager/object-source.js';
import { TokenExpiredError, TokenManager } from '../../src/volumemanager/token-manager.js';
import { VolumeManager } from '../../src/volumemanager/volume-manager.js';
import { loggerDouble } from '../kubelet/doubles.js';

class FakeMounter implements Mounter {
  readonly mounts: MountPoint[] = [];
  readonly calls: string[] = [];
  /** A mount that "succeeds" without a tmpfs appearing. */
  broken = false;
  async mountTmpfs(target: string, sizeBytes?: number): Promise<void> {
    this.calls.push(`tmpfs ${target} ${sizeBytes ?? '-'}`);
    if (!this.broken) this.mounts.push({ mountPoint: target, fsType: 'tmpfs' });
  }
  async unmount(target: string): Promise<void> {
    this.calls.push(`umount ${target}`);
    const i = this.mounts.findIndex((m) => m.mountPoint === target);
    if (i >= 0) this.mounts.splice(i, 1);
  }
  async list(): Promise<MountPoint[]> {
    return [...this.mounts];
  }
}

class FakeObjects implements VolumeObjectSource {
  readonly configMaps = new Map<string, ConfigMapObject>();
  readonly secrets = new Map<string, SecretObject>();
  readonly tokenCalls: { namespace: string; serviceAccount: string; audience: string; expirationSeconds: number; pod: BoundPod }[] = [];
  failTokens = false;
  constructor(private readonly clock: Clock) {}
  async getConfigMap(ns: string, name: string): Promise<ConfigMapObject> {
    const o = this.configMaps.get(`${ns}/${name}`);
    if (!o) throw new VolumeObjectError('ERR_VOLUME_OBJECT_NOT_FOUND', 'configmap', ns, name, `configmap "${name}" not found`);
    return o;
  }
  async getSecret(ns: string, name: string): Promise<SecretObject> {
    const o = this.secrets.get(`${ns}/${name}`);
    if (!o) throw new VolumeObjectError('ERR_VOLUME_OBJECT_NOT_FOUND', 'secret', ns, name, `secret "${name}" not found`);
    return o;
  }
  async requestServiceAccountToken(namespace: string, serviceAccount: string, audience: string, expirationSeconds: number, pod: BoundPod): Promise<ServiceAccountToken> {
    if (this.failTokens) throw new VolumeObjectError('ERR_VOLUME_OBJECT_FETCH', 'serviceaccount token', namespace, serviceAccount, 'failed to fetch token: connection refused');
    this.tokenCalls.push({ namespace, serviceAccount, audience, expirationSeconds, pod });
    return { token: `token-${this.tokenCalls.length}`, expirationTimestamp: this.clock.now() + expirationSeconds * 1000, expirationSeconds };
  }
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');

function pod(volumes: Pod['spec']['volumes'], extra: Partial<Pod['spec']> = {}, meta: Partial<Pod['metadata']> = {}): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'default', uid: 'uid-api', labels: { app: 'web' }, ...meta },
    spec: { volumes, serviceAccountName: 'builder', containers: [{ name: 'app', image: 'busybox' }], ...extra },
  } as Pod;
}

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-apivol-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

function setup(rootDir = root, nodeAllocatableMemoryBytes?: () => number | undefined): { clock: FakeClock; objects: FakeObjects; mounter: FakeMounter; vm: VolumeManager } {
  const clock = new FakeClock(Date.UTC(2026, 0, 2, 3, 4, 5));
  const objects = new FakeObjects(clock);
  const mounter = new FakeMounter();
  const vm = new VolumeManager({ rootDir, clock, log: loggerDouble(), nodeName: 'n1', hostIPs: () => ['10.0.0.1'], mounter, objects, tokenJitterMs: () => 0, nodeAllocatableMemoryBytes });
  return { clock, objects, mounter, vm };
}

const mode = async (p: string): Promise<number> => (await stat(p)).mode & 0o7777;
const failure = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof VolumeMountError, String(err));
    return err.message;
  }
  return assert.fail('expected a FailedMount');
};

describe('configMap volume', () => {
  it('projects every key (data and binaryData) with defaultMode, read-only, on disk, behind ..data', async () => {
    const { objects, mounter, vm } = setup();
    objects.configMaps.set('default/cfg', { data: { 'app.conf': 'x=1', other: 'o' }, binaryData: { blob: Buffer.from([0, 255]).toString('base64') } });
    const vols = await vm.mountPod(pod([{ name: 'config', configMap: { name: 'cfg', defaultMode: 0o640 } }]));
    const v = vols.get('config')!;
    assert.equal(v.hostPath, join(root, 'pods', 'uid-api', 'volumes', 'kubernetes.io~configmap', 'config'));
    assert.equal(v.readOnly, true);
    assert.equal(await readFile(join(v.hostPath, 'app.conf'), 'utf8'), 'x=1');
    assert.deepEqual(await readFile(join(v.hostPath, 'blob')), Buffer.from([0, 255]));
    assert.equal(await mode(join(v.hostPath, 'app.conf')), 0o640);
    assert.equal(await readlink(join(v.hostPath, 'app.conf')), '..data/app.conf');
    assert.match(await readlink(join(v.hostPath, '..data')), /^\.\.2026_01_02_03_04_05\.\d+$/);
    assert.deepEqual(mounter.calls, []);
  });

  it('items pick keys to paths with their own modes; a missing key fails unless optional', async () => {
    const { objects, vm } = setup();
    objects.configMaps.set('default/cfg', { data: { a: 'A', b: 'B' } });
    const vols = await vm.mountPod(pod([{ name: 'c', configMap: { name: 'cfg', defaultMode: 0o644, items: [{ key: 'a', path: 'dir/a.txt', mode: 0o400 }] } }]));
    const dir = vols.get('c')!.hostPath;
    assert.equal(await readFile(join(dir, 'dir', 'a.txt'), 'utf8'), 'A');
    assert.equal(await mode(join(dir, 'dir', 'a.txt')), 0o400);
    assert.deepEqual((await readdir(dir)).filter((n) => !n.startsWith('..')), ['dir']);
    const msg = await failure(vm.mountPod(pod([{ name: 'c2', configMap: { name: 'cfg', items: [{ key: 'zz', path: 'z' }] } }])));
    assert.ok(msg.endsWith('MountVolume.SetUp failed for volume "c2" : configmap references non-existent config key: zz'), msg);
    const ok = await vm.mountPod(pod([{ name: 'c3', configMap: { name: 'cfg', optional: true, items: [{ key: 'zz', path: 'z' }, { key: 'b', path: 'b' }] } }]));
    assert.equal(await readFile(join(ok.get('c3')!.hostPath, 'b'), 'utf8'), 'B');
  });

  it('a missing configMap fails naming it; an optional one gives an empty volume', async () => {
    const { vm } = setup();
    const msg = await failure(vm.mountPod(pod([{ name: 'cfg', configMap: { name: 'nope' } }])));
    assert.ok(msg.endsWith('failed to process volumes=[cfg]: MountVolume.SetUp failed for volume "cfg" : configmap "nope" not found'), msg);
    const vols = await vm.mountPod(pod([{ name: 'opt', configMap: { name: 'nope', optional: true } }]));
    assert.deepEqual((await readdir(vols.get('opt')!.hostPath)).filter((n) => !n.startsWith('..')), []);
  });

  it('a changed configMap is swapped in atomically on the next sync; an unchanged one writes nothing', async () => {
    const { clock, objects, vm } = setup();
    objects.configMaps.set('default/live', { data: { keep: 'k', gone: 'g', v: '1' } });
    const p = pod([{ name: 'live', configMap: { name: 'live' } }], {}, { uid: 'uid-live' });
    const dir = (await vm.mountPod(p)).get('live')!.hostPath;
    const first = await readlink(join(dir, '..data'));
    clock.step(1000);
    await vm.mountPod(p);
    assert.equal(await readlink(join(dir, '..data')), first);
    objects.configMaps.set('default/live', { data: { keep: 'k', v: '2' } });
    await vm.mountPod(p);
    const second = await readlink(join(dir, '..data'));
    assert.notEqual(second, first);
    assert.equal(await readFile(join(dir, 'v'), 'utf8'), '2');
    await assert.rejects(lstat(join(dir, 'gone')));
    await assert.rejects(lstat(join(dir, first)));
    assert.deepEqual((await readdir(dir)).sort(), ['..data', second, 'keep', 'v'].sort());
  });
});

describe('secret volume', () => {
  it('decodes the data onto a tmpfs mounted once, with defaultMode, read-only', async () => {
    const { objects, mounter, vm } = setup();
    objects.secrets.set('default/creds', { data: { password: b64('s3cret'), user: b64('admin') } });
    const p = pod([{ name: 'creds', secret: { secretName: 'creds', defaultMode: 0o400 } }], {}, { uid: 'uid-sec' });
    const v = (await vm.mountPod(p)).get('creds')!;
    await vm.mountPod(p);
    assert.equal(v.hostPath, join(root, 'pods', 'uid-sec', 'volumes', 'kubernetes.io~secret', 'creds'));
    assert.equal(v.readOnly, true);
    assert.deepEqual(mounter.calls, [`tmpfs ${v.hostPath} -`]);
    assert.equal(await readFile(join(v.hostPath, 'password'), 'utf8'), 's3cret');
    assert.equal(await mode(join(v.hostPath, 'password')), 0o400);
  });

  it('writes nothing when no tmpfs is there after mounting', async () => {
    const { objects, mounter, vm } = setup();
    mounter.broken = true;
    objects.secrets.set('default/creds', { data: { password: b64('s3cret') } });
    const msg = await failure(vm.mountPod(pod([{ name: 'creds', secret: { secretName: 'creds' } }], {}, { uid: 'uid-broken' })));
    assert.match(msg, /MountVolume.SetUp failed for volume "creds" : .* is not a tmpfs after mounting one; refusing to write its data to disk/);
    assert.deepEqual(await readdir(join(root, 'pods', 'uid-broken', 'volumes', 'kubernetes.io~secret', 'creds')), []);
  });

  it('items and optional as for configMaps, with upstream\'s secret messages', async () => {
    const { objects, vm } = setup();
    objects.secrets.set('default/creds', { data: { a: b64('A') } });
    const msg = await failure(vm.mountPod(pod([{ name: 's', secret: { secretName: 'creds', items: [{ key: 'x', path: 'x' }] } }])));
    assert.ok(msg.endsWith('MountVolume.SetUp failed for volume "s" : references non-existent secret key: x'), msg);
    const missing = await failure(vm.mountPod(pod([{ name: 's', secret: { secretName: 'nope' } }])));
    assert.ok(missing.endsWith('MountVolume.SetUp failed for volume "s" : secret "nope" not found'), missing);
    await vm.mountPod(pod([{ name: 's-opt', secret: { secretName: 'nope', optional: true } }]));
  });
});

describe('projected volume', () => {
  const sources = [
    { configMap: { name: 'cfg', items: [{ key: 'a', path: 'cfg/a' }] } },
    { secret: { name: 'creds' } },
    { downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } },
    { serviceAccountToken: { audience: 'vault', expirationSeconds: 3600, path: 'token' } },
  ];

  it('projects configMap, secret, downwardAPI and a service account token bound to the pod, on a tmpfs', async () => {
    const { objects, mounter, vm } = setup();
    objects.configMaps.set('default/cfg', { data: { a: 'A' } });
    objects.secrets.set('default/creds', { data: { password: b64('pw') } });
    const v = (await vm.mountPod(pod([{ name: 'all', projected: { defaultMode: 0o440, sources } }], {}, { uid: 'uid-proj' }))).get('all')!;
    assert.equal(v.hostPath, join(root, 'pods', 'uid-proj', 'volumes', 'kubernetes.io~projected', 'all'));
    assert.equal(v.readOnly, true);
    assert.deepEqual(mounter.calls, [`tmpfs ${v.hostPath} -`]);
    assert.equal(await readFile(join(v.hostPath, 'cfg', 'a'), 'utf8'), 'A');
    assert.equal(await readFile(join(v.hostPath, 'password'), 'utf8'), 'pw');
    assert.equal(await readFile(join(v.hostPath, 'labels'), 'utf8'), 'app="web"');
    assert.equal(await readFile(join(v.hostPath, 'token'), 'utf8'), 'token-1');
    assert.equal(await mode(join(v.hostPath, 'token')), 0o440);
    assert.deepEqual(objects.tokenCalls, [{ namespace: 'default', serviceAccount: 'builder', audience: 'vault', expirationSeconds: 3600, pod: { name: 'web', uid: 'uid-proj' } }]);
  });

  it('a token is 0600 when the pod has an fsGroup, then 0640 and the group\'s through the ownership step', async () => {
    const { vm } = setup();
    const gid = process.getuid?.() === 0 ? 2000 : process.getgid!();
    const v = (await vm.mountPod(pod([{ name: 't', projected: { defaultMode: 0o644, sources: [sources[3]] } }], { securityContext: { fsGroup: gid } }, { uid: 'uid-fsg' }))).get('t')!;
    const st = await stat(join(v.hostPath, 'token'));
    assert.equal(st.mode & 0o7777, 0o640);
    assert.equal(st.gid, gid);
  });

  it('rotates the token once 80% of its lifetime passed, not before', async () => {
    const { clock, objects, vm } = setup();
    const p = pod([{ name: 't', projected: { sources: [sources[3]] } }], {}, { uid: 'uid-rot' });
    const dir = (await vm.mountPod(p)).get('t')!.hostPath;
    clock.step(2880_000); // exactly 80% of 3600 s
    await vm.mountPod(p);
    assert.equal(objects.tokenCalls.length, 1);
    assert.equal(await readFile(join(dir, 'token'), 'utf8'), 'token-1');
    clock.step(1000);
    await vm.mountPod(p);
    assert.equal(objects.tokenCalls.length, 2);
    assert.equal(await readFile(join(dir, 'token'), 'utf8'), 'token-2');
  });

  it('all of its sources\' errors in one FailedMount', async () => {
    const { vm } = setup();
    const msg = await failure(vm.mountPod(pod([{ name: 'bad', projected: { sources: [{ configMap: { name: 'x' } }, { secret: { name: 'y' } }] } }])));
    assert.ok(msg.endsWith('MountVolume.SetUp failed for volume "bad" : [configmap "x" not found, secret "y" not found]'), msg);
  });
});

describe('tmpfs size (upstream SizeMemoryBackedVolumes)', () => {
  const GI = 1024 ** 3;
  const MI = 1024 ** 2;
  const limited = (memory: string): Partial<Pod['spec']> => ({ containers: [{ name: 'app', image: 'busybox', resources: { limits: { memory } } }] });

  it('a secret volume\'s tmpfs is mounted with size= the node\'s allocatable memory', async () => {
    const { objects, mounter, vm } = setup(root, () => 4 * GI);
    objects.secrets.set('default/creds', { data: { password: b64('s3cret') } });
    const v = (await vm.mountPod(pod([{ name: 'creds', secret: { secretName: 'creds' } }], {}, { uid: 'uid-size-sec' }))).get('creds')!;
    assert.deepEqual(mounter.calls, [`tmpfs ${v.hostPath} ${4 * GI}`]);
  });

  it('a projected volume\'s tmpfs takes the pod\'s memory limit when lower, never a higher one', async () => {
    const { objects, mounter, vm } = setup(root, () => 4 * GI);
    objects.secrets.set('default/creds', { data: { password: b64('pw') } });
    const low = (await vm.mountPod(pod([{ name: 'p', projected: { sources: [{ secret: { name: 'creds' } }] } }], limited('256Mi'), { uid: 'uid-size-low' }))).get('p')!;
    const high = (await vm.mountPod(pod([{ name: 'p', projected: { sources: [{ secret: { name: 'creds' } }] } }], limited('64Gi'), { uid: 'uid-size-high' }))).get('p')!;
    assert.deepEqual(mounter.calls, [`tmpfs ${low.hostPath} ${256 * MI}`, `tmpfs ${high.hostPath} ${4 * GI}`]);
  });

  it('downwardAPI and memory emptyDirs too; an emptyDir\'s sizeLimit counts only below the cap', async () => {
    const { mounter, vm } = setup(root, () => 4 * GI);
    const vols = (await vm.mountPod(pod([
      { name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } },
      { name: 'mem', emptyDir: { medium: 'Memory' } },
      { name: 'small', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
      { name: 'big', emptyDir: { medium: 'Memory', sizeLimit: '8Gi' } },
    ], {}, { uid: 'uid-size-ed' })));
    assert.deepEqual(mounter.calls, [
      `tmpfs ${vols.get('info')!.hostPath} ${4 * GI}`,
      `tmpfs ${vols.get('mem')!.hostPath} ${4 * GI}`,
      `tmpfs ${vols.get('small')!.hostPath} ${MI}`,
      `tmpfs ${vols.get('big')!.hostPath} ${4 * GI}`,
    ]);
  });
});

describe('static pods and API objects', () => {
  it('a static pod may not reference API objects even with an API server', async () => {
    const { objects, vm } = setup();
    objects.configMaps.set('kube-system/cfg', { data: { a: 'A' } });
    const p = pod([{ name: 'cfg', configMap: { name: 'cfg' } }], {}, { namespace: 'kube-system', name: 'etcd-n1', annotations: { 'kubernetes.io/config.source': 'file' } });
    const msg = await failure(vm.mountPod(p));
    assert.ok(msg.endsWith('MountVolume.SetUp failed for volume "cfg" : configmap "kube-system/cfg": static pod kube-system/etcd-n1 may not reference API objects'), msg);
  });
});

describe('TokenManager', () => {
  const bound = { name: 'p', uid: 'u' };
  it('refreshes after 24 h even when the lifetime is longer', async () => {
    const clock = new FakeClock();
    const objects = new FakeObjects(clock);
    const tm = new TokenManager({ source: objects, clock, jitterMs: () => 0 });
    await tm.getServiceAccountToken('ns', 'sa', '', 7 * 24 * 3600, bound);
    clock.step(24 * 3600_000);
    await tm.getServiceAccountToken('ns', 'sa', '', 7 * 24 * 3600, bound);
    assert.equal(objects.tokenCalls.length, 1);
    clock.step(1);
    await tm.getServiceAccountToken('ns', 'sa', '', 7 * 24 * 3600, bound);
    assert.equal(objects.tokenCalls.length, 2);
  });

  it('keeps serving a cached token when a refresh fails, until it expires', async () => {
    const clock = new FakeClock();
    const objects = new FakeObjects(clock);
    const tm = new TokenManager({ source: objects, clock, jitterMs: () => 0 });
    const t = await tm.getServiceAccountToken('ns', 'sa', 'aud', 3600, bound);
    objects.failTokens = true;
    clock.step(3000_000);
    assert.equal((await tm.getServiceAccountToken('ns', 'sa', 'aud', 3600, bound)).token, t.token);
    clock.step(600_001);
    await assert.rejects(tm.getServiceAccountToken('ns', 'sa', 'aud', 3600, bound), (err: unknown) => err instanceof TokenExpiredError && /expired and refresh failed: failed to fetch token/.test(err.message));
  });

  it('keys tokens by audience, lifetime and pod; forgets a pod\'s tokens', async () => {
    const clock = new FakeClock();
    const objects = new FakeObjects(clock);
    const tm = new TokenManager({ source: objects, clock, jitterMs: () => 0 });
    await tm.getServiceAccountToken('ns', 'sa', 'a', 3600, bound);
    await tm.getServiceAccountToken('ns', 'sa', 'b', 3600, bound);
    await tm.getServiceAccountToken('ns', 'sa', 'a', 7200, bound);
    await tm.getServiceAccountToken('ns', 'sa', 'a', 3600, { name: 'q', uid: 'v' });
    await tm.getServiceAccountToken('ns', 'sa', 'a', 3600, bound);
    assert.equal(objects.tokenCalls.length, 4);
    tm.forgetPod('u');
    assert.equal(tm.size, 1);
  });
});
