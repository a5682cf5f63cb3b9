// Property-based tests of the CRI log parser and reader on hostile log files: random bytes,
// records with invalid timestamps, unknown streams and tags, partial records never ended,
// lines without their newline, huge lines, rotations that are truncated or fake gzip. The
// properties: parseCriRecord never throws and accepts a record only with an RFC3339Nano
// timestamp (as upstream's parser, time.Parse(RFC3339Nano)); readContainerLogs resolves or
// rejects with a LogReadError, never writes more than limitBytes, writes (without limit,
// without timestamps) no more bytes than the files hold, and with timestamps starts every line
// it writes with an RFC3339 timestamp. A set without its live file waits (on the real clock) for
// the runtime's reopen as the reader does after a rotation. Seeded: a failure prints its seed and counterexample.
// KTS_FUZZ_RUNS scales the runs.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';

import { LineAssembler, parseCriRecord } from '../../src/logs/cri-format.js';
import { LogReadError } from '../../src/logs/errors.js';
import { readContainerLogs } from '../../src/logs/reader.js';
import type { ContainerLogOptions } from '../../src/logs/options.js';
import { realClock } from '../../src/util/clock.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 300;
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

const dirs: string[] = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

// Go's RFC3339Nano as time.Parse accepts it: 'T' and 'Z' upper case, fields in range.
const RFC3339_NANO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/;
function isRfc3339Nano(s: string): boolean {
  const m = RFC3339_NANO.exec(s);
  if (!m) return false;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const days = mo === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(mo) ? 30 : 31;
  return mo >= 1 && mo <= 12 && d >= 1 && d <= days && h <= 23 && mi <= 59 && se <= 59 &&
    (m[8] === 'Z' || (Number(m[9]) <= 23 && Number(m[10]) <= 59));
}

const goodTs = fc.tuple(fc.integer({ min: 0, max: 10_000 }), fc.constantFrom('', '.1', '.123456789', '.000000000'), fc.constantFrom('Z', '+02:00', '-07:30'))
  .map(([s, frac, zone]) => `${new Date(T0 + s * 1000).toISOString().slice(0, 19)}${frac}${zone}`);
const badTs = fc.oneof(
  fc.constantFrom('2026', '1', 'Tue, 01 Jan 2026', '2026-02-30T00:00:00Z', '2026-02-31T00:00:00Z', '2026-01-01T24:00:00Z',
    '2026-01-01t00:00:00z', '2026-01-01 00:00:00Z', '2026-01-01T00:00:00', '+002026-01-01T00:00:00Z', '2026-13-01T00:00:00Z',
    '2026-01-01T00:00:00.Z', '0000-00-00T00:00:00Z', 'NaN', '', '2026-01-01T00:00:00+24:00'),
  fc.string({ unit: 'binary', maxLength: 30 }).filter((s) => !s.includes(' ') && !s.includes('\n')),
);
const content = fc.oneof(
  fc.uint8Array({ maxLength: 60 }).map((a) => Buffer.from(a.filter((b) => b !== 0x0a))),
  fc.string({ maxLength: 40 }).map((s) => Buffer.from(s.replace(/\n/g, ''))),
);
const record = fc.tuple(
  fc.oneof({ weight: 4, arbitrary: goodTs }, { weight: 1, arbitrary: badTs }),
  fc.oneof({ weight: 6, arbitrary: fc.constantFrom('stdout', 'stderr') }, { weight: 1, arbitrary: fc.constantFrom('stdin', 'STDOUT', '', 'stdout ') }),
  fc.oneof({ weight: 6, arbitrary: fc.constantFrom('P', 'F') }, { weight: 1, arbitrary: fc.constantFrom('', 'X', 'PF', 'p') }),
  content,
).map(([t, s, tag, c]) => Buffer.concat([Buffer.from(tag === '' ? `${t} ${s} ` : `${t} ${s} ${tag} `, 'latin1'), c]));

