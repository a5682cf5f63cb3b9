import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextRotationDeadline } from '../../src/certificate/schedule.js';

describe('certificate rotation deadline', () => {
  const hour = 3600_000;
  const notBefore = Date.UTC(2026, 0, 1);

  it('is at 70% of the lifetime with no jitter and 90% with the most', () => {
    assert.equal(nextRotationDeadline(notBefore, notBefore + 10 * hour, () => 0), notBefore + 7 * hour);
    assert.equal(nextRotationDeadline(notBefore, notBefore + 10 * hour, () => 1), notBefore + 9 * hour);
    assert.equal(nextRotationDeadline(notBefore, notBefore + 10 * hour, () => 0.5), notBefore + 8 * hour);
  });

  it('stays within 70–90% for any random draw, and spreads over that window', () => {
    let seed = 42;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const total = 365 * 24 * hour;
    const seen: number[] = [];
    for (let i = 0; i < 2000; i++) {
      const d = nextRotationDeadline(notBefore, notBefore + total, rnd);
      const f = (d - notBefore) / total;
      assert.ok(f >= 0.7 && f <= 0.9, `fraction ${f}`);
      seen.push(f);
    }
    assert.ok(Math.min(...seen) < 0.72 && Math.max(...seen) > 0.88, 'the jitter covers the window');
  });

  it('a certificate with no lifetime is due at once', () => {
    assert.equal(nextRotationDeadline(notBefore, notBefore), notBefore);
    assert.equal(nextRotationDeadline(notBefore, notBefore - 1), notBefore);
  });
});
