// /debug/pprof/heap is a sampled allocation profile in pprof's format (gzip'd profile.proto, read
// here by a protobuf wire decoder written for the test), and never holds the heap's contents: a
// secret string kept live in this process is not in the answer.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';

import { FakeClock } from '../../src/util/clock.js';
import { profilingHandlers } from '../../src/server/kubelet-handlers.js';
import { encodeHeapProfile } from '../../src/server/pprof.js';
import { startServers, type TestServers } from './raw-http.js';

type Field = { field: number; wire: number; value: bigint | Buffer };

/** Decodes one protobuf message's fields (varint and length-delimited; anything else fails). */
function decode(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      assert.ok(i < buf.length, 'truncated varint');
      const b = buf[i++]!;
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      assert.ok(shift < 63n, 'varint too long');
    }
  };
  while (i < buf.length) {
    const key = varint();
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) out.push({ field, wire, value: varint() });
    else if (wire === 2) {
      const len = Number(varint());
      assert.ok(i + len <= buf.length, `field ${field} overruns its message`);
      out.push({ field, wire, value: buf.subarray(i, i + len) });
      i += len;
    } else assert.fail(`unexpected wire type ${wire} for field ${field}`);
  }
  return out;
}

const packed = (b: Buffer): bigint[] => {
  const vals: bigint[] = [];
  let v = 0n;
  let shift = 0n;
  for (const x of b) {
    v |= BigInt(x & 0x7f) << shift;
    shift += 7n;
    if (!(x & 0x80)) { vals.push(v); v = 0n; shift = 0n; }
  }
  return vals;
};

interface Profile {
  strings: string[];
  sampleTypes: [string, string][];
  samples: { locations: bigint[]; values: bigint[] }[];
  locations: Map<bigint, bigint[]>;
  functions: Map<bigint, { name: string; file: string }>;
  period: bigint;
}

/** profile.proto as pprof reads it, with its references checked. */
function parseProfile(raw: Buffer): Profile {
  const fields = decode(raw);
  const strings = fields.filter((f) => f.field === 6).map((f) => (f.value as Buffer).toString('utf8'));
  assert.equal(strings[0], '', 'string_table[0] must be the empty string');
  const s = (v: bigint | undefined): string => {
    assert.ok(v === undefined || v < BigInt(strings.length), `string index ${v} out of range`);
    return strings[Number(v ?? 0n)]!;
  };
  const get = (fs: Field[], n: number): bigint | undefined => fs.find((f) => f.field === n)?.value as bigint | undefined;
  const sampleTypes = fields.filter((f) => f.field === 1).map((f) => { const m = decode(f.value as Buffer); return [s(get(m, 1)), s(get(m, 2))] as [string, string]; });
  const functions = new Map<bigint, { name: string; file: string }>();
  for (const f of fields.filter((x) => x.field === 5)) {
    const m = decode(f.value as Buffer);
    functions.set(get(m, 1)!, { name: s(get(m, 2)), file: s(get(m, 4)) });
  }
  const locations = new Map<bigint, bigint[]>();
  for (const f of fields.filter((x) => x.field === 4)) {
    const m = decode(f.value as Buffer);
    const fns = m.filter((x) => x.field === 4).map((l) => get(decode(l.value as Buffer), 1)!);
    for (const fn of fns) assert.ok(functions.has(fn), `location refers to unknown function ${fn}`);
    locations.set(get(m, 1)!, fns);
  }
  const samples = fields.filter((f) => f.field === 2).map((f) => {
    const m = decode(f.value as Buffer);
    const locs = m.filter((x) => x.field === 1).flatMap((x) => (x.wire === 2 ? packed(x.value as Buffer) : [x.value as bigint]));
    const values = m.filter((x) => x.field === 2).flatMap((x) => (x.wire === 2 ? packed(x.value as Buffer) : [x.value as bigint]));
    for (const l of locs) assert.ok(locations.has(l), `sample refers to unknown location ${l}`);
    assert.equal(values.length, sampleTypes.length, 'one value per sample type');
    return { locations: locs, values };
  });
  return { strings, sampleTypes, samples, locations, functions, period: get(fields, 12) ?? 0n };
}

