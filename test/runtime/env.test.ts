import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Container, EnvVar, Pod } from '../../src/api/types.js';
import {
  CreateContainerConfigError,
  expand,
  expandCommand,
  formatMap,
  goQuote,
  makeEnvironment,
  mappingFuncFor,
  sortPodIPs,
  splitMaybeSubscriptedPath,
  type EnvironmentContext,
} from '../../src/runtime/env.js';

function pod(container: Container): Pod {
  return {
    metadata: {
      name: 'api-7d9f',
      namespace: 'shop',
      uid: 'b1c2d3e4-0000-4000-8000-000000000001',
      labels: { app: 'api', 'example.com/team': 'payments' },
      annotations: { note: 'say "hi"\n', 'kubernetes.io/config.source': 'file' },
    },
    spec: { nodeName: 'node-a', serviceAccountName: 'api-sa', containers: [container] },
  };
}

function ctx(over: Partial<EnvironmentContext> = {}): EnvironmentContext {
  return { nodeName: 'node-a', hostIPs: ['192.168.1.10'], podIPs: ['10.244.0.7'], ...over };
}

function envOf(env: EnvVar[], over: Partial<EnvironmentContext> = {}, extra: Partial<Container> = {}): Record<string, string> {
  const c: Container = { name: 'api', env, ...extra };
  const out: Record<string, string> = {};
  for (const e of makeEnvironment(pod(c), c, ctx(over)).envs) out[e.key] = e.value;
  return out;
}

function field(name: string, fieldPath: string): EnvVar {
  return { name, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath } } };
}

function configError(message: string | RegExp): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof CreateContainerConfigError, `not a CreateContainerConfigError: ${String(err)}`);
    assert.equal(err.code, 'CreateContainerConfigError');
    if (typeof message === 'string') assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  };
}

describe('expand', () => {
  const vars = mappingFuncFor(new Map([['VAR', 'value'], ['EMPTY', '']]));
  const cases: [string, string][] = [
    ['plain', 'plain'],
    ['$(VAR)', 'value'],
    ['pre-$(VAR)-post', 'pre-value-post'],
    ['$(VAR)$(VAR)', 'valuevalue'],
    ['$(UNKNOWN)', '$(UNKNOWN)'],
    ['x$(EMPTY)y', 'xy'],
    ['$$(VAR)', '$(VAR)'],
    ['$$$(VAR)', '$value'],
    ['$$', '$'],
    ['a$', 'a$'],
    ['$(VAR', '$(VAR'],
    ['$VAR', '$VAR'],
    ['$)', '$)'],
    ['$()', '$()'],
    ['100$ and $(VAR)', '100$ and value'],
  ];
  for (const [input, want] of cases) {
    it(`${JSON.stringify(input)} → ${JSON.stringify(want)}`, () => assert.equal(expand(input, vars), want));
  }
});

describe('makeEnvironment: literal values', () => {
  it('expands references to variables defined earlier, leaves later and unknown ones', () => {
    assert.deepEqual(
      envOf([
        { name: 'HOST', value: 'db' },
        { name: 'URL', value: 'postgres://$(HOST):$(PORT)/x' },
        { name: 'PORT', value: '5432' },
        { name: 'ESC', value: '$$(HOST)' },
      ]),
      { HOST: 'db', URL: 'postgres://db:$(PORT)/x', PORT: '5432', ESC: '$(HOST)' },
    );
  });

  it('keeps declaration order; a redefinition keeps the first place and the last value', () => {
    const c: Container = { name: 'api', env: [{ name: 'A', value: '1' }, { name: 'B', value: '2' }, { name: 'A', value: '3' }] };
    assert.deepEqual(makeEnvironment(pod(c), c, ctx()).envs, [
      { key: 'A', value: '3' },
      { key: 'B', value: '2' },
    ]);
  });

  it('gives an empty value for a variable with neither value nor source', () => {
    assert.deepEqual(envOf([{ name: 'EMPTY' }]), { EMPTY: '' });
  });
});

