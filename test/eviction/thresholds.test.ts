import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_EVICTION_HARD } from '../../src/config/defaults.js';
import {
  EvictionConfigError,
  nodeConditionsLastObservedAt,
  nodeConditionsObservedSince,
  nodeConditionsOf,
  parseThresholdConfig,
  thresholdsFirstObservedAt,
  thresholdsMet,
  thresholdsMetGracePeriod,
  thresholdKey,
  type SignalObservations,
} from '../../src/eviction/index.js';

const MI = 1024n * 1024n;
const base = { evictionHard: {}, evictionSoft: {}, evictionSoftGracePeriod: {}, evictionMinimumReclaim: {}, enforceNodeAllocatable: [] as string[] };

describe('eviction thresholds from the config', () => {
  it('parses upstream defaults: quantities and percentages, an allocatable twin with pods enforced', () => {
    const ts = parseThresholdConfig({ ...base, evictionHard: { ...DEFAULT_EVICTION_HARD }, enforceNodeAllocatable: ['pods'] });
    assert.deepEqual(ts.map((t) => t.signal), ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'allocatableMemory.available']);
    assert.deepEqual(ts[0]!.value, { quantity: 100n * MI, text: '100Mi' });
    assert.deepEqual(ts[1]!.value, { percentage: 0.1 });
    assert.equal(ts[0]!.gracePeriodMs, 0);
    assert.deepEqual(ts[4]!.value, ts[0]!.value);
    assert.equal(parseThresholdConfig({ ...base, evictionHard: { ...DEFAULT_EVICTION_HARD } }).length, 4);
  });

  it('a zero threshold is off; soft thresholds need a grace period; bad values name the field', () => {
    assert.equal(parseThresholdConfig({ ...base, evictionHard: { 'memory.available': '0', 'nodefs.available': '0%' } }).length, 0);
    assert.throws(() => parseThresholdConfig({ ...base, evictionSoft: { 'memory.available': '1Gi' } }),
      (e: Error) => e instanceof EvictionConfigError && /evictionSoft\[memory.available\].*grace period must be specified for the soft eviction threshold memory.available/.test(e.message));
    const soft = parseThresholdConfig({ ...base, evictionSoft: { 'memory.available': '1Gi' }, evictionSoftGracePeriod: { 'memory.available': 90_000 }, evictionMinimumReclaim: { 'memory.available': '500Mi' } });
    assert.equal(soft[0]!.gracePeriodMs, 90_000);
    assert.deepEqual(soft[0]!.minReclaim, { quantity: 500n * MI, text: '500Mi' });
    assert.throws(() => parseThresholdConfig({ ...base, evictionHard: { 'memory.available': 'lots' } }), /evictionHard\[memory.available\]: invalid quantity/);
    assert.throws(() => parseThresholdConfig({ ...base, evictionHard: { 'cpu.available': '1' } }), /evictionHard\[cpu.available\]: unsupported eviction signal/);
  });

  it('is met below the threshold (percent of capacity), and with min-reclaim until that is reclaimed too', () => {
    const [mem, fs] = parseThresholdConfig({ ...base, evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '10%' }, evictionMinimumReclaim: { 'memory.available': '50Mi' } });
    const obs: SignalObservations = new Map([
      ['memory.available', { available: 120n * MI, capacity: 1000n * MI, time: 0 }],
      ['nodefs.available', { available: 99n, capacity: 1000n, time: 0 }],
    ]);
    assert.deepEqual(thresholdsMet([mem!, fs!], obs, false).map((t) => t.signal), ['nodefs.available']);
    assert.deepEqual(thresholdsMet([mem!, fs!], obs, true).map((t) => t.signal), ['memory.available', 'nodefs.available']);
    obs.set('nodefs.available', { available: 100n, capacity: 1000n, time: 0 });
    assert.deepEqual(thresholdsMet([fs!], obs, false), []);
  });

  it('grace periods count from the first observation; conditions stay for the transition period', () => {
    const [soft] = parseThresholdConfig({ ...base, evictionSoft: { 'memory.available': '1Gi' }, evictionSoftGracePeriod: { 'memory.available': 30_000 } });
    let first = thresholdsFirstObservedAt([soft!], new Map(), 1000);
    assert.deepEqual(thresholdsMetGracePeriod([soft!], first, 30_999), []);
    first = thresholdsFirstObservedAt([soft!], first, 20_000);
    assert.equal(first.get(thresholdKey(soft!)), 1000);
    assert.equal(thresholdsMetGracePeriod([soft!], first, 31_000).length, 1);
    const seen = nodeConditionsLastObservedAt(nodeConditionsOf([soft!]), new Map(), 1000);
    assert.deepEqual(nodeConditionsObservedSince(seen, 300_000, 300_999), ['MemoryPressure']);
    assert.deepEqual(nodeConditionsObservedSince(nodeConditionsLastObservedAt([], seen, 301_000), 300_000, 301_000), []);
  });
});
