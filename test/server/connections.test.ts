// What a connection may hold on the secure port: a TLS handshake has a deadline; strangers (not
// yet authenticated) are capped per source address and in all, so they cannot crowd out a client
// with a verified certificate; a refused stranger's connection closes; an HTTP/2 session without
// streams ends after the idle timeout however often it PINGs, and a PING flood ends it with
// GOAWAY ENHANCE_YOUR_CALM.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect as h2connect } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';

import { CertificateAuthority } from '../fixtures/test-apiserver/auth.js';
import { KubeletServer, withMethods, type Handler, type ServerLimits } from '../../src/server/server.js';
import { freePort, hostDouble, recordingLogger } from './raw-http.js';

const TOKEN = 'good-token';

function closedWithin(sock: Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (sock.destroyed) return resolve(true);
    const t = setTimeout(() => resolve(false), ms);
    sock.once('close', () => { clearTimeout(t); resolve(true); });
  });
}

describe('secure port connections', { timeout: 60_000 }, () => {
  let ca: CertificateAuthority;
  let serving: { cert: string; key: string };
  let clientCert: { cert: string; key: string };
  const servers: KubeletServer[] = [];
  const open: Socket[] = [];

  before(() => {
    ca = new CertificateAuthority();
    serving = ca.serving(['127.0.0.1']);
    clientCert = ca.client('system:kube-apiserver', []);
  });
  after(async () => {
    for (const s of open) s.destroy();
    for (const s of servers) await s.stop();
  });

  async function start(limits: Partial<ServerLimits>): Promise<number> {
    const port = await freePort();
    const ok: Handler = withMethods(['GET'], (_req, res) => { res.writeHead(200, { 'Content-Length': 2 }); res.end('ok'); });
    const server = new KubeletServer({
      host: hostDouble(), log: recordingLogger(), healthzBindAddress: '127.0.0.1', healthzPort: 0, address: '127.0.0.1', readOnlyPort: 0,
      secure: {
        address: '127.0.0.1', port,
        tls: { cert: serving.cert, key: serving.key, ca: ca.cert, requestCert: true, rejectUnauthorized: false },
        gate: {
          async admit(req) {
            const tls = req.socket as TLSSocket;
            if (tls.authorized || req.headers.authorization === `Bearer ${TOKEN}`) return undefined;
            return { status: 401, message: 'Unauthorized' };
          },
        },
        routes: new Map([['/ok', ok]]),
      },
      limits,
    });
    await server.start();
    servers.push(server);
    return port;
  }

  /** A TLS connection from `from` (a loopback address), handshaken; kept open. */
  function tls(port: number, from: string, o: { cert?: { cert: string; key: string } } = {}): Promise<TLSSocket> {
    return new Promise((resolve, reject) => {
      const s = tlsConnect({ socket: netConnect({ port, host: '127.0.0.1', localAddress: from }), ca: ca.cert, servername: '127.0.0.1', ALPNProtocols: ['http/1.1'], ...(o.cert ?? {}) });
      open.push(s);
      s.once('secureConnect', () => resolve(s));
      s.once('error', reject);
    });
  }

  /** GET /ok on a connection: the status, or 'closed' when the server ends it without an answer. */
  function get(s: TLSSocket, token?: string): Promise<number | 'closed'> {
    return new Promise((resolve) => {
      let got = '';
      s.on('data', (d) => {
        got += d.toString('latin1');
        const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
        if (m && got.includes('\r\n\r\n')) resolve(Number(m[1]));
      });
      s.once('close', () => resolve('closed'));
      s.on('error', () => undefined);
      s.write(`GET /ok HTTP/1.1\r\nHost: k\r\n${token ? `Authorization: Bearer ${token}\r\n` : ''}\r\n`);
    });
  }

  it('a client that never completes its TLS handshake is cut after tlsHandshakeTimeoutMs', async () => {
    const port = await start({ tlsHandshakeTimeoutMs: 200 });
    const s = netConnect(port, '127.0.0.1');
    open.push(s);
    s.on('error', () => undefined);
    assert.equal(await closedWithin(s, 10_000), true, 'the silent connection is still open');
  });

  it('strangers from one address are capped; another address is still served', async () => {
    const port = await start({ maxUnauthenticatedConnectionsPerIP: 3, maxUnauthenticatedConnections: 100 });
    const idle: Socket[] = [];
    for (let i = 0; i < 3; i++) {
      const s = netConnect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' });
      s.on('error', () => undefined);
      open.push(s);
      idle.push(s);
      await new Promise((r) => s.once('connect', r));
    }
    const fourth = netConnect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' });
    fourth.on('error', () => undefined);
    open.push(fourth);
    assert.equal(await closedWithin(fourth, 10_000), true, 'a fourth stranger from one address is held');
    for (const s of idle) assert.equal(s.destroyed, false);
    assert.equal(await get(await tls(port, '127.0.0.3'), TOKEN), 200);
  });

  it('strangers in all are capped, but a client with a verified certificate still gets in; a token client authenticates with its first request', async () => {
    const port = await start({ maxUnauthenticatedConnectionsPerIP: 2, maxUnauthenticatedConnections: 4 });
    // a token client that authenticated before the flood keeps its connection
    const early = await tls(port, '127.0.0.10');
    assert.equal(await get(early, TOKEN), 200);
    for (const from of ['127.0.0.11', '127.0.0.11', '127.0.0.12', '127.0.0.12']) await tls(port, from);
    const stranger = await tls(port, '127.0.0.13').catch(() => undefined);
    assert.ok(stranger === undefined || (await get(stranger, TOKEN)) === 'closed', 'a fifth stranger was served');
    assert.equal(await get(await tls(port, '127.0.0.14', { cert: clientCert })), 200);
    assert.equal(await get(early, TOKEN), 200);
  });

  it('a stranger\'s refused request closes its connection', async () => {
    const port = await start({});
    const s = await tls(port, '127.0.0.20');
    assert.equal(await get(s), 401);
    assert.equal(await closedWithin(s, 10_000), true);
  });

  it('an HTTP/2 session with no stream open ends after the idle timeout, PINGs or not', async () => {
    const port = await start({ keepAliveTimeoutMs: 300, headersTimeoutMs: 300 });
    const session = h2connect(`https://127.0.0.1:${port}`, { ca: ca.cert, ...clientCert });
    session.on('error', () => undefined);
    const req = session.request({ ':path': '/ok' });
    req.resume();
    await new Promise((r) => req.on('close', r));
    const pinger = setInterval(() => { if (!session.closed && !session.destroyed) session.ping(() => undefined); }, 50);
    const closed = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 10_000);
      session.once('goaway', () => { clearTimeout(t); resolve(true); });
      session.once('close', () => { clearTimeout(t); resolve(true); });
    });
    clearInterval(pinger);
    session.destroy();
    assert.equal(closed, true, 'the idle session is still open');
  });

  /** Raw HTTP/2 over TLS: sends the preface, a SETTINGS frame and `frames`; the GOAWAY code received, if any. */
  async function rawH2(port: number, frames: (frame: (type: number, flags: number, stream: number, payload: Buffer) => Buffer) => Buffer[]): Promise<number | undefined> {
    const s = await new Promise<TLSSocket>((resolve, reject) => {
      const c = tlsConnect({ host: '127.0.0.1', port, ca: ca.cert, ALPNProtocols: ['h2'], checkServerIdentity: () => undefined, ...clientCert });
      open.push(c);
      c.once('secureConnect', () => resolve(c));
      c.once('error', reject);
    });
    const frame = (type: number, flags: number, stream: number, payload: Buffer): Buffer => {
      const h = Buffer.alloc(9);
      h.writeUIntBE(payload.length, 0, 3);
      h[3] = type;
      h[4] = flags;
      h.writeUInt32BE(stream, 5);
      return Buffer.concat([h, payload]);
    };
    let got = Buffer.alloc(0);
    s.on('data', (d: Buffer) => { got = Buffer.concat([got, d]); });
    s.on('error', () => undefined);
    s.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(4, 0, 0, Buffer.alloc(0)), ...frames(frame)]));
    await closedWithin(s, 10_000);
    let code: number | undefined;
    for (let i = 0; i + 9 <= got.length;) {
      const len = got.readUIntBE(i, 3);
      if (got[i + 3] === 7 && i + 9 + 8 <= got.length) code ??= got.readUInt32BE(i + 9 + 4);
      i += 9 + len;
    }
    return code;
  }

  it('a flood of streams the client resets at once (rapid reset) ends the session with GOAWAY ENHANCE_YOUR_CALM', async () => {
    const port = await start({ http2ControlFrameBurst: 50, http2ControlFramesPerSecond: 1 });
    // HEADERS (END_STREAM | END_HEADERS) of GET https://k/ok (static table, literals without indexing), then RST_STREAM CANCEL
    const block = Buffer.from([0x82, 0x87, 0x04, 0x03, ...Buffer.from('/ok'), 0x01, 0x01, ...Buffer.from('k')]);
    const cancel = Buffer.alloc(4);
    cancel.writeUInt32BE(8);
    const code = await rawH2(port, (frame) => Array.from({ length: 90 }, (_, i) => [frame(1, 0x5, 2 * i + 1, block), frame(3, 0, 2 * i + 1, cancel)]).flat());
    assert.equal(code, 0xb, 'no GOAWAY ENHANCE_YOUR_CALM');
  });

  it('a SETTINGS flood ends the session with GOAWAY ENHANCE_YOUR_CALM', async () => {
    const port = await start({ http2ControlFrameBurst: 50, http2ControlFramesPerSecond: 1 });
    // SETTINGS_INITIAL_WINDOW_SIZE, set again and again
    const setting = Buffer.from([0x00, 0x04, 0x00, 0x01, 0x00, 0x00]);
    const code = await rawH2(port, (frame) => Array.from({ length: 300 }, () => frame(4, 0, 0, setting)));
    assert.equal(code, 0xb, 'no GOAWAY ENHANCE_YOUR_CALM');
  });

  it('a PING flood ends the session with GOAWAY ENHANCE_YOUR_CALM', async () => {
    const port = await start({ http2ControlFrameBurst: 50, http2ControlFramesPerSecond: 1 });
    const s = await new Promise<TLSSocket>((resolve, reject) => {
      const c = tlsConnect({ host: '127.0.0.1', port, ca: ca.cert, servername: '127.0.0.1', ALPNProtocols: ['h2'], ...clientCert });
      open.push(c);
      c.once('secureConnect', () => resolve(c));
      c.once('error', reject);
    });
    const frame = (type: number, flags: number, payload: Buffer): Buffer => {
      const h = Buffer.alloc(9);
      h.writeUIntBE(payload.length, 0, 3);
      h[3] = type;
      h[4] = flags;
      h.writeUInt32BE(0, 5);
      return Buffer.concat([h, payload]);
    };
    let got = Buffer.alloc(0);
    s.on('data', (d: Buffer) => { got = Buffer.concat([got, d]); });
    s.on('error', () => undefined);
    const pings = Array.from({ length: 300 }, (_, i) => frame(6, 0, Buffer.alloc(8, i & 0xff)));
    s.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(4, 0, Buffer.alloc(0)), ...pings]));
    await closedWithin(s, 10_000);
    // find a GOAWAY frame (type 7) and its error code
    let code: number | undefined;
    for (let i = 0; i + 9 <= got.length;) {
      const len = got.readUIntBE(i, 3);
      if (got[i + 3] === 7 && i + 9 + 8 <= got.length) code ??= got.readUInt32BE(i + 9 + 4);
      i += 9 + len;
    }
    assert.equal(code, 0xb, 'no GOAWAY ENHANCE_YOUR_CALM');
  });
});
