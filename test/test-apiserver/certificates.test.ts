// The test API server's certificates API: CertificateSigningRequests approved or denied with the
// real kubectl, the signer's certificates (lifetime, usages, subject) accepted for
// authentication, and bootstrap-token authentication from kube-system Secrets.

import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { call } from './client.js';

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

/** A P-256 key and a CSR for CN/O (and SANs) made with openssl. */
function makeCsr(dir: string, cn: string, orgs: string[], sans: string[] = []): { key: string; csr: string } {
  const subj = `/CN=${cn}` + orgs.map((o) => `/O=${o}`).join('');
  const args = ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'r.csr'), '-subj', subj];
  if (sans.length) args.push('-addext', `subjectAltName=${sans.join(',')}`);
  execFileSync('openssl', args, { stdio: 'ignore' });
  return { key: readFileSync(join(dir, 'k.pem'), 'utf8'), csr: readFileSync(join(dir, 'r.csr'), 'utf8') };
}

const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

function csrBody(name: string, csr: string, signerName: string, usages: string[], expirationSeconds?: number): Record<string, unknown> {
  return {
    apiVersion: 'certificates.k8s.io/v1', kind: 'CertificateSigningRequest', metadata: { name },
    spec: { request: Buffer.from(csr).toString('base64'), signerName, usages, ...(expirationSeconds ? { expirationSeconds } : {}) },
  };
}

interface Run { code: number; stdout: string; stderr: string }

