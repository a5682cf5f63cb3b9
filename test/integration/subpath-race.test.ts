// The subPath race (CVE-2017-1002101 / CVE-2021-25741 class) at the kubelet's level, without a
// runtime: while a "container" flips a name in the volume between a directory and a symlink to a
// directory outside it, the host path that podContainerMounts hands the runtime is opened as the
// runtime would open it a moment later. What the runtime would mount must never be the outside
// directory. Needs root: the subPath is bind-mounted under the pod directory.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { after, before, describe, it } from 'node:test';
import type { Container, Pod } from '../../src/api/types.js';
import { FakeClock } from '../../src/util/clock.js';
import { podContainerMounts } from '../../src/volumemanager/pod-mounts.js';
import { VolumeManager } from '../../src/volumemanager/volume-manager.js';
import { loggerDouble } from '../kubelet/doubles.js';

const UID = 'race-pod-uid';

describe('subPath swapped for a symlink between the check and the runtime\'s mount', () => {
  let base: string;
  let rootDir: string;
  let podDirectory: string;
  let vol: string;
  let outside: string;
  let vm: VolumeManager;
  const marker = `kts-subpath-marker-${process.pid}`;

  before(async () => {
    base = await mkdtemp(join(tmpdir(), 'kts-subpath-race-'));
    rootDir = join(base, 'kubelet');
    podDirectory = join(rootDir, 'pods', UID);
    vol = join(podDirectory, 'volumes', 'kubernetes.io~empty-dir', 'shared');
    outside = join(base, 'host-only');
    await mkdir(vol, { recursive: true });
    await mkdir(outside);
    await writeFile(join(outside, marker), 'only on the host');
    vm = new VolumeManager({ rootDir, clock: new FakeClock(), log: loggerDouble(), nodeName: 'n1', hostIPs: () => [] });
  });

  after(async () => {
    await vm.unmountPod(UID).catch(() => undefined);
    const left = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(base));
    // nothing of the test may stay mounted; rm must never descend into a mount
    if (left.length === 0) await rm(base, { recursive: true, force: true });
    assert.deepEqual(left, [], 'mounts left under the test directory');
  });

  it('the host path given to the runtime never shows what only the host has, over 1500 starts', async () => {
    const stop = new Int32Array(new SharedArrayBuffer(8));
    const flipper = new Worker(`
      const { mkdirSync, rmdirSync, symlinkSync, unlinkSync } = require('node:fs');
      const { workerData: { x, target, stop } } = require('node:worker_threads');
      while (Atomics.load(stop, 0) === 0) {
        // each step on its own: the kubelet may have made x a directory itself
        for (const step of [() => rmdirSync(x), () => symlinkSync(target, x), () => unlinkSync(x), () => mkdirSync(x)]) {
          try { step(); } catch {}
        }
        Atomics.add(stop, 1, 1);
      }
    `, { eval: true, workerData: { x: join(vol, 'x'), target: outside, stop } });
    const pod = { metadata: { name: 'race', namespace: 'default', uid: UID }, spec: { containers: [] } } as unknown as Pod;
    const container: Container = { name: 'sibling', image: 'busybox', volumeMounts: [{ name: 'shared', mountPath: '/mnt/x', subPath: 'x' }] };
    const volumes = new Map([['shared', { plugin: 'kubernetes.io~empty-dir', hostPath: vol, readOnly: false }]]);
    // (the log option is the current code's; the refusals it logs are counted below)
    const input = { pod, container, volumes, envs: [], podIPs: [], podDir: podDirectory, clusterDomain: '', log: loggerDouble() };
    let starts = 0;
    let refused = 0;
    const leaks: string[] = [];
    try {
      for (let i = 0; i < 1500 || (Atomics.load(stop, 1) < 300 && i < 50_000); i++) {
        let hostPath: string;
        try {
          [{ host_path: hostPath }] = await podContainerMounts(input);
        } catch {
          refused++;
          continue;
        }
        starts++;
        // the runtime resolves the host path when it mounts it, at StartContainer, some time
        // after (CreateContainer in between): look through it as it could at any moment of that
        for (let look = 0; look < 20; look++) {
          await new Promise((r) => setImmediate(r));
          if (existsSync(join(hostPath, marker))) {
            leaks.push(hostPath);
            break;
          }
        }
      }
    } finally {
      Atomics.store(stop, 0, 1);
      await flipper.terminate();
    }
    process.stdout.write(`# ${starts} mounts prepared, ${refused} refused, ${Atomics.load(stop, 1)} flips, ${leaks.length} showed the host's file\n`);
    assert.deepEqual(leaks.slice(0, 3), [], `${leaks.length} of ${starts} prepared mounts showed the host's file`);
    assert.ok(starts > 0, 'some mounts were prepared');
  });
});
