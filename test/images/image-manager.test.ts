// The image manager against a CRI image-service double that keeps the real call semantics
// (ImageStatus answers null for an absent image; PullImage resolves with the image ref).
// Pull concurrency is only observable from the service side, hence the double.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Container, Pod } from '../../src/api/types.js';
import { ImageError, ImageManager, applyDefaultImageTag } from '../../src/images/image-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import { createLogger, setLogSink } from '../../src/util/log.js';

setLogSink(() => undefined);

/** An image service double: a set of present images, pulls that finish when released. */
class ImageServiceDouble {
  present = new Set<string>();
  failing = new Set<string>();
  active = 0;
  maxActive = 0;
  pulls: string[] = [];
  private waiting: (() => void)[] = [];

  async imageStatus(spec: { image: string } | string) {
    const image = typeof spec === 'string' ? spec : spec.image;
    return { image: this.present.has(image) ? { id: `sha256:${image.length}`, size: '1' } : null, info: {} };
  }

  async pullImage(spec: { image: string } | string, _auth?: unknown, _sb?: unknown, opts: { signal?: AbortSignal } = {}) {
    const image = typeof spec === 'string' ? spec : spec.image;
    this.pulls.push(image);
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    await new Promise<void>((r, reject) => {
      this.waiting.push(r);
      opts.signal?.addEventListener('abort', () => reject(new Error('pull cancelled')), { once: true });
    });
    this.active--;
    if (this.failing.has(image)) throw new Error(`failed to resolve reference "${image}": connection refused`);
    this.present.add(image);
    return { image_ref: `sha256:${image.length}` };
  }

  releaseAll(): void {
    for (const r of this.waiting.splice(0)) r();
  }
}

const pod = (uid: string): Pod => ({ metadata: { name: uid, namespace: 'default', uid }, spec: { containers: [] } });
const container = (image: string, imagePullPolicy?: Container['imagePullPolicy']): Container => ({ name: 'c', image, imagePullPolicy });

function manager(svc: ImageServiceDouble, clock: FakeClock, serialize: boolean, max?: number, signal?: AbortSignal) {
  return new ImageManager({ cri: svc, clock, log: createLogger(), serializeImagePulls: serialize, maxParallelImagePulls: max, signal });
}

async function drain(svc: ImageServiceDouble, ps: Promise<unknown>[]): Promise<void> {
  const settled = Promise.allSettled(ps);
  for (let i = 0; i < 50 && svc.pulls.length < ps.length; i++) {
    svc.releaseAll();
    await new Promise((r) => setImmediate(r));
  }
  svc.releaseAll();
  for (let i = 0; i < 50; i++) {
    svc.releaseAll();
    await new Promise((r) => setImmediate(r));
  }
  await settled;
}

describe('image manager', () => {
  it('defaults the tag and refuses an invalid name with InvalidImageName', () => {
    assert.equal(applyDefaultImageTag('busybox'), 'busybox:latest');
    assert.equal(applyDefaultImageTag('127.0.0.1:5000/a/b'), '127.0.0.1:5000/a/b:latest');
    assert.equal(applyDefaultImageTag('127.0.0.1:5000/a/b:1.0'), '127.0.0.1:5000/a/b:1.0');
    assert.throws(() => applyDefaultImageTag('Not Valid::x'), (e: unknown) => e instanceof ImageError && e.code === 'InvalidImageName');
  });

  it('pulls one image at a time when serializeImagePulls is true', async () => {
    const svc = new ImageServiceDouble();
    const m = manager(svc, new FakeClock(), true);
    const ps = ['a:1', 'b:1', 'c:1'].map((img, i) => m.ensureImageExists(pod(`p${i}`), container(img)));
    await drain(svc, ps);
    assert.equal(svc.maxActive, 1);
    assert.deepEqual(svc.pulls.sort(), ['a:1', 'b:1', 'c:1']);
  });

  it('bounds parallel pulls by maxParallelImagePulls when not serialized', async () => {
    const svc = new ImageServiceDouble();
    const m = manager(svc, new FakeClock(), false, 2);
    const ps = ['a:1', 'b:1', 'c:1', 'd:1'].map((img, i) => m.ensureImageExists(pod(`p${i}`), container(img)));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    assert.equal(svc.active, 2, 'two pulls in flight, the others wait');
    await drain(svc, ps);
    assert.equal(svc.maxActive, 2);
  });

  it('shares one pull between pods asking for the same image', async () => {
    const svc = new ImageServiceDouble();
    const m = manager(svc, new FakeClock(), false);
    const ps = [m.ensureImageExists(pod('p1'), container('same:1')), m.ensureImageExists(pod('p2'), container('same:1'))];
    await drain(svc, ps);
    assert.equal(svc.pulls.length, 1);
  });

  it('follows the pull policy: Never, IfNotPresent, Always', async () => {
    const svc = new ImageServiceDouble();
    svc.present.add('here:1');
    const m = manager(svc, new FakeClock(), true);
    assert.equal(await m.ensureImageExists(pod('p'), container('here:1', 'Never')), 'sha256:6');
    await assert.rejects(m.ensureImageExists(pod('p'), container('gone:1', 'Never')),
      (e: unknown) => e instanceof ImageError && e.code === 'ErrImageNeverPull' && e.message === 'Container image "gone:1" is not present with pull policy of Never');
    await m.ensureImageExists(pod('p'), container('here:1', 'IfNotPresent'));
    assert.equal(svc.pulls.length, 0, 'present + IfNotPresent: no pull');
    await drain(svc, [m.ensureImageExists(pod('p'), container('here:1', 'Always'))]);
    assert.deepEqual(svc.pulls, ['here:1'], 'Always pulls even when present');
  });

  it('backs off failed pulls with ImagePullBackOff, 10s doubling', async () => {
    const svc = new ImageServiceDouble();
    svc.failing.add('down:1');
    const clock = new FakeClock();
    const m = manager(svc, clock, true);
    const attempt = async () => {
      const p = m.ensureImageExists(pod('p'), container('down:1'));
      await drain(svc, [p]);
      return p.then(() => 'ok', (e: ImageError) => e.code);
    };
    assert.equal(await attempt(), 'ErrImagePull');
    assert.equal(await attempt(), 'ImagePullBackOff');
    clock.step(10_001);
    assert.equal(await attempt(), 'ErrImagePull');
    clock.step(10_001);
    assert.equal(await attempt(), 'ImagePullBackOff', 'the second window is 20s');
    clock.step(10_000);
    assert.equal(await attempt(), 'ErrImagePull');
    assert.equal(svc.pulls.length, 3);
  });

  it('abandons a pull in flight when the shutdown signal fires (PullImage has no deadline)', async () => {
    const svc = new ImageServiceDouble();
    const ac = new AbortController();
    const m = manager(svc, new FakeClock(), true, undefined, ac.signal);
    const p = m.ensureImageExists(pod('p'), container('slow:1'));
    while (svc.pulls.length === 0) await new Promise((r) => setImmediate(r));
    ac.abort();
    await assert.rejects(p, (e: unknown) => e instanceof ImageError && e.code === 'ErrImagePull' && e.cause instanceof Error && /pull cancelled/.test(e.message));
  });
});
