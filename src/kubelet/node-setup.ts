// The host checks and settings the kubelet makes before it runs anything, as upstream:
// failSwapOn (refuse to start while /proc/swaps lists a swap area), the kernel tunables of
// setupKernelTunables (protectKernelDefaults: a value that differs is an error; otherwise each
// is set), and the process's own oom_score_adj (oomScoreAdj). The procfs root is injectable:
// tests point it at a directory of their own, never at the host's sysctls.

import { promises as fsp } from 'node:fs';
import { join } from 'node:path';

import type { Logger } from '../util/log.js';
import { KubeletError } from '../util/errors.js';

/** Environment variable naming another procfs root for the swap and kernel tunable checks (tests). */
export const PROCFS_ROOT_ENV = 'KUBELET_TS_PROCFS_ROOT';

/**
 * upstream's desired kernel tunables (pkg/util/sysctl: VMOvercommitMemoryAlways,
 * VMPanicOnOOMInvokeOOMKiller, KernelPanicRebootTimeout, KernelPanicOnOopsAlways,
 * RootMaxKeysSetting, RootMaxBytesSetting), by their path under /proc/sys.
 */
export const KERNEL_TUNABLES: Readonly<Record<string, number>> = {
  'vm/overcommit_memory': 1,
  'vm/panic_on_oom': 0,
  'kernel/panic': 10,
  'kernel/panic_on_oops': 1,
  'kernel/keys/root_maxkeys': 1_000_000,
  'kernel/keys/root_maxbytes': 25_000_000,
};

export class NodeSetupError extends KubeletError {
  constructor(message: string) {
    super('ERR_NODE_SETUP', message);
  }
}

/**
 * upstream validateSwapConfiguration: with failSwapOn, more than the header line in
 * <procRoot>/swaps is an error; without it, swap is logged and allowed. A missing file is
 * no swap (a kernel without swap support).
 */
export async function checkSwap(procRoot: string, failSwapOn: boolean, log?: Logger): Promise<void> {
  let data: string;
  try {
    data = await fsp.readFile(join(procRoot, 'swaps'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const lines = data.trim().split('\n');
  if (lines.length <= 1) return;
  if (failSwapOn) {
    throw new NodeSetupError(
      `running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false. /proc/swaps contained: [${lines.join(' ')}]`,
    );
  }
  log?.info('Swap is on; running with it as failSwapOn is false', { swaps: lines.length - 1 });
}

async function readSysctl(procRoot: string, name: string): Promise<number> {
  const text = (await fsp.readFile(join(procRoot, 'sys', name), 'utf8')).trim();
  const n = Number.parseInt(text, 10);
  if (!/^-?\d+$/.test(text) || Number.isNaN(n)) throw new NodeSetupError(`sysctl ${name}: not an integer: ${JSON.stringify(text)}`);
  return n;
}

/**
 * upstream setupKernelTunables: each tunable that differs from KERNEL_TUNABLES is an error
 * (`invalid kernel flag`) when protectKernelDefaults is true, and is written otherwise. All
 * problems are gathered and thrown together; nothing is thrown when every value is right.
 */
export async function setupKernelTunables(procRoot: string, protectKernelDefaults: boolean, log?: Logger): Promise<void> {
  const errors: string[] = [];
  for (const [name, expected] of Object.entries(KERNEL_TUNABLES)) {
    let actual: number;
    try {
      actual = await readSysctl(procRoot, name);
    } catch (err) {
      errors.push((err as Error).message);
      continue;
    }
    if (actual === expected) continue;
    if (protectKernelDefaults) {
      errors.push(`invalid kernel flag: ${name}, expected value: ${expected}, actual value: ${actual}`);
      continue;
    }
    log?.info('Updating kernel flag', { flag: name, expectedValue: expected, actualValue: actual });
    try {
      await fsp.writeFile(join(procRoot, 'sys', name), String(expected));
    } catch (err) {
      errors.push(`failed to set kernel flag ${name} to ${expected}: ${(err as Error).message}`);
    }
  }
  if (errors.length === 1) throw new NodeSetupError(errors[0]!);
  if (errors.length > 1) throw new NodeSetupError(`[${errors.join(', ')}]`);
}

/**
 * upstream ApplyOOMScoreAdj(0, oomScoreAdj) on the kubelet itself: writes
 * /proc/self/oom_score_adj; a failure is logged, not fatal (as upstream).
 */
export async function applyOomScoreAdj(value: number, log: Logger, file = '/proc/self/oom_score_adj'): Promise<boolean> {
  try {
    await fsp.writeFile(file, String(value));
    return true;
  } catch (err) {
    log.info('Failed to ApplyOOMScoreAdj', { err: (err as Error).message });
    return false;
  }
}

/** Everything above, in upstream's order; throws NodeSetupError for what must stop the start. */
export async function setupNode(
  o: { failSwapOn: boolean; protectKernelDefaults: boolean; oomScoreAdj: number },
  log: Logger,
  procRoot = process.env[PROCFS_ROOT_ENV] || '/proc',
): Promise<void> {
  await checkSwap(procRoot, o.failSwapOn, log);
  await applyOomScoreAdj(o.oomScoreAdj, log);
  await setupKernelTunables(procRoot, o.protectKernelDefaults, log);
}
