// Property-based tests of the h2c CRI client against a hostile runtime: a unix-socket peer that,
// once the client's request arrives, answers with a generated script of frames: header blocks
// with random or missing :status, content-type and grpc-status (garbage, out of range, absent
// trailers), DATA with gRPC messages whose declared length lies, compressed flags, random or
// valid protobuf payloads, frames of any type on any stream, random bytes, an early close, or
// silence. The properties: every call settles within its deadline (plus a margin), a CriClient
// call rejects only with a CriError naming the method, an H2cUnary call with a gRPC status
// (integer code, string details) and the PLEG's wire decoder's WireFormatError turned into one;
// a silent peer fails the call at its deadline on the injected clock. Seeded: a failure prints
// its seed and the script. KTS_FUZZ_RUNS scales the runs.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';

import { CriClient, criDefinitions } from '../../src/runtime/cri-client.js';
import { CriError } from '../../src/runtime/cri-errors.js';
import { H2cUnary } from '../../src/runtime/h2c.js';
import type { UnaryStatus } from '../../src/runtime/unary.js';
import { decodeContainerStatusResponse } from '../../src/pleg/wire-status.js';
import { FakeClock } from '../../src/util/clock.js';
import { hpackLiteral } from '../../workers/hpack.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 150;
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;
const dir = mkdtempSync(join(tmpdir(), 'kts-h2c-fuzz-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const defs = await criDefinitions();
const statusDef = defs.runtime.ContainerStatus!;
const VALID_STATUS = statusDef.responseSerialize({
  status: { id: 'c1', state: 'CONTAINER_EXITED', exit_code: 3, created_at: '1700000000000000000', metadata: { name: 'main', attempt: 0 }, image: { image: 'busybox' }, image_ref: 'sha256:x', labels: { a: 'b' }, annotations: {}, mounts: [] },
});

const frame = (type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer => {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream >>> 0, 5);
  return Buffer.concat([h, payload]);
};

// ---- the runtime's script ----

type StreamPick = 'call' | number;
type Action =
  | { k: 'headers'; fields: [string, string][]; raw?: Buffer; endStream: boolean; stream: StreamPick }
  | { k: 'data'; compressed: number; declared: number | 'true'; body: Buffer; split: number; endStream: boolean; stream: StreamPick }
  | { k: 'frame'; type: number; flags: number; stream: StreamPick; payload: Buffer }
  | { k: 'bytes'; bytes: Buffer }
  | { k: 'close' };

const streamPick: fc.Arbitrary<StreamPick> = fc.oneof({ weight: 6, arbitrary: fc.constant('call' as const) }, { weight: 1, arbitrary: fc.constantFrom(0, 2, 3, 0x7fffffff, 0xffffffff) });
const field: fc.Arbitrary<[string, string]> = fc.oneof(
  fc.tuple(fc.constant(':status'), fc.constantFrom('200', '204', '404', '500', '503', '999', 'abc', '', '0200')),
  fc.tuple(fc.constant('content-type'), fc.constantFrom('application/grpc', 'application/grpc+proto', 'text/html', '')),
  fc.tuple(fc.constant('grpc-status'), fc.constantFrom('0', '2', '5', '14', '16', '17', '99', '-1', '1e1', 'abc', '', '4294967296')),
  fc.tuple(fc.constant('grpc-message'), fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('%', '%zz', '%E2%82', 'a%20b'))),
  fc.tuple(fc.constantFrom('grpc-encoding', 'grpc-status-details-bin', 'x-junk', ':path', 'Upper'), fc.string({ maxLength: 10 })),
);
const goodHeaders: [string, string][] = [[':status', '200'], ['content-type', 'application/grpc']];
const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 4, arbitrary: fc.record({
    k: fc.constant('headers' as const),
    fields: fc.oneof(fc.constant(goodHeaders), fc.array(field, { maxLength: 5 }), fc.constant([['grpc-status', '0']] as [string, string][])),
    raw: fc.option(fc.uint8Array({ maxLength: 30 }).map((a) => Buffer.from(a)), { nil: undefined, freq: 6 }),
    endStream: fc.boolean(),
    stream: streamPick,
  }) },
  { weight: 4, arbitrary: fc.record({
    k: fc.constant('data' as const),
    compressed: fc.constantFrom(0, 0, 0, 1, 2, 255),
    declared: fc.oneof({ weight: 3, arbitrary: fc.constant('true' as const) }, { weight: 1, arbitrary: fc.constantFrom(0, 1, 1000, 0x7fffffff, 0xffffffff) }),
    body: fc.oneof(fc.constant(VALID_STATUS), fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
      fc.tuple(fc.nat(), fc.nat()).map(([i, v]) => { const b = Buffer.from(VALID_STATUS); b[i % b.length] = v & 0xff; return b; }),
      fc.nat().map((n) => VALID_STATUS.subarray(0, n % VALID_STATUS.length))),
    split: fc.nat({ max: 3 }),
    endStream: fc.boolean(),
    stream: streamPick,
  }) },
  { weight: 2, arbitrary: fc.record({
    k: fc.constant('frame' as const),
    type: fc.oneof(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 0, max: 255 })),
    flags: fc.integer({ min: 0, max: 255 }),
    stream: streamPick,
    payload: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
  }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('bytes' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 40 }).map((a) => Buffer.from(a)) }) },
  { weight: 1, arbitrary: fc.constant({ k: 'close' as const }) },
);
const GOOD: Action[] = [
  { k: 'headers', fields: goodHeaders, endStream: false, stream: 'call' },
  { k: 'data', compressed: 0, declared: 'true', body: VALID_STATUS, split: 0, endStream: false, stream: 'call' },
  { k: 'headers', fields: [['grpc-status', '0']], endStream: true, stream: 'call' },
];
/** A well-formed answer with a few of its steps replaced, dropped or joined by hostile ones; or any script. */
const script = fc.oneof(
  { weight: 2, arbitrary: fc.array(fc.tuple(fc.constantFrom('replace', 'drop', 'insert'), fc.nat(), action), { maxLength: 2 }).map((edits) => {
    const out = [...GOOD];
    for (const [op, at, a] of edits) {
      const i = at % (out.length + 1);
      if (op === 'insert') out.splice(i, 0, a);
      else if (out.length > 0) out.splice(i % out.length, 1, ...(op === 'replace' ? [a] : []));
    }
    return out;
  }) },
  { weight: 1, arbitrary: fc.array(action, { minLength: 0, maxLength: 6 }) },
);

