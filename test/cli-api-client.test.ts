// The command's API server client: none without --kubeconfig (standalone), else one client
// limited to kubeAPIQPS/kubeAPIBurst, with a deadline per call; a bad kubeconfig is an error
// naming the file and the field.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { apiClientFrom } from '../src/cli.js';
import { KubeconfigError } from '../src/client/index.js';
import { defaultKubeletConfig } from '../src/config/index.js';
import { quietLogger } from './client/drive.js';

const KUBECONFIG = [
  'apiVersion: v1', 'kind: Config', 'current-context: c',
  'contexts: [{name: c, context: {cluster: k, user: u}}]',
  'clusters: [{name: k, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]',
  'users: [{name: u, user: {token: t}}]', '',
].join('\n');

describe('apiClientFrom', () => {
  it('gives no client without --kubeconfig: standalone', () => {
    assert.equal(apiClientFrom(defaultKubeletConfig(), {}, quietLogger()), undefined);
  });

  it('builds one client with kubeAPIQPS and kubeAPIBurst, and says JSON is spoken when protobuf is asked for', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-apiclient-'));
    try {
      const file = join(dir, 'kubelet.kubeconfig');
      await writeFile(file, KUBECONFIG);
      const config = { ...defaultKubeletConfig(), kubeAPIQPS: 7, kubeAPIBurst: 9 };
      const lines: string[] = [];
      const log = quietLogger(lines);
      const seen: Record<string, unknown>[] = [];
      log.info = (m, f) => { lines.push(m); if (f) seen.push(f); };
      const c = apiClientFrom(config, { kubeconfig: file }, log)!;
      assert.equal(c.config.server, 'https://127.0.0.1:6443');
      assert.equal(c.limiter?.qps, 7);
      assert.equal(c.limiter?.burst, 9);
      assert.match(String(seen[0]?.spoken), /application\/json/);
      const unlimited = apiClientFrom({ ...config, kubeAPIQPS: 0, contentType: 'application/json' }, { kubeconfig: file }, quietLogger())!;
      assert.equal(unlimited.limiter, undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('throws a KubeconfigError naming the file and the field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-apiclient-'));
    try {
      const file = join(dir, 'bad.kubeconfig');
      await writeFile(file, KUBECONFIG.replace('current-context: c', 'current-context: nope'));
      assert.throws(() => apiClientFrom(defaultKubeletConfig(), { kubeconfig: file }, quietLogger()),
        (err: unknown) => err instanceof KubeconfigError && err.file === file && /bad\.kubeconfig/.test(err.message) && /nope/.test(err.message));
      assert.throws(() => apiClientFrom(defaultKubeletConfig(), { kubeconfig: join(dir, 'missing') }, quietLogger()),
        (err: unknown) => err instanceof KubeconfigError && /missing: cannot read: ENOENT/.test(err.message));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
