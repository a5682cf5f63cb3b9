import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEF_BUCKETS,
  Registry,
  TEXT_CONTENT_TYPE,
  exponentialBuckets,
  formatFloat,
  linearBuckets,
} from '../../src/metrics/registry.js';
import { createPlegMetrics, PLEG_DISCARD_EVENTS, PLEG_RELIST_DURATION } from '../../src/pleg/metrics.js';

test('formatFloat matches Go strconv.FormatFloat(v, g, -1, 64)', () => {
  const cases: Array<[number, string]> = [
    [0, '0'],
    [1, '1'],
    [-1, '-1'],
    [0.005, '0.005'],
    [2.5, '2.5'],
    [100000, '100000'],
    [1e6, '1e+06'],
    [1234567, '1.234567e+06'],
    [1.763842538e9, '1.763842538e+09'],
    [0.0001, '0.0001'],
    [0.00001, '1e-05'],
    [123.456, '123.456'],
    [NaN, 'NaN'],
    [Infinity, '+Inf'],
    [-Infinity, '-Inf'],
  ];
  for (const [v, want] of cases) assert.equal(formatFloat(v), want, `formatFloat(${v})`);
});

test('bucket helpers follow client_golang', () => {
  assert.deepEqual(DEF_BUCKETS, [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]);
  assert.deepEqual(linearBuckets(1, 2, 3), [1, 3, 5]);
  assert.deepEqual(exponentialBuckets(1, 2, 4), [1, 2, 4, 8]);
  assert.throws(() => exponentialBuckets(0, 2, 3), RangeError);
});

test('counter and gauge render HELP with the stability level, TYPE and the sample', () => {
  const r = new Registry();
  const c = r.counter({ name: 'kubelet_pleg_discard_events', help: 'The number of discard events in PLEG.' });
  c.inc();
  c.inc(2);
  const g = r.gauge({ name: 'kubelet_pleg_last_seen_seconds', help: 'Timestamp in seconds when PLEG was last seen active.' });
  g.set(1763842538);
  assert.equal(
    r.metricsText(),
    '# HELP kubelet_pleg_discard_events [ALPHA] The number of discard events in PLEG.\n' +
      '# TYPE kubelet_pleg_discard_events counter\n' +
      'kubelet_pleg_discard_events 3\n' +
      '# HELP kubelet_pleg_last_seen_seconds [ALPHA] Timestamp in seconds when PLEG was last seen active.\n' +
      '# TYPE kubelet_pleg_last_seen_seconds gauge\n' +
      'kubelet_pleg_last_seen_seconds 1.763842538e+09\n',
  );
  assert.equal(TEXT_CONTENT_TYPE, 'text/plain; version=0.0.4; charset=utf-8');
});

test('STABLE metrics carry their level prefix, INTERNAL none; HELP escapes backslash and newline', () => {
  const r = new Registry();
  r.gauge({ name: 'g', help: 'a\\b\nc', stabilityLevel: 'STABLE' }).set(1);
  r.gauge({ name: 'h', help: 'internal', stabilityLevel: 'INTERNAL' }).set(2);
  assert.equal(r.metricsText(), '# HELP g [STABLE] a\\\\b\\nc\n# TYPE g gauge\ng 1\n# HELP h internal\n# TYPE h gauge\nh 2\n');
});

test('histogram buckets are cumulative with le last and +Inf, then _sum and _count', () => {
  const r = new Registry();
  const h = r.histogram({ name: 'x_seconds', help: 'h', buckets: [0.1, 1], labelNames: ['op'] });
  h.withLabelValues('list').observe(0.05);
  h.withLabelValues('list').observe(0.1); // le is inclusive
  h.withLabelValues('list').observe(3);
  assert.equal(
    r.metricsText(),
    '# HELP x_seconds [ALPHA] h\n# TYPE x_seconds histogram\n' +
      'x_seconds_bucket{op="list",le="0.1"} 2\n' +
      'x_seconds_bucket{op="list",le="1"} 2\n' +
      'x_seconds_bucket{op="list",le="+Inf"} 3\n' +
      'x_seconds_sum{op="list"} 3.15\n' +
      'x_seconds_count{op="list"} 3\n',
  );
});

test('label pairs are sorted by name, series by value, and values escaped', () => {
  const r = new Registry();
  const c = r.counter({ name: 'req_total', help: 'r', labelNames: ['path', 'code'] });
  c.withLabelValues('/b', '200').inc();
  c.withLabelValues('/a"q\\\n', '500').inc(2);
  c.with({ code: '200', path: '/a' }).inc();
  assert.equal(
    r.metricsText(),
    '# HELP req_total [ALPHA] r\n# TYPE req_total counter\n' +
      'req_total{code="200",path="/a"} 1\n' +
      'req_total{code="200",path="/b"} 1\n' +
      'req_total{code="500",path="/a\\"q\\\\\\n"} 2\n',
  );
});

test('a labelled family with no series is left out; families are sorted by name', () => {
  const r = new Registry();
  r.counter({ name: 'zz', help: 'z' });
  r.gauge({ name: 'aa', help: 'a', labelNames: ['state'] });
  assert.equal(r.metricsText(), '# HELP zz [ALPHA] z\n# TYPE zz counter\nzz 0\n');
});

test('gauge funcs are read at scrape time', () => {
  const r = new Registry();
  let v = 1;
  r.gaugeFunc({ name: 'f', help: 'f' }, () => v);
  v = 42;
  assert.match(r.metricsText(), /^f 42$/m);
});

test('misuse is refused: duplicate names, bad names, wrong label arity, negative counter increments', () => {
  const r = new Registry();
  r.counter({ name: 'a', help: 'a' });
  assert.throws(() => r.counter({ name: 'a', help: 'a' }), /already registered/);
  assert.throws(() => r.counter({ name: '1bad', help: 'b' }), /invalid metric name/);
  assert.throws(() => r.histogram({ name: 'h', help: 'h', labelNames: ['le'] }), /reserved/);
  const c = r.counter({ name: 'b', help: 'b', labelNames: ['x'] });
  assert.throws(() => c.withLabelValues(), /expected 1 label values/);
  assert.throws(() => c.inc(), /has labels/);
  assert.throws(() => c.withLabelValues('1').inc(-1), RangeError);
});

test('the PLEG families carry upstream names, help and default buckets', () => {
  const r = new Registry();
  const m = createPlegMetrics(r);
  m.discardEvents.inc();
  m.relistDuration.observe(0.02);
  const text = r.metricsText();
  assert.match(text, new RegExp(`^# HELP ${PLEG_RELIST_DURATION} \\[ALPHA\\] Duration in seconds for relisting pods in PLEG\\.$`, 'm'));
  assert.match(text, /^kubelet_pleg_relist_duration_seconds_bucket\{le="0\.025"\} 1$/m);
  assert.match(text, /^kubelet_pleg_relist_duration_seconds_bucket\{le="0\.01"\} 0$/m);
  assert.match(text, new RegExp(`^${PLEG_DISCARD_EVENTS} 1$`, 'm'));
  assert.match(text, /^# TYPE kubelet_pleg_last_seen_seconds gauge$/m);
  assert.match(text, /^# TYPE kubelet_pleg_relist_interval_seconds histogram$/m);
});
