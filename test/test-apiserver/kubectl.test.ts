// kubectl (the real client) against the test API server, driven as a user would.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { nodeManifest, podManifest } from './client.js';

function findKubectl(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(dir, 'kubectl');
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch { /* next */ }
  }
  throw new Error('kubectl not found on PATH: these tests drive the real client (on Debian: apt-get install kubernetes-client)');
}

interface Run { code: number; stdout: string; stderr: string }

describe('kubectl against the test API server', () => {
  let s: TestApiServer;
  let dir: string;
  let kubectlBin: string;
  let kubeconfig: string;

  const kubectl = (args: string[], timeoutMs = 20_000): Promise<Run> =>
    new Promise((resolve) => {
      execFile(kubectlBin, ['--kubeconfig', kubeconfig, ...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      });
    });

  const until = async (what: string, cond: () => boolean, timeoutMs = 10_000) => {
    const end = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  before(async () => {
    kubectlBin = findKubectl();
    s = new TestApiServer({ tls: true });
    await s.start();
    dir = mkdtempSync(join(tmpdir(), 'kts-kubectl-'));
    kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, s.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'));
    s.create('nodes', undefined, nodeManifest('n1'));
    s.create('leases', 'kube-node-lease', { metadata: { name: 'n1' }, spec: { holderIdentity: 'n1', leaseDurationSeconds: 40, renewTime: '2026-01-01T00:00:00.000000Z' } }, 'coordination.k8s.io');
  });
  after(async () => {
    await s?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('get nodes -o wide prints the server-side columns (client certificate auth)', async () => {
    const r = await kubectl(['get', 'nodes', '-o', 'wide']);
    assert.equal(r.code, 0, r.stderr);
    const [head, row] = r.stdout.trim().split('\n').map((l) => l.trim().split(/\s{2,}/));
    assert.deepEqual(head, ['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION', 'INTERNAL-IP', 'EXTERNAL-IP', 'OS-IMAGE', 'KERNEL-VERSION', 'CONTAINER-RUNTIME']);
    assert.deepEqual([row[0], row[1], row[2], row[4], row[5], row[6], row[7], row[8], row[9]], ['n1', 'Ready', '<none>', 'v1.32.0-kts', '10.0.0.5', '<none>', 'Debian GNU/Linux 12', '6.1.0', 'containerd://1.7.0']);
    assert.ok(s.requests.some((q) => q.user === 'kubernetes-admin'));
  });

  it('works with a bearer-token kubeconfig too', async () => {
    const tk = join(dir, 'token.kubeconfig');
    writeFileSync(tk, s.kubeconfigFor('token-user'));
    const r = await kubectl(['--kubeconfig', tk, 'get', 'namespaces']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /kube-node-lease\s+Active/);
    const svc = await kubectl(['--kubeconfig', tk, 'get', 'svc']);
    assert.match(svc.stdout, /^kubernetes\s+ClusterIP\s+10\.96\.0\.1\s+<none>\s+443\/TCP\s+\d+s$/m);
  });

  it('apply -f creates a pod, and a second apply with a change patches it', async () => {
    const manifest = (image: string, tier: string) => `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web, tier: ${tier}}
spec:
  nodeName: n1
  containers:
  - name: c
    image: ${image}
    command: ["sleep", "3600"]
`;
    const file = join(dir, 'pod.yaml');
    writeFileSync(file, manifest('busybox:1.36', 'a'));
    const r1 = await kubectl(['apply', '-f', file]);
    assert.equal(r1.code, 0, r1.stderr);
    assert.equal(r1.stdout.trim(), 'pod/web created');
    const created = s.get('pods', 'default', 'web')!;
    assert.ok(created.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']);
    writeFileSync(file, manifest('busybox:1.37', 'b'));
    const r2 = await kubectl(['apply', '-f', file]);
    assert.equal(r2.code, 0, r2.stderr);
    assert.equal(r2.stdout.trim(), 'pod/web configured');
    assert.equal(r2.stderr, '');
    const pod = s.get('pods', 'default', 'web')!;
    assert.equal(pod.spec.containers[0].image, 'busybox:1.37');
    assert.equal(pod.metadata.labels.tier, 'b');
    assert.equal(pod.metadata.uid, created.metadata.uid);
    assert.ok(s.requests.some((q) => q.method === 'PATCH' && q.path === '/api/v1/namespaces/default/pods/web' && q.contentType === 'application/strategic-merge-patch+json'));
    const r3 = await kubectl(['apply', '-f', file]);
    assert.equal(r3.stdout.trim(), 'pod/web unchanged');
  });

  it('create namespace, configmap, secret, serviceaccount and token (typed clients send protobuf)', async () => {
    for (const args of [['create', 'ns', 'team'], ['create', 'cm', 'settings', '-n', 'team', '--from-literal=mode=fast'],
      ['create', 'secret', 'generic', 'creds', '-n', 'team', '--from-literal=password=hunter2'], ['create', 'sa', 'robot', '-n', 'team']]) {
      const r = await kubectl(args);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    }
    assert.ok(s.requests.some((q) => q.method === 'POST' && q.contentType === 'application/vnd.kubernetes.protobuf'));
    assert.deepEqual(s.get('configmaps', 'team', 'settings')?.data, { mode: 'fast' });
    assert.equal(Buffer.from(s.get('secrets', 'team', 'creds')!.data.password, 'base64').toString(), 'hunter2');
    assert.equal(s.get('secrets', 'team', 'creds')!.type, 'Opaque');
    const tok = await kubectl(['create', 'token', 'robot', '-n', 'team', '--duration=2h']);
    assert.equal(tok.code, 0, tok.stderr);
    const claims = JSON.parse(Buffer.from(tok.stdout.trim().split('.')[1], 'base64url').toString());
    assert.equal(claims.sub, 'system:serviceaccount:team:robot');
    assert.equal(claims.exp - claims.iat, 7200);
    const sa = await kubectl(['get', 'sa', '-n', 'team', '-o', 'name']);
    assert.equal(sa.stdout, 'serviceaccount/default\nserviceaccount/robot\n');
  });

  it('get pods -A -w prints a line for a pod created while it watches', async () => {
    const child = spawn(kubectlBin, ['--kubeconfig', kubeconfig, 'get', 'pods', '-A', '-w'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    try {
      await until('the watch to start', () => s.requests.some((q) => q.watch && q.path === '/api/v1/pods'));
      assert.match(out, /^NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\n/);
      s.create('pods', 'kube-system', podManifest('watched'));
      await until('the watched pod line', () => /kube-system\s+watched\s+0\/1\s+Pending\s+0\s+\d+s/.test(out));
    } finally {
      clearTimeout(killer);
      child.kill('SIGTERM');
    }
    assert.equal(err, '');
  });

  it('describe pod shows the pod and its events', async () => {
    const pod = s.get('pods', 'default', 'web')!;
    s.create('events', 'default', {
      metadata: { name: 'web.1' }, involvedObject: { kind: 'Pod', namespace: 'default', name: 'web', uid: pod.metadata.uid, apiVersion: 'v1', fieldPath: 'spec.containers{c}' },
      reason: 'Pulled', message: 'Container image "busybox:1.37" already present on machine', type: 'Normal', count: 1,
      source: { component: 'kubelet', host: 'n1' }, firstTimestamp: new Date().toISOString().replace(/\.\d+Z/, 'Z'), lastTimestamp: new Date().toISOString().replace(/\.\d+Z/, 'Z'),
    });
    const r = await kubectl(['describe', 'pod', 'web']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Name:\s+web$/m);
    assert.match(r.stdout, /^Node:\s+n1\/$/m);
    assert.match(r.stdout, /Image:\s+busybox:1.37/);
    assert.match(r.stdout, /QoS Class:\s+BestEffort/);
    assert.match(r.stdout, /Normal\s+Pulled\s+\S+\s+kubelet\s+Container image "busybox:1.37" already present on machine/);
  });

  it('describe node shows conditions, the lease holder, the node\'s running pods and its events', async () => {
    s.create('pods', 'default', podManifest('elsewhere', 'n2'));
    const done = s.create('pods', 'default', podManifest('done', 'n1'));
    s.registry.update(s.resource('pods'), 'default', 'done', { ...done, status: { phase: 'Failed' } }, 'status');
    const node = s.get('nodes', undefined, 'n1')!;
    s.create('events', 'default', {
      metadata: { name: 'n1.1' }, involvedObject: { kind: 'Node', name: 'n1', uid: 'n1', apiVersion: 'v1' },
      reason: 'NodeReady', message: `Node n1 status is now: NodeReady`, type: 'Normal', count: 1, source: { component: 'kubelet', host: 'n1' },
      firstTimestamp: node.metadata.creationTimestamp, lastTimestamp: node.metadata.creationTimestamp,
    });
    const r = await kubectl(['describe', 'node', 'n1']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /HolderIdentity:\s+n1/);
    assert.match(r.stdout, /Ready\s+True\s+.*KubeletReady\s+kubelet is posting ready status/);
    assert.match(r.stdout, /InternalIP:\s+10.0.0.5/);
    // The field selector spec.nodeName=n1,status.phase!=Failed,... leaves out done and elsewhere.
    assert.match(r.stdout, /Non-terminated Pods:\s+\(2 in total\)/);
    assert.match(r.stdout, /default\s+web\s+0 \(0%\)/);
    assert.match(r.stdout, /kube-system\s+watched\s+0 \(0%\)/);
    assert.doesNotMatch(r.stdout, /elsewhere|done/);
    assert.match(r.stdout, /Normal\s+NodeReady\s+\S+\s+kubelet\s+Node n1 status is now: NodeReady/);
  });

  it('get lease -n kube-node-lease lists the node lease', async () => {
    const r = await kubectl(['get', 'lease', '-n', 'kube-node-lease']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^NAME\s+HOLDER\s+AGE\nn1\s+n1\s+\d+s\n$/);
  });

  it('delete pod waits while the pod terminates, and finishes when the kubelet\'s final delete removes it', async () => {
    const child = spawn(kubectlBin, ['--kubeconfig', kubeconfig, 'delete', 'pod', 'web'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    try {
      const pod = await s.waitFor('deletionTimestamp on web', () => {
        const p = s.get('pods', 'default', 'web');
        return p?.metadata.deletionTimestamp ? p : undefined;
      });
      assert.equal(pod.metadata.deletionGracePeriodSeconds, 30);
      await until('kubectl to wait on the pod', () => s.requests.some((q) => q.watch && q.query.includes('metadata.name%3Dweb')));
      assert.equal(child.exitCode, null, 'kubectl returned before the pod was gone');
      // The kubelet's final delete once the containers are gone.
      s.registry.delete(s.resource('pods'), 'default', 'web', { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid } });
      assert.equal(await exited, 0);
      assert.equal(out.trim(), 'pod "web" deleted');
    } finally {
      clearTimeout(killer);
      child.kill('SIGKILL');
    }
    const r = await kubectl(['get', 'pod', 'web']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /Error from server \(NotFound\): pods "web" not found/);
  });
});