/** A log file's bytes: records joined by newlines (the last one maybe unended), or random bytes. */
const fileBytes = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(fc.array(record, { maxLength: 12 }), fc.boolean()).map(([rs, ended]) => Buffer.concat(rs.flatMap((r, i) => (i < rs.length - 1 || ended ? [r, Buffer.from('\n')] : [r])))) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
);

type Rotation = { kind: 'plain' | 'gzip' | 'truncated-gzip' | 'fake-gzip'; bytes: Buffer; cut: number };
const rotation: fc.Arbitrary<Rotation> = fc.record({
  kind: fc.constantFrom('plain', 'gzip', 'truncated-gzip', 'fake-gzip'),
  bytes: fileBytes,
  cut: fc.nat({ max: 40 }),
}) as fc.Arbitrary<Rotation>;

const options: fc.Arbitrary<ContainerLogOptions> = fc.record({
  follow: fc.constant(false),
  previous: fc.constant(false),
  timestamps: fc.boolean(),
  tailLines: fc.option(fc.nat({ max: 6 }), { nil: undefined }),
  limitBytes: fc.option(fc.integer({ min: 1, max: 80 }), { nil: undefined }),
  sinceTime: fc.option(fc.integer({ min: T0 - 1000, max: T0 + 10_000_000 }), { nil: undefined }),
});

async function writeSet(live: Buffer | undefined, rotations: Rotation[]): Promise<{ path: string; plainBytes: number }> {
  const d = await mkdtemp(join(tmpdir(), 'kts-logs-fuzz-'));
  dirs.push(d);
  const path = join(d, '0.log');
  let plainBytes = live?.length ?? 0;
  for (const [i, r] of rotations.entries()) {
    const name = `${path}.20260101-1200${String(10 + i)}`;
    plainBytes += r.bytes.length;
    if (r.kind === 'plain') await writeFile(name, r.bytes);
    else if (r.kind === 'gzip') await writeFile(`${name}.gz`, gzipSync(r.bytes));
    else if (r.kind === 'truncated-gzip') { const z = gzipSync(r.bytes); await writeFile(`${name}.gz`, z.subarray(0, Math.min(r.cut, z.length - 1))); }
    else await writeFile(`${name}.gz`, r.bytes);
  }
  if (live) await writeFile(path, live);
  return { path, plainBytes };
}

async function readAll(path: string, opts: ContainerLogOptions): Promise<{ chunks: Buffer[]; error?: unknown }> {
  const chunks: Buffer[] = [];
  try {
    await readContainerLogs(path, opts, { write: (c) => void chunks.push(Buffer.from(c)) }, { clock: realClock, isRunning: async () => false });
    return { chunks };
  } catch (error) {
    return { chunks, error };
  }
}

describe('CRI log records on hostile lines', () => {
  it(`parseCriRecord never throws and accepts only RFC3339Nano timestamps (${RUNS * 10} lines, seed ${SEED})`, () => {
    fc.assert(
      fc.property(fc.oneof(record, fc.uint8Array({ maxLength: 120 }).map((a) => Buffer.from(a))), (line) => {
        const r = parseCriRecord(line);
        if (!r) return;
        assert.ok(isRfc3339Nano(r.timestamp), `accepted timestamp ${JSON.stringify(r.timestamp)}`);
        assert.ok(!Number.isNaN(r.timeMs));
        assert.ok(r.stream === 'stdout' || r.stream === 'stderr');
        assert.ok(r.content.length < line.length);
      }),
      { numRuns: RUNS * 10, seed: SEED },
    );
  });

  it('rejects the timestamps Date.parse takes but Go does not', () => {
    for (const t of ['2026', '1', 'Tue, 01 Jan 2026', '2026-02-30T00:00:00Z', '2026-01-01T24:00:00Z', '2026-01-01t00:00:00z', '2026-01-01T00:00:00']) {
      assert.equal(parseCriRecord(Buffer.from(`${t} stdout F hello`)), undefined, t);
    }
    assert.equal(parseCriRecord(Buffer.from('2026-02-28T23:59:59.999999999+01:00 stdout F hello'))?.content.toString(), 'hello');
    assert.equal(parseCriRecord(Buffer.from('2024-02-29T00:00:00Z stderr P x'))?.partial, true);
  });

  it(`LineAssembler joins only what it was given (${RUNS * 5} record sequences, seed ${SEED})`, () => {
    fc.assert(
      fc.property(fc.array(record, { maxLength: 30 }), (lines) => {
        const a = new LineAssembler();
        let given = 0;
        let out = 0;
        for (const l of lines) {
          const r = parseCriRecord(l);
          if (!r) continue;
          given += r.content.length + 1;
          out += a.push(r)?.content.length ?? 0;
        }
        for (const l of a.pending()) out += l.content.length;
        assert.ok(out <= given, `${out} bytes out of ${given} given`);
      }),
      { numRuns: RUNS * 5, seed: SEED },
    );
  });
});

