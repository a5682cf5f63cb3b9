// /exec, /attach, /portForward and /run on a plain node http server with a host double and a
// stand-in runtime streaming server: the CRI request made from the query, the upgrade proxied
// both ways byte for byte, a refusal relayed, upstream's error answers, and the idle timeout
// on a FakeClock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Pod } from '../../src/api/types.js';
import { CriError } from '../../src/runtime/cri-errors.js';
import { attachRoute, execRoute, portForwardRoute, runHandler, type StreamingHost, type StreamingRoute } from '../../src/server/streaming.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

const pod: Pod = {
  metadata: { name: 'web', namespace: 'ns1', uid: 'u1' },
  spec: { containers: [{ name: 'app', image: 'busybox', tty: true } as never] },
};

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** A stand-in runtime streaming server: upgrades /exec/<token> and echoes bytes upper-cased; refuses the rest. */
async function runtimeServer(): Promise<{ port: number; server: Server; heads: string[] }> {
  const heads: string[] = [];
  const server = createServer((_req, res) => { res.writeHead(404); res.end('no such session'); });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    heads.push(`${req.method} ${req.url} upgrade=${req.headers.upgrade} auth=${req.headers.authorization ?? ''} xff=${req.headers['x-forwarded-for'] ?? ''}`);
    if (!req.url!.startsWith('/exec/') && !req.url!.startsWith('/portforward/')) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 15\r\nConnection: close\r\n\r\nno such session');
      return;
    }
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    const upper = (d: Buffer): Buffer => Buffer.from(d.map((b) => (b >= 0x61 && b <= 0x7a ? b - 32 : b)));
    if (head.length) socket.write(upper(head));
    socket.on('data', (d: Buffer) => socket.write(upper(d)));
    socket.on('end', () => socket.end());
  });
  return { port: await listen(server), server, heads };
}

function host(runtimePort: number, clock: FakeClock, calls: unknown[]): StreamingHost {
  return {
    clock,
    log: loggerDouble(),
    streamingConnectionIdleTimeoutMs: 60_000,
    getPodByName: (ns, name) => (ns === 'ns1' && name === 'web' ? pod : undefined),
    findRunningContainer: (_p, name) => (name === 'app' ? 'cid-app' : undefined),
    podSandboxID: async () => 'sb1',
    cri: {
      exec: async (r) => { calls.push(['exec', r]); return `http://127.0.0.1:${runtimePort}/exec/tok1`; },
      attach: async (r) => { calls.push(['attach', r]); return `http://127.0.0.1:${runtimePort}/attach/gone`; },
      portForward: async (r) => { calls.push(['portForward', r]); return `http://127.0.0.1:${runtimePort}/portforward/tok2`; },
      execSync: async (id, cmd) => {
        calls.push(['execSync', id, cmd]);
        if (cmd[0] === 'missing') throw new CriError('ExecSync', 5, 'container is gone');
        if (cmd[0] === 'false') return { stdout: Buffer.alloc(0), stderr: Buffer.from('boom'), exit_code: 1 };
        return { stdout: Buffer.from('out;'), stderr: Buffer.from('err'), exit_code: 0 };
      },
    },
  };
}

async function kubeletServer(h: StreamingHost): Promise<{ port: number; server: Server }> {
  const routes: Record<string, StreamingRoute> = { exec: execRoute(h), attach: attachRoute(h), portForward: portForwardRoute(h) };
  const run = runHandler(h);
  const route = (url: URL): StreamingRoute | undefined => routes[url.pathname.split('/')[1]!];
  const server = createServer((req, res) => {
    const url = new URL(req.url!, 'http://localhost');
    if (url.pathname.startsWith('/run/')) return void run(req, res, url);
    const r = route(url);
    if (!r) { res.writeHead(404); return void res.end(); }
    void r.handle(req, res, url);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url!, 'http://localhost');
    void route(url)?.upgrade(req, socket, head, url);
  });
  return { port: await listen(server), server };
}

