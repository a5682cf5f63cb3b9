// Property-based fuzzing of static pod manifest decoding (file and URL), YAML and JSON: valid
// pods mutated (wrong types, missing fields, huge values, odd unicode, deep nesting, `..` and `/`
// in identifiers, duplicate keys, anchors and aliases, truncation, several documents) and plain
// garbage. Decoding must only ever throw ManifestError naming the file or URL (and a field once
// the bytes parsed); every accepted pod must be fully typed and its identifiers must be plain
// path components. KTS_FUZZ_SCALE multiplies the run counts for a longer session.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import fc from 'fast-check';
import { stringify as yamlStringify } from 'yaml';
import type { Pod } from '../../src/api/types.js';
import { checkPodTypes } from '../../src/api/validation.js';
import { ManifestError } from '../../src/sources/errors.js';
import { decodePodManifest, decodePodManifests } from '../../src/sources/manifest.js';
import { confinedJoin } from '../../src/util/safe-path.js';

const SCALE = Math.max(1, Number(process.env.KTS_FUZZ_SCALE ?? '1') || 1);
const FILE = { source: 'file', location: '/etc/kubernetes/manifests/fuzz.yaml', nodeName: 'node1' } as const;
const URL_ORIGIN = { source: 'http', location: 'http://127.0.0.1:1/manifests', nodeName: 'node1' } as const;

// ---- generators -------------------------------------------------------------------------

const hostileIdentifier = fc.constantFrom(
  '..', '.', '../../victim', '../../../..', '/', '/etc/passwd', 'a/b', 'a\\b', 'a\0b', '', ' ', 'a b', '-a', 'a-',
  'A', 'a_b', 'a.b', 'ü', '\u202e', '\ud800', 'x'.repeat(64), 'x'.repeat(254), 'x'.repeat(300), '%2e%2e', '~', '$HOME', '*',
);
const goodName = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);
const identifier = fc.oneof({ weight: 40, arbitrary: goodName }, { weight: 1, arbitrary: hostileIdentifier }, { weight: 1, arbitrary: fc.string({ maxLength: 12, unit: 'binary' }) });
const uid = fc.oneof({ weight: 8, arbitrary: fc.uuid() }, { weight: 8, arbitrary: fc.stringMatching(/^[0-9a-f]{32}$/) }, { weight: 1, arbitrary: hostileIdentifier }, { weight: 1, arbitrary: fc.string({ maxLength: 8 }) });

/** Values of every wrong (and right) type a field may be given. */
const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(true, false, 'true', 'false', 'yes', 0, -1, 1.5, 1e300, -1e300, 2 ** 31, 2 ** 53 + 2, '', '0', null, [], {}, ['x'], { a: 1 }),
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 16, unit: 'binary' }),
  hostileIdentifier,
  fc.jsonValue({ maxDepth: 3 }),
);

/** Mostly a valid value, sometimes one of the wrong type. */
function mostly<T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc.oneof({ weight: 60, arbitrary: valid }, { weight: 1, arbitrary: oddValue });
}

function nest(depth: number): unknown {
  let v: unknown = 'bottom';
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { n: v };
  return v;
}

const bool = fc.boolean();
const container = fc.record(
  {
    name: identifier,
    image: fc.oneof({ weight: 40, arbitrary: fc.constantFrom('busybox:1.36', 'nginx', `registry.local:5000/a/b@sha256:${'a'.repeat(64)}`) }, { weight: 1, arbitrary: fc.constantFrom(' x', '', 'UPPER:1') }, { weight: 1, arbitrary: oddValue }),
    command: mostly(fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 })),
    securityContext: mostly(fc.record(
      { runAsNonRoot: mostly(bool), allowPrivilegeEscalation: mostly(bool), privileged: mostly(bool), runAsUser: mostly(fc.nat({ max: 65535 })), capabilities: fc.constant({ add: ['NET_ADMIN'] }) },
      { requiredKeys: [] },
    )),
    ports: mostly(fc.array(fc.record({ containerPort: mostly(fc.integer({ min: 1, max: 65535 })), name: mostly(fc.constantFrom('http', 'metrics')) }, { requiredKeys: ['containerPort'] }), { maxLength: 1 })),
    resources: mostly(fc.record({ limits: fc.dictionary(fc.constantFrom('cpu', 'memory'), mostly(fc.constantFrom('100m', '1Gi', '1e3', '250m', '128Mi')), { maxKeys: 2 }) }, { requiredKeys: [] })),
    livenessProbe: mostly(fc.record({ exec: fc.constant({ command: ['true'] }), periodSeconds: mostly(fc.nat({ max: 60 })) }, { requiredKeys: ['exec'] })),
  },
  { requiredKeys: ['name', 'image'] },
);

