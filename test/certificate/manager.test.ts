// The certificate managers against the test API server (real HTTPS, real CSRs, its signer with
// certificates that live seconds): the client certificate renewed twice with the API client
// switched each time, an API server away at the renewal (errors counted, the old pair kept, the
// renewal done once it is back), a denied renewal (kubectl certificate deny), and the serving
// certificate request (signer, subject, usages, the node's names and addresses).

import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { requestCertificate, CLIENT_SIGNER, CLIENT_USAGES } from '../../src/certificate/bootstrap.js';
import { newKey } from '../../src/certificate/csr.js';
import { clientCertificates, servingCertificates } from '../../src/certificate/kubelet.js';
import { certificateSatisfies } from '../../src/certificate/manager.js';
import type { NodeAddress } from '../../src/nodestatus/types.js';
import { RestClient } from '../../src/client/rest.js';
import { Registry } from '../../src/metrics/registry.js';
import { realClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';

const run = promisify(execFile);
const NODE = 'n1';
const TUNING = { retryInitialMs: 300, retrySteps: 3, retryPollMs: 500, csrTimeoutMs: 20_000 };

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('certificate managers (rotateCertificates, serverTLSBootstrap)', () => {
  let api: TestApiServer;
  let dir: string;
  let admin: string;
  const lines: string[] = [];
  const log = createLogger();

  before(async () => {
    setLogSink((l) => lines.push(l));
    // Certificates live 4 s: renewed at 2.8-3.6 s. A double setting, far below upstream's 10 minutes.
    api = new TestApiServer({ tls: true, csrDefaultDurationSeconds: 4, csrMinExpirationSeconds: 1, csrAutoApproveNodeClient: true });
    await api.start();
    dir = await mkdtemp(join(tmpdir(), 'kts-certmgr-'));
    admin = join(dir, 'admin.kubeconfig');
    await writeFile(admin, api.kubeconfigFor('kubernetes-admin', ['system:masters'], 'cert'), { mode: 0o600 });
  });
  after(async () => {
    setLogSink((l) => process.stderr.write(`${l}\n`));
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** An API client of node n1 whose certificate (signed through a CSR) lives `seconds`. */
  async function nodeClient(seconds: number): Promise<RestClient> {
    const first = api.issueClientCert(`system:node:${NODE}`, ['system:nodes']);
    const boot = new RestClient({ source: 'test', server: api.url, caData: api.ca!.cert, insecureSkipTLSVerify: false, certData: first.cert, keyData: first.key });
    const key = newKey();
    const cert = await requestCertificate(boot, {
      subject: { commonName: `system:node:${NODE}`, organizations: ['system:nodes'] }, signerName: CLIENT_SIGNER, usages: CLIENT_USAGES, key,
      expirationSeconds: seconds, timeoutMs: 10_000, clock: realClock, log,
    });
    boot.close();
    return new RestClient({ source: 'node.kubeconfig', server: api.url, caData: api.ca!.cert, insecureSkipTLSVerify: false, certData: cert, keyData: key.pem }, { maxRetries: 0, timeoutMs: 5_000 });
  }

  const csrCount = () => api.list('certificatesigningrequests', undefined, 'certificates.k8s.io').length;
  const pems = async (d: string, prefix: string) => (await readdir(d)).filter((f) => f.startsWith(`${prefix}-`) && f !== `${prefix}-current.pem`).sort();

  it('renews the client certificate twice before it expires: new key each time, files as upstream, the API client switched', async () => {
    const certDir = join(dir, 'pki-renew');
    const client = await nodeClient(4);
    const metrics = new Registry();
    const certs = clientCertificates({ apiClient: client, nodeName: NODE, certDirectory: certDir, log, tuning: TUNING })!;
    certs.registerMetrics(metrics);
    const seen = [client.config.certData!];
    certs.manager.start();
    try {
      for (let i = 0; i < 2; i++) {
        await until(`renewal ${i + 1}`, () => client.config.certData !== seen.at(-1));
        seen.push(client.config.certData!);
        // The API client works with it, as node n1.
        await client.get(`/api/v1/namespaces`);
        assert.equal(api.requests.at(-1)?.user, `system:node:${NODE}`);
      }
      const keys = seen.map((c) => new X509Certificate(c).publicKey.export({ type: 'spki', format: 'der' }).toString('hex'));
      assert.equal(new Set(keys).size, 3, 'a fresh key for every renewal');
      const files = await pems(certDir, 'kubelet-client');
      assert.ok(files.length >= 2, JSON.stringify(files));
      for (const f of files) assert.match(f, /^kubelet-client-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d\.pem$/);
      assert.equal(await readlink(join(certDir, 'kubelet-client-current.pem')), files.at(-1));
      // Each renewal was asked for before the certificate it replaced expired.
      const renewals = api.list('certificatesigningrequests', undefined, 'certificates.k8s.io').filter((o) => o.metadata.name.startsWith('csr-'));
      assert.ok(renewals.length >= 2);
      for (const r of renewals) {
        assert.equal(r.spec.signerName, CLIENT_SIGNER);
        assert.deepEqual(r.spec.usages, CLIENT_USAGES);
        assert.equal(r.spec.username, `system:node:${NODE}`);
      }
      const text = metrics.metricsText();
      const ttl = Number(/^kubelet_certificate_manager_client_ttl_seconds (\S+)$/m.exec(text)?.[1]);
      assert.ok(ttl > 0 && ttl <= 4, text);
      assert.match(text, /^kubelet_certificate_manager_client_expiration_renew_errors 0$/m);
    } finally {
      await certs.manager.stop();
      client.close();
    }
  });

  it('certificateSatisfies: subject, organizations, DNS names and IPs (any IPv6 spelling) must all match', () => {
    const pem = api.ca!.serving(['127.0.0.1', '::1', 'n1.example']).cert;
    const x = new X509Certificate(pem);
    const cn = /CN=([^\n]+)/.exec(x.subject)![1]!;
    const orgs = [...x.subject.matchAll(/^O=(.*)$/gm)].map((m) => m[1]!);
    const base = { commonName: cn, organizations: orgs, dnsNames: ['n1.example'], ipAddresses: ['127.0.0.1', '0:0:0:0:0:0:0:1'] };
    assert.ok(certificateSatisfies(pem, base), `${x.subject} ${x.subjectAltName}`);
    assert.ok(!certificateSatisfies(pem, { ...base, ipAddresses: ['127.0.0.1'] }));
    assert.ok(!certificateSatisfies(pem, { ...base, dnsNames: ['n1.example', 'other'] }));
    assert.ok(!certificateSatisfies(pem, { ...base, commonName: 'system:node:other' }));
  });

  it('a certificate valid for a year is not renewed now (waits of months are taken in steps, not as one overflowing timer)', async () => {
    const certDir = join(dir, 'pki-year');
    const client = await nodeClient(365 * 86400);
    const year = { cert: client.config.certData };
    const certs = clientCertificates({ apiClient: client, nodeName: NODE, certDirectory: certDir, log, tuning: TUNING })!;
    const requests = csrCount();
    certs.manager.start();
    await new Promise((r) => setTimeout(r, 1500));
    await certs.manager.stop();
    client.close();
    assert.equal(csrCount(), requests, 'no renewal requested');
    assert.equal(client.config.certData, year.cert);
    assert.ok(lines.some((l) => l.includes('Waiting to rotate the certificate') && l.includes('certificate="client"')));
  });

  it('an API server away at renewal time: errors counted, the old certificate kept, renewed once it is back', async () => {
    const certDir = join(dir, 'pki-away');
    // 10 s: renewed at 7-9 s, so it is still valid when the API server is back (an expired one could not ask).
    const client = await nodeClient(10);
    const metrics = new Registry();
    const certs = clientCertificates({ apiClient: client, nodeName: NODE, certDirectory: certDir, log, tuning: TUNING })!;
    certs.registerMetrics(metrics);
    const before = client.config.certData;
    await api.stop();
    certs.manager.start();
    try {
      const errors = () => Number(/^kubelet_certificate_manager_client_expiration_renew_errors (\S+)$/m.exec(metrics.metricsText())?.[1]);
      await until('two renew errors', () => errors() >= 2, 15_000);
      assert.equal(client.config.certData, before, 'the current certificate is kept');
      assert.ok(lines.some((l) => l.includes('Failed while requesting a signed certificate from the control plane') && l.includes('certificate="client"')));
      await api.restart();
      await until('the renewal after the API server came back', () => client.config.certData !== before, 20_000);
      await client.get('/api/v1/namespaces');
      assert.equal(api.requests.at(-1)?.user, `system:node:${NODE}`);
    } finally {
      await certs.manager.stop();
      client.close();
      await api.start().catch(() => undefined);
    }
  });

  it('a denied serving certificate request (kubectl certificate deny) is a clear error; the next is issued once approved; a new node address renews it at once; stop ends a pending wait', async () => {
    const certDir = join(dir, 'pki-serving');
    const client = await nodeClient(3600);
    const metrics = new Registry();
    const served: string[] = [];
    const addresses: NodeAddress[] = [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: 'n1.example' }];
    const certs = servingCertificates({
      config: { tlsCertFile: '', tlsPrivateKeyFile: '' }, apiClient: client, nodeName: NODE, certDirectory: certDir,
      addresses: () => addresses, log, tuning: TUNING,
    });
    certs.registerMetrics(metrics);
    certs.updates((p) => served.push(p.certPem));
    assert.equal(certs.manager.current(), undefined);
    assert.match(metrics.metricsText(), /^kubelet_certificate_manager_server_ttl_seconds \+Inf$/m);
    certs.manager.start();
    const kubectl = (args: string[]) => run('kubectl', ['--kubeconfig', admin, ...args], { timeout: 20_000 });
    const pending = () => api.list('certificatesigningrequests', undefined, 'certificates.k8s.io')
      .find((o) => o.spec.signerName === 'kubernetes.io/kubelet-serving' && !o.status?.conditions?.length);
    try {
      const first = await until('the serving request', pending);
      assert.equal(first.spec.username, `system:node:${NODE}`);
      assert.deepEqual(first.spec.usages, ['digital signature', 'server auth']);
      await kubectl(['certificate', 'deny', first.metadata.name]);
      await until('the denial reported', () => lines.some((l) => l.includes(`certificate signing request ${first.metadata.name} is denied`)));
      assert.match(metrics.metricsText(), /^kubelet_server_expiration_renew_errors [1-9]/m);
      assert.equal(served.length, 0);
      const second = await until('the next serving request', pending);
      await kubectl(['certificate', 'approve', second.metadata.name]);
      await until('the serving certificate', () => served.length === 1);
      const x = new X509Certificate(served[0]!);
      assert.equal(x.subject, 'O=system:nodes\nCN=system:node:n1');
      assert.match(x.subjectAltName ?? '', /DNS:n1\.example/);
      assert.match(x.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
      assert.ok(x.checkIssued(new X509Certificate(api.ca!.cert)));
      assert.equal(await readlink(join(certDir, 'kubelet-server-current.pem')), (await pems(certDir, 'kubelet-server'))[0]);
      const ttl = Number(/^kubelet_certificate_manager_server_ttl_seconds (\S+)$/m.exec(metrics.metricsText())?.[1]);
      assert.ok(ttl > 0 && ttl <= 4, String(ttl));
      // A new address: renewed at once (checked every second), before the 70-90% deadline.
      addresses.push({ type: 'InternalIP', address: '::1' });
      await until('the template change noticed', () => lines.some((l) => l.includes('Certificate template changed, rotating') && l.includes('certificate="server"')), 3000);
      const third = await until('the request for the new names', pending);
      const text = execFileSync('openssl', ['req', '-noout', '-text'], { input: Buffer.from(third.spec.request, 'base64') }).toString();
      assert.match(text, /IP Address:0:0:0:0:0:0:0:1/);
    } finally {
      // stop() ends the wait for the request just sent at once (no 20 s CSR timeout).
      const t0 = Date.now();
      await certs.manager.stop();
      assert.ok(Date.now() - t0 < 5000, 'stop waited for the pending request');
      client.close();
    }
  });
});
