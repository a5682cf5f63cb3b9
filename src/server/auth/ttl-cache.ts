// A bounded map whose entries expire by the injected clock (checked on read, no timers), with
// in-flight lookups shared: concurrent requests with one token or one review cost one call.

import type { Clock } from '../../util/clock.js';

export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly inflight = new Map<string, Promise<V>>();

  constructor(private readonly clock: Clock, private readonly maxEntries = 10_000) {}

  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expires <= this.clock.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e.value;
  }

  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0) return;
    this.entries.delete(key);
    // The oldest insertion goes first when full (a Map iterates in insertion order).
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, expires: this.clock.now() + ttlMs });
  }

  /** The cached value, or one `load` shared by every caller until it settles; `ttl` picks its lifetime. */
  async getOrLoad(key: string, load: () => Promise<V>, ttl: (v: V) => number): Promise<V> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    let p = this.inflight.get(key);
    if (!p) {
      p = load().then((v) => { this.set(key, v, ttl(v)); return v; }).finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  get size(): number {
    return this.entries.size;
  }
}
