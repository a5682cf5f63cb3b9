// Client certificate rotation in the REST client: after setClientCertificate the next
// requests and watches authenticate with the new certificate, without a new client.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RestClient } from '../../src/client/rest.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';

describe('REST client: client certificate switched at run time', () => {
  let s: TestApiServer;
  before(async () => {
    s = new TestApiServer({ tls: true });
    await s.start();
  });
  after(async () => {
    await s?.stop();
  });

  it('requests and a new watch use the new certificate once it is set', async () => {
    const first = s.issueClientCert('system:node:n1', ['system:nodes']);
    const second = s.issueClientCert('system:node:n1-rotated', ['system:nodes']);
    const client = new RestClient({ source: 'test', server: s.url, caData: s.ca!.cert, insecureSkipTLSVerify: false, certData: first.cert, keyData: first.key }, { maxRetries: 0 });
    try {
      await client.get('/api/v1/namespaces');
      assert.equal(s.requests.at(-1)?.user, 'system:node:n1');
      client.setClientCertificate(second.cert, second.key);
      await client.get('/api/v1/namespaces');
      assert.equal(s.requests.at(-1)?.user, 'system:node:n1-rotated');
      const ac = new AbortController();
      const res = await client.stream('/api/v1/namespaces', { signal: ac.signal, query: { watch: 'true' } });
      assert.equal(res.statusCode, 200);
      assert.equal(s.requests.at(-1)?.user, 'system:node:n1-rotated');
      ac.abort();
      res.destroy();
    } finally {
      client.close();
    }
  });
});
