// The lean h2c client of the gRPC probe (workers/grpc-probe.ts): the same outputs as Node's
// http2 client against a real @grpc/grpc-js server and a node http2 server (Huffman-coded
// fields), the frames a server may send (padding, CONTINUATION, PING, SETTINGS), and
// malformed or hostile answers, which fail the probe at once.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { grpcProbe, grpcProbeHttp2, h2cHealthRequest } from '../../workers/grpc-probe.js';
import type { GrpcProbeRequest } from '../../workers/probe.js';

const probe = (port: number, service = '', timeoutMs = 2000): GrpcProbeRequest => ({ kind: 'grpc', host: '127.0.0.1', port, service, timeoutMs });

test('grpc probe (lean h2c): the same outputs as Node\'s http2 client against a grpc-js health server', async () => {
  const server = new grpc.Server();
  const ident = (b: Buffer): Buffer => b;
  const statuses: Record<string, number> = { '': 1, ready: 1, draining: 2, odd: 3 };
  server.addService({
    Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false, requestSerialize: ident, requestDeserialize: ident, responseSerialize: ident, responseDeserialize: ident, originalName: 'check' },
  } as grpc.ServiceDefinition, {
    Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const b = call.request;
      const service = b.length > 2 ? b.subarray(2, 2 + b[1]!).toString() : '';
      const st = statuses[service];
      if (st === undefined) return cb({ code: grpc.status.NOT_FOUND, details: `unknown service ${service} (ü, 100%)` } as grpc.ServiceError);
      cb(null, Buffer.from([0x08, st]));
    },
  });
  const port = await new Promise<number>((res, rej) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
  try {
    for (const service of ['', 'ready', 'draining', 'odd', 'nope']) {
      const lean = await grpcProbe(probe(port, service));
      assert.deepEqual(lean, await grpcProbeHttp2(probe(port, service)), `service ${JSON.stringify(service)}`);
    }
    assert.deepEqual(await grpcProbe(probe(port, 'draining')), { result: 'failure', output: 'service unhealthy (responded with "NOT_SERVING")' });
    assert.deepEqual(await grpcProbe(probe(port, 'nope')), { result: 'failure', output: 'error: health rpc probe failed: rpc error: code = NotFound desc = unknown service nope (ü, 100%)' });
  } finally {
    server.forceShutdown();
  }
});

test('grpc probe (lean h2c): a node http2 server\'s Huffman-coded, indexed fields; trailers-only answers', async () => {
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    stream.on('data', () => {});
    const body = Buffer.from([0, 0, 0, 0, 2, 0x08, 1]);
    const path = headers[':path'];
    if (path !== '/grpc.health.v1.Health/Check') {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12', 'grpc-message': 'no%20such%20method' }, { endStream: true });
      return;
    }
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-long': 'x'.repeat(300) }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '7', 'grpc-message': 'denied:%20Zebras%20{~}%5C', 'x-long': 'x'.repeat(300) }));
    stream.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  try {
    const out = await grpcProbe(probe(port));
    assert.deepEqual(out, { result: 'failure', output: 'error: health rpc probe failed: rpc error: code = PermissionDenied desc = denied: Zebras {~}\\' });
    assert.deepEqual(out, await grpcProbeHttp2(probe(port)));
  } finally {
    server.close();
  }
});

/** A raw TCP server that plays the server's side of the connection with `script`. */
async function rawServer(script: (s: net.Socket, got: Buffer[]) => void): Promise<{ port: number; got: Buffer[]; close(): Promise<void> }> {
  const got: Buffer[] = [];
  const server = net.createServer((s) => {
    s.on('error', () => {});
    s.on('data', (d) => got.push(d));
    script(s, got);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, got, close: () => new Promise((r) => server.close(() => r())) };
}

function frame(type: number, flags: number, stream: number, payload: Buffer | number[]): Buffer {
  const p = Buffer.from(payload as Buffer);
  const h = Buffer.alloc(9);
  h.writeUIntBE(p.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, p]);
}
const lit = (name: string, value: string): number[] => [0x00, name.length, ...Buffer.from(name), value.length, ...Buffer.from(value)];
const SETTINGS = frame(4, 0, 0, []);

