// In-place pod resize on real containerd, driven with `kubectl patch --subresource resize`
// through the test API server double: a Burstable pod's cpu and memory limits raised keep the
// same container (restart count 0) and its cgroup files carry the new values, with the status's
// resources and allocatedResources updated and no resize condition left; a memory resize of a
// container whose resizePolicy says RestartContainer restarts it once; a resize asking for more
// cpu than the node has is PodResizePending/Infeasible and changes nothing.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CriClient } from '../../src/runtime/cri-client.js';
import { cgroupDir, cgroupMode, discoverCgroupMounts, type CgroupMounts } from '../../src/cgroups/index.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { decodeCheckpoint } from '../../src/kubelet/allocation/checkpoint.js';

const run = promisify(execFile);
const WAIT = 90_000;
const NODE = 'kts-resize-node';
const LABEL = { test: 'pod-resize' };

function pod(name: string, resizePolicy?: { resourceName: string; restartPolicy: string }[]): string {
  return JSON.stringify({
    apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: LABEL },
    spec: {
      nodeName: NODE, terminationGracePeriodSeconds: 1,
      containers: [{
        name: 'main', image: '', command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 1; done'],
        resources: { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '200m', memory: '64Mi' } },
        ...(resizePolicy ? { resizePolicy } : {}),
      }],
    },
  });
}

