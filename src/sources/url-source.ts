// The manifest URL source (upstream pkg/kubelet/config/http.go): polls staticPodURL every
// httpCheckFrequency and delivers the full set of pods it serves (SET semantics), only when
// the served bytes changed.
import { realClock, type Clock, type Timer } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import { ManifestError } from './errors.js';
import type { SourceEntry } from './file-source.js';
import { decodePodManifests, MaxManifestBytes } from './manifest.js';
import { HTTPSource } from './static-pod.js';

export interface UrlSourceOptions {
  url: string;
  nodeName: string;
  /** The poll period (httpCheckFrequency). */
  checkPeriodMs: number;
  /** Extra request headers (staticPodURLHeader). */
  headers?: Record<string, string[]>;
  onSet: (entries: SourceEntry[]) => void;
  onError: (e: ManifestError) => void;
  log?: (msg: string) => void;
  /** Per-request timeout; upstream's client uses 10 s. */
  timeoutMs?: number;
  /** Times the polls and the request timeout; default the real clock. */
  clock?: Clock;
  /** Largest response read; default MaxManifestBytes. */
  maxManifestBytes?: number;
}

export class UrlSource {
  private readonly opts: UrlSourceOptions;
  private readonly log: (msg: string) => void;
  private lastData: Buffer | undefined;
  private lastReported: string | undefined;
  private failures = 0;
  private readonly clock: Clock;
  private readonly maxBytes: number;
  private timer: Timer | undefined;
  private inflight: Promise<void> = Promise.resolve();
  private abort: AbortController | undefined;
  private stopped = false;
  private started = false;

  constructor(opts: UrlSourceOptions) {
    this.opts = opts;
    this.log = opts.log ?? (() => {});
    this.clock = opts.clock ?? realClock;
    this.maxBytes = opts.maxManifestBytes ?? MaxManifestBytes;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.log(`Watching URL ${this.opts.url}`);
    void this.loop();
  }

  /** Polls once now and resolves when done (what the timer does every period). */
  check(): Promise<void> {
    this.inflight = this.inflight.then(() => this.poll());
    return this.inflight;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.abort?.abort();
    await this.inflight;
  }

  private async loop(): Promise<void> {
    await this.check();
    if (this.stopped) return;
    this.timer = this.clock.setTimeout(() => void this.loop(), this.opts.checkPeriodMs);
  }

  private async poll(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.extractFromURL();
      if (this.failures > 0) this.log(`Successfully read pods from URL ${this.opts.url}`);
      this.failures = 0;
      this.lastReported = undefined;
    } catch (e) {
      if (this.stopped) return;
      const err = e instanceof ManifestError ? e : new ManifestError(HTTPSource, this.opts.url, errorMessage(e), { cause: e });
      this.failures++;
      // report a failure once until it changes or the URL recovers, as upstream quiets repeats
      if (err.message !== this.lastReported) {
        this.lastReported = err.message;
        this.opts.onError(err);
      }
    }
  }

  private async extractFromURL(): Promise<void> {
    const { url } = this.opts;
    const headers = new Headers();
    for (const [name, values] of Object.entries(this.opts.headers ?? {})) {
      for (const v of values) headers.append(name, v);
    }
    const ctl = new AbortController();
    this.abort = ctl;
    const timeoutMs = this.opts.timeoutMs ?? 10_000;
    const timer = this.clock.setTimeout(() => ctl.abort(new ManifestError(HTTPSource, url, `GET timed out after ${timeoutMs} ms`)), timeoutMs);
    let status: number;
    let statusText: string;
    let data: Buffer;
    try {
      let res: Response;
      try {
        res = await fetch(url, { headers, signal: ctl.signal, redirect: 'follow' });
      } catch (e) {
        const cause = (e as { cause?: unknown }).cause;
        if (ctl.signal.aborted && ctl.signal.reason instanceof ManifestError) throw ctl.signal.reason;
        const why = cause instanceof Error ? cause.message : errorMessage(e);
        throw new ManifestError(HTTPSource, url, `GET failed: ${why}`, { cause: e });
      }
      status = res.status;
      statusText = res.statusText;
      data = await readAtMost(res, this.maxBytes, url, ctl.signal);
    } finally {
      timer.cancel();
      this.abort = undefined;
    }
    if (status !== 200) throw new ManifestError(HTTPSource, url, `${status} ${statusText}`.trim());
    if (data.length === 0) {
      // an empty answer means no pods (and marks the source seen), as upstream
      this.lastData = data;
      this.emit([]);
      throw new ManifestError(HTTPSource, url, `zero-length data received from ${url}`);
    }
    // the same bytes as last time: nothing changed
    if (this.lastData && this.lastData.equals(data)) return;
    this.lastData = data;
    const pods = decodePodManifests(data, { source: HTTPSource, location: url, nodeName: this.opts.nodeName });
    this.emit(pods.map((pod) => ({ pod, location: url })));
  }

  private emit(entries: SourceEntry[]): void {
    if (!this.stopped) this.opts.onSet(entries);
  }
}

/** The body, refused as soon as it is known to exceed `limit` bytes (header or bytes read). */
async function readAtMost(res: Response, limit: number, url: string, signal: AbortSignal): Promise<Buffer> {
  const tooLarge = (size: string): ManifestError =>
    new ManifestError(HTTPSource, url, `response is ${size} bytes, more than the limit of ${limit} bytes`);
  const declared = Number(res.headers.get('content-length') ?? '');
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge(String(declared));
  }
  if (!res.body) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let total = 0;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > limit) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge(`more than ${limit}`);
      }
      chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    }
  } catch (e) {
    // a timeout aborts the body read: say so rather than "aborted"
    if (signal.aborted && signal.reason instanceof ManifestError) throw signal.reason;
    throw e instanceof ManifestError ? e : new ManifestError(HTTPSource, url, `reading the response failed: ${errorMessage(e)}`, { cause: e });
  }
  return Buffer.concat(chunks, total);
}
