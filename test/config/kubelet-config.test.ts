import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { ConfigError } from '../../src/config/errors.js';
import {
  defaultKubeletConfig,
  type KubeletConfig,
  parseKubeletConfigFile,
  type RawKubeletConfiguration,
  resolveKubeletConfig,
  resolveRelativePaths,
  UPSTREAM_V1BETA1_FIELDS,
  validateKubeletConfig,
} from '../../src/config/index.js';
import { notImplementedWarnings } from '../../src/config/schema.js';

/** test/fixtures/config/<name>, found above this file (source or dist) or the working directory. */
function fixturePath(name: string): string {
  for (const start of [dirname(fileURLToPath(import.meta.url)), process.cwd()]) {
    for (let dir = resolve(start); ; dir = dirname(dir)) {
      const p = join(dir, 'test', 'fixtures', 'config', name);
      if (existsSync(p)) return p;
      if (dirname(dir) === dir) break;
    }
  }
  throw new Error(`fixture ${name} not found`);
}

function loadFixture(name: string): { config: KubeletConfig; warnings: string[] } {
  const path = fixturePath(name);
  const parsed = parseKubeletConfigFile(readFileSync(path, 'utf8'), path);
  const warnings = [...parsed.warnings];
  const config = resolveKubeletConfig(parsed.config, warnings, path);
  return { config, warnings };
}

function fromYaml(body: string, file = 'test.yaml'): { config: KubeletConfig; warnings: string[] } {
  const text = `apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n${body}`;
  const parsed = parseKubeletConfigFile(text, file);
  const warnings = [...parsed.warnings];
  return { config: resolveKubeletConfig(parsed.config, warnings, file), warnings };
}

function isConfigError(field: string, ...fragments: string[]) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.code, 'KubeletConfigInvalid');
    assert.equal(err.field, field);
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

describe('defaultKubeletConfig', () => {
  it('holds upstream v1beta1 defaults, durations in ms', () => {
    const c = defaultKubeletConfig();
    assert.equal(c.fileCheckFrequency, 20_000);
    assert.equal(c.httpCheckFrequency, 20_000);
    assert.equal(c.syncFrequency, 60_000);
    assert.equal(c.address, '0.0.0.0');
    assert.equal(c.port, 10250);
    assert.equal(c.readOnlyPort, 0);
    assert.equal(c.healthzBindAddress, '127.0.0.1');
    assert.equal(c.healthzPort, 10248);
    assert.equal(c.maxPods, 110);
    assert.equal(c.podPidsLimit, -1);
    assert.equal(c.runtimeRequestTimeout, 120_000);
    assert.equal(c.cgroupsPerQOS, true);
    assert.equal(c.cgroupDriver, 'cgroupfs');
    assert.equal(c.containerLogMaxSize, '10Mi');
    assert.equal(c.containerLogMaxFiles, 5);
    assert.equal(c.serializeImagePulls, true);
    assert.equal(c.maxParallelImagePulls, null);
    assert.equal(c.imageMinimumGCAge, 120_000);
    assert.equal(c.imageGCHighThresholdPercent, 85);
    assert.equal(c.imageGCLowThresholdPercent, 80);
    assert.deepEqual(c.evictionHard, {
      'memory.available': '100Mi',
      'nodefs.available': '10%',
      'imagefs.available': '15%',
      'nodefs.inodesFree': '5%',
    });
    assert.equal(c.evictionPressureTransitionPeriod, 300_000);
    assert.equal(c.nodeStatusUpdateFrequency, 10_000);
    assert.equal(c.nodeStatusReportFrequency, 300_000);
    assert.equal(c.nodeLeaseDurationSeconds, 40);
    assert.equal(c.failSwapOn, true);
    assert.deepEqual(c.enforceNodeAllocatable, ['pods']);
    assert.equal(c.registerNode, true);
    assert.equal(c.eventRecordQPS, 50);
    assert.equal(c.eventBurst, 100);
    assert.equal(c.enableServer, true);
    assert.equal(c.enableDebuggingHandlers, true);
    assert.equal(c.volumeStatsAggPeriod, 60_000);
    assert.equal(c.streamingConnectionIdleTimeout, 4 * 3_600_000);
    assert.equal(c.podLogsDir, '/var/log/pods');
    assert.equal(c.containerRuntimeEndpoint, 'unix:///run/containerd/containerd.sock');
    assert.equal(c.authentication.anonymous.enabled, false);
    assert.equal(c.authentication.webhook.enabled, true);
    assert.equal(c.authentication.webhook.cacheTTL, 120_000);
    assert.equal(c.authorization.mode, 'Webhook');
    assert.equal(c.authorization.webhook.cacheAuthorizedTTL, 300_000);
    assert.equal(c.authorization.webhook.cacheUnauthorizedTTL, 30_000);
    assert.equal(c.statsBackend, 'native');
    assert.equal(c.oomWatcher, 'auto');
  });

  it('returns a fresh object each time', () => {
    const a = defaultKubeletConfig();
    a.evictionHard['memory.available'] = '1Gi';
    a.enforceNodeAllocatable.push('none');
    const b = defaultKubeletConfig();
    assert.equal(b.evictionHard['memory.available'], '100Mi');
    assert.deepEqual(b.enforceNodeAllocatable, ['pods']);
  });

  it('validates', () => {
    validateKubeletConfig(defaultKubeletConfig());
  });
});

