// Property-based fuzzing of the secure port's HTTP/2 side (ALPN h2 over TLS on 127.0.0.1), as
// fuzz-secure.test.ts fuzzes its HTTP/1.1 side: (1) a real node:http2 client sending random
// methods, targets below every route, headers, credentials and bodies, and resetting some
// streams mid-request; (2) raw frames after the h2 preface: header blocks with malformed
// pseudo-headers (missing, repeated, unknown, after regular fields, a :status in a request,
// upper-case names, connection-specific fields), bad HPACK, frames of any type, flags and
// stream, random bytes. Properties: no crash and no hang, every answer a known status, 401
// whenever no identity was given and 403 whenever the identity is denied (unless refused before
// routing), and after every input the port still answers a good request over HTTP/2 and over
// HTTP/1.1. Seeded: a failure prints its seed and counterexample. KTS_FUZZ_RUNS scales the runs.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import tls from 'node:tls';
import fc from 'fast-check';

import { startFuzzSecureServer, type FuzzSecureServer } from './fuzz-secure-server.js';
import { hpackLiteral } from '../../workers/hpack.js';
import { get } from './raw-http.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 300;
const RAW_RUNS = Math.ceil(RUNS / 2);
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;
const DEADLINE_MS = 10_000;
const KNOWN = new Set([200, 301, 400, 401, 403, 404, 405, 406, 408, 413, 417, 431]);
/** Statuses given before routing: the target or head was refused, or no route matched. */
const PRE_GATE = new Set([301, 400, 404, 408, 413, 417, 431]);

const ROUTES = ['/pods', '/runningpods/', '/stats/summary', '/metrics', '/metrics/resource', '/metrics/cadvisor', '/healthz', '/healthz/syncloop',
  '/configz', '/logs/', '/logs/syslog', '/logs/dir/', '/containerLogs/ns/pod/c', '/exec/ns/pod/c', '/attach/ns/pod/c',
  '/portForward/ns/pod', '/run/ns/pod/c', '/spec/', '/debug/flags/v', '/'];
const AUTH = { none: undefined, good: 'Bearer good', denied: 'Bearer denied', bad: 'Bearer nobody', basic: 'Basic Zm9vOmJhcg==' } as const;
type AuthKind = keyof typeof AUTH;

const segment = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('', '.', '..', '%2e%2e', '%2F', '%', '%zz', '%00', '%ff', 'x', 'syslog', 'c', '~', ';', '@') },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~%!$&'()*+,;=:@-]{0,10}$/) },
);
const target = fc
  .tuple(fc.constantFrom(...ROUTES), fc.array(segment, { maxLength: 3 }), fc.constantFrom('none', 'none', 'double-slash', 'dotdot', 'encode', 'star'),
    fc.option(fc.constantFrom('verbose', 'command=ls&stdout=1', 'follow=true&tailLines=10', 'only_cpu_and_memory=true', '%zz', '')))
  .map(([route, extra, how, query]) => {
    let p = extra.length && route.endsWith('/') ? route + extra.join('/') : route;
    if (how === 'double-slash') p = '/' + p;
    if (how === 'dotdot') p = `/x/..${p}`;
    if (how === 'encode') p = p.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`);
    if (how === 'star') p = '*';
    return p + (query === null ? '' : `?${query}`);
  });

interface Generated {
  method: string;
  path: string;
  auth: AuthKind;
  headers: [string, string][];
  body: Buffer;
  /** Reset the stream after this many ms (undefined: never). */
  resetAfterMs?: number;
  endRequest: boolean;
}
const request: fc.Arbitrary<Generated> = fc.record({
  method: fc.constantFrom('GET', 'GET', 'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'PROPFIND', 'get', 'CONNECT-X'),
  path: target,
  auth: fc.constantFrom(...(Object.keys(AUTH) as AuthKind[])),
  headers: fc.array(fc.oneof(
    fc.constantFrom<[string, string]>(['expect', '100-continue'], ['content-length', '5'], ['content-length', 'abc'], ['content-length', '99999999999'],
      ['x-big', 'a'.repeat(20_000)], ['upgrade-insecure-requests', '1'], ['x-stream-protocol-version', 'v4.channel.k8s.io'], ['host', 'other'],
      ['cookie', 'a=b'], ['accept-encoding', 'gzip']),
    fc.tuple(fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/), fc.stringMatching(/^[ -~]{0,20}$/)),
  ), { maxLength: 3 }),
  body: fc.oneof({ weight: 4, arbitrary: fc.constant(Buffer.alloc(0)) }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)) }),
  resetAfterMs: fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined, freq: 4 }),
  endRequest: fc.oneof({ weight: 5, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
}, { requiredKeys: ['method', 'path', 'auth', 'headers', 'body', 'endRequest'] });

type H2Outcome = { status: number; body: Buffer } | { error: string } | { reset: true };

/** One request on a session of its own; resolves whatever happens (or on the deadline). */
function h2Request(port: number, g: Generated): Promise<H2Outcome | 'hung'> {
  return new Promise((resolve) => {
    let done = false;
    const session = http2.connect(`https://127.0.0.1:${port}`, { rejectUnauthorized: false });
    const finish = (o: H2Outcome | 'hung'): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      session.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => finish('hung'), DEADLINE_MS);
    session.on('error', (e: Error) => finish({ error: e.message }));
    let stream: http2.ClientHttp2Stream;
    try {
      const headers: http2.OutgoingHttpHeaders = { ':method': g.method, ':path': g.path };
      if (AUTH[g.auth]) headers.authorization = AUTH[g.auth];
      for (const [k, v] of g.headers) headers[k] = v;
      stream = session.request(headers, { endStream: false });
    } catch (e) {
      // the client refused to send it (an invalid header): nothing reached the server
      finish({ error: `client: ${(e as Error).message}` });
      return;
    }
    const chunks: Buffer[] = [];
    let status = 0;
    stream.on('response', (h) => { status = Number(h[':status']); });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => finish(status ? { status, body: Buffer.concat(chunks) } : { reset: true }));
    stream.on('error', (e: Error) => finish(status ? { status, body: Buffer.concat(chunks) } : { error: e.message }));
    stream.on('close', () => {
      if (g.resetAfterMs !== undefined) finish({ reset: true });
      else if (!g.endRequest) finish(status ? { status, body: Buffer.concat(chunks) } : { error: `closed, code ${stream.rstCode}` });
    });
    if (g.body.length) stream.write(g.body);
    if (g.endRequest) stream.end();
    if (g.resetAfterMs !== undefined) setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), g.resetAfterMs);
    // a request never ended gets its answer (the gate's refusal) or is left waiting: end it after a while
    else if (!g.endRequest) setTimeout(() => { if (!status) stream.close(http2.constants.NGHTTP2_CANCEL); }, 300);
  });
}