describe('makeEnvironment: downward API fieldRef', () => {
  it('resolves every supported pod field', () => {
    assert.deepEqual(
      envOf([
        field('NAME', 'metadata.name'),
        field('NS', 'metadata.namespace'),
        field('UID', 'metadata.uid'),
        field('APP', "metadata.labels['app']"),
        field('TEAM', "metadata.labels['example.com/team']"),
        field('NOTE', "metadata.annotations['note']"),
        field('MISSING', "metadata.labels['nope']"),
        field('NODE', 'spec.nodeName'),
        field('HOST', 'spec.host'),
        field('SA', 'spec.serviceAccountName'),
        field('HOST_IP', 'status.hostIP'),
        field('HOST_IPS', 'status.hostIPs'),
        field('POD_IP', 'status.podIP'),
        field('POD_IPS', 'status.podIPs'),
      ], { hostIPs: ['192.168.1.10', 'fd00::10'], podIPs: ['10.244.0.7', 'fd00:244::7'] }),
      {
        NAME: 'api-7d9f',
        NS: 'shop',
        UID: 'b1c2d3e4-0000-4000-8000-000000000001',
        APP: 'api',
        TEAM: 'payments',
        NOTE: 'say "hi"\n',
        MISSING: '',
        NODE: 'node-a',
        HOST: 'node-a',
        SA: 'api-sa',
        HOST_IP: '192.168.1.10',
        HOST_IPS: '192.168.1.10,fd00::10',
        POD_IP: '10.244.0.7',
        POD_IPS: '10.244.0.7,fd00:244::7',
      },
    );
  });

  it('formats whole label and annotation maps as sorted k="v" lines', () => {
    const env = envOf([field('LABELS', 'metadata.labels'), field('ANN', 'metadata.annotations')]);
    assert.equal(env.LABELS, 'app="api"\nexample.com/team="payments"');
    assert.equal(env.ANN, 'kubernetes.io/config.source="file"\nnote="say \\"hi\\"\\n"');
  });

  it('orders pod IPs by the node primary family (IPv6 host first → IPv6 pod IP first)', () => {
    const env = envOf([field('POD_IP', 'status.podIP'), field('POD_IPS', 'status.podIPs')], {
      hostIPs: ['fd00::10', '192.168.1.10'],
      podIPs: ['10.244.0.7', 'fd00:244::7'],
    });
    assert.deepEqual(env, { POD_IP: 'fd00:244::7', POD_IPS: 'fd00:244::7,10.244.0.7' });
    assert.deepEqual(sortPodIPs(['10.0.0.1', '10.0.0.2'], []), ['10.0.0.1']);
  });

  it('falls back to the node name and context service account when the spec has none', () => {
    const c: Container = { name: 'api', env: [field('NODE', 'spec.nodeName'), field('SA', 'spec.serviceAccountName')] };
    const p = pod(c);
    delete p.spec.nodeName;
    delete p.spec.serviceAccountName;
    const envs = makeEnvironment(p, c, ctx({ nodeName: 'node-b', serviceAccountName: 'default' })).envs;
    assert.deepEqual(envs, [{ key: 'NODE', value: 'node-b' }, { key: 'SA', value: 'default' }]);
  });

  it('can be referenced from a later literal value', () => {
    assert.equal(envOf([field('POD_IP', 'status.podIP'), { name: 'ADDR', value: '$(POD_IP):8080' }]).ADDR, '10.244.0.7:8080');
  });

  it('refuses unsupported fields and versions with upstream messages', () => {
    assert.throws(() => envOf([field('X', 'spec.containers')]), configError('field label not supported: spec.containers'));
    assert.throws(() => envOf([field('X', "metadata.name['a']")]), configError("field label does not support subscript: metadata.name['a']"));
    assert.throws(
      () => envOf([{ name: 'X', valueFrom: { fieldRef: { apiVersion: 'v2', fieldPath: 'metadata.name' } } }]),
      configError('unsupported pod version: v2'),
    );
    assert.throws(() => envOf([field('X', "metadata.labels['bad key!']")]), configError(/^invalid key subscript in metadata\.labels/));
  });

  it('fails status.hostIP when the node has no address yet', () => {
    assert.throws(() => envOf([field('H', 'status.hostIP')], { hostIPs: [] }), configError(/^host IP unknown/));
  });

  it('splits subscripted paths like upstream', () => {
    assert.deepEqual(splitMaybeSubscriptedPath("metadata.labels['a/b']"), { path: 'metadata.labels', subscript: 'a/b', ok: true });
    assert.deepEqual(splitMaybeSubscriptedPath('metadata.labels'), { path: 'metadata.labels', subscript: '', ok: false });
    assert.deepEqual(splitMaybeSubscriptedPath("['x']"), { path: "['x']", subscript: '', ok: false });
  });
});