describe('a kubeadm-generated config', () => {
  const { config, warnings } = loadFixture('kubeadm-kubelet-config.yaml');

  it('loads the fields it sets', () => {
    assert.equal(config.cgroupDriver, 'cgroupfs');
    assert.deepEqual(config.clusterDNS, ['10.96.0.10']);
    assert.equal(config.clusterDomain, 'cluster.local');
    assert.equal(config.staticPodPath, '/etc/kubernetes/manifests');
    assert.equal(config.authentication.x509.clientCAFile, '/etc/kubernetes/pki/ca.crt');
    assert.equal(config.authentication.anonymous.enabled, false);
    assert.equal(config.authorization.mode, 'Webhook');
    assert.equal(config.healthzPort, 10248);
  });

  it('treats "0s" durations and "" strings as unset', () => {
    assert.equal(config.syncFrequency, 60_000);
    assert.equal(config.fileCheckFrequency, 20_000);
    assert.equal(config.httpCheckFrequency, 20_000);
    assert.equal(config.runtimeRequestTimeout, 120_000);
    assert.equal(config.nodeStatusUpdateFrequency, 10_000);
    assert.equal(config.nodeStatusReportFrequency, 300_000);
    assert.equal(config.evictionPressureTransitionPeriod, 300_000);
    assert.equal(config.imageMinimumGCAge, 120_000);
    assert.equal(config.volumeStatsAggPeriod, 60_000);
    assert.equal(config.streamingConnectionIdleTimeout, 14_400_000);
    assert.equal(config.authentication.webhook.cacheTTL, 120_000);
    assert.equal(config.authorization.webhook.cacheAuthorizedTTL, 300_000);
    assert.equal(config.authorization.webhook.cacheUnauthorizedTTL, 30_000);
    assert.equal(config.shutdownGracePeriod, 0);
    assert.equal(config.containerRuntimeEndpoint, 'unix:///run/containerd/containerd.sock');
  });

  it('warns once for each upstream field kubelet-ts does not model and that is set, naming it', () => {
    // cpuManagerReconcilePeriod: 0s, imageMaximumGCAge: 0s and memorySwap: {} are Go zero values: unset.
    assert.equal(config.rotateCertificates, true); // implemented (src/certificate): not warned about
    for (const field of ['logging']) {
      const hits = warnings.filter((w) => w.includes(`field ${field} is not implemented by kubelet-ts yet; ignored`));
      assert.equal(hits.length, 1, `warnings for ${field}: ${JSON.stringify(warnings)}`);
    }
    // resolvConf is modeled and implemented now: read, not warned about
    assert.equal(config.resolvConf, '/run/systemd/resolve/resolv.conf');
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.ok(warnings.every((w) => w.includes('kubeadm-kubelet-config.yaml')));
  });

  it('validates', () => {
    validateKubeletConfig(config);
  });

  it('names the modeled fields it sets that kubelet-ts does not implement', () => {
    const names = notImplementedWarnings(config, defaultKubeletConfig());
    // authentication (x509.clientCAFile) is implemented now: nothing left to name.
    assert.deepEqual(names.sort(), []);
  });

  it('is accepted with the systemd cgroup driver kubeadm writes by default', () => {
    const path = fixturePath('kubeadm-kubelet-config.yaml');
    const text = readFileSync(path, 'utf8').replace('cgroupDriver: cgroupfs', 'cgroupDriver: systemd');
    const parsed = parseKubeletConfigFile(text, path);
    const c = resolveKubeletConfig(parsed.config, [], path);
    validateKubeletConfig(c, path);
    assert.equal(c.cgroupDriver, 'systemd');
  });
});

