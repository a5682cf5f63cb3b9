// The pod config merger (upstream pkg/kubelet/config/config.go PodConfig in
// PodConfigNotificationIncremental mode): each source delivers full sets; the merger diffs each
// against that source's previous set by UID and emits ADD / UPDATE / DELETE / REMOVE /
// RECONCILE updates, in order, one at a time.
import { isDeepStrictEqual } from 'node:util';
import type { Pod } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { realClock, type Clock } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';
import { rootLogger } from '../util/log.js';
import type { RestClient } from '../client/rest.js';
import type { Logger } from '../util/log.js';
import { ApiSource, type ApiSourceOptions } from './api-source.js';
import { ManifestError, type ApiPodError } from './errors.js';
import { FileSource, type SourceEntry } from './file-source.js';
import {
  ConfigFirstSeenAnnotationKey,
  ConfigMirrorAnnotationKey,
  ConfigSourceAnnotationKey,
  ApiserverSource,
  FileSource as FILE_SOURCE,
  formatRFC3339Nano,
  HTTPSource,
} from './static-pod.js';
import { UrlSource } from './url-source.js';

export type PodOperation = 'ADD' | 'UPDATE' | 'REMOVE' | 'RECONCILE' | 'DELETE';

export interface PodUpdate {
  op: PodOperation;
  pods: Pod[];
  source: string;
}

export interface PodConfigOptions {
  nodeName: string;
  onUpdate: (u: PodUpdate) => void;
  onError: (e: ManifestError) => void;
  /** A pod from the API server that cannot run (default: logged). */
  onApiPodError?: (e: ApiPodError) => void;
  now?: () => Date;
  log?: (msg: string) => void;
  /** Drives the sources' polls and debounces (tests step a FakeClock); default the real clock. */
  clock?: Clock;
}

/** Annotations the kubelet itself sets; a change in them alone is no update. */
const LOCAL_ANNOTATIONS = [ConfigSourceAnnotationKey, ConfigMirrorAnnotationKey, ConfigFirstSeenAnnotationKey];

function nonLocalAnnotations(pod: Pod): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(pod.metadata?.annotations ?? {})) {
    if (!LOCAL_ANNOTATIONS.includes(k)) out[k] = v;
  }
  return out;
}

/** Spec, labels, deletion and non-local annotations: what makes a pod need syncing. */
function podsDifferSemantically(existing: Pod, ref: Pod): boolean {
  return !(
    isDeepStrictEqual(existing.spec, ref.spec) &&
    isDeepStrictEqual(existing.metadata.labels ?? {}, ref.metadata.labels ?? {}) &&
    existing.metadata.deletionTimestamp === ref.metadata.deletionTimestamp &&
    existing.metadata.deletionGracePeriodSeconds === ref.metadata.deletionGracePeriodSeconds &&
    isDeepStrictEqual(nonLocalAnnotations(existing), nonLocalAnnotations(ref))
  );
}

interface Running {
  stop(): Promise<void>;
}

export class PodConfig {
  private readonly opts: PodConfigOptions;
  private readonly now: () => Date;
  private readonly clock: Clock;
  private readonly log: (msg: string) => void;
  /** source → UID → the pod as last merged (owned here, never handed out). */
  private readonly pods = new Map<string, Map<string, Pod>>();
  private readonly sources = new Set<string>();
  private readonly sourcesSeen = new Set<string>();
  private readonly running = new Map<string, Running>();
  /** source → `location|name` of duplicates already reported. */
  private readonly reportedDuplicates = new Map<string, Set<string>>();
  private readonly queue: PodUpdate[] = [];
  private delivering = false;
  private stopped = false;

  constructor(opts: PodConfigOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.now = opts.now ?? (() => new Date(this.clock.now()));
    this.log = opts.log ?? ((msg) => rootLogger.info(msg));
  }

