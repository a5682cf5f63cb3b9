// The REST client of the API server: JSON over HTTP(S) with the kubeconfig's TLS and
// credentials, client-side rate limiting (token bucket), Status answers as typed errors,
// timeouts through AbortSignal, and retries with backoff for 429 (honouring Retry-After) and
// for 5xx on idempotent requests. Every timer runs on the injected clock.

import { readFileSync } from 'node:fs';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { realClock, type Clock } from '../util/clock.js';
import { ApiStatusError, ApiTransportError, type ApiStatus } from './errors.js';
import { ExecCredentialProvider } from './exec-credential.js';
import type { RestConfig } from './kubeconfig.js';
import { DEFAULT_BURST, DEFAULT_QPS, TokenBucket } from './rate-limiter.js';
import { ExponentialBackoff, sleep } from './wait.js';

export type PatchType = 'strategic' | 'merge' | 'json';

export const patchContentType: Record<PatchType, string> = {
  strategic: 'application/strategic-merge-patch+json',
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
};

export interface RestClientOptions {
  clock?: Clock;
  /** kubeAPIQPS (default 50); 0 or less turns rate limiting off. */
  qps?: number;
  /** kubeAPIBurst (default 100). */
  burst?: number;
  /** Default timeout of one call, retries included (0 = none). */
  timeoutMs?: number;
  /** Retries of a 429 / retryable 5xx answer (client-go: 10). */
  maxRetries?: number;
  /** Backoff between retries when the server names no Retry-After. */
  retryInitialMs?: number;
  retryMaxMs?: number;
  userAgent?: string;
  /** Largest response body read into memory. */
  maxBodyBytes?: number;
}

export type Query = Record<string, string | number | boolean | undefined | null>;

export interface RequestOptions {
  query?: Query;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Safe to repeat after a 5xx (GET and HEAD are; a PUT with a resourceVersion may say so). */
  idempotent?: boolean;
  /** Overrides the client's maxRetries (0 for callers that run their own backoff). */
  maxRetries?: number;
}

const tokenFileRefreshMs = 60_000;

/** Told of every request sent (as client-go's rest_client metrics): method, host, status code or "<error>", seconds. */
let requestObserver: ((method: string, host: string, code: string, seconds: number) => void) | undefined;

/** Sets the process's REST request observer (client-go's metrics are process-wide too). */
export function setRestRequestObserver(fn: typeof requestObserver): void {
  requestObserver = fn;
}

export class RestClient {
  readonly config: RestConfig;
  readonly clock: Clock;
  readonly limiter: TokenBucket | undefined;
  private readonly opts: Required<Omit<RestClientOptions, 'clock' | 'qps' | 'burst'>>;
  private readonly exec: ExecCredentialProvider | undefined;
  private agent: HttpAgent | undefined;
  private agentCert: string | undefined;
  private tokenFromFile: { token: string; readAt: number } | undefined;
  /** Requests sent (attempts, retries included), for tests and metrics. */
  sent = 0;

  constructor(config: RestConfig, opts: RestClientOptions = {}) {
    this.config = config;
    this.clock = opts.clock ?? realClock;
    const qps = opts.qps ?? DEFAULT_QPS;
    if (qps > 0) this.limiter = new TokenBucket(qps, Math.max(1, opts.burst ?? DEFAULT_BURST), this.clock);
    this.opts = {
      timeoutMs: opts.timeoutMs ?? 0,
      maxRetries: opts.maxRetries ?? 10,
      retryInitialMs: opts.retryInitialMs ?? 200,
      retryMaxMs: opts.retryMaxMs ?? 10_000,
      userAgent: opts.userAgent ?? 'kubelet-ts',
      maxBodyBytes: opts.maxBodyBytes ?? 256 << 20,
    };
    if (config.exec) this.exec = new ExecCredentialProvider(config.exec, config, this.clock);
  }

  /**
   * Switches to a new client certificate (certificate rotation): the next request or watch
   * opens connections with it; the pool made with the old one is closed, as client-go's
   * rotating dialer closes its connections, so open watches reconnect with the new one.
   */
  setClientCertificate(certPem: string, keyPem: string): void {
    this.config.certData = certPem;
    this.config.keyData = keyPem;
    this.close();
  }

  get<T = any>(path: string, o: Omit<RequestOptions, 'body'> = {}): Promise<T> {
    return this.request('GET', path, o);
  }

  create<T = any>(path: string, body: unknown, o: RequestOptions = {}): Promise<T> {
    return this.request('POST', path, { ...o, body });
  }

  update<T = any>(path: string, body: unknown, o: RequestOptions = {}): Promise<T> {
    return this.request('PUT', path, { ...o, body });
  }

