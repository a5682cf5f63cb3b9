// pods/log, exec, attach and portforward of the test API server: the kubelet URL built as the
// real API server builds it (container defaulting, PodExecOptions → the kubelet's stream
// parameters), reached over HTTPS with the API server's client certificate (the user's token
// not passed on), a log streamed, an upgrade relayed byte for byte, and the refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpsServer } from 'node:https';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { call, TOKEN } from './client.js';

interface Seen { method: string; url: string; cn: string; auth: string }

async function setup(t: { after: (fn: () => void | Promise<void>) => void }): Promise<{ api: TestApiServer; seen: Seen[] }> {
  const api = new TestApiServer({ tokens: { [TOKEN]: { user: 'admin', groups: ['system:masters'] } } });
  await api.start();
  const serving = api.ca!.serving(['127.0.0.1']);
  const seen: Seen[] = [];
  const note = (req: IncomingMessage): void => {
    seen.push({ method: req.method!, url: req.url!, cn: String((req.socket as TLSSocket).getPeerCertificate()?.subject?.CN ?? ''), auth: req.headers.authorization ?? '' });
  };
  // a stand-in kubelet: logs answer text, exec upgrades and echoes
  const kubelet: Server = createHttpsServer({ cert: serving.cert, key: serving.key, ca: [api.ca!.cert], requestCert: true, rejectUnauthorized: true }, (req, res) => {
    note(req);
    if (req.url!.includes('/nope')) { res.writeHead(404); return void res.end('container "nope" not found in pod "web"'); }
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end('line 1\nline 2\n');
  });
  kubelet.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    note(req);
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    socket.on('data', (d: Buffer) => socket.write(d));
  });
  await new Promise<void>((r) => kubelet.listen(0, '127.0.0.1', r));
  api.create('nodes', undefined, { metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }], daemonEndpoints: { kubeletEndpoint: { Port: (kubelet.address() as AddressInfo).port } } } });
  api.create('pods', 'default', { metadata: { name: 'web' }, spec: { nodeName: 'n1', containers: [{ name: 'app', image: 'busybox' }] } });
  api.create('pods', 'default', { metadata: { name: 'two' }, spec: { nodeName: 'n1', containers: [{ name: 'a', image: 'busybox' }, { name: 'b', image: 'busybox' }] } });
  api.create('pods', 'default', { metadata: { name: 'unbound' }, spec: { containers: [{ name: 'a', image: 'busybox' }] } });
  t.after(async () => { kubelet.close(); await api.stop(); });
  return { api, seen };
}

function rawUpgrade(api: TestApiServer, path: string, token: string | undefined): Promise<{ text: () => string; socket: TLSSocket; until: (re: RegExp) => Promise<void> }> {
  const u = new URL(api.url);
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: u.hostname, port: Number(u.port), ca: [api.ca!.cert], servername: 'localhost' }, () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n${token ? `Authorization: Bearer ${token}\r\n` : ''}\r\n`);
      let buf = '';
      socket.on('data', (d) => { buf += d.toString('latin1'); });
      resolve({
        socket,
        text: () => buf,
        until: async (re) => { while (!re.test(buf) && !socket.destroyed) await new Promise((r) => setTimeout(r, 5)); },
      });
    });
    socket.on('error', () => undefined);
  });
}

test('pods/log reaches the kubelet over HTTPS with the API server certificate and streams back', async (t) => {
  const { api, seen } = await setup(t);
  const r = await call(api, 'GET', '/api/v1/namespaces/default/pods/web/log?follow=true&tailLines=3&timestamps=true&previous=false&sinceSeconds=10&limitBytes=99');
  assert.equal(r.code, 200);
  assert.equal(r.body, 'line 1\nline 2\n');
  assert.deepEqual(seen.at(-1), { method: 'GET', url: '/containerLogs/default/web/app?follow=true&timestamps=true&sinceSeconds=10&tailLines=3&limitBytes=99', cn: 'kube-apiserver-kubelet-client', auth: '' });
  const refused = await call(api, 'GET', '/api/v1/namespaces/default/pods/web/log?container=nope');
  assert.equal(refused.code, 400);
  assert.equal(refused.body.message, 'container nope is not valid for pod web');
  const two = await call(api, 'GET', '/api/v1/namespaces/default/pods/two/log');
  assert.equal(two.body.message, 'a container name must be specified for pod two, choose one of: [a b]');
  assert.equal((await call(api, 'GET', '/api/v1/namespaces/default/pods/unbound/log')).code, 400);
  assert.equal((await call(api, 'GET', '/api/v1/namespaces/default/pods/ghost/log')).code, 404);
  assert.equal((await call(api, 'GET', '/api/v1/namespaces/default/pods/web/log', { token: null })).code, 401);
});

test('pods/exec: the upgrade goes to the kubelet with its stream parameters, bytes both ways; refusals', async (t) => {
  const { api, seen } = await setup(t);
  const c = await rawUpgrade(api, '/api/v1/namespaces/default/pods/web/exec?command=sh&command=-c&command=id&stdin=true&stdout=true&stderr=true&tty=false', TOKEN);
  await c.until(/101 Switching Protocols\r\n[\s\S]*\r\n\r\n/);
  c.socket.write(Buffer.from([0x80, 0x03, 0x00, 0xff]));
  await c.until(/\x80\x03\x00\xff$/);
  c.socket.destroy();
  assert.deepEqual(seen.at(-1), { method: 'POST', url: '/exec/default/web/app?command=sh&command=-c&command=id&input=1&output=1&error=1', cn: 'kube-apiserver-kubelet-client', auth: '' });
  const pf = await rawUpgrade(api, '/api/v1/namespaces/default/pods/web/portforward', TOKEN);
  await pf.until(/101/);
  pf.socket.destroy();
  assert.equal(seen.at(-1)!.url, '/portForward/default/web');
  const anon = await rawUpgrade(api, '/api/v1/namespaces/default/pods/web/exec?command=ls&stdout=true', undefined);
  await anon.until(/\r\n\r\n[\s\S]*\}/);
  assert.match(anon.text(), /^HTTP\/1\.1 401 /);
  const plain = await call(api, 'POST', '/api/v1/namespaces/default/pods/web/exec?command=ls&stdout=true');
  assert.equal(plain.code, 400);
  assert.equal(plain.body.message, 'Upgrade request required');
});
