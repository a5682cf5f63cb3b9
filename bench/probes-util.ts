// Helpers shared by the probe benchmark's cases (bench/probes.ts, bench/probes-exec.ts).

import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { IntervalHistogram } from 'node:perf_hooks';
import type { Pod, PodStatus } from '../src/api/types.js';
import { findPackageRoot } from '../src/native.js';
import type { ProbeRunner } from '../src/prober/types.js';
import type { Logger } from '../src/util/log.js';

const run = promisify(execFile);

/** `--name value` or `--name=value`. */
export function argValue(name: string): string | undefined {
  const argv = process.argv;
  const i = argv.indexOf(`--${name}`);
  if (i > 0) return argv[i + 1];
  const eq = argv.find((a) => a.startsWith(`--${name}=`));
  return eq?.slice(name.length + 3);
}

/** `--name` given (a switch without a value). */
export const argFlag = (name: string): boolean => process.argv.includes(`--${name}`);

export const arg = (name: string, def: number): number => {
  const v = argValue(name);
  return v === undefined ? def : Number(v);
};

/** The sampling timer's period (ms) of the event-loop delay histograms (--eld-resolution). */
export const ELD_RESOLUTION_MS = arg('eld-resolution', 1);

export interface Eld { p99: number; intervalP99: number }

/**
 * Node's event-loop delay histogram holds the whole interval between two fires of a timer of
 * period `resolution` (uv_hrtime at this fire minus at the last); the delay is what exceeds
 * that period, never below zero. Both figures, in ms.
 */
export function eldOf(h: IntervalHistogram): Eld {
  const intervalP99 = h.percentile(99) / 1e6;
  return { p99: Math.max(0, intervalP99 - ELD_RESOLUTION_MS), intervalP99 };
}

export function percentile(xs: number[], p: number): number {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** USER_HZ: /proc's clock ticks per second. */
export const CLK_TCK = 100;

/** utime + stime (+ the children it reaped, when asked) of a process or thread, in seconds. */
export function procCpuSeconds(statPath: string, children = false): number {
  try {
    const stat = readFileSync(statPath, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields 14-17 of proc(5): utime stime cutime cstime (f[0] is field 3)
    const own = Number(f[11]) + Number(f[12]);
    return (children ? own + Number(f[13]) + Number(f[14]) : own) / CLK_TCK;
  } catch {
    return 0;
  }
}

export function runningStatus(pod: Pod, ids?: string[]): PodStatus {
  const startedAt = new Date(Date.now() - 3600_000).toISOString();
  return {
    phase: 'Running',
    podIP: '127.0.0.1',
    containerStatuses: pod.spec.containers.map((c, j) => ({
      name: c.name, containerID: `containerd://${ids?.[j] ?? `${pod.metadata.uid}-${j}`}`, ready: true, started: true, restartCount: 0, image: 'bench', imageID: '',
      state: { running: { startedAt } }, lastState: {},
    })),
  };
}

export const silentLog: Logger = { info() {}, warn() {}, error() {}, v: () => ({ info() {} }), with: () => silentLog } as unknown as Logger;

/**
 * A runner that counts, while `counting` is set, probes completed and the lateness of every
 * start (jitter); and (through `onProbeStart`) the schedule slots of the window
 * [windowStart, windowStart + windowMs) that got a probe started, late ones included, so the
 * achieved rate is slots run / window length: the schedule's rate when every slot ran, never more.
 */
export function countingRunner(inner: ProbeRunner): ProbeRunner & { counting: boolean; windowStart: number; windowMs: number; started: number; ok: number; failed: number; jitter: number[]; onProbeStart(late: number): void } {
  const c = {
    counting: false,
    /** Date.now() when counting began (the prober's clock), and the window's length. */
    windowStart: 0,
    windowMs: 0,
    started: 0,
    ok: 0,
    failed: 0,
    jitter: [] as number[],
    onProbeStart(late: number): void {
      const now = Date.now();
      const slot = now - late;
      if (slot >= c.windowStart && slot < c.windowStart + c.windowMs) c.started++;
      if (c.counting) c.jitter.push(late);
    },
    run: (r: Parameters<ProbeRunner['run']>[0]) => inner.run(r).then((o) => {
      if (c.counting) {
        if (o.result === 'success') c.ok++;
        else c.failed++;
      }
      return o;
    }),
    close: () => inner.close(),
  };
  return c;
}

/** Compiles a C file of bench/ with cc -O2 into a temp dir (as bench/stats.ts does floor.c). */
export async function compileBenchC(name: string): Promise<{ bin: string; cleanup(): void }> {
  const root = findPackageRoot(import.meta.url);
  if (!root) throw new Error('no package root above the bench');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kts-bench-c-'));
  const bin = path.join(dir, name.replace(/\.c$/, ''));
  try {
    await run('cc', ['-O2', '-Wall', '-o', bin, path.join(root, 'bench', name)]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`cc ${name}: ${(err as { stderr?: string }).stderr || (err as Error).message}`);
  }
  return { bin, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
