// Fast memory-pressure detection on cgroup v2 (upstream's kernelMemcgNotification, where memcg
// usage thresholds do not exist): on the native watcher thread, inotify on the pods cgroup's
// memory.events and a PSI trigger on its memory.pressure. A rise of the high/max/oom counters,
// or the trigger firing, runs the eviction manager at once. It only watches: no limit is set.

import { existsSync } from 'node:fs';
import path from 'node:path';

import type { NativeOomEvent, NativeOomExports, NativeOomWatcherHandle } from '../oom/native-types.js';
import type { Clock, Timer } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { MemcgThresholdNotifier } from './eviction-manager.js';

/** 150 ms of stall in 1 s: needs CAP_SYS_RESOURCE (windows that are not whole 2 s need it). */
export const PSI_MEMORY_TRIGGER = 'some 150000 1000000';
/** The same share of a 2 s window, which an unprivileged process may register. */
export const PSI_MEMORY_TRIGGER_UNPRIVILEGED = 'some 300000 2000000';
/** memory.events counters whose rise calls for a pass (oom_kill moves with oom). */
export const PRESSURE_COUNTERS: readonly string[] = ['high', 'max', 'oom', 'oom_kill'];
/** Least time between two passes asked for; what comes in between asks for one at its end. */
export const V2_NOTIFY_MIN_INTERVAL_MS = 1_000;

const EVENTS_ID = 1;
const PSI_ID = 2;

/** A memory.events watch or PSI trigger could not be armed (naming the file). */
export class MemoryPressureWatchError extends KubeletError {
  /** errno name from the kernel (ENOENT, EINVAL, ...), when there was one. */
  readonly errno?: string;
  constructor(readonly file: string, message: string, options?: { cause?: unknown; errno?: string }) {
    super('ERR_MEMORY_PRESSURE_WATCH', message, options);
    this.errno = options?.errno;
  }
}

/** The counters of a memory.events delta that call for a pass, as `name +n`; empty if none. */
export function memoryEventsRises(deltas: Readonly<Record<string, number>> | undefined): string[] {
  return PRESSURE_COUNTERS.filter((k) => (deltas?.[k] ?? 0) > 0).map((k) => `${k} +${deltas![k]}`);
}

/** One line of a PSI file (memory.pressure): averages in percent, total stall in µs. */
export interface PsiLine {
  avg10: number;
  avg60: number;
  avg300: number;
  total: bigint;
}

/** memory.pressure (or /proc/pressure/memory): `some` and, when present, `full`. */
export function parsePsi(text: string): { some?: PsiLine; full?: PsiLine } {
  const out: { some?: PsiLine; full?: PsiLine } = {};
  for (const line of text.split('\n')) {
    const m = /^(some|full)\s+avg10=(\d+(?:\.\d+)?)\s+avg60=(\d+(?:\.\d+)?)\s+avg300=(\d+(?:\.\d+)?)\s+total=(\d+)\s*$/.exec(line.trim());
    if (!m) continue;
    out[m[1] as 'some' | 'full'] = { avg10: Number(m[2]), avg60: Number(m[3]), avg300: Number(m[4]), total: BigInt(m[5]!) };
  }
  return out;
}

export interface V2MemoryNotifierOptions {
  native: NativeOomExports;
  /** The pods cgroup's directory in the unified hierarchy. */
  podsDir: string;
  clock: Clock;
  log: Logger;
  /** Runs a pass; `key` says what fired. */
  onCross: (key: string) => void;
  /** The counter file (default: memory.events.local of podsDir when the kernel has it, else memory.events). */
  eventsFile?: string;
  /** The PSI file (default: memory.pressure of podsDir); null: no PSI trigger. */
  psiFile?: string | null;
  /** Triggers tried in order while the kernel refuses them with EINVAL (default: 1 s window, then 2 s). */
  psiTriggers?: readonly string[];
  minIntervalMs?: number;
}

type Part = { armed: true; file: string; trigger?: string } | { armed: false; file: string; error: MemoryPressureWatchError };

