// kubelet-ts as a node of a cluster, on real containerd, joined to the test API server (a test
// double of kube-apiserver, in this process) with a client-certificate kubeconfig, checked with
// kubectl as a user would: the node Ready, its lease renewed, describe node, and an API server
// restart ridden out.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { ensureRuntime } from '../fixtures/runtime.js';

const run = promisify(execFile);
const NODE = 'kts-cluster-node';
const WAIT = 60_000;

describe('kubelet-ts joined to the test API server, seen with kubectl', () => {
  let dir: string;
  let api: TestApiServer;
  let kubelet: KubeletProcess;
  let admin: string;

  before(async () => {
    const rt = await ensureRuntime();
    dir = await mkdtemp(join(tmpdir(), 'kts-cluster-'));
    api = new TestApiServer({ tls: true });
    await api.start();
    admin = join(dir, 'admin.kubeconfig');
    const kc = join(dir, 'kubelet.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'), { mode: 0o600 });
    await writeFile(kc, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    // An unchanged status is re-sent every nodeStatusReportFrequency (5 min upstream): 15 s here,
    // so heartbeats after the restart show within the test.
    const config = join(dir, 'kubelet-config.yaml');
    await writeFile(config, 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnodeStatusReportFrequency: 15s\n');
    kubelet = await startKubelet({ endpoint: rt.endpoint, nodeName: NODE, extraArgs: ['--config', config, '--kubeconfig', kc, '--node-labels', 'kts-test=cluster-node'] });
  });

  after(async () => {
    await kubelet?.stop();
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const kubectl = async (args: string[]): Promise<string> => {
    const { stdout } = await run('kubectl', ['--kubeconfig', admin, ...args], { timeout: 30_000 });
    return stdout;
  };
  const renewTime = async () => Date.parse(await kubectl(['get', 'lease', '-n', 'kube-node-lease', NODE, '-o', 'jsonpath={.spec.renewTime}']));

  it('kubectl get nodes -o wide shows the node Ready, with its IP, OS image and containerd version', async () => {
    const row = await waitFor(async () => {
      const out = await kubectl(['get', 'nodes', '-o', 'wide']);
      const line = out.split('\n').find((l) => l.startsWith(`${NODE} `));
      return line && /\sReady\s/.test(line) ? line.trim().split(/\s{2,}/) : undefined;
    }, WAIT, 'the node to be Ready', 1_000);
    const [name, status, roles, , version, ip, external, , kernel, runtime] = row;
    assert.deepEqual([name, status, roles, external], [NODE, 'Ready', '<none>', '<none>']);
    // the Kubernetes release kubelet-ts implements (not newer than the API server); its own build in an annotation
    assert.match(version!, /^v1\.34\.\d+$/);
    assert.match(await kubectl(['get', 'node', NODE, '-o', 'jsonpath={.metadata.annotations.kubelet-ts\\.io/build}']), /^v\d+\.\d+\.\d+/);
    assert.match(ip!, /^\d+\.\d+\.\d+\.\d+$/);
    assert.ok(kernel);
    assert.match(runtime!, /^containerd:\/\/\S+$/);
    const labels = JSON.parse(await kubectl(['get', 'node', NODE, '-o', 'jsonpath={.metadata.labels}']));
    assert.equal(labels['kts-test'], 'cluster-node');
    assert.equal(labels['kubernetes.io/hostname'], NODE);
  });

  it('kubectl get lease -n kube-node-lease shows the lease held by the node, and it is renewed', async () => {
    const out = await kubectl(['get', 'lease', '-n', 'kube-node-lease']);
    assert.match(out, new RegExp(`^${NODE}\\s+${NODE}\\s`, 'm'));
    const first = await renewTime();
    await waitFor(async () => (await renewTime()) > first, 30_000, 'a lease renewal', 1_000);
  });

  it('kubectl describe node shows the conditions, capacity and the kubelet\'s events', async () => {
    const out = await waitFor(async () => {
      const text = await kubectl(['describe', 'node', NODE]);
      return /RegisteredNode/.test(text) ? text : undefined;
    }, WAIT, 'the RegisteredNode event in describe node', 1_000);
    assert.match(out, /Ready\s+True\s.*KubeletReady\s+kubelet is posting ready status/);
    assert.match(out, /MemoryPressure\s+False\s.*KubeletHasSufficientMemory/);
    assert.match(out, /DiskPressure\s+False\s.*KubeletHasNoDiskPressure/);
    assert.match(out, /PIDPressure\s+False\s.*KubeletHasSufficientPID/);
    assert.match(out, /Capacity:\n(\s+\S+:\s+\S+\n)*\s+pods:\s+110\n/);
    assert.match(out, /Allocatable:\n/);
    assert.match(out, /Container Runtime Version:\s+containerd:\/\//);
    assert.match(out, new RegExp(`HolderIdentity:\\s+${NODE}`));
    assert.match(out, /Normal\s+Starting\s+.*kubelet\s+Starting kubelet\./);
    assert.match(out, /Normal\s+NodeHasSufficientMemory\s+.*Node \S+ status is now: NodeHasSufficientMemory/);
  });

  it('rides out an API server restart: lease and node status resume, kubelet-ts keeps running', async () => {
    await api.stop();
    // Long enough for a lease renewal and a status update to fail.
    await new Promise((r) => setTimeout(r, 12_000));
    assert.equal(kubelet.child.exitCode, null, 'kubelet-ts is still running');
    await api.start();
    const back = Date.now();
    await waitFor(async () => (await renewTime()) >= back - 1_000, 40_000, 'a lease renewal after the restart', 1_000);
    await waitFor(async () => {
      const hb = await kubectl(['get', 'node', NODE, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}']);
      return Date.parse(hb) >= back - 1_000;
    }, WAIT, 'a node status heartbeat after the restart', 1_000);
    const status = await kubectl(['get', 'node', NODE, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']);
    assert.equal(status, 'True');
    assert.equal((await kubectl(['get', 'nodes', '-o', 'name'])).trim().split('\n').filter((l) => l === `node/${NODE}`).length, 1);
    assert.equal(kubelet.child.exitCode, null);
  });
});
