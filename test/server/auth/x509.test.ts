// x509 client-certificate authentication as Go and Kubernetes do it, against certificates made
// here with openssl: user = the subject's last CommonName (Go's pkix.Name), groups = the
// Organization values; the chain verified against the client CA file with extended key usage
// checked along it (every certificate listing usages must allow clientAuth or any); a chain
// OpenSSL refuses only for anyExtendedKeyUsage is still checked link by link.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { unionAuthenticator, x509Authenticator } from '../../../src/server/auth/authn.js';

let dir: string;

function openssl(args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function key(name: string): void {
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', `${name}.key`]);
}

/** A self-signed CA. */
function rootCA(name: string): void {
  key(name);
  openssl(['req', '-x509', '-new', '-key', `${name}.key`, '-out', `${name}.crt`, '-subj', '/CN=client-ca', '-days', '2',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,digitalSignature']);
}

/** A certificate `name` signed by `issuer`, with `ext` lines (extensions). */
function issue(name: string, issuer: string, subj: string, ext: string[]): void {
  key(name);
  openssl(['req', '-new', '-key', `${name}.key`, '-out', `${name}.csr`, '-subj', subj]);
  writeFileSync(join(dir, `${name}.ext`), `${ext.join('\n')}\n`);
  openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${issuer}.crt`, '-CAkey', `${issuer}.key`, '-set_serial', String(Math.floor(Math.random() * 1e9)),
    '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.crt`]);
}

const CA_EXT = ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,digitalSignature'];
const LEAF = (eku?: string): string[] => ['basicConstraints=critical,CA:FALSE', 'keyUsage=critical,digitalSignature', ...(eku ? [`extendedKeyUsage=${eku}`] : [])];

describe('x509 client certificates: identity and chain as Go derives them', { timeout: 60_000 }, () => {
  let server: Server;
  let port: number;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kts-x509-'));
    rootCA('root');
    issue('int-server', 'root', '/CN=int-server', [...CA_EXT, 'extendedKeyUsage=serverAuth']);
    issue('int-any', 'root', '/CN=int-any', [...CA_EXT, 'extendedKeyUsage=anyExtendedKeyUsage']);
    issue('int-client', 'root', '/CN=int-client', [...CA_EXT, 'extendedKeyUsage=clientAuth']);
    issue('two-cns', 'root', '/O=system:nodes/CN=first/O=team-b/CN=system:node:last', LEAF('clientAuth'));
    issue('via-server-int', 'int-server', '/CN=alice', LEAF('clientAuth'));
    issue('via-any-int', 'int-any', '/CN=bob/O=dev', LEAF('clientAuth'));
    issue('via-client-int', 'int-client', '/CN=carol', LEAF());
    issue('leaf-any', 'root', '/CN=dave', LEAF('anyExtendedKeyUsage'));
    issue('leaf-server', 'root', '/CN=eve', LEAF('serverAuth'));
    // Not-a-CA signing: a leaf used as an issuer.
    issue('leaf-plain', 'root', '/CN=frank', LEAF('anyExtendedKeyUsage'));
    issue('under-leaf', 'leaf-plain', '/CN=mallory', LEAF('anyExtendedKeyUsage'));
    // Another CA under the same name as the trusted one: its leaf must not pass.
    rootCA('fake-root');
    issue('fake-leaf', 'fake-root', '/CN=mallory', LEAF('anyExtendedKeyUsage'));
    openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'srv.key', '-out', 'srv.crt', '-subj', '/CN=kubelet', '-days', '2']);

    const authn = unionAuthenticator([x509Authenticator(join(dir, 'root.crt'))], false);
    server = createServer({ cert: readFileSync(join(dir, 'srv.crt')), key: readFileSync(join(dir, 'srv.key')), ca: readFileSync(join(dir, 'root.crt')),
      requestCert: true, rejectUnauthorized: false }, (req, res) => {
      authn.authenticate(req).then(
        (user) => { res.writeHead(200); res.end(JSON.stringify(user ?? null)); },
        (err: Error) => { res.writeHead(401); res.end(err.message); },
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });

  after(() => {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function call(leaf: string, ...chain: string[]): Promise<{ status: number; body: string }> {
    const cert = Buffer.concat([leaf, ...chain].map((n) => readFileSync(join(dir, `${n}.crt`))));
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/', rejectUnauthorized: false, agent: false, cert, key: readFileSync(join(dir, `${leaf}.key`)) }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('user = the last CN, groups = every O in order (pkix.Name)', async () => {
    const r = await call('two-cns');
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(JSON.parse(r.body), { name: 'system:node:last', groups: ['system:nodes', 'team-b', 'system:authenticated'] });
  });

  it('an intermediate whose extended key usage excludes clientAuth fails the chain', async () => {
    const r = await call('via-server-int', 'int-server');
    assert.equal(r.status, 401);
    assert.match(r.body, /verifying certificate CN=alice failed/);
  });

  it('anyExtendedKeyUsage allows clientAuth, on an intermediate and on the leaf (OpenSSL alone refuses both)', async () => {
    const bob = await call('via-any-int', 'int-any');
    assert.equal(bob.status, 200, bob.body);
    assert.deepEqual(JSON.parse(bob.body), { name: 'bob', groups: ['dev', 'system:authenticated'] });
    const dave = await call('leaf-any');
    assert.equal(dave.status, 200, dave.body);
    assert.equal(JSON.parse(dave.body).name, 'dave');
  });

  it('a leaf without extended key usage under a clientAuth intermediate passes', async () => {
    const r = await call('via-client-int', 'int-client');
    assert.equal(r.status, 200, r.body);
    assert.equal(JSON.parse(r.body).name, 'carol');
  });

  it('a leaf for serverAuth only is refused', async () => {
    const r = await call('leaf-server');
    assert.equal(r.status, 401);
    assert.match(r.body, /CN=eve failed/);
  });

  it('the anyExtendedKeyUsage path still verifies every link: a non-CA issuer, another CA of the same name', async () => {
    const underLeaf = await call('under-leaf', 'leaf-plain');
    assert.equal(underLeaf.status, 401, underLeaf.body);
    const fake = await call('fake-leaf', 'fake-root');
    assert.equal(fake.status, 401, fake.body);
    assert.match(fake.body, /CN=mallory failed: certificate signed by unknown authority/);
    const fakeAlone = await call('fake-leaf');
    assert.equal(fakeAlone.status, 401, fakeAlone.body);
  });
});
