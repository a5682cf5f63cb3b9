// kubelet-ts started with a kubeconfig whose client certificate has expired: without a bootstrap
// kubeconfig it stops at once with an error naming the kubeconfig and the expiry (no runtime is
// contacted: the endpoint does not exist); the re-bootstrap with one is in bootstrap.test.ts.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { CLIENT_SIGNER, CLIENT_USAGES, requestCertificate } from '../../src/certificate/bootstrap.js';
import { newKey } from '../../src/certificate/csr.js';
import { RestClient } from '../../src/client/rest.js';
import { realClock } from '../../src/util/clock.js';
import { createLogger } from '../../src/util/log.js';
import { repoRoot } from '../fixtures/runtime.js';
import { kubeconfig } from '../fixtures/test-apiserver/kubeconfig.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';

const run = promisify(execFile);

describe('kubelet-ts with an expired client certificate', () => {
  let api: TestApiServer;
  let dir: string;
  before(async () => {
    api = new TestApiServer({ tls: true, csrMinExpirationSeconds: 1, csrAutoApproveNodeClient: true });
    await api.start();
    dir = await mkdtemp(join(tmpdir(), 'kts-expired-'));
  });
  after(async () => {
    await api?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('without --bootstrap-kubeconfig: a clear error naming the kubeconfig and when it expired; exits 1', async () => {
    const first = api.issueClientCert('system:node:n1', ['system:nodes']);
    const client = new RestClient({ source: 't', server: api.url, caData: api.ca!.cert, insecureSkipTLSVerify: false, certData: first.cert, keyData: first.key });
    const key = newKey();
    const cert = await requestCertificate(client, {
      subject: { commonName: 'system:node:n1', organizations: ['system:nodes'] }, signerName: CLIENT_SIGNER, usages: CLIENT_USAGES, key,
      expirationSeconds: 1, timeoutMs: 10_000, clock: realClock, log: createLogger(),
    });
    client.close();
    await new Promise((r) => setTimeout(r, 1500));
    const kc = join(dir, 'kubelet.kubeconfig');
    await writeFile(kc, kubeconfig(api.url, api.ca!.cert, 'n1', { cert, key: key.pem }), { mode: 0o600 });
    const err = await run(process.execPath, [join(repoRoot(), 'bin', 'kubelet-ts.mjs'), '--kubeconfig', kc, '--root-dir', join(dir, 'root'),
      '--container-runtime-endpoint', `unix://${dir}/none.sock`, '--rotate-certificates'], { timeout: 30_000 }).then(() => undefined, (e) => e as { code: number; stderr: string });
    assert.ok(err, 'kubelet-ts must not start');
    assert.equal(err.code, 1);
    assert.match(err.stderr, /Failed to load the kubeconfig/);
    assert.match(err.stderr, new RegExp(`the client certificate of ${kc.replace(/[.]/g, '\\.')} expired at \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z, and there is no --bootstrap-kubeconfig`));
    assert.doesNotMatch(err.stderr, /Started kubelet/);
  });
});