/** The port still serves: a good request over HTTP/2 and one over HTTP/1.1. */
async function stillServing(port: number, after: string): Promise<void> {
  const h2 = await h2Request(port, { method: 'GET', path: '/healthz', auth: 'good', headers: [], body: Buffer.alloc(0), endRequest: true });
  assert.ok(h2 !== 'hung' && 'status' in h2 && h2.status === 200 && h2.body.toString() === 'ok', `HTTP/2 stopped answering after ${after}: ${JSON.stringify(h2)}`);
  const h1 = await get(port, '/healthz', 'Authorization: Bearer good\r\n', { tls: true });
  assert.equal(h1.response?.body, 'ok', `HTTP/1.1 stopped answering after ${after}`);
}

// ---- raw frames after the preface ----

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const frame = (type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer => {
  const h = Buffer.alloc(9);
  h.writeUIntBE(Math.min(payload.length, 0xffffff), 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream >>> 0, 5);
  return Buffer.concat([h, payload]);
};
const block = (fields: [string, string][]): Buffer => {
  const out: number[] = [];
  for (const [n, v] of fields) hpackLiteral(out, 0, n, v);
  return Buffer.from(out);
};
const GOOD_FIELDS: [string, string][] = [[':method', 'GET'], [':scheme', 'https'], [':authority', '127.0.0.1'], [':path', '/healthz'], ['authorization', 'Bearer good']];
const pseudo = fc.oneof(
  fc.constant(GOOD_FIELDS),
  // one field dropped, repeated, replaced or moved
  fc.tuple(fc.nat(), fc.constantFrom('drop', 'repeat', 'last'), fc.option(fc.tuple(
    fc.constantFrom(':method', ':path', ':scheme', ':authority', ':status', ':protocol', ':foo', 'Host', 'connection', 'te', 'transfer-encoding', 'keep-alive', 'upgrade', 'Authorization', ''),
    fc.constantFrom('', 'GET', 'CONNECT', '/', 'healthz', '*', '//x', 'http', 'ftp', 'trailers', 'gzip', 'websocket', '200', 'a\u0000b', 'a\r\nb', 'x'.repeat(70_000)),
  ), { nil: undefined })).map(([i, op, extra]) => {
    const f = [...GOOD_FIELDS];
    const at = i % f.length;
    if (op === 'drop') f.splice(at, 1);
    else if (op === 'repeat') f.splice(at, 0, f[at]!);
    else f.push(f.splice(at, 1)[0]!);
    if (extra) f.splice(i % (f.length + 1), 0, extra);
    return f;
  }),
);
const rawFrame: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(pseudo, fc.constantFrom(1, 3, 5, 2, 0, 0x7fffffff), fc.constantFrom(0x5, 0x4, 0x1, 0x0, 0x25, 0x0d), fc.uint8Array({ maxLength: 8 }))
    .map(([fields, stream, flags, junk]) => {
      const payload = Buffer.concat([block(fields), Buffer.from(junk)]);
      // PRIORITY and PADDED flags need their fields in front
      const pre = Buffer.alloc((flags & 0x8 ? 1 : 0) + (flags & 0x20 ? 5 : 0));
      return frame(1, flags, stream, Buffer.concat([pre, payload]));
    }) },
  { weight: 2, arbitrary: fc.tuple(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 0, max: 255 }), fc.constantFrom(0, 1, 2, 3, 5, 0x7fffffff, 0x80000001), fc.uint8Array({ maxLength: 24 }))
    .map(([type, flags, stream, payload]) => frame(type, flags, stream, Buffer.from(payload))) },
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 0, max: 255 }), fc.uint8Array({ maxLength: 12 })).map(([type, p]) => frame(type, 0, 1, Buffer.from(p))) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.from(a)) },
  { weight: 1, arbitrary: fc.constantFrom(
    // a CONTINUATION flood, a header block never ended, a huge declared length, a window overflow, SETTINGS of bad values
    Buffer.concat([frame(1, 0, 1, block(GOOD_FIELDS)), ...Array.from({ length: 30 }, () => frame(9, 0, 1, Buffer.alloc(4000, 0x41)))]),
    frame(1, 0, 1, block(GOOD_FIELDS)),
    Buffer.concat([Buffer.from([0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1])]),
    frame(8, 0, 0, Buffer.from([0x7f, 0xff, 0xff, 0xff])),
    frame(4, 0, 0, Buffer.from([0, 4, 0xff, 0xff, 0xff, 0xff, 0, 5, 0, 0, 0, 1])),
    frame(6, 0, 0, Buffer.alloc(8)),
    Buffer.concat(Array.from({ length: 200 }, () => frame(6, 0, 0, Buffer.alloc(8)))),
    Buffer.concat(Array.from({ length: 100 }, (_, i) => Buffer.concat([frame(1, 5, 2 * i + 1, block(GOOD_FIELDS)), frame(3, 0, 2 * i + 1, Buffer.from([0, 0, 0, 8]))]))),
  ) },
);

