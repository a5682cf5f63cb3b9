// The stream proxy against a hostile or broken runtime streaming server: nothing the backend sends
// reaches the client before a well-formed 101; an error answer is re-framed (status and bounded
// body, none of the backend's headers); any other answer is a 500; an https backend is verified.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { createServer as createTlsServer } from 'node:tls';
import { proxyUpgrade, type StreamProxyOptions } from '../../src/server/stream-proxy.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

async function listen(server: { listen(port: number, host: string, cb: () => void): unknown; address(): unknown }): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** A backend that answers every connection with `reply` once it has the request head. */
async function backend(reply: (s: Socket) => void): Promise<{ port: number; close(): void }> {
  const server = createNetServer((s) => {
    s.on('error', () => undefined);
    let buf = '';
    s.on('data', (d) => {
      buf += d.toString('latin1');
      if (buf.includes('\r\n\r\n')) { buf = '\0'; reply(s); }
    });
  });
  const port = await listen(server);
  return { port, close: () => server.close() };
}

/** The kubelet side: an HTTP server whose upgrades go through proxyUpgrade to `target`. */
async function kubelet(target: () => string, extra: Partial<StreamProxyOptions> = {}): Promise<{ port: number; server: Server }> {
  const server = createHttpServer();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    void proxyUpgrade(req, socket, head, new URL(target()), { clock: new FakeClock(), log: loggerDouble(), idleTimeoutMs: 0, ...extra });
  });
  return { port: await listen(server), server };
}

/** Sends an upgrade request and returns everything received until the connection closes. */
function upgradeExchange(port: number, then?: (s: Socket, got: () => string) => void): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => { got += d.toString('latin1'); });
    s.on('error', () => undefined);
    s.on('close', () => resolve(got));
    s.write('POST /exec/x HTTP/1.1\r\nHost: k\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    then?.(s, () => got);
  });
}

describe('stream proxy against a hostile backend', { timeout: 60_000 }, () => {
  const cleanups: (() => void)[] = [];
  after(() => { for (const c of cleanups) c(); });

  const through = async (reply: (s: Socket) => void, extra: Partial<StreamProxyOptions> = {}): Promise<string> => {
    const b = await backend(reply);
    const k = await kubelet(() => `http://127.0.0.1:${b.port}/exec/tok`, extra);
    cleanups.push(() => b.close(), () => k.server.close());
    return upgradeExchange(k.port);
  };

  it('a 200 (not an upgrade) is a 500 "invalid upgrade response"; none of its bytes reach the client', async () => {
    const got = await through((s) => s.end('HTTP/1.1 200 OK\r\nSet-Cookie: injected=1\r\nContent-Length: 8\r\n\r\nINJECTED'));
    assert.match(got, /^HTTP\/1\.1 500 Internal Server Error\r\n/);
    assert.match(got, /invalid upgrade response: status code 200$/);
    assert.doesNotMatch(got, /INJECTED|injected/);
  });

  it('"101" anywhere but the status code is no upgrade', async () => {
    const got = await through((s) => s.end('HTTP/1.1 200 101 Switching Protocols\r\n\r\nINJECTED'));
    assert.match(got, /^HTTP\/1\.1 500 /);
    assert.doesNotMatch(got, /INJECTED|101 Switching/);
    const garbage = await through((s) => s.end('XTTP/9 101 \r\n\r\nINJECTED'));
    assert.match(garbage, /^HTTP\/1\.1 500 [\s\S]*malformed status line$/);
    assert.doesNotMatch(garbage, /INJECTED/);
  });

  it('an error answer keeps its status and body, not its headers; a body past its length is dropped', async () => {
    const got = await through((s) => s.end('HTTP/1.1 404 Not Found\r\nX-Evil: 1\r\nContent-Length: 15\r\n\r\nno such sessionHTTP/1.1 200 OK\r\n\r\nINJECTED'));
    assert.match(got, /^HTTP\/1\.1 404 Not Found\r\n/);
    assert.match(got, /\r\n\r\nno such session$/);
    assert.doesNotMatch(got, /X-Evil|INJECTED/);
    // without a length: up to the backend's close, at most MAX_ERROR_BODY
    const unbounded = await through((s) => { s.write('HTTP/1.1 500 Oops\r\n\r\n'); s.end('x'.repeat(200 * 1024)); });
    assert.match(unbounded, /^HTTP\/1\.1 500 Oops\r\n/);
    assert.equal(unbounded.length - unbounded.indexOf('\r\n\r\n') - 4, 64 * 1024);
  });

  it('a head that never completes forwards nothing', async () => {
    const got = await through((s) => s.end('HTTP/1.1 101 Switching Proto'));
    assert.equal(got, '');
  });

  it('a 101 is relayed and the stream then flows both ways', async () => {
    const b = await backend((s) => {
      s.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      s.on('data', (d) => s.end(Buffer.from(d.toString().toUpperCase())));
    });
    const k = await kubelet(() => `http://127.0.0.1:${b.port}/exec/tok`);
    cleanups.push(() => b.close(), () => k.server.close());
    const got = await upgradeExchange(k.port, (s, seen) => {
      const wait = setInterval(() => { if (seen().includes('\r\n\r\n')) { clearInterval(wait); s.write('hello'); } }, 5);
    });
    assert.match(got, /^HTTP\/1\.1 101 Switching Protocols\r\n[\s\S]*\r\n\r\nHELLO$/);
  });

  describe('an https streaming server', () => {
    let dir: string;
    let cert: string;
    let key: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'kts-stream-tls-'));
      const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
        '-subj', '/CN=runtime', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem')], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      cert = readFileSync(join(dir, 'c.pem'), 'utf8');
      key = readFileSync(join(dir, 'k.pem'), 'utf8');
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    const tlsBackend = async (): Promise<number> => {
      const server = createTlsServer({ cert, key }, (s) => {
        s.on('error', () => undefined);
        s.once('data', () => s.end('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\nstream'));
      });
      server.on('tlsClientError', () => undefined);
      cleanups.push(() => server.close());
      return listen(server);
    };

    it('is refused when its certificate is not trusted, and proxied when the CA is given', async () => {
      const port = await tlsBackend();
      const k = await kubelet(() => `https://127.0.0.1:${port}/exec/tok`);
      cleanups.push(() => k.server.close());
      const refused = await upgradeExchange(k.port);
      assert.match(refused, /^HTTP\/1\.1 500 [\s\S]*error dialing backend: /);
      assert.doesNotMatch(refused, /stream/);
      const trusted = await kubelet(() => `https://127.0.0.1:${port}/exec/tok`, { ca: cert });
      cleanups.push(() => trusted.server.close());
      assert.match(await upgradeExchange(trusted.port), /^HTTP\/1\.1 101 [\s\S]*\r\n\r\nstream$/);
    });
  });
});
