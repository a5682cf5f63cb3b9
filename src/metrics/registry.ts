// A small Prometheus registry: counters, gauges (set or computed on scrape) and histograms,
// with label vectors, rendered in the text exposition format 0.0.4 the way the Go client
// (and so the upstream kubelet's /metrics) renders it: families sorted by name, label pairs
// sorted by name with `le` last, floats in Go's shortest %g form, HELP prefixed with the
// component-base stability level ("[ALPHA] ...").

import { KubeletError } from '../util/errors.js';

/** Content-Type of the text exposition format. */
export const TEXT_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Prometheus' default buckets (client_golang DefBuckets), in seconds. */
export const DEF_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** `count` buckets: start, start+width, ... (client_golang LinearBuckets). */
export function linearBuckets(start: number, width: number, count: number): number[] {
  if (!(count >= 1)) throw new RangeError('linearBuckets needs a positive count');
  return Array.from({ length: count }, (_, i) => start + i * width);
}

/** `count` buckets: start, start*factor, ... (client_golang ExponentialBuckets). */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  if (!(count >= 1)) throw new RangeError('exponentialBuckets needs a positive count');
  if (!(start > 0)) throw new RangeError('exponentialBuckets needs a positive start');
  if (!(factor > 1)) throw new RangeError('exponentialBuckets needs a factor greater than 1');
  const out: number[] = [];
  for (let i = 0, b = start; i < count; i++, b *= factor) out.push(b);
  return out;
}

/** `count` buckets from min to max with a constant factor (client_golang ExponentialBucketsRange). */
export function exponentialBucketsRange(min: number, max: number, count: number): number[] {
  if (!(count >= 1)) throw new RangeError('exponentialBucketsRange needs a positive count');
  if (!(min > 0)) throw new RangeError('exponentialBucketsRange needs a positive min');
  const factor = Math.pow(max / min, 1 / (count - 1 || 1));
  return Array.from({ length: count }, (_, i) => min * Math.pow(factor, i));
}

/** component-base stability levels, shown in HELP as upstream does (INTERNAL is not). */
export type StabilityLevel = 'INTERNAL' | 'ALPHA' | 'BETA' | 'STABLE';

export interface MetricOptions {
  name: string;
  help: string;
  labelNames?: readonly string[];
  /** Default ALPHA, as component-base. */
  stabilityLevel?: StabilityLevel;
}

export interface HistogramOptions extends MetricOptions {
  /** Upper bounds, increasing; +Inf is implied. Default DEF_BUCKETS. */
  buckets?: readonly number[];
}

