// The CRI log reader: record parsing, partial lines, rotation order (plain and gzip), every
// /containerLogs option, and follow through a rotation and a container exit (on a FakeClock).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rename, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { MAX_LINE_BYTES, formatTimestamp, parseCriRecord } from '../../src/logs/cri-format.js';
import { rotatedLogs } from '../../src/logs/files.js';
import { parseContainerLogOptions, type ContainerLogOptions } from '../../src/logs/options.js';
import { LogOptionsError } from '../../src/logs/errors.js';
import { readContainerLogs, readRotation } from '../../src/logs/reader.js';
import { FakeClock } from '../../src/util/clock.js';

const tempDirs: string[] = [];
after(() => { for (const d of tempDirs) rmSync(d, { recursive: true, force: true }); });
async function tempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
function ts(sec: number, nanos = '000000000'): string {
  return `${new Date(T0 + sec * 1000).toISOString().slice(0, 19)}.${nanos}Z`;
}
function rec(sec: number, stream: 'stdout' | 'stderr', tag: 'P' | 'F', text: string): string {
  return `${ts(sec)} ${stream} ${tag} ${text}\n`;
}

async function dir(): Promise<string> {
  return tempDir('kts-logs-');
}

async function read(path: string, o: Partial<ContainerLogOptions>, clock = new FakeClock(T0 + 100_000), running = async () => false): Promise<string> {
  const chunks: Buffer[] = [];
  await readContainerLogs(path, { follow: false, previous: false, timestamps: false, ...o }, { write: (c) => void chunks.push(c) }, { clock, isRunning: running });
  return Buffer.concat(chunks).toString();
}

/** A container dir with two rotations (the older gzip'd) and the live file: lines a..f. */
async function rotatedSet(): Promise<string> {
  const d = await dir();
  const live = join(d, '0.log');
  await writeFile(`${live}.20260101-120001.gz`, gzipSync(rec(1, 'stdout', 'F', 'a') + rec(2, 'stdout', 'P', 'b1') + rec(2, 'stdout', 'F', 'b2')));
  await writeFile(`${live}.20260101-120003`, rec(3, 'stdout', 'F', 'c') + rec(4, 'stderr', 'F', 'd'));
  // a compression in progress is no log file
  await writeFile(`${live}.20260101-120003.tmp`, 'garbage\n');
  await writeFile(live, rec(5, 'stdout', 'F', 'e') + rec(6, 'stdout', 'F', 'f'));
  return live;
}

test('parses records; a line that is not CRI format is none', () => {
  const r = parseCriRecord(Buffer.from(`${ts(1, '123456789')} stderr P hello world`))!;
  assert.equal(r.stream, 'stderr');
  assert.equal(r.partial, true);
  assert.equal(r.content.toString(), 'hello world');
  assert.equal(r.timeMs, T0 + 1123);
  assert.equal(parseCriRecord(Buffer.from(`${ts(1)} stdout F `))!.content.toString(), '');
  assert.equal(parseCriRecord(Buffer.from('no timestamp here')), undefined);
  assert.equal(parseCriRecord(Buffer.from(`${ts(1)} stdin F x`)), undefined);
});

test('timestamps print as Go RFC3339Nano (trailing zeros dropped)', () => {
  assert.equal(formatTimestamp('2026-01-01T12:00:00.123400000Z'), '2026-01-01T12:00:00.1234Z');
  assert.equal(formatTimestamp('2026-01-01T12:00:00.000000000Z'), '2026-01-01T12:00:00Z');
  assert.equal(formatTimestamp('2026-01-01T12:00:00.5+02:00'), '2026-01-01T12:00:00.5+02:00');
});

test('rotations are found oldest first, temporaries and strangers left out', async () => {
  const live = await rotatedSet();
  await writeFile(`${live}.notastamp`, '');
  const files = await rotatedLogs(live);
  assert.deepEqual(files.map((f) => [f.stamp, f.compressed]), [['20260101-120001', true], ['20260101-120003', false]]);
});

test('reads across rotations in order, gzip included, partial records joined', async () => {
  const live = await rotatedSet();
  assert.equal(await read(live, {}), 'a\nb1b2\nc\nd\ne\nf\n');
});

test('partial records join per stream, even interleaved with the other stream', async () => {
  const d = await dir();
  const live = join(d, '0.log');
  await writeFile(live, rec(1, 'stdout', 'P', 'out-') + rec(1, 'stderr', 'F', 'err') + rec(2, 'stdout', 'F', 'end') + rec(3, 'stdout', 'P', 'dangling'));
  assert.equal(await read(live, {}), 'err\nout-end\ndangling');
});

