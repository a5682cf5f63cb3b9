// The shared probe schedule on a FakeClock: runs fire at their slot (rounded up to the
// resolution) in order, one clock timer serves them all, cancelled runs never fire and leave
// no timer behind.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../src/util/clock.js';
import { ProbeScheduler } from '../../src/prober/scheduler.js';

test('probe scheduler: runs fire at their slot in time order from one clock timer', () => {
  const clock = new FakeClock(0);
  const s = new ProbeScheduler(clock, 10);
  const fired: [string, number][] = [];
  for (const [name, at] of [['c', 1000], ['a', 5], ['b', 500], ['a2', 9]] as const) s.runAt(at, () => fired.push([name, clock.now()]));
  assert.equal(clock.pendingTimers(), 1, 'one timer for every run');
  assert.equal(s.size(), 4);
  clock.step(10);
  assert.deepEqual(fired, [['a', 10], ['a2', 10]]);
  clock.step(1000);
  assert.deepEqual(fired.map(([n]) => n), ['a', 'a2', 'b', 'c']);
  assert.deepEqual(fired.map(([, t]) => t), [10, 10, 500, 1000]);
  assert.equal(s.size(), 0);
  assert.equal(clock.pendingTimers(), 0);
});

test('probe scheduler: a run may schedule the next one; a past time runs on the next slot', () => {
  const clock = new FakeClock(0);
  const s = new ProbeScheduler(clock, 10);
  const at: number[] = [];
  const tick = (): void => { at.push(clock.now()); if (at.length < 5) s.runAt(clock.now() + 1000, tick); };
  s.runAt(0, tick);
  clock.step(5000);
  assert.deepEqual(at, [0, 1000, 2000, 3000, 4000]);
  let late = -1;
  s.runAt(clock.now() - 3000, () => { late = clock.now(); });
  clock.step(10);
  assert.equal(late, 5000);
});

test('probe scheduler: cancelled runs do not fire and the last cancel disarms the timer', () => {
  const clock = new FakeClock(0);
  const s = new ProbeScheduler(clock, 10);
  let n = 0;
  const a = s.runAt(100, () => n++);
  const b = s.runAt(200, () => n++);
  s.runAt(300, () => n++).cancel();
  a.cancel();
  clock.step(250);
  assert.equal(n, 1);
  b.cancel();
  assert.equal(clock.pendingTimers(), 0);
  const c = s.runAt(clock.now() + 50, () => n++);
  c.cancel();
  assert.equal(clock.pendingTimers(), 0);
  clock.step(1000);
  assert.equal(n, 1);
});

test('probe scheduler: a late fire over several due slots arms one timer for the runs they schedule', () => {
  // a clock whose timer runs when the test says: the loop was busy and the timer is late
  let now = 0;
  const timers: (() => void)[] = [];
  const delays: number[] = [];
  const late = { now: () => now, sleep: () => Promise.resolve(), setTimeout: (fn: () => void, ms: number) => { timers.push(fn); delays.push(ms); return { cancel: () => {} }; } };
  const s = new ProbeScheduler(late, 10);
  const at: number[] = [];
  const again = (): void => { at.push(now); s.runAt(now + 1000, again); };
  for (let i = 0; i < 20; i++) s.runAt(10 * (i + 1), again);
  assert.equal(timers.length, 1);
  now = 200;
  timers[0]!();
  assert.equal(at.length, 20, 'every due slot ran in one fire');
  assert.equal(timers.length, 2, 'one timer for the next slot, not one per run scheduled while firing');
  assert.equal(delays[1], 1000, 'armed for the slot the runs scheduled, not at once for a slot this fire already ran');
  assert.equal(s.size(), 20);
});
