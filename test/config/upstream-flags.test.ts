// Every flag of upstream's kubelet command line (1.33–1.34) is accepted and classified: a
// deprecated one prints upstream's warning, one kubelet-ts does not act on is named as not
// implemented when set, an implemented one reaches the config or the flags. An unknown flag
// stays an error.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError } from '../../src/config/errors.js';
import { classifyFlag, flagNames, loadConfig, parseKubeletFlags } from '../../src/config/index.js';

/**
 * The flags of upstream's kubelet 1.34 (its command-line reference: options.go KubeletFlags,
 * AddKubeletConfigFlags, the logging flags including the JSON format's, -v/--vmodule, --version,
 * -h/--help) plus the deprecated ones the 1.33-era options.go still registered.
 */
const UPSTREAM_1_34 = [
  'address', 'allowed-unsafe-sysctls', 'anonymous-auth', 'authentication-token-webhook',
  'authentication-token-webhook-cache-ttl', 'authorization-mode', 'authorization-webhook-cache-authorized-ttl',
  'authorization-webhook-cache-unauthorized-ttl', 'bootstrap-kubeconfig', 'cert-dir', 'cgroup-driver', 'cgroup-root',
  'cgroups-per-qos', 'client-ca-file', 'cloud-provider', 'cluster-dns', 'cluster-domain', 'config', 'config-dir',
  'container-log-max-files', 'container-log-max-size', 'container-runtime-endpoint', 'contention-profiling',
  'cpu-cfs-quota', 'cpu-cfs-quota-period', 'cpu-manager-policy', 'cpu-manager-policy-options',
  'cpu-manager-reconcile-period', 'enable-controller-attach-detach', 'enable-debugging-handlers', 'enable-server',
  'enforce-node-allocatable', 'event-burst', 'event-qps', 'eviction-hard', 'eviction-max-pod-grace-period',
  'eviction-minimum-reclaim', 'eviction-pressure-transition-period', 'eviction-soft', 'eviction-soft-grace-period',
  'exit-on-lock-contention', 'experimental-allocatable-ignore-eviction', 'experimental-mounter-path', 'fail-cgroupv1',
  'fail-swap-on', 'feature-gates', 'file-check-frequency', 'hairpin-mode', 'healthz-bind-address', 'healthz-port',
  'help', 'hostname-override', 'http-check-frequency', 'image-credential-provider-bin-dir',
  'image-credential-provider-config', 'image-gc-high-threshold', 'image-gc-low-threshold', 'image-service-endpoint',
  'kernel-memcg-notification', 'kube-api-burst', 'kube-api-content-type', 'kube-api-qps', 'kube-reserved',
  'kube-reserved-cgroup', 'kubeconfig', 'kubelet-cgroups', 'local-storage-capacity-isolation', 'lock-file',
  'log-flush-frequency', 'log-json-info-buffer-size', 'log-json-split-stream', 'log-text-info-buffer-size',
  'log-text-split-stream', 'logging-format', 'make-iptables-util-chains', 'manifest-url', 'manifest-url-header',
  'max-open-files', 'max-pods', 'maximum-dead-containers', 'maximum-dead-containers-per-container',
  'memory-manager-policy', 'minimum-container-ttl-duration', 'minimum-image-ttl-duration', 'node-ip', 'node-labels',
  'node-status-max-images', 'node-status-update-frequency', 'oom-score-adj', 'pod-cidr', 'pod-infra-container-image',
  'pod-manifest-path', 'pod-max-pids', 'pods-per-core', 'port', 'protect-kernel-defaults', 'provider-id',
  'qos-reserved', 'read-only-port', 'register-node', 'register-with-taints', 'registry-burst', 'registry-qps',
  'reserved-cpus', 'reserved-memory', 'resolv-conf', 'root-dir', 'rotate-certificates', 'rotate-server-certificates',
  'runonce', 'runtime-cgroups', 'runtime-request-timeout', 'seccomp-default', 'serialize-image-pulls',
  'streaming-connection-idle-timeout', 'sync-frequency', 'system-cgroups', 'system-reserved', 'system-reserved-cgroup',
  'tls-cert-file', 'tls-cipher-suites', 'tls-min-version', 'tls-private-key-file', 'topology-manager-policy',
  'topology-manager-policy-options', 'topology-manager-scope', 'v', 'version', 'vmodule', 'volume-plugin-dir',
  'volume-stats-agg-period',
];
const OLDER_DEPRECATED = ['cloud-config', 'register-schedulable', 'keep-terminated-pod-volumes', 'iptables-masquerade-bit', 'iptables-drop-bit'];