const podObject = fc.record(
  {
    apiVersion: fc.oneof({ weight: 200, arbitrary: fc.constant('v1') }, { weight: 1, arbitrary: oddValue }),
    kind: fc.oneof({ weight: 200, arbitrary: fc.constant('Pod') }, { weight: 1, arbitrary: oddValue }),
    metadata: fc.record(
      { name: identifier, namespace: identifier, uid, labels: fc.dictionary(goodName, mostly(goodName), { maxKeys: 2 }), annotations: fc.dictionary(goodName, mostly(fc.string({ maxLength: 6 })), { maxKeys: 2 }) },
      { requiredKeys: ['name'] },
    ),
    spec: fc.record(
      {
        containers: fc.oneof({ weight: 40, arbitrary: fc.uniqueArray(container, { minLength: 1, maxLength: 3, selector: (c) => c.name }) }, { weight: 1, arbitrary: oddValue }),
        initContainers: fc.array(container.map(({ livenessProbe: _probe, ...c }) => c), { maxLength: 1 }),
        hostNetwork: mostly(bool),
        terminationGracePeriodSeconds: mostly(fc.nat({ max: 3600 })),
        activeDeadlineSeconds: mostly(fc.integer({ min: 1, max: 86400 })),
        restartPolicy: mostly(fc.constantFrom('Always', 'OnFailure', 'Never')),
        securityContext: mostly(fc.record({ runAsNonRoot: mostly(bool), runAsUser: mostly(fc.nat({ max: 65535 })), supplementalGroups: mostly(fc.array(fc.nat({ max: 65535 }), { maxLength: 2 })) }, { requiredKeys: [] })),
        volumes: mostly(fc.array(fc.record({ name: identifier, emptyDir: fc.constant({}) }), { maxLength: 1 })),
        tolerations: mostly(fc.constant([{ operator: 'Exists' }])),
        deep: fc.oneof({ weight: 40, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: 90, max: 110 }).map(nest) }),
      },
      { requiredKeys: ['containers'] },
    ),
  },
  { requiredKeys: ['apiVersion', 'kind', 'metadata', 'spec'] },
).map((p) => JSON.parse(JSON.stringify(p)) as unknown);

type Json = unknown;

/** Replaces (or deletes) the value at one random path of a JSON value. */
function mutate(v: Json, path: number[], replacement: unknown, del: boolean): Json {
  if (path.length === 0 || typeof v !== 'object' || v === null) return replacement;
  const keys = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
  if (keys.length === 0) return v;
  const k = keys[path[0]! % keys.length]!;
  const copy = (Array.isArray(v) ? [...v] : { ...(v as Record<string, unknown>) }) as Record<string | number, unknown>;
  if (path.length === 1 && del && !Array.isArray(v)) delete copy[k];
  else copy[k] = mutate(copy[k], path.slice(1), replacement, del);
  return copy;
}

const mutatedPod = fc.tuple(podObject, fc.array(fc.nat(), { minLength: 1, maxLength: 6 }), oddValue, fc.boolean(), fc.nat({ max: 2 }))
  .map(([pod, path, value, del, times]) => {
    let out: Json = pod;
    for (let i = 0; i < times; i++) out = mutate(out, path.map((p) => p + i), value, del);
    return out;
  });

/** Text-level damage on top of a serialized manifest. */
const textMutation = fc.oneof(
  { weight: 8, arbitrary: fc.constant((s: string) => s) },
  fc.nat().map((n) => (s: string) => s.slice(0, n % (s.length + 1))), // truncated
  fc.constant((s: string) => `${s}\n---\n${s}`), // several documents
  fc.constant((s: string) => `---\n---\n${s}`),
  fc.constant((s: string) => `\ufeff${s}`),
  fc.constant((s: string) => s.replace(/^(\s*)(name: .*)$/m, '$1$2\n$1$2')), // duplicate key
  fc.constant((s: string) => s.replace(/^(\s*)uid: .*$/m, '$1uid: "../../victim"')),
  fc.constant((s: string) => s.replace(/\n(\s+)name: (\S+)/, '\n$1name: &n $2\n$1x: *n')), // anchor and alias
  fc.constant((s: string) => `a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\n${s}`),
  fc.tuple(fc.nat(), fc.string({ minLength: 1, maxLength: 4, unit: 'binary' })).map(([n, ins]) => (s: string) => {
    const i = n % (s.length + 1);
    return s.slice(0, i) + ins + s.slice(i);
  }),
  fc.constant((s: string) => s.replace(/true|false/g, '"$&"')),
  fc.constant((s: string) => s.replace(/: (\d+)$/m, ': 1e300')),
);

const serialized = fc.tuple(mutatedPod, fc.boolean(), textMutation).map(([obj, asJSON, damage]) => {
  let text: string;
  try {
    text = asJSON ? JSON.stringify(obj) : yamlStringify(obj, { aliasDuplicateObjects: false, version: '1.1' });
  } catch {
    text = String(obj);
  }
  return damage(text);
});

const garbage = fc.oneof(
  fc.string({ maxLength: 200, unit: 'binary' }),
  fc.jsonValue({ maxDepth: 6 }).map((v) => JSON.stringify(v)),
  fc.jsonValue({ maxDepth: 6 }).map((v) => yamlStringify(v)),
  fc.nat({ max: 300 }).map((n) => '['.repeat(n) + ']'.repeat(n)),
  fc.nat({ max: 300 }).map((n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)),
  fc.nat({ max: 300 }).map((n) => '- '.repeat(n) + 'x'),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
);

