// The probe pool's wire (src/prober/runner.ts createProbePool and workers/probe.ts serve()),
// with serve() on this thread behind a stand-in for Piscina: a request object crosses to a
// thread once and is named by key after that, outcomes come back by code (output only for a
// non-success), and a key the main thread has dropped is no longer known to the thread.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { Piscina } from 'piscina';
import { createProbePool } from '../../src/prober/runner.js';
import { serve, type ProbeBatch, type ResultBatch, type TcpProbeRequest } from '../../workers/probe.js';

/** A stand-in for Piscina that runs serve() here and keeps every batch the thread receives. */
function inThreadPool(batches: ProbeBatch[]): Piscina {
  return {
    run({ port }: { port: MessagePort }) {
      port.on('message', (m: ProbeBatch | { close: true }) => { if (!('close' in m)) batches.push(m); });
      return serve({ port });
    },
  } as unknown as Piscina;
}

test('probe pool: a request crosses to the thread once, then only its key; outputs only for failures', async () => {
  const server = net.createServer((s) => s.on('error', () => {}));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const open = (server.address() as AddressInfo).port;
  const closed = net.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const shut = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const batches: ProbeBatch[] = [];
  const pool = createProbePool(inThreadPool(batches), 1);
  try {
    const up: TcpProbeRequest = { kind: 'tcp', host: '127.0.0.1', port: open, timeoutMs: 1000 };
    const down: TcpProbeRequest = { kind: 'tcp', host: '127.0.0.1', port: shut, timeoutMs: 1000 };
    assert.deepEqual(await pool.run(up), { result: 'success', output: '' });
    assert.deepEqual(await pool.run(up), { result: 'success', output: '' });
    const [a, b] = await Promise.all([pool.run(up), pool.run(down)]);
    assert.equal(a.result, 'success');
    assert.equal(b.result, 'failure');
    assert.match(b.output, /connection refused/);
    assert.equal(batches.length, 3);
    assert.deepEqual(batches[0]!.defs?.map((d) => d.req), [up], 'the first run of a request carries it');
    assert.equal(batches[1]!.defs, undefined, 'a second run of the same request sends its key only');
    assert.deepEqual(batches[2]!.defs?.map((d) => d.req), [down]);
    assert.equal(batches[2]!.keys.length, 2);
    assert.equal(batches[2]!.keys[0], batches[0]!.keys[0], 'the same request keeps its key');
    assert.ok(batches.every((m) => m.ids instanceof Float64Array && m.keys instanceof Float64Array));
  } finally {
    await pool.close();
    await new Promise<void>((r) => server.close(() => r()));
  }
});

test('probe pool thread: a forgotten key is unknown; results are codes with outputs only when one did not succeed', async () => {
  const { port1, port2 } = new MessageChannel();
  const served = serve({ port: port2 });
  const results: ResultBatch[] = [];
  port1.on('message', (m: ResultBatch) => results.push(m));
  const server = net.createServer((s) => s.on('error', () => {}));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const req: TcpProbeRequest = { kind: 'tcp', host: '127.0.0.1', port: (server.address() as AddressInfo).port, timeoutMs: 1000 };
  const next = (): Promise<ResultBatch> => new Promise((r) => port1.once('message', r));
  try {
    let got = next();
    port1.postMessage({ ids: Float64Array.of(1), keys: Float64Array.of(7), defs: [{ key: 7, req }] } satisfies ProbeBatch);
    let b = await got;
    assert.deepEqual([...b.ids], [1]);
    assert.deepEqual([...b.codes], [0]);
    assert.equal(b.outputs, undefined, 'no outputs for a batch of successes');
    got = next();
    port1.postMessage({ ids: Float64Array.of(2), keys: Float64Array.of(7), forget: [7] } satisfies ProbeBatch);
    b = await got;
    assert.deepEqual([...b.codes], [3], 'unknown');
    assert.match(b.outputs![0]!, /probe request 7 unknown/);
  } finally {
    port1.postMessage({ close: true });
    await served;
    port1.close();
    await new Promise<void>((r) => server.close(() => r()));
  }
});
