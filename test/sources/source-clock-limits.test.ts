// The sources' timers run on the injected clock (tests step it; nothing sleeps), and what they
// read is bounded: a manifest file or URL answer over the limit is an error naming it and the limit.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ManifestError } from '../../src/sources/errors.js';
import { FileSource, type SourceEntry } from '../../src/sources/file-source.js';
import { UrlSource } from '../../src/sources/url-source.js';
import { FakeClock } from '../../src/util/clock.js';

const roots: string[] = [];
after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'kubelet-ts-clock-'));
  roots.push(d);
  return d;
}

const manifest = (name: string, image = 'busybox:1.36'): string =>
  `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\nspec:\n  containers:\n  - name: main\n    image: ${image}\n`;

/** Waits for async I/O the source started (reads, fetches); the deadline only turns a hang into a failure. */
async function until(what: string, cond: () => boolean): Promise<void> {
  const end = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

const names = (entries: SourceEntry[] | undefined): string[] => (entries ?? []).map((e) => e.pod.metadata.name!);

describe('FileSource on an injected clock', () => {
  it('the periodic re-check is a timer on the clock: stepping it picks up a change', async () => {
    const dir = tempDir();
    const clock = new FakeClock();
    const sets: SourceEntry[][] = [];
    const src = new FileSource({ path: dir, nodeName: 'n1', checkPeriodMs: 20_000, watch: false, clock, onSet: (e) => sets.push(e), onError: () => {} });
    src.start();
    try {
      await until('the first set and the next check scheduled', () => sets.length === 1 && clock.pendingTimers() === 1);
      writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
      clock.step(19_999);
      assert.equal(clock.pendingTimers(), 1, 'not due yet');
      clock.step(1);
      await until('alpha', () => names(sets.at(-1)).includes('alpha-n1'));
      await until('the next check scheduled', () => clock.pendingTimers() === 1);
    } finally {
      await src.stop();
    }
    assert.equal(clock.pendingTimers(), 0, 'stop cancels the timer');
  });

  it('fs events are debounced on the clock', async () => {
    const dir = tempDir();
    const clock = new FakeClock();
    const sets: SourceEntry[][] = [];
    const src = new FileSource({ path: dir, nodeName: 'n1', checkPeriodMs: 3_600_000, clock, debounceMs: 100, onSet: (e) => sets.push(e), onError: () => {} });
    src.start();
    try {
      await until('the first set', () => sets.length === 1 && clock.pendingTimers() === 1);
      writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
      await until('the debounce timer', () => clock.pendingTimers() === 2);
      assert.equal(sets.length, 1, 'nothing read before the debounce ends');
      clock.step(100);
      await until('alpha', () => names(sets.at(-1)).includes('alpha-n1'));
    } finally {
      await src.stop();
    }
  });

  it('a manifest file over the size limit is an error naming the file and the limit; the good pod stays', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
    writeFileSync(join(dir, 'big.yaml'), `${manifest('big')}# ${'x'.repeat(2000)}\n`);
    const sets: SourceEntry[][] = [];
    const errors: ManifestError[] = [];
    const src = new FileSource({
      path: dir,
      nodeName: 'n1',
      checkPeriodMs: 3_600_000,
      watch: false,
      clock: new FakeClock(),
      maxManifestBytes: 1024,
      onSet: (e) => sets.push(e),
      onError: (e) => errors.push(e),
    });
    src.start();
    try {
      await until('the first set', () => sets.length === 1);
      assert.deepEqual(names(sets[0]), ['alpha-n1']);
      assert.equal(errors.length, 1);
      assert.equal(errors[0]!.location, join(dir, 'big.yaml'));
      assert.match(errors[0]!.message, /big\.yaml: manifest is \d+ bytes, more than the limit of 1024 bytes/);
      await src.check();
      assert.equal(errors.length, 1, 'reported once');
    } finally {
      await src.stop();
    }
  });

  it('a bad manifest is decoded once per content, not at every periodic check', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'bad.yaml'), manifest('bad').replace('name: main', 'name: Main'));
    const errors: ManifestError[] = [];
    const src = new FileSource({ path: dir, nodeName: 'n1', checkPeriodMs: 3_600_000, watch: false, clock: new FakeClock(), onSet: () => {}, onError: (e) => errors.push(e) });
    src.start();
    try {
      await until('the report', () => errors.length === 1);
      await src.check();
      await src.check();
      assert.equal(errors.length, 1);
      assert.equal(errors[0]!.field, 'spec.containers[0].name');
    } finally {
      await src.stop();
    }
  });
});

describe('UrlSource on an injected clock, bounded', () => {
  let server: Server;
  let base = '';
  let handler: (path: string, res: import('node:http').ServerResponse) => void = () => {};
  before(async () => {
    server = createServer((req, res) => handler(req.url ?? '', res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  function source(url: string, clock: FakeClock, extra: { timeoutMs?: number; maxManifestBytes?: number } = {}) {
    const sets: SourceEntry[][] = [];
    const errors: ManifestError[] = [];
    const src = new UrlSource({ url, nodeName: 'n1', checkPeriodMs: 20_000, clock, onSet: (e) => sets.push(e), onError: (e) => errors.push(e), ...extra });
    return { src, sets, errors };
  }

  it('polls on the clock', async () => {
    let body = manifest('alpha');
    handler = (_p, res) => res.end(body);
    const clock = new FakeClock();
    const { src, sets } = source(`${base}/poll`, clock);
    src.start();
    try {
      await until('the first set and the next poll scheduled', () => sets.length === 1 && clock.pendingTimers() === 1);
      body = manifest('alpha', 'busybox:2');
      clock.step(20_000);
      await until('the edit', () => sets.length === 2);
      assert.equal(sets[1]![0]!.pod.spec.containers[0]!.image, 'busybox:2');
    } finally {
      await src.stop();
    }
  });

  it('the request timeout is a timer on the clock, and names the URL', async () => {
    handler = () => {}; // never answers
    const clock = new FakeClock();
    const url = `${base}/hang`;
    const { src, errors } = source(url, clock, { timeoutMs: 10_000 });
    const done = src.check();
    await until('the request and its timeout', () => clock.pendingTimers() === 1);
    clock.step(10_000);
    await done;
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.message, `${url}: GET timed out after 10000 ms`);
    assert.equal(clock.pendingTimers(), 0);
    await src.stop();
  });

  it('an answer over the size limit is an error naming the URL and the limit (declared or streamed)', async () => {
    const big = `${manifest('big')}# ${'x'.repeat(4000)}\n`;
    handler = (path, res) => {
      if (path === '/declared') {
        res.writeHead(200, { 'content-length': Buffer.byteLength(big) });
        res.end(big);
      } else {
        res.writeHead(200); // chunked: no length known up front
        res.write(big.slice(0, 2000));
        res.end(big.slice(2000));
      }
    };
    for (const path of ['/declared', '/streamed']) {
      const { src, errors, sets } = source(`${base}${path}`, new FakeClock(), { maxManifestBytes: 1024 });
      await src.check();
      assert.equal(sets.length, 0);
      assert.equal(errors.length, 1, path);
      assert.match(errors[0]!.message, new RegExp(`^${base}${path}: response is .*bytes, more than the limit of 1024 bytes$`));
      await src.stop();
    }
  });
});