test('tailLines counts lines from the end, reaching into rotations', async () => {
  const live = await rotatedSet();
  assert.equal(await read(live, { tailLines: 1 }), 'f\n');
  assert.equal(await read(live, { tailLines: 3 }), 'd\ne\nf\n');
  // the joined line from the gzip'd rotation counts once
  assert.equal(await read(live, { tailLines: 5 }), 'b1b2\nc\nd\ne\nf\n');
  assert.equal(await read(live, { tailLines: 100 }), 'a\nb1b2\nc\nd\ne\nf\n');
  assert.equal(await read(live, { tailLines: 0 }), '');
});

test('sinceTime and sinceSeconds drop older lines', async () => {
  const live = await rotatedSet();
  assert.equal(await read(live, { sinceTime: T0 + 4000 }), 'd\ne\nf\n');
  // now = T0+100s: sinceSeconds 96 is T0+4s
  assert.equal(await read(live, { sinceSeconds: 96 }), 'd\ne\nf\n');
});

test('timestamps prefix each line with its first record time; limitBytes cuts the output', async () => {
  const live = await rotatedSet();
  const out = await read(live, { timestamps: true, tailLines: 2 });
  assert.equal(out, '2026-01-01T12:00:05Z e\n2026-01-01T12:00:06Z f\n');
  assert.equal(await read(live, { limitBytes: 5 }), 'a\nb1b');
  assert.equal(await read(live, { limitBytes: 5, timestamps: true }), '2026-');
});

test('a missing log file is an error naming it', async () => {
  const d = await dir();
  await assert.rejects(read(join(d, '0.log'), {}), (e: Error) => e.message.includes(join(d, '0.log')));
});

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('follow tails the live file through a rotation and ends once the container exited and the file stopped', async () => {
  const d = await dir();
  const live = join(d, '0.log');
  await writeFile(live, rec(1, 'stdout', 'F', 'one'));
  const clock = new FakeClock(T0 + 10_000);
  let running = true;
  const chunks: Buffer[] = [];
  const text = (): string => Buffer.concat(chunks).toString();
  let ended = false;
  const done = readContainerLogs(live, { follow: true, previous: false, timestamps: false }, { write: (c) => void chunks.push(c) }, { clock, isRunning: async () => running })
    .finally(() => { ended = true; });
  await until(() => text() === 'one\n', 'first line');
  await appendFile(live, rec(2, 'stdout', 'P', 'tw'));
  clock.step(1000);
  await appendFile(live, rec(2, 'stdout', 'F', 'o'));
  await until(() => { clock.step(1000); return text() === 'one\ntwo\n'; }, 'joined line');
  // rotation: the runtime still writes the old file until it reopens, then writes a new one
  await appendFile(live, rec(3, 'stdout', 'F', 'three'));
  await rename(live, `${live}.20260101-120003`);
  await writeFile(live, rec(4, 'stdout', 'F', 'four'));
  await until(() => { clock.step(1000); return text() === 'one\ntwo\nthree\nfour\n'; }, 'lines across the rotation');
  assert.equal(ended, false);
  // the container exits after a last line: it is read, then the follow ends
  await appendFile(live, rec(5, 'stdout', 'F', 'last'));
  running = false;
  await until(() => { clock.step(1000); return ended; }, 'end of follow');
  await done;
  assert.equal(text(), 'one\ntwo\nthree\nfour\nlast\n');
  await rm(d, { recursive: true });
});

test('a live file missing between the rotator\'s rename and the runtime\'s reopen is waited for on the clock; if it stays away the rotations are read', async () => {
  const d = await dir();
  const live = join(d, '0.log');
  await writeFile(`${live}.20260101-120001`, rec(1, 'stdout', 'F', 'a') + rec(2, 'stdout', 'F', 'b'));
  const clock = new FakeClock(T0 + 100_000);
  let text = '';
  let ended = false;
  const chunks: Buffer[] = [];
  const done = readContainerLogs(live, { follow: false, previous: false, timestamps: false, tailLines: 5 }, { write: (c) => void chunks.push(c) }, { clock, isRunning: async () => false })
    .then(() => { text = Buffer.concat(chunks).toString(); ended = true; });
  // the runtime reopens: the new live file is read after the rotation
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(ended, false);
  await writeFile(live, rec(3, 'stdout', 'F', 'c'));
  await until(() => { clock.step(20); return ended; }, 'the read to end');
  await done;
  assert.equal(text, 'a\nb\nc\n');
  // never reopened: the rotations alone, after the bounded wait
  await rm(live);
  let out: string | undefined;
  const second = read(live, {}, clock).then((s) => { out = s; });
  await until(() => { clock.step(20); return out !== undefined; }, 'the read without a live file');
  await second;
  assert.equal(out, 'a\nb\n');
  // neither a live file nor a rotation: the error names the file
  const none = join(d, '1.log');
  await assert.rejects(read(none, {}, clock), (err: Error) => err.message.includes(none) && err.message.includes('ENOENT'));
});