describe('makeEnvironment: resourceFieldRef', () => {
  const resources = { requests: { cpu: '250m', memory: '64Mi' }, limits: { cpu: '1500m', memory: '128Mi', 'ephemeral-storage': '1Gi' } };
  function res(name: string, resource: string, divisor?: string, containerName?: string): EnvVar {
    const ref: NonNullable<EnvVar['valueFrom']>['resourceFieldRef'] = { resource };
    if (divisor !== undefined) ref.divisor = divisor;
    if (containerName !== undefined) ref.containerName = containerName;
    return { name, valueFrom: { resourceFieldRef: ref } };
  }

  it('converts with the divisor and rounds up', () => {
    assert.deepEqual(
      envOf(
        [
          res('LCPU', 'limits.cpu'),
          res('LCPU_M', 'limits.cpu', '1m'),
          res('RCPU', 'requests.cpu'),
          res('RCPU_M', 'requests.cpu', '100m'),
          res('LMEM', 'limits.memory'),
          res('LMEM_MI', 'limits.memory', '1Mi'),
          res('RMEM_G', 'requests.memory', '1G'),
          res('LEPH_MI', 'limits.ephemeral-storage', '1Mi'),
        ],
        {},
        { resources },
      ),
      {
        LCPU: '2',
        LCPU_M: '1500',
        RCPU: '1',
        RCPU_M: '3',
        LMEM: '134217728',
        LMEM_MI: '128',
        RMEM_G: '1',
        LEPH_MI: '1024',
      },
    );
  });

  it('reads unset limits as node allocatable, unset requests as 0', () => {
    const env = envOf([res('LCPU', 'limits.cpu', '1m'), res('LMEM', 'limits.memory', '1Mi'), res('RMEM', 'requests.memory')], {
      nodeAllocatable: { cpu: '3800m', memory: '7Gi' },
    });
    assert.deepEqual(env, { LCPU: '3800', LMEM: '7168', RMEM: '0' });
  });

  it("reads another container's resources by name", () => {
    const sidecar: Container = { name: 'side', resources: { limits: { memory: '32Mi' } } };
    const c: Container = { name: 'api', env: [res('SIDE_MEM', 'limits.memory', '1Mi', 'side')] };
    const p = pod(c);
    p.spec.containers.push(sidecar);
    assert.deepEqual(makeEnvironment(p, c, ctx()).envs, [{ key: 'SIDE_MEM', value: '32' }]);
    const bad: Container = { name: 'api', env: [res('X', 'limits.memory', undefined, 'ghost')] };
    assert.throws(() => makeEnvironment(pod(bad), bad, ctx()), configError('container ghost not found'));
  });

  it('refuses an unknown resource', () => {
    assert.throws(() => envOf([res('X', 'limits.gpu')]), configError('unsupported container resource : limits.gpu'));
  });
});