export type MetricType = 'counter' | 'gauge' | 'histogram';
export type Labels = Readonly<Record<string, string>>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Go's strconv.FormatFloat(v, 'g', -1, 64), which the Go text encoder uses for sample values. */
export function formatFloat(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (v === 0) return Object.is(v, -0) ? '-0' : '0';
  // toExponential() without digits gives the shortest round-tripping mantissa, as Go's shortest mode.
  const [mant, expPart] = v.toExponential().split('e') as [string, string];
  const exp = Number(expPart);
  // Shortest %g uses %e when the decimal exponent is < -4 or >= 6.
  if (exp < -4 || exp >= 6) {
    const abs = Math.abs(exp);
    return `${mant}e${exp < 0 ? '-' : '+'}${abs < 10 ? '0' : ''}${abs}`;
  }
  const neg = mant.startsWith('-');
  const digits = mant.replace('-', '').replace('.', '');
  let s: string;
  if (exp >= 0) {
    s = digits.length <= exp + 1 ? digits + '0'.repeat(exp + 1 - digits.length) : `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  } else {
    s = `0.${'0'.repeat(-exp - 1)}${digits}`;
  }
  return neg ? `-${s}` : s;
}

function escapeHelp(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function escapeLabelValue(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function renderLabels(names: readonly string[], values: readonly string[], extra?: string): string {
  if (names.length === 0 && extra === undefined) return '';
  const parts: string[] = [];
  for (let i = 0; i < names.length; i++) parts.push(`${names[i]}="${escapeLabelValue(values[i]!)}"`);
  if (extra !== undefined) parts.push(extra);
  return `{${parts.join(',')}}`;
}

abstract class Metric<Child> {
  readonly name: string;
  readonly help: string;
  readonly stabilityLevel: StabilityLevel;
  /** Label names sorted, as the Go client renders them. */
  readonly labelNames: readonly string[];
  abstract readonly type: MetricType;
  /** Index of each declared label name in the sorted order. */
  private readonly order: number[];
  private readonly declared: readonly string[];
  protected readonly children = new Map<string, { values: string[]; child: Child }>();

  constructor(opts: MetricOptions) {
    if (!METRIC_NAME.test(opts.name)) throw new TypeError(`invalid metric name ${JSON.stringify(opts.name)}`);
    const declared = opts.labelNames ?? [];
    for (const l of declared) {
      if (!LABEL_NAME.test(l) || l.startsWith('__')) throw new TypeError(`metric ${opts.name}: invalid label name ${JSON.stringify(l)}`);
    }
    if (new Set(declared).size !== declared.length) throw new TypeError(`metric ${opts.name}: duplicate label names`);
    this.name = opts.name;
    this.help = opts.help;
    this.stabilityLevel = opts.stabilityLevel ?? 'ALPHA';
    this.declared = [...declared];
    this.labelNames = [...declared].sort();
    this.order = this.labelNames.map((n) => declared.indexOf(n));
  }

  protected abstract newChild(): Child;

  /** The child for label values given in declaration order (Go's WithLabelValues). */
  withLabelValues(...values: string[]): Child {
    if (values.length !== this.declared.length) {
      throw new TypeError(`metric ${this.name}: expected ${this.declared.length} label values, got ${values.length}`);
    }
    const sorted = this.order.map((i) => String(values[i]));
    const key = sorted.join('\u0000');
    let e = this.children.get(key);
    if (!e) {
      e = { values: sorted, child: this.newChild() };
      this.children.set(key, e);
    }
    return e.child;
  }

  /** The child for a label set (Go's With). */
  with(labels: Labels): Child {
    const keys = Object.keys(labels);
    if (keys.length !== this.declared.length || keys.some((k) => !this.declared.includes(k))) {
      throw new TypeError(`metric ${this.name}: labels must be exactly ${this.declared.join(', ') || '(none)'}`);
    }
    return this.withLabelValues(...this.declared.map((n) => labels[n]!));
  }

  /** Forgets the child for these label values (Go's DeleteLabelValues). */
  deleteLabelValues(...values: string[]): boolean {
    const sorted = this.order.map((i) => String(values[i]));
    return this.children.delete(sorted.join('\u0000'));
  }

  reset(): void {
    this.children.clear();
  }

  protected defaultChild(): Child {
    if (this.declared.length !== 0) throw new TypeError(`metric ${this.name} has labels; use withLabelValues()`);
    return this.withLabelValues();
  }

  /** Header lines plus samples; undefined when a labelled metric has no series yet (Go skips it). */
  render(): string | undefined {
    const samples = this.renderSamples();
    if (samples === undefined) return undefined;
    // As a kubelet's /metrics shows it: `[ALPHA] ...`, `[STABLE] ...`; INTERNAL carries no prefix.
    const level = this.stabilityLevel === 'INTERNAL' ? '' : `[${this.stabilityLevel}] `;
    return `# HELP ${this.name} ${escapeHelp(level + this.help)}\n# TYPE ${this.name} ${this.type}\n${samples}`;
  }

  protected sortedChildren(): { values: string[]; child: Child }[] {
    return [...this.children.values()].sort((a, b) => {
      for (let i = 0; i < a.values.length; i++) {
        if (a.values[i]! < b.values[i]!) return -1;
        if (a.values[i]! > b.values[i]!) return 1;
      }
      return 0;
    });
  }

  protected abstract renderSamples(): string | undefined;
}

export class CounterChild {
  value = 0;
  inc(v = 1): void {
    if (!(v >= 0)) throw new RangeError('counter cannot decrease');
    this.value += v;
  }
}

export class Counter extends Metric<CounterChild> {
  readonly type = 'counter' as const;
  protected newChild(): CounterChild {
    return new CounterChild();
  }
  inc(v = 1): void {
    this.defaultChild().inc(v);
  }
  /** Value of the unlabelled series, or of the series with these label values. */
  get(...values: string[]): number {
    return this.withLabelValues(...values).value;
  }
  protected renderSamples(): string | undefined {
    if (this.labelNames.length === 0) this.defaultChild();
    if (this.children.size === 0) return undefined;
    let out = '';
    for (const { values, child } of this.sortedChildren()) {
      out += `${this.name}${renderLabels(this.labelNames, values)} ${formatFloat(child.value)}\n`;
    }
    return out;
  }
}

export class GaugeChild {
  value = 0;
  set(v: number): void {
    this.value = v;
  }
  inc(v = 1): void {
    this.value += v;
  }
  dec(v = 1): void {
    this.value -= v;
  }
  /** Seconds since the epoch, as Go's SetToCurrentTime. */
  setToCurrentTime(nowMs: number = Date.now()): void {
    this.value = nowMs / 1000;
  }
}

export class Gauge extends Metric<GaugeChild> {
  readonly type = 'gauge' as const;
  private readonly collect?: () => number;