/** Flags upstream does not mark deprecated (everything else it does, with a warning). */
const NOT_DEPRECATED = new Set([
  'bootstrap-kubeconfig', 'cert-dir', 'cloud-provider', 'config', 'config-dir', 'exit-on-lock-contention', 'help',
  'hostname-override', 'image-credential-provider-bin-dir', 'image-credential-provider-config', 'kubeconfig',
  'lock-file', 'log-flush-frequency', 'node-ip', 'node-labels', 'provider-id', 'root-dir', 'runtime-cgroups',
  'seccomp-default', 'v', 'version', 'vmodule', 'fail-cgroupv1',
]);

/** A value each flag accepts, other than upstream's default where kubelet-ts does not act on it. */
const SAMPLES: Record<string, string> = {
  'node-ip': '10.0.0.1', 'node-labels': 'a=b', 'tls-cipher-suites': 'TLS_AES_128_GCM_SHA256', 'feature-gates': 'EventedPLEG=true',
  'eviction-hard': 'memory.available<1Gi', 'eviction-soft': 'memory.available<2Gi', 'eviction-soft-grace-period': 'memory.available=1m30s', 'eviction-minimum-reclaim': 'memory.available=1Gi',
  'register-with-taints': 'dedicated=infra:NoSchedule', 'manifest-url-header': 'a:hello,b:again', version: 'v1.34.1',
  'cpu-cfs-quota': 'false', 'cgroups-per-qos': 'false', 'enable-controller-attach-detach': 'false', 'register-schedulable': 'false',
  'logging-format': 'json', 'log-flush-frequency': '1s', 'cpu-manager-reconcile-period': '1s', 'cpu-cfs-quota-period': '50ms',
  'topology-manager-scope': 'pod', 'hairpin-mode': 'none', 'authorization-mode': 'Webhook', 'cgroup-driver': 'systemd',
  'cloud-provider': 'external',
};

function sample(name: string): string {
  if (SAMPLES[name] !== undefined) return SAMPLES[name];
  if (/(^|-)(qps|burst|port|threshold|files|pods|grace-period|max-images|max-pids|adj|containers|per-container|per-core|bit|max-open-files|v)$/.test(name)) return '7';
  if (/(period|ttl|frequency|timeout|duration)$/.test(name)) return '3s';
  if (/(reserved|options|qos-reserved)$/.test(name) && !name.endsWith('-cgroup') && name !== 'reserved-cpus' && name !== 'reserved-memory') return 'cpu=1';
  if (['allowed-unsafe-sysctls', 'cluster-dns', 'enforce-node-allocatable'].includes(name)) return name === 'cluster-dns' ? '10.96.0.10' : 'pods';
  return 'x';
}

