import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError } from '../../src/config/errors.js';
import { loadConfig, parseKubeletFlags, type ReadFileFn, usage } from '../../src/config/index.js';

const CONFIG_YAML = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 250
syncFrequency: 30s
cgroupDriver: cgroupfs
readOnlyPort: 0
healthzPort: 10248
staticPodPath: manifests
featureGates:
  EventedPLEG: true
  NodeSwap: true
rotateCertificates: true
`;

/** A readFile double serving files from a map. */
function fakeReadFile(files: Record<string, string>): ReadFileFn & { reads: string[] } {
  const reads: string[] = [];
  const fn = async (path: string): Promise<string> => {
    reads.push(path);
    const text = files[path];
    if (text === undefined) {
      const err = new Error(`ENOENT: no such file, open '${path}'`) as NodeJS.ErrnoException;
      err.code = 'ENOENT';
      throw err;
    }
    return text;
  };
  return Object.assign(fn, { reads });
}

function isFlagError(field: string, fragment: string) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof ConfigError, String(err));
    assert.equal(err.field, field);
    assert.ok(err.message.includes(fragment), err.message);
    return true;
  };
}

describe('parseKubeletFlags', () => {
  it('reads --flag=value, --flag value, shorthands and booleans', () => {
    const { flags, overrides } = parseKubeletFlags([
      '--kubeconfig=/etc/kubernetes/kubelet.conf',
      '--root-dir', '/data/kubelet',
      '--hostname-override=node-a',
      '--node-ip', '10.0.0.5,fd00::5',
      '-v', '4',
      '--max-pods=300',
      '--sync-frequency', '15s',
      '--fail-swap-on=false',
      '--feature-gates=EventedPLEG=true,NodeSwap=false',
      '--stats-backend', 'fs',
    ]);
    assert.equal(flags.kubeconfig, '/etc/kubernetes/kubelet.conf');
    assert.equal(flags.rootDir, '/data/kubelet');
    assert.equal(flags.hostnameOverride, 'node-a');
    assert.deepEqual(flags.nodeIP, ['10.0.0.5', 'fd00::5']);
    assert.equal(flags.verbosity, 4);
    assert.equal(flags.help, false);
    assert.deepEqual(overrides, {
      maxPods: 300,
      syncFrequency: 15_000,
      failSwapOn: false,
      featureGates: { EventedPLEG: true, NodeSwap: false },
      statsBackend: 'fs',
    });
  });

  it('has upstream defaults for flag-only settings', () => {
    const { flags, overrides, warnings } = parseKubeletFlags([]);
    assert.equal(flags.kubeconfig, undefined);
    assert.equal(flags.configFile, undefined);
    assert.deepEqual(flags, { rootDir: '/var/lib/kubelet', nodeIP: [], verbosity: 0, help: false });
    assert.deepEqual(overrides, {});
    assert.deepEqual(warnings, []);
  });

  for (const argv of [['-v=3'], ['-v', '3'], ['--v=3'], ['--v', '3'], ['-v3']]) {
    it(`reads verbosity from ${argv.join(' ')}`, () => {
      assert.equal(parseKubeletFlags(argv).flags.verbosity, 3);
    });
  }

  it('a bare boolean flag means true and does not take the next argument', () => {
    assert.equal(parseKubeletFlags(['--fail-swap-on']).overrides.failSwapOn, true);
    assert.throws(() => parseKubeletFlags(['--fail-swap-on', 'false']), isFlagError('', 'unknown command "false"'));
  });

  it('--help and -h', () => {
    assert.equal(parseKubeletFlags(['--help']).flags.help, true);
    assert.equal(parseKubeletFlags(['-h']).flags.help, true);
  });

  it('merges repeated --feature-gates', () => {
    const { overrides } = parseKubeletFlags(['--feature-gates=EventedPLEG=true', '--feature-gates', 'NodeSwap=false,EventedPLEG=false']);
    assert.deepEqual(overrides.featureGates, { EventedPLEG: false, NodeSwap: false });
  });

  it('warns that config-field flags are deprecated, as upstream', () => {
    const { warnings } = parseKubeletFlags(['--max-pods=10', '--max-pods=20', '-v=2', '--oom-watcher=off']);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /^Flag --max-pods has been deprecated, This parameter should be set via the config file/);
  });

  const bad: Array<[string[], string, string]> = [
    [['--no-such-flag=1'], '--no-such-flag', 'unknown flag'],
    [['--no-such-flag'], '--no-such-flag', 'unknown flag'],
    [['-x'], '-x', 'unknown shorthand flag "x"'],
    [['--max-pods=lots'], '--max-pods', 'invalid argument "lots"'],
    [['--max-pods'], '--max-pods', 'flag needs an argument'],
    [['--healthz-port=99999999999'], '--healthz-port', 'out of range'],
    [['--sync-frequency=10'], '--sync-frequency', 'missing unit in duration "10"'],
    [['--fail-swap-on=maybe'], '--fail-swap-on', 'invalid argument "maybe"'],
    [['--feature-gates=A'], '--feature-gates', 'missing bool value'],
    [['--feature-gates=NodeSwap=yes'], '--feature-gates', 'invalid value of NodeSwap=yes'],
    [['--feature-gates=Foo=true'], '--feature-gates', 'unrecognized feature gate: Foo'],
    [['--feature-gates=EventedPLEG=true,evictedpleg=true'], '--feature-gates', 'unrecognized feature gate: evictedpleg'],
    [['--node-ip=node-a'], '--node-ip', 'is not an IP address'],
    [['-v=high'], '-v', 'invalid argument "high"'],
    [['run'], '', 'unknown command "run"'],
    [['--', 'x'], '', 'unknown command "x"'],
  ];
  for (const [argv, field, fragment] of bad) {
    it(`rejects ${argv.join(' ')}`, () => {
      assert.throws(() => parseKubeletFlags(argv), isFlagError(field, fragment));
    });
  }

  it('names the flag in the error message', () => {
    assert.throws(() => parseKubeletFlags(['--bogus']), /flag --bogus: unknown flag/);
  });
});

describe('loadConfig', () => {
  it('without --config: defaults plus upstream legacy command-line defaults, standalone', async () => {
    const readFile = fakeReadFile({});
    const { config, flags, warnings } = await loadConfig([], readFile);
    assert.deepEqual(readFile.reads, []);
    assert.equal(flags.kubeconfig, undefined);
    assert.equal(config.maxPods, 110);
    assert.equal(config.containerRuntimeEndpoint, 'unix:///run/containerd/containerd.sock');
    assert.equal(config.authentication.anonymous.enabled, true);
    assert.equal(config.authentication.webhook.enabled, false);
    assert.equal(config.authorization.mode, 'AlwaysAllow');
    assert.equal(config.readOnlyPort, 10255);
    assert.deepEqual(warnings, []);
  });

  it('reads --config and lets flags given on the command line override it', async () => {
    const readFile = fakeReadFile({ '/etc/kubelet/config.yaml': CONFIG_YAML });
    const { config, flags, warnings } = await loadConfig(
      [
        '--config=/etc/kubelet/config.yaml',
        '--max-pods', '500',
        '--read-only-port=10255',
        '--cgroup-driver=cgroupfs',
        '--feature-gates=NodeSwap=false,KubeletTracing=true',
        '--container-runtime-endpoint=unix:///run/crio/crio.sock',
        '--pod-manifest-path=/srv/static',
      ],
      readFile,
    );
    assert.deepEqual(readFile.reads, ['/etc/kubelet/config.yaml']);
    assert.equal(flags.configFile, '/etc/kubelet/config.yaml');
    assert.equal(config.maxPods, 500);
    assert.equal(config.readOnlyPort, 10255);
    assert.equal(config.cgroupDriver, 'cgroupfs');
    assert.deepEqual(config.featureGates, { EventedPLEG: true, NodeSwap: false, KubeletTracing: true });
    assert.equal(config.containerRuntimeEndpoint, 'unix:///run/crio/crio.sock');
    assert.equal(config.staticPodPath, '/srv/static');
    // Not overridden: the file's value, and the file's secure v1beta1 defaults.
    assert.equal(config.syncFrequency, 30_000);
    assert.equal(config.authorization.mode, 'Webhook');
    assert.equal(config.authentication.anonymous.enabled, false);
    assert.equal(config.rotateCertificates, true);
    assert.ok(!warnings.some((w) => w.includes('rotateCertificates')), JSON.stringify(warnings));
    // Set to non-defaults, and not implemented: each is named (the gates by the file and the flag); maxPods is implemented.
    assert.ok(!warnings.some((w) => w.includes('field maxPods')), JSON.stringify(warnings));
    assert.ok(warnings.includes('feature gate NodeSwap is not implemented by kubelet-ts yet; ignored'));
    assert.ok(warnings.includes('feature gate KubeletTracing is not implemented by kubelet-ts yet; ignored'));
    assert.ok(!warnings.some((w) => w.includes('EventedPLEG')), 'EventedPLEG is implemented');
    assert.ok(warnings.some((w) => w.startsWith('Flag --max-pods has been deprecated')));
  });

  it('flag defaults do not override the file', async () => {
    const readFile = fakeReadFile({ '/etc/kubelet/config.yaml': CONFIG_YAML });
    const { config } = await loadConfig(['--config', '/etc/kubelet/config.yaml'], readFile);
    assert.equal(config.cgroupDriver, 'cgroupfs');
    assert.equal(config.maxPods, 250);
    assert.equal(config.readOnlyPort, 0);
    // Relative paths in the file are relative to the file's directory.
    assert.equal(config.staticPodPath, '/etc/kubelet/manifests');
  });

  it('validates after flags apply', async () => {
    const readFile = fakeReadFile({ '/c.yaml': CONFIG_YAML });
    await assert.rejects(
      loadConfig(['--config=/c.yaml', '--healthz-port=70000'], readFile),
      (err: unknown) => err instanceof ConfigError && err.field === 'healthzPort' && err.file === '/c.yaml',
    );
    await assert.rejects(
      loadConfig(['--sync-frequency=0s'], readFile),
      (err: unknown) => err instanceof ConfigError && err.field === 'syncFrequency',
    );
    await assert.rejects(
      loadConfig(['--file-check-frequency=1ns'], readFile),
      (err: unknown) => err instanceof ConfigError && err.field === 'fileCheckFrequency' && err.message.includes('at least 1s'),
    );
  });

  it('names every not-implemented setting given a non-default value, and not --kubeconfig (API server mode works)', async () => {
    const { flags, warnings } = await loadConfig(
      ['--kubeconfig=/etc/kubernetes/kubelet.conf', '--max-pods=20', '--fail-swap-on=false', '--feature-gates=NodeSwap=true'],
      fakeReadFile({}),
    );
    assert.equal(flags.kubeconfig, '/etc/kubernetes/kubelet.conf');
    assert.ok(!warnings.some((w) => w.includes('kubeconfig') || w.includes('maxPods')), JSON.stringify(warnings));
    assert.ok(!warnings.some((w) => w.includes('field failSwapOn')), 'failSwapOn is implemented');
    assert.ok(warnings.includes('feature gate NodeSwap is not implemented by kubelet-ts yet; ignored'));
  });

  it('says nothing about not-implemented fields left at their defaults, with or without a file', async () => {
    const yaml = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\ncgroupDriver: cgroupfs\nfailSwapOn: true\n';
    const withFile = await loadConfig(['--config=/c.yaml'], fakeReadFile({ '/c.yaml': yaml }));
    assert.deepEqual(withFile.warnings, []);
    // Without --config the legacy defaults (AlwaysAllow, anonymous auth, port 10255) are the baseline.
    const without = await loadConfig([], fakeReadFile({}));
    assert.deepEqual(without.warnings, []);
  });

  it('authentication is implemented: setting its nested leaves warns about nothing', async () => {
    const yaml = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  webhook:\n    cacheTTL: 5m\n';
    const { warnings, config } = await loadConfig(['--config=/c.yaml'], fakeReadFile({ '/c.yaml': yaml }));
    assert.deepEqual(warnings, []);
    assert.equal(config.authentication.webhook.cacheTTL, 300_000);
  });

  it('rejects an unknown feature gate in the file, with upstream\'s message', async () => {
    const yaml = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  Foo: true\n';
    await assert.rejects(
      loadConfig(['--config=/c.yaml'], fakeReadFile({ '/c.yaml': yaml })),
      (err: unknown) => err instanceof ConfigError && err.field === 'featureGates[Foo]' && err.message.includes('unrecognized feature gate: Foo'),
    );
  });

  it('reports a missing config file', async () => {
    await assert.rejects(
      loadConfig(['--config=/nope.yaml'], fakeReadFile({})),
      (err: unknown) => err instanceof ConfigError && err.message.includes('/nope.yaml') && err.message.includes('ENOENT'),
    );
  });

  it('reports a bad config file with its name and field', async () => {
    const readFile = fakeReadFile({ '/bad.yaml': 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: lots\n' });
    await assert.rejects(
      loadConfig(['--config', '/bad.yaml'], readFile),
      (err: unknown) =>
        err instanceof ConfigError && err.message === 'kubelet config /bad.yaml: field maxPods: expected an integer, got "lots"',
    );
  });

  it('rejects an unknown flag before reading anything', async () => {
    const readFile = fakeReadFile({ '/c.yaml': CONFIG_YAML });
    await assert.rejects(loadConfig(['--config=/c.yaml', '--max-podz=3'], readFile), isFlagError('--max-podz', 'unknown flag'));
    assert.deepEqual(readFile.reads, []);
  });

  it('returns at once for --help', async () => {
    const readFile = fakeReadFile({});
    const { flags } = await loadConfig(['--config=/c.yaml', '--help'], readFile);
    assert.equal(flags.help, true);
    assert.deepEqual(readFile.reads, []);
  });
});

describe('usage', () => {
  it('lists every flag with its default', () => {
    const text = usage();
    for (const f of [
      '--config', '--kubeconfig', '--container-runtime-endpoint', '--image-service-endpoint', '--pod-manifest-path',
      '--manifest-url', '--root-dir', '--hostname-override', '--node-ip', '-v, --v', '--read-only-port',
      '--healthz-port', '--healthz-bind-address', '--cgroup-root', '--cgroup-driver', '--max-pods',
      '--sync-frequency', '--file-check-frequency', '--http-check-frequency', '--runtime-request-timeout',
      '--fail-swap-on', '--feature-gates', '--stats-backend', '--oom-watcher', '-h, --help',
    ]) {
      assert.ok(text.includes(f), `usage lacks ${f}`);
    }
    assert.ok(text.includes('(default /var/lib/kubelet)'));
    assert.ok(text.includes('(default unix:///run/containerd/containerd.sock)'));
  });
});
