import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Mount } from '../../src/runtime/cri-types.js';
import { getTerminationMessage, tailCriLog, terminationMessageBudget } from '../../src/runtime/termination-message.js';

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-tm-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

const mount = (host: string): Mount => ({ container_path: '/dev/termination-log', host_path: host, readonly: false, selinux_relabel: false, propagation: 'PROPAGATION_PRIVATE' });
const logLine = (s: string, tag = 'F'): string => `2024-01-01T00:00:00.000000000Z stdout ${tag} ${s}\n`;

describe('termination messages', () => {
  it('reads the file mounted at terminationMessagePath', async () => {
    const f = join(root, 'm1');
    await writeFile(f, 'bye');
    assert.equal(await getTerminationMessage({ mounts: [mount(f)], log_path: '' }, '/dev/termination-log', false), 'bye');
  });

  it('keeps the last 4096 bytes of a longer file', async () => {
    const f = join(root, 'm2');
    await writeFile(f, 'a'.repeat(5000) + 'b'.repeat(4096));
    assert.equal(await getTerminationMessage({ mounts: [mount(f)], log_path: '' }, '/dev/termination-log', false), 'b'.repeat(4096));
  });

  it('falls back to the log tail when the file is empty and the policy asks', async () => {
    const f = join(root, 'm3');
    await writeFile(f, '');
    const log = join(root, 'log3');
    await writeFile(log, logLine('starting') + logLine('part one, ', 'P') + logLine('then failed'));
    assert.equal(await getTerminationMessage({ mounts: [mount(f)], log_path: log }, '/dev/termination-log', true), 'starting\npart one, then failed\n');
    assert.equal(await getTerminationMessage({ mounts: [mount(f)], log_path: log }, '/dev/termination-log', false), '');
  });

  it('falls back to logs when the file is missing; without a mount too', async () => {
    const log = join(root, 'log4');
    await writeFile(log, logLine('oops'));
    assert.equal(await getTerminationMessage({ mounts: [mount(join(root, 'absent'))], log_path: log }, '/dev/termination-log', true), 'oops\n');
    assert.equal(await getTerminationMessage({ mounts: [], log_path: log }, '/dev/termination-log', true), 'oops\n');
  });

  it('log tail: last 80 lines, then 2048 bytes from their start', () => {
    const lines = Array.from({ length: 100 }, (_, i) => logLine(`line ${i}`)).join('');
    const got = tailCriLog(lines, 80, 2048);
    assert.ok(got.startsWith('line 20\n'));
    assert.ok(got.endsWith('line 99\n'));
    const long = Array.from({ length: 80 }, () => logLine('x'.repeat(100))).join('');
    assert.equal(Buffer.byteLength(tailCriLog(long, 80, 2048)), 2048);
  });

  it('the pod budget is 12 KiB shared by its containers', () => {
    assert.equal(terminationMessageBudget(1), 12288);
    assert.equal(terminationMessageBudget(3), 4096);
    assert.equal(terminationMessageBudget(5), 2457);
  });
});
