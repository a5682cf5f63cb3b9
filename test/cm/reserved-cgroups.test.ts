// enforceNodeAllocatable's kube-reserved / system-reserved keys (upstream enforceExistingCgroup):
// the named cgroup, which must exist, is limited to its reservation, under either driver, on
// generated v1 and v2 hierarchies (the systemd driver with a unit manager double).

import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { enforceReservedCgroup, NodeAllocatableError } from '../../src/cm/node-allocatable.js';
import type { SystemdUnits, UnitProperty } from '../../src/cm/systemd/units.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { generateCgroupHierarchies } from '../fixtures/cgroup-tree.js';

const log = createLogger();

describe('reserved cgroups', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-reserved-'));
    setLogSink(() => undefined);
  });
  afterEach(async () => {
    setLogSink((line) => process.stderr.write(line + '\n'));
    await rm(dir, { recursive: true, force: true });
  });

  it('cgroupfs, v2: memory.max, cpu.weight and pids.max of the existing cgroup', async () => {
    const h = generateCgroupHierarchies(join(dir, 'v2'), 'v2');
    mkdirSync(join(h.root, 'unified', 'kube-reserved'));
    const path = await enforceReservedCgroup({ mounts: h.mounts, cgroupName: '/kube-reserved', reserved: { cpu: '500m', memory: '1Gi', pid: '1000' }, compressibleOnly: false, log });
    assert.equal(path, '/kube-reserved');
    const read = (f: string): string => readFileSync(join(h.root, 'unified', 'kube-reserved', f), 'utf8');
    assert.equal(read('memory.max'), String(1024 ** 3));
    assert.equal(read('cpu.weight'), '20'); // 500m → 512 shares
    assert.equal(read('pids.max'), '1000');
  });

  it('cgroupfs, v1: memory.limit_in_bytes, cpu.shares, pids.max; the compressible key writes cpu alone', async () => {
    const h = generateCgroupHierarchies(join(dir, 'v1'), 'v1');
    for (const c of ['memory', 'cpu', 'pids']) mkdirSync(join(h.root, c, 'system'));
    await enforceReservedCgroup({ mounts: h.mounts, cgroupName: '/system', reserved: { cpu: '1', memory: '512Mi', pid: '100' }, compressibleOnly: false, log });
    assert.equal(readFileSync(join(h.root, 'memory', 'system', 'memory.limit_in_bytes'), 'utf8'), String(512 * 1024 * 1024));
    assert.equal(readFileSync(join(h.root, 'cpu', 'system', 'cpu.shares'), 'utf8'), '1024');
    assert.equal(readFileSync(join(h.root, 'pids', 'system', 'pids.max'), 'utf8'), '100');

    const h2 = generateCgroupHierarchies(join(dir, 'v1b'), 'v1');
    for (const c of ['memory', 'cpu', 'pids']) mkdirSync(join(h2.root, c, 'system'));
    await enforceReservedCgroup({ mounts: h2.mounts, cgroupName: '/system', reserved: { cpu: '250m', memory: '512Mi' }, compressibleOnly: true, log });
    assert.equal(readFileSync(join(h2.root, 'cpu', 'system', 'cpu.shares'), 'utf8'), '256');
    assert.equal(existsSync(join(h2.root, 'memory', 'system', 'memory.limit_in_bytes')), false);
  });

  it('a cgroup that does not exist is an error naming it; nothing is created', async () => {
    const h = generateCgroupHierarchies(join(dir, 'v2'), 'v2');
    await assert.rejects(
      enforceReservedCgroup({ mounts: h.mounts, cgroupName: '/kube-reserved', reserved: { memory: '1Gi' }, compressibleOnly: false, log }),
      (err: Error) => err instanceof NodeAllocatableError && /"\/kube-reserved" cgroup does not exist/.test(err.message),
    );
    assert.equal(existsSync(join(h.root, 'unified', 'kube-reserved')), false);
  });

  it('systemd: the slice named by its cgroup path gets its properties set, then the files', async () => {
    const h = generateCgroupHierarchies(join(dir, 'v2'), 'v2');
    mkdirSync(join(h.root, 'unified', 'system.slice'));
    const calls: { op: string; unit: string; props: Record<string, unknown> }[] = [];
    const units: SystemdUnits = {
      start: async () => 'started',
      set: async (unit: string, p: readonly UnitProperty[]) => void calls.push({ op: 'set', unit, props: Object.fromEntries(p.map((x) => [x.name, x.value])) }),
      stop: async () => undefined,
    };
    const path = await enforceReservedCgroup({ mounts: h.mounts, cgroupName: '/system.slice', reserved: { cpu: '1', memory: '256Mi' }, compressibleOnly: false, log, systemd: units });
    assert.equal(path, '/system.slice');
    assert.deepEqual(calls, [{ op: 'set', unit: 'system.slice', props: { MemoryMax: 268435456n, CPUWeight: 39n } }]);
    assert.equal(readFileSync(join(h.root, 'unified', 'system.slice', 'memory.max'), 'utf8'), '268435456');
  });
});