describe('overflowing and oversized values', () => {
  const cases: Array<[string, string, string]> = [
    ['maxPods: 1e300\n', 'maxPods', 'out of range for int32'],
    ['maxPods: .inf\n', 'maxPods', 'expected an integer, got Infinity'],
    ['eventRecordQPS: -1e300\n', 'eventRecordQPS', 'out of range'],
    ['podPidsLimit: 1e19\n', 'podPidsLimit', 'out of range for int64'],
    ['syncFrequency: 3000000h\n', 'syncFrequency', 'invalid duration'],
    ['fileCheckFrequency: 99999999999999999999999999s\n', 'fileCheckFrequency', 'invalid duration'],
    ['evictionSoftGracePeriod:\n  memory.available: 9999999999999999999ms\n', 'evictionSoftGracePeriod[memory.available]', 'invalid duration'],
    ['httpCheckFrequency: 1000h\n', 'httpCheckFrequency', 'at most 596h31m23.647s'],
    ['fileCheckFrequency: 1ns\n', 'fileCheckFrequency', 'at least 1s'],
    ['fileCheckFrequency: -20s\n', 'fileCheckFrequency', 'must not be negative'],
    ['containerLogMaxSize: "1e300"\n', 'containerLogMaxSize', 'out of range'],
    ['kubeReserved:\n  memory: 100Ei\n', 'kubeReserved[memory]', 'out of range'],
  ];
  for (const [body, field, fragment] of cases) {
    it(`rejects ${JSON.stringify(body.trim())} naming ${field}`, () => {
      assert.throws(() => {
        const { config } = fromYaml(body, 'big.yaml');
        validateKubeletConfig(config, 'big.yaml');
      }, isConfigError(field, fragment, 'big.yaml'));
    });
  }

  it('refuses a file over 1 MiB, naming the file and the limit', () => {
    const text = `apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n#${'x'.repeat(1024 * 1024)}\n`;
    assert.throws(() => parseKubeletConfigFile(text, '/etc/kubelet/huge.yaml'), isConfigError('', '/etc/kubelet/huge.yaml', 'larger than the limit of 1048576 bytes'));
  });

  it('survives deep documents in one process (V8 used to abort in the YAML parser near the stack end)', () => {
    // In a fresh process: a deep flow document, then a deep block sequence, aborted node
    // (FATAL "RegExpCompiler Allocation failed", exit 134) before the nesting bound.
    const config = new URL('../../src/config/index.js', import.meta.url).href;
    const script = `
      const { loadConfig, ConfigError } = await import(${JSON.stringify(config)});
      const docs = ['['.repeat(20000) + ']'.repeat(20000), '{"a":'.repeat(20000) + '1' + '}'.repeat(20000), '- '.repeat(5000) + 'x\\n'];
      for (const text of docs) {
        try { await loadConfig(['--config', '/f'], async () => text); } catch (e) { if (!(e instanceof ConfigError)) throw e; }
      }
      console.log('survived');`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `exit ${r.status} ${r.signal ?? ''}: ${r.stderr.slice(0, 300)}`);
    assert.match(r.stdout, /survived/);
  });

  it('refuses nesting no KubeletConfiguration has, naming where', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = { k: deep };
    const text = JSON.stringify({ apiVersion: 'kubelet.config.k8s.io/v1beta1', kind: 'KubeletConfiguration', logging: deep });
    assert.throws(() => parseKubeletConfigFile(text, 'deep.json'), isConfigError(`logging${'.k'.repeat(31)}`, 'nested deeper than 32 levels'));
    assert.throws(() => parseKubeletConfigFile(`${'- '.repeat(5000)}x\n`, 'deep.yaml'), isConfigError('', 'nested deeper than 128 levels'));
  });
});

