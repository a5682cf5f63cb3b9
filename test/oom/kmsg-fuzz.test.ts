// Property-based tests of the kernel log's OOM parser (src/oom/kmsg-parser.ts) on generated
// kills whose victim picked its own name: a comm (up to 15 bytes, set by any process with
// prctl) may hold ',', '=', '(', ')', ",pid=1" or ",uid=0", the very separators of the
// kernel's "oom-kill:...,task=<comm>,pid=<pid>,uid=<uid>" line; mixed with random lines. The
// properties: feed never throws, a record carries the kill's own pid, comm, uid and memory
// cgroups whatever the comm says, and every number in a record is a safe integer. Seeded: a
// failure prints its seed and counterexample. KTS_FUZZ_RUNS scales the runs.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';

import { KmsgOomParser, parseOomKillFields } from '../../src/oom/kmsg-parser.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 400;
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;

const comm = fc.oneof(
  fc.constantFrom(',pid=1', ',uid=0', 'a,pid=7,uid=9', 'oom-kill:x', 'Killed process ', ',task=x', 'x) (y', '(', ')', 'sh', 'kworker/0:1', ',task_memcg=/x', 'a=b,c', ''),
  fc.string({ minLength: 1, maxLength: 15 }).filter((s) => !s.includes('\n')),
);
const memcg = fc.oneof(fc.constantFrom('/', '/kubepods/burstable/pod1/abc', '/kubepods/pod2/def'), fc.stringMatching(/^\/[a-z0-9/._-]{0,30}$/));
const kill = fc.record({
  comm,
  pid: fc.integer({ min: 1, max: 4_194_304 }),
  uid: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  oomMemcg: memcg,
  taskMemcg: memcg,
  memcgOom: fc.boolean(),
});

describe('the kernel log OOM parser on victims that chose their names', () => {
  it(`a kill's record carries its own pid, comm, uid and cgroups (${RUNS * 2} kills, seed ${SEED})`, () => {
    fc.assert(
      fc.property(kill, fc.array(fc.string({ maxLength: 60 }), { maxLength: 2 }), (k, noise) => {
        const p = new KmsgOomParser();
        for (const n of noise) p.feed(n);
        p.feed(`${k.comm} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0`);
        p.feed(`oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=${k.oomMemcg},task_memcg=${k.taskMemcg},task=${k.comm},pid=${k.pid},uid=${k.uid}`);
        const r = p.feed(`${k.memcgOom ? 'Memory cgroup out of memory' : 'Out of memory'}: Killed process ${k.pid} (${k.comm}) total-vm:26852kB, anon-rss:16228kB, file-rss:1584kB, shmem-rss:0kB, UID:${k.uid} pgtables:80kB oom_score_adj:-997`);
        assert.ok(r, 'no record');
        assert.equal(r.pid, k.pid);
        assert.equal(r.comm, k.comm);
        assert.equal(r.uid, k.uid);
        assert.equal(r.memcgOom, k.memcgOom);
        assert.equal(r.taskMemcg, k.taskMemcg, 'the victim lost its memory cgroup');
        assert.equal(r.oomMemcg, k.oomMemcg);
        const fields = parseOomKillFields(`constraint=CONSTRAINT_MEMCG,oom_memcg=${k.oomMemcg},task_memcg=${k.taskMemcg},task=${k.comm},pid=${k.pid},uid=${k.uid}`);
        assert.equal(fields.get('task'), k.comm);
        assert.equal(fields.get('pid'), String(k.pid));
        assert.equal(fields.get('uid'), String(k.uid));
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });

  it(`never throws on random lines; every number it gives is a safe integer (${RUNS * 5} lines, seed ${SEED})`, () => {
    const line = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.tuple(fc.constantFrom('Killed process ', 'Memory cgroup out of memory: Killed process ', 'oom-kill:', 'Task in ', 'Out of memory: Kill process '),
        fc.string({ maxLength: 80 }), fc.stringMatching(/^\d{1,40}$/)).map(([a, b, d]) => `${a}${d} (${b}) total-vm:${d}kB UID:${d} oom_score_adj:-${d}`),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 6 }), (lines) => {
        const p = new KmsgOomParser();
        for (const l of lines) {
          const r = p.feed(l);
          if (!r) continue;
          for (const [k, v] of Object.entries(r)) if (typeof v === 'number') assert.ok(Number.isSafeInteger(v), `${k}: ${v}`);
          assert.ok(r.pid > 0, `pid ${r.pid}`);
        }
      }),
      { numRuns: RUNS * 5, seed: SEED },
    );
  });
});
