// Property-based fuzzing of every route on both servers over real sockets on 127.0.0.1, with a
// raw client (random methods, `//`, `..`, good and broken escapes, absolute- and asterisk-form
// targets, odd versions, huge heads and bodies, dribbled and stalled clients). Properties: no
// crash (a normal GET is answered after every input), no hang (every exchange ends within a
// deadline, answered or closed by the server), and every rejection is a 4xx that says why.
// KTS_FUZZ_RUNS scales the number of generated requests (default 400, slow-client batches 6).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';

import { metricsHandler, type Handler } from '../../src/server/server.js';
import { statsRoutes } from '../../src/stats/routes.js';
import type { Summary } from '../../src/stats/summary.js';
import { Registry } from '../../src/metrics/registry.js';
import { exchange, get, type RawExchange, type TestServers, startServers } from './raw-http.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 400;
const SLOW_BATCHES = Math.max(3, Math.round(RUNS / 70));
// Hang detection, far above the server limits below; generous because CI machines are loaded.
const DEADLINE_MS = 10_000;

// Statuses the servers give: answers, redirects, and the 4xx of a rejection.
const KNOWN = new Set([200, 301, 400, 404, 405, 408, 417, 431]);

const summary: Summary = { node: { nodeName: 'node-a', startTime: new Date(1_767_225_600_000) }, pods: [] };

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'CONNECT', 'QUERY', 'PROPFIND', 'M-SEARCH', 'PURGE'];
const methodArb = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...METHODS) },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z-]{1,12}$/) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 8 }) },
);

const segmentArb = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('', '.', '..', 'pods', 'healthz', 'ping', 'log', 'syncloop', 'pleg', 'stats', 'summary', 'metrics', 'resource', '%2e%2e', '%2e', '%2F', '%2f', '%5C', '%', '%z', '%zz', '%00', '%ff', '%c3%28', '%41', '%0d%0a', '*', '~', ';', '@', ':', '\\') },
  { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~%!$&'()*+,;=:@-]{0,12}$/) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 6 }) },
);
const targetArb = fc
  .tuple(
    fc.constantFrom('/', '/', '/', '//', '', 'http://node-a', 'http://node-a:10255/', 'https://x', '*', 'node-a:10255'),
    fc.array(segmentArb, { maxLength: 6 }),
    fc.constantFrom('', '/', '//', '/.'),
    fc.option(
      fc.oneof(
        fc.constantFrom('verbose', 'exclude=ping', 'exclude=syncloop&verbose', 'exclude=nope&exclude=nope', 'only_cpu_and_memory=true', '%', '%zz=%00', '#frag'),
        fc.stringMatching(/^[A-Za-z0-9=&%._~?/-]{0,30}$/),
      ),
    ),
  )
  .map(([prefix, segs, tail, query]) => prefix + segs.join('/') + tail + (query === null ? '' : `?${query}`));

const versionArb = fc.oneof(
  { weight: 10, arbitrary: fc.constant('HTTP/1.1') },
  { weight: 1, arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/9.9', 'HTTP/1.1x', '', 'http/1.1', 'HTTP/1') },
);

const headerArb = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,15}$/), fc.string({ unit: 'grapheme-ascii', maxLength: 40 })) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('Content-Length'), fc.oneof(fc.nat({ max: 1 << 20 }).map(String), fc.constantFrom('-1', 'abc', '1, 2', '99999999999999999999', ''))) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('Transfer-Encoding'), fc.constantFrom('chunked', 'gzip, chunked', 'chunked, gzip', 'identity', 'x')) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('Expect', 'Connection', 'Upgrade'), fc.constantFrom('100-continue', 'close', 'keep-alive', 'Upgrade', 'websocket', 'h2c', 'foo')) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('X-Big'), fc.integer({ min: 1, max: 64 }).map((k) => 'a'.repeat(k * 1024))) },
  { weight: 1, arbitrary: fc.tuple(fc.string({ unit: 'binary-ascii', maxLength: 10 }), fc.string({ unit: 'binary-ascii', maxLength: 20 })) },
);

const bodyArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant('') },
  { weight: 2, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 2000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 300 }).map((k) => 'b'.repeat(k * 1024)) },
  { weight: 1, arbitrary: fc.constantFrom('5\r\nhello\r\n0\r\n\r\n', 'zz\r\n', '0\r\n\r\n', 'ffffffffffffffff\r\n') },
);

interface Generated {
  /** Well-formed requests reach the routes; garbage mostly exercises the parser's rejections. */
  mode: 'well-formed' | 'garbage';
  server: 'healthz' | 'read-only';
  method: string;
  target: string;
  version: string;
  host: boolean;
  headers: Array<[string, string]>;
  body: string;
  eol: string;
  parts: number;
  gapMs: number;
}

