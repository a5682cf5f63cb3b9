// Property-based tests of the stream proxy (exec/attach/portForward upgrades relayed to the
// runtime's streaming server) against a hostile backend: random bytes, a non-101 answer, a 101
// and then garbage, a head that never ends, an early close or a reset, a backend that never
// answers, a port nobody listens on, a TLS dial answered in plain text; and a client that sends early bytes or leaves. The
// properties: proxyUpgrade settles (it never rejects), the client's connection is closed (a
// silent backend by the idle timeout, on the injected clock), no socket is left open on either
// side, and the process goes on (a later good upgrade is proxied). Nothing here asserts what is
// relayed before the runtime's 101 (that is the proxy's own hardening, tested with it).
// Seeded: a failure prints its seed and counterexample. KTS_FUZZ_RUNS scales the runs.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http, { type IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import fc from 'fast-check';

import { proxyUpgrade } from '../../src/server/stream-proxy.js';
import { FakeClock } from '../../src/util/clock.js';
import { recordingLogger } from './raw-http.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 200;
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;
const IDLE_MS = 5_000;

type Backend =
  | { k: 'bytes'; bytes: Buffer; close: boolean }
  | { k: 'status'; status: number; headers: string[]; body: Buffer; close: boolean }
  | { k: '101-then'; bytes: Buffer; close: boolean }
  | { k: 'endless-head'; size: number }
  | { k: 'close-at-once' }
  | { k: 'reset' }
  | { k: 'silent' }
  | { k: 'nobody' }
  | { k: 'half-head'; bytes: Buffer };