  patch<T = any>(path: string, type: PatchType, body: unknown, o: RequestOptions = {}): Promise<T> {
    return this.request('PATCH', path, { ...o, body, contentType: patchContentType[type] });
  }

  delete<T = any>(path: string, o: RequestOptions = {}): Promise<T> {
    return this.request('DELETE', path, o);
  }

  /** One call: rate limited, retried as the answer allows, decoded from JSON. */
  async request<T = any>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    const what = `${method} ${path}`;
    const { signal, cleanup } = this.callSignal(what, o);
    try {
      const idempotent = o.idempotent ?? (method === 'GET' || method === 'HEAD');
      const backoff = new ExponentialBackoff(this.opts.retryInitialMs, this.opts.retryMaxMs);
      let authRetried = false;
      for (let attempt = 0; ; attempt++) {
        const res = await this.send(method, path, o, signal, what);
        const body = await this.readBody(res, signal, what);
        const code = res.statusCode ?? 0;
        if (code >= 200 && code < 300) return decodeJson(body, what) as T;
        const err = statusError(code, body, res.headers['retry-after'], what);
        if (code === 401 && this.exec && !authRetried) {
          // An expired or revoked plugin credential: ask the plugin again, once.
          this.exec.invalidate();
          authRetried = true;
          continue;
        }
        const retryable = code === 429 || (code >= 500 && idempotent);
        if (!retryable || attempt >= (o.maxRetries ?? this.opts.maxRetries)) throw err;
        const delay = err.retryAfterSeconds !== undefined ? Math.min(err.retryAfterSeconds * 1000, 60_000) : backoff.next();
        await sleep(this.clock, delay, signal).catch(() => { throw abortError(signal, what); });
      }
    } catch (err) {
      if (signal.aborted && !(err instanceof ApiStatusError)) throw abortError(signal, what);
      throw err;
    } finally {
      cleanup();
    }
  }

  /**
   * A streaming GET (watch): rate limited, not retried; resolves with the open response once
   * the server answered 2xx, or rejects with its Status. Aborting `signal` closes the stream.
   */
  async stream(path: string, o: Omit<RequestOptions, 'body'> & { signal: AbortSignal }): Promise<IncomingMessage> {
    const what = `GET ${path}`;
    let res: IncomingMessage;
    try {
      res = await this.send('GET', path, o, o.signal, what);
    } catch (err) {
      if (o.signal.aborted) throw abortError(o.signal, what);
      throw err;
    }
    const code = res.statusCode ?? 0;
    if (code >= 200 && code < 300) return res;
    const body = await this.readBody(res, o.signal, what);
    if (code === 401) this.exec?.invalidate();
    throw statusError(code, body, res.headers['retry-after'], what);
  }

  /** Closes pooled connections. */
  close(): void {
    this.agent?.destroy();
    this.agent = undefined;
  }

  private callSignal(what: string, o: RequestOptions): { signal: AbortSignal; cleanup: () => void } {
    const ctl = new AbortController();
    const timeoutMs = o.timeoutMs ?? this.opts.timeoutMs;
    const timer = timeoutMs > 0
      ? this.clock.setTimeout(() => ctl.abort(new ApiTransportError('ERR_API_TIMEOUT', what, `no answer within ${timeoutMs} ms`)), timeoutMs)
      : undefined;
    const outer = o.signal;
    const onAbort = () => ctl.abort(outer!.reason ?? new ApiTransportError('ERR_API_ABORTED', what, 'aborted'));
    if (outer?.aborted) onAbort();
    else outer?.addEventListener('abort', onAbort, { once: true });
    return {
      signal: ctl.signal,
      cleanup: () => {
        timer?.cancel();
        outer?.removeEventListener('abort', onAbort);
      },
    };
  }

  private async headers(): Promise<{ headers: Record<string, string>; cert?: { cert: string; key: string } }> {
    const headers: Record<string, string> = { Accept: 'application/json', 'User-Agent': this.opts.userAgent };
    const c = this.config;
    let cert = c.certData && c.keyData ? { cert: c.certData, key: c.keyData } : undefined;
    if (c.token) headers.Authorization = `Bearer ${c.token}`;
    else if (c.tokenFile) headers.Authorization = `Bearer ${this.fileToken(c.tokenFile)}`;
    else if (c.username !== undefined) headers.Authorization = `Basic ${Buffer.from(`${c.username}:${c.password ?? ''}`).toString('base64')}`;
    if (this.exec) {
      const cred = await this.exec.get();
      if (cred.token) headers.Authorization = `Bearer ${cred.token}`;
      if (cred.certData && cred.keyData) cert = { cert: cred.certData, key: cred.keyData };
    }
    return cert ? { headers, cert } : { headers };
  }

  private fileToken(file: string): string {
    const now = this.clock.now();
    const t = this.tokenFromFile;
    if (t && now - t.readAt < tokenFileRefreshMs) return t.token;
    try {
      const token = readFileSync(file, 'utf8').trim();
      this.tokenFromFile = { token, readAt: now };
      return token;
    } catch (err) {
      // A rotation in progress: keep the last token rather than fail the request.
      if (t) return t.token;
      throw new ApiTransportError('ERR_API_CONNECTION', `${this.config.source}: tokenFile`, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
    }
  }

  private agentFor(cert: { cert: string; key: string } | undefined): HttpAgent {
    const key = cert ? cert.cert : '';
    if (this.agent && this.agentCert === key) return this.agent;
    this.agent?.destroy();
    const c = this.config;
    this.agent = c.server.startsWith('https:')
      ? new HttpsAgent({
        keepAlive: true,
        ...(c.caData ? { ca: c.caData } : {}),
        ...(cert ? { cert: cert.cert, key: cert.key } : {}),
        ...(c.tlsServerName ? { servername: c.tlsServerName } : {}),
        rejectUnauthorized: !c.insecureSkipTLSVerify,
      })
      : new HttpAgent({ keepAlive: true });
    this.agentCert = key;
    return this.agent;
  }

  private async send(method: string, path: string, o: RequestOptions, signal: AbortSignal, what: string): Promise<IncomingMessage> {
    if (this.limiter) await this.limiter.accept(signal);
    const { headers, cert } = await this.headers();
    const url = new URL(this.config.server + path);
    for (const [k, v] of Object.entries(o.query ?? {})) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    let payload: Buffer | undefined;
    if (o.body !== undefined) {
      payload = Buffer.from(typeof o.body === 'string' ? o.body : JSON.stringify(o.body));
      headers['Content-Type'] = o.contentType ?? 'application/json';
      headers['Content-Length'] = String(payload.length);
    }
    const agent = this.agentFor(cert);
    this.sent++;
    const start = performance.now();
    const observe = requestObserver && ((code: string) => requestObserver?.(method, url.host, code, (performance.now() - start) / 1000));
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(abortError(signal, what));
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, { method, headers, agent });
      const onAbort = () => req.destroy(abortError(signal, what));
      signal.addEventListener('abort', onAbort, { once: true });
      req.on('error', (err: NodeJS.ErrnoException) => {
        signal.removeEventListener('abort', onAbort);
        observe?.('<error>');
        reject(signal.aborted ? abortError(signal, what) : new ApiTransportError('ERR_API_CONNECTION', what, `${err.code ?? ''} ${err.message}`.trim(), { cause: err }));
      });
      req.on('response', (res) => {
        // The abort listener stays until the body is done, so an abort also ends a stream.
        res.on('close', () => signal.removeEventListener('abort', onAbort));
        observe?.(String(res.statusCode ?? 0));
        resolve(res);
      });
      req.end(payload);
    });
  }

  private readBody(res: IncomingMessage, signal: AbortSignal, what: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        size += d.length;
        if (size > this.opts.maxBodyBytes) {
          res.destroy(new ApiTransportError('ERR_API_RESPONSE', what, `answer larger than ${this.opts.maxBodyBytes} bytes`));
          return;
        }
        chunks.push(d);
      });
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', (err) => reject(signal.aborted ? abortError(signal, what)
        : err instanceof ApiTransportError ? err : new ApiTransportError('ERR_API_CONNECTION', what, `answer cut short: ${err.message}`, { cause: err })));
      res.on('aborted', () => reject(new ApiTransportError('ERR_API_CONNECTION', what, 'answer cut short')));
    });
  }
}

function abortError(signal: AbortSignal, what: string): Error {
  const r = signal.reason;
  if (r instanceof ApiTransportError) return r;
  return new ApiTransportError('ERR_API_ABORTED', what, 'aborted', { cause: r });
}

function decodeJson(body: string, what: string): unknown {
  if (body === '') return undefined;
  try {
    return JSON.parse(body);
  } catch (err) {
    throw new ApiTransportError('ERR_API_RESPONSE', what, `answer is not JSON: ${body.slice(0, 100)}`, { cause: err });
  }
}

/** A non-2xx answer as a typed error: the Status when the server sent one, else its text. */
export function statusError(code: number, body: string, retryAfter: string | string[] | undefined, what: string): ApiStatusError {
  let status: ApiStatus = { message: body.trim().slice(0, 500) || undefined };
  try {
    const doc = JSON.parse(body);
    if (doc && typeof doc === 'object' && doc.kind === 'Status') status = doc as ApiStatus;
  } catch { /* not JSON: keep the text */ }
  const ra = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
  const seconds = ra !== undefined && /^\d+$/.test(ra.trim()) ? Number(ra) : undefined;
  return new ApiStatusError(code, status, what, seconds);
}
