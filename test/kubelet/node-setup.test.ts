// failSwapOn, protectKernelDefaults and oomScoreAdj, as upstream's kubelet applies them at start:
// on a procfs root of the test's own (the host's sysctls are never written), and on a real
// kubelet-ts process for its oom_score_adj.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { checkSwap, KERNEL_TUNABLES, PROCFS_ROOT_ENV, setupKernelTunables } from '../../src/kubelet/node-setup.js';
import { repoRoot } from '../fixtures/runtime.js';

const SWAPS_HEADER = 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n';

async function procfs(dir: string, swaps: string, tunables: Record<string, number>): Promise<string> {
  await writeFile(join(dir, 'swaps'), swaps);
  for (const [name, v] of Object.entries(tunables)) {
    await mkdir(dirname(join(dir, 'sys', name)), { recursive: true });
    await writeFile(join(dir, 'sys', name), `${v}\n`);
  }
  return dir;
}

const readTunable = async (root: string, name: string): Promise<number> => Number((await readFile(join(root, 'sys', name), 'utf8')).trim());

describe('node setup at start', () => {
  let dir: string;
  before(async () => { dir = await mkdtemp(join(tmpdir(), 'kts-node-setup-')); });
  after(async () => { await rm(dir, { recursive: true, force: true }); });

  it('refuses to start with swap on unless failSwapOn is false, with upstream\'s message', async () => {
    const root = await procfs(await mkdtemp(join(dir, 'swap-')), `${SWAPS_HEADER}/dev/dm-1                               partition\t16760828\t0\t-2\n`, {});
    await assert.rejects(checkSwap(root, true), (err: Error) => {
      assert.match(err.message, /^running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false\. \/proc\/swaps contained: \[Filename.*\/dev\/dm-1.*\]$/);
      return true;
    });
    await checkSwap(root, false);
  });

  it('starts with swap off (only the header in /proc/swaps) or no /proc/swaps at all', async () => {
    const root = await procfs(await mkdtemp(join(dir, 'noswap-')), SWAPS_HEADER, {});
    await checkSwap(root, true);
    await checkSwap(await mkdtemp(join(dir, 'empty-')), true);
  });

  it('protectKernelDefaults: a tunable off upstream\'s value is an error naming each, and nothing is written', async () => {
    const root = await procfs(await mkdtemp(join(dir, 'protect-')), SWAPS_HEADER, { ...KERNEL_TUNABLES, 'vm/overcommit_memory': 0, 'kernel/panic': 1 });
    await assert.rejects(setupKernelTunables(root, true), (err: Error) => {
      assert.match(err.message, /invalid kernel flag: vm\/overcommit_memory, expected value: 1, actual value: 0/);
      assert.match(err.message, /invalid kernel flag: kernel\/panic, expected value: 10, actual value: 1/);
      return true;
    });
    assert.equal(await readTunable(root, 'vm/overcommit_memory'), 0);
    assert.equal(await readTunable(root, 'kernel/panic'), 1);
    // every value right: no error
    const good = await procfs(await mkdtemp(join(dir, 'good-')), SWAPS_HEADER, KERNEL_TUNABLES);
    await setupKernelTunables(good, true);
  });

  it('without protectKernelDefaults sets each tunable to upstream\'s value', async () => {
    const off = { 'vm/overcommit_memory': 0, 'vm/panic_on_oom': 1, 'kernel/panic': 0, 'kernel/panic_on_oops': 0, 'kernel/keys/root_maxkeys': 200, 'kernel/keys/root_maxbytes': 20000 };
    const root = await procfs(await mkdtemp(join(dir, 'modify-')), SWAPS_HEADER, off);
    await setupKernelTunables(root, false);
    for (const [name, want] of Object.entries(KERNEL_TUNABLES)) assert.equal(await readTunable(root, name), want, name);
    assert.deepEqual(KERNEL_TUNABLES, {
      'vm/overcommit_memory': 1, 'vm/panic_on_oom': 0, 'kernel/panic': 10, 'kernel/panic_on_oops': 1,
      'kernel/keys/root_maxkeys': 1000000, 'kernel/keys/root_maxbytes': 25000000,
    });
  });

  it('a tunable that cannot be read is an error (as upstream), naming it', async () => {
    const root = await procfs(await mkdtemp(join(dir, 'missing-')), SWAPS_HEADER, { 'vm/overcommit_memory': 1 });
    await assert.rejects(setupKernelTunables(root, false), /vm\/panic_on_oom/);
  });

  /** Starts kubelet-ts (no runtime needed for what is checked here). */
  function startKubeletTs(args: string[], env: Record<string, string>): { pid: Promise<number>; exit: Promise<{ code: number | null; stderr: string }>; kill: () => void; stderr: () => string } {
    const child = spawn(process.execPath, [join(repoRoot(), 'bin', 'kubelet-ts.mjs'), ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
    let stderr = '';
    child.stderr!.on('data', (d) => { stderr += d; });
    const exit = new Promise<{ code: number | null; stderr: string }>((r) => child.once('exit', (code) => r({ code, stderr })));
    return { pid: Promise.resolve(child.pid!), exit, kill: () => child.kill('SIGKILL'), stderr: () => stderr };
  }

  /** CAP_SYS_RESOURCE (bit 24) is what lowering oom_score_adj below its floor takes. */
  async function hasSysResource(): Promise<boolean> {
    const eff = /^CapEff:\s*([0-9a-f]+)$/m.exec(await readFile('/proc/self/status', 'utf8'))?.[1] ?? '0';
    return (BigInt(`0x${eff}`) >> 24n) & 1n ? true : false;
  }

  it('kubelet-ts sets its own oom_score_adj to oomScoreAdj (--oom-score-adj=321; the -999 default where the process may lower it)', async () => {
    const root = await procfs(await mkdtemp(join(dir, 'proc-')), SWAPS_HEADER, KERNEL_TUNABLES);
    const inherited = (await readFile('/proc/self/oom_score_adj', 'utf8')).trim();
    const lowering = await hasSysResource();
    // Without CAP_SYS_RESOURCE the kernel refuses -999: upstream then logs and goes on, and so must kubelet-ts.
    for (const [args, want] of [[['--oom-score-adj=321'], '321'], [[], lowering ? '-999' : inherited]] as const) {
      const rootDir = await mkdtemp(join(dir, 'root-'));
      const k = startKubeletTs([
        '--root-dir', rootDir, '--container-runtime-endpoint', `unix://${join(rootDir, 'no-runtime.sock')}`,
        '--read-only-port=0', '--healthz-port=0', '--enable-server=false', '--hostname-override=oom-test', '--oom-watcher=off', '--stats-backend=fs', ...args,
      ], { [PROCFS_ROOT_ENV]: root });
      const pid = await k.pid;
      // Past node setup once it logs that it started (the launcher re-executes node in place: same pid).
      for (let i = 0; i < 600 && !k.stderr().includes('Started kubelet'); i++) await new Promise((r) => setTimeout(r, 50));
      let seen = '';
      try {
        seen = (await readFile(`/proc/${pid}/oom_score_adj`, 'utf8')).trim();
      } finally {
        k.kill();
      }
      const { stderr } = await k.exit;
      assert.equal(seen, want, `oom_score_adj of kubelet-ts ${args.join(' ')}; its log:\n${stderr}`);
      if (args.length === 0 && !lowering) assert.match(stderr, /Failed to ApplyOOMScoreAdj/);
    }
  });

  it('kubelet-ts refuses to start with swap on, naming --fail-swap-on, and with a protected tunable off', async () => {
    const root = await procfs(await mkdtemp(join(dir, 'proc-swap-')), `${SWAPS_HEADER}/swapfile file 1024 0 -2\n`, KERNEL_TUNABLES);
    const rootDir = await mkdtemp(join(dir, 'root-'));
    const base = ['--root-dir', rootDir, '--container-runtime-endpoint', `unix://${join(rootDir, 'no-runtime.sock')}`, '--read-only-port=0', '--healthz-port=0', '--enable-server=false'];
    const refused = await startKubeletTs(base, { [PROCFS_ROOT_ENV]: root }).exit;
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false/);
    // with protectKernelDefaults and a tunable off, the start fails naming it
    const protectedRoot = await procfs(await mkdtemp(join(dir, 'proc-protect-')), SWAPS_HEADER, { ...KERNEL_TUNABLES, 'kernel/panic_on_oops': 0 });
    const prot = await startKubeletTs([...base, '--protect-kernel-defaults'], { [PROCFS_ROOT_ENV]: protectedRoot }).exit;
    assert.equal(prot.code, 1, prot.stderr);
    assert.match(prot.stderr, /invalid kernel flag: kernel\/panic_on_oops, expected value: 1, actual value: 0/);
  });
});