function fetchBinary(port: number, path: string): Promise<{ status: number; type: string; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body: Buffer.concat(chunks) }));
      res.on('error', reject);
    }).on('error', reject).end();
  });
}

// Kept live for the whole test: what a heap snapshot would carry and a profile must not.
const planted: { secret: string; holders: unknown[] } = { secret: '', holders: [] };

function allocateForProfileTest(): void {
  // about 64 MiB of live objects: with one sample per 512 KiB, this site is sampled for sure
  for (let i = 0; i < 4096; i++) planted.holders.push(new Array(2048).fill(i));
}

describe('/debug/pprof/heap', { timeout: 60_000 }, () => {
  let s: TestServers;
  before(async () => {
    s = await startServers({ routes: profilingHandlers(new FakeClock()) });
    planted.secret = `kts-planted-secret-${randomBytes(12).toString('hex')}`;
    planted.holders.push(planted.secret, { token: planted.secret }, Buffer.from(planted.secret));
  });
  after(async () => {
    await s.stop();
    planted.holders.length = 0;
  });

  it('is a gzip\'d pprof profile of sampled live allocations, with the allocating function, and no heap contents', async () => {
    allocateForProfileTest();
    const r = await fetchBinary(s.readOnlyPort, '/debug/pprof/heap');
    assert.equal(r.status, 200);
    assert.equal(r.body.includes(planted.secret), false, 'the secret is in the answer');
    assert.equal(r.type, 'application/octet-stream');
    const raw = gunzipSync(r.body);
    assert.equal(raw.includes(planted.secret), false, 'the secret is in the profile');
    assert.equal(raw.includes('kts-planted-secret'), false);
    const p = parseProfile(raw);
    assert.deepEqual(p.sampleTypes, [['inuse_objects', 'count'], ['inuse_space', 'bytes']]);
    assert.equal(p.period, 512n * 1024n);
    assert.ok(p.samples.length > 0, 'no samples');
    const here = p.samples.filter((x) => x.locations.some((l) => p.locations.get(l)!.some((f) => p.functions.get(f)!.name === 'allocateForProfileTest')));
    assert.ok(here.length > 0, 'the allocating function is not in any sample');
    const bytes = here.reduce((n, x) => n + x.values[1]!, 0n);
    assert.ok(bytes >= 16n << 20n, `only ${bytes} bytes attributed to the allocating function`);
    assert.ok(p.samples.every((x) => x.values[0]! > 0n && x.values[1]! > 0n));
  });

  it('a second server with profiling (one sampling profiler per process) serves the profile too', async () => {
    const second = await startServers({ routes: profilingHandlers(new FakeClock()) });
    try {
      const r = await fetchBinary(second.readOnlyPort, '/debug/pprof/heap');
      assert.equal(r.status, 200);
      assert.deepEqual(parseProfile(gunzipSync(r.body)).sampleTypes, [['inuse_objects', 'count'], ['inuse_space', 'bytes']]);
    } finally {
      await second.stop();
    }
  });

  it('encodes a profile tree: stacks run from the allocating frame to the root, leaf first', () => {
    const frame = (functionName: string, lineNumber: number) => ({ functionName, url: 'file:///app.js', lineNumber, columnNumber: 0 });
    const raw = encodeHeapProfile({
      head: { callFrame: frame('(root)', -1), selfSize: 0, id: 1, children: [
        { callFrame: frame('outer', 9), selfSize: 0, id: 2, children: [
          { callFrame: frame('inner', 19), selfSize: 2048, id: 3, children: [] },
        ] },
      ] },
      samples: [{ size: 1024, nodeId: 3, ordinal: 1 }, { size: 1024, nodeId: 3, ordinal: 2 }],
    }, { timeNanos: 1n, periodBytes: 1024 });
    const p = parseProfile(raw);
    assert.equal(p.samples.length, 1);
    const names = p.samples[0]!.locations.map((l) => p.functions.get(p.locations.get(l)![0]!)!.name);
    assert.deepEqual(names, ['inner', 'outer']);
    assert.deepEqual(p.samples[0]!.values, [2n, 2048n]);
  });
});
