// PSI triggers on real pressure files through the native watcher: registering one on a cgroup2
// memory.pressure (a cgroup the test makes, the pods cgroup when it exists) and on
// /proc/pressure/memory, the kernel refusing a window it does not allow this process, the
// fd held while armed and released by close, the trigger ending with its cgroup, and a cgroup
// file that is no PSI file refused before anything is written to it. No memory stall is made.
// Needs root and a cgroup2 mount with PSI (psi=1).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, rmdir } from 'node:fs/promises';
import { join } from 'node:path';

import { cgroupDir, discoverCgroupMounts } from '../../src/cgroups/index.js';
import { createV2MemoryNotifier, PSI_MEMORY_TRIGGER, PSI_MEMORY_TRIGGER_UNPRIVILEGED } from '../../src/eviction/memcg-notifier-v2.js';
import { realClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { collectingHandle, realNative } from '../oom/helpers.js';

/** Files this process holds open that are `file`. */
async function openFds(file: string): Promise<number> {
  let n = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target === file) n++;
  }
  return n;
}

/** CAP_SYS_RESOURCE (bit 24): without it the kernel takes only windows in whole 2 s. */
async function hasSysResource(): Promise<boolean> {
  const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(await readFile('/proc/self/status', 'utf8'))?.[1];
  return eff !== undefined && (BigInt(`0x${eff}`) & (1n << 24n)) !== 0n;
}

describe('PSI triggers on real pressure files', () => {
  let cg: string;
  let privileged: boolean;
  let trigger: string;

  before(async () => {
    const mounts = await discoverCgroupMounts();
    assert.ok(mounts.unified, 'this test needs a cgroup2 mount');
    cg = cgroupDir(mounts.unified, `/kts-psi-test-${process.pid}`);
    await mkdir(cg);
    privileged = await hasSysResource();
    trigger = privileged ? PSI_MEMORY_TRIGGER : PSI_MEMORY_TRIGGER_UNPRIVILEGED;
  });
  after(async () => {
    for (const d of [join(cg, 'pods'), cg]) if (existsSync(d)) await rmdir(d);
  });

  it('registers on a cgroup\'s memory.pressure, holds its fd while armed, and close releases it', async () => {
    const file = join(cg, 'memory.pressure');
    const { handle } = collectingHandle(realNative());
    try {
      handle.watchPressure!(1, file, trigger);
      assert.equal(handle.stats().psiTriggers, 1);
      assert.equal(await openFds(file), 1);
      // The window below 2 s: taken with CAP_SYS_RESOURCE, refused by the kernel without it.
      if (privileged) {
        handle.watchPressure!(2, file, PSI_MEMORY_TRIGGER);
        assert.equal(handle.stats().psiTriggers, 2);
      } else {
        assert.throws(() => handle.watchPressure!(2, file, PSI_MEMORY_TRIGGER), (err: NodeJS.ErrnoException) =>
          err.code === 'EINVAL' && err.message === `PSI trigger ${file}: write trigger "${PSI_MEMORY_TRIGGER}": Invalid argument`);
        assert.equal(handle.stats().psiTriggers, 1);
      }
      assert.throws(() => handle.watchPressure!(3, file, 'bogus'), (err: NodeJS.ErrnoException) =>
        err.code === 'EINVAL' && err.message.startsWith(`PSI trigger ${file}: write trigger "bogus"`));
      assert.equal(await openFds(file), privileged ? 2 : 1, 'a refused trigger\'s fd is closed at once');
      // Re-arming an id replaces its trigger; unwatching releases it.
      handle.watchPressure!(1, file, trigger);
      assert.equal(await openFds(file), privileged ? 2 : 1);
      if (privileged) assert.equal(handle.unwatchPressure!(2), true);
      assert.equal(await openFds(file), 1);
    } finally {
      handle.close();
    }
    assert.equal(await openFds(file), 0);
  });

  it('registers on the pods cgroup and /proc/pressure/memory when they are there', async (t) => {
    const mounts = await discoverCgroupMounts();
    const files = ['/proc/pressure/memory', join(cgroupDir(mounts.unified!, '/kubepods'), 'memory.pressure')].filter((f) => existsSync(f));
    assert.ok(files.includes('/proc/pressure/memory'), 'PSI is on (psi=1): /proc/pressure/memory exists');
    t.diagnostic(`registered on ${files.join(', ')} with "${trigger}"`);
    const { handle } = collectingHandle(realNative());
    try {
      files.forEach((f, i) => handle.watchPressure!(i + 1, f, trigger));
      assert.equal(handle.stats().psiTriggers, files.length);
      for (const f of files) assert.equal(await openFds(f), 1, f);
    } finally {
      handle.close();
    }
    for (const f of files) assert.equal(await openFds(f), 0, f);
  });

  it('refuses a cgroup file that is not a PSI file before writing to it', async () => {
    const procs = join(cg, 'cgroup.procs');
    const { handle } = collectingHandle(realNative());
    try {
      assert.throws(() => handle.watchPressure!(1, procs, trigger), (err: NodeJS.ErrnoException) =>
        err.code === 'EINVAL' && err.message.startsWith(`PSI trigger ${procs}: not a PSI file`));
      assert.equal(await readFile(procs, 'utf8'), '');
      assert.equal(await openFds(procs), 0);
    } finally {
      handle.close();
    }
  });

  it('the v2 notifier arms the trigger its privileges allow, and the trigger ends with its cgroup', async () => {
    setLogSink(() => undefined);
    const dir = join(cg, 'pods');
    await mkdir(dir);
    const r = createV2MemoryNotifier({ native: realNative(), podsDir: dir, clock: realClock, log: createLogger(), onCross: () => undefined });
    const n = r.notifier!;
    try {
      assert.ok(n, r.reason);
      assert.deepEqual(n.armed().psi, { file: join(dir, 'memory.pressure'), trigger });
      // Without a v2 memory controller there is no memory.events; with one it is watched too.
      const hasEvents = existsSync(join(dir, 'memory.events'));
      assert.equal(n.armed().events !== undefined, hasEvents);
      assert.equal(await openFds(join(dir, 'memory.pressure')), 1);
    } finally {
      n.close();
    }
    assert.equal(await openFds(join(dir, 'memory.pressure')), 0);

    // Removed under an armed trigger: kernfs polls EPOLLERR from then on, reported once.
    const { handle, waitFor } = collectingHandle(realNative());
    try {
      handle.watchPressure!(4, join(dir, 'memory.pressure'), trigger);
      await rmdir(dir);
      const lost = await waitFor((e) => e.kind === 'watch_lost', 'the trigger to end with its cgroup');
      assert.equal(lost.source, 'psi');
      assert.equal(lost.id, 4);
      assert.match(lost.message!, /PSI trigger on .*\/pods\/memory\.pressure ended/);
      assert.equal(handle.stats().psiTriggers, 0);
      assert.equal(handle.stats().running, true);
    } finally {
      handle.close();
    }
  });
});
