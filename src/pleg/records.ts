// The PLEG's record of every sandbox and container the runtime holds, kept across relists and
// events so a relist costs what changed: a record is created once per id and then only its
// state moves. Every observation carries a time; one older than what the record already holds
// is stale and ignored, which is how relists and CRI events share one truth without emitting an
// event twice. The lifecycle events come from state transitions of a record (upstream's
// generateEvents), so a transition is reported exactly once whoever observes it first.

import type { KnownPod, PodLifecycleEvent } from './types.js';
import { PlegError } from './errors.js';

/** A record's state: the CRI state name, or '' for "does not exist". */
export type RecordState =
  | ''
  | 'CONTAINER_CREATED'
  | 'CONTAINER_RUNNING'
  | 'CONTAINER_EXITED'
  | 'CONTAINER_UNKNOWN'
  | 'SANDBOX_READY'
  | 'SANDBOX_NOTREADY';

export const NON_EXISTENT: RecordState = '';

/** Enum numbers of runtime.v1 ContainerState and PodSandboxState, as names. */
export const CONTAINER_STATE_NAMES: readonly RecordState[] = ['CONTAINER_CREATED', 'CONTAINER_RUNNING', 'CONTAINER_EXITED', 'CONTAINER_UNKNOWN'];
export const SANDBOX_STATE_NAMES: readonly RecordState[] = ['SANDBOX_READY', 'SANDBOX_NOTREADY'];

/** upstream plegContainerState. */
export type PlegState = 'running' | 'exited' | 'unknown' | 'non-existent';

/** upstream convertState (sandboxes count as containers: ready = running, else exited). */
export function plegState(s: RecordState): PlegState {
  switch (s) {
    case 'CONTAINER_RUNNING':
    case 'SANDBOX_READY':
      return 'running';
    case 'CONTAINER_EXITED':
    case 'SANDBOX_NOTREADY':
      return 'exited';
    case '':
      return 'non-existent';
    default:
      // kubelet does not use "created" yet: it reads as unknown
      return 'unknown';
  }
}

/** Events for one container moving between two PLEG states (upstream's generateEvents). */
export function generateEvents(uid: string, id: string, oldS: PlegState, newS: PlegState): PodLifecycleEvent[] {
  if (oldS === newS) return [];
  switch (newS) {
    case 'running':
      return [{ id: uid, type: 'ContainerStarted', data: id }];
    case 'exited':
      return [{ id: uid, type: 'ContainerDied', data: id }];
    case 'unknown':
      return [{ id: uid, type: 'ContainerChanged', data: id }];
    case 'non-existent':
      // a container already reported dead is only removed
      if (oldS === 'exited') return [{ id: uid, type: 'ContainerRemoved', data: id }];
      return [
        { id: uid, type: 'ContainerDied', data: id },
        { id: uid, type: 'ContainerRemoved', data: id },
      ];
  }
}

export interface RuntimeRecord {
  readonly id: string;
  readonly sandbox: boolean;
  readonly podUid: string;
  readonly podName: string;
  readonly podNamespace: string;
  /** Container name ('' for a sandbox, or until a status tells it). */
  name: string;
  state: RecordState;
  /** ms since the epoch. */
  createdAt: number;
  attempt: number;
  /** Time of the observation that set `state` (ms); -Infinity before the first. */
  observedAt: number;
  /** Relist scratch: the generation that last listed it, and the state listed. */
  listGen: number;
  listState: RecordState;
  /** Hash of the id bytes (the wire decoder finds records without building the id string). */
  readonly hash: number;
  /** Next record with the same hash. */
  next: RuntimeRecord | undefined;
  /** Where the id's bytes are in the store's id arena; -1 when the id is not latin1. */
  idOff: number;
  /** Index in RecordStore.all. */
  slot: number;
}

interface PodEntry extends KnownPod {
  name: string;
  namespace: string;
  readonly sandboxes: RuntimeRecord[];
  readonly containers: RuntimeRecord[];
}

