// kubelet-ts with the systemd cgroup driver on the VM node (systemd as PID 1, unified cgroup v2,
// the node's containerd with SystemdCgroup = true): a Burstable static pod starts with its
// slices started through systemd's D-Bus API and carrying what upstream writes, its stats come
// from the v2 files, an OOM kill in a pod is attributed through memory.events, and a stopped pod's
// slice is stopped. Runs only inside the node (scripts/vm-node.sh test).

import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Pod, PodList } from '../../src/api/types.js';
import { repoRoot } from '../fixtures/runtime.js';

// Software emulation: everything is about ten times slower than on a host.
const WAIT = 300_000;
const ENDPOINT = process.env.CONTAINER_RUNTIME_ENDPOINT ?? 'unix:///run/containerd/containerd.sock';
const BUSYBOX = process.env.KTS_BUSYBOX_IMAGE ?? '127.0.0.1:5000/kubelet-ts/busybox:1.36';
const CGROUP = '/sys/fs/cgroup';
// a UID with dashes, as the API server makes them: the slice name escapes them to "_"
const UID = '5f2b9a1c-7d4e-4b3a-9c8d-1e2f3a4b5c6d';
const ESC = UID.replaceAll('-', '_');
const SLICE = `kubepods-burstable-pod${ESC}.slice`;
const POD_PATH = `/kubepods.slice/kubepods-burstable.slice/${SLICE}`;
const OOM_UID = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';

function sh(file: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 120_000, maxBuffer: 8 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: stdout + stderr });
    });
  });
}

async function unitProperty(unit: string, name: string): Promise<string> {
  return (await sh('systemctl', ['show', '-p', name, '--value', unit])).out.trim();
}

const exists = (p: string): Promise<boolean> => access(p).then(() => true, () => false);
const readTrim = async (p: string): Promise<string> => (await readFile(p, 'utf8')).trim();

