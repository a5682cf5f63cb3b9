import { test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { H2cUnary, ResponseScratch } from '../../src/runtime/h2c.js';
import { Http2Unary, type UnaryStatus } from '../../src/runtime/unary.js';
import { FakeClock } from '../../src/util/clock.js';

const PATH = '/runtime.v1.RuntimeService/PodSandboxStatus';

async function tempSocket<T>(fn: (socketPath: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-h2c-'));
  try {
    return await fn(join(dir, 'rt.sock'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const failure = (p: Promise<unknown>): Promise<UnaryStatus> =>
  p.then(
    () => assert.fail('expected the call to fail'),
    (e: UnaryStatus) => e,
  );

/** A response message of `n` bytes whose content depends on the request. */
function answerFor(req: Buffer, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (req[i % Math.max(1, req.length)]! + i) & 0xff;
  return b;
}

test('against a grpc-js server: answers (past the default windows) and errors equal node:http2\'s', async () => {
  await tempSocket(async (socketPath) => {
    const server = new grpc.Server();
    const id = (b: Buffer): Buffer => b;
    server.addService(
      {
        PodSandboxStatus: { path: PATH, requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id },
      } as grpc.ServiceDefinition,
      {
        PodSandboxStatus: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          const req = call.request;
          if (req.toString() === 'fail') return cb({ code: grpc.status.FAILED_PRECONDITION, details: 'runtime is busy: 50% done, ünïcode' });
          cb(null, answerFor(req, Number(req.toString()) || 0));
        },
      },
    );
    await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
    const opts = { runtimeEndpoint: `unix://${socketPath}`, maxMessageBytes: 8 << 20, flowControlWindow: 1 << 20 };
    const lean = new H2cUnary(opts);
    const node = new Http2Unary(opts);
    try {
      // 40 calls at once, several over 64 KiB (the protocol's default stream and connection windows)
      const sizes = Array.from({ length: 40 }, (_, i) => (i % 4 === 0 ? 300_000 + i : i * 37));
      const got = await Promise.all(sizes.map((n) => lean.call(PATH, Buffer.from(String(n)), 10_000)));
      const want = await Promise.all(sizes.map((n) => node.call(PATH, Buffer.from(String(n)), 10_000)));
      assert.deepEqual(got, want);
      assert.equal(got[0]!.length, 300_000);
      // 3 MB in a row: the connection window is replenished as data is consumed
      for (let i = 0; i < 12; i++) assert.equal((await lean.call(PATH, Buffer.from('250000'), 10_000)).length, 250_000);
      assert.deepEqual(await failure(lean.call(PATH, Buffer.from('fail'), 10_000)), await failure(node.call(PATH, Buffer.from('fail'), 10_000)));
      assert.deepEqual(await failure(lean.call('/no.Such/Method', Buffer.alloc(0), 10_000)), await failure(node.call('/no.Such/Method', Buffer.alloc(0), 10_000)));
    } finally {
      lean.close();
      node.close();
      server.forceShutdown();
    }
  });
});

test('answers assembled in a kept scratch buffer: decoded in place, the buffer reused call after call, a concurrent call gets its own memory, a throwing decoder fails the call', async () => {
  await tempSocket(async (socketPath) => {
    const server = new grpc.Server();
    const id = (b: Buffer): Buffer => b;
    server.addService(
      { PodSandboxStatus: { path: PATH, requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id } } as grpc.ServiceDefinition,
      { PodSandboxStatus: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, answerFor(call.request, Number(call.request.toString()) || 0)) },
    );
    await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
    const lean = new H2cUnary({ runtimeEndpoint: `unix://${socketPath}`, maxMessageBytes: 8 << 20, flowControlWindow: 1 << 20 });
    const scratch = new ResponseScratch();
    const copy = (b: Buffer): Buffer => Buffer.from(b);
    try {
      const first = await lean.callDecoded(PATH, Buffer.from('300000'), 10_000, copy, scratch);
      assert.deepEqual(first, answerFor(Buffer.from('300000'), 300_000));
      const kept = scratch.buf;
      assert.ok(kept.length >= 300_000);
      // the next answer lands in the same memory; the decoder saw exactly the message
      const lens: number[] = [];
      const second = await lean.callDecoded(PATH, Buffer.from('200000'), 10_000, (b) => { lens.push(b.length); return copy(b); }, scratch);
      assert.equal(scratch.buf, kept);
      assert.deepEqual(lens, [200_000]);
      assert.deepEqual(second, answerFor(Buffer.from('200000'), 200_000));
      // two calls on one scratch at once: both answers whole and right
      const [a, b] = await Promise.all([
        lean.callDecoded(PATH, Buffer.from('150000'), 10_000, copy, scratch),
        lean.callDecoded(PATH, Buffer.from('150001'), 10_000, copy, scratch),
      ]);
      assert.deepEqual(a, answerFor(Buffer.from('150000'), 150_000));
      assert.deepEqual(b, answerFor(Buffer.from('150001'), 150_001));
      assert.equal(scratch.busy, false);
      // a decoder that throws: the call fails as grpc-js reports it, and the scratch is free again
      const bad = await failure(lean.callDecoded(PATH, Buffer.from('1000'), 10_000, () => { throw new Error('truncated varint at byte 7'); }, scratch));
      assert.deepEqual(bad, { code: grpc.status.INTERNAL, details: 'Response message parsing error: truncated varint at byte 7' });
      assert.equal(scratch.busy, false);
      assert.deepEqual(await lean.callDecoded(PATH, Buffer.from('10'), 10_000, copy, scratch), answerFor(Buffer.from('10'), 10));
    } finally {
      lean.close();
      server.forceShutdown();
    }
  });
});

test('against node:http2: the server\'s MAX_CONCURRENT_STREAMS is honoured, large frames and responses arrive whole', async () => {
  await tempSocket(async (socketPath) => {
    const server = http2.createServer({ settings: { maxConcurrentStreams: 3, maxFrameSize: 1 << 20 } });
    let open = 0;
    let most = 0;
    server.on('stream', (s) => {
      open++;
      most = Math.max(most, open);
      s.on('close', () => open--);
      const chunks: Buffer[] = [];
      s.on('data', (c: Buffer) => chunks.push(c));
      s.on('end', () => {
        const req = Buffer.concat(chunks).subarray(5);
        const body = answerFor(req, 100_000);
        const head = Buffer.from([0, 0, 0, 0, 0]);
        head.writeUInt32BE(body.length, 1);
        setTimeout(() => {
          s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
          s.end(Buffer.concat([head, body]));
        }, 5);
      });
    });
    await new Promise<void>((r) => server.listen(socketPath, r));
    const unary = new H2cUnary({ runtimeEndpoint: socketPath, maxMessageBytes: 1 << 20, flowControlWindow: 65_535 });
    try {
      // the first call lets SETTINGS arrive before the rest are queued
      await unary.call(PATH, Buffer.from('x'), 10_000);
      const reqs = Array.from({ length: 20 }, (_, i) => Buffer.from(`req-${i}`));
      const got = await Promise.all(reqs.map((r) => unary.call(PATH, r, 10_000)));
      got.forEach((b, i) => assert.deepEqual(b, answerFor(reqs[i]!, 100_000)));
      assert.ok(most <= 3, `at most 3 streams at once, saw ${most}`);
    } finally {
      unary.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

// A hand-driven server: frames out exactly as a test writes them.
const frame = (type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer => {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
};
const lit = (name: string, value: string, indexing = false): number[] => [indexing ? 0x40 : 0x00, name.length, ...Buffer.from(name), value.length, ...Buffer.from(value)];
const OK_HEAD = Buffer.from([0x88, ...lit('content-type', 'application/grpc')]);
const OK_TRAILERS = Buffer.from(lit('grpc-status', '0'));
const message = (b: Buffer): Buffer => {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(b.length, 1);
  return Buffer.concat([head, b]);
};
const SERVER_SETTINGS = frame(4, 0, 0);

interface ClientFrame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** A unix socket server that reads the client's frames and lets the test answer. */
async function withFrameServer(onFrame: (f: ClientFrame, sock: net.Socket, conn: number) => void, fn: (endpoint: string, conns: () => number, ended: ReadonlySet<number>) => Promise<void>): Promise<void> {
  await tempSocket(async (socketPath) => {
    let conns = 0;
    const socks = new Set<net.Socket>();
    /** Connections the client ended (its side of the socket closed). */
    const ended = new Set<number>();
    const server = net.createServer((sock) => {
      const conn = ++conns;
      socks.add(sock);
      sock.on('end', () => ended.add(conn));
      sock.on('close', () => socks.delete(sock));
      sock.on('error', () => undefined);
      let buf = Buffer.alloc(0);
      let preface = false;
      sock.write(SERVER_SETTINGS);
      sock.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        if (!preface) {
          if (buf.length < 24) return;
          assert.equal(buf.subarray(0, 24).toString('latin1'), 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
          buf = buf.subarray(24);
          preface = true;
        }
        while (buf.length >= 9) {
          const len = buf.readUIntBE(0, 3);
          if (buf.length < 9 + len) break;
          const f = { type: buf[3]!, flags: buf[4]!, stream: buf.readUInt32BE(5), payload: buf.subarray(9, 9 + len) };
          buf = buf.subarray(9 + len);
          if (!sock.destroyed) onFrame(f, sock, conn);
        }
      });
    });
    await new Promise<void>((r) => server.listen(socketPath, r));
    try {
      await fn(`unix://${socketPath}`, () => conns, ended);
    } finally {
      for (const s of socks) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
}

const answer = (sock: net.Socket, stream: number, body: Buffer, head = OK_HEAD, trailers = OK_TRAILERS): void => {
  const m = message(body);
  const data: Buffer[] = [];
  // DATA frames within the default maximum frame size
  for (let at = 0; at < m.length; at += 16_384) data.push(frame(0, 0, stream, m.subarray(at, at + 16_384)));
  sock.write(Buffer.concat([frame(1, 4, stream, head), ...data, frame(1, 5, stream, trailers)]));
};

test('the HPACK dynamic table is the connection\'s: a later stream\'s headers may index an earlier stream\'s entries', async () => {
  let n = 0;
  await withFrameServer(
    (f, sock) => {
      if (f.type !== 1) return;
      // the first answer adds content-type and grpc-status to the table; the second indexes them
      if (n++ === 0) answer(sock, f.stream, Buffer.from('one'), Buffer.from([0x88, ...lit('content-type', 'application/grpc', true)]), Buffer.from(lit('grpc-status', '0', true)));
      else answer(sock, f.stream, Buffer.from('two'), Buffer.from([0x88, 0x80 | 63]), Buffer.from([0x80 | 62]));
    },
    async (endpoint) => {
      const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1024, flowControlWindow: 1 << 20 });
      try {
        assert.equal((await unary.call(PATH, Buffer.from('a'), 10_000)).toString(), 'one');
        assert.equal((await unary.call(PATH, Buffer.from('b'), 10_000)).toString(), 'two');
      } finally {
        unary.close();
      }
    },
  );
});

test('streams use odd ids, SETTINGS and PING are acknowledged, the receive window is opened and replenished', async () => {
  const seen: ClientFrame[] = [];
  await withFrameServer(
    (f, sock) => {
      seen.push(f);
      if (f.type === 1 && f.stream === 1) sock.write(frame(6, 0, 0, Buffer.from('pingpong')));
      if (f.type === 0 && f.flags & 1) answer(sock, f.stream, Buffer.alloc(40_000, f.stream));
    },
    async (endpoint) => {
      const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1 << 20, flowControlWindow: 65_535 });
      try {
        for (let i = 0; i < 4; i++) assert.equal((await unary.call(PATH, Buffer.from('a'), 10_000)).length, 40_000);
      } finally {
        unary.close();
      }
    },
  );
  assert.deepEqual(seen.filter((f) => f.type === 1).map((f) => f.stream), [1, 3, 5, 7]);
  assert.ok(seen.some((f) => f.type === 4 && f.flags === 1), 'SETTINGS ACK');
  assert.ok(seen.some((f) => f.type === 6 && f.flags === 1 && f.payload.toString() === 'pingpong'), 'PING ACK');
  // 160 KB through a 64 KiB window: the connection's window was handed back as it was consumed
  assert.ok(seen.some((f) => f.type === 8 && f.stream === 0), 'connection WINDOW_UPDATE');
});

test('GOAWAY fails the streams above its last-stream-id, lets the others finish, and new calls reconnect', async () => {
  await withFrameServer(
    (f, sock, conn) => {
      if (f.type !== 0 || !(f.flags & 1)) return;
      if (conn === 1 && f.stream === 3) {
        // both calls are open: stream 1 is taken, stream 3 is not
        sock.write(frame(7, 0, 0, Buffer.from([0, 0, 0, 1, 0, 0, 0, 0])));
        answer(sock, 1, Buffer.from('first'));
      } else if (conn > 1) answer(sock, f.stream, Buffer.from(`conn ${conn}`));
    },
    async (endpoint, conns) => {
      const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1024, flowControlWindow: 1 << 20 });
      try {
        const [a, b] = await Promise.allSettled([unary.call(PATH, Buffer.from('a'), 10_000), unary.call(PATH, Buffer.from('b'), 10_000)]);
        assert.equal(a.status === 'fulfilled' && a.value.toString(), 'first');
        assert.equal(b.status === 'rejected' && (b.reason as UnaryStatus).code, grpc.status.UNAVAILABLE);
        assert.equal((await unary.call(PATH, Buffer.from('c'), 10_000)).toString(), 'conn 2');
        assert.equal(conns(), 2);
      } finally {
        unary.close();
      }
    },
  );
});

test('stream ids used up (2^31-1): the calls left go to a new connection, the old one says GOAWAY and closes when done', async () => {
  const MAX = 2 ** 31 - 1;
  const headers: [number, number][] = [];
  const goaways: [number, number, number][] = [];
  await withFrameServer(
    (f, sock, conn) => {
      if (f.type === 1) headers.push([conn, f.stream]);
      if (f.type === 7) goaways.push([conn, f.payload.readUInt32BE(0), f.payload.readUInt32BE(4)]);
      if (f.type === 0 && f.flags & 1) answer(sock, f.stream, Buffer.from(`conn ${conn} stream ${f.stream}`));
    },
    async (endpoint, conns, ended) => {
      // two stream ids left on each connection: MAX-2 and MAX
      const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1024, flowControlWindow: 1 << 20, firstStreamId: MAX - 2 });
      try {
        const got = await Promise.all(Array.from({ length: 5 }, (_, i) => unary.call(PATH, Buffer.from(`r${i}`), 10_000)));
        assert.deepEqual(got.map(String), [
          `conn 1 stream ${MAX - 2}`, `conn 1 stream ${MAX}`,
          `conn 2 stream ${MAX - 2}`, `conn 2 stream ${MAX}`,
          `conn 3 stream ${MAX - 2}`,
        ]);
        assert.equal(conns(), 3);
        // the third connection still has a stream id: the next call takes it there
        assert.equal(String(await unary.call(PATH, Buffer.from('r5'), 10_000)), `conn 3 stream ${MAX}`);
        const deadline = Date.now() + 5_000;
        while (!(ended.has(1) && ended.has(2)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        assert.deepEqual([...ended].sort(), [1, 2]);
        assert.deepEqual(goaways.filter(([c]) => c <= 2).sort(), [[1, 0, 0], [2, 0, 0]]);
        // no stream id was ever reused or past 2^31-1 on a connection
        for (const c of [1, 2, 3]) {
          const ids = headers.filter(([n]) => n === c).map(([, id]) => id);
          assert.equal(new Set(ids).size, ids.length);
          assert.ok(ids.every((id) => id % 2 === 1 && id <= MAX), String(ids));
        }
      } finally {
        unary.close();
      }
    },
  );
});

test('a GOAWAY with nothing in flight closes the connection at once', async () => {
  let closed!: () => void;
  const serverSawClose = new Promise<void>((r) => (closed = r));
  await withFrameServer(
    (f, sock, conn) => {
      if (f.type !== 0 || !(f.flags & 1)) return;
      answer(sock, f.stream, Buffer.from(`conn ${conn}`));
      if (conn === 1) {
        sock.write(frame(7, 0, 0, Buffer.from([0, 0, 0, 1, 0, 0, 0, 0])));
        sock.on('end', closed);
      }
    },
    async (endpoint, conns) => {
      const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1024, flowControlWindow: 1 << 20 });
      try {
        assert.equal((await unary.call(PATH, Buffer.from('a'), 10_000)).toString(), 'conn 1');
        await serverSawClose;
        assert.equal((await unary.call(PATH, Buffer.from('b'), 10_000)).toString(), 'conn 2');
        assert.equal(conns(), 2);
      } finally {
        unary.close();
      }
    },
  );
});

test('RST_STREAM from the runtime fails that call only', async () => {
  await withFrameServer(
    (f, sock) => {
      if (f.type !== 0) return;
      if (f.stream === 1) sock.write(frame(3, 0, 1, Buffer.from([0, 0, 0, 7])));
      else answer(sock, f.stream, Buffer.from('ok'));
    },
    async (endpoint) => {
      const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1024, flowControlWindow: 1 << 20 });
      try {
        const e = await failure(unary.call(PATH, Buffer.from('a'), 10_000));
        assert.equal(e.code, grpc.status.UNAVAILABLE);
        assert.match(e.details, /REFUSED_STREAM/);
        assert.equal((await unary.call(PATH, Buffer.from('b'), 10_000)).toString(), 'ok');
      } finally {
        unary.close();
      }
    },
  );
});

test('the deadline runs on the injected clock and cancels the stream', async () => {
  const clock = new FakeClock();
  let reset: ClientFrame | undefined;
  let sent!: () => void;
  const requested = new Promise<void>((r) => (sent = r));
  await withFrameServer(
    (f) => {
      if (f.type === 0) sent();
      if (f.type === 3) reset = f;
    },
    async (endpoint) => {
      const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1024, flowControlWindow: 1 << 20, clock });
      try {
        const call = failure(unary.call(PATH, Buffer.from('a'), 2_000));
        await requested;
        clock.step(1_999);
        clock.step(1);
        const e = await call;
        assert.equal(e.code, grpc.status.DEADLINE_EXCEEDED);
        await new Promise((r) => setTimeout(r, 50));
        assert.equal(reset?.stream, 1);
        assert.equal(reset?.payload.readUInt32BE(0), 8, 'RST_STREAM CANCEL');
      } finally {
        unary.close();
      }
    },
  );
});