const ROUTES = ['/pods', '/pods/', '/healthz', '/healthz/ping', '/healthz/log', '/healthz/syncloop', '/stats/summary', '/metrics', '/metrics/resource', '/'];

/** A route's path, sometimes made unclean or percent-encoded, with a query. */
const routeTargetArb = fc
  .tuple(
    fc.constantFrom(...ROUTES),
    fc.constantFrom('none', 'none', 'none', 'none', 'double-slash', 'dot', 'dotdot', 'encode', 'absolute'),
    fc.option(fc.constantFrom('verbose', 'exclude=ping', 'exclude=syncloop&verbose', 'exclude=nope', 'only_cpu_and_memory=true', 'only_cpu_and_memory=true&only_cpu_and_memory=true', 'a=%zz', '')),
  )
  .map(([route, how, query]) => {
    let p = route;
    if (how === 'double-slash') p = '/' + p;
    if (how === 'dot') p = p.replace(/\//, '/./');
    if (how === 'dotdot') p = `/x/..${p}`;
    if (how === 'encode') p = p.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`);
    if (how === 'absolute') p = `http://node-a:10255${p}`;
    return p + (query === null ? '' : `?${query}`);
  });

const printable = fc.string({ unit: fc.constantFrom(...' !#$%&()*+,-./0123456789:;<=>?@ABCXYZ[]^_`abcxyz{|}~'), maxLength: 40 });
const validHeaderArb = fc.oneof(
  { weight: 10, arbitrary: fc.tuple(fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,15}$/), printable) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('Content-Length'), fc.nat({ max: 1 << 20 }).map(String)) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('Transfer-Encoding'), fc.constant('chunked')) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('Expect', 'Connection', 'Upgrade', 'Accept', 'Accept-Encoding'), fc.constantFrom('100-continue', 'close', 'keep-alive', 'Upgrade', 'websocket', 'gzip', 'application/json')) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('X-Big'), fc.integer({ min: 1, max: 64 }).map((k) => 'a'.repeat(k * 1024))) },
);

const wellFormedArb: fc.Arbitrary<Generated> = fc.record({
  mode: fc.constant('well-formed' as const),
  server: fc.constantFrom('healthz' as const, 'read-only' as const),
  method: fc.oneof({ weight: 4, arbitrary: fc.constant('GET') }, { weight: 3, arbitrary: fc.constantFrom(...METHODS) }),
  target: fc.oneof({ weight: 4, arbitrary: routeTargetArb }, { weight: 1, arbitrary: targetArb }),
  version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'),
  host: fc.constant(true),
  headers: fc.array(validHeaderArb, { maxLength: 3 }),
  body: fc.oneof({ weight: 6, arbitrary: fc.constant('') }, { weight: 1, arbitrary: bodyArb }),
  eol: fc.constant('\r\n'),
  parts: fc.oneof({ weight: 8, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 2, max: 6 }) }),
  gapMs: fc.integer({ min: 1, max: 8 }),
});

const garbageArb: fc.Arbitrary<Generated> = fc.record({
  mode: fc.constant('garbage' as const),
  server: fc.constantFrom('healthz' as const, 'read-only' as const),
  method: methodArb,
  target: fc.oneof(targetArb, routeTargetArb),
  version: versionArb,
  host: fc.oneof({ weight: 9, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  headers: fc.array(headerArb, { maxLength: 4 }),
  body: bodyArb,
  eol: fc.oneof({ weight: 10, arbitrary: fc.constant('\r\n') }, { weight: 1, arbitrary: fc.constantFrom('\n', '\r') }),
  parts: fc.oneof({ weight: 8, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 2, max: 6 }) }),
  gapMs: fc.integer({ min: 1, max: 8 }),
});

const requestArb = fc.oneof({ weight: 3, arbitrary: wellFormedArb }, { weight: 2, arbitrary: garbageArb });

function render(g: Generated): string {
  const lines = [`${g.method} ${g.target}${g.version ? ` ${g.version}` : ''}`];
  if (g.host) lines.push('Host: 127.0.0.1');
  for (const [k, v] of g.headers) lines.push(`${k}: ${v}`);
  return lines.join(g.eol) + g.eol + g.eol + g.body;
}

