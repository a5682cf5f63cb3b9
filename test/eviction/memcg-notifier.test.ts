import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parsePsi, v2PressureChanged } from '../../src/eviction/memcg-notifier.js';

const events = (high: number, max = 0, oom = 0) => `low 0\nhigh ${high}\nmax ${max}\noom ${oom}\noom_kill 0\noom_group_kill 0\n`;
const psi = (someTotal: number) => `some avg10=1.50 avg60=0.30 avg300=0.05 total=${someTotal}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=12\n`;

describe('cgroup v2 memory pressure inputs', () => {
  it('parses PSI lines (some and full)', () => {
    assert.deepEqual(parsePsi(psi(123456)), {
      some: { avg10: 1.5, avg60: 0.3, avg300: 0.05, total: 123456n },
      full: { avg10: 0, avg60: 0, avg300: 0, total: 12n },
    });
    assert.deepEqual(parsePsi('garbage\n'), {});
  });

  it('calls for a pass when high/max/oom counters grow or memory stalls grow past the threshold', () => {
    assert.equal(v2PressureChanged({ events: events(0) }, { events: events(0) }), false);
    assert.equal(v2PressureChanged({ events: events(0) }, { events: events(1) }), true);
    assert.equal(v2PressureChanged({ events: events(3) }, { events: events(3, 1) }), true);
    assert.equal(v2PressureChanged(undefined, { events: events(0, 0, 1) }), true);
    assert.equal(v2PressureChanged({ events: events(0), pressure: psi(1000) }, { events: events(0), pressure: psi(50_000) }), false);
    assert.equal(v2PressureChanged({ events: events(0), pressure: psi(1000) }, { events: events(0), pressure: psi(101_000) }), true);
  });
});