  /** Starts the static pod directory (or single manifest file) source, named `file`. */
  startFileSource(path: string, checkPeriodMs: number): void {
    this.claim(FILE_SOURCE);
    const src = new FileSource({
      path,
      nodeName: this.opts.nodeName,
      checkPeriodMs,
      onSet: (entries) => this.mergeSet(FILE_SOURCE, entries),
      onError: (e) => this.opts.onError(e),
      log: this.log,
      clock: this.clock,
    });
    this.running.set(FILE_SOURCE, src);
    src.start();
  }

  /** Starts the manifest URL source, named `http`. */
  startUrlSource(url: string, checkPeriodMs: number, headers?: Record<string, string[]>): void {
    this.claim(HTTPSource);
    const src = new UrlSource({
      url,
      nodeName: this.opts.nodeName,
      checkPeriodMs,
      ...(headers ? { headers } : {}),
      onSet: (entries) => this.mergeSet(HTTPSource, entries),
      onError: (e) => this.opts.onError(e),
      log: this.log,
      clock: this.clock,
    });
    this.running.set(HTTPSource, src);
    src.start();
  }

  /**
   * Starts the API server source, named `api`: this node's pods, listed and watched. Mirror
   * pods go to `onMirrorPods`, never into the merged set.
   */
  startApiSource(client: RestClient, o: Pick<ApiSourceOptions, 'onMirrorPods' | 'resyncPeriodMs' | 'backoffInitialMs' | 'backoffMaxMs' | 'watchTimeoutSeconds' | 'schedule'> & { logger?: Logger } = {}): ApiSource {
    this.claim(ApiserverSource);
    const { logger, ...rest } = o;
    const src = new ApiSource({
      ...rest,
      client,
      nodeName: this.opts.nodeName,
      onSet: (pods) => this.setPods(ApiserverSource, pods),
      onError: (e) => (this.opts.onApiPodError ?? ((x: ApiPodError) => this.log(x.message)))(e),
      clock: this.clock,
      ...(logger ? { log: logger } : {}),
    });
    this.running.set(ApiserverSource, src);
    src.start();
    return src;
  }

  /**
   * Declares a source that will feed setPods (e.g. `api`), so seenAllSources waits for its
   * first set. setPods declares an unknown source by itself.
   */
  addSource(source: string): void {
    this.sources.add(source);
  }

  /** Feed a full set from any source (used by the sources above and by an API source later). */
  setPods(source: string, pods: Pod[]): void {
    this.mergeSet(source, pods.map((pod) => ({ pod, location: source })));
  }

  /** Every started source has delivered its first set. */
  seenAllSources(): boolean {
    for (const s of this.sources) if (!this.sourcesSeen.has(s)) return false;
    return true;
  }

  /** The merged desired pods of every source (copies), as upstream's Sync delivers them. */
  mergedPods(): Pod[] {
    const out: Pod[] = [];
    for (const byUID of this.pods.values()) for (const pod of byUID.values()) out.push(structuredClone(pod));
    return out;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const all = [...this.running.values()];
    this.running.clear();
    await Promise.all(all.map((s) => s.stop()));
  }

  private claim(source: string): void {
    if (this.running.has(source)) throw new KubeletError('PodSourceAlreadyStarted', `pod source ${JSON.stringify(source)} is already started`);
    this.sources.add(source);
  }

  /** Drops all but the first pod of each namespace/name, reporting each duplicate once. */
  private filterDuplicates(source: string, entries: SourceEntry[]): SourceEntry[] {
    const firstByName = new Map<string, SourceEntry>();
    const reported = this.reportedDuplicates.get(source) ?? new Set<string>();
    const stillDuplicate = new Set<string>();
    const out: SourceEntry[] = [];
    for (const e of entries) {
      const name = podFullName(e.pod);
      const first = firstByName.get(name);
      if (!first) {
        firstByName.set(name, e);
        out.push(e);
        continue;
      }
      const key = `${e.location}|${name}`;
      stillDuplicate.add(key);
      if (reported.has(key)) continue;
      const detail = `duplicate pod name ${JSON.stringify(name)}, already declared by ${first.location}, ignoring`;
      if (source === FILE_SOURCE || source === HTTPSource) {
        this.opts.onError(new ManifestError(source, e.location, detail, { field: 'metadata.name' }));
      } else {
        this.log(`Pod failed validation from source ${source}: ${detail}`);
      }
    }
    this.reportedDuplicates.set(source, stillDuplicate);
    return out;
  }