/** A pod with transitions not yet delivered: its events wait for its status to be cached. */
export interface DirtyPod {
  readonly uid: string;
  name: string;
  namespace: string;
  readonly events: PodLifecycleEvent[];
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** Bytes hashed at each end of a long id: runtime ids are random hex, 16 chars carry 64 bits. */
const HASH_EDGE = 16;

/**
 * FNV-1a over the id's bytes (the first and last 16 of a long one), kept in the small-integer
 * range so map keys never allocate. Equality is always checked on the whole id.
 */
export function hashBytes(buf: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET;
  if (end - start <= 2 * HASH_EDGE) {
    for (let i = start; i < end; i++) h = Math.imul(h ^ buf[i]!, FNV_PRIME);
  } else {
    for (let i = start; i < start + HASH_EDGE; i++) h = Math.imul(h ^ buf[i]!, FNV_PRIME);
    for (let i = end - HASH_EDGE; i < end; i++) h = Math.imul(h ^ buf[i]!, FNV_PRIME);
  }
  return (h >>> 0) & 0x3fffffff;
}

/** hashBytes of a latin1 string (container ids are ASCII). */
export function hashString(s: string): number {
  let h = FNV_OFFSET;
  const n = s.length;
  if (n <= 2 * HASH_EDGE) {
    for (let i = 0; i < n; i++) h = Math.imul(h ^ (s.charCodeAt(i) & 0xff), FNV_PRIME);
  } else {
    for (let i = 0; i < HASH_EDGE; i++) h = Math.imul(h ^ (s.charCodeAt(i) & 0xff), FNV_PRIME);
    for (let i = n - HASH_EDGE; i < n; i++) h = Math.imul(h ^ (s.charCodeAt(i) & 0xff), FNV_PRIME);
  }
  return (h >>> 0) & 0x3fffffff;
}

/** Initial size of the id arena (bytes); it doubles as needed and compacts when half dead. */
const ARENA_INITIAL = 64 * 1024;

export class RecordStore {
  private readonly byId = new Map<string, RuntimeRecord>();
  /**
   * Every record's id bytes, back to back: a relist compares listed ids with them byte for
   * byte in typed arrays (comparing with the id string costs several times more per byte).
   */
  private arena = new Uint8Array(ARENA_INITIAL);
  private arenaUsed = 0;
  private arenaLive = 0;
  private readonly byHash = new Map<number, RuntimeRecord>();
  /** Every record, densely (iterated by the diff without allocating). */
  readonly all: RuntimeRecord[] = [];
  readonly pods = new Map<string, PodEntry>();
  /** Pods with undelivered transitions, in the order they changed. */
  readonly dirty = new Map<string, DirtyPod>();
  /** Ids removed, with when the removal was observed: a late event for them is stale. */
  private readonly tombstones = new Map<string, number>();

  /** Bumped whenever a record is created or forgotten: a list decode remembered at one value still names live records. */
  membership = 0;

  get size(): number {
    return this.all.length;
  }

  get(id: string): RuntimeRecord | undefined {
    return this.byId.get(id);
  }

  /** The record whose id is buf[start, end), or undefined; allocates nothing. */
  findBytes(buf: Uint8Array, start: number, end: number, hash: number): RuntimeRecord | undefined {
    const len = end - start;
    const arena = this.arena;
    for (let r = this.byHash.get(hash); r; r = r.next) {
      const id = r.id;
      if (id.length !== len) continue;
      let i = 0;
      const off = r.idOff;
      if (off >= 0) while (i < len && arena[off + i] === buf[start + i]) i++;
      else while (i < len && id.charCodeAt(i) === buf[start + i]) i++;
      if (i === len) return r;
    }
    return undefined;
  }

  /** Copies a latin1 id into the arena; -1 (compared as a string) when it is not latin1. */
  private storeId(id: string): number {
    const len = id.length;
    for (let i = 0; i < len; i++) if (id.charCodeAt(i) > 0xff) return -1;
    if (this.arenaUsed + len > this.arena.length) this.compactArena(len);
    const off = this.arenaUsed;
    const arena = this.arena;
    for (let i = 0; i < len; i++) arena[off + i] = id.charCodeAt(i);
    this.arenaUsed += len;
    this.arenaLive += len;
    return off;
  }

  /** Rewrites the live ids into an arena with room for `more` bytes (half free at least). */
  private compactArena(more: number): void {
    let size = ARENA_INITIAL;
    while (size < 2 * (this.arenaLive + more)) size *= 2;
    const old = this.arena;
    const arena = new Uint8Array(size);
    let used = 0;
    for (const r of this.all) {
      if (r.idOff < 0) continue;
      arena.set(old.subarray(r.idOff, r.idOff + r.id.length), used);
      r.idOff = used;
      used += r.id.length;
    }
    this.arena = arena;
    this.arenaUsed = used;
    this.arenaLive = used;
  }

