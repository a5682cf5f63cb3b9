// --version prints as upstream's kubelet does, naming the Kubernetes release kubelet-ts implements.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

import { KUBERNETES_VERSION, parseVersionFlag } from '../src/version.js';
import { repoRoot } from './fixtures/runtime.js';
import { versionInfo } from './fixtures/test-apiserver/discovery.js';

const run = promisify(execFile);

describe('kubelet-ts --version', () => {
  it('prints "Kubernetes v1.34.x" and exits 0, before reading any config', async () => {
    const { stdout } = await run(process.execPath, [join(repoRoot(), 'bin', 'kubelet-ts.mjs'), '--version', '--config=/nonexistent/config.yaml']);
    assert.equal(stdout, `Kubernetes ${KUBERNETES_VERSION}\n`);
    assert.match(KUBERNETES_VERSION, /^v1\.34\.\d+$/);
  });

  it('--version=raw prints the version.Info with kubelet-ts\'s build', async () => {
    const { stdout } = await run(process.execPath, [join(repoRoot(), 'bin', 'kubelet-ts.mjs'), '--version=raw']);
    assert.match(stdout, /^version\.Info\{Major:"1", Minor:"34", GitVersion:"v1\.34\.\d+", .*Compiler:"kubelet-ts v\d+\.\d+\.\d+.*\}\n$/);
  });

  it('--version=vX.Y.Z sets the reported version instead of printing', () => {
    assert.deepEqual(parseVersionFlag('v1.34.7'), { print: 'no', override: 'v1.34.7' });
    assert.deepEqual(parseVersionFlag('false'), { print: 'no' });
    assert.throws(() => parseVersionFlag('1.34'));
  });

  it('passes the version-skew policy against the test API server (a kubelet not newer than the API server, at most 3 minors older)', () => {
    const kubelet = Number(/^v1\.(\d+)\./.exec(KUBERNETES_VERSION)![1]);
    const server = Number(versionInfo().minor);
    assert.ok(kubelet <= server && kubelet >= server - 3, `kubelet 1.${kubelet} against API server 1.${server}`);
  });
});
