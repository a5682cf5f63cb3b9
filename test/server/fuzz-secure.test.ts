// Property-based fuzzing of the secure port's routes over TLS on 127.0.0.1, as fuzz.test.ts
// fuzzes the other two servers: random methods, unclean and encoded targets below every route
// (subtree routes included), credentials present, denied, bad or missing, upgrade requests,
// bodies and broken heads. Properties: no crash (the port answers a normal request after every
// input), no hang, a known status for every answer, 401 whenever no identity was given and 403
// whenever the identity is denied (unless the target was refused before routing), and an upgrade
// only for an admitted request. KTS_FUZZ_RUNS scales the runs (default 400).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';

import { startFuzzSecureServer, type FuzzSecureServer } from './fuzz-secure-server.js';
import { exchange, get, type RawExchange } from './raw-http.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 400;
const DEADLINE_MS = 10_000;
// 406: /debug/flags/v answers any method but PUT so, as upstream
const KNOWN = new Set([101, 200, 301, 400, 401, 403, 404, 405, 406, 408, 417, 431]);

const ROUTES = ['/pods', '/runningpods/', '/stats/summary', '/metrics', '/metrics/resource', '/metrics/cadvisor', '/healthz', '/healthz/syncloop',
  '/configz', '/logs/', '/logs/syslog', '/logs/dir/', '/logs/nope', '/containerLogs/ns/pod/c', '/exec/ns/pod/c', '/attach/ns/pod/c',
  '/portForward/ns/pod', '/run/ns/pod/c', '/spec/', '/debug/flags/v', '/'];
const METHODS = ['GET', 'GET', 'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'PROPFIND'];
const AUTH = {
  none: '',
  good: 'Authorization: Bearer good',
  denied: 'Authorization: Bearer denied',
  bad: 'Authorization: Bearer nobody',
  basic: 'Authorization: Basic Zm9vOmJhcg==',
} as const;
type AuthKind = keyof typeof AUTH;

const segment = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('', '.', '..', '%2e%2e', '%2F', '%', '%zz', '%00', '%ff', 'x', 'syslog', 'c', '~', ';', '@') },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~%!$&'()*+,;=:@-]{0,10}$/) },
);
const targetArb = fc
  .tuple(fc.constantFrom(...ROUTES), fc.array(segment, { maxLength: 3 }), fc.constantFrom('none', 'none', 'double-slash', 'dotdot', 'encode'),
    fc.option(fc.constantFrom('verbose', 'command=ls&stdout=1', 'follow=true&tailLines=10', 'only_cpu_and_memory=true', '%zz', '')))
  .map(([route, extra, how, query]) => {
    let p = extra.length && route.endsWith('/') ? route + extra.join('/') : route;
    if (how === 'double-slash') p = '/' + p;
    if (how === 'dotdot') p = `/x/..${p}`;
    if (how === 'encode') p = p.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`);
    return p + (query === null ? '' : `?${query}`);
  });

interface Generated {
  method: string;
  target: string;
  auth: AuthKind;
  upgrade: boolean;
  headers: string[];
  body: string;
}

const requestArb: fc.Arbitrary<Generated> = fc.record({
  method: fc.constantFrom(...METHODS),
  target: targetArb,
  auth: fc.constantFrom(...(Object.keys(AUTH) as AuthKind[])),
  upgrade: fc.boolean(),
  headers: fc.array(fc.oneof(
    fc.constantFrom('Expect: 100-continue', 'Connection: close', 'Transfer-Encoding: chunked', 'Content-Length: 5', 'X-Big: ' + 'a'.repeat(20_000)),
    fc.tuple(fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,10}$/), fc.stringMatching(/^[ -~]{0,20}$/)).map(([k, v]) => `${k}: ${v}`),
  ), { maxLength: 2 }),
  body: fc.oneof({ weight: 5, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom('hello', '5\r\nhello\r\n0\r\n\r\n', 'zz\r\n') }),
});

function render(g: Generated): string {
  const lines = [`${g.method} ${g.target} HTTP/1.1`, 'Host: 127.0.0.1'];
  if (AUTH[g.auth]) lines.push(AUTH[g.auth]);
  if (g.upgrade) lines.push('Connection: Upgrade', 'Upgrade: SPDY/3.1');
  lines.push(...g.headers);
  return lines.join('\r\n') + '\r\n\r\n' + g.body;
}

/** Statuses given before routing: the target or head was refused, or no route matched. */
const PRE_GATE = new Set([301, 400, 404, 408, 417, 431]);

function check(g: Generated, ex: RawExchange): void {
  const what = JSON.stringify(render(g).slice(0, 300));
  assert.equal(ex.timedOut, false, `no answer and no close within ${DEADLINE_MS} ms: ${what}`);
  if (!ex.response) {
    assert.equal(ex.closed, true, what);
    assert.ok(g.body.length > 0 || render(g).length > 16 * 1024, `closed without an answer: ${what}`);
    return;
  }
  const { status } = ex.response;
  assert.ok(KNOWN.has(status), `status ${status} for ${what}: ${ex.raw.slice(0, 200)}`);
  if (PRE_GATE.has(status)) return;
  if (g.auth === 'none' || g.auth === 'bad' || g.auth === 'basic') assert.equal(status, 401, `no identity, yet ${status}: ${what}`);
  if (g.auth === 'denied') assert.equal(status, 403, `a denied identity, yet ${status}: ${what}`);
  if (status === 101) assert.ok(g.auth === 'good' && g.upgrade, `an upgrade without admission: ${what}`);
}

describe('fuzzing the secure port\'s routes', { timeout: 180_000 }, () => {
  let port: number;
  let fixture: FuzzSecureServer;
  const statuses = new Map<string, number>();

  before(async () => {
    fixture = await startFuzzSecureServer('kts-fuzz-secure-');
    ({ port } = fixture);
  });

  after(() => fixture.close());

  it(`answers or closes every generated request with the gate's verdict, and keeps serving (${RUNS} runs)`, async (t) => {
    await fc.assert(
      fc.asyncProperty(requestArb, async (g) => {
        const ex = await exchange(port, [render(g)], { tls: true, head: g.method === 'HEAD', deadlineMs: DEADLINE_MS });
        const key = `${g.auth} ${ex.response ? String(ex.response.status) : 'closed'}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        check(g, ex);
        const probe = await get(port, '/healthz', `${AUTH.good}\r\n`, { tls: true });
        assert.equal(probe.response?.body, 'ok', `the port stopped answering after ${JSON.stringify(render(g).slice(0, 300))}`);
      }),
      { numRuns: RUNS, includeErrorInReport: true },
    );
    t.diagnostic(`fuzz-secure: outcomes ${[...statuses].sort().map(([k, v]) => `${k}:${v}`).join(' ')}`);
    // The generator reached every verdict.
    for (const k of ['none 401', 'denied 403', 'good 200']) assert.ok(statuses.has(k), `never saw ${k}`);
  });
});
