// Subtree routes ('/x/' matches everything below it, as a ServeMux pattern) and HTTP/1.1
// upgrades handed to a route's upgrade handler, over real sockets.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';

import { matchRoute, withMethods, type Handler } from '../../src/server/server.js';
import { exchange, get, startServers, type TestServers } from './raw-http.js';

function named(name: string, extra: Partial<Pick<Handler, 'exact' | 'upgrade'>> = {}, methods = ['GET']): Handler {
  return Object.assign(withMethods(methods, (_req, res, url) => {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(`${name} ${url.pathname}${url.search}`);
  }), extra);
}

describe('matchRoute', () => {
  const routes = new Map<string, Handler>([
    ['/containerLogs/', named('logs')],
    ['/exec/', named('exec')],
    ['/exec/special/', named('special')],
    ['/pods/', named('pods', { exact: true })],
    ['/healthz', named('healthz')],
  ]);
  const which = (p: string): string | undefined => {
    const h = matchRoute(routes, p);
    return h === undefined ? undefined : [...routes].find(([, v]) => v === h)![0];
  };

  it('an exact path first, then the longest subtree pattern above it', () => {
    assert.equal(which('/containerLogs/ns/pod/c'), '/containerLogs/');
    assert.equal(which('/containerLogs/'), '/containerLogs/');
    assert.equal(which('/exec/ns/pod/c'), '/exec/');
    assert.equal(which('/exec/special/x/y'), '/exec/special/');
    assert.equal(which('/healthz'), '/healthz');
  });

  it('a path without its trailing slash, an exact pattern\'s subtree and unrelated paths match nothing', () => {
    assert.equal(which('/containerLogs'), undefined);
    assert.equal(which('/containerLogsX/a'), undefined);
    assert.equal(which('/pods/x'), undefined);
    assert.equal(which('/pods/'), '/pods/');
    assert.equal(which('/healthz/x'), undefined);
    assert.equal(which('/'), undefined);
  });
});

describe('subtree routes and upgrades on a live server', { timeout: 30_000 }, () => {
  let s: TestServers;
  const upgrades: string[] = [];
  before(async () => {
    const exec = named('exec', {
      upgrade: (req, socket, head, url) => {
        upgrades.push(`${req.headers.upgrade} ${url.pathname}${url.search} head=${head.length}`);
        socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
        socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
      },
    }, ['GET', 'POST']);
    s = await startServers({ routes: new Map<string, Handler>([['/exec/', exec], ['/containerLogs/', named('logs')]]) });
  });
  after(() => s.stop());

  it('a subtree route gets the whole path and query', async () => {
    const { response } = await get(s.readOnlyPort, '/containerLogs/ns/pod/c?tailLines=2');
    assert.equal(response?.status, 200);
    assert.equal(response?.body, 'logs /containerLogs/ns/pod/c?tailLines=2');
    assert.equal((await get(s.readOnlyPort, '/containerLogs')).response?.status, 404);
  });

  it('the read-only /pods/ stays exact', async () => {
    assert.equal((await get(s.readOnlyPort, '/pods/x')).response?.status, 404);
  });

  it('an Upgrade request reaches the route\'s upgrade handler, which owns the socket both ways', async () => {
    const sock = connect(s.readOnlyPort, '127.0.0.1');
    let got = '';
    sock.on('data', (d: Buffer) => { got += d.toString(); });
    sock.write('POST /exec/ns/pod/c?command=sh HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    await waitFor(() => got.includes('\r\n\r\n'));
    sock.write('ping');
    await waitFor(() => got.includes('echo:ping'));
    sock.destroy();
    assert.match(got, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
    assert.deepEqual(upgrades, ['SPDY/3.1 /exec/ns/pod/c?command=sh head=0']);
  });

  it('an Upgrade to a route without an upgrade handler is answered as an ordinary request, then closed', async () => {
    const r = await exchange(s.readOnlyPort, ['GET /containerLogs/a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n']);
    assert.equal(r.response?.status, 200);
    assert.equal(r.response?.body, 'logs /containerLogs/a');
    const missing = await exchange(s.readOnlyPort, ['GET /nope HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n']);
    assert.equal(missing.response?.status, 404);
    const bad = await exchange(s.readOnlyPort, ['GET /exec/%zz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n']);
    assert.equal(bad.response?.status, 400);
  });

  it('an Upgrade with a method the route does not answer is a 405, not an upgrade', async () => {
    const r = await exchange(s.readOnlyPort, ['PUT /exec/ns/pod/c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n']);
    assert.equal(r.response?.status, 405);
    assert.equal(upgrades.length, 1);
  });

  it('a healthz request still works after the upgrades', async () => {
    assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
  });
});

async function waitFor(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