/** Sends an upgrade request; resolves with the socket and what arrived until `until` matched. */
function upgradeRequest(port: number, path: string, extra = '', early = ''): Promise<{ socket: Socket; read: (until: RegExp) => Promise<string>; closed: Promise<void> }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let buf = '';
    const waiters: (() => void)[] = [];
    socket.on('data', (d) => { buf += d.toString('latin1'); for (const w of waiters.splice(0)) w(); });
    const closed = new Promise<void>((r) => socket.on('close', () => { r(); for (const w of waiters.splice(0)) w(); }));
    socket.on('error', () => undefined);
    socket.on('connect', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: kubelet\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nAuthorization: Bearer t0k\r\n${extra}\r\n${early}`);
      resolve({
        socket,
        closed,
        read: async (until) => {
          while (!until.test(buf)) {
            if (socket.destroyed) break;
            await new Promise<void>((r) => waiters.push(r));
          }
          return buf;
        },
      });
    });
  });
}

test('exec: the CRI request follows the query, the upgrade is proxied both ways, idle timeout ends it', async (t) => {
  const rt = await runtimeServer();
  const clock = new FakeClock();
  const calls: unknown[] = [];
  const k = await kubeletServer(host(rt.port, clock, calls));
  t.after(() => { rt.server.close(); k.server.close(); });

  const c = await upgradeRequest(k.port, '/exec/ns1/web/app?command=sh&command=-c&command=echo%20hi&input=1&output=1&error=1&tty=1', '', 'early');
  const got = await c.read(/EARLY/);
  assert.match(got, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
  // tty drops stderr, as upstream
  assert.deepEqual(calls, [['exec', { container_id: 'cid-app', cmd: ['sh', '-c', 'echo hi'], tty: true, stdin: true, stdout: true, stderr: false }]]);
  assert.match(rt.heads[0]!, /^GET \/exec\/tok1 upgrade=SPDY\/3\.1 auth=Bearer t0k xff=127\.0\.0\.1$/);
  // binary passes untouched (the stand-in upper-cases ASCII letters only)
  c.socket.write(Buffer.from('ping \x00\xff\x80 bytes', 'latin1'));
  assert.match(await c.read(/BYTES/), /PING \x00\xff\x80 BYTES/);
  // idle: no traffic for the timeout closes both sides
  clock.step(59_000);
  assert.equal(c.socket.destroyed, false);
  c.socket.write('still here');
  await c.read(/STILL HERE/);
  clock.step(59_000);
  assert.equal(c.socket.destroyed, false, 'traffic resets the idle timer');
  clock.step(2_000);
  await c.closed;
});

test('a refusal of the runtime is relayed; upstream answers for bad requests', async (t) => {
  const rt = await runtimeServer();
  const calls: unknown[] = [];
  const k = await kubeletServer(host(rt.port, new FakeClock(), calls));
  t.after(() => { rt.server.close(); k.server.close(); });
  const statusOf = async (path: string): Promise<string> => {
    const c = await upgradeRequest(k.port, path);
    await c.closed;
    return c.read(/$/);
  };
  // attach uses the container's tty from its spec and no stderr with it; the runtime's 404 comes back as is
  assert.match(await statusOf('/attach/ns1/web/app?output=1&error=1'), /^HTTP\/1\.1 404 Not Found[\s\S]*no such session$/);
  assert.deepEqual(calls.at(-1), ['attach', { container_id: 'cid-app', stdin: false, tty: true, stdout: true, stderr: false }]);
  assert.match(await statusOf('/exec/ns1/nope/app?output=1'), /^HTTP\/1\.1 404 [\s\S]*pod does not exist$/);
  assert.match(await statusOf('/exec/ns1/web/app?command=ls'), /^HTTP\/1\.1 400 [\s\S]*you must specify at least 1 of stdin, stdout, stderr$/);
  assert.match(await statusOf('/exec/ns1/web/other?output=1'), /^HTTP\/1\.1 500 [\s\S]*container not found \("other"\)$/);
  assert.match(await statusOf('/exec/ns1/web/wrong-uid/app?output=1'), /^HTTP\/1\.1 500 [\s\S]*container not found/);
  assert.match(await statusOf('/portForward/ns1/web/wrong-uid'), /^HTTP\/1\.1 404 [\s\S]*pod not found$/);
  // without an upgrade: upstream's proxy refuses with a 500
  const plain = await fetch(`http://127.0.0.1:${k.port}/exec/ns1/web/app?output=1&command=ls`);
  assert.equal(plain.status, 500);
  assert.equal(await plain.text(), 'Upgrade request required\n');
});

test('portForward: SPDY names no ports, WebSocket ones come from the query and are checked', async (t) => {
  const rt = await runtimeServer();
  const calls: unknown[] = [];
  const k = await kubeletServer(host(rt.port, new FakeClock(), calls));
  t.after(() => { rt.server.close(); k.server.close(); });
  const c = await upgradeRequest(k.port, '/portForward/ns1/web');
  assert.match(await c.read(/101/), /^HTTP\/1\.1 101/);
  c.socket.destroy();
  assert.deepEqual(calls.at(-1), ['portForward', { pod_sandbox_id: 'sb1', port: [] }]);
  const ws = (q: string): Promise<{ socket: Socket; read: (u: RegExp) => Promise<string>; closed: Promise<void> }> => new Promise((resolve) => {
    const socket = connect(k.port, '127.0.0.1');
    let buf = '';
    socket.on('data', (d) => { buf += d; });
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('connect', () => {
      socket.write(`GET /portForward/ns1/web${q} HTTP/1.1\r\nHost: k\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
      resolve({ socket, closed, read: async () => buf });
    });
  });
  const missing = await ws('');
  await missing.closed;
  assert.match(await missing.read(/$/), /^HTTP\/1\.1 400 [\s\S]*query parameter "port" is required$/);
  const zero = await ws('?port=0');
  await zero.closed;
  assert.match(await zero.read(/$/), /port "0" must be > 0$/);
  const good = await ws('?port=80&port=8080');
  await new Promise((r) => setTimeout(r, 50));
  good.socket.destroy();
  assert.deepEqual(calls.at(-1), ['portForward', { pod_sandbox_id: 'sb1', port: [80, 8080] }]);
});

test('/run answers the output (stdout then stderr); a failed command and a runtime NotFound as upstream', async (t) => {
  const rt = await runtimeServer();
  const calls: unknown[] = [];
  const k = await kubeletServer(host(rt.port, new FakeClock(), calls));
  t.after(() => { rt.server.close(); k.server.close(); });
  const post = async (path: string): Promise<[number, string, string | null]> => {
    const r = await fetch(`http://127.0.0.1:${k.port}${path}`, { method: 'POST' });
    return [r.status, await r.text(), r.headers.get('content-type')];
  };
  assert.deepEqual(await post('/run/ns1/web/app?cmd=echo%20a%20b'), [200, 'out;err', 'application/json']);
  assert.deepEqual(calls.at(-1), ['execSync', 'cid-app', ['echo', 'a', 'b']]);
  assert.deepEqual((await post('/run/ns1/web/app?cmd=false')).slice(0, 2), [500, "command 'false' exited with 1: boom"]);
  assert.deepEqual((await post('/run/ns1/web/app?cmd=missing')).slice(0, 2), [404, 'container is gone']);
  assert.deepEqual((await post('/run/ns1/nope/app?cmd=ls')).slice(0, 2), [404, 'pod does not exist']);
});