describe('parseKubeletConfigFile', () => {
  it('reads JSON', () => {
    const text = JSON.stringify({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      maxPods: 500,
      syncFrequency: '30s',
      evictionHard: { 'memory.available': '500Mi', 'nodefs.available': '5%', 'imagefs.available': '10%', 'nodefs.inodesFree': '5%' },
      featureGates: { InPlacePodVerticalScaling: true },
      serializeImagePulls: false,
      maxParallelImagePulls: 4,
    });
    const parsed = parseKubeletConfigFile(text, 'config.json');
    assert.deepEqual(parsed.warnings, []);
    const c = resolveKubeletConfig(parsed.config, []);
    assert.equal(c.maxPods, 500);
    assert.equal(c.syncFrequency, 30_000);
    assert.equal(c.evictionHard['memory.available'], '500Mi');
    assert.deepEqual(c.featureGates, { InPlacePodVerticalScaling: true });
    assert.equal(c.serializeImagePulls, false);
    assert.equal(c.maxParallelImagePulls, 4);
    validateKubeletConfig(c);
  });

  it('reads a YAML flow mapping that is not JSON', () => {
    const parsed = parseKubeletConfigFile('{apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeletConfiguration, maxPods: 9}', 'f.yaml');
    assert.equal(resolveKubeletConfig(parsed.config).maxPods, 9);
  });

  it('keeps a "__proto__" map key as a plain key', () => {
    const text = '{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","systemReserved":{"__proto__":"1","cpu":"1"}}';
    const c = resolveKubeletConfig(parseKubeletConfigFile(text, 'p.json').config);
    assert.deepEqual(Object.keys(c.systemReserved), ['__proto__', 'cpu']);
    assert.equal(Object.getPrototypeOf(c.systemReserved), Object.prototype);
    assert.throws(() => validateKubeletConfig(c), isConfigError('systemReserved[__proto__]', 'cannot reserve'));
  });

  it('rejects broken JSON naming the file', () => {
    assert.throws(() => parseKubeletConfigFile('{"apiVersion": ', 'c.json'), isConfigError('', 'c.json', 'invalid JSON'));
  });

  it('rejects broken YAML naming the file', () => {
    const path = fixturePath('broken-yaml.yaml');
    assert.throws(() => parseKubeletConfigFile(readFileSync(path, 'utf8'), path), isConfigError('', path, 'invalid YAML'));
  });

  it('rejects an empty file', () => {
    assert.throws(() => parseKubeletConfigFile('  \n', 'e.yaml'), isConfigError('', 'e.yaml', 'empty'));
  });

  it('rejects a document that is not an object', () => {
    assert.throws(() => parseKubeletConfigFile('- a\n- b\n', 'l.yaml'), isConfigError('', 'expected a KubeletConfiguration object'));
  });

  it('rejects a wrong apiVersion', () => {
    const path = fixturePath('wrong-api-version.yaml');
    assert.throws(
      () => parseKubeletConfigFile(readFileSync(path, 'utf8'), path),
      isConfigError('apiVersion', path, '"kubelet.config.k8s.io/v1beta1"', '"kubelet.config.k8s.io/v1alpha1"'),
    );
  });

  it('rejects a missing apiVersion', () => {
    assert.throws(() => parseKubeletConfigFile('kind: KubeletConfiguration\n', 'x.yaml'), isConfigError('apiVersion', 'got none'));
  });

  it('rejects a wrong kind', () => {
    const path = fixturePath('wrong-kind.yaml');
    assert.throws(
      () => parseKubeletConfigFile(readFileSync(path, 'utf8'), path),
      isConfigError('kind', '"KubeletConfiguration"', '"CredentialProviderConfig"'),
    );
  });

  it('warns about unknown fields, top-level and nested, and keeps kubelet-ts fields', () => {
    const { config, warnings } = loadFixture('unknown-fields.yaml');
    assert.ok(warnings.some((w) => w.includes('unknown field "maxPodz"')), JSON.stringify(warnings));
    assert.ok(warnings.some((w) => w.includes('unknown field "authentication.webhook.cacheTtl"')), JSON.stringify(warnings));
    // tlsCipherSuites is implemented (and validated) now: no warning.
    assert.ok(!warnings.some((w) => w.includes('tlsCipherSuites')), JSON.stringify(warnings));
    assert.equal(warnings.length, 2, JSON.stringify(warnings));
    assert.equal(config.maxPods, 250);
    assert.equal(config.statsBackend, 'fs');
    assert.equal(config.oomWatcher, 'cgroup');
    assert.equal(config.authentication.webhook.cacheTTL, 120_000);
  });

  it('lists upstream field names it ignores, and not its own', () => {
    for (const f of ['rotateCertificates', 'cpuManagerPolicy', 'logging', 'memorySwap', 'tlsCipherSuites', 'maxPods']) {
      assert.ok(UPSTREAM_V1BETA1_FIELDS.has(f), f);
    }
    assert.ok(!UPSTREAM_V1BETA1_FIELDS.has('statsBackend'));
  });
});

