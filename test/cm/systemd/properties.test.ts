// The unit properties the systemd driver asks for, as libcontainer's systemd manager maps a
// cgroup's resources: CPUWeight from shares (upstream's v2 conversion), MemoryMax, TasksMax,
// CPUQuotaPerSecUSec rounded up to whole percents, and a new slice's Wants= its parent.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cpuQuotaPerSecUSec, cpuSharesToWeight, parentSlice, resourceProperties, sliceStartProperties } from '../../../src/cm/systemd/properties.js';
import { UINT64_MAX, type UnitProperty } from '../../../src/cm/systemd/units.js';
import { cpuSharesToCpuWeight } from '../../../src/runtime/resources.js';

const byName = (props: UnitProperty[]): Record<string, unknown> => Object.fromEntries(props.map((p) => [p.name, p.value]));

describe('systemd unit properties', () => {
  it('cpu.weight = 1 + ((shares - 2) * 9999) / 262142, as upstream converts for cgroup v2', () => {
    const rows: [number, number][] = [[2, 1], [1024, 39], [512, 20], [102, 4], [262144, 10000]];
    for (const [shares, weight] of rows) {
      assert.equal(cpuSharesToWeight(shares), weight, `shares ${shares}`);
      assert.equal(cpuSharesToCpuWeight(shares), weight, `the runtime's conversion agrees at ${shares}`);
    }
  });

  it('a Burstable pod with limits: MemoryMax, CPUWeight, the quota per second and its period, TasksMax', () => {
    // 100m request → 102 shares; 500m limit → 50000 µs per 100000 µs
    const p = byName(resourceProperties({ cpuShares: 102, cpuQuotaUs: 50_000, cpuPeriodUs: 100_000, memoryLimitBytes: 128 * 1024 * 1024, pidsLimit: 100 }, 2));
    assert.deepEqual(p, {
      MemoryMax: 134217728n,
      CPUWeight: 4n,
      CPUQuotaPeriodUSec: 100000n,
      CPUQuotaPerSecUSec: 500000n,
      TasksMax: 100n,
    });
  });

  it('CPUQuotaPerSecUSec is rounded up to a whole 10 ms; no quota is infinity', () => {
    assert.equal(cpuQuotaPerSecUSec(15_500, 100_000), 160_000n); // 155m
    assert.equal(cpuQuotaPerSecUSec(1_000, 100_000), 10_000n); // 10m, already whole
    assert.equal(cpuQuotaPerSecUSec(-1, 100_000), UINT64_MAX);
    assert.equal(cpuQuotaPerSecUSec(25_000, 0), 250_000n); // period defaults to 100 ms
    assert.equal(byName(resourceProperties({ cpuQuotaUs: -1, cpuPeriodUs: 100_000 }, 2)).CPUQuotaPerSecUSec, UINT64_MAX);
  });

  it('-1 limits are systemd infinity; unset ones are not sent', () => {
    const p = byName(resourceProperties({ memoryLimitBytes: -1, pidsLimit: -1 }, 2));
    assert.deepEqual(p, { MemoryMax: UINT64_MAX, TasksMax: UINT64_MAX });
    assert.deepEqual(resourceProperties({}, 2), []);
    assert.deepEqual(resourceProperties({ pidsLimit: 0 }, 2), []);
  });

  it('cgroup v1 hosts get CPUShares and MemoryLimit instead', () => {
    const p = byName(resourceProperties({ cpuShares: 1024, memoryLimitBytes: 1000 }, 1));
    assert.deepEqual(p, { MemoryLimit: 1000n, CPUShares: 1024n });
  });

  it('a new slice Wants= its parent, counts everything and drops default dependencies', () => {
    assert.equal(parentSlice('kubepods-burstable-podx.slice'), 'kubepods-burstable.slice');
    assert.equal(parentSlice('kubepods.slice'), '-.slice');
    const p = byName(sliceStartProperties('kubepods-burstable.slice'));
    assert.deepEqual(p.Wants, ['kubepods.slice']);
    assert.equal(p.DefaultDependencies, false);
    for (const a of ['MemoryAccounting', 'CPUAccounting', 'IOAccounting', 'TasksAccounting']) assert.equal(p[a], true, a);
    assert.equal(p.Delegate, undefined, 'systemd refuses Delegate= on slices');
  });
});
