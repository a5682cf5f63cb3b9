// The servers' routes over real sockets on 127.0.0.1: every route, its methods, status codes and
// bodies; the healthz port as upstream's (ping only); and what a broken request or handler does.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { Server } from 'node:http';

import { KubeletServer, metricsHandler, withMethods, type Handler } from '../../src/server/server.js';
import { ServerListenError } from '../../src/server/errors.js';
import { statsRoutes, type SummarySource } from '../../src/stats/routes.js';
import type { Summary } from '../../src/stats/summary.js';
import { Registry } from '../../src/metrics/registry.js';
import { isKubeletError } from '../../src/util/errors.js';
import { exchange, get, hostDouble, recordingLogger, startServers, type TestServers } from './raw-http.js';

const summary: Summary = { node: { nodeName: 'node-a', startTime: new Date(1_767_225_600_000) }, pods: [] };

function req(method: string, target: string, extra = ''): string {
  return `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`;
}

describe('healthz port (10248): ping only, as upstream', { timeout: 30_000 }, () => {
  let s: TestServers;
  before(async () => { s = await startServers(); });
  after(() => s.stop());

  it('answers ok with upstream headers', async () => {
    const { response } = await get(s.healthzPort, '/healthz');
    assert.equal(response?.status, 200);
    assert.equal(response?.body, 'ok');
    assert.equal(response?.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(response?.headers['x-content-type-options'], 'nosniff');
  });

  it('stays 200 when the runtime, the PLEG and the sync loop are unhealthy; ?verbose shows them as warn lines', async () => {
    s.host.checks = [
      { name: 'ping', ok: true, message: 'ok' },
      { name: 'syncloop', ok: false, message: 'sync loop is not running' },
      { name: 'pleg', ok: false, message: 'pleg was last seen active 4m0s ago; threshold is 3m0s' },
      { name: 'runtime', ok: false, message: 'container runtime is down' },
    ];
    try {
      const plain = await get(s.healthzPort, '/healthz');
      assert.equal(plain.response?.status, 200);
      assert.equal(plain.response?.body, 'ok');
      const verbose = await get(s.healthzPort, '/healthz?verbose');
      assert.equal(verbose.response?.status, 200);
      assert.equal(
        verbose.response?.body,
        '[+]ping ok\n' +
          'warn: syncloop is not healthy (a node Ready condition, not a healthz check): sync loop is not running\n' +
          'warn: pleg is not healthy (a node Ready condition, not a healthz check): pleg was last seen active 4m0s ago; threshold is 3m0s\n' +
          'warn: runtime is not healthy (a node Ready condition, not a healthz check): container runtime is down\n' +
          'healthz check passed\n',
      );
    } finally {
      s.host.checks = hostDouble().checks;
    }
  });

  it('?verbose when healthy is the check list and the footer', async () => {
    const { response } = await get(s.healthzPort, '/healthz?verbose');
    assert.equal(response?.body, '[+]ping ok\nhealthz check passed\n');
  });

  it('answers any method, as a Go ServeMux handler (HEAD without a body)', async () => {
    for (const m of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const { response } = await exchange(s.healthzPort, [req(m, '/healthz')]);
      assert.equal(response?.status, 200, m);
      assert.equal(response?.body, 'ok', m);
    }
    const head = await exchange(s.healthzPort, [req('HEAD', '/healthz')], { head: true });
    assert.equal(head.response?.status, 200);
    assert.equal(head.response?.headers['content-length'], '2');
    assert.equal(head.raw.endsWith('\r\n\r\n'), true, 'no body after the head');
  });

  it('serves /healthz/ping; every other path, /healthz/ and the kubelet server checks are 404', async () => {
    assert.equal((await get(s.healthzPort, '/healthz/ping')).response?.body, 'ok');
    for (const p of ['/healthz/syncloop', '/healthz/log', '/healthz/', '/pods', '/', '/metrics', '/healthzz']) {
      const { response } = await get(s.healthzPort, p);
      assert.equal(response?.status, 404, p);
      assert.equal(response?.body, '404 page not found\n', p);
    }
  });

  it('?exclude marks a check excluded and warns about names it does not know', async () => {
    const { response } = await get(s.healthzPort, '/healthz?verbose&exclude=ping&exclude=etcd');
    assert.equal(response?.body, '[+]ping excluded: ok\nwarn: some health checks cannot be excluded: no matches for "etcd"\nhealthz check passed\n');
  });
});

describe('read-only port (10255)', { timeout: 30_000 }, () => {
  let s: TestServers;
  let registry: Registry;
  let source: SummarySource;
  before(async () => {
    registry = new Registry();
    registry.counter({ name: 'kubelet_test_total', help: 'A test counter.' }).inc();
    source = { getSummary: () => Promise.resolve(summary) };
    const routes = new Map<string, Handler>([
      ...statsRoutes({ getSummary: () => source.getSummary() }),
      ['/metrics', metricsHandler(registry)],
    ]);
    s = await startServers({ routes });
    s.host.pods = [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'default', uid: 'u1' }, spec: { containers: [] } } as never];
  });
  after(() => s.stop());

  it('GET /pods and /pods/ answer the PodList', async () => {
    for (const p of ['/pods', '/pods/']) {
      const { response } = await get(s.readOnlyPort, p);
      assert.equal(response?.status, 200, p);
      assert.equal(response?.headers['content-type'], 'application/json');
      const list = JSON.parse(response!.body) as { kind: string; apiVersion: string; items: Array<{ metadata: { name: string } }> };
      assert.equal(list.kind, 'PodList');
      assert.equal(list.apiVersion, 'v1');
      assert.deepEqual(list.items.map((p) => p.metadata.name), ['web']);
    }
  });

  it('/pods is GET only: other methods, HEAD included, are 405 with Allow: GET', async () => {
    for (const m of ['POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH']) {
      const { response } = await exchange(s.readOnlyPort, [req(m, '/pods')], { head: m === 'HEAD' });
      assert.equal(response?.status, 405, m);
      assert.equal(response?.headers.allow, 'GET', m);
      if (m !== 'HEAD') assert.equal(response?.body, '405: Method Not Allowed');
    }
  });

  it('/healthz checks ping, log and syncloop', async () => {
    assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
    const { response } = await get(s.readOnlyPort, '/healthz?verbose');
    assert.equal(response?.body, '[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n');
    for (const c of ['ping', 'log', 'syncloop']) assert.equal((await get(s.readOnlyPort, `/healthz/${c}`)).response?.body, 'ok', c);
    assert.equal((await get(s.readOnlyPort, '/healthz/pleg')).response?.status, 404);
  });

  it('a stuck sync loop fails /healthz with the reason withheld and logged; /healthz/syncloop names it', async () => {
    s.host.checks = [{ name: 'syncloop', ok: false, message: 'sync Loop took longer than expected (400s)' }];
    try {
      const { response } = await get(s.readOnlyPort, '/healthz');
      assert.equal(response?.status, 500);
      assert.equal(response?.body, '[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n');
      const logged = s.log.lines.find((l) => l.msg === 'healthz check failed');
      assert.match(String(logged?.fields.reasons), /sync Loop took longer than expected \(400s\)/);
      const one = await get(s.readOnlyPort, '/healthz/syncloop');
      assert.equal(one.response?.status, 500);
      assert.equal(one.response?.body, 'internal server error: sync Loop took longer than expected (400s)\n');
      // Excluding the failing check passes.
      const ex = await get(s.readOnlyPort, '/healthz?exclude=syncloop');
      assert.equal(ex.response?.status, 200);
    } finally {
      s.host.checks = hostDouble().checks;
    }
  });

  it('an unhealthy runtime or PLEG does not fail /healthz; ?verbose shows them', async () => {
    s.host.checks = [
      { name: 'syncloop', ok: true, message: 'ok' },
      { name: 'pleg', ok: false, message: 'pleg has not started' },
      { name: 'runtime', ok: true, message: 'ok' },
      { name: 'cri', ok: false, message: 'status failed:\n[+]syncloop ok\r\n' },
    ];
    try {
      assert.equal((await get(s.readOnlyPort, '/healthz')).response?.status, 200);
      const { response } = await get(s.readOnlyPort, '/healthz?verbose');
      assert.equal(response?.status, 200);
      assert.match(response!.body, /^warn: pleg is not healthy \(a node Ready condition, not a healthz check\): pleg has not started$/m);
      assert.doesNotMatch(response!.body, /runtime/);
      // A message cannot forge a check line.
      assert.match(response!.body, /^warn: cri is not healthy \(a node Ready condition, not a healthz check\): status failed: \[\+\]syncloop ok$/m);
      assert.equal(response!.body.match(/^\[\+\]syncloop ok$/gm)?.length, 1);
    } finally {
      s.host.checks = hostDouble().checks;
    }
  });

  it('/stats/summary answers GET and POST (as upstream), 405 otherwise; a failing provider is a 500 naming the error', async () => {
    for (const m of ['GET', 'POST']) {
      const { response } = await exchange(s.readOnlyPort, [req(m, '/stats/summary')]);
      assert.equal(response?.status, 200, m);
      assert.equal(response?.headers['content-type'], 'application/json');
      assert.equal((JSON.parse(response!.body) as { node: { nodeName: string } }).node.nodeName, 'node-a');
    }
    const put = await exchange(s.readOnlyPort, [req('PUT', '/stats/summary')]);
    assert.equal(put.response?.status, 405);
    assert.equal(put.response?.headers.allow, 'GET, POST');
    source = { getSummary: () => Promise.reject(new Error('cgroup mounts unreadable')) };
    try {
      const { response } = await get(s.readOnlyPort, '/stats/summary');
      assert.equal(response?.status, 500);
      assert.equal(response?.body, 'Internal Error: failed to get stats summary: cgroup mounts unreadable\n');
    } finally {
      source = { getSummary: () => Promise.resolve(summary) };
    }
  });

  it('/metrics/resource answers any method; a provider that throws synchronously is a logged 500, not a crash', async () => {
    for (const m of ['GET', 'POST']) {
      const { response } = await exchange(s.readOnlyPort, [req(m, '/metrics/resource')]);
      assert.equal(response?.status, 200, m);
      assert.match(response!.body, /^resource_scrape_error 0$/m);
    }
    source = { getSummary: () => { throw new Error('stats provider not started'); } };
    try {
      const { response } = await get(s.readOnlyPort, '/metrics/resource');
      assert.equal(response?.status, 500);
      const line = s.log.lines.find((l) => l.msg === 'HTTP handler failed' && l.fields.path === '/metrics/resource');
      assert.equal(line?.fields.err, 'stats provider not started');
    } finally {
      source = { getSummary: () => Promise.resolve(summary) };
    }
  });

  it('/metrics answers any method with the registry text; HEAD has the length and no body', async () => {
    for (const m of ['GET', 'POST']) {
      const { response } = await exchange(s.readOnlyPort, [req(m, '/metrics')]);
      assert.equal(response?.status, 200, m);
      assert.equal(response?.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
      assert.match(response!.body, /^kubelet_test_total 1$/m);
    }
    const head = await exchange(s.readOnlyPort, [req('HEAD', '/metrics')], { head: true });
    assert.equal(head.response?.status, 200);
    assert.ok(Number(head.response?.headers['content-length']) > 0);
    assert.ok(head.raw.endsWith('\r\n\r\n'));
  });

  it('unknown paths are 404', async () => {
    for (const p of ['/', '/podsx', '/stats', '/stats/summary/x', '/metrics/cadvisor', '/%00', '/pods%ff']) {
      const { response } = await get(s.readOnlyPort, p);
      assert.equal(response?.status, 404, p);
      assert.equal(response?.body, '404 page not found\n', p);
    }
  });
});