function render(a: Action, call: number): Buffer | 'close' {
  const sid = (p: StreamPick): number => (p === 'call' ? call : p);
  switch (a.k) {
    case 'headers': {
      const block: number[] = [];
      for (const [n, v] of a.fields) hpackLiteral(block, 0, n, v);
      return frame(1, 0x4 | (a.endStream ? 1 : 0), sid(a.stream), Buffer.concat([Buffer.from(block), a.raw ?? Buffer.alloc(0)]));
    }
    case 'data': {
      const head = Buffer.alloc(5);
      head[0] = a.compressed;
      head.writeUInt32BE(a.declared === 'true' ? a.body.length : a.declared, 1);
      const msg = Buffer.concat([head, a.body]);
      const parts: Buffer[] = [];
      const n = a.split + 1;
      const step = Math.ceil(msg.length / n) || 1;
      for (let at = 0; at < msg.length; at += step) parts.push(frame(0, 0, sid(a.stream), msg.subarray(at, at + step)));
      if (a.endStream) parts.push(frame(0, 1, sid(a.stream)));
      return Buffer.concat(parts);
    }
    case 'frame':
      return frame(a.type, a.flags, sid(a.stream), a.payload);
    case 'bytes':
      return a.bytes;
    case 'close':
      return 'close';
  }
}

/** A runtime that plays `current.script` on the first request of each connection. */
async function hostileRuntime(name: string): Promise<{ endpoint: string; play: (s: Action[]) => void; sockets: () => number; close: () => Promise<void> }> {
  let current: Action[] = [];
  const socks = new Set<net.Socket>();
  const path = join(dir, `${name}.sock`);
  const server = net.createServer((sock) => {
    socks.add(sock);
    sock.on('close', () => socks.delete(sock));
    sock.on('error', () => undefined);
    const mine = current;
    let buf = Buffer.alloc(0);
    let preface = false;
    let played = false;
    sock.write(frame(4, 0, 0));
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!preface) {
        if (buf.length < 24) return;
        buf = buf.subarray(24);
        preface = true;
      }
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        const type = buf[3]!;
        const stream = buf.readUInt32BE(5) & 0x7fffffff;
        buf = buf.subarray(9 + len);
        if (type === 1 && !played && !sock.destroyed) {
          played = true;
          for (const a of mine) {
            const out = render(a, stream);
            if (out === 'close') { sock.end(); break; }
            sock.write(out);
          }
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(path, r));
  return {
    endpoint: `unix://${path}`,
    play: (s) => { current = s; },
    sockets: () => socks.size,
    close: async () => {
      for (const s of socks) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Whether the script sent the call's stream a grpc-status of 0. */
const saidOk = (s: Action[]): boolean =>
  s.some((a) => a.k === 'headers' && a.stream === 'call' && a.fields.some(([n, v]) => n === 'grpc-status' && v === '0'));

/** Resolves with how the promise settled, or 'hung' if it did not within `ms` of real time. */
function settle<T>(p: Promise<T>, ms: number): Promise<{ ok: T } | { err: unknown } | 'hung'> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve('hung'), ms);
    p.then((ok) => { clearTimeout(t); resolve({ ok }); }, (err: unknown) => { clearTimeout(t); resolve({ err }); });
  });
}

