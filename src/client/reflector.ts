// A reflector, as client-go's: list a collection (paged), hand the differences to a handler,
// then watch from the list's resourceVersion with bookmarks. A 410 (an HTTP answer or an
// ERROR event) means that version was compacted away: list again, and the handler sees only
// what changed meanwhile. A dropped stream or an unreachable server: watch again from the
// last resourceVersion seen, with backoff. The stream is read with backpressure (the handler
// is awaited before the next line) and a bounded line, so nothing grows without limit.

import type { IncomingMessage } from 'node:http';
import type { Clock, Timer } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import { rootLogger, type Logger } from '../util/log.js';
import { ApiStatusError, ApiTransportError, isGone, type ApiStatus } from './errors.js';
import type { RestClient } from './rest.js';
import { ExponentialBackoff, sleep } from './wait.js';

export type ObjectMeta = { name?: string; namespace?: string; resourceVersion?: string; uid?: string };
export type KubeObject = { metadata?: ObjectMeta; [k: string]: unknown };

export interface ReflectorEvent<T extends KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: T;
  /** The object as last seen, for MODIFIED and DELETED. */
  old?: T;
}

export interface ReflectorOptions<T extends KubeObject> {
  client: RestClient;
  /** Collection path, e.g. `/api/v1/pods` or `/api/v1/namespaces/ns/configmaps`. */
  path: string;
  fieldSelector?: string;
  labelSelector?: string;
  handler: (e: ReflectorEvent<T>) => void | Promise<void>;
  /** Called once, after the first list has been handed to the handler. */
  onSynced?: () => void;
  clock?: Clock;
  /** client-go's reflector backoff: 800 ms doubling to 30 s. */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Items per list page (client-go: 500); 0 lists in one answer. */
  pageSize?: number;
  /** Longest watch event line accepted. */
  maxEventBytes?: number;
  /** Server-side watch timeout; client-go picks 5–10 min at random to spread reconnects. */
  watchTimeoutSeconds?: () => number;
  log?: Logger;
}

const keyOf = (o: KubeObject): string => (o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : `${o.metadata?.name}`);

/** A watch that ended: cleanly (`ended`), or with its version compacted away (`gone`). */
type WatchEnd = { kind: 'ended'; events: number } | { kind: 'gone' };

export class Reflector<T extends KubeObject = KubeObject> {
  private readonly o: ReflectorOptions<T>;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly store = new Map<string, T>();
  private syncedResolve!: () => void;
  /** Resolves after the first list reached the handler. */
  readonly synced: Promise<void>;
  hasSynced = false;
  /** The resourceVersion the next watch starts from. */
  lastResourceVersion = '';
  /** Counters for tests and metrics. */
  lists = 0;
  watches = 0;

  constructor(o: ReflectorOptions<T>) {
    this.o = o;
    this.clock = o.clock ?? o.client.clock;
    this.log = (o.log ?? rootLogger).with({ reflector: o.path });
    this.synced = new Promise((r) => { this.syncedResolve = r; });
  }

  /** The objects as the handler has been told them, by namespace/name. */
  items(): T[] {
    return [...this.store.values()];
  }

  /** Lists and watches until `signal` aborts; resolves then (never rejects). */
  async run(signal: AbortSignal): Promise<void> {
    const backoff = new ExponentialBackoff(this.o.backoffInitialMs ?? 800, this.o.backoffMaxMs ?? 30_000);
    const pause = async () => { await sleep(this.clock, backoff.next(), signal).catch(() => undefined); };
    while (!signal.aborted) {
      try {
        await this.list(signal);
        backoff.reset();
      } catch (err) {
        if (signal.aborted) break;
        this.log.warn('list failed', { err: errorMessage(err) });
        await pause();
        continue;
      }
      // Watch from the last version until it is compacted away or the watch fails otherwise.
      while (!signal.aborted) {
        let end: WatchEnd;
        try {
          end = await this.watch(signal);
        } catch (err) {
          if (signal.aborted) break;
          if (isGone(err)) { end = { kind: 'gone' }; } else {
            this.log.warn('watch failed', { err: errorMessage(err), resourceVersion: this.lastResourceVersion });
            await pause();
            // An unreachable server: the version is still good, watch from it again; an
            // error answer: list again, as client-go does.
            if (err instanceof ApiTransportError) continue;
            break;
          }
        }
        if (end.kind === 'gone') {
          this.log.v(2).info('resourceVersion expired, listing again', { resourceVersion: this.lastResourceVersion });
          break;
        }
        // A stream that ended after carrying events is a normal timeout or drop: watch again
        // at once; one that carried nothing may be a server in trouble: back off first.
        if (end.events > 0) backoff.reset();
        else await pause();
      }
    }
  }

