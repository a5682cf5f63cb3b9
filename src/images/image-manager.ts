// The image manager (upstream: pkg/kubelet/images): pull policy, pull backoff, serialized or
// bounded-parallel pulls, and upstream's reasons for every way getting an image can fail.

import type { Container, Pod, PullPolicy } from '../api/types.js';
import { podFullName } from '../api/types.js';
import { defaultImagePullPolicy, parseImageReference } from '../api/defaults.js';
import type { AuthConfig, PodSandboxConfig } from '../runtime/cri-types.js';
import type { PullCredentials } from '../credentialprovider/index.js';
import { Backoff } from '../util/backoff.js';
import { KubeletError } from '../util/errors.js';
import { Reasons } from '../api/reasons.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../util/log.js';

const { ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull, ImageInspectError } = Reasons;

/** A failure to get a container's image, carrying upstream's reason as its code. */
export class ImageError extends KubeletError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** The image calls the manager makes (a CriClient, or a test double): what it reads of the answers. */
export interface ImageCri {
  imageStatus(image: { image: string }): Promise<{ image: { id: string } | null }>;
  pullImage(image: { image: string }, auth: AuthConfig | undefined, sandboxConfig: PodSandboxConfig | undefined, opts: { signal?: AbortSignal }): Promise<{ image_ref: string }>;
}

export interface ImageManagerOptions {
  cri: ImageCri;
  /** Aborted at shutdown: pulls in flight are abandoned (PullImage has no deadline). */
  signal?: AbortSignal;
  clock: Clock;
  log: Logger;
  serializeImagePulls: boolean;
  /** Only when pulls are not serialized; 0 or undefined means unbounded (upstream's nil). */
  maxParallelImagePulls?: number;
  /** The pod's pull secrets and the credential-provider plugins. Undefined: every pull is anonymous. */
  credentials?: PullCredentials;
  /** Told of each successful pull: seconds (waiting for a pull slot included, as upstream) and the image's size (0 unknown). */
  onPulled?: (pod: Pod, seconds: number, sizeBytes: number) => void;
  /** Told when a pod's pull starts and ends (the pod start SLI leaves pulling out). */
  onPulling?: (pod: Pod, phase: 'start' | 'end') => void;
}

/** Adds `:latest` when the image names neither tag nor digest, as upstream does. */
export function applyDefaultImageTag(image: string): string {
  const ref = parseImageReference(image);
  if (!ref) {
    throw new ImageError(InvalidImageName, `Failed to apply default image tag "${image}": couldn't parse image name "${image}": invalid reference format`);
  }
  if (ref.digest) return image;
  return image.endsWith(`:${ref.tag}`) ? image : `${image}:${ref.tag}`;
}

/** The effective pull policy (the API server defaults it; a manifest read here is defaulted too). */
export function pullPolicyOf(container: Container): PullPolicy {
  return container.imagePullPolicy ?? defaultImagePullPolicy(container.image);
}

class Semaphore {
  private waiting: (() => void)[] = [];
  private active = 0;
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.limit > 0 && this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

export class ImageManager {
  private readonly backoff: Backoff;
  private readonly pulls: Semaphore;
  /** One pull per image at a time: concurrent requests for the same image share it. */
  private readonly inflight = new Map<string, Promise<string>>();

  constructor(private readonly opts: ImageManagerOptions) {
    this.backoff = new Backoff(opts.clock, 10_000, 300_000);
    const limit = opts.serializeImagePulls ? 1 : (opts.maxParallelImagePulls ?? 0);
    this.pulls = new Semaphore(limit);
  }

  /**
   * Makes sure the container's image is present per its pull policy and returns the
   * runtime's image reference (what CreateContainer takes). Throws ImageError.
   */
  /** Forgets pull backoff entries gone quiet: keys carry the pod UID, so gone pods would stay forever. */
  gcBackoff(): void {
    this.backoff.gc();
  }