describe('request targets no longer crash the process (defect 1)', { timeout: 30_000 }, () => {
  let s: TestServers;
  before(async () => { s = await startServers(); });
  after(() => s.stop());

  it('`GET //` is redirected to `/` as Go\'s ServeMux does, and the server keeps serving', async () => {
    const { response } = await get(s.readOnlyPort, '//');
    assert.equal(response?.status, 301);
    assert.equal(response?.headers.location, '/');
    assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
    const hz = await get(s.healthzPort, '//');
    assert.equal(hz.response?.status, 301);
  });

  it('unclean paths redirect to their clean form with the query kept; escapes are decoded first', async () => {
    const cases: Array<[string, string]> = [
      ['//pods', '/pods'],
      ['/pods/../healthz?verbose', '/healthz?verbose'],
      ['/./pods/', '/pods/'],
      ['/../../etc/passwd', '/etc/passwd'],
      ['/%2e%2e/pods', '/pods'],
      ['/a/%2F/b', '/a/b'],
      ['///evil.example/x', '/evil.example/x'],
      ['/x/..%0d%0aSet-Cookie:%20a=b/..', '/x'],
    ];
    for (const [target, location] of cases) {
      const { response } = await get(s.readOnlyPort, target);
      assert.equal(response?.status, 301, target);
      assert.equal(response?.headers.location, location, target);
    }
    const crlf = await get(s.readOnlyPort, '//a%0d%0aX-Injected:%201');
    assert.equal(crlf.response?.headers.location, '/a%0D%0AX-Injected:%201');
    assert.equal(crlf.response?.headers['x-injected'], undefined);
  });

  it('a malformed escape is a 400 that says so', async () => {
    for (const t of ['/%', '/%zz', '/pods%4', '/%g0/healthz']) {
      const { response } = await get(s.readOnlyPort, t);
      assert.equal(response?.status, 400, t);
      assert.equal(response?.body, '400 Bad Request: invalid URL escape in path\n', t);
      assert.equal(response?.headers.connection, 'close');
    }
  });

  it('absolute-form targets route on their path; asterisk-form is OPTIONS only', async () => {
    assert.equal((await get(s.readOnlyPort, 'http://node-a:10255/healthz')).response?.body, 'ok');
    const star = await exchange(s.readOnlyPort, [req('OPTIONS', '*')]);
    assert.equal(star.response?.status, 200);
    assert.equal(star.response?.headers['content-length'], '0');
    const getStar = await get(s.readOnlyPort, '*');
    assert.equal(getStar.response?.status, 400);
    assert.match(getStar.response!.body, /asterisk-form/);
  });

  it('targets, methods and heads node cannot parse are a 400 or 431 with the reason; CONNECT is a 405', async () => {
    const bad = await exchange(s.readOnlyPort, ['FOO /pods HTTP/1.1\r\nHost: x\r\n\r\n']);
    assert.equal(bad.response?.status, 400);
    assert.match(bad.response!.body, /^400 Bad Request: .*method/i);
    const ctl = await exchange(s.readOnlyPort, ['GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n']);
    assert.equal(ctl.response?.status, 400);
    const noHost = await exchange(s.readOnlyPort, ['GET /pods HTTP/1.1\r\n\r\n']);
    assert.equal(noHost.response?.status, 400);
    const big = await exchange(s.readOnlyPort, [`GET /pods HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`]);
    assert.equal(big.response?.status, 431);
    assert.match(big.response!.body, /request head exceeds 16384 bytes/);
    const tunnel = await exchange(s.readOnlyPort, ['CONNECT node-a:443 HTTP/1.1\r\nHost: node-a:443\r\n\r\n']);
    assert.equal(tunnel.response?.status, 405);
    assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
  });

  it('a request with a body is answered without reading it, and the connection closes', async () => {
    const body = 'x'.repeat(100_000);
    const r = await exchange(s.readOnlyPort, [`POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`, body]);
    assert.equal(r.response?.status, 200);
    assert.equal(r.response?.headers.connection, 'close');
    const chunked = await exchange(s.readOnlyPort, ['GET /pods HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n']);
    assert.equal(chunked.response?.status, 200);
    assert.equal(chunked.response?.headers.connection, 'close');
  });

  it('Expect: 100-continue is answered with the final status, never an invitation to send the body', async () => {
    const r = await exchange(s.readOnlyPort, ['POST /pods HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n']);
    assert.equal(r.response?.status, 405);
    assert.doesNotMatch(r.raw, /100 Continue/);
  });
});

