// Where probes run: the network kinds (HTTP, TCP, gRPC) in a Piscina pool of worker threads
// (workers/probe.ts) so thousands of sockets a second never stall the syncLoop; exec is a CRI
// ExecSync call, already off-process in the runtime, so it stays on the main thread. Probes and
// results cross to the pool in batches, one message per turn of the loop each way.

import { availableParallelism } from 'node:os';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { CriClient } from '../runtime/cri-client.js';
import { errorMessage } from '../util/errors.js';
import { ProbeRunError } from './errors.js';
import type { ExecProbeRequest, NetworkProbeRequest, ProbeOutcome, ProbeRequest, ProbeRunner } from './types.js';
import type { ProbeBatch, ResultBatch } from '../../workers/probe.js';

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
  /** A pool shared with other off-thread work; created (and destroyed on close) when absent. */
  pool?: Piscina;
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

/** The pool side of the runner: one serve() task per thread, fed through a MessagePort. */
interface Channel {
  port: MessagePort;
  inflight: number;
  /** Probes placed in this turn of the loop, posted together. */
  ids: number[];
  keys: number[];
  defs?: { key: number; req: NetworkProbeRequest }[];
  /** Keys of the requests this thread holds; keys to drop there with the next batch. */
  known: Set<number>;
  forget?: number[];
  served: Promise<unknown>;
}

/** Outcome codes as workers/probe.ts posts them. */
const OUTCOMES: ProbeOutcome['result'][] = ['success', 'warning', 'failure', 'unknown'];
/** The outcome of every successful pool probe (the pool sends no output for a success). */
const SUCCESS: ProbeOutcome = Object.freeze({ result: 'success', output: '' });

export interface ProbePool {
  run(r: NetworkProbeRequest): Promise<ProbeOutcome>;
  close(): Promise<void>;
}

/**
 * Network probes on pool threads with two messages per turn of the loop (the batch of probes
 * started, the batch of results) instead of two per probe; at most PROBES_PER_THREAD in flight
 * per thread, MAX_PROBE_QUEUE waiting beyond that. A probe's request object (the prober keeps
 * one per container probe) crosses to a thread once; each run after that sends a number.
 */
