// The native memcg usage threshold (cgroup v1 eventfd on memory.usage_in_bytes) on a real
// memory cgroup made by the test: crossing it reaches the notifier's callback with its key;
// below it nothing comes; re-arming replaces the watch. Needs root and the v1 memory controller.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { discoverCgroupMounts } from '../../src/cgroups/index.js';
import { createNativeMemcgNotifier } from '../../src/eviction/memcg-notifier.js';
import { loadOomNative } from '../../src/oom/oom-watcher.js';
import { createLogger, setLogSink } from '../../src/util/log.js';
import { createMemoryCgroup, startAllocator, waitUntil } from '../fixtures/oom-cgroup.js';

describe('native memcg threshold notification (cgroup v1)', () => {
  it('fires when usage crosses the armed threshold, with the key it was armed under', async () => {
    setLogSink(() => undefined);
    const mounts = await discoverCgroupMounts();
    assert.ok(mounts.v1.memory, 'this test needs the v1 memory hierarchy');
    const { native, error } = loadOomNative();
    assert.ok(native, error);
    const cg = await createMemoryCgroup(64 << 20, 'kts-memcg-threshold');
    const crossed: string[] = [];
    const r = createNativeMemcgNotifier({ native: native!, mounts, log: createLogger(), onCross: (k) => crossed.push(k), memoryDir: () => cg.dir });
    assert.ok(r.notifier, r.reason);
    const n = r.notifier!;
    try {
      n.setThreshold('memory.available/hard', '', 1n << 40n);
      // Re-armed lower: the first registration is replaced, one eventfd stays.
      n.setThreshold('memory.available/hard', '', 24n << 20n);
      assert.equal(n.armed().size, 1);
      const alloc = await startAllocator(cg.dir);
      await waitUntil(() => crossed.length > 0, 20_000, 'the threshold notification');
      assert.equal(crossed[0], 'memory.available/hard');
      assert.ok(n.lastCross && n.lastCross.deliveredTimeNs >= n.lastCross.observedTimeNs);
      await alloc.exited;
    } finally {
      n.close();
      await cg.remove();
    }
  });

  it('refuses a directory that is not a memory cgroup, naming it', async () => {
    const mounts = await discoverCgroupMounts();
    const { native } = loadOomNative();
    const n = createNativeMemcgNotifier({ native: native!, mounts, log: createLogger(), onCross: () => undefined, memoryDir: () => '/nonexistent-cgroup' }).notifier!;
    try {
      assert.throws(() => n.setThreshold('k', '/x', 1n << 20n), /memcg threshold on \/x: .*nonexistent-cgroup.*memory.usage_in_bytes/);
    } finally {
      n.close();
    }
  });
});