describe('handler failures are logged 500s naming the path, and the server keeps serving', { timeout: 30_000 }, () => {
  let s: TestServers;
  before(async () => {
    const routes = new Map<string, Handler>([
      ['/throws', withMethods('any', () => { throw new Error('sync failure'); })],
      ['/rejects', withMethods('any', () => Promise.reject(new Error('async failure')))],
      ['/silent', withMethods('any', () => undefined)],
      ['/half', withMethods('any', (_req, res) => { res.writeHead(200, { 'Content-Length': 10 }); res.write('12345'); throw new Error('failed mid-answer'); })],
      ['/metrics', metricsHandler({ metricsText: () => { throw new Error('collector failed'); } })],
      ['/plain', (_req, res) => { res.end('plain'); }],
    ]);
    s = await startServers({ routes });
  });
  after(() => s.stop());

  for (const [path, err] of [['/throws', 'sync failure'], ['/rejects', 'async failure'], ['/silent', 'handler returned without answering'], ['/metrics', 'collector failed']]) {
    it(`${path}: 500 and a log line with the path`, async () => {
      const { response } = await get(s.readOnlyPort, path!);
      assert.equal(response?.status, 500);
      assert.equal(response?.body, '500 Internal Server Error\n');
      const line = s.log.lines.find((l) => l.severity === 'E' && l.fields.path === path);
      assert.equal(line?.msg, 'HTTP handler failed');
      assert.equal(line?.fields.err, err);
      assert.equal(line?.fields.server, 'read-only');
      assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
    });
  }

  it('a route registered without methods answers GET only', async () => {
    assert.equal((await get(s.readOnlyPort, '/plain')).response?.body, 'plain');
    const post = await exchange(s.readOnlyPort, [req('POST', '/plain')]);
    assert.equal(post.response?.status, 405);
    assert.equal(post.response?.headers.allow, 'GET');
  });

  it('a handler that fails after its headers went out has its connection cut (a truncated answer, not a hang)', async () => {
    const r = await get(s.readOnlyPort, '/half');
    assert.equal(r.closed, true);
    assert.equal(r.timedOut, false);
    assert.equal(r.response, undefined);
    assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
  });

  it('a host whose healthChecks() throws is a 500 on /healthz', async () => {
    const host = hostDouble();
    host.healthChecks = () => { throw new Error('kubelet not constructed'); };
    const t = await startServers({ host });
    try {
      assert.equal((await get(t.healthzPort, '/healthz')).response?.status, 500);
      assert.equal((await get(t.healthzPort, '/healthz')).response?.status, 500);
    } finally {
      await t.stop();
    }
  });

  it('errors the server emits after listening (EMFILE at accept) are logged, not thrown', async () => {
    const servers = (s.server as unknown as { servers: Server[] }).servers;
    // Twice: accept errors repeat while descriptors run out.
    for (let i = 0; i < 2; i++) servers[0]!.emit('error', Object.assign(new Error('accept EMFILE'), { code: 'EMFILE' }));
    assert.ok(s.log.lines.some((l) => l.msg === 'HTTP server error' && l.fields.err === 'accept EMFILE'));
    assert.equal((await get(s.healthzPort, '/healthz')).response?.body, 'ok');
  });
});

