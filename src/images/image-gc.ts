// Image garbage collection (upstream: pkg/kubelet/images realImageGCManager): images seen on
// the runtime are recorded (first detected, last used by a container); every GC period images
// unused for longer than imageMaximumGCAge go, and when the image filesystem is used past
// imageGCHighThresholdPercent the least recently used unused images go until it is back at
// imageGCLowThresholdPercent. Images in use, pinned images and images younger than
// imageMinimumGCAge are never removed.

import type { Counter, Registry } from '../metrics/registry.js';
import type { Container, Image } from '../runtime/cri-types.js';
import type { Clock } from '../util/clock.js';
import { KubeletError } from '../util/errors.js';
import type { Logger } from '../util/log.js';

/** upstream: ImageGCPeriod (the kubelet's GC loop runs garbageCollect this often). */
export const IMAGE_GC_PERIOD_MS = 5 * 60_000;

export interface ImageGCPolicy {
  highThresholdPercent: number;
  lowThresholdPercent: number;
  /** ms an image must have been known before it may be removed. */
  minAgeMs: number;
  /** ms unused after which an image is removed whatever the disk; 0 = never. */
  maxAgeMs: number;
}

/** The runtime calls image GC makes (a CriClient). */
export interface ImageGCRuntime {
  listImages(): Promise<Image[]>;
  listContainers(): Promise<Container[]>;
  removeImage(image: string): Promise<void>;
}

/** The image filesystem's size and free space, bytes. */
export type ImageFsStatsFunc = () => Promise<{ capacityBytes: bigint; availableBytes: bigint } | undefined>;

/** Image GC could not free what it had to (upstream's "Failed to garbage collect required amount of images"). */
export class ImageGCError extends KubeletError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_IMAGE_GC', message, options);
  }
}

interface ImageRecord {
  /** -Infinity: already there at start-up, first seen at an unknown time in the past. */
  firstDetected: number;
  /** 0: never seen in use. */
  lastUsed: number;
  size: bigint;
  pinned: boolean;
  /** Names the image goes by (tags, digests), for logs. */
  names: string[];
}

export interface ImageGCManagerOptions {
  runtime: ImageGCRuntime;
  imageFsStats: ImageFsStatsFunc;
  policy: ImageGCPolicy;
  clock: Clock;
  log: Logger;
  registry?: Registry;
  /** Node event (FreeDiskSpaceFailed, InvalidDiskCapacity). */
  recordEvent?: (type: 'Normal' | 'Warning', reason: string, message: string) => void;
  /**
   * The runtime's pod sandbox image, always in use (upstream's --pod-infra-container-image):
   * no container names it, and a runtime that does not report it pinned would lose it.
   */
  sandboxImage?: () => Promise<string | undefined>;
}

/**
 * The sandbox image a runtime says it uses: containerd's CRI puts its plugin configuration in
 * the verbose Status info (`config.sandboxImage`); undefined for a runtime that does not.
 */
export async function runtimeSandboxImage(cri: { status(verbose?: boolean): Promise<{ info: Record<string, string> }> }): Promise<string | undefined> {
  const config = (await cri.status(true)).info?.config;
  if (!config) return undefined;
  try {
    const image = (JSON.parse(config) as { sandboxImage?: unknown }).sandboxImage;
    return typeof image === 'string' && image !== '' ? image : undefined;
  } catch {
    return undefined;
  }
}

export function validateImageGCPolicy(p: ImageGCPolicy): void {
  if (p.highThresholdPercent < 0 || p.highThresholdPercent > 100) throw new ImageGCError(`invalid HighThresholdPercent ${p.highThresholdPercent}, must be in range [0-100]`);
  if (p.lowThresholdPercent < 0 || p.lowThresholdPercent > 100) throw new ImageGCError(`invalid LowThresholdPercent ${p.lowThresholdPercent}, must be in range [0-100]`);
  if (p.lowThresholdPercent > p.highThresholdPercent) throw new ImageGCError(`LowThresholdPercent ${p.lowThresholdPercent} can not be higher than HighThresholdPercent ${p.highThresholdPercent}`);
}

export class ImageGCManager {
  readonly #o: ImageGCManagerOptions;
  readonly #records = new Map<string, ImageRecord>();
  readonly #collected?: Counter;
  #busy?: Promise<unknown>;
  #sandbox?: string;
  /** When GC began: imageMaximumGCAge counts from here at the earliest. */
  #startedAt: number;

