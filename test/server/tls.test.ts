// The secure port's TLS settings on a live server: tlsMinVersion refuses older clients,
// tlsCipherSuites restricts what is negotiated, a given certificate is served as is, a
// generated pair is reused, and without openssl generation fails naming what to set.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { defaultKubeletConfig } from '../../src/config/index.js';
import { KubeletServer } from '../../src/server/server.js';
import { servingTLS } from '../../src/server/tls.js';
import { alwaysAllow } from '../../src/server/auth/authz.js';
import { unionAuthenticator } from '../../src/server/auth/authn.js';
import { KubeletGate } from '../../src/server/auth/gate.js';
import { FakeClock } from '../../src/util/clock.js';
import { isKubeletError } from '../../src/util/errors.js';
import { freePort, hostDouble, recordingLogger } from './raw-http.js';

function handshake(port: number, o: { maxVersion?: 'TLSv1.2' | 'TLSv1.3'; ciphers?: string }): Promise<{ ok: boolean; protocol?: string | null; cipher?: string; err?: string }> {
  return new Promise((resolve) => {
    const s = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...o }, () => {
      resolve({ ok: true, protocol: s.getProtocol(), cipher: s.getCipher().standardName });
      s.destroy();
    });
    s.on('error', (err) => resolve({ ok: false, err: err.message }));
  });
}

/** A secure port on 127.0.0.1 with no routes, its config patched, its certificate under dir/pki; pushed on servers to stop later. */
async function serveSecure(dir: string, servers: KubeletServer[], log: ReturnType<typeof recordingLogger>, clock: FakeClock,
  patch: (c: ReturnType<typeof defaultKubeletConfig>) => void): Promise<number> {
  const config = defaultKubeletConfig();
  patch(config);
  const tls = await servingTLS({ config, certDirectory: join(dir, 'pki'), hostname: 'node-a', clock, log });
  const port = await freePort();
  const gate = new KubeletGate({ nodeName: 'node-a', authenticator: unionAuthenticator([], true), authorizer: alwaysAllow, fineGrained: true, log });
  const server = new KubeletServer({ host: hostDouble(), log, healthzBindAddress: '127.0.0.1', healthzPort: 0, address: '127.0.0.1', readOnlyPort: 0,
    secure: { address: '127.0.0.1', port, tls: tls.options, gate, routes: new Map() } });
  await server.start();
  servers.push(server);
  return port;
}