describe('makeEnvironment: ConfigMaps and Secrets', () => {
  const data: Record<string, Record<string, string>> = { 'shop/cfg': { LEVEL: 'debug', 'bad key': 'x', '1ST': 'y' } };
  const secrets: Record<string, Record<string, string>> = { 'shop/creds': { password: 's3cret' } };
  const lookups = {
    getConfigMap: (ns: string, name: string) => data[`${ns}/${name}`],
    getSecret: (ns: string, name: string) => secrets[`${ns}/${name}`],
  };

  it('fails a missing non-optional ConfigMap or Secret with the not-found message', () => {
    assert.throws(
      () => envOf([{ name: 'X', valueFrom: { configMapKeyRef: { name: 'missing', key: 'k' } } }]),
      configError('configmap "missing" not found'),
    );
    assert.throws(
      () => envOf([{ name: 'X', valueFrom: { secretKeyRef: { name: 'missing', key: 'k' } } }]),
      configError('secret "missing" not found'),
    );
    assert.throws(() => envOf([], {}, { envFrom: [{ configMapRef: { name: 'gone' } }] }), configError('configmap "gone" not found'));
  });

  it('skips optional references that are missing, keeping what came before', () => {
    assert.deepEqual(
      envOf([
        { name: 'X', value: 'kept' },
        { name: 'X', valueFrom: { configMapKeyRef: { name: 'missing', key: 'k', optional: true } } },
        { name: 'Y', valueFrom: { secretKeyRef: { name: 'missing', key: 'k', optional: true } } },
        { name: 'Z', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'nokey', optional: true } } },
      ], lookups, { envFrom: [{ secretRef: { name: 'gone', optional: true } }] }),
      { X: 'kept' },
    );
  });

  it('reads keys through the lookups and fails a missing key', () => {
    assert.deepEqual(
      envOf(
        [
          { name: 'LOG', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'LEVEL' } } },
          { name: 'PW', valueFrom: { secretKeyRef: { name: 'creds', key: 'password' } } },
        ],
        lookups,
      ),
      { LOG: 'debug', PW: 's3cret' },
    );
    assert.throws(
      () => envOf([{ name: 'X', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'nokey' } } }], lookups),
      configError("couldn't find key nokey in ConfigMap shop/cfg"),
    );
    assert.throws(
      () => envOf([{ name: 'X', valueFrom: { secretKeyRef: { name: 'creds', key: 'user' } } }], lookups),
      configError("couldn't find key user in Secret shop/creds"),
    );
  });

  it('brings envFrom keys in first (with prefix), lets env override them, reports invalid names', () => {
    const c: Container = {
      name: 'api',
      envFrom: [{ configMapRef: { name: 'cfg' } }, { prefix: 'S_', secretRef: { name: 'creds' } }],
      env: [{ name: 'LEVEL', value: 'info' }, { name: 'MSG', value: 'level=$(LEVEL) pw=$(S_password)' }],
    };
    const result = makeEnvironment(pod(c), c, ctx(lookups));
    assert.deepEqual(result.envs, [
      { key: 'LEVEL', value: 'info' },
      { key: 'S_password', value: 's3cret' },
      { key: 'MSG', value: 'level=info pw=s3cret' },
    ]);
    assert.deepEqual(result.invalidKeys, [{ kind: 'ConfigMap', name: 'cfg', keys: ['1ST', 'bad key'] }]);
  });
});

describe('expandCommand', () => {
  it('expands command and args against the environment', () => {
    const c: Container = { name: 'x', command: ['/bin/$(BIN)'], args: ['--addr=$(POD_IP):$(PORT)', '$$(LITERAL)', '$(NOPE)'] };
    assert.deepEqual(
      expandCommand(c, [
        { key: 'BIN', value: 'server' },
        { key: 'POD_IP', value: '10.0.0.3' },
        { key: 'PORT', value: '80' },
      ]),
      { command: ['/bin/server'], args: ['--addr=10.0.0.3:80', '$(LITERAL)', '$(NOPE)'] },
    );
  });

  it('leaves absent command and args absent', () => {
    assert.deepEqual(expandCommand({ name: 'x', args: [] }, []), {});
  });
});

describe('Go quoting', () => {
  it('escapes like strconv.Quote', () => {
    assert.equal(goQuote('a"b\\c\n\t\x01'), '"a\\"b\\\\c\\n\\t\\x01"');
    assert.equal(goQuote('héllo'), '"héllo"');
    assert.equal(formatMap({ b: '2', a: '1' }), 'a="1"\nb="2"');
    assert.equal(formatMap({}), '');
  });
});
