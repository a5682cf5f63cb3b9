import { test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { SimRuntime, SimRuntimeError } from '../../src/sim/sim-runtime.js';
import { startSimRuntimeServer, type SimRuntimeServer } from '../../src/sim/server.js';
import { LeanCriLister } from '../../src/pleg/relist-source.js';
import { Http2Unary, grpcTimeout, type UnaryStatus } from '../../src/runtime/unary.js';
import { H2cUnary } from '../../src/runtime/h2c.js';

/** Both unary transports: the lean h2c client (the default) and node:http2 (the bench's baseline). */
const TRANSPORTS = [
  ['h2c', H2cUnary, 'h2c.js'],
  ['http2', Http2Unary, 'unary.js'],
] as const;
import { encodeIdRequest } from '../../src/pleg/wire-status.js';
import { CriError } from '../../src/runtime/cri-errors.js';

async function withSim(fn: (s: SimRuntimeServer, dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-unary-'));
  const runtime = new SimRuntime({ seed: 5 });
  runtime.populate({ containers: 12 });
  const server = await startSimRuntimeServer({ runtime, socketPath: join(dir, 'sim.sock') });
  try {
    await fn(server, dir);
  } finally {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
}

const SANDBOX_STATUS = '/runtime.v1.RuntimeService/PodSandboxStatus';

for (const [name] of TRANSPORTS) test(`status reads over ${name} decode exactly what the grpc-js channel decodes; a gone id is null`, async () => {
  await withSim(async (s) => {
    const lean = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000, statusTransport: name });
    const old = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000, statusTransport: 'grpc-js' });
    try {
      const before = s.calls.get('PodSandboxStatus') ?? 0;
      for (const sb of s.runtime.sandboxes.values()) {
        assert.deepEqual(await lean.sandboxStatus(sb.id), await old.sandboxStatus(sb.id));
        const got = await lean.sandboxStatusWithContainers(sb.id);
        assert.equal(got?.containers?.length, sb.containers.size);
        assert.deepEqual(got, await old.sandboxStatusWithContainers(sb.id));
      }
      assert.equal((s.calls.get('PodSandboxStatus') ?? 0) - before, 4 * s.runtime.sandboxes.size, 'every read reached the runtime');
      for (const c of s.runtime.containers.values()) assert.deepEqual(await lean.containerStatus(c.id), await old.containerStatus(c.id));
      const gone = 'f'.repeat(64);
      assert.equal(await lean.containerStatus(gone), null);
      assert.equal(await lean.sandboxStatus(gone), null);
      assert.equal(await lean.sandboxStatusWithContainers(gone), null);
      // 64 reads at once share the one connection
      const all = await Promise.all([...s.runtime.containers.keys()].flatMap((id) => [lean.containerStatus(id), lean.containerStatus(id)]));
      assert.equal(all.filter((x) => x !== null).length, 2 * s.runtime.containers.size);
    } finally {
      lean.close();
      old.close();
    }
  });
});

for (const [name, Unary] of TRANSPORTS) test(`a failed status read over ${name} carries the runtime's gRPC code and message, as on the grpc-js channel`, async () => {
  await withSim(async (s) => {
    const unary = new Unary({ runtimeEndpoint: s.endpoint, maxMessageBytes: 1 << 20, flowControlWindow: 1 << 20 });
    try {
      const err = (await unary.call(SANDBOX_STATUS, encodeIdRequest('no-such-sandbox'), 10_000).then(
        () => assert.fail('expected NOT_FOUND'),
        (e: UnaryStatus) => e,
      )) as UnaryStatus;
      assert.equal(err.code, GrpcStatus.NOT_FOUND);
      assert.match(err.details, /no-such-sandbox/);
      const missing = (await unary.call('/runtime.v1.RuntimeService/NoSuchMethod', Buffer.alloc(0), 10_000).then(
        () => assert.fail('expected UNIMPLEMENTED'),
        (e: UnaryStatus) => e,
      )) as UnaryStatus;
      assert.equal(missing.code, GrpcStatus.UNIMPLEMENTED);
    } finally {
      unary.close();
    }
    // through the lister: a CriError naming the method, like the grpc-js path's
    const lean = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000, statusTransport: name });
    try {
      s.runtime.containerStatus = () => {
        throw new SimRuntimeError('FAILED_PRECONDITION', 'runtime is busy: 50% done');
      };
      await assert.rejects(lean.containerStatus('x'), (e: unknown) => e instanceof CriError && e.grpcCode === GrpcStatus.FAILED_PRECONDITION && e.method === 'ContainerStatus' && e.details === 'runtime is busy: 50% done');
    } finally {
      lean.close();
    }
  });
});

for (const [name] of TRANSPORTS) test(`the ${name} connection is reopened after the runtime restarts on the same socket`, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-unary-'));
  const socketPath = join(dir, 'sim.sock');
  const runtime = new SimRuntime({ seed: 6 });
  runtime.populate({ containers: 3 });
  let server = await startSimRuntimeServer({ runtime, socketPath });
  const lean = new LeanCriLister({ runtimeEndpoint: server.endpoint, timeoutMs: 10_000, statusTransport: name });
  try {
    const id = [...runtime.sandboxes.keys()][0]!;
    assert.equal((await lean.sandboxStatus(id))?.id, id);
    await server.close();
    await assert.rejects(lean.sandboxStatus(id), (e: unknown) => e instanceof CriError && e.unavailable);
    server = await startSimRuntimeServer({ runtime, socketPath });
    assert.equal((await lean.sandboxStatus(id))?.id, id);
  } finally {
    lean.close();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
});

