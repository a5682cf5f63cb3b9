// The CRI client's runtime-service calls go over its own h2c connection (h2c.ts), not grpc-js:
// the same answers, the same errors, the message size limit both ways, and one connection
// for many calls. The peer is a node:http2 server speaking gRPC's framing by hand.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type ServerHttp2Stream } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CriClient, criDefinitions } from '../../src/runtime/cri-client.js';
import { CriError, isNotFound } from '../../src/runtime/cri-errors.js';

type Handler = (path: string, body: Buffer, s: ServerHttp2Stream) => void;

async function withPeer(handler: Handler, fn: (cri: CriClient, seen: { paths: string[]; sessions: number; agents: string[] }) => Promise<void>, maxMessageBytes?: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-cri-h2c-'));
  const seen = { paths: [] as string[], sessions: 0, agents: [] as string[] };
  const server = createServer();
  server.on('session', () => void seen.sessions++);
  server.on('stream', (s, headers) => {
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('end', () => {
      const path = String(headers[':path']);
      seen.agents.push(String(headers['user-agent'] ?? ''));
      seen.paths.push(path);
      handler(path, Buffer.concat(chunks).subarray(5), s);
    });
  });
  await new Promise<void>((r) => server.listen(join(dir, 'cri.sock'), r));
  const cri = new CriClient({ runtimeEndpoint: `unix://${join(dir, 'cri.sock')}`, timeoutMs: 5_000, ...(maxMessageBytes ? { maxMessageBytes } : {}) });
  try {
    await criDefinitions();
    await fn(cri, seen);
  } finally {
    cri.close();
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function answer(s: ServerHttp2Stream, message: Buffer, grpcStatus = 0, grpcMessage = ''): void {
  s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': String(grpcStatus), ...(grpcMessage ? { 'grpc-message': encodeURIComponent(grpcMessage) } : {}) }));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  s.end(Buffer.concat([head, message]));
}

async function encode(method: string, res: object, service: 'runtime' | 'image' = 'runtime'): Promise<Buffer> {
  const def = (await criDefinitions())[service][method]!;
  return def.responseSerialize(res);
}

test('runtime and image calls share one h2c connection and decode what the runtime answered', async () => {
  const image = await encode('ImageStatus', { image: { id: 'sha256:abc', repo_tags: ['busybox:latest'], size: '4096' } }, 'image');
  const version = await encode('Version', { version: '0.1.0', runtime_name: 'peer', runtime_version: '1.2.3', runtime_api_version: 'v1' });
  const status = await encode('ContainerStatus', { status: { id: 'c1', state: 'CONTAINER_EXITED', exit_code: 3, created_at: '1700000000000000000', metadata: { name: 'main', attempt: 0 }, image: { image: 'busybox' }, image_ref: 'sha256:x', labels: {}, annotations: {}, mounts: [] } });
  await withPeer(async (path, _body, s) => {
    answer(s, path.endsWith('/Version') ? version : path.endsWith('/ContainerStatus') ? status : path.endsWith('/ImageStatus') ? image : Buffer.alloc(0));
  }, async (cri, seen) => {
    const [v, c, , i] = await Promise.all([cri.version(), cri.containerStatus('c1'), cri.stopContainer('c1', 0), cri.imageStatus('busybox')]);
    assert.equal(i.image?.id, 'sha256:abc');
    assert.equal(v.runtime_name, 'peer');
    assert.equal(c.status?.exit_code, 3);
    assert.equal(c.status?.state, 'CONTAINER_EXITED');
    assert.deepEqual(seen.paths.sort(), ['/runtime.v1.ImageService/ImageStatus', '/runtime.v1.RuntimeService/ContainerStatus', '/runtime.v1.RuntimeService/StopContainer', '/runtime.v1.RuntimeService/Version']);
    assert.equal(seen.sessions, 1, 'one connection for the four calls');
    assert.ok(seen.agents.every((a) => !a.includes('grpc-node')), `not sent by grpc-js: ${seen.agents.join(', ')}`);
  });
});

test('a runtime error keeps its gRPC code and message; a call past its deadline is DEADLINE_EXCEEDED', async () => {
  await withPeer((path, _body, s) => {
    if (path.endsWith('/RemoveContainer')) answer(s, Buffer.alloc(0), 5, 'container "c9" not found: 100% gone');
    // StopPodSandbox never answers
  }, async (cri) => {
    await assert.rejects(cri.removeContainer('c9'), (err) => isNotFound(err) && /RemoveContainer/.test((err as Error).message) && /100% gone/.test((err as Error).message));
    const short = new CriClient({ runtimeEndpoint: cri.runtimeEndpoint, timeoutMs: 200 });
    try {
      await assert.rejects(short.stopPodSandbox('s1'), (err) => err instanceof CriError && err.code === 'CRI_DEADLINE_EXCEEDED');
    } finally {
      short.close();
    }
  });
});

test('the message size limit holds both ways: a request too large never leaves, an answer too large is refused', async () => {
  const big = await encode('ContainerStatus', { status: { id: 'c1', labels: { fill: 'x'.repeat(4096) } } });
  await withPeer((_path, _body, s) => answer(s, big), async (cri, seen) => {
    await assert.rejects(cri.updateRuntimeConfig({ network_config: { pod_cidr: '10.0.0.0/8,' + 'x'.repeat(4096) } }), (err) => err instanceof CriError && err.code === 'CRI_RESOURCE_EXHAUSTED' && /UpdateRuntimeConfig/.test(err.message));
    assert.deepEqual(seen.paths, [], 'the large request was not sent');
    await assert.rejects(cri.containerStatus('c1'), (err) => err instanceof CriError && err.code === 'CRI_RESOURCE_EXHAUSTED');
  }, 2048);
});
