import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from '../../src/metrics/registry.js';
import {
  KUBELET_CLOCK_PENDING_TIMERS,
  NODEJS_ACTIVE_HANDLES_TOTAL,
  NODEJS_ACTIVE_RESOURCES_TOTAL,
  NODEJS_ACTIVE_TIMERS_TOTAL,
  NODEJS_HEAP_SIZE_USED_BYTES,
  PROCESS_RESIDENT_MEMORY_BYTES,
  registerProcessMetrics,
  sampleValue,
  type ProcessProbe,
} from '../../src/metrics/process-metrics.js';
import { realClock, realClockPendingTimers } from '../../src/util/clock.js';

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
  registerProcessMetrics(reg, { probe: fakeProbe({ rssBytes: () => rss }), pendingTimers: () => 7 });
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
  registerProcessMetrics(reg, { probe: fakeProbe() });
  assert.equal(sampleValue(reg.metricsText(), KUBELET_CLOCK_PENDING_TIMERS), undefined);
});

test('the real probe reports this process', () => {
  const reg = new Registry();
  registerProcessMetrics(reg);
  const text = reg.metricsText();
  assert.ok(sampleValue(text, PROCESS_RESIDENT_MEMORY_BYTES)! > 1_000_000);
  assert.ok(sampleValue(text, NODEJS_HEAP_SIZE_USED_BYTES)! > 1_000_000);
  assert.ok(Number.isInteger(sampleValue(text, NODEJS_ACTIVE_HANDLES_TOTAL)));
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
