// Certificates of a node on real containerd, driven with kubectl against the test API server
// (a test double of kube-apiserver whose signer issues certificates that live 30 s: a double
// setting, far below upstream's minimum): the node joins with only a bootstrap kubeconfig after
// `kubectl certificate approve`; with serverTLSBootstrap the secure port refuses handshakes until
// its serving certificate is approved, then `kubectl logs`, `exec` and nodes/proxy go through the
// double, which verifies that certificate against the cluster CA; the client certificate is
// renewed twice (the double approves a node's own renewals, as kube-controller-manager's
// csrapproving does) while pods keep syncing and the lease keeps being renewed with the new
// certificate; and the serving certificate is rotated under an open `kubectl logs -f`, which
// keeps streaming.

import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { kubeconfig } from '../fixtures/test-apiserver/kubeconfig.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';

const run = promisify(execFile);
const NODE = 'kts-cert-node';
const LIFETIME_S = 30;
const TOKEN_ID = 'abc123';
const TOKEN_SECRET = '0123456789abcdef';
const WAIT = 90_000;

/** The certificate 10250 presents, or the handshake error. */
function servedCertificate(port: number): Promise<X509Certificate | Error> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, rejectUnauthorized: false });
    s.once('secureConnect', () => {
      const raw = s.getPeerCertificate().raw;
      s.destroy();
      resolve(new X509Certificate(raw));
    });
    s.once('error', (err) => resolve(err));
  });
}

