// Property-based tests: thousands of generated KubeletConfiguration files (YAML and JSON:
// wrong types, unknown fields, huge numbers, negative durations, odd unicode, deep nesting,
// truncated documents) and flag vectors. Loading either succeeds or throws ConfigError
// naming the field, the flag or the file; nothing else is ever thrown, and nothing hangs
// (each property runs under the test's timeout). The counts are reported as diagnostics.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';
import { stringify as yamlStringify } from 'yaml';

import {
  ConfigError,
  KNOWN_FEATURE_GATES,
  KUBELET_TS_FIELDS,
  loadConfig,
  type ReadFileFn,
  UPSTREAM_V1BETA1_FIELDS,
  validateKubeletConfig,
} from '../../src/config/index.js';

const FILE = '/etc/kubelet/fuzz-config.yaml';
// KTS_FUZZ_SCALE=10 runs ten times as many inputs (for a longer hunt than the unit suite's).
const SCALE = Math.max(1, Number(process.env.KTS_FUZZ_SCALE) || 1);
const FILE_RUNS = 2500 * SCALE;
const RAW_TEXT_RUNS = 1500 * SCALE;
const FLAG_RUNS = 2500 * SCALE;

function readerOf(files: Record<string, string>): ReadFileFn {
  return async (path) => {
    const text = files[path];
    if (text === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
    return text;
  };
}

/** The property: success, or a ConfigError that names what is wrong. */
async function loadsOrNamesTheProblem(argv: string[], files: Record<string, string>): Promise<'loaded' | 'rejected'> {
  let loaded;
  try {
    loaded = await loadConfig(argv, readerOf(files));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw new Error(`not a ConfigError: ${String(err)}`, { cause: err });
    assert.equal(err.code, 'KubeletConfigInvalid');
    assert.ok(err.issues.length > 0);
    for (const issue of err.issues) {
      if (issue.field.startsWith('-')) assert.ok(err.message.includes(`flag ${issue.field}`), err.message);
      else if (issue.field !== '') assert.ok(err.message.includes(`field ${issue.field}`), err.message);
    }
    // Without a field it is about the file, or about the command line as a whole.
    if (err.field === '') assert.ok(err.file !== undefined || err.message.includes('unknown command'), err.message);
    if (err.file !== undefined) assert.ok(err.message.includes(err.file), err.message);
    return 'rejected';
  }
  // What loaded is valid, and every warning is a line of text.
  validateKubeletConfig(loaded.config);
  for (const w of loaded.warnings) assert.equal(typeof w, 'string');
  return 'loaded';
}

// ---------------------------------------------------------------------------------
// Values

const oddText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', ' ', '\u0000', '\ud800', '\u202e', 'µs', '\ufeff', '../..', '%00', 'null', '~', 'yes', 'on', '0x10', '1_000'),
);

const durationText = fc.oneof(
  fc.tuple(
    fc.constantFrom('', '-', '+'),
    fc.oneof(fc.nat(), fc.bigInt({ min: 0n, max: 10n ** 40n }), fc.double({ min: 0, max: 1e12, noNaN: true })),
    fc.constantFrom('ns', 'us', 'µs', 'μs', 'ms', 's', 'm', 'h', '', 'd', 'sec'),
  ).map(([sign, n, unit]) => `${sign}${String(n)}${unit}`),
  fc.constantFrom('0', '0s', '1ns', '999us', '1ms', '1s', '1h30m', '2562047h47m16.854775807s', '2562047h47m16.854775808s',
    '9223372036854775807ns', '-9223372036854775808ns', '1e3s', '.s', '1..5s', '1.5.5s', '596h31m23.648s', `${'9'.repeat(5000)}s`, `0.${'1'.repeat(5000)}s`),
);

const quantityText = fc.oneof(
  fc.tuple(fc.constantFrom('', '-', '+'), fc.oneof(fc.nat(), fc.double({ min: 0, max: 1e30, noNaN: true })), fc.constantFrom('', 'm', 'k', 'Mi', 'Gi', 'Ei', 'E', 'e3', 'e300', 'e-300', 'e99999999', '%', 'i'))
    .map(([s, n, u]) => `${s}${String(n)}${u}`),
  fc.constantFrom('100Mi', '10%', '0%', '100%', '1e300', '9223372036854775808', '1E', '18446744073709551616Ei', '.5', '-.5Gi'),
);

const hugeNumber = fc.constantFrom(1e300, -1e300, 2 ** 63, -(2 ** 63), 2 ** 31, 2 ** 53 + 1, Number.MAX_VALUE, Number.MIN_VALUE, -0, 0.5, Infinity, -Infinity, NaN);

