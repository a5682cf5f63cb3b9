// The subPath race on a real containerd (CVE-2017-1002101 / CVE-2021-25741 class): one
// container of a pod flips a name in a shared emptyDir between a directory and a symlink to `/`
// in a tight loop while its crash-looping siblings mount that name by subPath (and by
// subPathExpr) start after start. A file that exists only on the host's root must never be
// visible to a sibling. The runtime manager is driven directly with its clock stepped past each
// CrashLoopBackOff window, so the siblings start hundreds of times within minutes; the mounts are
// the kubelet's own (VolumeManager.mountPod, podContainerMounts) and are all gone afterwards.
// Then the same through the kubelet-ts CLI: a subPath mount is removed with its pod, and by a
// restarted kubelet-ts when the pod went while it was down.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Container, Pod } from '../../src/api/types.js';
import { applyPodDefaults } from '../../src/api/defaults.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { RuntimeManager } from '../../src/runtime/runtime-manager.js';
import { ImageManager } from '../../src/images/image-manager.js';
import { evictableContainers } from '../../src/gc/container-gc.js';
import { discoverCgroupMounts } from '../../src/cgroups/index.js';
import { PodContainerManager } from '../../src/cm/pod-container-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { podContainerMounts } from '../../src/volumemanager/pod-mounts.js';
import { VolumeManager, type PodVolumes } from '../../src/volumemanager/volume-manager.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';

const WAIT = 90_000;
/** Starts of the siblings the race runs for, unless RACE_BUDGET_MS passes first. */
const TARGET_STARTS = 300;
const RACE_BUDGET_MS = 150_000;
const SIBLINGS = 2;

const mountsUnder = (dir: string): string[] =>
  readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')[4]!).filter((p) => p === dir || p.startsWith(`${dir}/`));

/** Unmounts whatever a failed run left under dir (deepest first), so removing dir never descends into a mount. */
async function unmountLeftovers(dir: string): Promise<string[]> {
  const left = mountsUnder(dir);
  const { execFileSync } = await import('node:child_process');
  for (const m of [...left].sort((a, b) => b.length - a.length)) {
    try { execFileSync('umount', ['-l', m]); } catch { /* reported through the returned list */ }
  }
  return left;
}