/** A bare HTTP/2 server on a unix socket answering every stream with `answer`. */
async function withRawServer(answer: (s: http2.ServerHttp2Stream) => void, fn: (endpoint: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-unary-'));
  const socketPath = join(dir, 'raw.sock');
  const server = http2.createServer();
  const streams = new Set<http2.ServerHttp2Stream>();
  server.on('stream', (s) => {
    streams.add(s);
    s.on('close', () => streams.delete(s));
    answer(s);
  });
  await new Promise<void>((r) => server.listen(socketPath, r));
  try {
    await fn(`unix://${socketPath}`);
  } finally {
    for (const s of streams) s.close();
    await new Promise<void>((r) => server.close(() => r()));
    await rm(dir, { recursive: true, force: true });
  }
}

for (const [name, Unary] of TRANSPORTS) test(`a runtime that does not answer fails the ${name} call with DEADLINE_EXCEEDED at its deadline`, async () => {
  await withRawServer(
    () => undefined,
    async (endpoint) => {
      const unary = new Unary({ runtimeEndpoint: endpoint, maxMessageBytes: 1 << 20, flowControlWindow: 1 << 20 });
      try {
        await assert.rejects(unary.call(SANDBOX_STATUS, encodeIdRequest('a'), 50), (e: UnaryStatus) => e.code === GrpcStatus.DEADLINE_EXCEEDED);
      } finally {
        unary.close();
      }
    },
  );
});

for (const [tname, Unary] of TRANSPORTS) test(`${tname} responses are checked: size limit, framing, compression flag, a missing grpc-status, a non-gRPC HTTP status`, async () => {
  const frame = (flag: number, declared: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([flag, declared >>> 24, (declared >>> 16) & 255, (declared >>> 8) & 255, declared & 255]), body]);
  const cases: Array<[string, (s: http2.ServerHttp2Stream) => void, number, RegExp]> = [
    ['too large', (s) => (s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }), s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })), s.end(frame(0, 4096, Buffer.alloc(4096)))), GrpcStatus.RESOURCE_EXHAUSTED, /larger than max/],
    ['short body', (s) => (s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }), s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })), s.end(frame(0, 10, Buffer.alloc(4)))), GrpcStatus.INTERNAL, /framing/],
    ['compressed', (s) => (s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }), s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })), s.end(frame(1, 2, Buffer.alloc(2)))), GrpcStatus.INTERNAL, /compressed/],
    ['no status', (s) => (s.respond({ ':status': 200, 'content-type': 'application/grpc' }), s.end(frame(0, 0, Buffer.alloc(0)))), GrpcStatus.INTERNAL, /grpc-status/],
    ['http 503', (s) => (s.respond({ ':status': 503 }), s.end()), GrpcStatus.UNAVAILABLE, /503/],
    ['trailers-only with a percent-encoded message', (s) => (s.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '9', 'grpc-message': 'not%20ready%3A%2050%25' }, { endStream: true })), GrpcStatus.FAILED_PRECONDITION, /^not ready: 50%$/],
  ];
  for (const [name, answer, code, details] of cases) {
    await withRawServer(answer, async (endpoint) => {
      const unary = new Unary({ runtimeEndpoint: endpoint, maxMessageBytes: 1024, flowControlWindow: 1 << 20 });
      try {
        await assert.rejects(unary.call(SANDBOX_STATUS, encodeIdRequest('a'), 10_000), (e: UnaryStatus) => {
          assert.equal(e.code, code, name);
          assert.match(e.details, details, name);
          return true;
        });
      } finally {
        unary.close();
      }
    });
  }
});

test('grpc-timeout takes at most 8 digits, in the coarsest unit needed', () => {
  assert.equal(grpcTimeout(120_000), '120000m');
  assert.equal(grpcTimeout(0.2), '1m');
  assert.equal(grpcTimeout(99_999_999), '99999999m');
  assert.equal(grpcTimeout(100_000_000), '100000S');
  assert.equal(grpcTimeout(1e14), '27777778H');
});

for (const [name, Unary, file] of TRANSPORTS) test(`a ${name} call in flight keeps the process alive; an idle connection does not`, async () => {
  // the answer comes 300 ms after the request: a process with nothing else to do must wait for it
  await withRawServer(
    (s) => {
      setTimeout(() => {
        s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
        s.end(Buffer.from([0, 0, 0, 0, 2, 8, 1]));
      }, 300);
    },
    async (endpoint) => {
      const mod = new URL(`../../src/runtime/${file}`, import.meta.url).href;
      const code = `import { ${Unary.name} } from ${JSON.stringify(mod)};
        const u = new ${Unary.name}({ runtimeEndpoint: ${JSON.stringify(endpoint)}, maxMessageBytes: 1024, flowControlWindow: 65535 });
        const buf = await u.call('/x/Y', Buffer.alloc(0), 10000);
        console.log('answer', buf.toString('hex'));`;
      const out = await new Promise<{ stdout: string; code: number | null }>((resolve) => {
        const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
        let stdout = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.on('exit', (c) => resolve({ stdout, code: c }));
      });
      // the child exits on its own after the answer (the idle connection holds nothing open)
      assert.equal(out.code, 0);
      assert.equal(out.stdout.trim(), 'answer 0801');
    },
  );
});