describe('what one client can make a server hold is bounded', { timeout: 30_000 }, () => {
  let s: TestServers;
  before(async () => {
    s = await startServers({
      limits: { headersTimeoutMs: 200, requestTimeoutMs: 400, connectionsCheckingIntervalMs: 25, socketIdleTimeoutMs: 300, keepAliveTimeoutMs: 300, maxConnections: 8, rejectLingerMs: 100 },
    });
  });
  after(() => s.stop());

  it('a client that sends its head slowly gets a 408 and the connection ends', async () => {
    const r = await exchange(s.readOnlyPort, ['GET /pods HTTP/1.1\r\n', 'Host: x\r\n'], { gapMs: 10, stall: true, deadlineMs: 3000 });
    assert.equal(r.timedOut, false);
    assert.equal(r.response?.status, 408);
  });

  it('a connection that sends nothing gets a 408 when the head timeout passes', async () => {
    const r = await exchange(s.readOnlyPort, [], { stall: true, deadlineMs: 3000 });
    assert.equal(r.timedOut, false);
    assert.equal(r.response?.status, 408);
  });

  it('a connection idle past socketIdleTimeoutMs is closed', async () => {
    const t = await startServers({ limits: { headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, socketIdleTimeoutMs: 200 } });
    try {
      const r = await exchange(t.readOnlyPort, [], { stall: true, deadlineMs: 3000 });
      assert.equal(r.timedOut, false);
      assert.equal(r.closed, true);
    } finally {
      await t.stop();
    }
  });

  it('a body that never ends does not hold the connection', async () => {
    const r = await exchange(s.readOnlyPort, ['POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n', 'abc'], { stall: true, deadlineMs: 3000 });
    assert.equal(r.timedOut, false);
    assert.equal(r.response?.status, 200);
  });

  it('connections past maxConnections are dropped at accept; the server serves again once they go', async () => {
    // Start from no open connection (the cases above leave theirs closing).
    const readOnly = (s.server as unknown as { servers: Server[] }).servers[1]!;
    const count = (): Promise<number> => new Promise((r) => readOnly.getConnections((_e, n) => r(n)));
    for (let i = 0; i < 100 && (await count()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    const held = await Promise.all(Array.from({ length: 8 }, () => new Promise<ReturnType<typeof connect>>((resolve) => {
      const c = connect(s.readOnlyPort, '127.0.0.1', () => resolve(c));
      c.on('error', () => resolve(c));
    })));
    const dropped = await exchange(s.readOnlyPort, [req('GET', '/healthz')], { deadlineMs: 2000 });
    assert.equal(dropped.closed, true);
    assert.equal(dropped.response, undefined);
    for (const c of held) c.destroy();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
  });

  it('contradictory limits are refused by name', () => {
    assert.throws(
      () => new KubeletServer({ host: hostDouble(), log: recordingLogger(), healthzBindAddress: '127.0.0.1', healthzPort: 0, address: '127.0.0.1', readOnlyPort: 0, limits: { headersTimeoutMs: 10, requestTimeoutMs: 5 } }),
      (e: unknown) => isKubeletError(e, 'ERR_SERVER_LIMITS') && /headersTimeoutMs/.test((e as Error).message),
    );
  });

  it('a port in use is a ServerListenError naming the server and address', async () => {
    const other = new KubeletServer({ host: hostDouble(), log: recordingLogger(), healthzBindAddress: '127.0.0.1', healthzPort: s.healthzPort, address: '127.0.0.1', readOnlyPort: 0 });
    await assert.rejects(other.start(), (e: unknown) => e instanceof ServerListenError && e.code === 'ERR_SERVER_LISTEN' && e.message.includes(`healthz on 127.0.0.1:${s.healthzPort}`));
  });
});