describe('resolveKubeletConfig: wrong types name the field and the value', () => {
  it('maxPods: "lots"', () => {
    const path = fixturePath('bad-type-maxpods.yaml');
    assert.throws(
      () => loadFixture('bad-type-maxpods.yaml'),
      isConfigError('maxPods', `kubelet config ${path}: field maxPods: expected an integer, got "lots"`),
    );
  });

  it('a duration written as a number, nested', () => {
    assert.throws(
      () => loadFixture('bad-type-nested-duration.yaml'),
      isConfigError('authentication.webhook.cacheTTL', 'field authentication.webhook.cacheTTL', 'expected a duration string', 'got 120'),
    );
  });

  it('fileCheckFrequency: 20', () => {
    assert.throws(() => fromYaml('fileCheckFrequency: 20\n'), isConfigError('fileCheckFrequency', 'got 20'));
  });

  it('a duration string Go cannot parse', () => {
    assert.throws(
      () => loadFixture('bad-duration-string.yaml'),
      isConfigError('fileCheckFrequency', 'unknown unit " seconds" in duration "20 seconds"'),
    );
  });

  const more: Array<[string, string, string]> = [
    ['maxPods: 1.5\n', 'maxPods', 'expected an integer, got 1.5'],
    ['maxPods: 3000000000\n', 'maxPods', 'integer 3000000000 out of range for int32'],
    ['failSwapOn: "false"\n', 'failSwapOn', 'expected a boolean, got "false"'],
    ['failSwapOn: yes\n', 'failSwapOn', 'expected a boolean, got "yes"'],
    ['clusterDNS: 10.96.0.10\n', 'clusterDNS', 'expected a list of strings'],
    ['clusterDNS: [10.96.0.10, 7]\n', 'clusterDNS[1]', 'expected a string, got 7'],
    ['clusterDomain: 5\n', 'clusterDomain', 'expected a string, got 5'],
    ['systemReserved:\n  cpu: 1\n', 'systemReserved[cpu]', 'expected a string, got 1'],
    ['evictionHard: "100Mi"\n', 'evictionHard', 'expected a map of strings'],
    ['featureGates:\n  Foo: "on"\n', 'featureGates[Foo]', 'expected a boolean, got "on"'],
    ['authentication: true\n', 'authentication', 'expected an object, got true'],
    ['authentication:\n  anonymous:\n    enabled: 1\n', 'authentication.anonymous.enabled', 'expected a boolean, got 1'],
    ['evictionSoftGracePeriod:\n  memory.available: 30\n', 'evictionSoftGracePeriod[memory.available]', 'expected a duration string'],
    ['staticPodURLHeader:\n  X-Token: abc\n', 'staticPodURLHeader[X-Token]', 'expected a list of strings'],
    ['kernelMemcgNotification: "true"\n', 'kernelMemcgNotification', 'expected a boolean, got "true"'],
  ];
  for (const [body, field, fragment] of more) {
    it(`${field}: ${body.trim().replace(/\n\s*/g, ' ')}`, () => {
      assert.throws(() => fromYaml(body), isConfigError(field, `field ${field}: ${fragment}`));
    });
  }
});

