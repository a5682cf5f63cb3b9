// The API server pod source (upstream pkg/kubelet/config/apiserver.go): a reflector lists and
// watches the pods bound to this node (fieldSelector spec.nodeName=<node>) and hands the full
// set to the merger as source "api" (upstream's UndeltaStore). The reflector relists on 410
// Gone and reconnects with backoff; this source also re-sends the whole set every resync
// period. Mirror pods go to their own consumer (they are the API's copy of static pods, never
// run). A pod the kubelet cannot use is reported by namespace/name and left out; the others stay.

import type { Pod } from '../api/types.js';
import { podIdentityErrors, validatePod } from '../api/validation.js';
import type { RestClient } from '../client/rest.js';
import { Reflector, type KubeObject, type ReflectorEvent } from '../client/reflector.js';
import type { Clock, Timer } from '../util/clock.js';
import { rootLogger, type Logger } from '../util/log.js';
import { ApiPodError } from './errors.js';
import { ConfigMirrorAnnotationKey } from './static-pod.js';

export interface ApiSourceOptions {
  client: RestClient;
  nodeName: string;
  /** The full set of this node's pods (mirror pods left out), after every change and every resync. */
  onSet(pods: Pod[]): void;
  /** The mirror pods bound to this node, whenever they change. */
  onMirrorPods?(pods: Pod[]): void;
  /** A pod that cannot run, reported once per resourceVersion. */
  onError(e: ApiPodError): void;
  clock?: Clock;
  log?: Logger;
  /** Re-sends the whole set this often (0: never). */
  resyncPeriodMs?: number;
  /** The reflector's backoff on a failed list or watch. */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Server-side watch timeout, seconds (default: the reflector's 5–10 min). */
  watchTimeoutSeconds?: () => number;
  /** Coalesces the events of one list or burst into one set (default setImmediate). */
  schedule?: (fn: () => void) => void;
}

/** upstream's default: the API source reflector has no resync of its own; this re-sends every minute. */
export const DEFAULT_API_RESYNC_MS = 60_000;

interface Converted {
  resourceVersion: string | undefined;
  pod: Pod | undefined;
  mirror: boolean;
}

export class ApiSource {
  private readonly o: ApiSourceOptions;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly reflector: Reflector<KubeObject>;
  private readonly ctl = new AbortController();
  private readonly objects = new Map<string, KubeObject>();
  private readonly converted = new Map<string, Converted>();
  private readonly schedule: (fn: () => void) => void;
  private running: Promise<void> | undefined;
  private resyncTimer: Timer | undefined;
  private emitScheduled = false;
  private lastMirrorKeys = '';
  private stopped = false;
  /** Sets delivered (for tests and metrics). */
  sets = 0;

  constructor(o: ApiSourceOptions) {
    this.o = o;
    this.clock = o.clock ?? o.client.clock;
    this.log = (o.log ?? rootLogger).with({ source: 'api' });
    this.schedule = o.schedule ?? ((fn) => void setImmediate(fn));
    this.reflector = new Reflector<KubeObject>({
      client: o.client,
      path: '/api/v1/pods',
      fieldSelector: `spec.nodeName=${o.nodeName}`,
      handler: (e) => this.handle(e),
      onSynced: () => this.emitSoon(),
      clock: this.clock,
      log: this.log,
      ...(o.backoffInitialMs !== undefined ? { backoffInitialMs: o.backoffInitialMs } : {}),
      ...(o.backoffMaxMs !== undefined ? { backoffMaxMs: o.backoffMaxMs } : {}),
      ...(o.watchTimeoutSeconds ? { watchTimeoutSeconds: o.watchTimeoutSeconds } : {}),
    });
  }

  /** The reflector's counters (lists include relists after 410). */
  get lists(): number {
    return this.reflector.lists;
  }

  get watches(): number {
    return this.reflector.watches;
  }

  get hasSynced(): boolean {
    return this.reflector.hasSynced;
  }

  start(): void {
    if (this.running) return;
    this.log.info('Watching apiserver', { node: this.o.nodeName });
    this.running = this.reflector.run(this.ctl.signal);
    this.armResync();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.resyncTimer?.cancel();
    this.ctl.abort();
    await this.running;
  }

  private armResync(): void {
    const period = this.o.resyncPeriodMs ?? DEFAULT_API_RESYNC_MS;
    if (period <= 0 || this.stopped) return;
    this.resyncTimer = this.clock.setTimeout(() => {
      if (this.reflector.hasSynced) this.emit();
      this.armResync();
    }, period);
  }

  private handle(e: ReflectorEvent<KubeObject>): void {
    const key = `${e.object.metadata?.namespace}/${e.object.metadata?.name}`;
    if (e.type === 'DELETED') {
      this.objects.delete(key);
      this.converted.delete(key);
    } else {
      this.objects.set(key, e.object);
    }
    // Events of the first list arrive before onSynced: that one set follows them.
    if (this.reflector.hasSynced) this.emitSoon();
  }

  private emitSoon(): void {
    if (this.emitScheduled || this.stopped) return;
    this.emitScheduled = true;
    this.schedule(() => {
      this.emitScheduled = false;
      this.emit();
    });
  }

  private emit(): void {
    if (this.stopped) return;
    const pods: Pod[] = [];
    const mirrors: Pod[] = [];
    for (const [key, obj] of this.objects) {
      const c = this.convert(key, obj);
      if (!c.pod) continue;
      (c.mirror ? mirrors : pods).push(c.pod);
    }
    this.sets++;
    this.o.onSet(pods);
    if (this.o.onMirrorPods) {
      const keys = mirrors.map((p) => `${p.metadata.uid}@${p.metadata.resourceVersion}`).sort().join(',');
      if (keys !== this.lastMirrorKeys) {
        this.lastMirrorKeys = keys;
        this.o.onMirrorPods(mirrors);
      }
    }
  }

  /** The pod as the kubelet can use it, or undefined (reported once per resourceVersion). */
  private convert(key: string, obj: KubeObject): Converted {
    const rv = obj.metadata?.resourceVersion;
    const cached = this.converted.get(key);
    if (cached && cached.resourceVersion === rv && rv !== undefined) return cached;
    const c: Converted = { resourceVersion: rv, pod: undefined, mirror: false };
    this.converted.set(key, c);
    const pod = obj as unknown as Pod;
    const ns = String(obj.metadata?.namespace ?? '');
    const name = String(obj.metadata?.name ?? '');
    // The field selector already filters; a server that ignores it must not hand us other nodes' pods.
    const nodeName = (pod as { spec?: { nodeName?: unknown } }).spec?.nodeName;
    if (nodeName !== this.o.nodeName) {
      this.log.v(2).info('Ignoring pod bound to another node', { pod: key, nodeName });
      return c;
    }
    const errors = validatePod(pod);
    if (errors.length === 0) errors.push(...podIdentityErrors({ uid: String(pod.metadata?.uid ?? ''), namespace: ns, name }));
    if (errors.length > 0) {
      const detail = errors.slice(0, 5).map((e) => `${e.field}: ${e.message}`).join('; ');
      this.o.onError(new ApiPodError(ns, name, `invalid pod, skipping it: ${detail}`, { fieldErrors: errors }));
      return c;
    }
    c.pod = pod;
    c.mirror = pod.metadata.annotations?.[ConfigMirrorAnnotationKey] !== undefined;
    return c;
  }
}
