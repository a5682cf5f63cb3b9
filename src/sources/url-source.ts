// The manifest URL source (upstream pkg/kubelet/config/http.go): polls staticPodURL every
// httpCheckFrequency and delivers the full set of pods it serves (SET semantics), only when
// the served bytes changed.
import type { ManifestError as ManifestErrorType } from './errors.js';
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
  onError: (e: ManifestErrorType) => void;
  log?: (msg: string) => void;
  /** Per-request timeout; upstream's client uses 10 s. */
  timeoutMs?: number;
}

export class UrlSource {
  private readonly opts: UrlSourceOptions;
  private readonly log: (msg: string) => void;
  private lastData: Buffer | undefined;
  private lastReported: string | undefined;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> = Promise.resolve();
  private abort: AbortController | undefined;
  private stopped = false;
  private started = false;

  constructor(opts: UrlSourceOptions) {
    this.opts = opts;
    this.log = opts.log ?? (() => {});
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
    if (this.timer) clearTimeout(this.timer);
    this.abort?.abort();
    await this.inflight;
  }

  private async loop(): Promise<void> {
    await this.check();
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.loop(), this.opts.checkPeriodMs);
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
      const err = e instanceof ManifestError ? e : new ManifestError(HTTPSource, this.opts.url, (e as Error).message ?? String(e), { cause: e });
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
    const timer = setTimeout(() => ctl.abort(new Error(`timed out after ${this.opts.timeoutMs ?? 10_000} ms`)), this.opts.timeoutMs ?? 10_000);
    let status: number;
    let statusText: string;
    let data: Buffer;
    try {
      let res: Response;
      try {
        res = await fetch(url, { headers, signal: ctl.signal, redirect: 'follow' });
      } catch (e) {
        const cause = (e as { cause?: unknown }).cause;
        const why = ctl.signal.aborted && ctl.signal.reason instanceof Error ? ctl.signal.reason.message : cause instanceof Error ? cause.message : (e as Error).message;
        throw new ManifestError(HTTPSource, url, `GET failed: ${why}`, { cause: e });
      }
      status = res.status;
      statusText = res.statusText;
      data = await readAtMost(res, MaxManifestBytes, url);
    } finally {
      clearTimeout(timer);
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

async function readAtMost(res: Response, limit: number, url: string): Promise<Buffer> {
  if (!res.body) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let total = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel();
      throw new ManifestError(HTTPSource, url, `response is more than the limit of ${limit} bytes`);
    }
    chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  }
  return Buffer.concat(chunks, total);
}