const isStatus = (e: unknown): e is UnaryStatus =>
  typeof e === 'object' && e !== null && Number.isInteger((e as UnaryStatus).code) && (e as UnaryStatus).code > 0 && (e as UnaryStatus).code <= 16 &&
  typeof (e as UnaryStatus).details === 'string';

describe('the h2c CRI client against a hostile runtime', () => {
  it(`a CriClient call settles by its deadline with an answer or a CriError (${RUNS} scripts, seed ${SEED})`, { timeout: 600_000 }, async (t) => {
    const rt = await hostileRuntime('cri');
    const DEADLINE = 400;
    const seen = { ok: 0, criError: 0 };
    try {
      await fc.assert(
        fc.asyncProperty(script, async (s) => {
          rt.play(s);
          // a client per script: each gets a connection of its own, which plays the script
          const cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: DEADLINE });
          try {
            const r = await settle(cri.containerStatus('c1'), DEADLINE + 5_000);
            assert.notEqual(r, 'hung', 'the call outlived its deadline');
            if (r !== 'hung' && 'err' in r) {
              assert.ok(r.err instanceof CriError, `not a CriError: ${String(r.err)}`);
              assert.equal(r.err.method, 'ContainerStatus');
              seen.criError++;
            } else if (r !== 'hung') {
              assert.equal(r.ok.status?.id, 'c1');
              assert.ok(saidOk(s), 'answered without grpc-status 0');
              seen.ok++;
            }
          } finally {
            cri.close();
          }
        }),
        { numRuns: RUNS, seed: SEED },
      );
    } finally {
      await rt.close();
    }
    t.diagnostic(`${seen.ok} answered, ${seen.criError} CriErrors`);
    assert.ok(seen.ok > 0, 'no script was a well-formed answer');
  });

  it(`an H2cUnary call with the PLEG's decoder: a status or a decoded answer, a silent peer fails at the deadline (${RUNS} scripts, seed ${SEED})`, { timeout: 600_000 }, async (t) => {
    const rt = await hostileRuntime('lean');
    const seen = { ok: 0, failed: 0, deadline: 0 };
    try {
      await fc.assert(
        fc.asyncProperty(script, async (s) => {
          rt.play(s);
          const clock = new FakeClock();
          const unary = new H2cUnary({ runtimeEndpoint: rt.endpoint, maxMessageBytes: 4096, flowControlWindow: 65_535, clock });
          try {
            const call = unary.callDecoded(statusDef.path, Buffer.alloc(0), 2_000, (m) => decodeContainerStatusResponse(m, 'fuzz'));
            let r = await settle(call, 150);
            if (r === 'hung') {
              // the peer went silent (or left the call open): the deadline on the clock ends it
              clock.step(2_000);
              r = await settle(call, 5_000);
              assert.notEqual(r, 'hung', 'the call outlived its deadline on the clock');
              seen.deadline++;
            }
            if (r !== 'hung' && 'err' in r) {
              assert.ok(isStatus(r.err), `not a gRPC status: ${String(r.err)}`);
              seen.failed++;
            } else if (r !== 'hung') {
              assert.equal(r.ok?.id, 'c1');
              assert.ok(saidOk(s), 'answered without grpc-status 0');
              seen.ok++;
            }
          } finally {
            unary.close();
          }
        }),
        { numRuns: RUNS, seed: SEED },
      );
      // every connection the client opened is closed again
      for (let i = 0; i < 50 && rt.sockets() > 0; i++) await new Promise((r) => setTimeout(r, 20));
      assert.equal(rt.sockets(), 0, 'connections left open');
    } finally {
      await rt.close();
    }
    t.diagnostic(`${seen.ok} decoded, ${seen.failed} failed, of which ${seen.deadline} at the deadline`);
    assert.ok(seen.ok > 0, 'no script was a well-formed answer');
  });
});
