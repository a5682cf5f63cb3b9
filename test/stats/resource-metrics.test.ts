// /metrics/resource: parsed back with a strict Prometheus text-format (0.0.4) parser;
// upstream's names, HELP texts with stability, types, label order, values and timestamps.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import { statsCgroupRef } from '../../src/stats/provider.js';
import { formatFloat, renderResourceMetrics } from '../../src/stats/resource-metrics.js';
import { CpuRateTracker, buildCgroupSummary, type Summary, type SummaryPlan } from '../../src/stats/summary.js';
import { generateCgroupTree, removeCgroupTree } from '../fixtures/cgroup-tree.js';

interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  timestampMs?: number;
}

interface ParsedFamily {
  name: string;
  help?: string;
  type?: string;
  samples: ParsedSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const FLOAT = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)$/;

/**
 * A strict parser of the Prometheus text format: every line must be a HELP, TYPE or sample
 * line; HELP/TYPE once per family and before its samples; a family's samples contiguous and
 * named as the family (counters and gauges); no duplicate series; the text ends with \n.
 */
function parsePrometheusText(text: string): ParsedFamily[] {
  assert.ok(text.endsWith('\n'), 'text ends with a newline');
  const families: ParsedFamily[] = [];
  const byName = new Map<string, ParsedFamily>();
  const series = new Set<string>();
  let current: ParsedFamily | undefined;
  const family = (name: string): ParsedFamily => {
    if (current?.name === name) return current;
    assert.ok(!byName.has(name), `family ${name} appears in two places`);
    current = { name, samples: [] };
    byName.set(name, current);
    families.push(current);
    return current;
  };
  const lines = text.slice(0, -1).split('\n');
  for (const [n, line] of lines.entries()) {
    const where = `line ${n + 1}: ${JSON.stringify(line)}`;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) ([^ ]+) (.*)$/.exec(line);
      assert.ok(m, `${where}: a comment must be HELP or TYPE`);
      const [, kind, name, rest] = m;
      assert.match(name!, /^[a-zA-Z_:][a-zA-Z0-9_:]*$/, where);
      const f = family(name!);
      assert.equal(f.samples.length, 0, `${where}: ${kind} after samples`);
      if (kind === 'HELP') {
        assert.equal(f.help, undefined, `${where}: second HELP`);
        assert.doesNotMatch(rest!, /\\[^\\n]/, `${where}: bad escape in HELP`);
        f.help = rest!.replace(/\\(\\|n)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
      } else {
        assert.equal(f.type, undefined, `${where}: second TYPE`);
        assert.ok(['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest!), `${where}: type`);
        f.type = rest!;
      }
      continue;
    }
    const nameMatch = METRIC_NAME.exec(line);
    assert.ok(nameMatch, `${where}: metric name`);
    const name = nameMatch[0];
    let at = name.length;
    const labels: Record<string, string> = {};
    if (line[at] === '{') {
      at++;
      while (line[at] !== '}') {
        const ln = LABEL_NAME.exec(line.slice(at));
        assert.ok(ln, `${where}: label name at ${at}`);
        assert.ok(!(ln[0] in labels), `${where}: label ${ln[0]} twice`);
        at += ln[0].length;
        assert.equal(line.slice(at, at + 2), '="', `${where}: ="`);
        at += 2;
        let value = '';
        for (;;) {
          const c = line[at++];
          assert.ok(c !== undefined, `${where}: unterminated label value`);
          if (c === '"') break;
          if (c === '\\') {
            const e = line[at++];
            assert.ok(e === '\\' || e === '"' || e === 'n', `${where}: bad escape \\${e}`);
            value += e === 'n' ? '\n' : e;
          } else {
            value += c;
          }
        }
        labels[ln[0]] = value;
        if (line[at] === ',') at++;
        else assert.equal(line[at], '}', `${where}: , or }`);
      }
      at++;
    }
    assert.equal(line[at], ' ', `${where}: space before the value`);
    const parts = line.slice(at + 1).split(' ');
    assert.ok(parts.length === 1 || parts.length === 2, `${where}: value [timestamp]`);
    assert.match(parts[0]!, FLOAT, `${where}: value`);
    const value = parts[0]!.endsWith('Inf') ? (parts[0]!.startsWith('-') ? -Infinity : Infinity) : Number(parts[0]);
    let timestampMs: number | undefined;
    if (parts.length === 2) {
      assert.match(parts[1]!, /^-?\d+$/, `${where}: timestamp`);
      timestampMs = Number(parts[1]);
    }
    assert.ok(current && current.name === name, `${where}: sample outside its family (or not contiguous)`);
    assert.ok(current.type, `${where}: sample before TYPE`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    assert.ok(!series.has(key), `${where}: duplicate series`);
    series.add(key);
    current.samples.push({ name, labels, value, timestampMs });
  }
  return families;
}

const T_CPU = new Date('2026-01-01T00:10:00.123Z');
const T_MEM = new Date('2026-01-01T00:10:00.456Z');

function sampleSummary(): Summary {
  const c = (name: string, cpuNs: bigint | undefined, ws: bigint | undefined, start: Date | null) => ({
    name,
    startTime: start,
    ...(cpuNs === undefined ? {} : { cpu: { time: T_CPU, usageNanoCores: 1n, usageCoreNanoSeconds: cpuNs } }),
    ...(ws === undefined ? {} : { memory: { time: T_MEM, workingSetBytes: ws, usageBytes: ws } }),
  });
  return {
    node: {
      nodeName: 'node-a',
      startTime: new Date(0),
      cpu: { time: T_CPU, usageCoreNanoSeconds: 123_456_789_000_000n },
      memory: { time: T_MEM, workingSetBytes: 4_000_000_000n },
    },
    pods: [
      {
        podRef: { name: 'web-b', namespace: 'shop', uid: 'u2' },
        startTime: new Date(0),
        containers: [c('app', 2_500_000_000n, 1_048_576n, new Date('2026-01-01T00:00:01.5Z'))],
        cpu: { time: T_CPU, usageCoreNanoSeconds: 3_000_000_000n },
        memory: { time: T_MEM, workingSetBytes: 2_097_152n },
      },
      {
        podRef: { name: 'web-a', namespace: 'shop', uid: 'u1' },
        startTime: new Date(0),
        containers: [c('z-side', 500_000_000n, 10n, new Date('2026-01-01T00:00:02Z')), c('app', undefined, undefined, null)],
      },
    ],
  };
}

describe('renderResourceMetrics', () => {
  const families = parsePrometheusText(renderResourceMetrics(sampleSummary()));
  const fam = (name: string): ParsedFamily => {
    const f = families.find((x) => x.name === name);
    assert.ok(f, `${name} present`);
    return f;
  };

  it('writes upstream families, sorted by name, with HELP stability markers and types', () => {
    assert.deepEqual(families.map((f) => [f.name, f.type]), [
      ['container_cpu_usage_seconds_total', 'counter'],
      ['container_memory_working_set_bytes', 'gauge'],
      ['container_start_time_seconds', 'gauge'],
      ['node_cpu_usage_seconds_total', 'counter'],
      ['node_memory_working_set_bytes', 'gauge'],
      ['pod_cpu_usage_seconds_total', 'counter'],
      ['pod_memory_working_set_bytes', 'gauge'],
      ['resource_scrape_error', 'gauge'],
      ['scrape_error', 'gauge'],
    ]);
    assert.equal(fam('node_cpu_usage_seconds_total').help, '[STABLE] Cumulative cpu time consumed by the node in core-seconds');
    assert.equal(fam('container_memory_working_set_bytes').help, '[STABLE] Current working set of the container in bytes');
    assert.equal(fam('container_start_time_seconds').help, '[STABLE] Start time of the container since unix epoch in seconds');
    assert.equal(fam('pod_memory_working_set_bytes').help, '[STABLE] Current working set of the pod in bytes');
    assert.equal(fam('scrape_error').help, '[ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise');
    assert.equal(fam('resource_scrape_error').help, '[STABLE] 1 if there was an error while getting container metrics, 0 otherwise');
  });

  it('gives CPU in core-seconds and memory in bytes, stamped with the stats time in ms', () => {
    const [node] = fam('node_cpu_usage_seconds_total').samples;
    assert.deepEqual(node, { name: 'node_cpu_usage_seconds_total', labels: {}, value: 123456.789, timestampMs: T_CPU.getTime() });
    assert.deepEqual(fam('node_memory_working_set_bytes').samples[0], { name: 'node_memory_working_set_bytes', labels: {}, value: 4e9, timestampMs: T_MEM.getTime() });
    assert.deepEqual(fam('pod_cpu_usage_seconds_total').samples, [
      { name: 'pod_cpu_usage_seconds_total', labels: { namespace: 'shop', pod: 'web-b' }, value: 3, timestampMs: T_CPU.getTime() },
    ]);
    assert.equal(fam('scrape_error').samples[0]!.value, 0);
    assert.equal(fam('scrape_error').samples[0]!.timestampMs, undefined);
  });

  it('labels containers by container, namespace, pod in sorted order, skipping what was not measured', () => {
    const cpu = fam('container_cpu_usage_seconds_total').samples;
    assert.deepEqual(cpu.map((s) => [s.labels.container, s.labels.pod, s.value]), [
      ['app', 'web-b', 2.5],
      ['z-side', 'web-a', 0.5],
    ]);
    assert.deepEqual(Object.keys(cpu[0]!.labels), ['container', 'namespace', 'pod']);
    const start = fam('container_start_time_seconds').samples;
    assert.deepEqual(start.map((s) => [s.labels.container, s.value, s.timestampMs]), [
      ['app', Date.parse('2026-01-01T00:00:01.5Z') / 1000, undefined],
      ['z-side', Date.parse('2026-01-01T00:00:02Z') / 1000, undefined],
    ]);
  });

  it('reports only the scrape errors, set to 1, when stats could not be read', () => {
    const f = parsePrometheusText(renderResourceMetrics(undefined));
    assert.deepEqual(f.map((x) => [x.name, x.samples.map((s) => s.value)]), [['resource_scrape_error', [1]], ['scrape_error', [1]]]);
  });

  it('escapes label values so they parse back', () => {
    const s = sampleSummary();
    s.pods[0]!.podRef.name = 'we"ird\\pod\nname';
    const f = parsePrometheusText(renderResourceMetrics(s));
    const pods = f.find((x) => x.name === 'pod_cpu_usage_seconds_total')!.samples.map((x) => x.labels.pod);
    assert.deepEqual(pods, ['we"ird\\pod\nname']);
  });

  it('parses for a Summary built from a synthetic cgroup tree', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'kts-metrics-'));
    try {
      const tree = generateCgroupTree({ root, version: 1, containers: 10, seed: 3 });
      const refs = tree.cgroups.map((c) => statsCgroupRef(tree.mounts, c.cgroupPath));
      const plan: SummaryPlan = {
        nodeName: 'n', nodeStartTime: null, rootRow: -1, podsRow: -1,
        pods: tree.cgroups.filter((_, i) => i % 2 === 0).map((c, p) => ({
          podRef: { name: `p${p}`, namespace: 'default', uid: `u${p}` },
          startTime: null,
          row: -1,
          containers: [0, 1].map((k) => ({ name: `c${k}`, id: `id${2 * p + k}`, startTime: new Date(1_700_000_000_000 + k), row: 2 * p + k })),
        })),
      };
      const batch = await new FsCgroupReader().readCgroups(refs);
      const summary = buildCgroupSummary(plan, batch, {}, new Date(1_767_225_600_000), new CpuRateTracker());
      const f = parsePrometheusText(renderResourceMetrics(summary));
      const cpu = f.find((x) => x.name === 'container_cpu_usage_seconds_total')!.samples;
      assert.equal(cpu.length, 10);
      const ws = f.find((x) => x.name === 'container_memory_working_set_bytes')!.samples;
      const c0 = summary.pods[0]!.containers[0]!;
      assert.equal(ws.find((s) => s.labels.pod === 'p0' && s.labels.container === 'c0')!.value, Number(c0.memory!.workingSetBytes));
      assert.ok(cpu.every((s) => s.timestampMs === 1_767_225_600_000));
      assert.equal(f.some((x) => x.name.startsWith('node_') || x.name.startsWith('pod_')), false, 'no node or pod figures were read');
    } finally {
      removeCgroupTree(root);
    }
  });
});

describe('formatFloat', () => {
  it("formats as Go's strconv 'g' with the shortest precision", () => {
    const cases: Array<[number, string]> = [
      [0, '0'], [1, '1'], [-1, '-1'], [0.5, '0.5'], [123456.789, '123456.789'], [999999, '999999'],
      [1e6, '1e+06'], [4e9, '4e+09'], [123456789, '1.23456789e+08'], [1767225601.5, '1.7672256015e+09'],
      [0.0001, '0.0001'], [0.00001, '1e-05'], [1.5e-7, '1.5e-07'], [1e21, '1e+21'], [1.5e300, '1.5e+300'],
      [Infinity, '+Inf'], [-Infinity, '-Inf'], [NaN, 'NaN'],
    ];
    for (const [v, want] of cases) assert.equal(formatFloat(v), want, String(v));
  });
});
