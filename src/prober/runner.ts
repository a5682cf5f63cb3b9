// Where probes run: the network kinds (HTTP, TCP, gRPC) in a Piscina pool of worker threads
// (workers/probe.ts) so thousands of sockets a second never stall the syncLoop; exec is a CRI
// ExecSync call, already off-process in the runtime, so it stays on the main thread.

import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import type { CriClient } from '../runtime/cri-client.js';
import { errorMessage } from '../util/errors.js';
import { ProbeRunError } from './errors.js';
import type { ExecProbeRequest, NetworkProbeRequest, ProbeOutcome, ProbeRequest, ProbeRunner } from './types.js';

/** The compiled task module (dist/workers/probe.js from dist/src/prober/runner.js). */
export const PROBE_WORKER_URL = new URL('../../workers/probe.js', import.meta.url);

/** Probes in flight per worker thread: each is an await on a socket, not CPU. */
export const PROBES_PER_THREAD = 512;
/** Queued probes beyond those in flight; past it a run is unknown (the pool is saturated). */
export const MAX_PROBE_QUEUE = 10_000;

export type ExecCri = Pick<CriClient, 'execSync'>;

export interface ProbeRunnerOptions {
  cri?: ExecCri;
  /** 'pool' (default): network probes on worker threads; 'main': on this thread (benchmarks compare). */
  mode?: 'pool' | 'main';
  threads?: number;
}

/** gRPC DEADLINE_EXCEEDED, as the CRI client reports an ExecSync that ran past its timeout. */
const DEADLINE_EXCEEDED = 4;

/** upstream exec prober: exit 0 success, any other exit failure, a timeout failure (ExecProbeTimeout). */
export async function runExecProbe(cri: ExecCri, r: ExecProbeRequest): Promise<ProbeOutcome> {
  const timeoutSeconds = Math.max(1, Math.ceil(r.timeoutMs / 1000));
  try {
    const res = await cri.execSync(r.containerID, r.command, timeoutSeconds);
    const out = Buffer.from(res.stdout ?? []).toString() + Buffer.from(res.stderr ?? []).toString();
    return res.exit_code === 0 ? { result: 'success', output: out } : { result: 'failure', output: out || `command ${JSON.stringify(r.command)} exited with ${res.exit_code}` };
  } catch (err) {
    const code = (err as { grpcCode?: number }).grpcCode;
    if (code === DEADLINE_EXCEEDED || /timeout .* exceeded|deadline exceeded/i.test(errorMessage(err))) {
      return { result: 'failure', output: `command ${JSON.stringify(r.command)} timed out` };
    }
    return { result: 'unknown', output: new ProbeRunError('exec', errorMessage(err), { cause: err }).message };
  }
}

export function createProbeRunner(opts: ProbeRunnerOptions): ProbeRunner {
  let pool: Piscina | undefined;
  let mainThread: ((r: NetworkProbeRequest) => Promise<ProbeOutcome>) | undefined;
  const network = async (r: NetworkProbeRequest): Promise<ProbeOutcome> => {
    if (opts.mode === 'main') {
      mainThread ??= (await import(PROBE_WORKER_URL.href) as { default: (r: NetworkProbeRequest) => Promise<ProbeOutcome> }).default;
      return mainThread(r);
    }
    const threads = opts.threads ?? Math.max(1, Math.min(2, availableParallelism() - 1));
    pool ??= new Piscina({
      filename: PROBE_WORKER_URL.href,
      minThreads: threads,
      maxThreads: threads,
      concurrentTasksPerWorker: PROBES_PER_THREAD,
      maxQueue: MAX_PROBE_QUEUE,
      idleTimeout: 60_000,
    });
    try {
      return await pool.run(r) as ProbeOutcome;
    } catch (err) {
      return { result: 'unknown', output: new ProbeRunError(r.kind, errorMessage(err), { cause: err }).message };
    }
  };
  return {
    run(r: ProbeRequest): Promise<ProbeOutcome> {
      if (r.kind === 'exec') {
        if (!opts.cri) return Promise.resolve({ result: 'unknown', output: new ProbeRunError('exec', 'no container runtime to exec in').message });
        return runExecProbe(opts.cri, r);
      }
      return network(r);
    },
    async close(): Promise<void> {
      const p = pool;
      pool = undefined;
      await p?.destroy();
    },
  };
}
