// The malloc trimmer: trims on its interval only when malloc holds enough free memory, and
// stops with the agent.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startMallocTrim } from '../src/malloc-trim.js';
import { loadNative } from '../src/native.js';
import { FakeClock } from '../src/util/clock.js';

function fakeAddon(free: () => number): { addon: { mallocTrim: () => boolean; mallocInfo: () => { freeBytes: number } }; calls: () => number } {
  let calls = 0;
  return { addon: { mallocTrim: () => { calls++; return true; }, mallocInfo: () => ({ freeBytes: free() }) }, calls: () => calls };
}

describe('startMallocTrim', () => {
  it('trims each interval while malloc holds at least the threshold free, not below it', () => {
    const clock = new FakeClock();
    let free = 10 << 20;
    const f = fakeAddon(() => free);
    const t = startMallocTrim({ clock, addon: f.addon, intervalMs: 1000, minFreeBytes: 4 << 20 });
    clock.step(999);
    assert.equal(f.calls(), 0);
    clock.step(1);
    assert.equal(f.calls(), 1);
    free = 1 << 20;
    clock.step(1000);
    assert.equal(f.calls(), 1);
    free = 5 << 20;
    clock.step(1000);
    assert.equal(f.calls(), 2);
    assert.equal(t.trims(), 2);
    t.stop();
    clock.step(5000);
    assert.equal(f.calls(), 2);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('arms nothing without the addon or without mallinfo', () => {
    const clock = new FakeClock();
    startMallocTrim({ clock, addon: undefined });
    startMallocTrim({ clock, addon: { mallocTrim: () => true, mallocInfo: () => ({}) } });
    assert.equal(clock.pendingTimers(), 0);
  });

  it('the addon exports the trim and the malloc totals it decides on', () => {
    const addon = loadNative().addon!;
    assert.equal(typeof addon.mallocTrim!(), 'boolean');
    const info = addon.mallocInfo!();
    for (const k of ['arenaBytes', 'inUseBytes', 'freeBytes', 'mmapBytes'] as const) assert.equal(typeof info[k], 'number', `${k} in ${JSON.stringify(info)}`);
    assert.ok(info.inUseBytes! + info.freeBytes! <= info.arenaBytes! + info.mmapBytes! + 2 ** 20, JSON.stringify(info));
  });
});
