// kubelet-ts refuses to start on a bad credential provider setup, naming the flag or field
// (upstream's RegisterCredentialProviderPlugins failing stops the kubelet).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '../fixtures/runtime.js';

const run = promisify(execFile);

async function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    const { stderr } = await run(process.execPath, [join(repoRoot(), 'bin', 'kubelet-ts.mjs'), ...args], { timeout: 30_000 });
    return { code: 0, stderr };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

describe('kubelet-ts with a bad credential provider setup', () => {
  it('exits non-zero naming the field of the config, or the missing bin dir or executable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-cli-cp-'));
    try {
      const bin = join(dir, 'bin');
      await mkdir(bin);
      await writeFile(join(bin, 'p'), '#!/bin/sh\n');
      await chmod(join(bin, 'p'), 0o755);
      const cfg = join(dir, 'cp.yaml');
      const base = ['--root-dir', join(dir, 'root'), '--container-runtime-endpoint', `unix://${dir}/none.sock`, '--read-only-port', '0', '--healthz-port', '0'];
      const provider = (extra: string) => `apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: p\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n${extra}`;

      await writeFile(cfg, provider(''));
      let r = await cli([...base, '--image-credential-provider-config', cfg, '--image-credential-provider-bin-dir', bin]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /cp\.yaml.*providers\[0\]\.matchImages: Required value/);
      assert.doesNotMatch(r.stderr, /Started kubelet/);

      await writeFile(cfg, provider('    matchImages: ["a.io"]\n'));
      r = await cli([...base, '--image-credential-provider-config', cfg, '--image-credential-provider-bin-dir', join(dir, 'nope')]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /--image-credential-provider-bin-dir: plugin binary directory .*nope did not exist/);

      r = await cli([...base, '--image-credential-provider-config', cfg]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /--image-credential-provider-bin-dir: required when --image-credential-provider-config is set/);

      await writeFile(cfg, provider('    matchImages: ["a.io"]\n').replace('name: p', 'name: absent'));
      r = await cli([...base, '--image-credential-provider-config', cfg, '--image-credential-provider-bin-dir', bin]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /credential provider \\?"absent\\?": plugin binary executable .*absent did not exist/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
