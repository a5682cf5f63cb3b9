import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { enforceNodeAllocatable, podsCgroupLimits } from '../../src/cm/node-allocatable.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { generateCgroupHierarchies } from '../fixtures/cgroup-tree.js';

const GI = 1024n ** 3n;
const capacity = { memoryBytes: 8n * GI, cpuMilli: 4000n, pids: 4194304n };

describe('node allocatable enforcement', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-alloc-'));
    setLogSink(() => undefined);
  });
  afterEach(async () => {
    setLogSink((line) => process.stderr.write(line + '\n'));
    await rm(dir, { recursive: true, force: true });
  });

  it('limits the pods to capacity − kube − system reserved with pods enforced (eviction threshold left inside), else capacity', () => {
    const reserved: Record<string, string>[] = [{ memory: '1Gi', cpu: '500m', pid: '1000' }, { memory: '512Mi', cpu: '250m' }];
    assert.deepEqual(podsCgroupLimits(capacity, reserved, ['pods']), { memoryBytes: 8n * GI - GI - GI / 2n, cpuShares: 3328, pids: 4193304n });
    assert.deepEqual(podsCgroupLimits(capacity, reserved, ['none']), { memoryBytes: 8n * GI, cpuShares: 4096, pids: 4194304n });
  });

  it('writes the kubepods cgroup limits on v1 (memory, cpu.shares, pids.max) and v2 (memory.max, cpu.weight, pids.max)', async () => {
    const limits = podsCgroupLimits(capacity, [{ memory: '1Gi', cpu: '1' }], ['pods']);
    const v1 = generateCgroupHierarchies(join(dir, 'v1'), 'v1');
    assert.equal(await enforceNodeAllocatable({ mounts: v1.mounts, cgroupRoot: '', limits, log: createLogger() }), '/kubepods');
    assert.equal(readFileSync(join(dir, 'v1', 'memory', 'kubepods', 'memory.limit_in_bytes'), 'utf8'), String(7n * GI));
    assert.equal(readFileSync(join(dir, 'v1', 'cpu', 'kubepods', 'cpu.shares'), 'utf8'), '3072');
    assert.equal(readFileSync(join(dir, 'v1', 'pids', 'kubepods', 'pids.max'), 'utf8'), '4194304');
    const v2 = generateCgroupHierarchies(join(dir, 'v2'), 'v2');
    await enforceNodeAllocatable({ mounts: v2.mounts, cgroupRoot: '/custom/', limits, log: createLogger() });
    assert.equal(readFileSync(join(dir, 'v2', 'unified', 'custom', 'kubepods', 'memory.max'), 'utf8'), String(7n * GI));
    assert.equal(readFileSync(join(dir, 'v2', 'unified', 'custom', 'kubepods', 'cpu.weight'), 'utf8'), '118');
  });
});