  /** A new record in the non-existent state; the first observation attaches it to its pod. */
  create(
    id: string,
    sandbox: boolean,
    podUid: string,
    podName: string,
    podNamespace: string,
    name: string,
    createdAt: number,
    attempt: number,
    hash = hashString(id),
  ): RuntimeRecord {
    const rec: RuntimeRecord = {
      id,
      sandbox,
      podUid,
      podName,
      podNamespace,
      name,
      state: NON_EXISTENT,
      createdAt,
      attempt,
      observedAt: -Infinity,
      listGen: -1,
      listState: NON_EXISTENT,
      hash,
      next: this.byHash.get(hash),
      slot: this.all.length,
      idOff: this.storeId(id),
    };
    this.byHash.set(hash, rec);
    this.byId.set(id, rec);
    this.all.push(rec);
    this.membership++;
    return rec;
  }

  /**
   * Applies an observation made at `at` (ms). Returns false when the record already holds a
   * newer one (the observation is stale). A change of PLEG state queues the events on the pod.
   */
  observe(rec: RuntimeRecord, state: RecordState, at: number): boolean {
    if (at < rec.observedAt) return false;
    rec.observedAt = at;
    const old = rec.state;
    if (old === state) return true;
    rec.state = state;
    if (old === NON_EXISTENT) this.attach(rec);
    if (state === NON_EXISTENT) this.drop(rec, at);
    const from = plegState(old);
    const to = plegState(state);
    if (from !== to) {
      const d = this.markDirty(rec.podUid);
      for (const e of generateEvents(rec.podUid, rec.id, from, to)) d.events.push(e);
    }
    return true;
  }

  /** The pod's dirty entry (created empty): its status is refreshed before anything is emitted. */
  markDirty(uid: string): DirtyPod {
    let d = this.dirty.get(uid);
    if (!d) {
      const p = this.pods.get(uid);
      d = { uid, name: p?.name ?? '', namespace: p?.namespace ?? '', events: [] };
      this.dirty.set(uid, d);
    }
    return d;
  }

  /** Forgets a record that never existed as far as anyone reported (no events). */
  discard(rec: RuntimeRecord): void {
    if (rec.state !== NON_EXISTENT) throw new PlegError('ERR_PLEG_RECORD_EXISTS', `record ${rec.id} exists; observe its removal instead`);
    this.unindex(rec);
  }

  /** True when the id was seen removed at or after `at`. */
  removedSince(id: string, at: number): boolean {
    const t = this.tombstones.get(id);
    return t !== undefined && t >= at;
  }

  /** Drops tombstones older than `before` (ms). */
  pruneTombstones(before: number): void {
    for (const [id, t] of this.tombstones) {
      if (t >= before) break; // insertion order is removal order
      this.tombstones.delete(id);
    }
  }

  private attach(rec: RuntimeRecord): void {
    let p = this.pods.get(rec.podUid);
    if (!p) {
      p = { uid: rec.podUid, name: rec.podName, namespace: rec.podNamespace, sandboxes: [], containers: [] };
      this.pods.set(rec.podUid, p);
    } else if (!p.name && rec.podName) {
      p.name = rec.podName;
      p.namespace = rec.podNamespace;
    }
    (rec.sandbox ? p.sandboxes : p.containers).push(rec);
    const d = this.dirty.get(rec.podUid);
    if (d && !d.name) {
      d.name = p.name;
      d.namespace = p.namespace;
    }
  }

  private drop(rec: RuntimeRecord, at: number): void {
    const p = this.pods.get(rec.podUid);
    if (p) {
      const list = rec.sandbox ? p.sandboxes : p.containers;
      const i = list.indexOf(rec);
      if (i >= 0) list.splice(i, 1);
      if (p.sandboxes.length === 0 && p.containers.length === 0) {
        this.pods.delete(rec.podUid);
        const d = this.markDirty(rec.podUid);
        d.name ||= p.name;
        d.namespace ||= p.namespace;
      }
    }
    this.tombstones.delete(rec.id);
    this.tombstones.set(rec.id, at);
    this.unindex(rec);
  }

  private unindex(rec: RuntimeRecord): void {
    this.membership++;
    this.byId.delete(rec.id);
    if (rec.idOff >= 0) this.arenaLive -= rec.id.length;
    let prev: RuntimeRecord | undefined;
    for (let r = this.byHash.get(rec.hash); r; prev = r, r = r.next) {
      if (r !== rec) continue;
      if (prev) prev.next = r.next;
      else if (r.next) this.byHash.set(rec.hash, r.next);
      else this.byHash.delete(rec.hash);
      break;
    }
    const last = this.all.pop()!;
    if (last !== rec) {
      this.all[rec.slot] = last;
      last.slot = rec.slot;
    }
  }
}
