// The process-start settings of kubelet-ts. V8's heap sizing and glibc's malloc arenas are read
// once when the process starts, so the launcher (bin/kubelet-ts.mjs) re-executes node in place
// (execve: same pid, stdio and signals) with them when they are missing. The settings are what
// every start gets, whichever way node was invoked; a user's own value for one is kept.

import { loadNative, type NativeAddon } from './native.js';

/**
 * Node/V8 flags the agent runs with (each measured at 1000 pods on the simulated runtime).
 * --max-semi-space-size: a young generation of at most 2 x 4 MiB instead of V8's 2 x 16 MiB
 * (the agent's objects are either short-lived or live as long as their pod: a large nursery
 * only holds garbage between scavenges; 2 MiB saved no more and scavenged twice as often).
 * --heap-growing-percent: the old generation may grow 25% past the live set before the next mark-compact, not up to 4x: at rest the agent makes
 * garbage steadily but too fast for V8's memory reducer to count it idle, so the heap
 * otherwise settles near 4x what is live. No hard limit: a node with more pods only grows.
 */
export const RUNTIME_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=25'];

/**
 * Environment the agent runs with. MALLOC_ARENA_MAX: glibc gives each thread that mallocs its
 * own arena (up to 8 per core), each keeping its freed pages; two are enough for the agent's
 * threads (V8 platform, libuv pool, workers, native watchers).
 */
export const RUNTIME_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };

/** Set in the re-executed process: it never re-executes again, whatever its flags look like. */
export const RELAUNCHED_ENV = 'KUBELET_TS_RELAUNCHED';
/** KUBELET_TS_RELAUNCH=0 starts without the settings (for debugging the agent under other flags). */
export const RELAUNCH_OPT_OUT_ENV = 'KUBELET_TS_RELAUNCH';

export interface RelaunchPlan {
  /** Node flags for the new image: the current ones plus the missing settings. */
  execArgv: string[];
  env: Record<string, string>;
  /** The settings added (for the log line of the new process). */
  added: string[];
}

/** `--max_semi_space_size=4` and `--max-semi-space-size 4` name the same flag. */
function flagName(arg: string): string {
  const eq = arg.indexOf('=');
  return (eq < 0 ? arg : arg.slice(0, eq)).replace(/_/g, '-');
}

/**
 * What to re-execute with, or undefined when nothing is missing (or this is already the
 * re-executed process, or the user opted out). Flags given on the command line or in
 * NODE_OPTIONS, and variables already in the environment, are left as the user set them.
 */
export function relaunchPlan(
  execArgv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  flags: readonly string[] = RUNTIME_NODE_FLAGS,
  runtimeEnv: Readonly<Record<string, string>> = RUNTIME_ENV,
): RelaunchPlan | undefined {
  if (env[RELAUNCHED_ENV] !== undefined || env[RELAUNCH_OPT_OUT_ENV] === '0') return undefined;
  const given = new Set([...execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)].filter((a) => a.startsWith('--')).map(flagName));
  const addFlags = flags.filter((f) => !given.has(flagName(f)));
  const addEnv = Object.entries(runtimeEnv).filter(([k]) => env[k] === undefined);
  if (addFlags.length === 0 && addEnv.length === 0) return undefined;
  const next: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) next[k] = v;
  for (const [k, v] of addEnv) next[k] = v;
  next[RELAUNCHED_ENV] = '1';
  return { execArgv: [...execArgv, ...addFlags], env: next, added: [...addFlags, ...addEnv.map(([k, v]) => `${k}=${v}`)] };
}

export interface RelaunchOptions {
  /** The script node runs (the launcher's own file). */
  script: string;
  /** The arguments after the script. */
  args: readonly string[];
  /** This process talks to its parent over an IPC channel (fork): its descriptor does not survive exec. */
  ipc?: boolean;
  execArgv?: readonly string[];
  env?: Readonly<Record<string, string | undefined>>;
  execPath?: string;
  argv0?: string;
  addon?: Pick<NativeAddon, 'execve'>;
}

/**
 * Re-executes node in place with the missing settings; returns (without them) only when none
 * are missing or exec is unavailable (no native addon), with the reason in the second case.
 * A second process is never started: it would cost more memory than the settings save.
 */
export function relaunchWithRuntimeSettings(opts: RelaunchOptions): { relaunched: false; reason?: string } {
  // The simulated runtime is a benchmark double, not the agent: it runs as started.
  if (opts.args[0] === 'sim-runtime') return { relaunched: false };
  const plan = relaunchPlan(opts.execArgv ?? process.execArgv, opts.env ?? process.env);
  if (!plan) return { relaunched: false };
  if (opts.ipc ?? process.channel !== undefined) return { relaunched: false, reason: `runtime settings ${plan.added.join(' ')} not applied: started with an IPC channel (fork), which exec would close` };
  const addon = opts.addon ?? loadNative().addon;
  if (!addon?.execve) return { relaunched: false, reason: `runtime settings ${plan.added.join(' ')} not applied: the native addon (execve) is unavailable` };
  const execPath = opts.execPath ?? process.execPath;
  const argv = [opts.argv0 ?? process.argv0, ...plan.execArgv, opts.script, ...opts.args];
  try {
    addon.execve(execPath, argv, Object.entries(plan.env).map(([k, v]) => `${k}=${v}`));
  } catch (err) {
    return { relaunched: false, reason: `runtime settings ${plan.added.join(' ')} not applied: ${(err as Error).message}` };
  }
  return { relaunched: false };
}
