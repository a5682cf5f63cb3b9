// The kubelet-ts command: a bad config or flag is a clear error naming the field, exits
// non-zero, and nothing is started (no runtime is contacted: the endpoint does not exist).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './fixtures/runtime.js';
import { waitForShutdown } from '../src/cli.js';
import { FakeClock } from '../src/util/clock.js';
import type { Logger } from '../src/util/log.js';
import { ensureTestProcfs } from './fixtures/procfs.js';

const run = promisify(execFile);
// Every kubelet-ts started here inherits a procfs root of its own: the host's sysctls stay untouched.
ensureTestProcfs();

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(repoRoot(), 'bin', 'kubelet-ts.mjs'), ...args], { timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('kubelet-ts command line', () => {
  it('exits non-zero on a config field of the wrong type, naming file and field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-cli-'));
    const file = join(dir, 'config.yaml');
    await writeFile(file, 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: lots\n');
    const r = await cli(['--config', file, '--container-runtime-endpoint', `unix://${dir}/none.sock`]);
    await rm(dir, { recursive: true, force: true });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /config\.yaml/);
    assert.match(r.stderr, /maxPods/);
    assert.doesNotMatch(r.stderr, /Started kubelet/);
  });

  it('exits non-zero on a bad kubeconfig before starting anything, naming the file and the field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-cli-'));
    const file = join(dir, 'kubelet.kubeconfig');
    await writeFile(file, [
      'apiVersion: v1', 'kind: Config', 'current-context: c',
      'contexts: [{name: c, context: {cluster: k, user: u}}]',
      'clusters: [{name: k, cluster: {server: "ftp://example.invalid"}}]',
      'users: [{name: u, user: {token: t}}]', '',
    ].join('\n'));
    const r = await cli(['--kubeconfig', file, '--container-runtime-endpoint', `unix://${dir}/none.sock`, '--root-dir', dir]);
    await rm(dir, { recursive: true, force: true });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /kubelet\.kubeconfig: clusters\[name=k\]\.cluster\.server: scheme ftp: is not http or https/);
    assert.doesNotMatch(r.stderr, /Started kubelet/);
  });

  it('exits non-zero on an unknown flag, naming it', async () => {
    const r = await cli(['--no-such-flag=1']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no-such-flag/);
  });

  it('prints usage for --help', async () => {
    const r = await cli(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /--pod-manifest-path/);
    assert.match(r.stdout, /--container-runtime-endpoint/);
  });

  it('--help says what --kubeconfig does, and marks each not-implemented flag', async () => {
    const r = await cli(['--help']);
    assert.equal(r.code, 0);
    const line = (flag: string): string => r.stdout.split('\n').find((l) => l.includes(`--${flag} `)) ?? '';
    assert.doesNotMatch(line('kubeconfig'), /NOT IMPLEMENTED/);
    assert.match(line('kubeconfig'), /enables API server mode/);
    assert.match(line('node-labels'), /key=value/);
    assert.doesNotMatch(line('max-pods'), /NOT IMPLEMENTED/);
    assert.doesNotMatch(line('fail-swap-on'), /NOT IMPLEMENTED/);
    assert.match(line('cpu-manager-policy'), /NOT IMPLEMENTED/);
    assert.match(line('cgroup-driver'), /'cgroupfs', 'systemd'/);
    assert.doesNotMatch(line('cgroup-driver'), /NOT IMPLEMENTED/);
    assert.doesNotMatch(line('pod-manifest-path'), /NOT IMPLEMENTED/);
  });

  it('exits non-zero on an unknown feature gate, with upstream\'s message', async () => {
    const r = await cli(['--feature-gates=EventedPLEG=true,Foo=true']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /--feature-gates/);
    assert.match(r.stderr, /unrecognized feature gate: Foo/);
  });

  const withConfig = async (body: string): Promise<{ code: number; stderr: string; file: string }> => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-cli-'));
    const file = join(dir, 'config.yaml');
    await writeFile(file, body);
    const r = await cli(['--config', file, '--container-runtime-endpoint', `unix://${dir}/none.sock`]);
    await rm(dir, { recursive: true, force: true });
    return { ...r, file };
  };
  const HEAD = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n';

  it('refuses a cgroupDriver other than cgroupfs or systemd, naming the field', async () => {
    const r = await withConfig(`${HEAD}cgroupDriver: openrc\n`);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /field cgroupDriver: must be "cgroupfs" or "systemd", got "openrc"/);
  });

  it('refuses fileCheckFrequency: 1ns, naming the field and the minimum', async () => {
    const r = await withConfig(`${HEAD}fileCheckFrequency: 1ns\n`);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /field fileCheckFrequency: must be at least 1s/);
  });

  it('refuses a config file over the size limit, naming the file and the limit', async () => {
    const r = await withConfig(`${HEAD}staticPodPath: /x\n${'#'.repeat(1024 * 1024)}\n`);
    assert.equal(r.code, 1);
    assert.ok(r.stderr.includes(r.file), r.stderr);
    assert.match(r.stderr, /larger than the limit of 1048576 bytes/);
  });

  it('refuses webhook authn/authz standalone (the config file\'s defaults, no --kubeconfig), naming both fields, as upstream', async () => {
    const r = await withConfig(HEAD);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /authentication\.webhook\.enabled: is true, but webhook authentication needs an API server client \(--kubeconfig\)/);
    assert.match(r.stderr, /authorization\.mode: is "Webhook", but webhook authorization needs an API server client \(--kubeconfig\)/);
    assert.ok(r.stderr.includes(r.file), r.stderr);
    assert.doesNotMatch(r.stderr, /Started kubelet/);
  });

  it('refuses a document nested thousands deep without crashing', async () => {
    const r = await withConfig(`${'- '.repeat(5000)}x\n`);
    assert.equal(r.code, 1, `exit ${r.code}: ${r.stderr.slice(0, 300)}`);
    assert.match(r.stderr, /nested deeper than/);
  });
});

