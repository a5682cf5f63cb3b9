// The CIS Kubernetes Benchmark's kubelet section (4.2) as README.md's table states it, checked on
// real kubelet-ts processes on real containerd, joined to the test API server (a test double of
// kube-apiserver): started with the example config file (examples/kubelet-config.yaml), with
// flags only, and with flags only set as the table says to satisfy each check. Each row is
// asserted from what the process serves: /configz, the secure port answering an anonymous peer
// (401 or 200), a client certificate with and without --client-ca-file, the read-only port open
// or closed, the cipher suites a TLS 1.2 client can negotiate, the serving certificate, and the
// start-up warnings naming insecure and not implemented settings.
//
// Without --hostname-override (CIS 4.2.7): the node is named after this machine. The flags-only
// runs use the read-only port's default, 10255, on 127.0.0.1 (--address 127.0.0.1 everywhere:
// the address is no CIS row, and nothing listens beyond loopback).

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, it } from 'node:test';

import { CriClient } from '../../src/runtime/cri-client.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { freePort, waitFor } from '../fixtures/kubelet-process.js';
import { ensureRuntime, repoRoot, type TestRuntime } from '../fixtures/runtime.js';
import { ensureTestProcfs } from '../fixtures/procfs.js';

const WAIT = 60_000;
const NODE = hostname().toLowerCase();
const LEGACY_READ_ONLY_PORT = 10255;
/** CIS 4.2.12's strong suites that Go does not count insecure (its TLS_RSA_* ones Go does). */
const CIS_CIPHERS = [
  'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305',
  'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305', 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
];

interface Running {
  child: ChildProcess;
  port: number;
  rootDir: string;
  logs(): string;
  stop(): Promise<void>;
}

interface Answer { status: number; body: string }

/** A client certificate, or a bearer token (checked by TokenReview), or nothing (anonymous). */
type Credentials = { cert: string; key: string } | { token: string } | undefined;

function secure(port: number, method: string, path: string, creds?: Credentials): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const auth = creds && 'token' in creds ? { headers: { authorization: `Bearer ${creds.token}` } } : (creds ?? {});
    const req = httpsRequest({ host: '127.0.0.1', port, method, path, rejectUnauthorized: false, agent: false, ...auth }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** TLS 1.2 with only `cipher` offered: the suite negotiated, or undefined when refused. */
function negotiate(port: number, cipher: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const s = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false, maxVersion: 'TLSv1.2', ciphers: cipher }, () => {
      resolve(s.getCipher().standardName);
      s.destroy();
    });
    s.on('error', () => resolve(undefined));
  });
}

/** The leaf certificate the secure port serves. */
function servedCert(port: number): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(new X509Certificate(s.getPeerCertificate().raw));
      s.destroy();
    });
    s.on('error', reject);
  });
}

/** `file` in the pod's cgroup directory (cgroup v1 pids hierarchy, or v2), when it exists. */
function findPodCgroupFile(uid: string, file: string): string | undefined {
  for (const root of ['/sys/fs/cgroup/pids/kubepods', '/sys/fs/cgroup/kubepods']) {
    for (const dir of [root, ...['besteffort', 'burstable'].map((q) => join(root, q))]) {
      const p = join(dir, `pod${uid}`, file);
      if (existsSync(p)) return p;
    }
  }
  return undefined;
}

async function listSandboxes(rt: TestRuntime, label: string): Promise<number> {
  const cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
  try {
    return (await cri.listPodSandbox({ label_selector: { test: label } })).length;
  } finally {
    cri.close();
  }
}