  private async list(signal: AbortSignal): Promise<void> {
    this.lists++;
    const pageSize = this.o.pageSize ?? 500;
    const items: T[] = [];
    let rv = '';
    let cont: string | undefined;
    let paged = pageSize > 0;
    for (;;) {
      let page: { metadata?: { resourceVersion?: string; continue?: string }; items?: T[] };
      try {
        page = await this.o.client.get(this.o.path, {
          signal,
          query: { fieldSelector: this.o.fieldSelector, labelSelector: this.o.labelSelector, limit: paged ? pageSize : undefined, continue: cont },
        });
      } catch (err) {
        // A continue token outlived its snapshot: list in one answer instead.
        if (cont !== undefined && isGone(err)) {
          items.length = 0;
          cont = undefined;
          paged = false;
          continue;
        }
        throw err;
      }
      for (const it of page.items ?? []) items.push(it);
      rv = page.metadata?.resourceVersion ?? rv;
      cont = page.metadata?.continue || undefined;
      if (!cont) break;
    }
    await this.replace(items);
    this.lastResourceVersion = rv;
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.syncedResolve();
      this.o.onSynced?.();
    }
  }

  /** Hands the handler what differs between what it knows and a fresh list. */
  private async replace(items: T[]): Promise<void> {
    const seen = new Set<string>();
    for (const obj of items) {
      const k = keyOf(obj);
      seen.add(k);
      const old = this.store.get(k);
      this.store.set(k, obj);
      if (!old) await this.emit({ type: 'ADDED', object: obj });
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) await this.emit({ type: 'MODIFIED', object: obj, old });
    }
    for (const [k, old] of [...this.store]) {
      if (seen.has(k)) continue;
      this.store.delete(k);
      await this.emit({ type: 'DELETED', object: old, old });
    }
  }

  private async emit(e: ReflectorEvent<T>): Promise<void> {
    try {
      await this.o.handler(e);
    } catch (err) {
      this.log.error('handler failed', { type: e.type, object: keyOf(e.object), err: errorMessage(err) });
    }
  }

  private async watch(outer: AbortSignal): Promise<WatchEnd> {
    this.watches++;
    const timeoutSeconds = this.o.watchTimeoutSeconds?.() ?? Math.floor(300 * (1 + Math.random()));
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(outer.reason);
    outer.addEventListener('abort', onAbort, { once: true });
    // A half-open connection sends nothing: give up a while after the server should have ended it.
    const watchdog: Timer = this.clock.setTimeout(() => ctl.abort(new ApiTransportError('ERR_API_TIMEOUT', `watch ${this.o.path}`, 'stream outlived its timeout')), (timeoutSeconds + 30) * 1000);
    try {
      const res = await this.o.client.stream(this.o.path, {
        signal: ctl.signal,
        query: {
          watch: true, resourceVersion: this.lastResourceVersion, allowWatchBookmarks: true, timeoutSeconds,
          fieldSelector: this.o.fieldSelector, labelSelector: this.o.labelSelector,
        },
      });
      return await this.consume(res);
    } catch (err) {
      if (outer.aborted) return { kind: 'ended', events: 0 };
      throw err;
    } finally {
      watchdog.cancel();
      outer.removeEventListener('abort', onAbort);
      ctl.abort();
    }
  }

  private async consume(res: IncomingMessage): Promise<WatchEnd> {
    const max = this.o.maxEventBytes ?? 16 << 20;
    let events = 0;
    let buf = '';
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        buf += chunk.toString('utf8');
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          if (i > max) break;
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (!line.trim()) continue;
          events++;
          if ((await this.event(line)) === 'gone') return { kind: 'gone' };
        }
        if (buf.length > max) throw new ApiTransportError('ERR_API_RESPONSE', `watch ${this.o.path}`, `event longer than ${max} bytes`);
      }
    } catch (err) {
      // A stream cut by the server or network after events is a drop, handled as an end.
      if (err instanceof ApiTransportError || err instanceof ApiStatusError) throw err;
      throw new ApiTransportError('ERR_API_CONNECTION', `watch ${this.o.path}`, `stream cut: ${errorMessage(err)}`, { cause: err });
    } finally {
      res.destroy();
    }
    return { kind: 'ended', events };
  }

  private async event(line: string): Promise<'gone' | undefined> {
    let ev: { type?: string; object?: T & ApiStatus };
    try {
      ev = JSON.parse(line);
    } catch (err) {
      throw new ApiTransportError('ERR_API_RESPONSE', `watch ${this.o.path}`, `event is not JSON: ${line.slice(0, 100)}`, { cause: err });
    }
    const obj = ev.object;
    if (!obj || typeof obj !== 'object') throw new ApiTransportError('ERR_API_RESPONSE', `watch ${this.o.path}`, `event without object: ${line.slice(0, 100)}`);
    if (ev.type === 'ERROR') {
      if (obj.code === 410) return 'gone';
      throw new ApiStatusError(obj.code ?? 500, obj, `watch ${this.o.path}`);
    }
    const rv = obj.metadata?.resourceVersion;
    if (ev.type === 'BOOKMARK') {
      if (rv) this.lastResourceVersion = rv;
      return undefined;
    }
    const k = keyOf(obj);
    const old = this.store.get(k);
    if (ev.type === 'ADDED' || ev.type === 'MODIFIED') {
      this.store.set(k, obj);
      if (rv) this.lastResourceVersion = rv;
      await this.emit(old ? { type: 'MODIFIED', object: obj, old } : { type: 'ADDED', object: obj });
    } else if (ev.type === 'DELETED') {
      if (rv) this.lastResourceVersion = rv;
      if (old) {
        this.store.delete(k);
        await this.emit({ type: 'DELETED', object: obj, old });
      }
    } else {
      throw new ApiTransportError('ERR_API_RESPONSE', `watch ${this.o.path}`, `unknown event type ${JSON.stringify(ev.type)}`);
    }
    return undefined;
  }
}
