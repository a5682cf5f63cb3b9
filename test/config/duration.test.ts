import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  DurationError,
  formatDuration,
  formatDurationNs,
  parseDuration,
  parseDurationNs,
} from '../../src/config/duration.js';

describe('parseDuration (Go time.Duration strings → ms)', () => {
  const cases: Array<[string, number]> = [
    ['20s', 20_000],
    ['1m', 60_000],
    ['1h30m', 5_400_000],
    ['500ms', 500],
    ['2m0s', 120_000],
    ['0s', 0],
    ['0', 0],
    ['-0', 0],
    ['1.5h', 5_400_000],
    ['300us', 1],
    ['300\u00b5s', 1],
    ['300\u03bcs', 1],
    ['1ns', 1],
    ['1500us', 2],
    ['1000us', 1],
    ['+5s', 5000],
    ['-1.5s', -1500],
    ['-1ns', -1],
    ['.5s', 500],
    ['5.s', 5000],
    ['1h1m1s1ms', 3_661_001],
    ['4h', 14_400_000],
  ];
  for (const [input, ms] of cases) {
    it(`reads ${JSON.stringify(input)} as ${ms}ms`, () => {
      assert.equal(parseDuration(input), ms);
    });
  }

  it('computes exact nanoseconds, truncating fractional nanoseconds as Go does', () => {
    assert.equal(parseDurationNs('1.5ns'), 1n);
    assert.equal(parseDurationNs('1.000000001s'), 1_000_000_001n);
    assert.equal(parseDurationNs('2562047h47m16.854775807s'), (1n << 63n) - 1n);
  });

  const bad: Array<[string, RegExp]> = [
    ['', /time: invalid duration ""/],
    ['20', /missing unit in duration "20"/],
    ['1x', /unknown unit "x" in duration "1x"/],
    ['20 seconds', /unknown unit " seconds"/],
    ['s', /invalid duration "s"/],
    ['.s', /invalid duration ".s"/],
    ['-', /invalid duration "-"/],
    ['1h-2m', /unknown unit "h-"/],
    ['3000000h', /invalid duration "3000000h"/],
    ['1d', /unknown unit "d"/],
  ];
  for (const [input, re] of bad) {
    it(`rejects ${JSON.stringify(input)}`, () => {
      assert.throws(() => parseDuration(input), (err: unknown) => err instanceof DurationError && re.test(err.message));
    });
  }
});

describe('formatDuration (ms → Go Duration.String())', () => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [500, '500ms'],
    [1500, '1.5s'],
    [120_000, '2m0s'],
    [5_400_000, '1h30m0s'],
    [3_661_001, '1h1m1.001s'],
    [-1500, '-1.5s'],
  ];
  for (const [ms, s] of cases) {
    it(`prints ${ms}ms as ${s}`, () => {
      assert.equal(formatDuration(ms), s);
    });
  }

  it('prints sub-millisecond values with Go units', () => {
    assert.equal(formatDurationNs(1n), '1ns');
    assert.equal(formatDurationNs(1500n), '1.5\u00b5s');
  });

  it('round-trips through parseDuration', () => {
    for (const ms of [1, 999, 1000, 59_999, 86_400_000]) {
      assert.equal(parseDuration(formatDuration(ms)), ms);
    }
  });
});