describe('node certificates: TLS bootstrap, client and serving rotation, kubectl through 10250', () => {
  let rt: TestRuntime;
  let api: TestApiServer;
  let dir: string;
  let admin: string;
  let pki: string;
  let kubelet: KubeletProcess;
  let follower: ChildProcess | undefined;
  let approver: NodeJS.Timeout | undefined;

  const kubectl = async (args: string[]): Promise<string> => (await run('kubectl', ['--kubeconfig', admin, ...args], { timeout: 30_000 })).stdout;
  const csrs = () => api.list('certificatesigningrequests', undefined, 'certificates.k8s.io');
  const pending = (signer: string, user: string) => csrs().find((o) => o.spec.signerName === signer && o.spec.username === user && !o.status?.conditions?.length);
  const pems = async (prefix: string) => (await readdir(pki)).filter((f) => f.startsWith(`${prefix}-`) && f !== `${prefix}-current.pem`).sort();
  const currentSerial = async (prefix: string) => new X509Certificate(await readFile(join(pki, `${prefix}-current.pem`))).serialNumber;

  before(async () => {
    rt = await ensureRuntime();
    api = new TestApiServer({
      tls: true, autoBindTo: NODE, csrDefaultDurationSeconds: LIFETIME_S, csrAutoApproveNodeClient: true, verifyKubeletServing: true,
    });
    await api.start();
    dir = await mkdtemp(join(tmpdir(), 'kts-certs-'));
    pki = join(dir, 'pki');
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'), { mode: 0o600 });
    await writeFile(join(dir, 'ca.crt'), api.ca!.cert);
    await writeFile(join(dir, 'bootstrap.kubeconfig'), kubeconfig(api.url, api.ca!.cert, 'tls-bootstrap-token-user', { token: `${TOKEN_ID}.${TOKEN_SECRET}` }), { mode: 0o600 });
    await writeFile(join(dir, 'config.yaml'), [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      'rotateCertificates: true',
      'serverTLSBootstrap: true',
      'authentication:',
      '  anonymous: {enabled: false}',
      '  webhook: {enabled: true}',
      `  x509: {clientCAFile: ${join(dir, 'ca.crt')}}`,
      'authorization: {mode: Webhook}',
    ].join('\n'));
  });

  after(async () => {
    if (approver) clearInterval(approver);
    follower?.kill();
    await kubectl(['delete', 'pod', '--all', '--grace-period=1', '--wait=false']).catch(() => undefined);
    if (kubelet) {
      await waitFor(async () => (await kubelet.pods()).length === 0, 30_000, 'pods gone').catch(() => undefined);
      await kubelet.stop();
    }
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('joins with only a bootstrap kubeconfig once kubectl certificate approve is given', async () => {
    await kubectl(['-n', 'kube-system', 'create', 'secret', 'generic', `bootstrap-token-${TOKEN_ID}`, '--type', 'bootstrap.kubernetes.io/token',
      `--from-literal=token-id=${TOKEN_ID}`, `--from-literal=token-secret=${TOKEN_SECRET}`, '--from-literal=usage-bootstrap-authentication=true',
      '--from-literal=auth-extra-groups=system:bootstrappers:kubeadm:default-node-token']);
    const approved = (async () => {
      const csr = await api.waitFor('the bootstrap CSR', () => pending('kubernetes.io/kube-apiserver-client-kubelet', `system:bootstrap:${TOKEN_ID}`), WAIT);
      // Not approved by anyone but the administrator: the double approves only a node's own renewals.
      assert.equal(csr.status?.conditions, undefined);
      await kubectl(['certificate', 'approve', csr.metadata.name]);
    })();
    kubelet = await startKubelet({
      endpoint: rt.endpoint, nodeName: NODE,
      extraArgs: ['--config', join(dir, 'config.yaml'), '--bootstrap-kubeconfig', join(dir, 'bootstrap.kubeconfig'),
        '--kubeconfig', join(dir, 'node.kubeconfig'), '--cert-dir', pki, '--node-ip', '127.0.0.1'],
    });
    await approved;
    await waitFor(async () => /\sReady\s/.test(await kubectl(['get', 'node', NODE, '--no-headers'])), WAIT, 'the node Ready');
    assert.equal((await pems('kubelet-client')).length, 1);
    assert.match(await readFile(join(dir, 'node.kubeconfig'), 'utf8'), /kubelet-client-current\.pem/);
  });

  it('serving certificate: handshakes refused until kubectl certificate approve, then the cluster-signed one serves kubectl logs, exec and nodes/proxy, verified by the double', async () => {
    const before = await servedCertificate(kubelet.port);
    assert.ok(before instanceof Error, 'no certificate is served before the serving CSR is issued');
    const csr = await api.waitFor('the serving CSR', () => pending('kubernetes.io/kubelet-serving', `system:node:${NODE}`), WAIT);
    assert.deepEqual(csr.spec.usages, ['digital signature', 'server auth']);
    await kubectl(['certificate', 'approve', csr.metadata.name]);
    const served = await waitFor(async () => { const c = await servedCertificate(kubelet.port); return c instanceof X509Certificate ? c : undefined; }, WAIT, 'the serving certificate');
    assert.ok(served.checkIssued(new X509Certificate(api.ca!.cert)), 'issued by the cluster CA');
    assert.equal(served.subject, `O=system:nodes\nCN=system:node:${NODE}`);
    assert.match(served.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
    assert.match(served.subjectAltName ?? '', new RegExp(`DNS:${NODE}`));
    assert.equal(served.serialNumber, await currentSerial('kubelet-server'));
    await writeFile(join(dir, 'pod.yaml'), JSON.stringify({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'hello' },
      spec: { terminationGracePeriodSeconds: 1, containers: [{ name: 'hello', image: rt.images.busybox, command: ['sh', '-c', 'trap "exit 0" TERM; i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.5; done'] }] },
    }));
    await kubectl(['apply', '-f', join(dir, 'pod.yaml')]);
    await waitFor(async () => (await kubectl(['get', 'pod', 'hello', '-o', 'jsonpath={.status.phase}'])) === 'Running', WAIT, 'pod hello Running');
    assert.match(await kubectl(['logs', 'hello', '--tail', '3']), /tick \d+/);
    assert.equal((await kubectl(['exec', 'hello', '--', 'echo', 'exec-ok'])).trim(), 'exec-ok');
    assert.equal((await kubectl(['get', '--raw', `/api/v1/nodes/${NODE}/proxy/healthz`])).trim(), 'ok');
  });

  it('client certificate renewed twice and serving certificate rotated: pods keep syncing, the lease is renewed with the new certificate, kubectl logs -f keeps streaming', async () => {
    const start = api.requests.length;
    const servingBefore = await currentSerial('kubelet-server');
    // What an administrator (or an approver) does for the serving renewals.
    let approving = false;
    approver = setInterval(() => {
      const csr = pending('kubernetes.io/kubelet-serving', `system:node:${NODE}`);
      if (!csr || approving) return;
      approving = true;
      void kubectl(['certificate', 'approve', csr.metadata.name]).finally(() => { approving = false; });
    }, 500);
    let streamed = '';
    follower = spawn('kubectl', ['--kubeconfig', admin, 'logs', '-f', 'hello'], { stdio: ['ignore', 'pipe', 'pipe'] });
    follower.stdout!.on('data', (d) => { streamed += d; });
    await waitFor(async () => /tick/.test(streamed), WAIT, 'kubectl logs -f streaming');

    await waitFor(async () => (await pems('kubelet-client')).length >= 3, WAIT, 'two client certificate renewals');
    const clientSerial = await currentSerial('kubelet-client');
    await waitFor(async () => (await currentSerial('kubelet-server')) !== servingBefore, WAIT, 'the serving certificate rotated');
    const servingAfter = await currentSerial('kubelet-server');
    await waitFor(async () => { const c = await servedCertificate(kubelet.port); return c instanceof X509Certificate && c.serialNumber === servingAfter; }, WAIT, '10250 serving the new certificate');

    // The follower opened before the rotation still streams.
    const atRotation = streamed.length;
    await waitFor(async () => streamed.length > atRotation + 20, 15_000, 'more lines on the open kubectl logs -f');
    assert.equal(follower.exitCode, null, 'kubectl logs -f still running');

    // The lease is renewed with the newest client certificate (the double checks expiry per request).
    const since = api.requests.length;
    await waitFor(async () => api.requests.slice(since).some((r) => r.method === 'PUT' && r.path.includes(`/leases/${NODE}`) && r.code === 200 && r.certSerial === clientSerial), 30_000, 'a lease renewal with the new certificate');
    // No request was refused all along (an expired certificate on a kept connection would be).
    assert.deepEqual(api.requests.slice(start).filter((r) => r.code === 401).map((r) => `${r.method} ${r.path}`), []);

    // Pods keep syncing: a new pod runs, and the first is still Running.
    await kubectl(['run', 'after-rotation', '--image', rt.images.busybox, '--restart=Never', '--', 'sh', '-c', 'trap "exit 0" TERM; sleep 3600']);
    await waitFor(async () => (await kubectl(['get', 'pod', 'after-rotation', '-o', 'jsonpath={.status.phase}'])) === 'Running', WAIT, 'a new pod Running');
    assert.equal(await kubectl(['get', 'pod', 'hello', '-o', 'jsonpath={.status.phase}']), 'Running');
    const metrics = await kubectl(['get', '--raw', `/api/v1/nodes/${NODE}/proxy/metrics`]);
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
    assert.ok(value('kubelet_certificate_manager_client_ttl_seconds') > 0, 'client ttl');
    assert.ok(value('kubelet_certificate_manager_server_ttl_seconds') > 0, 'server ttl');
    assert.equal(value('kubelet_certificate_manager_client_expiration_renew_errors'), 0);
    assert.ok(value('kubelet_certificate_manager_server_rotation_seconds_count') >= 1);
    assert.match(metrics, /^kubelet_certificate_manager_server_rotation_seconds_bucket\{le="60"\} [1-9]/m);
  });
});