describe('kubelet-ts process lifetime', () => {
  // Nothing else holds the event loop here: no server port, no addon, no static pod watch,
  // and no runtime (its channel only retries). Only the syncLoop keeps the process up.
  it('stays up with nothing to do (ports 0, no addon, no pod source) until SIGTERM, then exits 0', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kts-cli-life-'));
    const child = spawn(process.execPath, [
      join(repoRoot(), 'bin', 'kubelet-ts.mjs'),
      '--container-runtime-endpoint', `unix://${dir}/none.sock`,
      '--root-dir', join(dir, 'root'),
      '--hostname-override', 'lifetime-node',
      '--read-only-port', '0',
      '--healthz-port', '0',
      '--oom-watcher', 'off',
      '--stats-backend', 'fs',
    ], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, KTS_NATIVE_ADDON: join(dir, 'no-addon.node') } });
    let logs = '';
    child.stderr!.on('data', (d) => { logs += d; });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      // Wait for start-up, then a while longer: the process must still be there.
      const startBy = Date.now() + 20_000;
      while (!logs.includes('Started kubelet') && child.exitCode === null && Date.now() < startBy) await sleep(50);
      assert.match(logs, /Started kubelet/);
      await sleep(1500);
      assert.equal(child.exitCode, null, `kubelet-ts exited by itself:\n${logs}`);
      child.kill('SIGTERM');
      const code = await Promise.race([exited, sleep(15_000).then(() => 'still running')]);
      assert.equal(code, 0, logs);
      assert.match(logs, /Shutting down; pods keep running/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('kubelet-ts shutdown on signals', () => {
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined, v: () => ({ info: () => undefined }), with: () => quiet } as unknown as Logger;

  it('resolves 0 once stop finished', async () => {
    let stopped = false;
    const done = waitForShutdown(async () => { stopped = true; }, quiet, new FakeClock(), 5000);
    process.emit('SIGTERM');
    assert.equal(await done, 0);
    assert.equal(stopped, true);
  });

  it('resolves 0 at the deadline when stop hangs, and a second signal exits at once with 1', async () => {
    const clock = new FakeClock();
    const done = waitForShutdown(() => new Promise<void>(() => undefined), quiet, clock, 5000);
    let resolved = false;
    void done.then(() => { resolved = true; });
    process.emit('SIGINT');
    await sleep(10);
    assert.equal(resolved, false);

    const realExit = process.exit;
    let exitCode: number | undefined;
    process.exit = ((code?: number) => { exitCode = code; }) as typeof process.exit;
    try {
      process.emit('SIGTERM');
    } finally {
      process.exit = realExit;
    }
    assert.equal(exitCode, 1);

    clock.step(5000);
    assert.equal(await done, 0);
    assert.equal(process.listenerCount('SIGTERM'), 0, 'the handlers are removed afterwards');
  });
});