  constructor(opts: ImageGCManagerOptions) {
    validateImageGCPolicy(opts.policy);
    this.#o = opts;
    this.#startedAt = opts.clock.now();
    this.#collected = opts.registry?.counter({
      name: 'kubelet_image_garbage_collected_total',
      help: 'Total number of images garbage collected by the kubelet, whether through disk usage or image age.',
      labelNames: ['reason'],
    });
  }

  /**
   * The initial detection (upstream Start): images already on the node are recorded as first
   * detected at an unknown time in the past, so imageMinimumGCAge does not hold them back when
   * disk pressure comes soon after start-up.
   */
  start(): Promise<void> {
    return this.#serial(async () => {
      this.#startedAt = this.#o.clock.now();
      await this.detectImages(this.#startedAt, true);
    });
  }

  /** Refreshes the records; returns the ids of the images containers use. `initial`: new images date from the unknown past. */
  async detectImages(now = this.#o.clock.now(), initial = false): Promise<Set<string>> {
    const [images, containers, sandboxImage] = await Promise.all([
      this.#o.runtime.listImages(),
      this.#o.runtime.listContainers(),
      this.#sandboxImage(),
    ]);
    // A container names its image by id (image_ref) or by the reference it was created from.
    const refs = new Set<string>(sandboxImage ? [sandboxImage] : []);
    for (const c of containers) {
      if (c.image_ref) refs.add(c.image_ref);
      if (c.image?.image) refs.add(c.image.image);
    }
    const inUse = new Set<string>();
    const seen = new Set<string>();
    for (const img of images) {
      seen.add(img.id);
      const names = [...img.repo_tags, ...img.repo_digests];
      let rec = this.#records.get(img.id);
      if (!rec) {
        rec = { firstDetected: initial ? -Infinity : now, lastUsed: 0, size: 0n, pinned: false, names };
        this.#records.set(img.id, rec);
      }
      rec.size = BigInt(img.size || '0');
      rec.pinned = img.pinned;
      rec.names = names;
      if (refs.has(img.id) || names.some((n) => refs.has(n))) {
        inUse.add(img.id);
        rec.lastUsed = now;
      }
    }
    for (const id of this.#records.keys()) if (!seen.has(id)) this.#records.delete(id);
    return inUse;
  }

  /** The sandbox image, asked once successfully (a runtime does not change it while it runs). */
  async #sandboxImage(): Promise<string | undefined> {
    if (this.#sandbox !== undefined || !this.#o.sandboxImage) return this.#sandbox;
    try {
      this.#sandbox = await this.#o.sandboxImage();
    } catch (err) {
      this.#o.log.warn('Image GC: could not learn the runtime\'s sandbox image', { err: (err as Error).message });
    }
    return this.#sandbox;
  }

  /** One GC pass (serialized with any other): the age limit, then the disk thresholds. */
  garbageCollect(): Promise<void> {
    return this.#serial(() => this.#garbageCollect());
  }

  /** Eviction's node-level reclaim (upstream DeleteUnusedImages): every unused image old enough. */
  deleteUnusedImages(): Promise<bigint> {
    return this.#serial(async () => {
      const now = this.#o.clock.now();
      return this.#freeSpace(BigInt(Number.MAX_SAFE_INTEGER) * 1024n, now, await this.detectImages(now), 'space');
    });
  }

  async #serial<T>(fn: () => Promise<T>): Promise<T> {
    while (this.#busy) await this.#busy.catch(() => undefined);
    const p = fn();
    this.#busy = p;
    try {
      return await p;
    } finally {
      this.#busy = undefined;
    }
  }

  async #garbageCollect(): Promise<void> {
    const { policy, log } = this.#o;
    const now = this.#o.clock.now();
    const inUse = await this.detectImages(now);
    if (policy.maxAgeMs > 0) {
      for (const [id, rec] of this.#evictionOrder(inUse, now)) {
        // an image never seen in use has been unused since it was first detected (or since GC began)
        if (now - Math.max(rec.lastUsed, rec.firstDetected, this.#startedAt) > policy.maxAgeMs) await this.#free(id, rec, 'age');
      }
    }
    const fs = await this.#o.imageFsStats();
    if (!fs) return;
    if (fs.capacityBytes <= 0n) {
      const msg = `invalid capacity ${fs.capacityBytes} on image filesystem`;
      this.#o.recordEvent?.('Warning', 'InvalidDiskCapacity', msg);
      throw new ImageGCError(msg);
    }
    const usagePercent = 100 - Number((fs.availableBytes * 100n) / fs.capacityBytes);
    if (usagePercent < policy.highThresholdPercent) return;
    const toFree = (fs.capacityBytes * BigInt(100 - policy.lowThresholdPercent)) / 100n - fs.availableBytes;
    log.info('Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold', {
      usage: usagePercent, highThreshold: policy.highThresholdPercent, amountToFree: String(toFree), lowThreshold: policy.lowThresholdPercent,
    });
    const freed = await this.#freeSpace(toFree, now, await this.detectImages(now), 'space');
    if (freed < toFree) {
      const msg = `Failed to garbage collect required amount of images. Attempted to free ${toFree} bytes, but only found ${freed} bytes eligible to free.`;
      this.#o.recordEvent?.('Warning', 'FreeDiskSpaceFailed', msg);
      throw new ImageGCError(msg);
    }
  }

  /** Unused, unpinned images old enough to go, least recently used (then first detected) first. */
  #evictionOrder(inUse: Set<string>, now: number): [string, ImageRecord][] {
    const out: [string, ImageRecord][] = [];
    for (const [id, rec] of this.#records) {
      if (inUse.has(id) || rec.pinned) continue;
      if (now - rec.firstDetected < this.#o.policy.minAgeMs) continue;
      out.push([id, rec]);
    }
    const cmp = (x: number, y: number): number => (x === y ? 0 : x < y ? -1 : 1);
    return out.sort(([, a], [, b]) => cmp(a.lastUsed, b.lastUsed) || cmp(a.firstDetected, b.firstDetected));
  }

  async #freeSpace(bytes: bigint, now: number, inUse: Set<string>, reason: 'space' | 'age'): Promise<bigint> {
    let freed = 0n;
    for (const [id, rec] of this.#evictionOrder(inUse, now)) {
      if (freed >= bytes) break;
      if (await this.#free(id, rec, reason)) freed += rec.size;
    }
    return freed;
  }

  async #free(id: string, rec: ImageRecord, reason: 'space' | 'age'): Promise<boolean> {
    this.#o.log.info('Removing image to free bytes', { imageID: id, names: rec.names, size: String(rec.size), reason });
    try {
      await this.#o.runtime.removeImage(id);
    } catch (err) {
      this.#o.log.error('Failed to remove image', { imageID: id, err: (err as Error).message });
      return false;
    }
    this.#records.delete(id);
    this.#collected?.withLabelValues(reason).inc();
    return true;
  }
}
