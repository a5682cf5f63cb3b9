// Property-based tests of kubeconfig and exec-credential decoding: generated kubeconfigs
// (YAML and JSON) whose every field may take a wrong type, an odd string or a random structure,
// raw random text, and exec plugins printing random JSON. The properties: parseKubeconfig
// returns a config with an http(s) server or throws a KubeconfigError naming the file, never
// anything else; an exec plugin's answer is a credential with a token or a certificate and key
// (and an RFC 3339 expiry, as metav1.Time decodes it) or an ExecCredentialError naming the
// command. Seeded: a failure prints its seed and counterexample. KTS_FUZZ_RUNS scales the runs.

import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify as yamlStringify } from 'yaml';

import { parseKubeconfig } from '../../src/client/kubeconfig.js';
import { ExecCredentialProvider } from '../../src/client/exec-credential.js';
import { ExecCredentialError, KubeconfigError } from '../../src/client/errors.js';
import { FakeClock } from '../../src/util/clock.js';

const RUNS = Number(process.env.KTS_FUZZ_RUNS) || 400;
const SEED = Number(process.env.KTS_FUZZ_SEED) || Date.now() % 2 ** 31;
const dir = mkdtempSync(join(tmpdir(), 'kts-kubeconfig-fuzz-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const FILE = join(dir, 'kubeconfig');

const PEM_CERT = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const PEM_KEY = '-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n';
const b64 = (s: string): string => Buffer.from(s).toString('base64');

const oddString = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom('', ' ', '\u0000', 'https://127.0.0.1:6443', 'http://[::1]:8080/', 'ftp://x', 'https://', '//x', 'https://a b',
    'javascript:alert(1)', '../../etc/passwd', '/dev/null', 'not base64!', b64(PEM_CERT), b64(PEM_KEY), b64('garbage'),
    'client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1', 'Never', 'IfAvailable', 'Always', '__proto__', 'constructor'),
);
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: oddString },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1e308, [], {}) },
);
/** A value that is usually right for its field and sometimes anything at all. */
const field = <T>(good: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: anyValue });
const maybe = (a: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> => fc.option(a, { nil: undefined, freq: 3 });
const NAMES = ['a', 'b', 'ctx', ''];
const name = field(fc.constantFrom(...NAMES));

const exec = fc.record({
  apiVersion: maybe(field(fc.constantFrom('client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1', 'client.authentication.k8s.io/v1alpha1'))),
  command: maybe(field(fc.constantFrom('plugin', './bin/plugin', '/usr/bin/plugin'))),
  args: maybe(field(fc.array(field(fc.string({ maxLength: 5 })), { maxLength: 3 }))),
  env: maybe(field(fc.array(field(fc.record({ name: field(fc.string({ maxLength: 5 })), value: field(fc.string({ maxLength: 5 })) })), { maxLength: 2 }))),
  interactiveMode: maybe(field(fc.constantFrom('Never', 'IfAvailable', 'Always'))),
  provideClusterInfo: maybe(field(fc.boolean())),
  installHint: maybe(oddString),
}, { requiredKeys: [] });
const cluster = fc.record({
  server: maybe(field(fc.constantFrom('https://127.0.0.1:6443', 'http://localhost:8080', 'https://[::1]:1/'))),
  'certificate-authority-data': maybe(field(fc.constantFrom(b64(PEM_CERT), b64('x')))),
  'certificate-authority': maybe(field(fc.constantFrom('missing-ca.crt', '/nonexistent/ca.crt'))),
  'insecure-skip-tls-verify': maybe(field(fc.boolean())),
  'tls-server-name': maybe(oddString),
  'proxy-url': maybe(oddString),
  extra: maybe(anyValue),
}, { requiredKeys: [] });
const user = fc.record({
  token: maybe(oddString),
  tokenFile: maybe(field(fc.constantFrom('token', '/nonexistent/token'))),
  'client-certificate-data': maybe(field(fc.constantFrom(b64(PEM_CERT), b64(PEM_KEY)))),
  'client-key-data': maybe(field(fc.constantFrom(b64(PEM_KEY), b64(PEM_CERT)))),
  'client-certificate': maybe(field(fc.constantFrom('missing.crt'))),
  'client-key': maybe(field(fc.constantFrom('missing.key'))),
  username: maybe(oddString),
  password: maybe(oddString),
  exec: maybe(field(exec)),
  'auth-provider': maybe(anyValue),
  as: maybe(anyValue),
}, { requiredKeys: [] });
const namedList = (inner: string, body: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  field(fc.array(field(fc.record({ name, [inner]: maybe(field(body)) }, { requiredKeys: [] })), { maxLength: 3 }));
const kubeconfig = fc.record({
  apiVersion: maybe(field(fc.constant('v1'))),
  kind: maybe(field(fc.constant('Config'))),
  'current-context': maybe(name),
  contexts: maybe(namedList('context', fc.record({ cluster: maybe(name), user: maybe(name), namespace: maybe(oddString) }, { requiredKeys: [] }))),
  clusters: maybe(namedList('cluster', cluster)),
  users: maybe(namedList('user', user)),
}, { requiredKeys: [] });

/** Every path (object keys, list indexes) of a JSON-like value. */
function paths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (typeof v !== 'object' || v === null) return [at];
  const keys: (string | number)[] = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
  return [at, ...keys.flatMap((k) => paths((v as Record<string | number, unknown>)[k], [...at, k]))];
}
/** A valid kubeconfig with a few of its values replaced by anything (or removed). */
const userBody = fc.constantFrom<Record<string, unknown>>(
  { token: 'abc' }, { tokenFile: 'token' }, { 'client-certificate-data': b64(PEM_CERT), 'client-key-data': b64(PEM_KEY) }, { username: 'u', password: 'p' },
  { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'plugin', args: ['x'], env: [{ name: 'A', value: 'b' }], interactiveMode: 'Never' } },
  { exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: './plugin' } },
);
const mutated = fc.tuple(userBody, fc.constantFrom<Record<string, unknown>>({}, { 'certificate-authority-data': b64(PEM_CERT) }, { 'insecure-skip-tls-verify': true }),
  fc.array(fc.tuple(fc.nat(), fc.option(anyValue, { nil: undefined })), { maxLength: 2 }))
  .map(([u, c, edits]) => {
    const doc: Record<string, unknown> = {
      apiVersion: 'v1', kind: 'Config', 'current-context': 'a',
      contexts: [{ name: 'a', context: { cluster: 'a', user: 'a', namespace: 'ns' } }],
      clusters: [{ name: 'a', cluster: { server: 'https://127.0.0.1:6443', ...c } }],
      users: [{ name: 'a', user: u }],
    };
    for (const [n, v] of edits) {
      const all = paths(doc).filter((p) => p.length > 0);
      const path = all[n % all.length]!;
      const parent = path.slice(0, -1).reduce<any>((o, k) => o[k], doc);
      if (v === undefined && !Array.isArray(parent)) delete parent[path.at(-1)!];
      else parent[path.at(-1)!] = v ?? null;
    }
    return doc;
  });