test('follow ends when the client goes away', async () => {
  const d = await dir();
  const live = join(d, '0.log');
  await writeFile(live, rec(1, 'stdout', 'F', 'one'));
  const ac = new AbortController();
  const clock = new FakeClock(T0);
  const done = readContainerLogs(live, { follow: true, previous: false, timestamps: false }, { write: () => undefined }, { clock, isRunning: async () => true, signal: ac.signal });
  await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  await done;
});

test('query options decode and validate as upstream, naming the parameter', () => {
  const q = (s: string): ContainerLogOptions => parseContainerLogOptions(new URLSearchParams(s));
  assert.deepEqual(q('follow=true&timestamps=1&previous=false&tailLines=10&limitBytes=5&sinceSeconds=3'), {
    follow: true, timestamps: true, previous: false, tailLines: 10, limitBytes: 5, sinceSeconds: 3,
  });
  assert.equal(q('sinceTime=2026-01-01T12:00:04Z').sinceTime, T0 + 4000);
  assert.equal(q('tail=7').tailLines, 7);
  assert.equal(q('tail=all&tailLines=3').tailLines, undefined);
  const bad = (s: string, param: string, status: number): void => {
    assert.throws(() => q(s), (e: unknown) => e instanceof LogOptionsError && e.param === param && e.status === status && e.message.startsWith(param), s);
  };
  bad('tailLines=x', 'tailLines', 400);
  bad('tailLines=-1', 'tailLines', 422);
  bad('limitBytes=0', 'limitBytes', 422);
  bad('limitBytes=1.5', 'limitBytes', 400);
  bad('sinceSeconds=0', 'sinceSeconds', 422);
  bad('sinceTime=yesterday', 'sinceTime', 400);
  bad('sinceSeconds=5&sinceTime=2026-01-01T12:00:04Z', 'sinceSeconds', 422);
  bad('tail=abc', 'tail', 400);
});

test('a rotation compressed or dropped between the listing and the read: the .gz copy is read, a dropped one is empty', async () => {
  const dir = await tempDir('kts-logs-race-');
  const plain = join(dir, '0.log.20260101-120000');
  await writeFile(plain, rec(1, 'stdout', 'F', 'one'));
  const listed = { path: plain, compressed: false, stamp: '20260101-120000' };
  assert.equal((await readRotation(listed)).toString(), rec(1, 'stdout', 'F', 'one'));
  // the rotator compresses it after the listing
  await writeFile(`${plain}.gz`, gzipSync(rec(1, 'stdout', 'F', 'one')));
  await rm(plain);
  assert.equal((await readRotation(listed)).toString(), rec(1, 'stdout', 'F', 'one'));
  // and later drops it as past containerLogMaxFiles
  await rm(`${plain}.gz`);
  assert.equal((await readRotation(listed)).length, 0);
  assert.equal((await readRotation({ ...listed, path: `${plain}.gz`, compressed: true })).length, 0);
});

