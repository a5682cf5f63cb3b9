// examples/kubeadm: the kubelet unit, kubeadm's drop-in and the files kubeadm writes, expanded as
// systemd would expand them, give a command line kubelet-ts's loader accepts whole, ending with
// the config kubeadm meant (flags over the file, as upstream).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { ConfigError } from '../../src/config/errors.js';
import { FIELD_SUPPORT, loadConfig } from '../../src/config/index.js';
import { repoRoot } from '../fixtures/runtime.js';
import { expandService } from '../fixtures/systemd-unit.js';

const dir = join(repoRoot(), 'examples', 'kubeadm');
const read = (rel: string): string => readFileSync(join(dir, rel), 'utf8');

/** The node's files, by the absolute paths the unit and the flags name. */
function nodeFiles(withEtcDefault: boolean): (path: string) => string {
  const files: Record<string, string> = {
    '/var/lib/kubelet/kubeadm-flags.env': read('kubeadm-flags.env'),
    '/var/lib/kubelet/config.yaml': read('config.yaml'),
  };
  if (withEtcDefault) files['/etc/default/kubelet'] = read('etc-default/kubelet');
  return (path) => {
    const text = files[path];
    if (text === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
    return text;
  };
}

/** kubeadm writes cgroupDriver: systemd; where that driver is not implemented yet, the loader must refuse it by name. */
async function load(argv: string[], readFile: (p: string) => string) {
  const rf = async (p: string): Promise<string> => readFile(p);
  if (FIELD_SUPPORT.cgroupDriver === 'implemented') return loadConfig(argv, rf);
  await assert.rejects(loadConfig(argv, rf), (e: unknown) => e instanceof ConfigError && e.field === 'cgroupDriver');
  return loadConfig(argv, async (p) => readFile(p).replace('cgroupDriver: systemd', 'cgroupDriver: cgroupfs'));
}

describe('examples/kubeadm: started the way kubeadm starts the kubelet', () => {
  const unit = read('kubelet.service');
  const dropIn = read('kubelet.service.d/10-kubeadm.conf');

  it('expands to kubeadm\'s command line: kubeconfig, config, kubeadm\'s flags, then the admin\'s', () => {
    const { argv } = expandService(unit, [dropIn], nodeFiles(true));
    assert.deepEqual(argv, [
      '/usr/bin/kubelet',
      '--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf', '--kubeconfig=/etc/kubernetes/kubelet.conf',
      '--config=/var/lib/kubelet/config.yaml',
      '--container-runtime-endpoint=unix:///run/containerd/containerd.sock', '--pod-infra-container-image=registry.k8s.io/pause:3.10',
      '--node-labels=example.com/pool=edge', '--max-pods=150',
    ]);
  });

  it('kubelet-ts\'s loader accepts every argument and ends with the expected config', async () => {
    const { argv } = expandService(unit, [dropIn], nodeFiles(true));
    const { config, flags, warnings } = await load(argv.slice(1), nodeFiles(true));
    assert.equal(flags.kubeconfig, '/etc/kubernetes/kubelet.conf');
    assert.equal(flags.bootstrapKubeconfig, '/etc/kubernetes/bootstrap-kubelet.conf');
    assert.equal(flags.configFile, '/var/lib/kubelet/config.yaml');
    assert.equal(flags.podInfraContainerImage, 'registry.k8s.io/pause:3.10');
    assert.deepEqual(flags.nodeLabels, { 'example.com/pool': 'edge' });
    // flags win over the file; the file's zero values take upstream's defaults
    assert.equal(config.containerRuntimeEndpoint, 'unix:///run/containerd/containerd.sock');
    assert.equal(config.maxPods, 150);
    assert.equal(config.syncFrequency, 60_000);
    assert.equal(config.nodeStatusUpdateFrequency, 10_000);
    assert.equal(config.runtimeRequestTimeout, 120_000);
    // the file's own settings
    assert.deepEqual(config.clusterDNS, ['10.96.0.10']);
    assert.equal(config.clusterDomain, 'cluster.local');
    assert.equal(config.staticPodPath, '/etc/kubernetes/manifests');
    assert.equal(config.authorization.mode, 'Webhook');
    assert.equal(config.authentication.webhook.enabled, true);
    assert.equal(config.authentication.anonymous.enabled, false);
    assert.equal(config.authentication.x509.clientCAFile, '/etc/kubernetes/pki/ca.crt');
    assert.equal(config.failSwapOn, true);
    assert.equal(config.oomScoreAdj, -999);
    if (FIELD_SUPPORT.cgroupDriver === 'implemented') assert.equal(config.cgroupDriver, 'systemd');
    // upstream's deprecation warnings for the config flags kubeadm and the admin pass, nothing unknown
    for (const f of ['container-runtime-endpoint', 'pod-infra-container-image', 'max-pods']) {
      assert.ok(warnings.some((w) => w.startsWith(`Flag --${f} has been deprecated, `)), `${f}: ${warnings.join(' | ')}`);
    }
    assert.ok(!warnings.some((w) => /unknown/i.test(w)), warnings.join('\n'));
  });

  it('without /etc/default/kubelet (optional) the admin\'s flags are simply absent', async () => {
    const { argv, missingOptional } = expandService(unit, [dropIn], nodeFiles(false));
    assert.deepEqual(missingOptional, ['/etc/default/kubelet']);
    assert.ok(!argv.includes('--max-pods=150'));
    const { config } = await load(argv.slice(1), nodeFiles(false));
    assert.equal(config.maxPods, 110);
  });
});