describe('secure port TLS settings', { timeout: 60_000 }, () => {
  const log = recordingLogger();
  const clock = new FakeClock();
  const servers: KubeletServer[] = [];
  let dir: string;
  before(() => { dir = mkdtempSync(join(tmpdir(), 'kts-tls-')); });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  });
  const serve = (patch: (c: ReturnType<typeof defaultKubeletConfig>) => void): Promise<number> => serveSecure(dir, servers, log, clock, patch);

  it('defaults to TLS 1.2 as the minimum (Go\'s server default) and negotiates 1.3', async () => {
    const port = await serve(() => undefined);
    assert.equal((await handshake(port, {})).protocol, 'TLSv1.3');
    assert.equal((await handshake(port, { maxVersion: 'TLSv1.2' })).protocol, 'TLSv1.2');
  });

  it('tlsMinVersion VersionTLS13 refuses a TLS 1.2 client', async () => {
    const port = await serve((c) => { c.tlsMinVersion = 'VersionTLS13'; });
    assert.equal((await handshake(port, { maxVersion: 'TLSv1.2' })).ok, false);
    assert.equal((await handshake(port, {})).protocol, 'TLSv1.3');
  });

  it('tlsCipherSuites (Go names) restrict the TLS 1.2 ciphers negotiated', async () => {
    const port = await serve((c) => { c.tlsCipherSuites = ['TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384']; });
    const r = await handshake(port, { maxVersion: 'TLSv1.2' });
    assert.equal(r.cipher, 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384');
    assert.equal((await handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES128-GCM-SHA256' })).ok, false);
  });

  it('reuses the generated pair on the next start instead of making a new one', async () => {
    const before = readFileSync(join(dir, 'pki', 'kubelet.crt'), 'utf8');
    const again = await servingTLS({ config: defaultKubeletConfig(), certDirectory: join(dir, 'pki'), hostname: 'node-a', clock, log });
    assert.equal(again.generated, false);
    assert.equal(String(again.options.cert), before);
    assert.equal(statSync(join(dir, 'pki', 'kubelet.key')).mode & 0o777, 0o600);
  });

  it('serves a given tlsCertFile/tlsPrivateKeyFile as is', async () => {
    const config = defaultKubeletConfig();
    config.tlsCertFile = join(dir, 'pki', 'kubelet.crt');
    config.tlsPrivateKeyFile = join(dir, 'pki', 'kubelet.key');
    const t = await servingTLS({ config, certDirectory: join(dir, 'elsewhere'), hostname: 'other', clock, log });
    assert.equal(t.generated, false);
    assert.equal(t.certFile, config.tlsCertFile);
  });

  it('without openssl, generation fails naming the certificate file and tlsCertFile', async () => {
    await assert.rejects(
      servingTLS({ config: defaultKubeletConfig(), certDirectory: join(dir, 'no-openssl'), hostname: 'node-a', clock, log, openssl: '/nonexistent/openssl' }),
      (err: unknown) => isKubeletError(err, 'ERR_SERVING_CERT') && /kubelet\.crt.*tlsCertFile/.test((err as Error).message),
    );
  });

  it('an unreadable certificate file is an error naming it', async () => {
    const config = defaultKubeletConfig();
    config.tlsCertFile = join(dir, 'missing.crt');
    config.tlsPrivateKeyFile = join(dir, 'missing.key');
    await assert.rejects(servingTLS({ config, certDirectory: dir, hostname: 'n', clock, log }),
      (err: unknown) => isKubeletError(err, 'ERR_SERVING_CERT') && (err as Error).message.includes('missing.crt'));
  });
});

describe('secure port cipher suites: Go\'s secure defaults, insecure suites only by name', { timeout: 60_000 }, () => {
  const log = recordingLogger();
  const clock = new FakeClock();
  const servers: KubeletServer[] = [];
  let dir: string;
  before(() => { dir = mkdtempSync(join(tmpdir(), 'kts-tls-ciphers-')); });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  });
  const serve = (patch: (c: ReturnType<typeof defaultKubeletConfig>) => void): Promise<number> => serveSecure(dir, servers, log, clock, patch);

  it('by default refuses what Go counts insecure (CBC-SHA256, RSA key exchange) and offers its defaults', async () => {
    const port = await serve(() => undefined);
    for (const weak of ['ECDHE-RSA-AES128-SHA256', 'ECDHE-RSA-AES256-SHA384', 'AES128-GCM-SHA256', 'AES256-SHA', 'DHE-RSA-AES128-GCM-SHA256']) {
      const r = await handshake(port, { maxVersion: 'TLSv1.2', ciphers: weak });
      assert.equal(r.ok, false, `${weak} was negotiated`);
    }
    for (const [openssl, go] of [['ECDHE-RSA-AES128-GCM-SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256'], ['ECDHE-RSA-CHACHA20-POLY1305', 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256'], ['ECDHE-RSA-AES128-SHA', 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA']]) {
      assert.equal((await handshake(port, { maxVersion: 'TLSv1.2', ciphers: openssl })).cipher, go);
    }
    // The server's order, as Go: AES-128-GCM first.
    assert.equal((await handshake(port, { maxVersion: 'TLSv1.2' })).cipher, 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256');
    assert.equal((await handshake(port, {})).protocol, 'TLSv1.3');
  });

  it('an insecure suite named in tlsCipherSuites is served (upstream accepts it; start-up warns)', async () => {
    const port = await serve((c) => { c.tlsCipherSuites = ['TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256', 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256']; });
    assert.equal((await handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES128-SHA256' })).cipher, 'TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256');
    assert.equal((await handshake(port, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-CHACHA20-POLY1305' })).ok, false);
  });

  it('TLS 1.3 names in tlsCipherSuites do not restrict TLS 1.3, as Go', async () => {
    const port = await serve((c) => { c.tlsCipherSuites = ['TLS_AES_256_GCM_SHA384', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384']; });
    const r = await handshake(port, {});
    assert.equal(r.protocol, 'TLSv1.3');
    assert.equal((await handshake(port, { maxVersion: 'TLSv1.2' })).cipher, 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384');
  });

  it('a suite the TLS library cannot offer is an error naming tlsCipherSuites', async () => {
    const config = defaultKubeletConfig();
    config.tlsCipherSuites = ['TLS_RSA_WITH_RC4_128_SHA'];
    await assert.rejects(servingTLS({ config, certDirectory: join(dir, 'pki'), hostname: 'node-a', clock, log }),
      (err: unknown) => isKubeletError(err, 'ERR_SERVER_AUTH_CONFIG') && /^tlsCipherSuites: .*TLS_RSA_WITH_RC4_128_SHA/.test((err as Error).message));
  });
});