/** Writes the preface, SETTINGS and `frames` on an h2 TLS connection; resolves when the server closes it or after a while. */
function rawH2(port: number, frames: Buffer[]): Promise<{ closed: boolean; bytes: number }> {
  return new Promise((resolve) => {
    let bytes = 0;
    let settled = false;
    const sock = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ALPNProtocols: ['h2'] }, () => {
      sock.write(Buffer.concat([PREFACE, frame(4, 0, 0), ...frames]));
    });
    const done = (closed: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ closed, bytes });
    };
    const timer = setTimeout(() => done(false), 200);
    sock.on('data', (d: Buffer) => { bytes += d.length; });
    sock.on('error', () => done(true));
    sock.on('close', () => done(true));
  });
}

describe('fuzzing the secure port\'s HTTP/2 side', { timeout: 600_000 }, () => {
  let port: number;
  let fixture: FuzzSecureServer;

  before(async () => {
    fixture = await startFuzzSecureServer('kts-fuzz-h2-');
    ({ port } = fixture);
  });

  after(() => fixture.close());

  it(`a real HTTP/2 client's random requests get the gate's verdict, and the port keeps serving (${RUNS} requests, seed ${SEED})`, async (t) => {
    const outcomes = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(request, async (g) => {
        const what = JSON.stringify({ ...g, body: g.body.length, headers: g.headers.map(([k, v]) => [k, v.slice(0, 40)]) });
        const o = await h2Request(port, g);
        assert.notEqual(o, 'hung', `no answer, reset or close within ${DEADLINE_MS} ms: ${what}`);
        const key = o === 'hung' ? 'hung' : 'status' in o ? `${g.auth} ${o.status}` : 'reset' in o ? 'reset' : 'error';
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        if (o !== 'hung' && 'status' in o && o.status !== 0) {
          assert.ok(KNOWN.has(o.status), `status ${o.status} for ${what}`);
          // OPTIONS * is answered by the server itself, as Go's (200, before any handler)
          if (!PRE_GATE.has(o.status) && g.path !== '*') {
            if (g.auth === 'none' || g.auth === 'bad' || g.auth === 'basic') assert.equal(o.status, 401, `no identity, yet ${o.status}: ${what}`);
            if (g.auth === 'denied') assert.equal(o.status, 403, `a denied identity, yet ${o.status}: ${what}`);
          }
        }
        await stillServing(port, what);
      }),
      { numRuns: RUNS, seed: SEED },
    );
    t.diagnostic(`outcomes ${[...outcomes].sort().map(([k, v]) => `${k}:${v}`).join(' ')}`);
    for (const k of ['none 401', 'denied 403', 'good 200']) assert.ok(outcomes.has(k), `never saw ${k}`);
  });

  it(`raw frames after the preface (malformed pseudo-headers, bad HPACK, any frame) never stop the port (${RAW_RUNS} connections, seed ${SEED})`, async (t) => {
    let closed = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(rawFrame, { minLength: 1, maxLength: 4 }), async (frames) => {
        const r = await rawH2(port, frames);
        if (r.closed) closed++;
        await stillServing(port, `frames ${frames.map((f) => f.subarray(0, 40).toString('hex')).join(' ')}`);
      }),
      { numRuns: RAW_RUNS, seed: SEED },
    );
    t.diagnostic(`${closed} of ${RAW_RUNS} connections closed by the server`);
  });
});