describe('readContainerLogs on hostile files', () => {
  it(`resolves or rejects with LogReadError, within limitBytes and the files' bytes (${RUNS} sets, seed ${SEED})`, { timeout: 300_000 }, async (t) => {
    let rejected = 0;
    await fc.assert(
      fc.asyncProperty(fc.option(fileBytes, { nil: undefined, freq: 10 }), fc.array(rotation, { maxLength: 3 }), options, async (live, rotations, opts) => {
        const { path, plainBytes } = await writeSet(live, rotations);
        const { chunks, error } = await readAll(path, opts);
        if (error !== undefined) {
          assert.ok(error instanceof LogReadError, `not a LogReadError: ${String(error)}`);
          assert.ok(error.message.includes(path.slice(0, path.lastIndexOf('/'))), error.message);
          rejected++;
        }
        const total = chunks.reduce((n, c) => n + c.length, 0);
        if (opts.limitBytes !== undefined) assert.ok(total <= opts.limitBytes, `${total} bytes written past limitBytes=${opts.limitBytes}`);
        if (!opts.timestamps && opts.limitBytes === undefined) assert.ok(total <= plainBytes, `${total} bytes written from ${plainBytes}`);
        if (opts.timestamps) {
          // every line but one cut by limitBytes starts with its timestamp
          const whole = opts.limitBytes === undefined ? chunks : chunks.slice(0, -1);
          for (const c of whole) {
            const ts = c.toString('latin1', 0, Math.max(0, c.indexOf(0x20)));
            assert.ok(isRfc3339Nano(ts), `line written with timestamp ${JSON.stringify(ts)}`);
          }
        }
      }),
      { numRuns: RUNS, seed: SEED },
    );
    t.diagnostic(`${rejected} of ${RUNS} sets rejected with LogReadError`);
  });

  it('a huge line and a huge run of partial records never ended: limitBytes and tailLines bound the output', { timeout: 120_000 }, async () => {
    const big = Buffer.alloc(4 * 1024 * 1024, 0x61);
    const ts = '2026-01-01T12:00:00.000000001Z';
    const partials = Buffer.concat(Array.from({ length: 20_000 }, (_, i) => Buffer.from(`${ts} stdout P chunk-${i}\n`)));
    const { path } = await writeSet(Buffer.concat([Buffer.from(`${ts} stdout F `), big, Buffer.from('\n'), partials]), [{ kind: 'truncated-gzip', bytes: Buffer.concat([Buffer.from(`${ts} stderr F `), big, Buffer.from('\n')]), cut: 30 }]);
    for (const opts of [{ limitBytes: 1 }, { tailLines: 1, limitBytes: 10 }, { limitBytes: 1, timestamps: true }]) {
      const { chunks, error } = await readAll(path, { follow: false, previous: false, timestamps: false, ...opts });
      if (error !== undefined) assert.ok(error instanceof LogReadError, String(error));
      assert.ok(chunks.reduce((n, c) => n + c.length, 0) <= opts.limitBytes, JSON.stringify(opts));
    }
  });
});
