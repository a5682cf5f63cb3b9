import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { ManifestError } from '../../src/sources/errors.js';
import type { SourceEntry } from '../../src/sources/file-source.js';
import { PodConfig, type PodUpdate } from '../../src/sources/pod-config.js';
import { UrlSource } from '../../src/sources/url-source.js';

/** A test double for a manifest server: serves whatever the test sets. */
class TestManifestServer {
  status = 200;
  body = '';
  requests: IncomingHttpHeaders[] = [];
  private server: Server = createServer((req, res) => {
    this.requests.push(req.headers);
    res.writeHead(this.status, { 'content-type': 'application/yaml' });
    res.end(this.body);
  });
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/manifests`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

function pod(name: string, image = 'busybox:1.36'): Record<string, unknown> {
  return { metadata: { name }, spec: { containers: [{ name: 'main', image }] } };
}

const single = (name: string, image?: string) => JSON.stringify({ apiVersion: 'v1', kind: 'Pod', ...pod(name, image) });

describe('UrlSource', () => {
  const server = new TestManifestServer();
  before(() => server.start());
  after(() => server.stop());

  function source(extra: { headers?: Record<string, string[]> } = {}) {
    const sets: SourceEntry[][] = [];
    const errors: ManifestError[] = [];
    const src = new UrlSource({
      url: server.url,
      nodeName: 'n1',
      checkPeriodMs: 3_600_000,
      onSet: (e) => sets.push(e),
      onError: (e) => errors.push(e),
      ...extra,
    });
    return { src, sets, errors };
  }

  it('serves a single pod; unchanged content is not emitted again', async () => {
    server.status = 200;
    server.body = single('web');
    const { src, sets, errors } = source();
    try {
      await src.check();
      assert.equal(sets.length, 1);
      assert.equal(sets[0]![0]!.pod.metadata.name, 'web-n1');
      assert.equal(sets[0]![0]!.location, server.url);
      assert.equal(sets[0]![0]!.pod.metadata.annotations!['kubernetes.io/config.source'], 'http');
      await src.check();
      assert.equal(sets.length, 1);
      server.body = single('web', 'busybox:2');
      await src.check();
      assert.equal(sets.length, 2);
      assert.notEqual(sets[1]![0]!.pod.metadata.uid, sets[0]![0]!.pod.metadata.uid);
      assert.deepEqual(errors, []);
    } finally {
      await src.stop();
    }
  });

  it('serves a PodList in YAML', async () => {
    server.status = 200;
    server.body = `apiVersion: v1
kind: PodList
items:
- metadata: {name: a}
  spec: {containers: [{name: c, image: "x:1"}]}
- metadata: {name: b}
  spec: {containers: [{name: c, image: "x:1"}]}
`;
    const { src, sets } = source();
    try {
      await src.check();
      assert.deepEqual(sets[0]!.map((e) => e.pod.metadata.name), ['a-n1', 'b-n1']);
    } finally {
      await src.stop();
    }
  });

  it('sends the configured headers', async () => {
    server.status = 200;
    server.body = single('web');
    server.requests = [];
    const { src } = source({ headers: { 'X-Token': ['secret'], 'X-Multi': ['a', 'b'] } });
    try {
      await src.check();
      assert.equal(server.requests[0]!['x-token'], 'secret');
      assert.equal(server.requests[0]!['x-multi'], 'a, b');
    } finally {
      await src.stop();
    }
  });

  it('reports bad content naming the URL, once, and keeps the last pods', async () => {
    server.status = 200;
    server.body = single('web');
    const { src, sets, errors } = source();
    try {
      await src.check();
      server.body = JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web' }, spec: { containers: [{ name: 'main' }] } });
      await src.check();
      await src.check();
      assert.equal(sets.length, 1, 'no set for bad content');
      assert.equal(errors.length, 1);
      assert.equal(errors[0]!.source, 'http');
      assert.equal(errors[0]!.location, server.url);
      assert.equal(errors[0]!.field, 'spec.containers[0].image');
      assert.ok(errors[0]!.message.startsWith(server.url));
    } finally {
      await src.stop();
    }
  });

  it('reports an HTTP error status naming the URL', async () => {
    server.status = 404;
    server.body = 'not here';
    const { src, sets, errors } = source();
    try {
      await src.check();
      assert.equal(sets.length, 0);
      assert.equal(errors.length, 1);
      assert.match(errors[0]!.message, new RegExp(`^${server.url.replace(/[.]/g, '\\.')}: 404`));
    } finally {
      await src.stop();
      server.status = 200;
    }
  });

  it('an empty answer is an empty set, and an error', async () => {
    server.status = 200;
    server.body = '';
    const { src, sets, errors } = source();
    try {
      await src.check();
      assert.deepEqual(sets, [[]]);
      assert.match(errors[0]!.message, /zero-length/);
    } finally {
      await src.stop();
    }
  });

  it('feeds PodConfig as the http source', async () => {
    server.status = 200;
    server.body = single('web');
    const updates: PodUpdate[] = [];
    const config = new PodConfig({ nodeName: 'n1', onUpdate: (u) => updates.push(u), onError: () => {}, log: () => {} });
    config.startUrlSource(server.url, 3_600_000);
    try {
      const end = Date.now() + 10_000;
      while (updates.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      assert.equal(config.seenAllSources(), true);
      assert.equal(updates[0]!.op, 'ADD');
      assert.equal(updates[0]!.source, 'http');
      assert.equal(updates[0]!.pods[0]!.metadata.name, 'web-n1');
    } finally {
      await config.stop();
    }
  });
});
