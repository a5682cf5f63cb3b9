// Fuzzing the container routes (/containerLogs, /exec, /attach, /portForward, /run) with random
// path segments and query strings, plain and as upgrades: every request is answered with one of
// the statuses the handlers give, never a crash or a hang, and the server still serves after.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Pod } from '../../src/api/types.js';
import { containerLogsHandler } from '../../src/server/container-logs.js';
import { attachRoute, execRoute, portForwardRoute, runHandler, type StreamingRoute } from '../../src/server/streaming.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 300;
const KNOWN = new Set([200, 400, 404, 422, 429, 500]);

const pod: Pod = {
  metadata: { name: 'web', namespace: 'ns', uid: 'u1' },
  spec: { containers: [{ name: 'app', image: 'busybox' }] },
  status: { containerStatuses: [{ name: 'app', ready: true, restartCount: 0, image: '', imageID: '', containerID: 'containerd://c1', state: { running: {} }, lastState: {} }] },
};

describe('container routes under random input', () => {
  let server: Server;
  let dir: string;
  let port: number;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-fuzz-logs-'));
    await writeFile(join(dir, '0.log'), '2026-01-01T00:00:00.000000000Z stdout F hi\n');
    const clock = new FakeClock();
    const logs = containerLogsHandler({
      clock,
      getPodByName: (ns, n) => (ns === 'ns' && n === 'web' ? pod : undefined),
      getPodStatus: () => undefined,
      containerLogPath: async () => join(dir, '0.log'),
      isContainerRunning: async () => false,
    });
    const host = {
      clock, log: loggerDouble(), streamingConnectionIdleTimeoutMs: 1000,
      getPodByName: (ns: string, n: string) => (ns === 'ns' && n === 'web' ? pod : undefined),
      findRunningContainer: (_p: Pod, n: string) => (n === 'app' ? 'c1' : undefined),
      podSandboxID: async () => 'sb',
      cri: {
        // the runtime's streaming server is absent: the proxy must answer the dial failure
        exec: async () => 'http://127.0.0.1:9/exec/x',
        attach: async () => 'http://127.0.0.1:9/attach/x',
        portForward: async () => 'http://127.0.0.1:9/portforward/x',
        execSync: async () => ({ stdout: Buffer.from('o'), stderr: Buffer.alloc(0), exit_code: 0 }),
      },
    };
    const routes: Record<string, StreamingRoute> = { exec: execRoute(host), attach: attachRoute(host), portForward: portForwardRoute(host) };
    const run = runHandler(host);
    const pick = (url: URL): string => url.pathname.split('/')[1] ?? '';
    server = createServer((req, res) => {
      let url: URL;
      try { url = new URL(req.url!, 'http://localhost'); } catch { res.writeHead(400); return void res.end(); }
      const name = pick(url);
      const p = name === 'containerLogs' ? logs(req, res, url) : name === 'run' ? run(req, res, url) : routes[name]?.handle(req, res, url);
      if (!p) { res.writeHead(404); return void res.end(); }
      void p.catch(() => { if (!res.headersSent) res.writeHead(500); res.end(); });
    });
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const url = new URL(req.url!, 'http://localhost');
      const r = routes[pick(url)];
      // (the secure server answers an upgrade to a route without one as an ordinary request)
      if (!r) return void socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      void r.upgrade(req, socket, head, url);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });

  after(async () => {
    server.closeAllConnections();
    server.close();
    await rm(dir, { recursive: true, force: true });
  });

  const seg = fc.oneof(
    fc.constantFrom('ns', 'web', 'app', 'u1', 'nope', '', '%', '%zz', '%00', '%ff', '..', 'a%2Fb'),
    fc.stringMatching(/^[A-Za-z0-9._~%-]{0,10}$/),
  );
  const param = fc.tuple(
    fc.constantFrom('follow', 'previous', 'timestamps', 'tailLines', 'tail', 'sinceSeconds', 'sinceTime', 'limitBytes', 'command', 'input', 'output', 'error', 'tty', 'port', 'cmd', 'x'),
    fc.oneof(fc.constantFrom('', '0', '1', 'true', '-1', '99999999999999999999', '2026-01-01T00:00:00Z', 'all', '%', 'ls'), fc.string({ maxLength: 8 })),
  );
  const target = fc.tuple(fc.constantFrom('containerLogs', 'exec', 'attach', 'portForward', 'run'), fc.array(seg, { maxLength: 5 }), fc.array(param, { maxLength: 5 }))
    .map(([route, segs, params]) => `/${route}/${segs.join('/')}?${params.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')}`);

  /** Sends a raw request; resolves with the status line's code, or 0 when the server closed without one. */
  const raw = (method: string, path: string, upgrade: boolean): Promise<number> => new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let buf = '';
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer to ${method} ${path}`)); }, 10_000);
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(buf);
      if (m) { clearTimeout(timer); s.destroy(); resolve(Number(m[1])); }
    });
    s.on('close', () => { clearTimeout(timer); resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(buf)?.[1] ?? 0)); });
    s.on('error', () => undefined);
    s.write(`${method} ${path} HTTP/1.1\r\nHost: k\r\n${upgrade ? 'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' : 'Connection: close\r\n'}\r\n`);
  });

  it('answers every request with a known status and keeps serving', async () => {
    await fc.assert(fc.asyncProperty(fc.constantFrom('GET', 'POST'), target, fc.boolean(), async (method, path, upgrade) => {
      const code = await raw(method, path, upgrade);
      assert.ok(KNOWN.has(code), `${method} ${path} upgrade=${upgrade}: ${code}`);
    }), { numRuns: RUNS });
    assert.equal(await raw('GET', '/containerLogs/ns/web/app', false), 200);
  });
});