export function createProbePool(pool: Piscina, threads: number): ProbePool {
  const pending = new Map<number, (o: ProbeOutcome) => void>();
  const waiting: { id: number; r: NetworkProbeRequest }[] = [];
  let nextId = 1;
  let nextKey = 1;
  const keys = new WeakMap<NetworkProbeRequest, number>();
  let flushQueued = false;
  let closed = false;
  const channels: Channel[] = [];
  // A request the prober dropped (container replaced, pod gone) is dropped by the threads too.
  const dropped = new FinalizationRegistry<number>((key) => {
    for (const ch of channels) if (ch.known.delete(key)) (ch.forget ??= []).push(key);
  });

  const onResults = (ch: Channel, b: ResultBatch): void => {
    ch.inflight -= b.ids.length;
    for (let i = 0; i < b.ids.length; i++) {
      const done = pending.get(b.ids[i]!);
      if (!done) continue;
      pending.delete(b.ids[i]!);
      const code = b.codes[i]!;
      done(code === 0 ? SUCCESS : { result: OUTCOMES[code] ?? 'unknown', output: b.outputs?.[i] ?? '' });
    }
    drain();
  };
  for (let i = 0; i < threads; i++) {
    const { port1, port2 } = new MessageChannel();
    const ch: Channel = { port: port1, inflight: 0, ids: [], keys: [], known: new Set(), served: Promise.resolve() };
    ch.served = pool.run({ port: port2 }, { name: 'serve', transferList: [port2] }).catch(() => undefined);
    port1.on('message', (b: ResultBatch) => onResults(ch, b));
    // The pool never keeps the process alive by itself.
    port1.unref();
    channels.push(ch);
  }

  const flush = (): void => {
    flushQueued = false;
    for (const ch of channels) {
      if (!ch.ids.length) continue;
      const b: ProbeBatch = { ids: Float64Array.from(ch.ids), keys: Float64Array.from(ch.keys) };
      if (ch.defs) b.defs = ch.defs;
      if (ch.forget) b.forget = ch.forget;
      ch.ids = [];
      ch.keys = [];
      ch.defs = undefined;
      ch.forget = undefined;
      ch.port.postMessage(b);
    }
  };
  const place = (id: number, r: NetworkProbeRequest): boolean => {
    let best: Channel | undefined;
    for (const ch of channels) if (ch.inflight < PROBES_PER_THREAD && (!best || ch.inflight < best.inflight)) best = ch;
    if (!best) return false;
    best.inflight++;
    let key = keys.get(r);
    if (key === undefined) {
      key = nextKey++;
      keys.set(r, key);
      dropped.register(r, key);
    }
    if (!best.known.has(key)) {
      best.known.add(key);
      (best.defs ??= []).push({ key, req: r });
    }
    best.ids.push(id);
    best.keys.push(key);
    if (!flushQueued) {
      flushQueued = true;
      // Everything started in this turn (one schedule slot) goes in one message.
      queueMicrotask(flush);
    }
    return true;
  };
  function drain(): void {
    while (waiting.length && place(waiting[0]!.id, waiting[0]!.r)) waiting.shift();
  }

  return {
    run(r) {
      if (closed) return Promise.resolve({ result: 'unknown', output: new ProbeRunError(r.kind, 'the probe pool is closed').message });
      const id = nextId++;
      return new Promise<ProbeOutcome>((resolve) => {
        if (!place(id, r)) {
          if (waiting.length >= MAX_PROBE_QUEUE) {
            resolve({ result: 'unknown', output: new ProbeRunError(r.kind, `the probe pool is saturated (${waiting.length} probes waiting)`).message });
            return;
          }
          waiting.push({ id, r });
        }
        pending.set(id, resolve);
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      waiting.length = 0;
      for (const ch of channels) {
        ch.port.postMessage({ close: true });
        ch.port.close();
      }
      const gone = new ProbeRunError('network', 'the probe pool closed').message;
      for (const done of pending.values()) done({ result: 'unknown', output: gone });
      pending.clear();
    },
  };
}

/**
 * How long a pool thread with no task lives. Each thread is its own V8 isolate (about 11 MiB
 * RSS): between filesystem accounting passes (a minute apart) none is kept; probe threads run
 * their serve() task for as long as probes exist, so they never idle out.
 */
export const POOL_IDLE_TIMEOUT_MS = 10_000;

/** The Piscina pool for off-thread work (probes, filesystem accounting); threads start on demand. */
export function createWorkerPool(threads: number, idleTimeoutMs = POOL_IDLE_TIMEOUT_MS): Piscina {
  return new Piscina({
    filename: PROBE_WORKER_URL.href,
    minThreads: 0,
    maxThreads: threads,
    // the serve() task of each thread plus a few accounting tasks
    concurrentTasksPerWorker: 4,
    // Tasks here await sockets and files: a thread blocked in Atomics.wait would stall them.
    atomics: 'disabled',
    idleTimeout: idleTimeoutMs,
  });
}

export function defaultPoolThreads(): number {
  return Math.max(1, Math.min(2, availableParallelism() - 1));
}

let shared: { pool: Piscina; threads: number; users: number } | undefined;

/**
 * The process's one pool for off-thread work (probes, filesystem accounting), created by its
 * first user and destroyed when the last one releases it.
 */
export function acquireWorkerPool(): { pool: Piscina; threads: number; release(): Promise<void> } {
  shared ??= { pool: createWorkerPool(defaultPoolThreads()), threads: defaultPoolThreads(), users: 0 };
  const s = shared;
  s.users++;
  let released = false;
  return {
    pool: s.pool,
    threads: s.threads,
    async release() {
      if (released) return;
      released = true;
      if (--s.users > 0) return;
      if (shared === s) shared = undefined;
      await s.pool.destroy();
    },
  };
}

export function createProbeRunner(opts: ProbeRunnerOptions): ProbeRunner {
  let pool: Piscina | undefined;
  let release: (() => Promise<void>) | undefined;
  let probes: ProbePool | undefined;
  let mainThread: ((r: NetworkProbeRequest) => Promise<ProbeOutcome>) | undefined;
  let mainThreadLoad: Promise<unknown> | undefined;
  const network = (r: NetworkProbeRequest): Promise<ProbeOutcome> => {
    if (opts.mode === 'main') {
      if (mainThread) return mainThread(r);
      mainThreadLoad ??= import(PROBE_WORKER_URL.href).then((m: { default: (r: NetworkProbeRequest) => Promise<ProbeOutcome> }) => { mainThread = m.default; });
      return mainThreadLoad.then(() => mainThread!(r));
    }
    if (!probes) {
      if (opts.pool) {
        probes = createProbePool(opts.pool, opts.threads ?? defaultPoolThreads());
      } else if (opts.threads !== undefined) {
        pool = createWorkerPool(opts.threads);
        probes = createProbePool(pool, opts.threads);
      } else {
        const s = acquireWorkerPool();
        release = s.release;
        probes = createProbePool(s.pool, s.threads);
      }
    }
    // straight to the pool: no async wrapper (one promise fewer per probe)
    return probes.run(r);
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
      const p = probes;
      probes = undefined;
      await p?.close();
      // a pool given by the caller is the caller's to destroy; the shared one is released
      const own = pool;
      const rel = release;
      pool = undefined;
      release = undefined;
      await Promise.all([own?.destroy(), rel?.()]);
    },
  };
}