  async ensureImageExists(pod: Pod, container: Container, sandboxConfig?: PodSandboxConfig): Promise<string> {
    const image = applyDefaultImageTag(container.image ?? '');
    const policy = pullPolicyOf(container);
    let present: string | undefined;
    try {
      present = await this.imageRef(image);
    } catch (err) {
      throw new ImageError(ImageInspectError, `Failed to inspect image "${image}": ${(err as Error).message}`, { cause: err });
    }
    if (policy === 'Never') {
      if (present) return present;
      throw new ImageError(ErrImageNeverPull, `Container image "${image}" is not present with pull policy of Never`);
    }
    if (present && policy === 'IfNotPresent') return present;

    const key = `${pod.metadata.uid}_${image}`;
    if (this.backoff.isInBackOffSinceUpdate(key)) {
      throw new ImageError(ImagePullBackOff, `Back-off pulling image "${image}"`);
    }
    const start = performance.now();
    this.opts.onPulling?.(pod, 'start');
    try {
      const ref = await this.pullWithCredentials(pod, image, sandboxConfig);
      this.opts.onPulling?.(pod, 'end');
      if (this.opts.onPulled) {
        const seconds = (performance.now() - start) / 1000;
        const size = await this.opts.cri.imageStatus({ image: ref }).then((s) => Number((s.image as { size?: unknown } | null)?.size ?? 0), () => 0);
        this.opts.onPulled(pod, seconds, size);
      }
      this.backoff.reset(key);
      this.opts.log.info('Pulled image', { pod: podFullName(pod), container: container.name, image });
      return ref;
    } catch (err) {
      this.opts.onPulling?.(pod, 'end');
      this.backoff.next(key);
      const msg = (err as Error).message;
      this.opts.log.warn('Failed to pull image', { pod: podFullName(pod), container: container.name, image, err: msg });
      throw new ImageError(ErrImagePull, `Failed to pull image "${image}": ${msg}`, { cause: err });
    }
  }

  private async imageRef(image: string): Promise<string | undefined> {
    const res = await this.opts.cri.imageStatus({ image });
    return res.image ? res.image.id : undefined;
  }

  /**
   * Pulls with each matching credential in turn until one works (upstream: pull secrets first,
   * then plugins; no anonymous try once any matched); anonymously when none matched. A failed
   * pull's message also says which plugins failed or secrets could not be read.
   */
  private async pullWithCredentials(pod: Pod, image: string, sandboxConfig?: PodSandboxConfig): Promise<string> {
    if (!this.opts.credentials) return this.pull(image, undefined, sandboxConfig);
    const { creds, problems } = await this.opts.credentials.lookup(pod, image);
    const note = problems.length > 0 ? ` (${problems.join('; ')})` : '';
    if (creds.length === 0) {
      try {
        return await this.pull(image, undefined, sandboxConfig);
      } catch (err) {
        if (note) throw new ImageError(ErrImagePull, `${(err as Error).message}${note}`, { cause: err });
        throw err;
      }
    }
    const errs: string[] = [];
    for (const c of creds) {
      try {
        return await this.pull(image, c.auth, sandboxConfig);
      } catch (err) {
        this.opts.log.info('Pulling with a credential failed', { image, credential: c.source, err: (err as Error).message });
        errs.push((err as Error).message);
      }
    }
    // upstream's aggregate error: one message as is, several in brackets.
    throw new ImageError(ErrImagePull, `${errs.length === 1 ? errs[0] : `[${errs.join(', ')}]`}${note}`);
  }

  private pull(image: string, auth: AuthConfig | undefined, sandboxConfig?: PodSandboxConfig): Promise<string> {
    // Pulls of one image with the same credentials share one CRI call.
    const key = auth ? `${image}\0${JSON.stringify(auth)}` : image;
    let p = this.inflight.get(key);
    if (!p) {
      p = this.pulls
        .run(async () => (await this.opts.cri.pullImage({ image }, auth, sandboxConfig, { signal: this.opts.signal })).image_ref)
        .finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }
}