const bytes = (max: number): fc.Arbitrary<Buffer> => fc.uint8Array({ maxLength: max }).map((a) => Buffer.from(a));
const backend: fc.Arbitrary<Backend> = fc.oneof(
  fc.record({ k: fc.constant('bytes' as const), bytes: fc.oneof(bytes(300), fc.constantFrom(Buffer.from('\r\n\r\n'), Buffer.from('HTTP/1.1 101\r\n\r\n'), Buffer.from('garbage\r\n\r\nmore'))), close: fc.boolean() }),
  fc.record({
    k: fc.constant('status' as const),
    status: fc.constantFrom(100, 101, 200, 204, 302, 400, 401, 403, 404, 500, 502, 999),
    headers: fc.array(fc.constantFrom('Connection: Upgrade', 'Upgrade: SPDY/3.1', 'Content-Length: 5', 'Content-Length: 100000', 'Transfer-Encoding: chunked', 'X-Stream-Protocol-Version: v4.channel.k8s.io', 'Bad Header'), { maxLength: 3 }),
    body: bytes(100),
    close: fc.boolean(),
  }),
  fc.record({ k: fc.constant('101-then' as const), bytes: bytes(500), close: fc.boolean() }),
  fc.record({ k: fc.constant('endless-head' as const), size: fc.constantFrom(10_000, 70_000, 200_000) }),
  fc.constant({ k: 'close-at-once' as const }),
  fc.constant({ k: 'reset' as const }),
  fc.constant({ k: 'silent' as const }),
  fc.constant({ k: 'nobody' as const }),
  fc.record({ k: fc.constant('half-head' as const), bytes: fc.constantFrom(Buffer.from('HTTP/1.1 101 Switching'), Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n')) }),
);
interface Client { early: Buffer; leaveAfterMs?: number; halfClose: boolean }
const client: fc.Arbitrary<Client> = fc.record({
  early: fc.oneof(fc.constant(Buffer.alloc(0)), bytes(200)),
  leaveAfterMs: fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined, freq: 4 }),
  halfClose: fc.oneof({ weight: 4, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
}, { requiredKeys: ['early', 'halfClose'] });

describe('the stream proxy against a hostile backend', { timeout: 600_000 }, () => {
  let script: Backend = { k: 'silent' };
  /** Dial the backend with TLS (it answers in plain text: the handshake meets the script). */
  let useTls = false;
  const backendSockets = new Set<net.Socket>();
  const frontSockets = new Set<net.Socket>();
  const proxies = new Set<Promise<void>>();
  let backendServer: net.Server;
  let front: http.Server;
  let backendPort = 0;
  let deadPort = 0;
  let frontPort = 0;
  const clock = new FakeClock();
  const log = recordingLogger();

  before(async () => {
    backendServer = net.createServer((sock) => {
      backendSockets.add(sock);
      sock.on('close', () => backendSockets.delete(sock));
      sock.on('error', () => undefined);
      const s = script;
      let seen = Buffer.alloc(0);
      let played = false;
      const play = (): void => {
        if (played || sock.destroyed) return;
        played = true;
        switch (s.k) {
          case 'bytes': sock.write(s.bytes); if (s.close) sock.end(); break;
          case 'status': sock.write(Buffer.concat([Buffer.from(`HTTP/1.1 ${s.status} Reason\r\n${s.headers.map((h) => `${h}\r\n`).join('')}\r\n`), s.body])); if (s.close) sock.end(); break;
          case '101-then': sock.write(Buffer.concat([Buffer.from('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n'), s.bytes])); if (s.close) sock.end(); break;
          case 'endless-head': sock.write(Buffer.alloc(s.size, 0x41)); break;
          case 'close-at-once': sock.end(); break;
          case 'reset': sock.resetAndDestroy(); break;
          case 'silent': case 'nobody': break;
          case 'half-head': sock.write(s.bytes); break;
        }
      };
      if (s.k === 'close-at-once' || s.k === 'reset') { sock.resume(); play(); return; }
      sock.on('data', (d: Buffer) => {
        seen = Buffer.concat([seen, d]);
        if (seen.includes('\r\n\r\n')) play();
      });
    });
    await new Promise<void>((r) => backendServer.listen(0, '127.0.0.1', r));
    backendPort = (backendServer.address() as net.AddressInfo).port;
    // a port nobody listens on: one taken and given back
    const tmp = net.createServer();
    await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', r));
    deadPort = (tmp.address() as net.AddressInfo).port;
    await new Promise<void>((r) => tmp.close(() => r()));

    front = http.createServer((_req, res) => { res.writeHead(404); res.end(); });
    front.on('connection', (sock: net.Socket) => { frontSockets.add(sock); sock.on('close', () => frontSockets.delete(sock)); });
    front.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const port = script.k === 'nobody' ? deadPort : backendPort;
      const p = proxyUpgrade(req, socket, head, new URL(`${useTls ? 'https' : 'http'}://127.0.0.1:${port}/exec/abc?cmd=sh`), { clock, log, idleTimeoutMs: IDLE_MS });
      proxies.add(p);
      void p.finally(() => proxies.delete(p));
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    frontPort = (front.address() as net.AddressInfo).port;
  });

  after(async () => {
    for (const s of [...backendSockets, ...frontSockets]) s.destroy();
    await new Promise<void>((r) => front.close(() => r()));
    await new Promise<void>((r) => backendServer.close(() => r()));
  });

  /** One upgrade through the proxy; resolves when the proxy has ended the client's connection. */
  function upgrade(c: Client): Promise<{ got: Buffer; closed: boolean }> {
    return new Promise((resolve) => {
      const got: Buffer[] = [];
      let done = false;
      const sock = net.connect({ port: frontPort, host: '127.0.0.1', allowHalfOpen: true }, () => {
        sock.write(Buffer.concat([Buffer.from('POST /exec/ns/pod/c?command=sh HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n'), c.early]));
        if (c.leaveAfterMs !== undefined) setTimeout(() => sock.destroy(), c.leaveAfterMs);
        if (c.halfClose) sock.end();
      });
      const finish = (closed: boolean): void => {
        if (done) return;
        done = true;
        clearInterval(stepper);
        clearTimeout(hard);
        sock.destroy();
        resolve({ got: Buffer.concat(got), closed });
      };
      // a backend that never answers is ended by the idle timeout: let the clock run
      const stepper = setInterval(() => clock.step(IDLE_MS), 100);
      const hard = setTimeout(() => finish(false), 10_000);
      sock.on('data', (d: Buffer) => got.push(d));
      sock.on('error', () => finish(true));
      sock.on('close', () => finish(true));
      // the proxy's end of the connection (a client keeping its half open closes it when it likes)
      sock.on('end', () => finish(true));
      // a relayed 101 stays open until the backend closes; a backend that keeps it open is idle
    });
  }

  async function drained(what: string): Promise<void> {
    for (let i = 0; i < 250 && (proxies.size > 0 || backendSockets.size > 0 || frontSockets.size > 0); i++) {
      clock.step(IDLE_MS);
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(proxies.size, 0, `a proxy never settled after ${what}`);
    assert.equal(backendSockets.size, 0, `a backend connection left open after ${what}`);
    assert.equal(frontSockets.size, 0, `a client connection left open after ${what}`);
  }

  it(`settles, closes the client and leaks no socket, whatever the backend does (${RUNS} runs, seed ${SEED})`, async (t) => {
    const kinds = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(backend, client, fc.oneof({ weight: 4, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }), async (b, c, tlsDial) => {
        script = b;
        useTls = tlsDial;
        const what = JSON.stringify({ tls: tlsDial, backend: { ...b, bytes: undefined, body: undefined }, client: { early: c.early.length, leaveAfterMs: c.leaveAfterMs, halfClose: c.halfClose } });
        const r = await upgrade(c);
        assert.ok(r.closed, `the client's connection was not closed: ${what}`);
        kinds.set(b.k, (kinds.get(b.k) ?? 0) + 1);
        if (b.k === 'nobody' && c.leaveAfterMs === undefined && !c.halfClose) assert.match(r.got.toString('latin1'), /^HTTP\/1\.1 500 /, `no dial error for the client: ${what}`);
        if (b.k === 'endless-head' && !tlsDial && b.size > 64 * 1024 && c.leaveAfterMs === undefined) assert.ok(r.got.length < 64 * 1024, `an oversized head was relayed: ${what}`);
        await drained(what);
      }),
      { numRuns: RUNS, seed: SEED },
    );
    t.diagnostic(`backends ${[...kinds].sort().map(([k, v]) => `${k}:${v}`).join(' ')}`);

    // and a well-behaved runtime is still proxied both ways
    script = { k: '101-then', bytes: Buffer.from('hello from the runtime'), close: true };
    useTls = false;
    const r = await upgrade({ early: Buffer.alloc(0), halfClose: false });
    assert.match(r.got.toString('latin1'), /^HTTP\/1\.1 101 [^]*hello from the runtime$/);
    await drained('a good upgrade');
  });
});