/** Nested arrays/objects `depth` levels deep. */
const deepValue = fc.tuple(fc.integer({ min: 1, max: 80 }), fc.boolean()).map(([depth, arrays]) => {
  let v: unknown = 'bottom';
  for (let i = 0; i < depth; i++) v = arrays ? [v] : { k: v };
  return v;
});

const scalar = fc.oneof(oddText, durationText, quantityText, hugeNumber, fc.integer(), fc.double(), fc.boolean(), fc.constant(null));
const value: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: scalar },
  { weight: 2, arbitrary: fc.array(scalar, { maxLength: 5 }) },
  { weight: 2, arbitrary: fc.dictionary(fc.oneof(oddText, fc.constantFrom(...KNOWN_FEATURE_GATES, 'memory.available', 'cpu', 'pid', '__proto__')), scalar, { maxKeys: 5 }) },
  { weight: 1, arbitrary: deepValue },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
);

const fieldName = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...UPSTREAM_V1BETA1_FIELDS, ...KUBELET_TS_FIELDS) },
  { weight: 1, arbitrary: oddText },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', 'apiVersion', 'kind', 'toString') },
);

/** A config object: apiVersion/kind usually right, then fields with values of any type. */
const configObject = fc.tuple(
  fc.oneof({ weight: 9, arbitrary: fc.constant('kubelet.config.k8s.io/v1beta1') }, { weight: 1, arbitrary: scalar }),
  fc.oneof({ weight: 9, arbitrary: fc.constant('KubeletConfiguration') }, { weight: 1, arbitrary: scalar }),
  fc.array(fc.tuple(fieldName, value), { maxLength: 12 }),
  fc.record({
    authentication: fc.option(fc.record({ anonymous: value, webhook: fc.record({ enabled: value, cacheTTL: value }), x509: value }), { nil: undefined }),
    featureGates: fc.option(fc.dictionary(fc.oneof(fc.constantFrom(...KNOWN_FEATURE_GATES), oddText), fc.oneof(fc.boolean(), scalar), { maxKeys: 4 }), { nil: undefined }),
  }),
).map(([apiVersion, kind, fields, nested]) => {
  const o: Record<string, unknown> = { apiVersion, kind };
  for (const [k, v] of fields) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  if (nested.authentication !== undefined) o.authentication = nested.authentication;
  if (nested.featureGates !== undefined) o.featureGates = nested.featureGates;
  return o;
});