describe('resolveKubeletConfig: defaulting rules', () => {
  it('kernelMemcgNotification: off unless set, read without a not-implemented warning', () => {
    assert.equal(fromYaml('maxPods: 9\n').config.kernelMemcgNotification, false);
    const on = fromYaml('kernelMemcgNotification: true\n');
    assert.equal(on.config.kernelMemcgNotification, true);
    assert.deepEqual(on.warnings.filter((w) => w.includes('kernelMemcgNotification')), []);
  });

  it('null means unset', () => {
    const { config } = fromYaml('syncFrequency: null\nmaxPods: ~\nevictionHard: null\n');
    assert.equal(config.syncFrequency, 60_000);
    assert.equal(config.maxPods, 110);
    assert.equal(config.evictionHard['memory.available'], '100Mi');
  });

  it('zero int fields take defaults, pointer fields keep an explicit 0', () => {
    const { config } = fromYaml(
      'maxPods: 0\nport: 0\neventBurst: 0\nnodeLeaseDurationSeconds: 0\nhealthzPort: 0\neventRecordQPS: 0\nimageGCLowThresholdPercent: 0\n',
    );
    assert.equal(config.maxPods, 110);
    assert.equal(config.port, 10250);
    assert.equal(config.eventBurst, 100);
    assert.equal(config.nodeLeaseDurationSeconds, 40);
    assert.equal(config.healthzPort, 0);
    assert.equal(config.eventRecordQPS, 0);
    assert.equal(config.imageGCLowThresholdPercent, 0);
  });

  it('explicit false booleans are kept', () => {
    const { config } = fromYaml('failSwapOn: false\ncgroupsPerQOS: false\nenforceNodeAllocatable: []\nregisterNode: false\n');
    assert.equal(config.failSwapOn, false);
    assert.equal(config.cgroupsPerQOS, false);
    assert.equal(config.registerNode, false);
    assert.deepEqual(config.enforceNodeAllocatable, []);
    validateKubeletConfig(config);
  });

  it('an explicit nodeStatusUpdateFrequency also becomes the report frequency', () => {
    assert.equal(fromYaml('nodeStatusUpdateFrequency: 4s\n').config.nodeStatusReportFrequency, 4000);
    const both = fromYaml('nodeStatusUpdateFrequency: 4s\nnodeStatusReportFrequency: 1m\n').config;
    assert.equal(both.nodeStatusUpdateFrequency, 4000);
    assert.equal(both.nodeStatusReportFrequency, 60_000);
  });

  it('serializeImagePulls defaults to false when maxParallelImagePulls >= 2', () => {
    assert.equal(fromYaml('maxParallelImagePulls: 3\n').config.serializeImagePulls, false);
    assert.equal(fromYaml('maxParallelImagePulls: 1\n').config.serializeImagePulls, true);
  });

  it('negative podPidsLimit becomes -1', () => {
    assert.equal(fromYaml('podPidsLimit: -7\n').config.podPidsLimit, -1);
    assert.equal(fromYaml('podPidsLimit: 4096\n').config.podPidsLimit, 4096);
  });

  it('an explicit evictionHard replaces the defaults and says so', () => {
    const { config, warnings } = fromYaml('evictionHard:\n  memory.available: 1Gi\n');
    assert.deepEqual(config.evictionHard, { 'memory.available': '1Gi' });
    assert.ok(warnings.some((w) => w.includes('evictionHard') && w.includes('nodefs.available')), JSON.stringify(warnings));
    assert.deepEqual(fromYaml('evictionHard: {}\n').config.evictionHard, {});
  });

  it('converts soft eviction grace periods to ms', () => {
    const { config } = fromYaml('evictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  memory.available: 1m30s\n');
    assert.deepEqual(config.evictionSoftGracePeriod, { 'memory.available': 90_000 });
    validateKubeletConfig(config);
  });

  it('keeps negative durations for validation to reject', () => {
    const { config } = fromYaml('syncFrequency: -1s\n');
    assert.equal(config.syncFrequency, -1000);
    assert.throws(() => validateKubeletConfig(config, 'test.yaml'), isConfigError('syncFrequency', 'must not be negative, got -1s'));
  });

  it('resolves relative paths against the file directory', () => {
    const { config } = fromYaml('staticPodPath: manifests\npodLogsDir: /var/log/pods\n');
    resolveRelativePaths(config, '/etc/kubelet');
    assert.equal(config.staticPodPath, '/etc/kubelet/manifests');
    assert.equal(config.podLogsDir, '/var/log/pods');
    assert.equal(config.authentication.x509.clientCAFile, '');
  });

  it('accepts a raw object directly', () => {
    const raw: RawKubeletConfiguration = { maxPods: 10, address: '::' };
    const c = resolveKubeletConfig(raw);
    assert.equal(c.maxPods, 10);
    assert.equal(c.address, '::');
  });
});