/** true when something accepts TCP connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
  });
}

async function configz(port: number, creds: Credentials): Promise<{ kubeletconfig: Record<string, any>; kubeletconfigEnforcement: Record<string, string[]> }> {
  const r = await secure(port, 'GET', '/configz', creds);
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body);
}

describe('CIS Kubernetes Benchmark 4.2 (kubelet): the README table, on real processes', { timeout: 600_000 }, () => {
  let rt: TestRuntime;
  let api: TestApiServer;
  let dir: string;
  let kubeconfig: string;
  let caFile: string;
  /** The API server's client certificate for kubelets (CN kube-apiserver-kubelet-client, O system:masters). */
  let apiClient: { cert: string; key: string };
  /** A bearer token the test API server's TokenReview knows. */
  const reader = { token: 'cis-reader-token' };
  const running: Running[] = [];

  async function start(args: string[], healthzPort: number): Promise<Running> {
    const rootDir = await mkdtemp(join(tmpdir(), 'kts-cis-root-'));
    const port = await freePort();
    const argv = [join(repoRoot(), 'bin', 'kubelet-ts.mjs'), '--container-runtime-endpoint', rt.endpoint, '--root-dir', rootDir,
      '--kubeconfig', kubeconfig, '--address', '127.0.0.1', '--port', String(port), ...args];
    ensureTestProcfs();
    const child = spawn(process.execPath, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let logs = '';
    child.stderr!.on('data', (d) => { logs += d; });
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const proc: Running = {
      child, port, rootDir, logs: () => logs,
      async stop() {
        if (child.exitCode === null) {
          child.kill('SIGTERM');
          await exited;
        }
        await rm(rootDir, { recursive: true, force: true });
      },
    };
    running.push(proc);
    await waitFor(async () => {
      if (child.exitCode !== null) return true;
      const healthz = await fetch(`http://127.0.0.1:${healthzPort}/healthz`).then((r) => r.ok, () => false);
      return healthz && (await secure(port, 'GET', '/healthz', apiClient).then((r) => r.status > 0, () => false));
    }, WAIT, 'kubelet-ts to serve');
    if (child.exitCode !== null) throw new Error(`kubelet-ts exited with ${child.exitCode}:\n${logs}`);
    return proc;
  }

  before(async () => {
    rt = await ensureRuntime();
    dir = await mkdtemp(join(tmpdir(), 'kts-cis-'));
    api = new TestApiServer({ tls: true });
    await api.start();
    kubeconfig = join(dir, 'kubelet.kubeconfig');
    await writeFile(kubeconfig, api.kubeconfigFor(`system:node:${NODE}`, ['system:nodes'], 'cert'), { mode: 0o600 });
    caFile = join(dir, 'client-ca.crt');
    await writeFile(caFile, api.ca!.cert);
    apiClient = api.kubeletClientCert()!;
    api.addToken(reader.token, 'cis-reader');
  });

  after(async () => {
    for (const r of running) await r.stop();
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  describe('with the example config file (examples/kubelet-config.yaml)', () => {
    let k: Running;
    let readOnlyPort: number;
    before(async () => {
      // The example as shipped, its read-only and healthz ports moved to free ones.
      readOnlyPort = await freePort();
      const healthzPort = await freePort();
      const example = readFileSync(join(repoRoot(), 'examples', 'kubelet-config.yaml'), 'utf8');
      assert.match(example, /^readOnlyPort: 10255$/m);
      const file = join(dir, 'kubelet-config.yaml');
      await writeFile(file, example.replace(/^readOnlyPort: 10255$/m, `readOnlyPort: ${readOnlyPort}`).replace(/^healthzPort: 10248$/m, `healthzPort: ${healthzPort}`));
      k = await start(['--config', file], healthzPort);
    });
    after(async () => { await k?.stop(); });

    it('4.2.1 anonymous-auth false: an anonymous request to the secure port gets 401', async () => {
      assert.equal((await configz(k.port, reader)).kubeletconfig.authentication.anonymous.enabled, false);
      assert.equal((await secure(k.port, 'GET', '/pods')).status, 401);
      assert.equal((await secure(k.port, 'POST', '/run/default/any/main?cmd=id')).status, 401);
    });

    it('4.2.2 authorization-mode Webhook (not AlwaysAllow)', async () => {
      assert.equal((await configz(k.port, reader)).kubeletconfig.authorization.mode, 'Webhook');
    });

    it('4.2.3 client-ca-file not set: a certificate from the cluster CA is not authenticated, and start-up says so', async () => {
      assert.equal((await configz(k.port, reader)).kubeletconfig.authentication.x509.clientCAFile, '');
      assert.equal((await secure(k.port, 'GET', '/pods', apiClient)).status, 401);
      assert.match(k.logs(), /Insecure setting: no client CA \(authentication\.x509\.clientCAFile, --client-ca-file\)/);
    });

    it('4.2.4 read-only port: the example opens it, and start-up names it', async () => {
      assert.equal((await fetch(`http://127.0.0.1:${readOnlyPort}/pods`)).status, 200);
      assert.match(k.logs(), new RegExp(`Insecure setting: the read-only port 127\\.0\\.0\\.1:${readOnlyPort} is open`));
    });

    it('4.2.5, 4.2.8, 4.2.13: idle timeout 4h, eventRecordQPS 50, no pod PIDs limit; 4.2.6, 4.2.10, 4.2.11 are not modeled', async () => {
      const { kubeletconfig: kc, kubeletconfigEnforcement: e } = await configz(k.port, reader);
      assert.equal(kc.streamingConnectionIdleTimeout, '4h0m0s');
      assert.equal(kc.eventRecordQPS, 50);
      assert.equal(kc.podPidsLimit, -1);
      assert.ok(e.notModeled!.includes('makeIPTablesUtilChains'));
      // 4.2.11 rotateCertificates and serverTLSBootstrap are implemented (src/certificate); off by default
      for (const f of ['rotateCertificates', 'serverTLSBootstrap']) assert.ok(e.implemented!.includes(f), f);
      assert.equal(kc.rotateCertificates, false);
    });

    it('4.2.9 no tls-cert-file: the served certificate is the self-signed pair in <rootDir>/pki', async () => {
      const served = await servedCert(k.port);
      const file = new X509Certificate(await readFile(join(k.rootDir, 'pki', 'kubelet.crt')));
      assert.equal(served.fingerprint256, file.fingerprint256);
      assert.match(served.issuer, new RegExp(`CN=${NODE}-ca@\\d+`));
    });

    it('4.2.12 ciphers: Go\'s defaults; CBC-SHA256 and RSA key exchange are refused, ECDHE CBC-SHA1 is offered', async () => {
      assert.equal(await negotiate(k.port, 'ECDHE-RSA-AES128-GCM-SHA256'), 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256');
      assert.equal(await negotiate(k.port, 'ECDHE-RSA-AES128-SHA256'), undefined);
      assert.equal(await negotiate(k.port, 'AES128-GCM-SHA256'), undefined);
      assert.equal(await negotiate(k.port, 'ECDHE-RSA-AES128-SHA'), 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA');
    });
  });

  describe('with flags only, defaults', () => {
    let k: Running;
    before(async () => {
      assert.equal(await listening(LEGACY_READ_ONLY_PORT), false, `something else listens on 127.0.0.1:${LEGACY_READ_ONLY_PORT}`);
      const healthzPort = await freePort();
      k = await start(['--healthz-port', String(healthzPort)], healthzPort);
    });
    after(async () => { await k?.stop(); });

    it('4.2.1, 4.2.2: anonymous requests are allowed and authorized: GET /pods 200, POST /run/ reaches its handler', async () => {
      const kc = (await configz(k.port, apiClient)).kubeletconfig;
      assert.equal(kc.authentication.anonymous.enabled, true);
      assert.equal(kc.authorization.mode, 'AlwaysAllow');
      assert.equal((await secure(k.port, 'GET', '/pods')).status, 200);
      const run = await secure(k.port, 'POST', '/run/default/no-such-pod/main?cmd=id');
      assert.ok(![401, 403].includes(run.status), `POST /run/ answered ${run.status}`);
      assert.match(k.logs(), /Insecure setting: anonymous requests are allowed on the kubelet API port 127\.0\.0\.1:\d+ .*and authorized \(AlwaysAllow\)/);
      assert.match(k.logs(), /Insecure setting: authorization mode AlwaysAllow/);
    });

    it('4.2.3 no client-ca-file: a client certificate is not authenticated (the request is anonymous)', async () => {
      assert.equal((await configz(k.port, apiClient)).kubeletconfig.authentication.x509.clientCAFile, '');
    });

    it('4.2.4 the read-only port 10255 is open', async () => {
      assert.equal((await configz(k.port, apiClient)).kubeletconfig.readOnlyPort, LEGACY_READ_ONLY_PORT);
      assert.equal((await fetch(`http://127.0.0.1:${LEGACY_READ_ONLY_PORT}/pods`)).status, 200);
      assert.match(k.logs(), /Insecure setting: the read-only port 127\.0\.0\.1:10255 is open/);
    });

    it('4.2.5, 4.2.8, 4.2.13: idle timeout 4h, eventRecordQPS 50, no pod PIDs limit', async () => {
      const kc = (await configz(k.port, apiClient)).kubeletconfig;
      assert.equal(kc.streamingConnectionIdleTimeout, '4h0m0s');
      assert.equal(kc.eventRecordQPS, 50);
      assert.equal(kc.podPidsLimit, -1);
    });

    it('4.2.12: the same cipher suites as with the file', async () => {
      assert.equal(await negotiate(k.port, 'ECDHE-RSA-AES128-SHA256'), undefined);
      assert.equal(await negotiate(k.port, 'ECDHE-RSA-AES128-SHA'), 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA');
    });
  });

  describe('with flags only, set as the table says', () => {
    let k: Running;
    let serving: { cert: string; key: string };
    let manifests: string;
    before(async () => {
      // A static pod, to see --pod-max-pids on its pod cgroup.
      manifests = await mkdtemp(join(tmpdir(), 'kts-cis-manifests-'));
      await writeFile(join(manifests, 'pids.json'), JSON.stringify({
        apiVersion: 'v1', kind: 'Pod', metadata: { name: 'cis-pids', labels: { test: 'cis-kubelet' } },
        spec: { hostNetwork: true, terminationGracePeriodSeconds: 1, containers: [{ name: 'main', image: rt.images.busybox, command: ['sleep', '3600'] }] },
      }));
      serving = api.ca!.serving(['127.0.0.1', NODE]);
      await writeFile(join(dir, 'serving.crt'), serving.cert);
      await writeFile(join(dir, 'serving.key'), serving.key, { mode: 0o600 });
      const healthzPort = await freePort();
      k = await start([
        '--healthz-port', String(healthzPort),
        '--anonymous-auth=false', '--authorization-mode=Webhook', '--authentication-token-webhook', `--client-ca-file=${caFile}`,
        '--read-only-port=0', '--streaming-connection-idle-timeout=5m', '--event-qps=50', '--pod-max-pids=1024',
        `--tls-cert-file=${join(dir, 'serving.crt')}`, `--tls-private-key-file=${join(dir, 'serving.key')}`,
        `--tls-cipher-suites=${CIS_CIPHERS.join(',')}`, '--rotate-certificates', '--make-iptables-util-chains=true',
        '--feature-gates=RotateKubeletServerCertificate=true', '--pod-manifest-path', manifests,
      ], healthzPort);
    });
    after(async () => {
      // The static pod goes with its manifest; then the process stops (pods would outlive it).
      await rm(join(manifests, 'pids.json'), { force: true });
      await waitFor(async () => (await listSandboxes(rt, 'cis-kubelet')) === 0, WAIT, 'the static pod to be removed').catch(() => undefined);
      await k?.stop();
      await rm(manifests, { recursive: true, force: true });
    });

    it('4.2.13: the static pod\'s cgroup has pids.max 1024', async () => {
      const uid = await waitFor(async () => {
        const list = JSON.parse((await secure(k.port, 'GET', '/pods', apiClient)).body) as { items: Array<{ metadata: { name: string; uid: string }; status?: { phase?: string } }> };
        // Running: the pod cgroup was made and configured before its sandbox started
        return list.items.find((p) => p.metadata.name.startsWith('cis-pids-') && p.status?.phase === 'Running')?.metadata.uid;
      }, WAIT, 'the static pod Running in /pods');
      const file = findPodCgroupFile(uid, 'pids.max');
      assert.ok(file, `the pod cgroup of ${uid}`);
      assert.equal(readFileSync(file, 'utf8').trim(), '1024');
    });

    it('closes the secure port to anonymous peers (401, POST /run/ too) and the read-only port 10255', async () => {
      assert.equal((await secure(k.port, 'GET', '/pods')).status, 401);
      assert.equal((await secure(k.port, 'POST', '/run/default/no-such-pod/main?cmd=id')).status, 401);
      assert.equal((await secure(k.port, 'GET', '/configz')).status, 401);
      assert.equal(await listening(LEGACY_READ_ONLY_PORT), false);
      const kc = (await configz(k.port, apiClient)).kubeletconfig;
      assert.equal(kc.readOnlyPort, 0);
      assert.equal(kc.authentication.anonymous.enabled, false);
      assert.equal(kc.authorization.mode, 'Webhook');
    });

    it('4.2.3: a certificate from --client-ca-file is authenticated, and authorized by SubjectAccessReview', async () => {
      assert.equal((await secure(k.port, 'GET', '/pods', apiClient)).status, 200);
      // The runs before had no client CA (the example) or AlwaysAllow (flags only): only this one asks.
      const review = api.reviews.accessReviews.find((r) => r.user === 'kube-apiserver-kubelet-client');
      assert.ok(review, 'a SubjectAccessReview for the certificate\'s user');
      assert.equal((await configz(k.port, apiClient)).kubeletconfig.authentication.x509.clientCAFile, caFile);
    });

    it('4.2.5, 4.2.8, 4.2.13: the values given are in force', async () => {
      const kc = (await configz(k.port, apiClient)).kubeletconfig;
      assert.equal(kc.streamingConnectionIdleTimeout, '5m0s');
      assert.equal(kc.eventRecordQPS, 50);
      assert.equal(kc.podPidsLimit, 1024);
    });

    it('4.2.9: the given serving certificate is served', async () => {
      assert.equal((await servedCert(k.port)).fingerprint256, new X509Certificate(serving.cert).fingerprint256);
    });

    it('4.2.12: only the strong suites: ECDHE CBC-SHA1 refused now, AES-GCM offered', async () => {
      // The serving key is ECDSA.
      assert.equal(await negotiate(k.port, 'ECDHE-ECDSA-AES128-GCM-SHA256'), 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256');
      assert.equal(await negotiate(k.port, 'ECDHE-ECDSA-AES128-SHA'), undefined);
      assert.equal(await negotiate(k.port, 'ECDHE-ECDSA-AES128-SHA256'), undefined);
    });

    it('no insecure setting is named; 4.2.6, 4.2.10 are named as not implemented; 4.2.11 client rotation runs', async () => {
      assert.doesNotMatch(k.logs(), /Insecure setting/);
      assert.doesNotMatch(k.logs(), /rotateCertificates\) is not implemented|feature gate RotateKubeletServerCertificate is not implemented/);
      assert.match(k.logs(), /Certificate rotation is enabled certificate="client"/);
      assert.match(k.logs(), /flag --make-iptables-util-chains=true \(field makeIPTablesUtilChains\) is not implemented by kubelet-ts yet; ignored/);
    });
  });
});