  constructor(opts: MetricOptions & { collect?: () => number }) {
    super(opts);
    if (opts.collect && (opts.labelNames?.length ?? 0) > 0) throw new TypeError(`gauge func ${opts.name} cannot have labels`);
    this.collect = opts.collect;
  }
  protected newChild(): GaugeChild {
    return new GaugeChild();
  }
  set(v: number): void {
    this.defaultChild().set(v);
  }
  inc(v = 1): void {
    this.defaultChild().inc(v);
  }
  dec(v = 1): void {
    this.defaultChild().dec(v);
  }
  get(...values: string[]): number {
    if (this.collect) return this.collect();
    return this.withLabelValues(...values).value;
  }
  protected renderSamples(): string | undefined {
    if (this.collect) return `${this.name} ${formatFloat(this.collect())}\n`;
    if (this.labelNames.length === 0) this.defaultChild();
    if (this.children.size === 0) return undefined;
    let out = '';
    for (const { values, child } of this.sortedChildren()) {
      out += `${this.name}${renderLabels(this.labelNames, values)} ${formatFloat(child.value)}\n`;
    }
    return out;
  }
}

export class HistogramChild {
  /** Non-cumulative count per bucket; the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    let i = 0;
    // Buckets are upper-inclusive (le).
    while (i < this.bounds.length && v > this.bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

export class Histogram extends Metric<HistogramChild> {
  readonly type = 'histogram' as const;
  readonly buckets: readonly number[];

  constructor(opts: HistogramOptions) {
    super(opts);
    if ((opts.labelNames ?? []).includes('le')) throw new TypeError(`histogram ${opts.name}: "le" is reserved`);
    const b = [...(opts.buckets ?? DEF_BUCKETS)];
    if (b.length && b[b.length - 1] === Infinity) b.pop();
    for (let i = 1; i < b.length; i++) {
      if (!(b[i]! > b[i - 1]!)) throw new TypeError(`histogram ${opts.name}: buckets must be strictly increasing`);
    }
    this.buckets = b;
  }
  protected newChild(): HistogramChild {
    return new HistogramChild(this.buckets);
  }
  observe(v: number): void {
    this.defaultChild().observe(v);
  }
  protected renderSamples(): string | undefined {
    if (this.labelNames.length === 0) this.defaultChild();
    if (this.children.size === 0) return undefined;
    let out = '';
    for (const { values, child } of this.sortedChildren()) {
      let cumulative = 0;
      for (let i = 0; i <= this.buckets.length; i++) {
        cumulative += child.counts[i]!;
        const le = i < this.buckets.length ? formatFloat(this.buckets[i]!) : '+Inf';
        out += `${this.name}_bucket${renderLabels(this.labelNames, values, `le="${le}"`)} ${cumulative}\n`;
      }
      out += `${this.name}_sum${renderLabels(this.labelNames, values)} ${formatFloat(child.sum)}\n`;
      out += `${this.name}_count${renderLabels(this.labelNames, values)} ${child.count}\n`;
    }
    return out;
  }
}

export type AnyMetric = Counter | Gauge | Histogram;

/** A second metric under a name already taken (Go: AlreadyRegisteredError). */
export class MetricAlreadyRegisteredError extends KubeletError {
  constructor(readonly metric: string) {
    super('ERR_METRIC_ALREADY_REGISTERED', `metric ${metric} is already registered`);
  }
}

export class Registry {
  private readonly metrics = new Map<string, AnyMetric>();
  private readonly collectHooks: Array<() => void> = [];

  /** Runs `fn` before each rendering (Go's collectors that read their values on scrape). */
  onCollect(fn: () => void): void {
    this.collectHooks.push(fn);
  }

  /** Adds a metric; a second metric with the same name is an error (Go: AlreadyRegisteredError). */
  register<M extends AnyMetric>(m: M): M {
    if (this.metrics.has(m.name)) throw new MetricAlreadyRegisteredError(m.name);
    this.metrics.set(m.name, m);
    return m;
  }

  counter(opts: MetricOptions): Counter {
    return this.register(new Counter(opts));
  }

  gauge(opts: MetricOptions): Gauge {
    return this.register(new Gauge(opts));
  }

  /** A gauge whose value is read from `collect` on every scrape (Go's NewGaugeFunc). */
  gaugeFunc(opts: Omit<MetricOptions, 'labelNames'>, collect: () => number): Gauge {
    return this.register(new Gauge({ ...opts, collect }));
  }

  histogram(opts: HistogramOptions): Histogram {
    return this.register(new Histogram(opts));
  }

  get(name: string): AnyMetric | undefined {
    return this.metrics.get(name);
  }

  unregister(name: string): boolean {
    return this.metrics.delete(name);
  }

  /** Every family in the text exposition format 0.0.4. */
  metricsText(): string {
    for (const fn of this.collectHooks) fn();
    let out = '';
    for (const name of [...this.metrics.keys()].sort()) {
      const text = this.metrics.get(name)!.render();
      if (text !== undefined) out += text;
    }
    return out;
  }
}