async function waitFor<T>(fn: () => Promise<T | undefined | false>, what: string, limitMs = WAIT): Promise<T> {
  const deadline = Date.now() + limitMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${lastErr ? `: ${(lastErr as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function staticPod(name: string, uid: string, ...containers: Record<string, unknown>[]): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, uid, labels: { test: 'vm-systemd' } },
    spec: { terminationGracePeriodSeconds: 2, restartPolicy: 'Never', containers: containers.map((c) => ({ image: BUSYBOX, ...c })) },
  });
}

describe('kubelet-ts with cgroupDriver systemd on a systemd + cgroup v2 node', () => {
  let child: ChildProcess | undefined;
  let logs = '';
  let dir = '';
  let manifests = '';
  let readOnly = 0;
  const base = (): string => `http://127.0.0.1:${readOnly}`;
  const pods = async (): Promise<Pod[]> => ((await (await fetch(`${base()}/pods`)).json()) as PodList).items;
  const podByUid = async (uid: string): Promise<Pod | undefined> => (await pods()).find((p) => p.metadata.uid === uid);

  before(async () => {
    if (process.env.KTS_VM !== '1') throw new Error('test/vm files run only inside the VM node (scripts/vm-node.sh test)');
    assert.equal(await readTrim('/proc/1/comm'), 'systemd', 'PID 1 is systemd');
    assert.ok(await exists(join(CGROUP, 'cgroup.controllers')), 'unified cgroup v2 at /sys/fs/cgroup');
    dir = await mkdtemp(join(tmpdir(), 'kts-sd-'));
    manifests = join(dir, 'manifests');
    await sh('mkdir', ['-p', manifests]);
    readOnly = await freePort();
    const args = [
      join(repoRoot(), 'bin', 'kubelet-ts.mjs'),
      '--container-runtime-endpoint', ENDPOINT,
      '--cgroup-driver', 'systemd',
      '--pod-max-pids', '1024',
      '--oom-watcher', 'cgroup',
      '--pod-manifest-path', manifests,
      '--root-dir', join(dir, 'root'),
      '--hostname-override', 'vm-systemd',
      '--read-only-port', String(readOnly),
      '--healthz-port', String(await freePort()),
      '--port', String(await freePort()),
      '--file-check-frequency', '2s',
      '-v', '3',
    ];
    child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d) => { logs += d; });
    await waitFor(async () => {
      if (child!.exitCode !== null) throw new Error(`kubelet-ts exited with ${child!.exitCode}:\n${logs}`);
      return (await fetch(`${base()}/healthz`).catch(() => undefined))?.ok;
    }, 'kubelet-ts to serve');
  });

  after(async () => {
    if (manifests) for (const f of ['burstable.json', 'hog.json']) await rm(join(manifests, f), { force: true });
    if (child && child.exitCode === null) {
      await waitFor(async () => (await pods()).length === 0, 'the pods to be gone', 120_000).catch(() => undefined);
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('asks the runtime for its driver, falls back to the config where it cannot tell, and starts kubepods and the QoS slices', async () => {
    assert.match(logs, /does not implement CRI RuntimeConfig|Using cgroup driver setting received from the CRI runtime/);
    assert.doesNotMatch(logs, /cgroupDriver mismatch/);
    await waitFor(async () => (await unitProperty('kubepods.slice', 'ActiveState')) === 'active', 'kubepods.slice');
  });

  it('a Burstable pod runs in its own slice, with memory.max, cpu.max, cpu.weight and pids.max as upstream writes them', async (t) => {
    await writeFile(join(manifests, 'burstable.json'), staticPod('burstable', UID, {
      name: 'main',
      command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
      resources: { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '500m', memory: '64Mi' } },
    }));
    const pod = await waitFor(async () => {
      const p = await podByUid(UID);
      return p?.status?.containerStatuses?.[0]?.state.running ? p : undefined;
    }, 'the Burstable pod to run');
    assert.equal(pod.status?.qosClass, 'Burstable');

    // systemd's view of the slices
    for (const unit of ['kubepods.slice', 'kubepods-burstable.slice', 'kubepods-besteffort.slice', SLICE]) {
      assert.equal(await unitProperty(unit, 'ActiveState'), 'active', unit);
    }
    assert.equal(await unitProperty(SLICE, 'ControlGroup'), POD_PATH);
    assert.equal(await unitProperty(SLICE, 'MemoryMax'), String(64 * 1024 * 1024));
    assert.equal(await unitProperty(SLICE, 'CPUWeight'), '4'); // 100m → 102 shares → 1 + (100 * 9999) / 262142
    assert.equal(await unitProperty(SLICE, 'CPUQuotaPerSecUSec'), '500ms');
    assert.equal(await unitProperty(SLICE, 'TasksMax'), '1024');
    assert.equal(await unitProperty('kubepods-besteffort.slice', 'CPUWeight'), '1');

    // the files under /sys/fs/cgroup
    const podDir = join(CGROUP, POD_PATH);
    assert.equal(await readTrim(join(podDir, 'memory.max')), String(64 * 1024 * 1024));
    assert.equal(await readTrim(join(podDir, 'cpu.max')), '50000 100000');
    assert.equal(await readTrim(join(podDir, 'cpu.weight')), '4');
    assert.equal(await readTrim(join(podDir, 'pids.max')), '1024');

    // containerd put the container in a scope inside the pod's slice
    const id = pod.status!.containerStatuses![0]!.containerID!.replace(/^[a-z]+:\/\//, '');
    const scope = join(podDir, `cri-containerd-${id}.scope`);
    assert.ok(await exists(scope), `${scope} exists`);
    assert.equal(await readTrim(join(scope, 'memory.max')), String(64 * 1024 * 1024));

    // what systemd shows, for the record
    const status = await sh('systemctl', ['status', '--no-pager', '--lines=0', SLICE]);
    const cgls = await sh('systemd-cgls', ['--no-pager', '-u', 'kubepods.slice']);
    t.diagnostic(`systemctl status ${SLICE}:\n${status.out}`);
    t.diagnostic(`systemd-cgls -u kubepods.slice:\n${cgls.out}`);
    assert.match(status.out, new RegExp(`cri-containerd-${id}\\.scope`));
  });

  it('/stats/summary reports the pod and its container from the v2 files of the slice and the scope', async () => {
    const summary = await waitFor(async () => {
      const s = (await (await fetch(`${base()}/stats/summary`)).json()) as {
        pods: { podRef: { uid: string }; cpu?: { usageCoreNanoSeconds?: number }; memory?: { workingSetBytes?: number; usageBytes?: number }; containers: { name: string; cpu?: { usageCoreNanoSeconds?: number }; memory?: { usageBytes?: number } }[] }[];
      };
      const p = s.pods.find((x) => x.podRef.uid === UID);
      return p?.containers.find((c) => c.name === 'main')?.memory?.usageBytes ? p : undefined;
    }, 'the pod in /stats/summary');
    const c = summary.containers.find((x) => x.name === 'main')!;
    assert.ok((c.cpu?.usageCoreNanoSeconds ?? 0) > 0, 'container CPU from cpu.stat of the scope');
    assert.ok((summary.memory?.usageBytes ?? 0) > 0, 'pod memory from memory.current of the slice');
    assert.ok((summary.memory?.usageBytes ?? 0) <= 64 * 1024 * 1024, 'pod memory within its limit');
  });

  it('an OOM kill in a pod slice is attributed to its container (memory.events), and the container ends OOMKilled', async (t) => {
    await writeFile(join(manifests, 'hog.json'), staticPod('hog', OOM_UID, {
      name: 'hog',
      // the container's own process fills a 64 MiB buffer from /dev/zero under a 16 MiB limit
      command: ['sh', '-c', 'sleep 2; exec dd if=/dev/zero of=/dev/null bs=64M count=1'],
      resources: { requests: { memory: '16Mi' }, limits: { memory: '16Mi' } },
    }, {
      // a second container, so that the pod slice's limit (the sum, 32 MiB) leaves the hog's scope
      // to hit its own: the kill is then counted in the scope's memory.events
      name: 'idle',
      command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
      resources: { requests: { memory: '16Mi' }, limits: { memory: '16Mi' } },
    }));
    const pod = await waitFor(async () => {
      const p = await podByUid(OOM_UID);
      const hog = p?.status?.containerStatuses?.find((c) => c.name === 'hog');
      const term = hog?.state.terminated ?? hog?.lastState?.terminated;
      return term ? p : undefined;
    }, 'the hog to be killed');
    const cs = pod.status!.containerStatuses!.find((c) => c.name === 'hog')!;
    t.diagnostic(`kubelet-ts on the OOM kill:\n${logs.split('\n').filter((l) => /OOM/i.test(l)).join('\n')}`);
    assert.equal((cs.state.terminated ?? cs.lastState?.terminated)?.reason, 'OOMKilled');
    await waitFor(async () => /OOMKilling[^\n]*container hog/.test(logs), 'the OOMKilling event for container hog');
  });

  it('a pod that stops has its slice stopped and its cgroup gone', async () => {
    await rm(join(manifests, 'burstable.json'));
    await waitFor(async () => !(await podByUid(UID)), 'the pod to be removed');
    await waitFor(async () => !(await exists(join(CGROUP, POD_PATH))), 'the pod cgroup to be gone');
    await waitFor(async () => (await unitProperty(SLICE, 'LoadState')) === 'not-found' || (await unitProperty(SLICE, 'ActiveState')) === 'inactive', `${SLICE} to be stopped`);
  });
});