/** A seeded generator (xorshift32): the random cases are the same on every run. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x / 0x1_0000_0000;
  };
}

test('tailLines from the end equals the last lines of a whole read, across rotations (gzip included), streams interleaved, lines split over read chunks', async () => {
  const rand = rng(25);
  for (let round = 0; round < 3; round++) {
    const d = await dir();
    const live = join(d, '0.log');
    const files: string[] = ['', '', '', ''];
    let sec = 0;
    const open = { stdout: false, stderr: false };
    for (let f = 0; f < files.length; f++) {
      const n = 20 + Math.floor(rand() * 40);
      for (let k = 0; k < n; k++) {
        const stream = rand() < 0.6 ? 'stdout' : 'stderr';
        // lines from a few bytes to 40 KiB: many cross the 64 KiB chunks read backwards
        const size = rand() < 0.15 ? 10_000 + Math.floor(rand() * 30_000) : 1 + Math.floor(rand() * 40);
        const text = `${stream[3]}${f}.${k}:` + 'x'.repeat(size);
        const partial = rand() < 0.35;
        open[stream] = partial;
        files[f] += rec(sec++, stream, partial ? 'P' : 'F', text);
      }
    }
    // every line ends (a pending line is no part of tailLines' count)
    for (const s of ['stdout', 'stderr'] as const) if (open[s]) files[3] += rec(sec++, s, 'F', 'end');
    await writeFile(`${live}.20260101-120001.gz`, gzipSync(files[0]!));
    await writeFile(`${live}.20260101-120002.gz`, gzipSync(files[1]!));
    await writeFile(`${live}.20260101-120003`, files[2]!);
    await writeFile(live, files[3]!);
    const all = await read(live, {});
    const lines = all.split(/(?<=\n)/);
    for (const tail of [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, lines.length - 1, lines.length, lines.length + 5]) {
      const want = tail <= 0 ? '' : lines.slice(-tail).join('');
      const got = await read(live, { tailLines: tail });
      assert.equal(got.length, want.length, `round ${round} tail ${tail}: ${got.length} bytes, want ${want.length}`);
      assert.ok(got === want, `round ${round} tail ${tail}`);
    }
  }
});

test('tailLines keeps a line whose partial records began in the rotation before (and drops the other stream\'s lines between)', async () => {
  const d = await dir();
  const live = join(d, '0.log');
  await writeFile(`${live}.20260101-120001`, rec(1, 'stdout', 'F', 'zero') + rec(2, 'stdout', 'P', 'be') + rec(3, 'stderr', 'F', 'err'));
  await writeFile(live, rec(4, 'stdout', 'P', 'gin') + rec(5, 'stderr', 'F', 'err2') + rec(6, 'stdout', 'F', '-end'));
  assert.equal(await read(live, { tailLines: 1 }), 'begin-end\n');
  assert.equal(await read(live, { tailLines: 2 }), 'err2\nbegin-end\n');
  assert.equal(await read(live, { tailLines: 3 }), 'err\nerr2\nbegin-end\n');
  assert.equal(await read(live, { tailLines: 1, timestamps: true }), `${formatTimestamp(ts(2))} begin-end\n`);
});

test('a line joined from partial records, and a record longer than a line may be, are cut at MAX_LINE_BYTES', async () => {
  const d = await dir();
  const live = join(d, '0.log');
  const piece = 'p'.repeat(16 * 1024);
  let text = '';
  for (let i = 0; i < 100; i++) text += rec(1, 'stdout', 'P', piece);
  text += rec(1, 'stdout', 'F', 'END') + rec(2, 'stderr', 'F', 'q'.repeat(MAX_LINE_BYTES + 5000)) + rec(3, 'stdout', 'F', 'after');
  await writeFile(live, text);
  const out = await read(live, {});
  const lines = out.split('\n');
  assert.equal(lines[0]!.length, MAX_LINE_BYTES);
  assert.match(lines[0]!, /^p+$/);
  assert.equal(lines[1]!.length, MAX_LINE_BYTES);
  assert.match(lines[1]!, /^q+$/);
  assert.equal(lines[2], 'after');
  assert.equal(await read(live, { tailLines: 2 }), `${'q'.repeat(MAX_LINE_BYTES)}\nafter\n`);
});

/** Runs `fn` while sampling this process's heap and buffer memory; the most it grew by. */
async function peakGrowth(fn: () => Promise<unknown>): Promise<number> {
  const used = (): number => { const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
  const base = used();
  let peak = 0;
  const timer = setInterval(() => { peak = Math.max(peak, used() - base); }, 2);
  try {
    await fn();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, used() - base);
}

test('memory stays bounded whatever the file holds: a 512 MiB line, read whole, tailed, and with limitBytes', async () => {
  const d = await dir();
  const live = join(d, '0.log');
  const huge = 512 * 1024 * 1024;
  // one record whose content is a 512 MiB run of zero bytes (a sparse file), then two short lines
  await writeFile(live, `${ts(1)} stdout F `);
  await truncate(live, huge);
  await appendFile(live, `\n${rec(2, 'stdout', 'F', 'two')}${rec(3, 'stderr', 'F', 'three')}`);
  const bound = 96 * 1024 * 1024;
  let out = '';
  let grew = await peakGrowth(async () => { out = await read(live, { tailLines: 1, limitBytes: 1 }); });
  assert.equal(out, 't');
  assert.ok(grew < bound, `tail=1 limitBytes=1 grew the heap by ${grew} bytes`);
  grew = await peakGrowth(async () => { out = await read(live, { tailLines: 3 }); });
  assert.equal(out.length, MAX_LINE_BYTES + 1 + 'two\nthree\n'.length);
  assert.ok(out.endsWith('\ntwo\nthree\n'));
  assert.ok(grew < bound, `tail=3 grew the heap by ${grew} bytes`);
  grew = await peakGrowth(async () => { out = await read(live, { limitBytes: 10 }); });
  assert.equal(out, '\0'.repeat(10));
  assert.ok(grew < bound, `limitBytes=10 grew the heap by ${grew} bytes`);
  out = '';
});