const text = fc.oneof(
  { weight: 4, arbitrary: mutated.map((o) => yamlStringify(o)) },
  { weight: 2, arbitrary: mutated.map((o) => JSON.stringify(o)) },
  { weight: 3, arbitrary: kubeconfig.map((o) => yamlStringify(o)) },
  { weight: 2, arbitrary: kubeconfig.map((o) => JSON.stringify(o)) },
  // a document cut anywhere
  { weight: 1, arbitrary: fc.tuple(kubeconfig.map((o) => yamlStringify(o)), fc.nat()).map(([s, n]) => s.slice(0, n % (s.length + 1))) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  { weight: 1, arbitrary: fc.constantFrom('', '---', '- a', '!!binary AAAA', 'a: &x [*x]', 'a: !!set {b}', '{', 'a: b: c', '%YAML 9.9\n---\na: 1',
    'a: &a [1]\nb: [*a, *a, *a, *a]\n', '__proto__: {polluted: 1}\ncurrent-context: a\n', 'current-context: !!js/function "x"') },
);

function parsesOrNamesTheFile(t: string, context?: string): 'parsed' | 'rejected' {
  try {
    const cfg = parseKubeconfig(t, FILE, context === undefined ? {} : { context });
    const u = new URL(cfg.server);
    assert.ok(u.protocol === 'https:' || u.protocol === 'http:', cfg.server);
    assert.equal(typeof cfg.insecureSkipTLSVerify, 'boolean');
    for (const k of ['token', 'tokenFile', 'certData', 'keyData', 'caData', 'username', 'password', 'namespace', 'tlsServerName'] as const) {
      assert.ok(cfg[k] === undefined || typeof cfg[k] === 'string', `${k}: ${typeof cfg[k]}`);
    }
    assert.equal(cfg.certData === undefined, cfg.keyData === undefined);
    if (cfg.exec) {
      assert.equal(typeof cfg.exec.command, 'string');
      assert.ok(cfg.exec.args.every((a) => typeof a === 'string'));
      assert.ok(cfg.exec.env.every((e) => typeof e.name === 'string' && typeof e.value === 'string'));
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    return 'parsed';
  } catch (err) {
    if (!(err instanceof KubeconfigError)) throw new Error(`not a KubeconfigError: ${String(err)}`, { cause: err });
    assert.ok(err.message.includes(FILE), err.message);
    return 'rejected';
  }
}

// Go's RFC3339 as metav1.Time decodes it.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

describe('kubeconfig decoding on random structures', () => {
  it(`parses or throws a KubeconfigError naming the file (${RUNS * 5} documents, seed ${SEED})`, (t) => {
    const seen = { parsed: 0, rejected: 0 };
    fc.assert(
      fc.property(text, fc.option(fc.constantFrom(...NAMES), { nil: undefined }), (doc, context) => { seen[parsesOrNamesTheFile(doc, context)]++; }),
      { numRuns: RUNS * 5, seed: SEED },
    );
    t.diagnostic(`${seen.parsed} parsed, ${seen.rejected} rejected`);
    assert.ok(seen.parsed > 0, 'the generator never made a valid kubeconfig');
  });
});

describe('exec credential decoding on random plugin answers', () => {
  const status = fc.record({
    token: maybe(field(fc.string({ maxLength: 8 }))),
    clientCertificateData: maybe(field(fc.constant(PEM_CERT))),
    clientKeyData: maybe(field(fc.constant(PEM_KEY))),
    expirationTimestamp: maybe(field(fc.constantFrom('2030-01-01T00:00:00Z', '2030-01-01T00:00:00.5+01:00', '2030', 'Tue, 01 Jan 2030 00:00:00 GMT', '2030-02-30T00:00:00Z', 'soon'))),
  }, { requiredKeys: [] });
  const good = fc.tuple(
    fc.constantFrom<Record<string, unknown>>({ token: 't' }, { clientCertificateData: PEM_CERT, clientKeyData: PEM_KEY }, { token: 't', expirationTimestamp: '2030-01-01T00:00:00Z' }),
    fc.array(fc.tuple(fc.constantFrom('apiVersion', 'kind', 'status', 'token', 'clientCertificateData', 'clientKeyData', 'expirationTimestamp'), fc.option(field(fc.constantFrom('2030', 'Tue, 01 Jan 2030 00:00:00 GMT', '2030-02-30T00:00:00Z', '2030-01-01T00:00:00.5+01:00')), { nil: undefined })), { maxLength: 2 }),
  ).map(([st, edits]) => {
    const doc: Record<string, any> = { apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { ...st } };
    for (const [k, v] of edits) {
      const o = k in doc || typeof doc.status !== 'object' || doc.status === null ? doc : doc.status;
      if (v === undefined) delete o[k];
      else o[k] = v;
    }
    return JSON.stringify(doc);
  });
  const answer = fc.oneof(
    { weight: 6, arbitrary: good },
    { weight: 3, arbitrary: fc.record({
      apiVersion: maybe(field(fc.constantFrom('client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'))),
      kind: maybe(field(fc.constant('ExecCredential'))),
      status: maybe(field(status)),
    }, { requiredKeys: [] }).map((o) => JSON.stringify(o)) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 100 }) },
  ).map((s) => s.replace(/\0/g, ''));

  it('an expirationTimestamp that is not RFC 3339 is refused (Date.parse takes "2030")', async () => {
    for (const ts of ['2030', 'Tue, 01 Jan 2030 00:00:00 GMT', '2030-01-01 00:00:00Z']) {
      const out = JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 't', expirationTimestamp: ts } });
      const p = new ExecCredentialProvider({
        apiVersion: 'client.authentication.k8s.io/v1', command: '/bin/sh', args: ['-c', 'printf %s "$KTS_FUZZ_ANSWER"'],
        env: [{ name: 'KTS_FUZZ_ANSWER', value: out }], provideClusterInfo: false, interactiveMode: 'Never',
      }, { server: 'https://127.0.0.1:6443', insecureSkipTLSVerify: false }, new FakeClock(0), 10_000);
      await assert.rejects(p.get(), (err: Error) => err instanceof ExecCredentialError && err.message.includes('is not RFC 3339'), ts);
    }
  });

  it(`a credential or an ExecCredentialError naming the command (${RUNS / 2} answers, seed ${SEED})`, { timeout: 120_000 }, async (t) => {
    const seen = { ok: 0, rejected: 0 };
    await fc.assert(
      fc.asyncProperty(answer, async (out) => {
        const p = new ExecCredentialProvider({
          apiVersion: 'client.authentication.k8s.io/v1', command: '/bin/sh', args: ['-c', 'printf %s "$KTS_FUZZ_ANSWER"'],
          env: [{ name: 'KTS_FUZZ_ANSWER', value: out }], provideClusterInfo: false, interactiveMode: 'Never',
        }, { server: 'https://127.0.0.1:6443', insecureSkipTLSVerify: false }, new FakeClock(0), 10_000);
        let cred;
        try {
          cred = await p.get();
        } catch (err) {
          if (!(err instanceof ExecCredentialError)) throw new Error(`not an ExecCredentialError: ${String(err)}`, { cause: err });
          assert.ok(err.message.includes('/bin/sh'), err.message);
          seen.rejected++;
          return;
        }
        assert.ok(typeof cred.token === 'string' && cred.token !== '' || (typeof cred.certData === 'string' && typeof cred.keyData === 'string'));
        if (cred.expiresAt !== undefined) {
          assert.ok(Number.isFinite(cred.expiresAt));
          const ts = (JSON.parse(out) as { status: { expirationTimestamp: string } }).status.expirationTimestamp;
          assert.ok(RFC3339.test(ts), `expiry ${JSON.stringify(ts)} accepted`);
        }
        seen.ok++;
      }),
      { numRuns: Math.max(50, RUNS / 2), seed: SEED },
    );
    t.diagnostic(`${seen.ok} credentials, ${seen.rejected} rejected`);
    assert.ok(seen.ok > 0);
  });
});
