// Property-based tests of the two mountinfo parsers (cgroup discovery in src/cgroups/mounts.ts,
// the volume manager's mount list in src/volumemanager/mounter.ts): generated mount tables
// written as the kernel writes /proc/<pid>/mountinfo (space, tab, newline and backslash in a path
// escaped as \040, \011, \012, \134; optional fields; any mount option names, hostile ones
// included), mixed with random lines and random text. The properties: neither parser throws;
// each gives back exactly the paths written, the first mount of each hierarchy wins, and every
// v1 hierarchy written is found (allHierarchies). Seeded: a failure prints its seed and
// counterexample. KTS_FUZZ_RUNS scales the runs.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';

import { allHierarchies, parseMountInfo as parseCgroupMounts, V1_CONTROLLERS } from '../../src/cgroups/mounts.js';
import { parseMountInfo as parseMountPoints } from '../../src/volumemanager/mounter.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 400;
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;

// The kernel's escaping of mountinfo paths (fs/proc_namespace.c: mangle " \t\n\\").
const escape = (p: string): string => p.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);

const path = fc.oneof(
  fc.array(fc.oneof(fc.string({ minLength: 1, maxLength: 8 }), fc.constantFrom(' - ', '\\040', '\\', '\n', '\t', '-', 'a b', '\u00e9')), { minLength: 0, maxLength: 4 })
    .map((parts) => `/${parts.join('/')}`),
  fc.constantFrom('/', '/sys/fs/cgroup/memory', '/sys/fs/cgroup/unified', '/a - b', '/x\\y'),
);
const option = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...V1_CONTROLLERS, 'cpuset', 'devices', 'freezer', 'name=systemd', 'rw', 'ro', 'nosuid', 'xattr', 'release_agent=/x') },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'name=__proto__') },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z_=]{1,10}$/) },
);
interface Mount { root: string; mountPoint: string; fsType: string; options: string[]; optional: string[] }
const mount: fc.Arbitrary<Mount> = fc.record({
  root: path,
  mountPoint: path,
  fsType: fc.constantFrom('cgroup', 'cgroup2', 'tmpfs', 'ext4', 'proc', 'overlay'),
  options: fc.uniqueArray(option, { minLength: 1, maxLength: 4 }),
  optional: fc.array(fc.constantFrom('shared:1', 'master:2', 'propagate_from:3', 'unbindable'), { maxLength: 2 }),
});
const line = (m: Mount, i: number): string =>
  [String(20 + i), '1', '0:25', escape(m.root), escape(m.mountPoint), 'rw,nosuid', ...m.optional, '-', m.fsType, m.fsType === 'tmpfs' ? 'tmpfs' : 'cgroup', m.options.join(',')].join(' ');
const noise = fc.oneof(fc.string({ maxLength: 40 }).map((s) => s.replace(/ - /g, ' ')), fc.constantFrom('', ' ', '1 2 3 - ', '-', ' - cgroup', '1 2 3 4 - cgroup2'));

describe('mountinfo parsers on generated and hostile mount tables', () => {
  it(`give back the paths written and every hierarchy (${RUNS * 2} tables, seed ${SEED})`, () => {
    fc.assert(
      fc.property(fc.array(fc.oneof({ weight: 4, arbitrary: mount }, { weight: 1, arbitrary: noise }), { maxLength: 12 }), (rows) => {
        const mounts = rows.filter((r): r is Mount => typeof r !== 'string');
        const text = rows.map((r, i) => (typeof r === 'string' ? r : line(r, i))).join('\n');

        assert.deepEqual(parseMountPoints(text), mounts.map((m) => ({ mountPoint: m.mountPoint, fsType: m.fsType })));

        const got = parseCgroupMounts(text);
        const first = (pred: (m: Mount) => boolean): { root: string; mountPoint: string } | undefined => {
          const m = mounts.find(pred);
          return m && { root: m.root, mountPoint: m.mountPoint };
        };
        assert.deepEqual(got.unified, first((m) => m.fsType === 'cgroup2'));
        for (const c of V1_CONTROLLERS) assert.deepEqual(got.v1[c], first((m) => m.fsType === 'cgroup' && m.options.includes(c)), c);
        const hierarchies = new Set(allHierarchies(got).map((h) => h.mountPoint));
        for (const m of mounts) {
          const named = m.options.filter((o) => !['rw', 'ro', 'noprefix', 'clone_children', 'xattr'].includes(o) && !o.startsWith('release_agent='));
          if (m.fsType === 'cgroup' && named.length > 0) {
            for (const o of named) {
              const owner = mounts.find((x) => x.fsType === 'cgroup' && x.options.includes(o))!;
              assert.ok(hierarchies.has(owner.mountPoint), `hierarchy ${o} at ${JSON.stringify(owner.mountPoint)} not found`);
            }
          }
        }
        assert.equal(({} as Record<string, unknown>).root, undefined);
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });

  it(`never throw on random text (${RUNS * 2} texts, seed ${SEED})`, () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (text) => {
        parseMountPoints(text);
        const got = parseCgroupMounts(text);
        for (const h of allHierarchies(got)) assert.equal(typeof h.mountPoint, 'string');
      }),
      { numRuns: RUNS * 2, seed: SEED },
    );
  });

  it('a v1 hierarchy named by a mount option such as __proto__ is found like any other', () => {
    const text = '30 1 0:30 / /sys/fs/cgroup/odd rw - cgroup cgroup rw,__proto__\n31 1 0:31 / /sys/fs/cgroup/odd2 rw - cgroup cgroup rw,constructor\n';
    const found = allHierarchies(parseCgroupMounts(text)).map((h) => h.mountPoint).sort();
    assert.deepEqual(found, ['/sys/fs/cgroup/odd', '/sys/fs/cgroup/odd2']);
  });
});
