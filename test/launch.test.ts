// The launcher's process-start settings: which are added (and which a user's own flags keep),
// and the re-exec in place: same pid, the arguments, the exit code and signals reach the image.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from './fixtures/runtime.js';
import { relaunchPlan, relaunchWithRuntimeSettings, RELAUNCHED_ENV, RELAUNCH_OPT_OUT_ENV, RUNTIME_NODE_FLAGS, RUNTIME_ENV } from '../src/launch.js';

const FLAGS = ['--max-semi-space-size=2'];
const ENV = { MALLOC_ARENA_MAX: '2' };

describe('relaunchPlan', () => {
  it('adds the missing flags and variables and marks the new process', () => {
    const plan = relaunchPlan(['--enable-source-maps'], { PATH: '/bin' }, FLAGS, ENV);
    assert.deepEqual(plan?.execArgv, ['--enable-source-maps', '--max-semi-space-size=2']);
    assert.deepEqual(plan?.env, { PATH: '/bin', MALLOC_ARENA_MAX: '2', [RELAUNCHED_ENV]: '1' });
    assert.deepEqual(plan?.added, ['--max-semi-space-size=2', 'MALLOC_ARENA_MAX=2']);
  });

  it("keeps a user's own value of a flag, whether on the command line (either spelling) or in NODE_OPTIONS", () => {
    assert.deepEqual(relaunchPlan(['--max_semi_space_size=8'], { PATH: '/bin' }, FLAGS, ENV)?.execArgv, ['--max_semi_space_size=8']);
    const viaOptions = relaunchPlan([], { NODE_OPTIONS: '--trace-gc --max-semi-space-size=16', MALLOC_ARENA_MAX: '4' }, FLAGS, ENV);
    assert.equal(viaOptions, undefined);
  });

  it("keeps a user's own environment value", () => {
    assert.equal(relaunchPlan(['--max-semi-space-size=2'], { MALLOC_ARENA_MAX: '8' }, FLAGS, ENV), undefined);
    assert.equal(relaunchPlan([], { MALLOC_ARENA_MAX: '8' }, FLAGS, ENV)?.env.MALLOC_ARENA_MAX, '8');
  });

  it('never relaunches a relaunched process, nor when opted out', () => {
    assert.equal(relaunchPlan([], { [RELAUNCHED_ENV]: '1' }, FLAGS, ENV), undefined);
    assert.equal(relaunchPlan([], { [RELAUNCH_OPT_OUT_ENV]: '0' }, FLAGS, ENV), undefined);
  });
});

describe('relaunchWithRuntimeSettings', () => {
  it('execs node with the node flags before the script and the arguments after it', () => {
    const calls: { file: string; argv: string[]; env: string[] }[] = [];
    const addon = { execve: (file: string, argv: string[], env: string[]): never => { calls.push({ file, argv, env }); throw new Error('stub'); } };
    const r = relaunchWithRuntimeSettings({ script: '/k/bin/kubelet-ts.mjs', args: ['--config', 'c.yaml'], execArgv: [], env: { HOME: '/root' }, execPath: '/usr/bin/node', argv0: 'node', ipc: false, addon });
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.file, '/usr/bin/node');
    assert.deepEqual(calls[0]!.argv, ['node', ...RUNTIME_NODE_FLAGS, '/k/bin/kubelet-ts.mjs', '--config', 'c.yaml']);
    assert.deepEqual(calls[0]!.env.sort(), ['HOME=/root', `${RELAUNCHED_ENV}=1`, ...Object.entries(RUNTIME_ENV).map(([k, v]) => `${k}=${v}`)].sort());
    // exec failed: the agent starts without the settings and says why
    assert.match(r.reason ?? '', /not applied: stub/);
  });

  it('says why when it cannot exec (no addon, an IPC channel) and leaves the simulated runtime alone', () => {
    const common = { script: '/k/bin/kubelet-ts.mjs', execArgv: [], env: {}, ipc: false };
    assert.match(relaunchWithRuntimeSettings({ ...common, args: [], addon: {} }).reason ?? '', /native addon \(execve\) is unavailable/);
    assert.match(relaunchWithRuntimeSettings({ ...common, args: [], ipc: true, addon: {} }).reason ?? '', /IPC channel/);
    const addon = { execve: (): never => assert.fail('the simulated runtime must not be relaunched') };
    assert.equal(relaunchWithRuntimeSettings({ ...common, args: ['sim-runtime', '--socket', 's'], addon }).reason, undefined);
  });
});

const probe = join(repoRoot(), 'dist', 'test', 'fixtures', 'relaunch-probe.js');

function start(args: string[], env: Record<string, string | undefined> = {}): { child: ReturnType<typeof spawn>; lines: () => Promise<string[]>; exit: Promise<number | null> } {
  const clean = { ...process.env, NODE_OPTIONS: undefined, MALLOC_ARENA_MAX: undefined, [RELAUNCHED_ENV]: undefined, [RELAUNCH_OPT_OUT_ENV]: undefined, ...env };
  const child = spawn(process.execPath, [probe, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: clean });
  let out = '';
  child.stdout!.on('data', (d) => { out += d; });
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    exit,
    lines: async () => {
      for (let i = 0; i < 600 && !out.includes('\n'); i++) await new Promise((r) => setTimeout(r, 50));
      return out.trim().split('\n');
    },
  };
}

describe('the relaunch in a real process', () => {
  it('keeps the pid, gets the settings and the arguments, and its exit code is the process exit code', async () => {
    const p = start(['exit=7', '--config', 'x']);
    const code = await p.exit;
    const info = JSON.parse((await p.lines())[0]!) as { pid: number; execArgv: string[]; mallocArenaMax: string; args: string[]; reason: string | null };
    assert.equal(info.pid, p.child.pid);
    for (const f of RUNTIME_NODE_FLAGS) assert.ok(info.execArgv.includes(f), `${f} in ${info.execArgv.join(' ')}`);
    assert.equal(info.mallocArenaMax, RUNTIME_ENV.MALLOC_ARENA_MAX);
    assert.deepEqual(info.args, ['exit=7', '--config', 'x']);
    assert.equal(info.reason, null);
    assert.equal(code, 7);
  });

  it('delivers a signal to the running image', async () => {
    const p = start(['wait']);
    const first = (await p.lines())[0]!;
    assert.equal((JSON.parse(first) as { pid: number }).pid, p.child.pid);
    p.child.kill('SIGTERM');
    assert.equal(await p.exit, 0);
    assert.deepEqual((await p.lines()).slice(1), ['SIGTERM']);
  });

  it("keeps the user's own flag value", async () => {
    const p = start(['exit=0'], { NODE_OPTIONS: '--max-semi-space-size=8' });
    await p.exit;
    const info = JSON.parse((await p.lines())[0]!) as { execArgv: string[]; mallocArenaMax: string };
    assert.ok(!info.execArgv.some((a) => a.startsWith('--max-semi-space-size')), info.execArgv.join(' '));
    assert.equal(info.mallocArenaMax, RUNTIME_ENV.MALLOC_ARENA_MAX);
  });
});