describe('subPath race on containerd', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  const marker = `kts-subpath-marker-${randomBytes(6).toString('hex')}`;
  const markerPath = join('/', marker);

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    await writeFile(markerPath, 'only on the host root\n', { flag: 'wx' });
  });

  after(async () => {
    await rm(markerPath, { force: true });
    cri.close();
  });

  describe('a crash-looping sibling against a flipper, hundreds of starts (runtime manager, stepped clock)', () => {
    let rootDir: string;
    let runtime: RuntimeManager;
    let vm: VolumeManager;
    let cgroups: PodContainerManager;
    const clock = new FakeClock(Date.now());
    const refusals: string[] = [];
    const uid = `subpath-race-${process.pid}-${Date.now()}`;
    const sibling = (i: number): Container => ({
      name: `sibling-${i}`,
      image: '',
      env: [{ name: 'C', value: `sibling-${i}` }, { name: 'DIR', value: 'x' }],
      command: ['sh', '-c', `if test -e /mnt/x/${marker}; then echo "$C" >> /out/leaks; fi; echo "$C" >> /out/starts; exit 1`],
      // one through subPath, the other through subPathExpr: the same path after expansion
      volumeMounts: [
        i % 2 === 0 ? { name: 'shared', mountPath: '/mnt/x', subPath: 'x' } : ({ name: 'shared', mountPath: '/mnt/x', subPathExpr: '$(DIR)' } as Container['volumeMounts'] extends (infer M)[] | undefined ? M : never),
        { name: 'out', mountPath: '/out' },
      ],
    });
    const pod: Pod = {
      metadata: { name: 'subpath-race', namespace: 'default', uid },
      spec: {
        hostNetwork: true,
        restartPolicy: 'Always',
        terminationGracePeriodSeconds: 1,
        volumes: [{ name: 'shared', emptyDir: {} }, { name: 'out', emptyDir: {} }],
        containers: [
          {
            name: 'flipper',
            image: '',
            // flips in a loop, each state held for a random 0-260 ms (directory) and 0-20 ms
            // (symlink to /). A directory held for less than the kubelet's whole prepare (resolve,
            // open, bind) is almost always gone or swapped before the mount, and the siblings hardly
            // ever start (1 start in 550 tries with no pause, 1 in 664 with 0-40 ms, measured).
            command: ['sh', '-c', 'cd /shared; while :; do mkdir x; usleep $((RANDOM * 8)); rmdir x; ln -s / x; usleep $((RANDOM % 20000)); rm x; done 2>/dev/null'],
            resources: { limits: { cpu: '300m', memory: '32Mi' } },
            volumeMounts: [{ name: 'shared', mountPath: '/shared' }],
          },
          ...Array.from({ length: SIBLINGS }, (_, i) => sibling(i)),
        ],
      },
    };

    before(async () => {
      for (const c of pod.spec.containers) c.image = rt.images.busybox;
      applyPodDefaults(pod);
      // the kubelet's log lines kept for the report (a refused subPath says why there)
      setLogSink((line) => { if (/Failed to prepare subPath/.test(line)) refusals.push(line); });
      rootDir = await mkdtemp(join(tmpdir(), 'kts-subpath-race-'));
      cgroups = new PodContainerManager({ mounts: await discoverCgroupMounts(), cgroupRoot: '', log: createLogger() });
      const log = createLogger();
      runtime = new RuntimeManager({
        cri, images: new ImageManager({ cri, clock, log, serializeImagePulls: true }), clock, log,
        nodeName: 'subpath-node', hostIPs: () => ['127.0.0.1'], memoryCapacityBytes: 1 << 30,
        podLogsDir: join(rootDir, 'logs'), rootDir, ensurePodCgroup: (p) => cgroups.ensureExists(p),
      });
      vm = new VolumeManager({ rootDir, clock, log, nodeName: 'subpath-node', hostIPs: () => ['127.0.0.1'] });
    });

    after(async () => {
      // as the kubelet tears a pod down: kill, remove, unmount, then the directory
      try {
        await runtime.killPod(pod, await runtime.getPodStatus(uid, pod.metadata.name!, 'default'), 0);
        await runtime.removePod(await runtime.getPodStatus(uid, pod.metadata.name!, 'default'));
      } catch (err) {
        process.stderr.write(`# removing the race pod failed: ${(err as Error).message}\n`);
      }
      await vm.unmountPod(uid).catch(() => undefined);
      await cgroups.remove(cgroups.podCgroupName(pod)).catch(() => undefined);
      const left = await unmountLeftovers(rootDir);
      if (mountsUnder(rootDir).length === 0) await rm(rootDir, { recursive: true, force: true });
      setLogSink((line) => process.stderr.write(line + '\n'));
      assert.deepEqual(left, [], 'the kubelet\'s teardown left mounts under its root dir');
    });

    it(`the host root's marker is never visible through the subPath, over up to ${TARGET_STARTS} sibling starts`, async () => {
      const volumes: PodVolumes = await vm.mountPod(pod);
      const podDirectory = join(rootDir, 'pods', uid);
      const outDir = volumes.get('out')!.hostPath;
      const extras = {
        containerMounts: (c: Container, envs: readonly { key: string; value: string }[], podIPs: string[]) =>
          podContainerMounts({ pod, container: c, volumes, envs, podIPs, podDir: podDirectory, clusterDomain: '' }),
      };
      const lines = async (f: string): Promise<string[]> => (await readFile(join(outDir, f), 'utf8').catch(() => '')).split('\n').filter(Boolean);
      const deadline = Date.now() + RACE_BUDGET_MS;
      let refused = 0;
      let syncs = 0;
      let starts = 0;
      let leaks: string[] = [];
      while (starts < TARGET_STARTS && Date.now() < deadline && leaks.length === 0) {
        // past any CrashLoopBackOff window: every exited sibling is started again
        clock.step(301_000);
        const st = await runtime.getPodStatus(uid, pod.metadata.name!, 'default');
        for (const c of evictableContainers(st)) await runtime.removeContainer(c.id).catch(() => undefined);
        const r = await runtime.syncPod(pod, st, extras);
        syncs++;
        for (const f of r.startFailures.values()) if (f.reason === 'CreateContainerConfigError') refused++;
        starts = (await lines('starts')).length;
        leaks = await lines('leaks');
        await new Promise((res) => setTimeout(res, 100));
      }
      process.stdout.write(`# ${starts} sibling starts, ${refused} subPath mounts refused, ${syncs} syncs, ${leaks.length} saw the host root's marker\n`);
      const why = new Map<string, number>();
      for (const l of refusals) {
        const k = (/err="([^"]*)/.exec(l)?.[1] ?? l).replace(/'[^']*'/g, "'…'");
        why.set(k, (why.get(k) ?? 0) + 1);
      }
      for (const [k, n] of why) process.stdout.write(`#   ${n} x ${k}\n`);
      const flipper = (await runtime.getPodStatus(uid, pod.metadata.name!, 'default')).containerStatuses.find((c) => c.name === 'flipper');
      assert.equal(flipper?.state, 'running', 'the flipper ran all along');
      assert.deepEqual(leaks, [], `siblings saw ${markerPath} through their subPath mount`);
      assert.ok(starts >= 10, `the siblings started ${starts} times: too few to have raced the flipper`);
    });
  });

  describe('through the kubelet-ts CLI: subPath mounts go with the pod, and after a restart', () => {
    let kubelet: KubeletProcess | undefined;
    let rootDir: string;
    let scratch: string;
    let manifestDir: string;
    let configFile: string;

    before(async () => {
      setLogSink((line) => process.stderr.write(line + '\n'));
      rootDir = await mkdtemp(join(tmpdir(), 'kts-subpath-root-'));
      scratch = await mkdtemp(join(tmpdir(), 'kts-subpath-cli-'));
      manifestDir = join(scratch, 'manifests');
      await mkdir(manifestDir);
      configFile = join(scratch, 'kubelet.yaml');
      await writeFile(configFile, 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication: {webhook: {enabled: false}}\nauthorization: {mode: AlwaysAllow}\n');
    });

    after(async () => {
      for (const f of ['a.json', 'b.json']) await rm(join(manifestDir, f), { force: true });
      if (kubelet) {
        await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'subpath' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
        await kubelet.stop();
      }
      const left = await unmountLeftovers(rootDir);
      if (mountsUnder(rootDir).length === 0) await rm(rootDir, { recursive: true, force: true });
      await rm(scratch, { recursive: true, force: true });
      assert.deepEqual(left, [], 'mounts left under the root dir');
    });

    const staticPod = (name: string): string => JSON.stringify({
      apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: { test: 'subpath' } },
      spec: {
        hostNetwork: true,
        terminationGracePeriodSeconds: 1,
        volumes: [{ name: 'data', emptyDir: {} }],
        initContainers: [{ name: 'init', image: rt.images.busybox, command: ['sh', '-c', 'mkdir -p /data/conf && echo from-the-volume > /data/conf/file'], volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
        containers: [{
          name: 'app', image: rt.images.busybox,
          command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
          volumeMounts: [{ name: 'data', mountPath: '/conf', subPath: 'conf' }, { name: 'data', mountPath: '/etc/the-file', subPath: 'conf/file' }],
        }],
      },
    });

    async function runningPod(name: string): Promise<Pod> {
      return waitFor(async () => {
        const p = (await kubelet!.pods()).find((x) => x.metadata.name === `${name}-${kubelet!.nodeName}`);
        return p?.status?.containerStatuses?.[0]?.state.running ? p : undefined;
      }, WAIT, `${name} to run`);
    }

    it('the container sees the subPath through a bind mount under volume-subpaths; removing the pod unmounts it; a restarted kubelet-ts cleans a pod removed while it was down', async () => {
      kubelet = await startKubelet({ endpoint: rt.endpoint, rootDir, manifestDir, extraArgs: ['--config', configFile] });
      await writeFile(join(manifestDir, 'a.json'), staticPod('a'));
      await writeFile(join(manifestDir, 'b.json'), staticPod('b'));
      const a = await runningPod('a');
      const b = await runningPod('b');
      for (const p of [a, b]) {
        const sp = join(rootDir, 'pods', p.metadata.uid!, 'volume-subpaths', 'data', 'app');
        assert.deepEqual(mountsUnder(join(rootDir, 'pods', p.metadata.uid!, 'volume-subpaths')), [join(sp, '0'), join(sp, '1')]);
        const [c] = await cri.listContainers({ label_selector: { 'io.kubernetes.pod.uid': p.metadata.uid!, 'io.kubernetes.container.name': 'app' } });
        const r = await cri.execSync(c!.id, ['sh', '-c', 'cat /conf/file /etc/the-file'], 10);
        assert.equal(Buffer.from(r.stdout).toString(), 'from-the-volume\nfrom-the-volume\n');
      }

      // removed while kubelet-ts runs: unmounted and gone with the pod directory
      await rm(join(manifestDir, 'a.json'));
      const aDir = join(rootDir, 'pods', a.metadata.uid!);
      await waitFor(async () => !(await stat(aDir).then(() => true, () => false)), WAIT, 'pod a\'s directory to be removed');
      assert.deepEqual(mountsUnder(aDir), []);

      // removed while kubelet-ts is down: the restarted one finds the orphan and cleans it
      await kubelet.stop();
      await rm(join(manifestDir, 'b.json'));
      const bDir = join(rootDir, 'pods', b.metadata.uid!);
      assert.equal(mountsUnder(join(bDir, 'volume-subpaths')).length, 2, 'the mounts outlive kubelet-ts, as the pod does');
      kubelet = await startKubelet({ endpoint: rt.endpoint, rootDir, manifestDir, extraArgs: ['--config', configFile] });
      await waitFor(async () => !(await stat(bDir).then(() => true, () => false)), WAIT, 'pod b\'s directory to be removed after the restart');
      assert.deepEqual(mountsUnder(bDir), []);
      assert.match(kubelet.logs(), /Unmounted subPath/);
    });

  });
});
