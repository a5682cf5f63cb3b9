// Events to the API server, as client-go's event broadcaster with its correlator: similar
// events are aggregated (10 distinct messages for one object and reason within 10 minutes
// become one "(combined from similar events): ..." event), repeats are deduplicated (a PATCH
// of count, lastTimestamp and message instead of a new Event), and a token bucket per
// source+object (burst 25, one more every 5 minutes) drops the rest, so a crash loop cannot
// flood the API server. Sending is asynchronous from a bounded queue (full: the new event is
// dropped), one at a time, retried on transport errors and 5xx; nothing here blocks a caller.

import type { RestClient } from '../client/rest.js';
import { ApiStatusError, isNotFound } from '../client/errors.js';
import { TokenBucket } from '../client/rate-limiter.js';
import type { Clock, Timer } from '../util/clock.js';
import { errorMessage } from '../util/errors.js';
import type { Logger } from '../util/log.js';

export interface ObjectReference {
  kind: string;
  namespace?: string;
  name: string;
  uid?: string;
  apiVersion?: string;
  fieldPath?: string;
}

/** A core/v1 Event as the kubelet writes it. */
export interface ApiEvent {
  apiVersion: 'v1';
  kind: 'Event';
  metadata: { name: string; namespace: string; resourceVersion?: string };
  involvedObject: ObjectReference;
  reason: string;
  message: string;
  source: { component: string; host: string };
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
  type: 'Normal' | 'Warning';
  reportingComponent: string;
  reportingInstance: string;
}

/** client-go defaults (tools/record). */
export const AGGREGATE_MAX_EVENTS = 10;
export const AGGREGATE_INTERVAL_MS = 10 * 60_000;
export const SPAM_BURST = 25;
export const SPAM_QPS = 1 / 300;
export const MAX_QUEUED_EVENTS = 1000;
export const MAX_TRIES_PER_EVENT = 12;
export const RETRY_SLEEP_MS = 10_000;
/** LRU size of each correlator cache (client-go maxLruCacheEntries). */
const CACHE_ENTRIES = 4096;

const metaTime = (ms: number): string => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

const refKey = (r: ObjectReference): string[] => [r.kind, r.namespace ?? '', r.name, r.uid ?? '', r.apiVersion ?? ''];

/** A Map that forgets its least recently used entry past `max`. */
class Lru<V> {
  private readonly m = new Map<string, V>();
  constructor(private readonly max: number) {}
  get(k: string): V | undefined {
    const v = this.m.get(k);
    if (v !== undefined) { this.m.delete(k); this.m.set(k, v); }
    return v;
  }
  set(k: string, v: V): void {
    this.m.delete(k);
    this.m.set(k, v);
    if (this.m.size > this.max) this.m.delete(this.m.keys().next().value!);
  }
  get size(): number { return this.m.size; }
}

export interface Correlated {
  event: ApiEvent;
  /** Set for a repeat: the PATCH body (count, lastTimestamp, message). */
  patch?: { count: number; lastTimestamp: string; message: string };
  /** The spam filter dropped it. */
  skip: boolean;
}

/** client-go's EventCorrelator: aggregator, then the dedupe logger, then the spam filter. */
export class EventCorrelator {
  private readonly aggregates = new Lru<{ localKeys: Set<string>; lastTimestamp: number }>(CACHE_ENTRIES);
  private readonly observed = new Lru<{ count: number; firstTimestamp: string; name: string; resourceVersion?: string }>(CACHE_ENTRIES);
  private readonly spam = new Lru<TokenBucket>(CACHE_ENTRIES);
  private seq = 0;

  constructor(private readonly clock: Clock, private readonly o: { maxEvents?: number; intervalMs?: number; spamBurst?: number; spamQps?: number } = {}) {}

  /** A fresh event name: `<object>.<hex nanoseconds>`, unique within this process. */
  eventName(objectName: string): string {
    const ns = BigInt(this.clock.now()) * 1_000_000n + BigInt(this.seq++ % 1_000_000);
    return `${objectName}.${ns.toString(16)}`;
  }

