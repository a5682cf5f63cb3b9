import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cgroupDir, cgroupDirUnder, cgroupMode, cgroupRefFor, memoryHierarchy, NoCgroupMountError, parseMountInfo } from '../../src/cgroups/index.js';
import { PathEscapeError } from '../../src/util/safe-path.js';
import { cgroupFilesFor } from '../../src/stats/cgroup-sample.js';

const HYBRID = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;

test('hybrid mountinfo: separate cpu and cpuacct, cgroup2 at unified', () => {
  const m = parseMountInfo(HYBRID);
  assert.equal(cgroupMode(m), 'hybrid');
  assert.deepEqual(m.unified, { mountPoint: '/sys/fs/cgroup/unified', root: '/' });
  assert.equal(m.v1.cpu?.mountPoint, '/sys/fs/cgroup/cpu');
  assert.equal(m.v1.cpuacct?.mountPoint, '/sys/fs/cgroup/cpuacct');
  assert.equal(m.v1.memory?.mountPoint, '/sys/fs/cgroup/memory');
  assert.deepEqual(Object.keys(m.v1).sort(), ['blkio', 'cpu', 'cpuacct', 'memory', 'pids']);
  const ref = cgroupRefFor(m, '/kubepods/burstable/podabc/c1');
  assert.deepEqual(ref, {
    version: 1,
    cpu: '/sys/fs/cgroup/cpu/kubepods/burstable/podabc/c1',
    cpuacct: '/sys/fs/cgroup/cpuacct/kubepods/burstable/podabc/c1',
    memory: '/sys/fs/cgroup/memory/kubepods/burstable/podabc/c1',
    pids: '/sys/fs/cgroup/pids/kubepods/burstable/podabc/c1',
    blkio: '/sys/fs/cgroup/blkio/kubepods/burstable/podabc/c1',
    unified: '/sys/fs/cgroup/unified/kubepods/burstable/podabc/c1',
  });
  const files = cgroupFilesFor(ref);
  assert.ok(files.includes('/sys/fs/cgroup/cpuacct/kubepods/burstable/podabc/c1/cpuacct.stat'));
  assert.ok(files.includes('/sys/fs/cgroup/cpu/kubepods/burstable/podabc/c1/cpu.stat'));
  assert.ok(files.includes('/sys/fs/cgroup/unified/kubepods/burstable/podabc/c1/memory.pressure'));
  assert.equal(files.length, 14);
});

test('combined cpu,cpuacct mount serves both controllers', () => {
  const m = parseMountInfo('30 20 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n');
  assert.equal(cgroupMode(m), 'v1');
  assert.equal(m.v1.cpu?.mountPoint, '/sys/fs/cgroup/cpu,cpuacct');
  assert.equal(m.v1.cpuacct?.mountPoint, '/sys/fs/cgroup/cpu,cpuacct');
  const ref = cgroupRefFor(m, 'kubepods/x');
  assert.equal(ref.version, 1);
  assert.equal(ref.version === 1 && ref.cpuacct, '/sys/fs/cgroup/cpu,cpuacct/kubepods/x');
  assert.equal(ref.version === 1 && ref.unified, undefined);
});

test('pure v2: a v2 ref; every file in the one directory', () => {
  const m = parseMountInfo('25 1 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n');
  assert.equal(cgroupMode(m), 'v2');
  const ref = cgroupRefFor(m, '/kubepods.slice/x');
  assert.deepEqual(ref, { version: 2, dir: '/sys/fs/cgroup/kubepods.slice/x' });
  const files = cgroupFilesFor(ref);
  assert.equal(files.length, 12);
  assert.ok(files.every((f) => f.startsWith('/sys/fs/cgroup/kubepods.slice/x/')));
  assert.ok(files.includes('/sys/fs/cgroup/kubepods.slice/x/io.stat'));
});

test('escaped mount points and non-root mount roots', () => {
  const m = parseMountInfo('25 1 0:23 /outer /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n');
  assert.deepEqual(m.unified, { mountPoint: '/mnt/cg two', root: '/outer' });
  assert.equal(cgroupDir(m.unified!, '/outer/kubepods/a'), '/mnt/cg two/kubepods/a');
  assert.equal(cgroupDir(m.unified!, '/other/a'), '/mnt/cg two/other/a');
  assert.equal(cgroupDir(m.unified!, '/outer'), '/mnt/cg two');
});

test('no cgroup mounts → mode none, refFor throws', () => {
  const m = parseMountInfo('22 1 8:1 / / rw - ext4 /dev/sda1 rw\ngarbage line\n');
  assert.equal(cgroupMode(m), 'none');
  assert.throws(() => cgroupRefFor(m, '/x'), (e: unknown) => e instanceof NoCgroupMountError && e.code === 'ERR_NO_CGROUP_MOUNT' && /no cgroup hierarchy/.test(e.message));
  assert.equal(memoryHierarchy(m), undefined);
});

test('memory lives in the v1 memory hierarchy when there is one, else in the unified one', () => {
  assert.deepEqual(memoryHierarchy(parseMountInfo(HYBRID)), { mount: { mountPoint: '/sys/fs/cgroup/memory', root: '/' }, version: 1 });
  const v2 = parseMountInfo('25 1 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n');
  assert.deepEqual(memoryHierarchy(v2), { mount: { mountPoint: '/sys/fs/cgroup', root: '/' }, version: 2 });
});

test('cgroupDirUnder keeps outside names inside their parent cgroup', () => {
  const mount = { mountPoint: '/sys/fs/cgroup', root: '/' };
  assert.equal(cgroupDirUnder(mount, '/kubepods/burstable', 'podabc'), '/sys/fs/cgroup/kubepods/burstable/podabc');
  for (const bad of ['..', '.', '../../x', 'a/b', '', 'x\0y']) {
    assert.throws(() => cgroupDirUnder(mount, '/kubepods', bad), PathEscapeError, JSON.stringify(bad));
  }
});