describe('validateKubeletConfig', () => {
  it('lists every invalid field of a file, naming each', () => {
    const { config } = loadFixture('invalid-values.yaml');
    assert.throws(
      () => validateKubeletConfig(config, 'invalid-values.yaml'),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.field, 'port');
        assert.equal(err.file, 'invalid-values.yaml');
        const fields = err.issues.map((i) => i.field);
        for (const f of ['port', 'healthzPort', 'maxPods', 'imageGCLowThresholdPercent', 'cgroupDriver', 'staticPodURL']) {
          assert.ok(fields.includes(f), `${f} missing from ${JSON.stringify(fields)}`);
          assert.ok(err.message.includes(`field ${f}:`), err.message);
        }
        assert.ok(err.message.includes('got 70000'));
        assert.ok(err.message.includes('"cgroupv2"'));
        return true;
      },
    );
  });

  const invalid: Array<[Partial<KubeletConfig>, string, string]> = [
    [{ readOnlyPort: 65536 }, 'readOnlyPort', 'between 0 and 65535'],
    [{ healthzPort: 70000 }, 'healthzPort', 'between 0 and 65535'],
    [{ port: 0 }, 'port', 'between 1 and 65535'],
    [{ imageGCHighThresholdPercent: 101 }, 'imageGCHighThresholdPercent', 'between 0 and 100'],
    [{ imageGCLowThresholdPercent: 85 }, 'imageGCLowThresholdPercent', 'must be less than imageGCHighThresholdPercent 85'],
    [{ nodeLeaseDurationSeconds: 0 }, 'nodeLeaseDurationSeconds', 'greater than 0'],
    [{ maxParallelImagePulls: 0, serializeImagePulls: false }, 'maxParallelImagePulls', 'positive'],
    [{ maxParallelImagePulls: 5 }, 'maxParallelImagePulls', 'serializeImagePulls'],
    [{ containerLogMaxFiles: 1 }, 'containerLogMaxFiles', 'greater than 1'],
    [{ containerLogMaxSize: '10MB' }, 'containerLogMaxSize', 'invalid quantity "10MB"'],
    [{ podLogsDir: 'logs' }, 'podLogsDir', 'absolute'],
    [{ podLogsDir: '/var/log//pods' }, 'podLogsDir', 'normalized'],
    [{ containerRuntimeEndpoint: '' }, 'containerRuntimeEndpoint', 'not specified'],
    [{ staticPodURL: 'not a url' }, 'staticPodURL', 'http(s) URL'],
    [{ address: 'localhost' }, 'address', 'IP address'],
    [{ clusterDNS: ['10.96.0.10', 'dns'] }, 'clusterDNS[1]', 'IP address'],
    [{ syncFrequency: 0 }, 'syncFrequency', 'at least 1s'],
    [{ fileCheckFrequency: 1 }, 'fileCheckFrequency', "must be at least 1s (kubelet-ts's minimum: a shorter period spins), got 1ms"],
    [{ httpCheckFrequency: 999 }, 'httpCheckFrequency', 'at least 1s'],
    [{ runtimeRequestTimeout: 0 }, 'runtimeRequestTimeout', 'greater than 0'],
    [{ fileCheckFrequency: 2 ** 31 }, 'fileCheckFrequency', 'at most 596h31m23.647s'],
    [{ syncFrequency: 1000 * 3_600_000 }, 'syncFrequency', 'at most 596h31m23.647s'],
    [{ cgroupDriver: 'openrc' as 'systemd' }, 'cgroupDriver', 'must be "cgroupfs" or "systemd", got "openrc"'],
    [{ featureGates: { EventedPLEG: true, Foo: true } }, 'featureGates[Foo]', 'unrecognized feature gate: Foo'],
    [{ containerLogMaxSize: '10E' }, 'containerLogMaxSize', 'out of range'],
    [{ systemReserved: { memory: '1e300' } }, 'systemReserved[memory]', 'out of range'],
    [{ shutdownGracePeriod: 500 }, 'shutdownGracePeriod', '>= 1s'],
    [{ shutdownGracePeriod: 10_000, shutdownGracePeriodCriticalPods: 20_000 }, 'shutdownGracePeriodCriticalPods', 'must be <= shutdownGracePeriod 10s'],
    [{ systemReserved: { gpu: '1' } }, 'systemReserved[gpu]', 'cannot reserve "gpu"'],
    [{ kubeReserved: { memory: '-1Gi' } }, 'kubeReserved[memory]', 'cannot be negative'],
    [{ kubeReserved: { cpu: 'lots' } }, 'kubeReserved[cpu]', 'invalid quantity "lots"'],
    [{ enforceNodeAllocatable: ['pods', 'system-reserved'] }, 'systemReservedCgroup', 'must be specified'],
    [{ enforceNodeAllocatable: ['pods', 'pods'] }, 'enforceNodeAllocatable', 'duplicated'],
    [{ enforceNodeAllocatable: ['none', 'pods'] }, 'enforceNodeAllocatable', '"none"'],
    [{ enforceNodeAllocatable: ['everything'] }, 'enforceNodeAllocatable', '"everything"'],
    [{ cgroupsPerQOS: false }, 'cgroupsPerQOS', '"pods"'],
    [{ evictionHard: { 'memory.free': '1Gi' } }, 'evictionHard[memory.free]', 'unsupported eviction signal'],
    [{ evictionHard: { 'nodefs.available': '120%' } }, 'evictionHard[nodefs.available]', '<= 100%'],
    [{ evictionHard: { 'memory.available': '0' } }, 'evictionHard[memory.available]', 'positive'],
    [{ evictionSoft: { 'memory.available': '1Gi' } }, 'evictionSoftGracePeriod[memory.available]', 'grace period must be specified'],
    [{ evictionMinimumReclaim: { 'memory.available': 'x' } }, 'evictionMinimumReclaim[memory.available]', 'invalid quantity'],
    [{ statsBackend: 'proc' as KubeletConfig['statsBackend'] }, 'statsBackend', '"proc"'],
    [{ oomWatcher: 'dmesg' as KubeletConfig['oomWatcher'] }, 'oomWatcher', '"dmesg"'],
  ];
  for (const [patch, field, fragment] of invalid) {
    it(`rejects ${JSON.stringify(patch)} naming ${field}`, () => {
      const c = { ...defaultKubeletConfig(), ...patch };
      assert.throws(() => validateKubeletConfig(c), isConfigError(field, fragment));
    });
  }

  it('accepts the documented ways of disabling things', () => {
    const c = defaultKubeletConfig();
    c.healthzPort = 0;
    c.readOnlyPort = 0;
    c.evictionHard = { 'memory.available': '0%', 'nodefs.available': '100%' };
    c.enforceNodeAllocatable = ['none'];
    c.staticPodURL = 'https://example.com/pods.yaml';
    c.shutdownGracePeriod = 30_000;
    c.shutdownGracePeriodCriticalPods = 10_000;
    c.maxParallelImagePulls = 5;
    c.serializeImagePulls = false;
    c.systemReserved = { cpu: '500m', memory: '1Gi', 'ephemeral-storage': '1Gi', pid: '1000' };
    validateKubeletConfig(c);
  });
});

describe('resolvConf and configMapAndSecretChangeDetectionStrategy', () => {
  it('default to /etc/resolv.conf and Watch', () => {
    const { config } = fromYaml('');
    assert.equal(config.resolvConf, '/etc/resolv.conf');
    assert.equal(config.configMapAndSecretChangeDetectionStrategy, 'Watch');
  });

  it('an explicit empty resolvConf means none; a path is kept', () => {
    assert.equal(fromYaml('resolvConf: ""\n').config.resolvConf, '');
    assert.equal(fromYaml('resolvConf: /run/systemd/resolve/resolv.conf\n').config.resolvConf, '/run/systemd/resolve/resolv.conf');
  });

  it('refuses an unknown change detection strategy, naming the field', () => {
    const { config } = fromYaml('configMapAndSecretChangeDetectionStrategy: Poll\n');
    assert.throws(() => validateKubeletConfig(config), isConfigError('configMapAndSecretChangeDetectionStrategy', 'must be one of "Get", "Cache", "Watch"', 'Poll'));
    validateKubeletConfig(fromYaml('configMapAndSecretChangeDetectionStrategy: Get\n').config);
  });
});