/** The v2 notifier on its own native watcher; undefined (with why) where it cannot work at all. */
export function createV2MemoryNotifier(o: V2MemoryNotifierOptions): { notifier?: V2MemoryNotifier; reason?: string } {
  const Handle = o.native.OomWatcherHandle;
  if (typeof Handle !== 'function') return { reason: 'native addon has no watcher' };
  let n: V2MemoryNotifier | undefined;
  const handle = new Handle((events) => n?.handle(events));
  if (typeof handle.watchMemoryEvents !== 'function' || typeof handle.watchPressure !== 'function') {
    handle.close();
    return { reason: 'native addon has no memory.events/PSI watches (stale build: rebuild it)' };
  }
  // The eviction loop keeps the process alive, not the notifier.
  handle.unref();
  n = new V2MemoryNotifier(handle, o);
  const parts = n.arm();
  // A missing file may appear (the pods cgroup made later, a removed one made again): kept for
  // the retries; anything else that failed everywhere leaves polling alone.
  if (parts.every((p) => !p.armed && p.error.errno !== 'ENOENT')) {
    n.close();
    return { reason: parts.map((p) => (p.armed ? '' : p.error.message)).join('; ') };
  }
  return { notifier: n };
}

export class V2MemoryNotifier implements MemcgThresholdNotifier {
  readonly #o: V2MemoryNotifierOptions;
  readonly #minInterval: number;
  #events?: Part;
  #psi?: Part;
  #closed = false;
  #lastFiredAt = -Infinity;
  #pending?: { key: string; timer: Timer };
  /** The last native event that asked for a pass: when the thread saw it and when it reached JS (process.hrtime ns). */
  lastCross?: { key: string; observedTimeNs: bigint; deliveredTimeNs: bigint };
  /** The counters of the last memory.events reading. */
  counters: Record<string, number> = {};

  constructor(private readonly native: NativeOomWatcherHandle, o: V2MemoryNotifierOptions) {
    this.#o = o;
    this.#minInterval = o.minIntervalMs ?? V2_NOTIFY_MIN_INTERVAL_MS;
  }