describe('the upstream kubelet command line (1.33–1.34)', () => {
  it('accepts and classifies every upstream flag', async () => {
    const counts = { implemented: 0, deprecated: 0, notImplemented: 0 };
    for (const name of [...UPSTREAM_1_34, ...OLDER_DEPRECATED]) {
      const c = classifyFlag(name);
      assert.ok(c, `--${name} is not known`);
      let parsed;
      try {
        parsed = parseKubeletFlags([`--${name}=${sample(name)}`]);
      } catch (err) {
        // a boolean takes only true/false (the samples above give false where upstream's default is true)
        assert.ok(err instanceof ConfigError && /true or false/.test(err.message), `--${name}: ${String(err)}`);
        parsed = parseKubeletFlags([`--${name}=true`]);
      }
      const deprecation = parsed.warnings.find((w) => w.startsWith(`Flag --${name} has been deprecated, `));
      assert.equal(c.deprecated, !NOT_DEPRECATED.has(name), `--${name}: deprecated as upstream`);
      assert.equal(deprecation !== undefined, c.deprecated, `--${name}: deprecation warning printed iff deprecated: ${parsed.warnings.join(' | ')}`);
      const named = parsed.warnings.some((w) => w.includes(`--${name}=`) && w.includes('not implemented'));
      if (!c.implemented && !named) {
        // a modeled field kubelet-ts does not act on: named by the loader (field ...), or its value refused
        const value = sample(name) === 'x' ? '/x' : sample(name);
        const loaded = await loadConfig([`--${name}=${value === 'true' ? 'false' : value}`]).then((l) => l.warnings.join(' | '), (e: unknown) => (e instanceof ConfigError ? `refused: ${e.message}` : String(e)));
        assert.match(loaded, /not implemented|refused/, `--${name}: not implemented, so named at start or refused: ${loaded}`);
      } else if (c.implemented) assert.ok(!named, `--${name}: implemented, so not named as not implemented`);
      if (!c.implemented) counts.notImplemented++;
      else if (c.deprecated) counts.deprecated++;
      else counts.implemented++;
    }
    // The figures of the report: every upstream flag falls in one class.
    assert.equal(counts.implemented + counts.deprecated + counts.notImplemented, UPSTREAM_1_34.length + OLDER_DEPRECATED.length);
    process.stdout.write(`# flags: ${counts.implemented} implemented, ${counts.deprecated} deprecated (mapped), ${counts.notImplemented} not implemented; ${flagNames().length} known\n`);
  });

  it('keeps an unknown flag an error', () => {
    assert.throws(() => parseKubeletFlags(['--no-such-flag=1']), (e: unknown) => e instanceof ConfigError && e.field === '--no-such-flag');
  });

  it('maps the deprecated config flags onto the config, over the file (flags win)', async () => {
    const file = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDomain: file.local\noomScoreAdj: -10\nevictionHard:\n  memory.available: 50Mi\n';
    const { config, warnings } = await loadConfig(
      ['--config=/k.yaml', '--cluster-domain=flag.local', '--eviction-hard=memory.available<1Gi,nodefs.available<5%', '--register-with-taints=a=b:NoSchedule,c:NoExecute',
        '--kube-reserved=cpu=100m', '--kube-reserved=memory=1Gi', '--manifest-url-header=a:1,a:2', '--oom-score-adj=-500', '--eviction-soft-grace-period=memory.available=1m30s'],
      async () => file,
    );
    assert.equal(config.clusterDomain, 'flag.local');
    assert.equal(config.oomScoreAdj, -500);
    assert.deepEqual(config.evictionHard, { 'memory.available': '1Gi', 'nodefs.available': '5%' });
    assert.deepEqual(config.registerWithTaints, [{ key: 'a', value: 'b', effect: 'NoSchedule' }, { key: 'c', effect: 'NoExecute' }]);
    assert.deepEqual(config.kubeReserved, { cpu: '100m', memory: '1Gi' });
    assert.deepEqual(config.staticPodURLHeader, { a: ['1', '2'] });
    assert.deepEqual(config.evictionSoftGracePeriod, { 'memory.available': 90_000 });
    assert.ok(warnings.includes("Flag --cluster-domain has been deprecated, This parameter should be set via the config file specified by the Kubelet's --config flag. See https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for more information."));
  });

  it('maps the deprecated container GC flags onto the GC policy, with upstream\'s own warning', () => {
    const { flags, warnings } = parseKubeletFlags(['--maximum-dead-containers=20', '--maximum-dead-containers-per-container=3', '--minimum-container-ttl-duration=1m']);
    assert.deepEqual(flags.containerGCPolicy, { minAgeMs: 60_000, maxPerPodContainer: 3, maxContainers: 20 });
    assert.ok(warnings.includes('Flag --maximum-dead-containers has been deprecated, Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.'));
  });

  it('names a not-implemented flag only when set off upstream\'s default', () => {
    assert.deepEqual(parseKubeletFlags(['--cpu-manager-policy=none']).warnings.filter((w) => w.includes('not implemented')), []);
    assert.deepEqual(parseKubeletFlags(['--cpu-manager-policy=static']).warnings.filter((w) => w.includes('not implemented')).length, 1);
  });

  it('refuses a bad value naming the flag', () => {
    assert.throws(() => parseKubeletFlags(['--register-with-taints=a=b:Sometimes']), (e: unknown) => e instanceof ConfigError && e.field === '--register-with-taints');
    assert.throws(() => parseKubeletFlags(['--eviction-hard=memory.available=1Gi']), (e: unknown) => e instanceof ConfigError && e.field === '--eviction-hard');
    assert.throws(() => parseKubeletFlags(['--version=sometimes']), (e: unknown) => e instanceof ConfigError && e.field === '--version');
    assert.throws(() => parseKubeletFlags(['--oom-score-adj=x']), (e: unknown) => e instanceof ConfigError && e.field === '--oom-score-adj');
  });

  it('takes --version bare, =raw and =vX.Y.Z', () => {
    assert.equal(parseKubeletFlags(['--version']).flags.version, 'true');
    assert.equal(parseKubeletFlags(['--version=raw']).flags.version, 'raw');
    assert.equal(parseKubeletFlags(['--version=v1.34.2']).flags.version, 'v1.34.2');
  });
});