describe('in-place pod resize on containerd, through kubectl patch --subresource resize', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let api: TestApiServer;
  let kubelet: KubeletProcess;
  let dir: string;
  let admin: string;
  let mounts: CgroupMounts;

  const kubectl = async (...args: string[]): Promise<string> => (await run('kubectl', ['--kubeconfig', admin, ...args], { timeout: WAIT })).stdout;
  const getPod = async (name: string): Promise<any> => JSON.parse(await kubectl('get', 'pod', name, '-o', 'json'));
  const create = async (name: string, json: string): Promise<void> => {
    const file = join(dir, `${name}.json`);
    await writeFile(file, json.replace('"image":""', `"image":${JSON.stringify(rt.images.busybox)}`));
    await kubectl('apply', '-f', file);
    await waitFor(async () => (await getPod(name)).status?.containerStatuses?.[0]?.state?.running !== undefined, WAIT, `${name} running`);
  };
  const resize = (name: string, patch: unknown): Promise<string> => kubectl('patch', 'pod', name, '--subresource', 'resize', '--patch', JSON.stringify(patch));
  /** The container's cgroup file (cgroup v1 or v2 name for the same setting). */
  const cgroupValue = async (p: any, v1: [controller: 'cpu' | 'memory', file: string], v2: string): Promise<string> => {
    const id = String(p.status.containerStatuses[0].containerID).replace(/^.*:\/\//, '');
    const qos = String(p.status.qosClass).toLowerCase();
    const name = `/kubepods/${qos === 'guaranteed' ? '' : `${qos}/`}pod${p.metadata.uid}/${id}`;
    const v2mode = cgroupMode(mounts) === 'v2';
    const m = v2mode ? mounts.unified! : mounts.v1[v1[0]]!;
    return (await readFile(join(cgroupDir(m, name), v2mode ? v2 : v1[1]), 'utf8')).trim();
  };

  before(async () => {
    rt = await ensureRuntime();
    mounts = await discoverCgroupMounts();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-pod-resize-'));
    api = new TestApiServer({});
    await api.start();
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters']), { mode: 0o600 });
    const kubeletKubeconfig = join(dir, 'kubelet.kubeconfig');
    await writeFile(kubeletKubeconfig, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    kubelet = await startKubelet({ endpoint: rt.endpoint, nodeName: NODE, extraArgs: ['--kubeconfig', kubeletKubeconfig] });
  });

  after(async () => {
    for (const p of api.list('pods')) {
      try { api.registry.delete(api.resource('pods'), p.metadata.namespace, p.metadata.name, { gracePeriodSeconds: 0 }); } catch { /* gone */ }
    }
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: LABEL })).filter((s) => s.state === 'SANDBOX_READY').length === 0, WAIT, 'pods to stop').catch(() => undefined);
    await kubelet.stop();
    await api.stop();
    cri.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('raises cpu and memory limits in place: same container, restartCount 0, cgroup files, status resources, no condition left', async () => {
    await create('grow', pod('grow'));
    const before = await getPod('grow');
    const id = before.status.containerStatuses[0].containerID;
    assert.deepEqual(before.status.containerStatuses[0].allocatedResources, { cpu: '100m', memory: '32Mi' });
    assert.equal(await cgroupValue(before, ['cpu', 'cpu.cfs_quota_us'], 'cpu.max').then((s) => s.split(' ')[0]), '20000');

    await resize('grow', { spec: { containers: [{ name: 'main', resources: { requests: { cpu: '150m' }, limits: { cpu: '300m', memory: '96Mi' } } }] } });
    const after = await waitFor(async () => {
      const p = await getPod('grow');
      const cs = p.status.containerStatuses[0];
      return cs.resources?.limits?.cpu === '300m' && cs.resources?.limits?.memory === '96Mi' && !(p.status.conditions ?? []).some((c: any) => c.type.startsWith('PodResize')) ? p : undefined;
    }, WAIT, 'status resources at the new limits and no resize condition');
    const cs = after.status.containerStatuses[0];
    assert.equal(cs.containerID, id, 'the same container');
    assert.equal(cs.restartCount, 0);
    assert.deepEqual(cs.allocatedResources, { cpu: '150m', memory: '32Mi' });
    assert.equal(cs.resources.requests.cpu, '150m');
    assert.equal(after.metadata.generation, 2);
    // the container's cgroup: quota 30 ms per 100 ms, 96 MiB, shares for 150m
    assert.equal((await cgroupValue(after, ['cpu', 'cpu.cfs_quota_us'], 'cpu.max')).split(' ')[0], '30000');
    assert.equal(await cgroupValue(after, ['memory', 'memory.limit_in_bytes'], 'memory.max'), String(96 * 1024 * 1024));
    if (cgroupMode(mounts) !== 'v2') assert.equal(await cgroupValue(after, ['cpu', 'cpu.shares'], 'cpu.weight'), '153');
    // the allocation is checkpointed in upstream's file
    const ck = decodeCheckpoint('allocated_pods_state', await readFile(join(kubelet.rootDir, 'allocated_pods_state'), 'utf8'));
    assert.deepEqual(ck.get(after.metadata.uid)?.get('main'), { limits: { cpu: '300m', memory: '96Mi' }, requests: { cpu: '150m', memory: '32Mi' } });
  });

  it('a memory resize with resizePolicy RestartContainer restarts the container once', async () => {
    await create('restart', pod('restart', [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }, { resourceName: 'memory', restartPolicy: 'RestartContainer' }]));
    const before = await getPod('restart');
    await resize('restart', { spec: { containers: [{ name: 'main', resources: { limits: { memory: '80Mi' } } }] } });
    const after = await waitFor(async () => {
      const p = await getPod('restart');
      const cs = p.status.containerStatuses[0];
      return cs.restartCount === 1 && cs.state.running && cs.resources?.limits?.memory === '80Mi' ? p : undefined;
    }, WAIT, 'restarted once with the new memory limit');
    assert.notEqual(after.status.containerStatuses[0].containerID, before.status.containerStatuses[0].containerID);
    assert.equal(await cgroupValue(after, ['memory', 'memory.limit_in_bytes'], 'memory.max'), String(80 * 1024 * 1024));
    // and no further restart on the next syncs
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal((await getPod('restart')).status.containerStatuses[0].restartCount, 1);
  });

  it('more cpu than the node has: PodResizePending Infeasible, nothing changed', async () => {
    await create('huge', pod('huge'));
    const before = await getPod('huge');
    await resize('huge', { spec: { containers: [{ name: 'main', resources: { requests: { cpu: '1000' }, limits: { cpu: '1000' } } }] } });
    const p = await waitFor(async () => {
      const x = await getPod('huge');
      return (x.status.conditions ?? []).find((c: any) => c.type === 'PodResizePending') ? x : undefined;
    }, WAIT, 'PodResizePending');
    const cond = p.status.conditions.find((c: any) => c.type === 'PodResizePending');
    assert.equal(cond.reason, 'Infeasible');
    assert.match(cond.message, /^Node didn't have enough capacity: cpu, requested: 1000000, capacity: \d+$/);
    assert.equal(cond.observedGeneration, 2);
    const cs = p.status.containerStatuses[0];
    assert.equal(cs.containerID, before.status.containerStatuses[0].containerID);
    assert.equal(cs.restartCount, 0);
    assert.deepEqual(cs.allocatedResources, { cpu: '100m', memory: '32Mi' });
    assert.equal(cs.resources.limits.cpu, '200m');
    assert.equal((await cgroupValue(p, ['cpu', 'cpu.cfs_quota_us'], 'cpu.max')).split(' ')[0], '20000');
  });

  it('the resize subresource refuses a QoS class change and other fields', async () => {
    await assert.rejects(resize('restart', { spec: { containers: [{ name: 'main', resources: { requests: { cpu: '200m', memory: '80Mi' } } }] } }),
      /Pod QOS Class may not change as a result of resizing/);
    await assert.rejects(resize('huge', { spec: { containers: [{ name: 'main', resources: { limits: { memory: null } } }] } }),
      /resource limits cannot be removed/);
  });
});