function split(text: string, parts: number): string[] {
  if (parts <= 1) return [text];
  const size = Math.ceil(text.length / parts);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** The exchange ended in time, and any answer is a known status; a rejection is a 4xx with a reason. */
function checkExchange(g: Generated, ex: RawExchange): void {
  const what = JSON.stringify(render(g).slice(0, 300));
  assert.equal(ex.timedOut, false, `no answer and no close within ${DEADLINE_MS} ms: ${what}`);
  if (!ex.response) {
    assert.equal(ex.closed, true, what);
    // A close without an answer only where the client was still sending (a body, an oversized head).
    const head = render(g).length - g.body.length;
    assert.ok(g.body.length > 0 || head > 16 * 1024, `closed without an answer: ${what}`);
    return;
  }
  const { status, headers, body } = ex.response;
  assert.ok(KNOWN.has(status), `status ${status} for ${what}: ${ex.raw.slice(0, 200)}`);
  if (status >= 400 && g.method !== 'HEAD') assert.ok(body.trim().length > 0, `a ${status} without a reason for ${what}`);
  if (status === 405) assert.ok(headers.allow || /CONNECT/.test(body), `405 without Allow for ${what}`);
  if (status === 301) assert.match(headers.location ?? '', /^\/(?!\/)[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*(\?.*)?$/, `redirect for ${what}`);
}

describe('fuzzing every route on both servers', { timeout: 120_000 }, () => {
  let s: TestServers;
  const statuses = new Map<string, number>();
  let requests = 0;
  let slowClients = 0;

  before(async () => {
    const registry = new Registry();
    registry.counter({ name: 'kubelet_fuzz_total', help: 'A counter.' }).inc();
    const routes = new Map<string, Handler>([
      ...statsRoutes({ getSummary: () => Promise.resolve(summary) }),
      ['/metrics', metricsHandler(registry)],
    ]);
    s = await startServers({
      routes,
      limits: { headersTimeoutMs: 200, requestTimeoutMs: 400, connectionsCheckingIntervalMs: 25, socketIdleTimeoutMs: 1000, keepAliveTimeoutMs: 200, rejectLingerMs: 200, maxConnections: 64 },
    });
    s.host.pods = [{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'default', uid: 'u1' }, spec: { containers: [] } } as never];
  });
  after(() => s.stop());

  it(`answers or closes every generated request, and keeps serving (${RUNS} runs)`, async (t) => {
    await fc.assert(
      fc.asyncProperty(requestArb, async (g) => {
        const port = g.server === 'healthz' ? s.healthzPort : s.readOnlyPort;
        const ex = await exchange(port, split(render(g), g.parts), { head: g.method === 'HEAD', gapMs: g.gapMs, deadlineMs: DEADLINE_MS });
        requests++;
        const key = `${g.mode} ${ex.response ? String(ex.response.status) : 'closed'}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        checkExchange(g, ex);
        // Still alive and serving.
        const probe = await get(port, '/healthz');
        assert.equal(probe.response?.body, 'ok', `the server stopped answering after ${JSON.stringify(render(g).slice(0, 300))}`);
      }),
      { numRuns: RUNS, includeErrorInReport: true },
    );
    const counts = [...statuses].sort().map(([k, v]) => `${k}:${v}`).join(' ');
    t.diagnostic(`fuzz: ${requests} generated requests (plus ${requests} liveness probes); outcomes ${counts}`);
  });

  it(`ends slow and stalled clients, many at once, within the head and request timeouts (${SLOW_BATCHES} batches)`, async (t) => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ request: requestArb, cut: fc.double({ min: 0, max: 0.95, noNaN: true }), gapMs: fc.integer({ min: 5, max: 60 }) }), { minLength: 1, maxLength: 8 }),
        async (clients) => {
          const results = await Promise.all(clients.map(({ request: g, cut, gapMs }) => {
            const text = render(g);
            // A prefix of the request, dribbled, then nothing more: the server has to end it.
            const prefix = text.slice(0, Math.max(1, Math.floor(text.length * cut)));
            const port = g.server === 'healthz' ? s.healthzPort : s.readOnlyPort;
            return exchange(port, split(prefix, Math.min(4, prefix.length)), { head: g.method === 'HEAD', gapMs, stall: true, deadlineMs: DEADLINE_MS }).then((ex) => ({ g, ex }));
          }));
          slowClients += clients.length;
          for (const { g, ex } of results) checkExchange(g, ex);
          assert.equal((await get(s.readOnlyPort, '/healthz')).response?.body, 'ok');
          assert.equal((await get(s.healthzPort, '/healthz')).response?.body, 'ok');
        },
      ),
      { numRuns: SLOW_BATCHES, includeErrorInReport: true },
    );
    t.diagnostic(`fuzz: ${slowClients} slow or stalled clients in ${SLOW_BATCHES} concurrent batches`);
  });
});
