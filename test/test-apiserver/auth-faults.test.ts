import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { CertificateAuthority } from '../fixtures/test-apiserver/auth.js';
import { call, podManifest, startServer, watch } from './client.js';

describe('test API server: authentication (TLS)', () => {
  let s: TestApiServer;
  before(async () => { s = await startServer({ tls: true }); });
  after(() => s.stop());

  it('refuses a request without credentials, or with an unknown token, with a 401 Status', async () => {
    assert.match(s.url, /^https:/);
    for (const token of [null, 'wrong']) {
      const r = await call(s, 'GET', '/api/v1/nodes', { token });
      assert.equal(r.code, 401);
      assert.deepEqual([r.body.kind, r.body.reason, r.body.message, r.body.code], ['Status', 'Unauthorized', 'Unauthorized', 401]);
    }
    assert.equal((await call(s, 'GET', '/api/v1/nodes')).code, 200);
    assert.equal(s.requests.at(-1)?.user, 'admin');
  });

  it('takes the user from a client certificate signed by its CA: CN user, O groups', async () => {
    const kp = s.issueClientCert('system:node:n1', ['system:nodes']);
    const r = await call(s, 'GET', '/api/v1/nodes', { token: null, cert: kp });
    assert.equal(r.code, 200);
    assert.equal(s.requests.at(-1)?.user, 'system:node:n1');
    const u = s.auth.authenticate({ headers: {}, socket: { encrypted: true, authorized: true, getPeerCertificate: () => ({ subject: { CN: 'x', O: ['a', 'b'] } }) } } as never);
    assert.deepEqual(u, { name: 'x', groups: ['a', 'b', 'system:authenticated'] });
  });

  it('refuses a client certificate from another CA', async () => {
    const foreign = new CertificateAuthority().client('mallory', ['system:masters']);
    const r = await call(s, 'GET', '/api/v1/nodes', { token: null, cert: foreign });
    assert.equal(r.code, 401);
  });
});

describe('test API server: test controls', () => {
  let s: TestApiServer;
  before(async () => { s = await startServer(); });
  after(() => s.stop());

  it('fails the next N matching requests with the injected error, then serves again', async () => {
    s.injectError({ method: 'PUT', path: '/leases/', count: 2, code: 409 });
    s.injectError({ method: 'GET', path: /\/api\/v1\/nodes$/, count: 1, code: 429, retryAfterSeconds: 3 });
    const lease = '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1';
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await call(s, 'PUT', lease, { body: { metadata: { name: 'n1' }, spec: { holderIdentity: 'n1' } } })).code);
    assert.deepEqual(codes, [409, 409, 201]);
    const r = await call(s, 'GET', '/api/v1/nodes');
    assert.equal(r.code, 429);
    assert.equal(r.headers['retry-after'], '3');
    assert.deepEqual([r.body.kind, r.body.reason, r.body.details.retryAfterSeconds], ['Status', 'TooManyRequests', 3]);
    assert.equal((await call(s, 'GET', '/api/v1/nodes')).code, 200);
    s.injectError({ path: '/api/v1/namespaces/default/pods', count: 1, code: 500 });
    const e = await call(s, 'GET', '/api/v1/namespaces/default/pods');
    assert.deepEqual([e.code, e.body.reason], [500, 'InternalError']);
  });

  it('waits for a stored change, or names what it waited for when it times out', async () => {
    const waiting = s.waitFor('pod w1', () => s.get('pods', 'default', 'w1'));
    await call(s, 'POST', '/api/v1/namespaces/default/pods', { body: podManifest('w1') });
    assert.equal((await waiting).metadata.name, 'w1');
    await assert.rejects(s.waitFor('pod never', () => s.get('pods', 'default', 'never'), 50), /timed out after 50 ms waiting for pod never/);
  });

  it('delays requests by the injected latency', async () => {
    s.latencyMs = 150;
    const t0 = performance.now();
    await call(s, 'GET', '/version');
    const took = performance.now() - t0;
    s.latencyMs = 0;
    assert.ok(took >= 140, `took ${took} ms`);
  });

  it('keeps objects and the resourceVersion across a restart; watches are cut and refused while down', async () => {
    const p = await call(s, 'POST', '/api/v1/namespaces/default/pods', { body: podManifest('survivor') });
    const rv = Number(p.body.metadata.resourceVersion);
    const w = await watch(s, `/api/v1/pods?watch=true&resourceVersion=${rv}`);
    const url = s.url;
    await s.stop();
    await w.ended;
    await assert.rejects(call(s, 'GET', '/version'), /ECONNREFUSED/);
    await s.start();
    assert.equal(s.url, url);
    const got = await call(s, 'GET', '/api/v1/namespaces/default/pods/survivor');
    assert.equal(got.body.metadata.uid, p.body.metadata.uid);
    const next = await call(s, 'POST', '/api/v1/namespaces/default/pods', { body: podManifest('after-restart') });
    assert.equal(Number(next.body.metadata.resourceVersion), rv + 1);
    // A watch resumed from before the restart replays what happened since.
    const w2 = await watch(s, `/api/v1/pods?watch=true&resourceVersion=${rv}`);
    assert.equal((await w2.next())?.object.metadata.name, 'after-restart');
    w2.close();
  });
});