// ---- the properties ---------------------------------------------------------------------

/** Rejections before the bytes became an object cannot name a field; every other one does. */
const PARSE_ERROR = /^(couldn't parse as YAML|couldn't parse as pod: (the manifest is (empty|not an object)|nested more than)|manifest is \d+ bytes)/;

interface Tally {
  runs: number;
  accepted: number;
  rejected: number;
  slowestMs: number;
  totalMs: number;
}

function checkRejection(e: unknown, location: string): void {
  if (!(e instanceof ManifestError)) throw new Error(`not a ManifestError: ${String(e)}`, { cause: e });
  assert.equal(e.location, location);
  assert.ok(e.message.startsWith(`${location}: `), e.message);
  const detail = e.message.slice(location.length + 2);
  if (e.field === undefined) assert.match(detail, PARSE_ERROR, `a rejection after parsing must name a field: ${e.message}`);
  else assert.ok(detail.includes(e.field), `the message names the field ${e.field}: ${e.message}`);
}

function checkAccepted(pod: Pod): void {
  assert.deepEqual(checkPodTypes(structuredClone(pod)), [], 'an accepted pod is fully typed');
  const m = pod.metadata;
  confinedJoin('/var/lib/kubelet', 'pods', m.uid!);
  const logDir = confinedJoin('/var/log/pods', `${m.namespace}_${m.name}_${m.uid}`);
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    confinedJoin('/var/lib/kubelet', 'pods', m.uid!, 'containers', c.name);
    confinedJoin(logDir, c.name);
  }
}

function decodeOne(text: string, url: boolean, tally: Tally): void {
  const origin = url ? URL_ORIGIN : FILE;
  const t0 = performance.now();
  try {
    const pods = url ? decodePodManifests(text, origin) : [decodePodManifest(text, origin)];
    for (const p of pods) checkAccepted(p);
    tally.accepted++;
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    checkRejection(e, origin.location);
    tally.rejected++;
  } finally {
    tally.runs++;
    tally.slowestMs = Math.max(tally.slowestMs, performance.now() - t0);
    tally.totalMs += performance.now() - t0;
  }
}

function report(t: TestContext, what: string, tally: Tally): void {
  t.diagnostic(`fuzz ${what}: ${tally.runs} inputs, ${tally.accepted} accepted, ${tally.rejected} rejected, slowest ${tally.slowestMs.toFixed(1)} ms, decoding ${tally.totalMs.toFixed(0)} ms in all`);
}

describe('static pod manifest fuzzing', { timeout: 120_000 }, () => {
  it('mutated pods (YAML and JSON, file and URL): only ManifestError, naming the place and the field; accepted pods are typed and confined', (t) => {
    const tally: Tally = { runs: 0, accepted: 0, rejected: 0, slowestMs: 0, totalMs: 0 };
    fc.assert(fc.property(serialized, fc.boolean(), (text, url) => decodeOne(text, url, tally)), { numRuns: 1200 * SCALE });
    report(t, 'mutated pods', tally);
    assert.ok(tally.accepted > 0 && tally.rejected > 0, 'the generators reach both outcomes');
  });

  it('pods accepted as generated stay accepted as YAML and as JSON, with the same UID', (t) => {
    const reasons = new Map<string, number>();
    const tally: Tally = { runs: 0, accepted: 0, rejected: 0, slowestMs: 0, totalMs: 0 };
    fc.assert(
      fc.property(podObject, (obj) => {
        const t0 = performance.now();
        try {
          let fromJSON: Pod;
          try {
            fromJSON = decodePodManifest(JSON.stringify(obj), FILE);
          } catch (e) {
            checkRejection(e, FILE.location);
            const m = (e as ManifestError).message.slice(FILE.location.length + 2, FILE.location.length + 90);
            reasons.set(m, (reasons.get(m) ?? 0) + 1);
            tally.rejected++;
            return;
          }
          const fromYAML = decodePodManifest(yamlStringify(obj, { version: '1.1' }), FILE);
          assert.equal(fromYAML.metadata.uid, fromJSON.metadata.uid);
          assert.deepEqual(fromYAML.spec, fromJSON.spec);
          checkAccepted(fromJSON);
          tally.accepted++;
        } finally {
          tally.runs++;
          tally.slowestMs = Math.max(tally.slowestMs, performance.now() - t0);
          tally.totalMs += performance.now() - t0;
        }
      }),
      { numRuns: 400 * SCALE },
    );
    report(t, 'YAML/JSON agreement', tally);
    for (const [m, n] of [...reasons].sort((a, b) => b[1] - a[1]).slice(0, 5)) t.diagnostic(`${n} ${m}`);
  });

  it('garbage and hostile shapes: only ManifestError', (t) => {
    const tally: Tally = { runs: 0, accepted: 0, rejected: 0, slowestMs: 0, totalMs: 0 };
    fc.assert(fc.property(garbage, fc.boolean(), (text, url) => decodeOne(text, url, tally)), { numRuns: 1000 * SCALE });
    report(t, 'garbage', tally);
  });
});
