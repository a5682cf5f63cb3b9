import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Registry } from '../../src/metrics/registry.js';
import {
  KUBELET_CLOCK_PENDING_TIMERS,
  NODEJS_ACTIVE_HANDLES_TOTAL,
  NODEJS_ACTIVE_RESOURCES_TOTAL,
  NODEJS_ACTIVE_TIMERS_TOTAL,
  NODEJS_HEAP_SIZE_USED_BYTES,
  NODEJS_HEAP_USED_AFTER_MAJOR_GC_BYTES,
  PROCESS_RESIDENT_MEMORY_BYTES,
  registerProcessMetrics,
  sampleValue,
  type ProcessProbe,
} from '../../src/metrics/process-metrics.js';
import { realClock, realClockPendingTimers } from '../../src/util/clock.js';

/** A full GC without --expose-gc: the flag set at run time exposes gc() to a new context. */
function forceMajorGC(): void {
  v8.setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

function fakeProbe(over: Partial<ProcessProbe> = {}): ProcessProbe {
  return {
    rssBytes: () => 50_000_000,
    heapUsedBytes: () => 20_000_000,
    heapTotalBytes: () => 30_000_000,
    externalBytes: () => 1_000_000,
    activeResources: () => ['TCPServerWrap', 'Timeout', 'Timeout', 'FSReqCallback'],
    activeHandles: () => 3,
    activeRequests: () => 1,
    startTimeSeconds: () => 1_700_000_000,
    ...over,
  };
}

test('process families are read from the probe on every scrape', () => {
  const reg = new Registry();
  let rss = 50_000_000;
  registerProcessMetrics(reg, { probe: fakeProbe({ rssBytes: () => rss }), pendingTimers: () => 7, observeGC: false });
  let text = reg.metricsText();
  assert.equal(sampleValue(text, PROCESS_RESIDENT_MEMORY_BYTES), 50_000_000);
  assert.equal(sampleValue(text, NODEJS_HEAP_SIZE_USED_BYTES), 20_000_000);
  assert.equal(sampleValue(text, NODEJS_ACTIVE_HANDLES_TOTAL), 3);
  assert.equal(sampleValue(text, NODEJS_ACTIVE_RESOURCES_TOTAL), 4);
  assert.equal(sampleValue(text, NODEJS_ACTIVE_TIMERS_TOTAL), 2);
  assert.equal(sampleValue(text, KUBELET_CLOCK_PENDING_TIMERS), 7);
  assert.match(text, /^# TYPE process_resident_memory_bytes gauge$/m);
  assert.match(text, /^# HELP process_resident_memory_bytes Resident memory size in bytes\.$/m);
  rss = 60_000_000;
  text = reg.metricsText();
  assert.equal(sampleValue(text, PROCESS_RESIDENT_MEMORY_BYTES), 60_000_000);
});

test('the pending-timer family is left out without a source', () => {
  const reg = new Registry();
  registerProcessMetrics(reg, { probe: fakeProbe(), observeGC: false });
  assert.equal(sampleValue(reg.metricsText(), KUBELET_CLOCK_PENDING_TIMERS), undefined);
  assert.equal(sampleValue(reg.metricsText(), NODEJS_HEAP_USED_AFTER_MAJOR_GC_BYTES), undefined);
});

test('the real probe reports this process', () => {
  const reg = new Registry();
  registerProcessMetrics(reg);
  const text = reg.metricsText();
  assert.ok(sampleValue(text, PROCESS_RESIDENT_MEMORY_BYTES)! > 1_000_000);
  assert.ok(sampleValue(text, NODEJS_HEAP_SIZE_USED_BYTES)! > 1_000_000);
  assert.ok(Number.isInteger(sampleValue(text, NODEJS_ACTIVE_HANDLES_TOTAL)));
});

test('the heap left after a major GC is read when one happens', async () => {
  const reg = new Registry();
  let heap = 12_345_678;
  const m = registerProcessMetrics(reg, { probe: fakeProbe({ heapUsedBytes: () => heap }) });
  try {
    assert.ok(Number.isNaN(sampleValue(reg.metricsText(), NODEJS_HEAP_USED_AFTER_MAJOR_GC_BYTES)));
    forceMajorGC();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(sampleValue(reg.metricsText(), NODEJS_HEAP_USED_AFTER_MAJOR_GC_BYTES), 12_345_678);
    heap = 1;
    assert.equal(sampleValue(reg.metricsText(), NODEJS_HEAP_USED_AFTER_MAJOR_GC_BYTES), 12_345_678, 'kept until the next major GC');
  } finally {
    m.close();
  }
});

test('realClock counts its timers until they fire or are cancelled', async () => {
  const before = realClockPendingTimers();
  const a = realClock.setTimeout(() => undefined, 60_000);
  let fired = false;
  realClock.setTimeout(() => { fired = true; }, 1);
  assert.equal(realClockPendingTimers(), before + 2);
  a.cancel();
  a.cancel();
  assert.equal(realClockPendingTimers(), before + 1);
  await new Promise((r) => setTimeout(r, 20));
  assert.ok(fired);
  assert.equal(realClockPendingTimers(), before);
});
