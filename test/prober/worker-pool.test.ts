// The shared worker pool keeps no idle thread (each is a V8 isolate of ~11 MiB): threads start
// for work and exit once idle past the timeout; a thread comes back for the next task.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createWorkerPool, POOL_IDLE_TIMEOUT_MS } from '../../src/prober/runner.js';
import { FS_USAGE_WORKER_URL } from '../../src/stats/fs-usage.js';

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  for (const t0 = Date.now(); !cond(); ) {
    if (Date.now() - t0 > ms) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('createWorkerPool', () => {
  it('starts no thread before work, and lets idle threads exit', async () => {
    assert.ok(POOL_IDLE_TIMEOUT_MS <= 30_000);
    const pool = createWorkerPool(2, 100);
    try {
      assert.equal(pool.threads.length, 0);
      assert.deepEqual(await pool.run([], { filename: FS_USAGE_WORKER_URL.href }), []);
      assert.ok(pool.threads.length >= 1);
      await until(() => pool.threads.length === 0);
      // and one comes back for the next task
      assert.deepEqual(await pool.run([], { filename: FS_USAGE_WORKER_URL.href }), []);
    } finally {
      await pool.destroy();
    }
  });
});