// Well-typed documents: each field holds a value of its type (plausible, edge or extreme),
// so loading reaches defaulting, validation and the not-implemented warnings.
const plausibleDuration = fc.oneof(
  fc.tuple(fc.integer({ min: -5, max: 100_000 }), fc.constantFrom('ms', 's', 'm', 'h')).map(([n, u]) => `${n}${u}`),
  fc.constantFrom('0s', '1s', '20s', '1m0s', '2562047h', '-1s', '999ms', '24h'),
);
const plausibleInt = fc.oneof(fc.integer({ min: -2, max: 70_000 }), fc.constantFrom(0, 1, 110, 65535, 2 ** 31 - 1, -(2 ** 31)));
const plausibleQuantity = fc.oneof(fc.constantFrom('100Mi', '1Gi', '500m', '0', '10%', '0%', '100%', '-1Gi', '1e3', '5%'), quantityText);
const signal = fc.constantFrom('memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'pid.available', 'memory.free');
const typedConfig = fc.record(
  {
    syncFrequency: plausibleDuration, fileCheckFrequency: plausibleDuration, httpCheckFrequency: plausibleDuration,
    runtimeRequestTimeout: plausibleDuration, nodeStatusUpdateFrequency: plausibleDuration, nodeStatusReportFrequency: plausibleDuration,
    imageMinimumGCAge: plausibleDuration, volumeStatsAggPeriod: plausibleDuration, streamingConnectionIdleTimeout: plausibleDuration,
    evictionPressureTransitionPeriod: plausibleDuration, shutdownGracePeriod: plausibleDuration, shutdownGracePeriodCriticalPods: plausibleDuration,
    port: plausibleInt, readOnlyPort: plausibleInt, healthzPort: plausibleInt, eventRecordQPS: plausibleInt, eventBurst: plausibleInt,
    nodeLeaseDurationSeconds: plausibleInt, imageGCHighThresholdPercent: plausibleInt, imageGCLowThresholdPercent: plausibleInt,
    maxPods: plausibleInt, podPidsLimit: plausibleInt, maxParallelImagePulls: plausibleInt, evictionMaxPodGracePeriod: plausibleInt,
    containerLogMaxFiles: plausibleInt,
    enableServer: fc.boolean(), enableDebuggingHandlers: fc.boolean(), cgroupsPerQOS: fc.boolean(), serializeImagePulls: fc.boolean(),
    failSwapOn: fc.boolean(), registerNode: fc.boolean(), protectKernelDefaults: fc.boolean(), kernelMemcgNotification: fc.boolean(),
    staticPodPath: fc.oneof(fc.constantFrom('/etc/kubernetes/manifests', 'manifests', ''), oddText),
    staticPodURL: fc.oneof(fc.constantFrom('http://10.0.0.1/pods', 'https://x/p.yaml', 'ftp://x', ''), oddText),
    address: fc.constantFrom('0.0.0.0', '::', '127.0.0.1', 'localhost', ''),
    healthzBindAddress: fc.constantFrom('127.0.0.1', '::1', 'x'),
    clusterDomain: fc.constantFrom('cluster.local', ''),
    clusterDNS: fc.array(fc.constantFrom('10.96.0.10', 'fd00::a', 'dns'), { maxLength: 3 }),
    cgroupRoot: fc.constantFrom('/', '', '/kubelet'),
    cgroupDriver: fc.constantFrom('cgroupfs', 'systemd', 'cgroupfs', 'none'),
    containerRuntimeEndpoint: fc.constantFrom('unix:///run/containerd/containerd.sock', ''),
    podLogsDir: fc.constantFrom('/var/log/pods', 'logs', '/var/log//pods', '/var/log/pöds'),
    containerLogMaxSize: plausibleQuantity,
    statsBackend: fc.constantFrom('native', 'fs', 'cri', 'proc'),
    oomWatcher: fc.constantFrom('auto', 'ebpf', 'cgroup', 'kmsg', 'off', 'dmesg'),
    enforceNodeAllocatable: fc.array(fc.constantFrom('pods', 'none', 'system-reserved', 'kube-reserved-compressible', 'x'), { maxLength: 3 }),
    systemReserved: fc.dictionary(fc.constantFrom('cpu', 'memory', 'pid', 'gpu'), plausibleQuantity, { maxKeys: 3 }),
    kubeReserved: fc.dictionary(fc.constantFrom('cpu', 'memory', 'ephemeral-storage'), plausibleQuantity, { maxKeys: 3 }),
    evictionHard: fc.dictionary(signal, plausibleQuantity, { maxKeys: 3 }),
    evictionSoft: fc.dictionary(signal, plausibleQuantity, { maxKeys: 2 }),
    evictionSoftGracePeriod: fc.dictionary(signal, plausibleDuration, { maxKeys: 2 }),
    featureGates: fc.dictionary(fc.constantFrom(...KNOWN_FEATURE_GATES, 'Foo'), fc.boolean(), { maxKeys: 3 }),
    authentication: fc.record({ webhook: fc.record({ enabled: fc.boolean(), cacheTTL: plausibleDuration }, { requiredKeys: [] }) }, { requiredKeys: [] }),
    authorization: fc.record({ mode: fc.constantFrom('Webhook', 'AlwaysAllow', 'RBAC') }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
).chain((fields) => fc.constant({ apiVersion: 'kubelet.config.k8s.io/v1beta1', kind: 'KubeletConfiguration', ...fields }))
  // A few fields, as real files have: keep each with probability 1/10.
  .chain((o) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: Object.keys(o).length, maxLength: Object.keys(o).length }).map((keep) => {
    const out: Record<string, unknown> = {};
    Object.entries(o).forEach(([k, v], i) => { if (k === 'apiVersion' || k === 'kind' || keep[i] === 0) out[k] = v; });
    return out;
  }));

function serialize(o: Record<string, unknown>, asJson: boolean): string {
  if (asJson) return JSON.stringify(o) ?? '';
  try {
    return yamlStringify(o);
  } catch {
    return JSON.stringify(o) ?? '';
  }
}

/** A document: serialized as JSON or YAML, then maybe truncated or spliced with odd text. */
const configText = fc.tuple(fc.oneof(configObject, typedConfig), fc.boolean(), fc.nat(), fc.constantFrom('whole', 'whole', 'whole', 'truncate', 'splice'), oddText)
  .map(([o, asJson, at, how, junk]) => {
    const text = serialize(o, asJson);
    const cut = text.length === 0 ? 0 : at % text.length;
    if (how === 'truncate') return text.slice(0, cut);
    if (how === 'splice') return text.slice(0, cut) + junk + text.slice(cut);
    return text;
  });

/** Text that is only loosely a document: YAML features, bombs, garbage. */
const rawText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.constantFrom(
    'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n---\nkind: Other\n',
    'a: &a [*a, *a]\n',
    'a: &a [1,2]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c]\n',
    '!!binary aGVsbG8=\n',
    'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: !!float 1e300\n',
    'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: .inf\nsyncFrequency: .nan\n',
    'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n<<: {maxPods: 5}\n',
    'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n? [a, b]\n: c\n',
    '{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":1e999}',
    `${'['.repeat(20_000)}${']'.repeat(20_000)}`,
    `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`,
    `${'- '.repeat(5000)}x\n`,
    `${Array.from({ length: 600 }, (_, i) => `${' '.repeat(i)}a:`).join('\n')} 1\n`,
    `apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: "${'['.repeat(5000)}"\n`,
    `apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: ${'x'.repeat(2 * 1024 * 1024)}\n`,
  ),
);