test('grpc probe (lean h2c): one write out; padded frames, CONTINUATION, PING and SETTINGS answered', async () => {
  const ping = frame(6, 0, 0, [1, 2, 3, 4, 5, 6, 7, 8]);
  const acks = [frame(4, 1, 0, []), frame(6, 1, 0, [1, 2, 3, 4, 5, 6, 7, 8])];
  const srv = await rawServer((s, got) => {
    // the answer goes out once SETTINGS and PING are acknowledged
    let answered = false;
    s.once('data', () => s.write(Buffer.concat([SETTINGS, ping])));
    s.on('data', () => {
      const all = Buffer.concat(got);
      if (answered || !acks.every((a) => all.includes(a))) return;
      answered = true;
      s.write(Buffer.concat([
        // HEADERS padded (2 bytes), without END_HEADERS: :status 200, then content-type in a CONTINUATION
        frame(1, 0x8, 1, [2, 0x88, 0, 0]),
        frame(9, 0x4, 1, lit('content-type', 'application/grpc')),
        // DATA padded: the message in two frames
        frame(0, 0x8, 1, [1, 0, 0, 0, 0, 0]),
        frame(0, 0, 1, [2, 0x08, 1]),
        frame(1, 0x5, 1, lit('grpc-status', '0')),
      ]));
    });
  });
  try {
    assert.deepEqual(await grpcProbe(probe(srv.port)), { result: 'success', output: 'service is serving' });
    const all = Buffer.concat(srv.got);
    const first = h2cHealthRequest(`127.0.0.1:${srv.port}`, '', 2000);
    assert.ok(all.subarray(0, first.length).equals(first), 'the request went out first, whole');
    // the server answered only after both acknowledgements: the success says they came
  } finally {
    await srv.close();
  }
});

test('grpc probe (lean h2c): malformed and hostile answers fail at once with the reason', async () => {
  const cases: [string, Buffer, RegExp][] = [
    ['HTTP/1 answer', Buffer.from('HTTP/1.1 400 Bad Request\r\n\r\n'), /^error: health rpc probe failed: Protocol error$/],
    ['frame over the size limit', Buffer.concat([SETTINGS, Buffer.from([0x01, 0, 0, 1, 4, 0, 0, 0, 1])]), /frame of 65536 bytes over the maximum frame size 16384/],
    ['DATA before HEADERS', Buffer.concat([SETTINGS, frame(0, 1, 1, [0, 0, 0, 0, 0])]), /DATA before HEADERS/],
    ['bad HPACK', Buffer.concat([SETTINGS, frame(1, 5, 1, [0xff])]), /Protocol error: truncated integer/],
    ['bad padding', Buffer.concat([SETTINGS, frame(1, 0xd, 1, [9, 0x88])]), /bad padding/],
    ['header block interrupted', Buffer.concat([SETTINGS, frame(1, 0, 1, [0x88]), frame(0, 1, 1, [])]), /header block interrupted/],
    ['push promise', Buffer.concat([SETTINGS, frame(5, 4, 1, [0, 0, 0, 2, 0x82])]), /PUSH_PROMISE/],
    ['RST_STREAM', Buffer.concat([SETTINGS, frame(3, 0, 1, [0, 0, 0, 7])]), /^error: health rpc probe failed: Stream closed with error code NGHTTP2_REFUSED_STREAM$/],
    ['GOAWAY with an error', Buffer.concat([SETTINGS, frame(7, 0, 0, [0, 0, 0, 0, 0, 0, 0, 1])]), /^error: health rpc probe failed: Session closed with error code 1$/],
    ['CONTINUATION flood', Buffer.concat([SETTINGS, frame(1, 0, 1, [0x88]), ...Array.from({ length: 5 }, () => frame(9, 0, 1, Buffer.alloc(16000)))]), /header block over 65536 bytes/],
    ['malformed SETTINGS', frame(4, 0, 0, [1, 2, 3]), /malformed SETTINGS/],
  ];
  for (const [name, answer, want] of cases) {
    const srv = await rawServer((s) => s.once('data', () => s.write(answer)));
    try {
      // the reason, not the timeout's message: the probe failed on the frame
      const out = await grpcProbe(probe(srv.port, '', 5000));
      assert.equal(out.result, 'failure', name);
      assert.match(out.output, want, name);
    } finally {
      await srv.close();
    }
  }
  // the server closes before answering: what Node's client said (no grpc-status)
  const closes = await rawServer((s) => s.once('data', () => s.end(Buffer.concat([SETTINGS, frame(1, 4, 1, [0x88])]))));
  try {
    assert.deepEqual(await grpcProbe(probe(closes.port)), { result: 'failure', output: 'error: health rpc probe failed: rpc error: code = Unknown desc = unexpected HTTP status code 200 with no grpc-status' });
  } finally {
    await closes.close();
  }
});
