// The real dependencies' config wiring, on generated cgroup trees (no root).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultKubeletConfig } from '../../src/config/index.js';
import { podCgroupManager } from '../../src/kubelet/dependencies.js';
import { generateCgroupHierarchies } from '../fixtures/cgroup-tree.js';
import { loggerDouble, mkPod } from './doubles.js';

test('podPidsLimit from the config becomes the pod cgroup pids.max; the default (-1) leaves it unset', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-deps-'));
  try {
    const h = generateCgroupHierarchies(join(dir, 'v2'), 'v2');
    const config = defaultKubeletConfig();
    assert.equal(config.podPidsLimit, -1);
    const name = await podCgroupManager(config, h.mounts, loggerDouble()).ensureExists(mkPod('u-1'));
    assert.equal(existsSync(join(h.root, 'unified', name, 'pids.max')), false);

    config.podPidsLimit = 321;
    const limited = await podCgroupManager(config, h.mounts, loggerDouble()).ensureExists(mkPod('u-2'));
    assert.equal(readFileSync(join(h.root, 'unified', limited, 'pids.max'), 'utf8'), '321');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