  /** Arms what is not armed yet; returns the state of each part. */
  arm(): Part[] {
    if (this.#closed) return [];
    if (!this.#events?.armed) this.#events = this.#armEvents();
    if (this.#o.psiFile !== null && !this.#psi?.armed) this.#psi = this.#armPsi();
    return [this.#events, this.#psi].filter((p): p is Part => p !== undefined);
  }

  #armEvents(): Part {
    const { podsDir, log } = this.#o;
    const local = path.join(podsDir, 'memory.events.local');
    // .local: the pods cgroup's own limit only; memory.events also counts every container
    // reaching its own limit, which is no node pressure and would run passes all the time.
    const file = this.#o.eventsFile ?? (existsSync(local) ? local : path.join(podsDir, 'memory.events'));
    try {
      this.counters = this.native.watchMemoryEvents!(EVENTS_ID, file);
    } catch (err) {
      return this.#failed(this.#events, file, err);
    }
    log.info('Eviction manager: watching memory.events for memory pressure', { file });
    return { armed: true, file };
  }

  #armPsi(): Part {
    const file = this.#o.psiFile ?? path.join(this.#o.podsDir, 'memory.pressure');
    const triggers = this.#o.psiTriggers ?? [PSI_MEMORY_TRIGGER, PSI_MEMORY_TRIGGER_UNPRIVILEGED];
    let last: unknown;
    for (const trigger of triggers) {
      try {
        this.native.watchPressure!(PSI_ID, file, trigger);
        this.#o.log.info('Eviction manager: PSI trigger armed for memory pressure', { file, trigger });
        return { armed: true, file, trigger };
      } catch (err) {
        last = err;
        // EINVAL: this trigger refused (unprivileged window, unsupported); the next may pass.
        if ((err as NodeJS.ErrnoException).code !== 'EINVAL' || /not a PSI file/.test((err as Error).message)) break;
      }
    }
    return this.#failed(this.#psi, file, last, true);
  }

  #failed(prev: Part | undefined, file: string, err: unknown, psi = false): Part {
    const code = (err as NodeJS.ErrnoException).code;
    const hint = code !== 'ENOENT' ? '' : psi ? ' (no such cgroup yet, or PSI is off: psi=1 on the kernel command line)' : ' (no such cgroup yet)';
    const error = new MemoryPressureWatchError(file, `${(err as Error).message}${hint}`, { cause: err, errno: code });
    // Said once per distinct failure: the manager's refreshes retry quietly.
    if (prev?.armed !== false || prev.error.message !== error.message) {
      this.#o.log.warn('Eviction manager: memory pressure watch unavailable', { file, err: error.message });
    }
    return { armed: false, file, error };
  }

  /**
   * The manager's threshold refresh. v2 has no usage thresholds to move: it re-arms a watch
   * whose file was missing (ENOENT) or went away, so a pods cgroup made later is still watched.
   */
  setThreshold(_key: string, _cgroup: string, _usageBytes: bigint): void {
    if (this.#closed) return;
    const retry = (p: Part | undefined): boolean => p !== undefined && !p.armed && p.error.errno === 'ENOENT';
    if (retry(this.#events)) this.#events = this.#armEvents();
    if (this.#o.psiFile !== null && retry(this.#psi)) this.#psi = this.#armPsi();
  }

  /** Events from the native thread. */
  handle(events: NativeOomEvent[]): void {
    const delivered = process.hrtime.bigint();
    for (const e of events) {
      let key: string | undefined;
      if (e.kind === 'memory_events' && e.id === EVENTS_ID) {
        this.counters = e.counters ?? this.counters;
        const rises = memoryEventsRises(e.deltas);
        if (rises.length) key = `pods memory.events (${rises.join(', ')})`;
      } else if (e.kind === 'memory_pressure' && e.id === PSI_ID && this.#psi?.armed) {
        key = `pods memory.pressure (${this.#psi.trigger})`;
      } else if (e.kind === 'watch_lost' && (e.id === EVENTS_ID || e.id === PSI_ID)) {
        const part = e.id === EVENTS_ID ? this.#events : this.#psi;
        const file = part?.file ?? '';
        const lost: Part = { armed: false, file, error: new MemoryPressureWatchError(file, e.message ?? `watch on ${file} ended`, { errno: 'ENOENT' }) };
        if (e.id === EVENTS_ID) this.#events = lost;
        else this.#psi = lost;
        this.#o.log.warn('Eviction manager: memory pressure watch ended; retried at the next refresh', { file, err: e.message });
      }
      if (key === undefined) continue;
      this.lastCross = { key, observedTimeNs: e.observedTimeNs, deliveredTimeNs: delivered };
      this.#request(key);
    }
  }

  /** One pass now, or, within the least interval of the last one, one at its end. */
  #request(key: string): void {
    if (this.#closed) return;
    if (this.#pending) {
      this.#pending.key = key;
      return;
    }
    const now = this.#o.clock.now();
    const wait = this.#lastFiredAt + this.#minInterval - now;
    if (wait <= 0) {
      this.#fire(key);
      return;
    }
    const timer = this.#o.clock.setTimeout(() => {
      const p = this.#pending;
      this.#pending = undefined;
      if (p && !this.#closed) this.#fire(p.key);
    }, wait);
    this.#pending = { key, timer };
  }

  #fire(key: string): void {
    this.#lastFiredAt = this.#o.clock.now();
    this.#o.onCross(key);
  }

  /** What is armed now: the counter file and the PSI file with its trigger. */
  armed(): { events?: string; psi?: { file: string; trigger: string } } {
    const out: { events?: string; psi?: { file: string; trigger: string } } = {};
    if (this.#events?.armed) out.events = this.#events.file;
    if (this.#psi?.armed) out.psi = { file: this.#psi.file, trigger: this.#psi.trigger! };
    return out;
  }

  /** Why each part that is not armed is not. */
  errors(): MemoryPressureWatchError[] {
    return [this.#events, this.#psi].flatMap((p) => (p && !p.armed ? [p.error] : []));
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#pending?.timer.cancel();
    this.#pending = undefined;
    this.native.close();
  }
}
