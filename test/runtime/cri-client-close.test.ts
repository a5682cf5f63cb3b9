// close() cancels the calls in flight: a shutdown never waits out a CRI deadline (2 minutes by
// default, unbounded for PullImage). The peer here is an HTTP/2 server that takes each call's
// stream and never answers, as a runtime stuck in a long StopContainer does.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type ServerHttp2Stream } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CriClient, criDefinitions } from '../../src/runtime/cri-client.js';
import { CriError } from '../../src/runtime/cri-errors.js';

test('close() cancels in-flight unary calls and PullImage; later calls fail at once', { timeout: 30_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-cri-close-'));
  const streams: ServerHttp2Stream[] = [];
  const server = createServer();
  server.on('stream', (s) => void streams.push(s));
  await new Promise<void>((r) => server.listen(join(dir, 'mute.sock'), r));
  const cri = new CriClient({ runtimeEndpoint: `unix://${join(dir, 'mute.sock')}`, timeoutMs: 600_000 });
  try {
    await criDefinitions();
    const list = cri.listContainers();
    const stop = cri.stopContainer('c1', 300);
    const pull = cri.pullImage('busybox');
    // Wait until the peer holds all three calls' streams: the calls are in flight.
    const by = Date.now() + 10_000;
    while (streams.length < 3 && Date.now() < by) await new Promise((r) => setTimeout(r, 10));
    assert.equal(streams.length, 3, 'the three calls reached the peer');
    cri.close();
    for (const p of [list, stop, pull]) {
      await assert.rejects(p, (err) => err instanceof CriError && err.code === 'CRI_CANCELLED');
    }
    await assert.rejects(cri.status(), (err) => err instanceof CriError && err.code === 'CRI_CANCELLED' && /closed/.test(err.message));
  } finally {
    for (const s of streams) s.destroy();
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
});
