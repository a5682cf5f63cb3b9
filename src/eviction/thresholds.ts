// Thresholds from the configuration (upstream ParseThresholdConfig) and the pure steps of a
// synchronize pass: which thresholds are met, since when, and which node conditions follow.

import { parseQuantity } from '../api/quantity.js';
import { KubeletError } from '../util/errors.js';
import {
  SIGNAL_TO_NODE_CONDITION,
  isSignal,
  thresholdKey,
  thresholdQuantity,
  type NodeConditionType,
  type SignalObservations,
  type Threshold,
  type ThresholdValue,
} from './api.js';

/** A bad eviction setting, naming the config field and signal. */
export class EvictionConfigError extends KubeletError {
  constructor(readonly field: string, message: string) {
    super('ERR_EVICTION_CONFIG', `${field}: ${message}`);
  }
}

export interface ThresholdConfig {
  evictionHard: Readonly<Record<string, string>>;
  evictionSoft: Readonly<Record<string, string>>;
  /** Signal → ms. */
  evictionSoftGracePeriod: Readonly<Record<string, number>>;
  evictionMinimumReclaim: Readonly<Record<string, string>>;
  enforceNodeAllocatable: readonly string[];
}

/** A quantity or percentage; undefined for a zero value (upstream: the threshold is off). */
export function parseThresholdValue(field: string, text: string): ThresholdValue | undefined {
  const s = text.trim();
  if (s.endsWith('%')) {
    const pct = Number(s.slice(0, -1));
    if (!Number.isFinite(pct) || pct < 0 || pct > 100) throw new EvictionConfigError(field, `invalid percentage ${JSON.stringify(text)}`);
    return pct === 0 ? undefined : { percentage: pct / 100 };
  }
  let q;
  try {
    q = parseQuantity(s);
  } catch (err) {
    throw new EvictionConfigError(field, `invalid quantity ${JSON.stringify(text)}: ${(err as Error).message}`);
  }
  if (q.sign() < 0) throw new EvictionConfigError(field, `eviction threshold must be positive: ${JSON.stringify(text)}`);
  return q.isZero() ? undefined : { quantity: q.valueBig(), text: q.toString() };
}

/**
 * Hard then soft thresholds; a soft one needs its grace period. With `pods` in
 * enforceNodeAllocatable every memory.available threshold gets an allocatableMemory.available
 * twin, as upstream adds them.
 */
export function parseThresholdConfig(c: ThresholdConfig): Threshold[] {
  const out: Threshold[] = [];
  const minReclaim = (signal: string): ThresholdValue | undefined => {
    const v = c.evictionMinimumReclaim[signal];
    return v === undefined ? undefined : parseThresholdValue(`evictionMinimumReclaim[${signal}]`, v);
  };
  for (const signal of Object.keys(c.evictionMinimumReclaim)) {
    if (!isSignal(signal)) throw new EvictionConfigError(`evictionMinimumReclaim[${signal}]`, 'unsupported eviction signal');
  }
  for (const [kind, map] of [['evictionHard', c.evictionHard], ['evictionSoft', c.evictionSoft]] as const) {
    for (const [signal, text] of Object.entries(map)) {
      const field = `${kind}[${signal}]`;
      if (!isSignal(signal)) throw new EvictionConfigError(field, 'unsupported eviction signal');
      if (signal === 'allocatableMemory.available') throw new EvictionConfigError(field, 'allocatableMemory.available is not a user-configurable signal; set enforceNodeAllocatable to pods');
      const value = parseThresholdValue(field, text);
      if (!value) continue;
      let gracePeriodMs = 0;
      if (kind === 'evictionSoft') {
        const g = c.evictionSoftGracePeriod[signal];
        if (g === undefined) throw new EvictionConfigError(field, `grace period must be specified for the soft eviction threshold ${signal}`);
        if (g < 0) throw new EvictionConfigError(`evictionSoftGracePeriod[${signal}]`, 'must not be negative');
        gracePeriodMs = g;
      }
      const t: Threshold = { signal, operator: 'LessThan', value, gracePeriodMs };
      const mr = minReclaim(signal);
      if (mr) t.minReclaim = mr;
      out.push(t);
    }
  }
  for (const signal of Object.keys(c.evictionSoftGracePeriod)) {
    if (c.evictionSoft[signal] === undefined) throw new EvictionConfigError(`evictionSoftGracePeriod[${signal}]`, 'no soft eviction threshold for this signal');
  }
  if (c.enforceNodeAllocatable.includes('pods')) {
    for (const t of [...out]) if (t.signal === 'memory.available') out.push({ ...t, signal: 'allocatableMemory.available' });
  }
  return out;
}

export const isHardThreshold = (t: Threshold): boolean => t.gracePeriodMs === 0;

/** The thresholds whose signal is below them (with min-reclaim added when enforced). */
export function thresholdsMet(thresholds: readonly Threshold[], obs: SignalObservations, enforceMinReclaim: boolean): Threshold[] {
  return thresholds.filter((t) => {
    const o = obs.get(t.signal);
    if (!o) return false;
    let q = thresholdQuantity(t.value, o.capacity);
    if (enforceMinReclaim && t.minReclaim) q += thresholdQuantity(t.minReclaim, o.capacity);
    return q > o.available;
  });
}

/** Union by threshold identity, first list's order first. */
export function mergeThresholds(a: readonly Threshold[], b: readonly Threshold[]): Threshold[] {
  const seen = new Set(a.map(thresholdKey));
  return [...a, ...b.filter((t) => !seen.has(thresholdKey(t)))];
}

/** When each met threshold was first seen met: kept from before, else now. */
export function thresholdsFirstObservedAt(thresholds: readonly Threshold[], last: ReadonlyMap<string, number>, now: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of thresholds) {
    const k = thresholdKey(t);
    out.set(k, last.get(k) ?? now);
  }
  return out;
}

/** The thresholds met for at least their grace period. */
export function thresholdsMetGracePeriod(thresholds: readonly Threshold[], observedAt: ReadonlyMap<string, number>, now: number): Threshold[] {
  return thresholds.filter((t) => {
    const at = observedAt.get(thresholdKey(t));
    return at !== undefined && now - at >= t.gracePeriodMs;
  });
}

/** The node conditions the thresholds stand for, each once. */
export function nodeConditionsOf(thresholds: readonly Threshold[]): NodeConditionType[] {
  const out: NodeConditionType[] = [];
  for (const t of thresholds) {
    const c = SIGNAL_TO_NODE_CONDITION[t.signal];
    if (!out.includes(c)) out.push(c);
  }
  return out;
}

/** Last time each condition was observed: now for the current ones, kept for the others. */
export function nodeConditionsLastObservedAt(current: readonly NodeConditionType[], last: ReadonlyMap<NodeConditionType, number>, now: number): Map<NodeConditionType, number> {
  const out = new Map(last);
  for (const c of current) out.set(c, now);
  return out;
}

/** Conditions observed within the transition period (a condition is left only once it has been gone that long). */
export function nodeConditionsObservedSince(observedAt: ReadonlyMap<NodeConditionType, number>, periodMs: number, now: number): NodeConditionType[] {
  const out: NodeConditionType[] = [];
  for (const [c, at] of observedAt) if (now - at < periodMs) out.push(c);
  return out;
}