  correlate(input: ApiEvent): Correlated {
    const now = this.clock.now();
    let event = structuredClone(input);
    // Aggregation: by everything but the message.
    const aggregateKey = [event.source.component, event.source.host, ...refKey(event.involvedObject), event.type, event.reason, event.reportingComponent, event.reportingInstance].join('\0');
    let key = eventKey(event);
    let rec = this.aggregates.get(aggregateKey);
    if (!rec || now - rec.lastTimestamp > (this.o.intervalMs ?? AGGREGATE_INTERVAL_MS)) rec = { localKeys: new Set(), lastTimestamp: now };
    rec.localKeys.add(event.message);
    rec.lastTimestamp = now;
    this.aggregates.set(aggregateKey, rec);
    if (rec.localKeys.size >= (this.o.maxEvents ?? AGGREGATE_MAX_EVENTS)) {
      // Keep the set at the limit: drop one key (Go's PopAny), so the next new message aggregates too.
      rec.localKeys.delete(rec.localKeys.values().next().value!);
      const t = metaTime(now);
      event = {
        ...event,
        metadata: { name: this.eventName(event.involvedObject.name), namespace: event.metadata.namespace },
        count: 1, firstTimestamp: t, lastTimestamp: t,
        message: `(combined from similar events): ${event.message}`,
      };
      key = aggregateKey;
    }
    // Dedupe: a repeat keeps the first name and timestamp and counts up.
    let patch: Correlated['patch'];
    const last = this.observed.get(key);
    if (last && last.count > 0) {
      event.metadata.name = last.name;
      if (last.resourceVersion) event.metadata.resourceVersion = last.resourceVersion;
      event.firstTimestamp = last.firstTimestamp;
      event.count = last.count + 1;
      patch = { count: event.count, lastTimestamp: event.lastTimestamp, message: event.message };
    }
    this.observed.set(key, { count: event.count, firstTimestamp: event.firstTimestamp, name: event.metadata.name, ...(event.metadata.resourceVersion ? { resourceVersion: event.metadata.resourceVersion } : {}) });
    // Spam filter: per source and object.
    const spamKey = [event.source.component, event.source.host, ...refKey(event.involvedObject)].join('\0');
    let bucket = this.spam.get(spamKey);
    if (!bucket) {
      bucket = new TokenBucket(this.o.spamQps ?? SPAM_QPS, this.o.spamBurst ?? SPAM_BURST, this.clock);
      this.spam.set(spamKey, bucket);
    }
    if (!bucket.tryAccept()) return { event, skip: true };
    return patch ? { event, patch, skip: false } : { event, skip: false };
  }

  /** After a write: remember what the API server holds (its name, count and resourceVersion). */
  updateState(written: ApiEvent): void {
    this.observed.set(eventKey(written), {
      count: written.count, firstTimestamp: written.firstTimestamp, name: written.metadata.name,
      ...(written.metadata.resourceVersion ? { resourceVersion: written.metadata.resourceVersion } : {}),
    });
  }
}

function eventKey(e: ApiEvent): string {
  const r = e.involvedObject;
  return [e.source.component, e.source.host, r.kind, r.namespace ?? '', r.name, r.fieldPath ?? '', r.uid ?? '', r.apiVersion ?? '', e.type, e.reason, e.message].join('\0');
}

export interface EventSinkOptions {
  client: RestClient;
  clock: Clock;
  log: Logger;
  /** The node: source.host and reportingInstance. */
  host: string;
  component?: string;
  /** eventRecordQPS (0: no limit) and eventBurst. */
  qps?: number;
  burst?: number;
  maxQueued?: number;
  maxTries?: number;
  retrySleepMs?: number;
  random?: () => number;
  correlator?: EventCorrelator;
}

export class EventSink {
  readonly correlator: EventCorrelator;
  private readonly o: EventSinkOptions;
  private readonly queue: ApiEvent[] = [];
  private readonly limiter: TokenBucket | undefined;
  private readonly ctl = new AbortController();
  private running = false;
  private sleepTimer: Timer | undefined;
  /** Counters (tests, metrics). */
  readonly stats = { created: 0, patched: 0, dropped: 0, skipped: 0, failed: 0 };

  constructor(o: EventSinkOptions) {
    this.o = o;
    this.correlator = o.correlator ?? new EventCorrelator(o.clock);
    const qps = o.qps ?? 50;
    if (qps > 0) this.limiter = new TokenBucket(qps, Math.max(1, o.burst ?? 100), o.clock);
  }