// ---------------------------------------------------------------------------------
// Flags

const FLAG_NAMES = [
  'config', 'kubeconfig', 'root-dir', 'hostname-override', 'node-ip', 'v', 'help', 'container-runtime-endpoint',
  'image-service-endpoint', 'pod-manifest-path', 'manifest-url', 'read-only-port', 'healthz-port', 'healthz-bind-address',
  'cgroup-root', 'cgroup-driver', 'max-pods', 'sync-frequency', 'file-check-frequency', 'http-check-frequency',
  'runtime-request-timeout', 'fail-swap-on', 'feature-gates', 'stats-backend', 'oom-watcher',
];

const flagValue = fc.oneof(
  oddText, durationText, quantityText, fc.integer().map(String), fc.constantFrom('true', 'false', 'T', '0', '1', 'maybe', '10.0.0.1', '::1', '10.0.0.1,fd00::1,10.0.0.2'),
  fc.array(fc.tuple(fc.constantFrom(...KNOWN_FEATURE_GATES, 'Foo', 'evictedpleg'), fc.constantFrom('true', 'false', 'yes', '')), { maxLength: 3 })
    .map((gates) => gates.map(([k, v]) => `${k}=${v}`).join(',')),
);

const argument = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(fc.constantFrom(...FLAG_NAMES), flagValue).map(([n, v]) => [`--${n}=${v}`]) },
  { weight: 4, arbitrary: fc.tuple(fc.constantFrom(...FLAG_NAMES), flagValue).map(([n, v]) => [`--${n}`, v]) },
  { weight: 2, arbitrary: fc.constantFrom(...FLAG_NAMES).map((n) => [`--${n}`]) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('-v', '-h', '-x', '-', '--', '---', '--=', '-v=', '-vv'), flagValue).map(([f, v]) => [f + v]) },
  { weight: 1, arbitrary: oddText.map((s) => [s]) },
  { weight: 1, arbitrary: oddText.map((s) => [`--${s}`]) },
);

const argv = fc.array(argument, { maxLength: 8 }).map((parts) => parts.flat());

describe('config fuzz', () => {
  it(`loads ${FILE_RUNS} generated config files or names the field or file`, { timeout: 300_000 }, async (t) => {
    let ran = 0;
    let loaded = 0;
    await fc.assert(
      fc.asyncProperty(configText, fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(argument, { maxLength: 2 }) }), async (text, extra) => {
        ran++;
        if ((await loadsOrNamesTheProblem(['--config', FILE, ...extra.flat().filter((a) => !a.startsWith('--config'))], { [FILE]: text })) === 'loaded') loaded++;
      }),
      { numRuns: FILE_RUNS },
    );
    t.diagnostic(`fuzz: ${ran} generated KubeletConfiguration files (YAML and JSON, some truncated or spliced): ${loaded} loaded, ${ran - loaded} rejected naming the field or file`);
  });

  it(`loads ${RAW_TEXT_RUNS} loosely structured or hostile documents or names the file`, { timeout: 300_000 }, async (t) => {
    let ran = 0;
    await fc.assert(
      fc.asyncProperty(rawText, async (text) => {
        ran++;
        await loadsOrNamesTheProblem(['--config', FILE], { [FILE]: text });
      }),
      { numRuns: RAW_TEXT_RUNS },
    );
    t.diagnostic(`fuzz: ${ran} raw documents (garbage, YAML bombs, deep nesting, oversized)`);
  });

  it(`parses ${FLAG_RUNS} generated flag vectors or names the flag`, { timeout: 300_000 }, async (t) => {
    let ran = 0;
    let loaded = 0;
    await fc.assert(
      fc.asyncProperty(argv, async (args) => {
        ran++;
        if ((await loadsOrNamesTheProblem(args, {})) === 'loaded') loaded++;
      }),
      { numRuns: FLAG_RUNS },
    );
    t.diagnostic(`fuzz: ${ran} generated flag vectors: ${loaded} loaded, ${ran - loaded} rejected naming the flag`);
  });
});
