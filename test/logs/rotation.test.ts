// Container log rotation on a FakeClock with a runtime double: size check per monitor interval,
// rename to `<log>.<stamp>` + ReopenContainerLog, older rotations gzip'd (newest plain), at most
// MaxFiles kept, a failed reopen puts the log back; pod log directories of gone pods removed
// without following symlinks.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { ContainerLogManager, cleanContainerLogs, cleanupPodLogDirs, type LogRotationRuntime } from '../../src/logs/rotation.js';
import { readContainerLogs } from '../../src/logs/reader.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

const tempDirs: string[] = [];
after(() => { for (const d of tempDirs) rmSync(d, { recursive: true, force: true }); });
async function tempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const rec = (i: number): string => `2026-01-01T12:00:00.000000000Z stdout F line-${String(i).padStart(4, '0')}\n`;

function runtimeDouble(logPath: string, opts: { failReopen?: () => boolean } = {}): LogRotationRuntime & { reopens: number } {
  const r = {
    reopens: 0,
    listContainers: async () => [{ id: 'c1' }],
    containerStatus: async () => ({ status: { log_path: logPath } as never }),
    reopenContainerLog: async () => {
      if (opts.failReopen?.()) throw new Error('runtime refused');
      r.reopens++;
      // the runtime creates a fresh live file
      await writeFile(logPath, '', { flag: 'a' });
    },
  };
  return r;
}

async function passes(m: ContainerLogManager, clock: FakeClock, n: number, write: () => Promise<void>): Promise<void> {
  for (let i = 0; i < n; i++) {
    await write();
    clock.step(10_000);
    await m.idle();
  }
}

test('rotates over the size limit every monitor interval, compresses older rotations, keeps MaxFiles', async () => {
  const d = await tempDir('kts-rot-');
  const log = join(d, '0.log');
  await writeFile(log, '');
  const clock = new FakeClock(T0);
  const runtime = runtimeDouble(log);
  const m = new ContainerLogManager({ runtime, clock, log: loggerDouble(), maxSizeBytes: 100, maxFiles: 3, monitorIntervalMs: 10_000, maxWorkers: 1 });
  m.start();
  let n = 0;
  const writeOver = async (): Promise<void> => { for (let i = 0; i < 3; i++) await writeFile(log, rec(n++), { flag: 'a' }); };
  // under the limit: nothing happens
  await writeFile(log, rec(n++), { flag: 'a' });
  clock.step(10_000);
  await m.idle();
  assert.deepEqual(await readdir(d), ['0.log']);
  // one pass over: the live file becomes the newest (plain) rotation
  await passes(m, clock, 1, writeOver);
  assert.deepEqual((await readdir(d)).sort(), ['0.log', '0.log.20260101-120020']);
  assert.equal(runtime.reopens, 1);
  assert.equal((await stat(log)).size, 0);
  // more passes: older rotations compressed, at most 3 files in all
  await passes(m, clock, 3, writeOver);
  assert.deepEqual((await readdir(d)).sort(), ['0.log', '0.log.20260101-120040.gz', '0.log.20260101-120050']);
  // the gzip'd rotation holds its lines intact
  const gz = gunzipSync(await readFile(join(d, '0.log.20260101-120040.gz'))).toString();
  assert.equal(gz.split('\n').filter(Boolean).length, 3);
  assert.match(gz, /^(\S+ stdout F line-\d{4}\n){3}$/);
  // the reader still finds every kept line in order across them
  const chunks: Buffer[] = [];
  await readContainerLogs(log, { follow: false, previous: false, timestamps: false }, { write: (c) => void chunks.push(c) }, { clock, isRunning: async () => false });
  const lines = Buffer.concat(chunks).toString().trim().split('\n');
  assert.deepEqual(lines, [...lines].sort());
  assert.equal(lines.at(-1), `line-${String(n - 1).padStart(4, '0')}`);
  m.stop();
  assert.equal(clock.pendingTimers(), 0);
});

