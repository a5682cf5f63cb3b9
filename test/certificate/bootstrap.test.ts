// TLS bootstrap against the test API server: a node with only a bootstrap token gets its
// client certificate after the real `kubectl certificate approve`, and a denied request is a
// clear error.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { accessSync, constants, existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { bootstrapClientCertificate, CLIENT_SIGNER } from '../../src/certificate/bootstrap.js';
import { createCsrDer, csrPem, newKey } from '../../src/certificate/csr.js';
import { loadKubeconfig, RestClient } from '../../src/client/index.js';
import type { Logger } from '../../src/util/log.js';
import { kubeconfig as makeKubeconfig } from '../fixtures/test-apiserver/kubeconfig.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';

const log: Logger = { info() {}, warn() {}, error() {}, v: () => ({ info() {} }), with: () => log };

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

describe('TLS bootstrap (--bootstrap-kubeconfig)', () => {
  let s: TestApiServer;
  let dir: string;
  let adminKubeconfig: string;
  let bootstrapKubeconfig: string;
  let kubectlBin: string;

  const kubectl = (args: string[]): Promise<{ code: number; stderr: string }> =>
    new Promise((resolve) => {
      execFile(kubectlBin, ['--kubeconfig', adminKubeconfig, ...args], { timeout: 20_000 }, (err, _out, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr });
      });
    });

  const csrs = () => s.list('certificatesigningrequests', undefined, 'certificates.k8s.io');
  /** The first CSR not among `seen` (names taken before a bootstrap starts). */
  const newCsr = (what: string, seen: Set<string>) => s.waitFor(what, () => csrs().find((c) => !seen.has(c.metadata.name)));
  const names = () => new Set(csrs().map((c) => c.metadata.name as string));

  before(async () => {
    kubectlBin = findKubectl();
    s = new TestApiServer({ tls: true, csrMinExpirationSeconds: 1 });
    await s.start();
    dir = mkdtempSync(join(tmpdir(), 'kts-bootstrap-'));
    adminKubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(adminKubeconfig, s.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'));
    s.create('secrets', 'kube-system', {
      metadata: { name: 'bootstrap-token-abcdef' }, type: 'bootstrap.kubernetes.io/token',
      stringData: { 'token-id': 'abcdef', 'token-secret': '0123456789abcdef', 'usage-bootstrap-authentication': 'true' },
    });
    bootstrapKubeconfig = join(dir, 'bootstrap-kubelet.conf');
    writeFileSync(bootstrapKubeconfig, makeKubeconfig(s.url, s.ca!.cert, 'tls-bootstrap-token-user', { token: 'abcdef.0123456789abcdef' }));
  });
  after(async () => {
    await s?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('joins with only a bootstrap kubeconfig: CSR as upstream sends it, kubectl certificate approve, current.pem and the kubeconfig written, the node authenticates as itself', async () => {
    const kubeconfig = join(dir, 'n1', 'kubelet.conf');
    const certDirectory = join(dir, 'n1', 'pki');
    const seen = names();
    const done = bootstrapClientCertificate({ kubeconfig, bootstrapKubeconfig, certDirectory, nodeName: 'n1', log });
    const csr = await newCsr('the CSR', seen);
    assert.equal(csr.spec.username, 'system:bootstrap:abcdef');
    assert.match(csr.metadata.name, /^node-csr-/);
    assert.equal(csr.spec.signerName, CLIENT_SIGNER);
    assert.deepEqual(csr.spec.usages, ['digital signature', 'client auth']);
    assert.ok(csr.spec.groups.includes('system:bootstrappers'));
    const approve = await kubectl(['certificate', 'approve', csr.metadata.name]);
    assert.equal(approve.code, 0, approve.stderr);
    await done;

    const current = join(certDirectory, 'kubelet-client-current.pem');
    assert.ok(lstatSync(current).isSymbolicLink());
    assert.match(readlinkSync(current), /^kubelet-client-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}\.pem$/);
    assert.equal(statSync(current).mode & 0o777, 0o600);
    const pem = readFileSync(current, 'utf8');
    assert.match(pem, /-----BEGIN CERTIFICATE-----[\s\S]+-----BEGIN EC PRIVATE KEY-----/);
    const x = new X509Certificate(pem);
    assert.match(x.subject, /CN=system:node:n1/);
    assert.match(x.subject, /O=system:nodes/);
    assert.equal(x.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');

    const written = parseYaml(readFileSync(kubeconfig, 'utf8'));
    assert.deepEqual(written.users[0].user, { 'client-certificate': current, 'client-key': current });
    assert.equal(written.clusters[0].cluster.server, s.url);
    const client = new RestClient(loadKubeconfig(kubeconfig), { maxRetries: 0 });
    await client.get('/api/v1/namespaces');
    client.close();
    assert.equal(s.requests.at(-1)?.user, 'system:node:n1');

    // a second start with that kubeconfig sends no new request
    const before = csrs().length;
    await bootstrapClientCertificate({ kubeconfig, bootstrapKubeconfig, certDirectory, nodeName: 'n1', log });
    assert.equal(csrs().length, before);
  });

  it('a denied CSR is a clear error naming it and its reason; no kubeconfig is written and the API server is untouched', async () => {
    const kubeconfig = join(dir, 'n2', 'kubelet.conf');
    const certDirectory = join(dir, 'n2', 'pki');
    const seen = names();
    const done = bootstrapClientCertificate({ kubeconfig, bootstrapKubeconfig, certDirectory, nodeName: 'n2', log });
    const failed = assert.rejects(done, (err: Error) => {
      assert.match(err.message, /^certificate signing request node-csr-\S+ is denied, reason: KubectlDeny, message: This CSR was denied by kubectl certificate deny\.$/);
      return true;
    });
    const csr = await newCsr('the CSR of n2', seen);
    assert.equal((await kubectl(['certificate', 'deny', csr.metadata.name])).code, 0);
    await failed;
    assert.equal(existsSync(kubeconfig), false);
    assert.equal(existsSync(join(certDirectory, 'kubelet-client-current.pem')), false);
    assert.equal((await kubectl(['get', 'csr'])).code, 0);
  });

  it('a CSR never approved ends at the deadline with an error naming it', async () => {
    const kubeconfig = join(dir, 'n3', 'kubelet.conf');
    await assert.rejects(
      bootstrapClientCertificate({ kubeconfig, bootstrapKubeconfig, certDirectory: join(dir, 'n3', 'pki'), nodeName: 'n3', log, timeoutMs: 300 }),
      /timed out after 0s waiting for certificate signing request node-csr-\S+ to be approved and issued/,
    );
    assert.equal(existsSync(kubeconfig), false);
  });

  it('an expired client certificate in --kubeconfig is replaced through the bootstrap kubeconfig', async () => {
    const kubeconfig = join(dir, 'n4.conf');
    // a certificate of the double's CA that lives 1 s (the double's floor is lowered for this)
    const key = newKey();
    const der = createCsrDer({ commonName: 'system:node:n4', organizations: ['system:nodes'] }, key.privateKey, key.publicKey);
    s.create('certificatesigningrequests', undefined, {
      metadata: { name: 'short-n4' },
      spec: { request: Buffer.from(csrPem(der)).toString('base64'), signerName: CLIENT_SIGNER, usages: ['digital signature', 'client auth'], expirationSeconds: 1 },
    }, 'certificates.k8s.io');
    assert.equal((await kubectl(['certificate', 'approve', 'short-n4'])).code, 0);
    const issued = await s.waitFor('the short certificate', () => s.get('certificatesigningrequests', undefined, 'short-n4', 'certificates.k8s.io')?.status?.certificate);
    const cert = Buffer.from(issued, 'base64').toString('utf8');
    writeFileSync(kubeconfig, makeKubeconfig(s.url, s.ca!.cert, 'n4', { cert, key: key.pem }));
    const validTo = Date.parse(new X509Certificate(cert).validTo);
    while (Date.now() <= validTo + 500) await new Promise((r) => setTimeout(r, 100));

    const seen = names();
    const done = bootstrapClientCertificate({ kubeconfig, bootstrapKubeconfig, certDirectory: join(dir, 'n4', 'pki'), nodeName: 'n4', log });
    const csr = await newCsr('the CSR of n4', seen);
    assert.equal((await kubectl(['certificate', 'approve', csr.metadata.name])).code, 0);
    await done;
    const client = new RestClient(loadKubeconfig(kubeconfig), { maxRetries: 0 });
    await client.get('/api/v1/namespaces');
    client.close();
    assert.equal(s.requests.at(-1)?.user, 'system:node:n4');
  });
});
