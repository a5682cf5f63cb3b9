// Property-based tests of the TypeScript parsers of kernel text files (the native ones run under
// libFuzzer, test/native/fuzz-native.test.ts): /proc/stat, /proc/meminfo, /proc/loadavg,
// memory.events and memory.oom_control, and PSI files, on well-formed files with mutated
// values (huge numbers, exponents, hex, several dots, signs) and on random text. The
// properties: none throws, and every figure it gives is what a kernel would print: a
// non-negative safe integer for a counter, a finite number for a PSI average, digits only.
// Seeded: a failure prints its seed and counterexample. KTS_FUZZ_RUNS scales the runs.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';

import { parseLoadavgTasks, parseMeminfo, parseProcStat } from '../../src/stats/node-stats.js';
import { parseMemoryEvents, parseOomControl } from '../../src/oom/memory-events.js';
import { parsePsi } from '../../src/eviction/memcg-notifier-v2.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 400;
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;

const number = fc.oneof(
  { weight: 3, arbitrary: fc.nat().map(String) },
  { weight: 1, arbitrary: fc.constantFrom('1e3', '0x10', '1.2.3', '..', '.', '-1', '+5', '', ' ', '99999999999999999999999', '9007199254740993', '1_000', 'Infinity', 'NaN', '0.5', '00') },
);
const procStat = fc.tuple(fc.array(number, { minLength: 8, maxLength: 10 }), number).map(([cpu, btime]) => `cpu  ${cpu.join(' ')}\ncpu0 1 2 3 4\nintr 1\nbtime ${btime}\nprocesses 5\n`);
const memoryEvents = fc.array(fc.tuple(fc.constantFrom('low', 'high', 'max', 'oom', 'oom_kill', 'oom_group_kill', 'oom_kill_disable', 'under_oom'), number), { maxLength: 7 })
  .map((rows) => rows.map(([k, v]) => `${k} ${v}\n`).join(''));
const psi = fc.tuple(number, number, number, number, number).map(([a, b, c, d, e]) => `some avg10=${a}.${b} avg60=${c} avg300=0.00 total=${d}\nfull avg10=${e} avg60=0.00 avg300=0.00 total=${d}\n`);
const text = (a: fc.Arbitrary<string>): fc.Arbitrary<string> => fc.oneof({ weight: 4, arbitrary: a }, { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) });

const isCount = (v: number): boolean => Number.isSafeInteger(v) && v >= 0;

describe('parsers of kernel text files on mutated and random input', () => {
  it(`/proc/stat, /proc/meminfo, /proc/loadavg (${RUNS} files each, seed ${SEED})`, () => {
    fc.assert(
      fc.property(text(procStat), (t) => {
        const s = parseProcStat(t);
        if (s.bootTimeSeconds !== undefined) {
          assert.ok(isCount(s.bootTimeSeconds) && s.bootTimeSeconds > 0, `btime ${s.bootTimeSeconds}`);
          assert.match(/^btime (.*)$/m.exec(t)![1]!.trim(), /^\d+$/, 'btime taken from something not decimal digits');
        }
        if (s.cpuUsageNs !== undefined) assert.ok(s.cpuUsageNs >= 0n);
      }),
      { numRuns: RUNS, seed: SEED },
    );
    fc.assert(
      fc.property(text(fc.array(fc.tuple(fc.constantFrom('MemTotal', 'MemAvailable', 'HugePages_Total'), number, fc.constantFrom(' kB', '')), { maxLength: 4 })
        .map((rows) => rows.map(([k, v, u]) => `${k}:   ${v}${u}\n`).join(''))), (t) => {
        for (const [k, v] of parseMeminfo(t)) assert.ok(typeof v === 'bigint' && v >= 0n, `${k} ${v}`);
      }),
      { numRuns: RUNS, seed: SEED },
    );
    fc.assert(
      fc.property(text(fc.tuple(number, number).map(([a, b]) => `0.00 0.01 0.05 ${a}/${b} 4567\n`)), (t) => {
        const n = parseLoadavgTasks(t);
        if (n !== undefined) assert.ok(n >= 0n);
      }),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it(`memory.events and memory.oom_control counters are safe integers (${RUNS * 2} files, seed ${SEED})`, () => {
    fc.assert(
      fc.property(text(memoryEvents), (t) => {
        for (const [k, v] of parseMemoryEvents(t)) assert.ok(isCount(v), `${k} ${v}`);
        const oc = parseOomControl(t);
        if (oc.oomKill !== undefined) assert.ok(isCount(oc.oomKill), `oom_kill ${oc.oomKill}`);
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });

  it(`PSI averages are finite and totals non-negative (${RUNS * 2} files, seed ${SEED})`, () => {
    fc.assert(
      fc.property(text(psi), (t) => {
        const p = parsePsi(t);
        for (const line of [p.some, p.full]) {
          if (!line) continue;
          for (const v of [line.avg10, line.avg60, line.avg300]) assert.ok(Number.isFinite(v) && v >= 0, `average ${v} from ${JSON.stringify(t)}`);
          assert.ok(line.total >= 0n);
        }
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });
});