test('a failed reopen renames the rotation back; leftovers of an interrupted compression are removed', async () => {
  const d = await tempDir('kts-rot-');
  const log = join(d, '0.log');
  await writeFile(log, rec(1).repeat(5));
  await writeFile(`${log}.20260101-110000`, 'x');
  await writeFile(`${log}.20260101-110000.gz`, 'y');
  await writeFile(`${log}.20260101-100000.tmp`, 'z');
  const clock = new FakeClock(T0);
  let fail = true;
  const runtime = runtimeDouble(log, { failReopen: () => fail });
  const m = new ContainerLogManager({ runtime, clock, log: loggerDouble(), maxSizeBytes: 10, maxFiles: 5, monitorIntervalMs: 10_000, maxWorkers: 2 });
  await m.rotateLogs();
  assert.deepEqual((await readdir(d)).sort(), ['0.log', '0.log.20260101-110000.gz']);
  assert.equal((await stat(log)).size, rec(1).length * 5);
  fail = false;
  await m.rotateLogs();
  assert.deepEqual((await readdir(d)).sort(), ['0.log', '0.log.20260101-110000.gz', '0.log.20260101-120000']);
});

test('a missing live log is reopened, not rotated', async () => {
  const d = await tempDir('kts-rot-');
  const log = join(d, '0.log');
  const runtime = runtimeDouble(log);
  const m = new ContainerLogManager({ runtime, clock: new FakeClock(T0), log: loggerDouble(), maxSizeBytes: 10, maxFiles: 5, monitorIntervalMs: 10_000, maxWorkers: 1 });
  await m.rotateLogs();
  assert.equal(runtime.reopens, 1);
  assert.deepEqual(await readdir(d), ['0.log']);
});

test('pod log directories of gone pods are removed; symlinks and live pods are left', async () => {
  const root = await tempDir('kts-podlogs-');
  const outside = await tempDir('kts-outside-');
  await writeFile(join(outside, 'keep'), 'precious');
  await mkdir(join(root, 'ns_live_uid-live', 'app'), { recursive: true });
  await mkdir(join(root, 'ns_gone_uid-gone', 'app'), { recursive: true });
  await writeFile(join(root, 'ns_gone_uid-gone', 'app', '0.log'), 'x');
  await symlink(outside, join(root, 'ns_link_uid-link'));
  const removed = await cleanupPodLogDirs(root, (uid) => uid !== 'uid-live');
  assert.deepEqual(removed, [join(root, 'ns_gone_uid-gone')]);
  assert.deepEqual((await readdir(root)).sort(), ['ns_link_uid-link', 'ns_live_uid-live']);
  assert.equal(await readFile(join(outside, 'keep'), 'utf8'), 'precious');
  assert.deepEqual(await cleanupPodLogDirs(join(root, 'absent'), () => true), []);
});

test('a removed container takes its live log and every rotation with it, not its siblings', async () => {
  const d = await tempDir('kts-rot-');
  for (const n of ['0.log', '0.log.20260101-110000.gz', '0.log.20260101-120000', '0.log.20260101-120000.tmp', '1.log', '10.log']) await writeFile(join(d, n), 'x');
  await cleanContainerLogs(join(d, '0.log'));
  assert.deepEqual((await readdir(d)).sort(), ['1.log', '10.log']);
});

test('a running container\'s log path is asked of the runtime once, not on every pass; a container gone is forgotten', async () => {
  const d = await tempDir('kts-rot-');
  const logs = { c1: join(d, 'c1.log'), c2: join(d, 'c2.log') };
  for (const l of Object.values(logs)) await writeFile(l, '');
  let running = ['c1', 'c2'];
  const asked: string[] = [];
  const runtime: LogRotationRuntime = {
    listContainers: async () => running.map((id) => ({ id })),
    containerStatus: async (id) => (asked.push(id), { status: { log_path: logs[id as keyof typeof logs] } }),
    reopenContainerLog: async () => undefined,
  };
  const clock = new FakeClock(T0);
  const m = new ContainerLogManager({ runtime, clock, log: loggerDouble(), maxSizeBytes: 100, maxFiles: 3, monitorIntervalMs: 10_000, maxWorkers: 2 });
  m.start();
  for (let i = 0; i < 3; i++) {
    clock.step(10_000);
    await m.idle();
  }
  assert.deepEqual(asked.sort(), ['c1', 'c2']);
  // still rotated from the remembered path
  await writeFile(logs.c2, rec(1).repeat(5));
  clock.step(10_000);
  await m.idle();
  assert.equal((await readdir(d)).filter((n) => n.startsWith('c2.log.')).length, 1);
  // c1 stops running: forgotten; were its ID listed again it would be asked again
  running = ['c2'];
  clock.step(10_000);
  await m.idle();
  running = ['c1', 'c2'];
  clock.step(10_000);
  await m.idle();
  m.stop();
  assert.deepEqual(asked.sort(), ['c1', 'c1', 'c2']);
});