describe('test API server: certificates API', () => {
  let s: TestApiServer;
  let dir: string;
  let kubeconfig: string;
  let kubectlBin: string;
  const admin = { cert: '', key: '' };
  const bootstrapToken = 'abcdef.0123456789abcdef';

  const kubectl = (args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(kubectlBin, ['--kubeconfig', kubeconfig, ...args], { timeout: 20_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      });
    });

  before(async () => {
    kubectlBin = findKubectl();
    s = new TestApiServer({ tls: true, csrMinExpirationSeconds: 1 });
    await s.start();
    dir = mkdtempSync(join(tmpdir(), 'kts-csr-'));
    kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, s.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'));
    Object.assign(admin, s.issueClientCert('kubernetes-admin', ['system:masters']));
    s.create('secrets', 'kube-system', {
      metadata: { name: 'bootstrap-token-abcdef' }, type: 'bootstrap.kubernetes.io/token',
      stringData: { 'token-id': 'abcdef', 'token-secret': '0123456789abcdef', 'usage-bootstrap-authentication': 'true', 'usage-bootstrap-signing': 'true', 'auth-extra-groups': 'system:bootstrappers:kubeadm:default-node-token' },
    });
  });
  after(async () => {
    await s?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a bootstrap token authenticates as system:bootstrap:<id> in system:bootstrappers; a wrong secret or a missing Secret is 401', async () => {
    const ok = await call(s, 'GET', '/api/v1/namespaces', { token: bootstrapToken });
    assert.equal(ok.code, 200);
    assert.equal(s.requests.at(-1)?.user, 'system:bootstrap:abcdef');
    assert.equal((await call(s, 'GET', '/api/v1/namespaces', { token: 'abcdef.0123456789abcdee' })).code, 401);
    assert.equal((await call(s, 'GET', '/api/v1/namespaces', { token: 'zzzzzz.0123456789abcdef' })).code, 401);
  });

  it('a CSR created with a bootstrap token records the requester; kubectl certificate approve gets it issued, and the certificate authenticates as CN/O', async () => {
    const { key, csr } = makeCsr(dir, 'system:node:n1', ['system:nodes']);
    const created = await call(s, 'POST', CSR_PATH, { token: bootstrapToken, body: csrBody('node-csr-n1', csr, 'kubernetes.io/kube-apiserver-client-kubelet', ['digital signature', 'client auth'], 3600) });
    assert.equal(created.code, 201, JSON.stringify(created.body));
    assert.equal(created.body.spec.username, 'system:bootstrap:abcdef');
    assert.deepEqual(created.body.spec.groups, ['system:bootstrappers', 'system:bootstrappers:kubeadm:default-node-token', 'system:authenticated']);
    assert.equal(created.body.status.certificate, undefined);

    const pending = await kubectl(['get', 'csr']);
    assert.equal(pending.code, 0, pending.stderr);
    assert.match(pending.stdout, /node-csr-n1\s+\S+\s+kubernetes\.io\/kube-apiserver-client-kubelet\s+system:bootstrap:abcdef\s+60m\s+Pending/);

    const approve = await kubectl(['certificate', 'approve', 'node-csr-n1']);
    assert.equal(approve.code, 0, approve.stderr);
    const issued = await s.waitFor('the certificate', () => s.get('certificatesigningrequests', undefined, 'node-csr-n1', 'certificates.k8s.io')?.status?.certificate);
    const csrObj = s.get('certificatesigningrequests', undefined, 'node-csr-n1', 'certificates.k8s.io')!;
    assert.deepEqual(csrObj.status.conditions.map((c: any) => [c.type, c.status, c.reason]), [['Approved', 'True', 'KubectlApprove']]);
    assert.match((await kubectl(['get', 'csr', 'node-csr-n1'])).stdout, /Approved,Issued/);

    const pem = Buffer.from(issued, 'base64').toString('utf8');
    const x = new X509Certificate(pem);
    assert.match(x.subject, /CN=system:node:n1/);
    assert.match(x.subject, /O=system:nodes/);
    assert.ok(x.checkIssued(new X509Certificate(s.ca!.cert)), 'signed by the server CA');
    assert.equal((Date.parse(x.validTo) - Date.parse(x.validFrom)) / 1000, 3600);
    assert.deepEqual(x.keyUsage, ['1.3.6.1.5.5.7.3.2']);

    const asNode = await call(s, 'GET', '/api/v1/namespaces', { token: null, cert: { cert: pem, key } });
    assert.equal(asNode.code, 200);
    assert.equal(s.requests.at(-1)?.user, 'system:node:n1');
  });

  it('kubectl certificate deny: Denied and never issued; Approved next to Denied is 422', async () => {
    const { csr } = makeCsr(dir, 'system:node:n2', ['system:nodes']);
    assert.equal((await call(s, 'POST', CSR_PATH, { cert: admin, token: null, body: csrBody('node-csr-n2', csr, 'kubernetes.io/kube-apiserver-client-kubelet', ['digital signature', 'client auth']) })).code, 201);
    const deny = await kubectl(['certificate', 'deny', 'node-csr-n2']);
    assert.equal(deny.code, 0, deny.stderr);
    const o = s.get('certificatesigningrequests', undefined, 'node-csr-n2', 'certificates.k8s.io')!;
    assert.deepEqual(o.status.conditions.map((c: any) => [c.type, c.reason]), [['Denied', 'KubectlDeny']]);
    // an Approved condition next to Denied is invalid at the API, whatever the client
    const both = await call(s, 'PUT', `${CSR_PATH}/node-csr-n2/approval`, {
      cert: admin, token: null,
      body: { ...o, status: { conditions: [...o.status.conditions, { type: 'Approved', status: 'True', reason: 'R' }] } },
    });
    assert.equal(both.code, 422);
    assert.match(both.body.message, /Approved and Denied conditions are mutually exclusive/);
    await new Promise((r) => setImmediate(r));
    assert.equal(s.get('certificatesigningrequests', undefined, 'node-csr-n2', 'certificates.k8s.io')!.status.certificate, undefined);
  });

  it('a kubelet-serving request gets serverAuth with the SANs it asked for', async () => {
    const { csr } = makeCsr(dir, 'system:node:n1', ['system:nodes'], ['DNS:n1', 'IP:127.0.0.1']);
    assert.equal((await call(s, 'POST', CSR_PATH, { cert: admin, token: null, body: csrBody('serving-n1', csr, 'kubernetes.io/kubelet-serving', ['digital signature', 'server auth'], 600) })).code, 201);
    assert.equal((await kubectl(['certificate', 'approve', 'serving-n1'])).code, 0);
    const issued = await s.waitFor('the serving certificate', () => s.get('certificatesigningrequests', undefined, 'serving-n1', 'certificates.k8s.io')?.status?.certificate);
    const x = new X509Certificate(Buffer.from(issued, 'base64'));
    assert.deepEqual(x.keyUsage, ['1.3.6.1.5.5.7.3.1']);
    assert.match(x.subjectAltName ?? '', /DNS:n1/);
    assert.match(x.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
  });

  it('bad requests are 422 naming the field: no PEM request, unknown usage, too short a lifetime', async () => {
    const strict = new TestApiServer({ tls: true });
    await strict.start();
    try {
      const a = strict.issueClientCert('admin', ['system:masters']);
      const { csr } = makeCsr(dir, 'x', []);
      const short = await call(strict, 'POST', CSR_PATH, { cert: a, token: null, body: csrBody('short', csr, 'kubernetes.io/kube-apiserver-client', ['client auth'], 599) });
      assert.equal(short.code, 422);
      assert.match(short.body.message, /spec\.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds \(10 minutes\)/);
      const notPem = await call(strict, 'POST', CSR_PATH, { cert: a, token: null, body: csrBody('bad', 'hello', 'kubernetes.io/kube-apiserver-client', ['client auth']) });
      assert.equal(notPem.code, 422);
      assert.match(notPem.body.message, /spec\.request: .*PEM block type must be CERTIFICATE REQUEST/);
      const usage = await call(strict, 'POST', CSR_PATH, { cert: a, token: null, body: csrBody('bad', csr, 'kubernetes.io/kube-apiserver-client', ['flying']) });
      assert.equal(usage.code, 422);
      assert.match(usage.body.message, /spec\.usages\[0\]: Unsupported value: "flying"/);
    } finally {
      await strict.stop();
    }
  });

  it('a short lifetime allowed for tests is honoured, and the expired certificate is then refused', async () => {
    const { key, csr } = makeCsr(dir, 'system:node:n3', ['system:nodes']);
    assert.equal((await call(s, 'POST', CSR_PATH, { cert: admin, token: null, body: csrBody('short-n3', csr, 'kubernetes.io/kube-apiserver-client-kubelet', ['digital signature', 'client auth'], 2) })).code, 201);
    assert.equal((await kubectl(['certificate', 'approve', 'short-n3'])).code, 0);
    const issued = await s.waitFor('the short certificate', () => s.get('certificatesigningrequests', undefined, 'short-n3', 'certificates.k8s.io')?.status?.certificate);
    const pem = Buffer.from(issued, 'base64').toString('utf8');
    const x = new X509Certificate(pem);
    assert.equal((Date.parse(x.validTo) - Date.parse(x.validFrom)) / 1000, 2);
    // wait (wall clock: TLS checks validity against it) until the certificate has expired
    while (Date.now() <= Date.parse(x.validTo) + 1000) await new Promise((r) => setTimeout(r, 200));
    assert.equal((await call(s, 'GET', '/api/v1/namespaces', { token: null, cert: { cert: pem, key } })).code, 401);
  });
});