test('hostile or broken frames end the connection with a protocol error, never a hang or a crash', async () => {
  const cases: Array<[string, (f: ClientFrame, sock: net.Socket) => void]> = [
    ['a frame over the maximum frame size', (f, sock) => f.type === 1 && sock.write(frame(0, 0, f.stream, Buffer.alloc(20_000)))],
    ['DATA on a stream the client did not open', (f, sock) => f.type === 1 && sock.write(frame(0, 0, 2, Buffer.alloc(4)))],
    ['HEADERS on an idle stream', (f, sock) => f.type === 1 && sock.write(frame(1, 4, 99, OK_HEAD))],
    ['an HPACK index not in the table', (f, sock) => f.type === 1 && sock.write(frame(1, 4, f.stream, Buffer.from([0x80 | 100])))],
    ['a header block interrupted by another frame', (f, sock) => f.type === 1 && sock.write(Buffer.concat([frame(1, 0, f.stream, OK_HEAD), frame(0, 0, f.stream, Buffer.alloc(1))]))],
    ['a CONTINUATION flood', (f, sock) => {
      if (f.type !== 1) return;
      const parts = [frame(1, 0, f.stream, Buffer.from([0x88]))];
      for (let i = 0; i < 10; i++) parts.push(frame(9, 0, f.stream, Buffer.alloc(16_000, 0x88)));
      sock.write(Buffer.concat(parts));
    }],
    ['DATA past the stream window', (f, sock) => f.type === 1 && sock.write(Buffer.concat([frame(1, 4, f.stream, OK_HEAD), frame(0, 0, f.stream, Buffer.alloc(16_000))]))],
    ['bad padding', (f, sock) => f.type === 1 && sock.write(Buffer.concat([frame(1, 4, f.stream, OK_HEAD), frame(0, 8, f.stream, Buffer.from([9, 1, 2]))]))],
    ['a PUSH_PROMISE with push disabled', (f, sock) => f.type === 1 && sock.write(frame(5, 4, f.stream, Buffer.from([0, 0, 0, 2, 0x88])))],
    ['a malformed WINDOW_UPDATE', (f, sock) => f.type === 1 && sock.write(frame(8, 0, 0, Buffer.alloc(3)))],
    ['a SETTINGS on a stream', (f, sock) => f.type === 1 && sock.write(frame(4, 0, 1, Buffer.alloc(6)))],
  ];
  for (const [name, hostile] of cases) {
    let goaway: ClientFrame | undefined;
    await withFrameServer(
      (f, sock) => {
        if (f.type === 7) goaway = f;
        hostile(f, sock);
      },
      async (endpoint) => {
        const unary = new H2cUnary({ runtimeEndpoint: endpoint, maxMessageBytes: 1 << 20, flowControlWindow: 8192 });
        try {
          const e = await failure(unary.call(PATH, Buffer.from('a'), 10_000));
          assert.equal(e.code, grpc.status.INTERNAL, name);
          assert.match(e.details, /protocol error/, name);
          await new Promise((r) => setTimeout(r, 20));
          assert.ok(goaway && goaway.payload.readUInt32BE(4) !== 0, `${name}: GOAWAY with an error code`);
        } finally {
          unary.close();
        }
      },
    );
  }
});

test('a server that does not speak HTTP/2 fails the call', async () => {
  await tempSocket(async (socketPath) => {
    const server = net.createServer((sock) => sock.resume().end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    await new Promise<void>((r) => server.listen(socketPath, r));
    const unary = new H2cUnary({ runtimeEndpoint: socketPath, maxMessageBytes: 1024, flowControlWindow: 65_535 });
    try {
      const e = await failure(unary.call(PATH, Buffer.from('a'), 10_000));
      assert.ok(e.code === grpc.status.INTERNAL || e.code === grpc.status.UNAVAILABLE, e.details);
    } finally {
      unary.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