test('with the relist\'s running containers the pass lists nothing from the runtime; without a fresh relist it does', async () => {
  const d = await tempDir('kts-rot-');
  const log = join(d, 'c1.log');
  await writeFile(log, rec(1).repeat(5));
  let lists = 0;
  const runtime: LogRotationRuntime = {
    listContainers: async () => (lists++, [{ id: 'c1' }]),
    containerStatus: async () => ({ status: { log_path: log } }),
    reopenContainerLog: async () => { await writeFile(log, '', { flag: 'a' }); },
  };
  let fromRelist: string[] | undefined = ['c1'];
  const clock = new FakeClock(T0);
  const m = new ContainerLogManager({ runtime, clock, log: loggerDouble(), maxSizeBytes: 100, maxFiles: 3, monitorIntervalMs: 10_000, maxWorkers: 1, runningContainers: () => fromRelist });
  m.start();
  clock.step(10_000);
  await m.idle();
  assert.equal(lists, 0);
  assert.equal((await readdir(d)).filter((n) => n.startsWith('c1.log.')).length, 1, 'rotated from the relist\'s list');
  fromRelist = undefined;
  clock.step(10_000);
  await m.idle();
  m.stop();
  assert.equal(lists, 1);
});

test('a pass stats the known logs in one batch: only logs over the limit, missing or not yet known go through the per-container path', async () => {
  const d = await tempDir('kts-rot-');
  const ids = ['small', 'big', 'missing', 'nolog'];
  const logOf = (id: string): string => (id === 'nolog' ? '' : join(d, `${id}.log`));
  for (const id of ids) if (id !== 'nolog') await writeFile(logOf(id), 'x');
  const running = [...ids];
  const reopened: string[] = [];
  const runtime: LogRotationRuntime = {
    listContainers: async () => running.map((id) => ({ id })),
    containerStatus: async (id) => ({ status: { log_path: logOf(id) } }),
    reopenContainerLog: async (id) => {
      reopened.push(id);
      await writeFile(logOf(id), '', { flag: 'a' });
    },
  };
  const processed: string[] = [];
  class Recording extends ContainerLogManager {
    override async processContainer(id: string): Promise<void> {
      processed.push(id);
      await super.processContainer(id);
    }
  }
  const clock = new FakeClock(T0);
  const m = new Recording({ runtime, clock, log: loggerDouble(), maxSizeBytes: 100, maxFiles: 3, monitorIntervalMs: 10_000, maxWorkers: 2 });
  // first pass: no log path known yet, every container asks the runtime
  await m.rotateLogs();
  assert.deepEqual(processed.sort(), [...ids].sort());
  processed.length = 0;
  // second pass: one over the limit, one deleted, one new container; the small one and the one without a log are left alone
  await writeFile(logOf('big'), rec(1).repeat(5));
  rmSync(logOf('missing'));
  running.push('new');
  await writeFile(logOf('new'), 'x');
  await m.rotateLogs();
  assert.deepEqual(processed.sort(), ['big', 'missing', 'new']);
  assert.deepEqual(reopened.sort(), ['big', 'missing']);
  assert.equal((await stat(logOf('missing'))).size, 0);
  assert.deepEqual((await readdir(d)).filter((n) => n.startsWith('big.log')).length, 2);
  processed.length = 0;
  // a quiet pass: nothing over the limit, nothing missing, nothing new
  await m.rotateLogs();
  assert.deepEqual(processed, []);
});