  private mergeSet(source: string, entries: SourceEntry[]): void {
    if (this.stopped) return;
    this.sources.add(source);
    const firstSet = !this.sourcesSeen.has(source);
    this.sourcesSeen.add(source);

    const old = this.pods.get(source) ?? new Map<string, Pod>();
    const next = new Map<string, Pod>();
    const adds: Pod[] = [];
    const updates: Pod[] = [];
    const deletes: Pod[] = [];
    const reconciles: Pod[] = [];
    const removes: Pod[] = [];

    for (const { pod } of this.filterDuplicates(source, entries)) {
      const uid = pod.metadata?.uid;
      if (!uid) {
        this.log(`Ignoring pod ${podFullName(pod)} from source ${source}: it has no UID`);
        continue;
      }
      if (next.has(uid)) {
        this.log(`Ignoring pod ${podFullName(pod)} from source ${source}: UID ${uid} appears twice`);
        continue;
      }
      const existing = old.get(uid);
      if (!existing) {
        const ref = this.own(pod, source);
        ref.metadata.annotations![ConfigFirstSeenAnnotationKey] = formatRFC3339Nano(this.now());
        next.set(uid, ref);
        adds.push(ref);
        continue;
      }
      if (!podsDifferSemantically(existing, pod)) {
        // only the status moved: the kubelet owns status, so reconcile it
        if (!isDeepStrictEqual(existing.status ?? {}, pod.status ?? {})) {
          const ref = { ...existing, status: structuredClone(pod.status) } as Pod;
          if (ref.status === undefined) delete ref.status;
          next.set(uid, ref);
          reconciles.push(ref);
        } else {
          next.set(uid, existing);
        }
        continue;
      }
      const ref = this.own(pod, source);
      // first-seen and mirror annotations are the kubelet's own: carry them over
      for (const k of LOCAL_ANNOTATIONS) {
        const v = existing.metadata.annotations?.[k];
        if (v !== undefined) ref.metadata.annotations![k] = v;
      }
      ref.metadata.annotations![ConfigSourceAnnotationKey] = source;
      next.set(uid, ref);
      if (ref.metadata.deletionTimestamp) deletes.push(ref);
      else updates.push(ref);
    }
    for (const [uid, pod] of old) if (!next.has(uid)) removes.push(pod);
    this.pods.set(source, next);

    // the delivery order of upstream's incremental mode
    this.enqueue('REMOVE', removes, source);
    this.enqueue('ADD', adds, source);
    this.enqueue('UPDATE', updates, source);
    this.enqueue('DELETE', deletes, source);
    if (firstSet && adds.length === 0 && updates.length === 0 && deletes.length === 0) {
      // an empty ADD tells the sync loop this source is ready
      this.queue.push({ op: 'ADD', pods: [], source });
    }
    this.enqueue('RECONCILE', reconciles, source);
    this.drain();
  }

  /** A private copy of a pod from a source, annotated with the source. */
  private own(pod: Pod, source: string): Pod {
    const ref = structuredClone(pod);
    if (typeof ref.metadata !== 'object' || ref.metadata === null) ref.metadata = {};
    ref.metadata.annotations = { ...(ref.metadata.annotations ?? {}), [ConfigSourceAnnotationKey]: source };
    return ref;
  }

  private enqueue(op: PodOperation, pods: Pod[], source: string): void {
    if (pods.length === 0) return;
    this.queue.push({ op, pods: pods.map((p) => structuredClone(p)), source });
  }

  /** Delivers queued updates in order; a setPods from inside onUpdate only queues. */
  private drain(): void {
    if (this.delivering) return;
    this.delivering = true;
    try {
      for (let u = this.queue.shift(); u; u = this.queue.shift()) {
        try {
          this.opts.onUpdate(u);
        } catch (e) {
          this.log(`Pod update handler failed for ${u.op} from ${u.source}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    } finally {
      this.delivering = false;
    }
  }
}
