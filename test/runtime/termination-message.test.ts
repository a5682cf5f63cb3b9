import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ContainerRuntimeStatus, RuntimePodStatus } from '../../src/runtime/types.js';
import { newContainerAnnotations } from '../../src/runtime/labels.js';
import type { Pod } from '../../src/api/types.js';
import { createTerminationMessageFileFor, getTerminationMessage, tailCriLog, terminationMessageBudget, withTerminationMessages } from '../../src/runtime/termination-message.js';

let root: string;
before(async () => { root = await mkdtemp(join(tmpdir(), 'kts-tm-')); });
after(async () => { await rm(root, { recursive: true, force: true }); });

const logLine = (s: string, tag = 'F'): string => `2024-01-01T00:00:00.000000000Z stdout ${tag} ${s}\n`;

describe('termination messages', () => {
  it('reads the file mounted at terminationMessagePath', async () => {
    const f = join(root, 'm1');
    await writeFile(f, 'bye');
    assert.equal(await getTerminationMessage(f, '', false), 'bye');
  });

  it('keeps the last 4096 bytes of a longer file', async () => {
    const f = join(root, 'm2');
    await writeFile(f, 'a'.repeat(5000) + 'b'.repeat(4096));
    assert.equal(await getTerminationMessage(f, '', false), 'b'.repeat(4096));
  });

  it('falls back to the log tail when the file is empty and the policy asks', async () => {
    const f = join(root, 'm3');
    await writeFile(f, '');
    const log = join(root, 'log3');
    await writeFile(log, logLine('starting') + logLine('part one, ', 'P') + logLine('then failed'));
    assert.equal(await getTerminationMessage(f, log, true), 'starting\npart one, then failed\n');
    assert.equal(await getTerminationMessage(f, log, false), '');
  });

  it('falls back to logs when the file is missing; without a mount too', async () => {
    const log = join(root, 'log4');
    await writeFile(log, logLine('oops'));
    assert.equal(await getTerminationMessage(join(root, 'absent'), log, true), 'oops\n');
    assert.equal(await getTerminationMessage(undefined, log, true), 'oops\n');
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

  it('withTerminationMessages finds each attempt\'s file and log from the status alone', async () => {
    const pod = {
      metadata: { name: 'tm', namespace: 'default', uid: 'u1' },
      spec: { containers: [
        { name: 'file', image: 'x', terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' },
        { name: 'logs', image: 'x', terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'FallbackToLogsOnError' },
      ] },
    } as Pod;
    const rootDir = join(root, 'kubelet');
    const podLogsDir = join(root, 'pods-logs');
    const f = await createTerminationMessageFileFor(join(rootDir, 'pods', 'u1', 'containers', 'file'), 2);
    await writeFile(f, 'attempt two');
    await mkdir(join(podLogsDir, 'default_tm_u1', 'logs'), { recursive: true });
    await writeFile(join(podLogsDir, 'default_tm_u1', 'logs', '0.log'), logLine('from the log'));
    const cs = (name: string, restartCount: number, exitCode: number, message = ''): ContainerRuntimeStatus => ({
      id: name, containerID: `containerd://${name}`, name, state: 'exited', createdAt: 1, startedAt: 1, finishedAt: 2, exitCode,
      image: 'x', imageRef: 'x', hash: '', restartCount, reason: '', message, labels: {},
      annotations: newContainerAnnotations(pod.spec.containers.find((c) => c.name === name)!, pod, restartCount),
    });
    const rs: RuntimePodStatus = { uid: 'u1', name: 'tm', namespace: 'default', ips: [], sandboxStatuses: [], containerStatuses: [cs('file', 2, 0, 'runtime says'), cs('logs', 0, 1)], timestamp: 0 };
    const got = await withTerminationMessages(rs, 'default', 'tm', { rootDir, podLogsDir });
    assert.deepEqual(got.containerStatuses.map((c) => c.message), ['runtime says: attempt two', 'from the log\n']);
    // exit 0 never falls back to logs
    const ok = await withTerminationMessages({ ...rs, containerStatuses: [cs('logs', 0, 0)] }, 'default', 'tm', { rootDir, podLogsDir });
    assert.equal(ok.containerStatuses[0]!.message, '');
  });
});