  /** Queues an event for the API server; returns at once. */
  post(ref: ObjectReference, type: 'Normal' | 'Warning', reason: string, message: string): void {
    if (this.ctl.signal.aborted) return;
    if (this.queue.length >= (this.o.maxQueued ?? MAX_QUEUED_EVENTS)) {
      this.stats.dropped++;
      return;
    }
    const t = metaTime(this.o.clock.now());
    const component = this.o.component ?? 'kubelet';
    this.queue.push({
      apiVersion: 'v1', kind: 'Event',
      metadata: { name: this.correlator.eventName(ref.name), namespace: ref.namespace || 'default' },
      involvedObject: ref, reason, message, type,
      source: { component, host: this.o.host },
      firstTimestamp: t, lastTimestamp: t, count: 1,
      reportingComponent: component, reportingInstance: this.o.host,
    });
    if (!this.running) void this.drain();
  }

  /** Events waiting to be sent. */
  pending(): number {
    return this.queue.length;
  }

  /** Drops what is queued, aborts the write in flight and closes the client's connections; never waits. */
  stop(): void {
    this.ctl.abort();
    this.sleepTimer?.cancel();
    this.queue.length = 0;
    this.o.client.close();
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length && !this.ctl.signal.aborted) await this.send(this.queue.shift()!);
    } finally {
      this.running = false;
    }
  }

  private async send(raw: ApiEvent): Promise<void> {
    const r = this.correlator.correlate(raw);
    if (r.skip) {
      this.stats.skipped++;
      return;
    }
    const maxTries = this.o.maxTries ?? MAX_TRIES_PER_EVENT;
    for (let tries = 1; ; tries++) {
      if (await this.write(r)) return;
      if (tries >= maxTries || this.ctl.signal.aborted) {
        this.stats.failed++;
        if (!this.ctl.signal.aborted) this.o.log.error('Unable to write event (retry limit exceeded)', { reason: r.event.reason, object: `${r.event.involvedObject.kind} ${r.event.involvedObject.name}` });
        return;
      }
      // The first wait is random, so clients do not all return together after an outage.
      const sleepMs = this.o.retrySleepMs ?? RETRY_SLEEP_MS;
      await this.sleep(tries === 1 ? sleepMs * (this.o.random ?? Math.random)() : sleepMs);
    }
  }

  /** One attempt: true when done (written, or refused for good), false to retry. */
  private async write(r: Correlated): Promise<boolean> {
    const { client } = this.o;
    const e = r.event;
    const base = `/api/v1/namespaces/${encodeURIComponent(e.metadata.namespace)}/events`;
    const opts = { signal: this.ctl.signal, maxRetries: 0, timeoutMs: 30_000 };
    try {
      if (this.limiter) await this.limiter.accept(this.ctl.signal);
      let written: ApiEvent | undefined;
      if (r.patch) {
        try {
          written = await client.patch<ApiEvent>(`${base}/${encodeURIComponent(e.metadata.name)}`, 'strategic', r.patch, opts);
          this.stats.patched++;
        } catch (err) {
          // The Event may have been deleted (or expired): write it anew.
          if (!isNotFound(err)) throw err;
        }
      }
      if (!written) {
        const { resourceVersion: _, ...metadata } = e.metadata;
        written = await client.create<ApiEvent>(base, { ...e, metadata }, opts);
        this.stats.created++;
      }
      this.correlator.updateState(written);
      return true;
    } catch (err) {
      if (this.ctl.signal.aborted) return true;
      if (err instanceof ApiStatusError && err.httpCode < 500 && err.httpCode !== 429) {
        if (err.reason !== 'AlreadyExists') this.o.log.error('Server rejected event (will not retry)', { reason: e.reason, err: errorMessage(err) });
        return true;
      }
      this.o.log.v(2).info('Unable to write event (may retry after sleeping)', { reason: e.reason, err: errorMessage(err) });
      return false;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.ctl.signal.aborted) return resolve();
      const done = () => {
        this.sleepTimer?.cancel();
        this.sleepTimer = undefined;
        this.ctl.signal.removeEventListener('abort', done);
        resolve();
      };
      this.sleepTimer = this.o.clock.setTimeout(done, ms);
      this.ctl.signal.addEventListener('abort', done, { once: true });
    });
  }
}
