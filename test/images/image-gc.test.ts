import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ImageGCManager, ImageGCError, runtimeSandboxImage, type ImageGCPolicy } from '../../src/images/image-gc.js';
import { Registry } from '../../src/metrics/registry.js';
import type { Container, Image } from '../../src/runtime/cri-types.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble } from '../kubelet/doubles.js';

const MIN = 60_000;

function image(id: string, size: number, tag = `${id}:latest`, pinned = false): Image {
  return { id, repo_tags: [tag], repo_digests: [], size: String(size), uid: null, username: '', spec: null, pinned };
}

function container(imageRef: string): Container {
  return { id: `c-${imageRef}`, pod_sandbox_id: 's', metadata: null, image: { image: imageRef, annotations: {} }, image_ref: imageRef, state: 'CONTAINER_EXITED', created_at: '0', labels: {}, annotations: {} };
}

class Runtime {
  images: Image[] = [];
  containers: Container[] = [];
  removed: string[] = [];
  async listImages() { return this.images; }
  async listContainers() { return this.containers; }
  async removeImage(id: string) {
    this.removed.push(id);
    this.images = this.images.filter((i) => i.id !== id);
  }
}

function setup(policy: Partial<ImageGCPolicy> = {}, sandboxImage?: () => Promise<string | undefined>) {
  const rt = new Runtime();
  const clock = new FakeClock();
  const registry = new Registry();
  const events: string[] = [];
  const fs = { capacityBytes: 1000n, availableBytes: 500n };
  const gc = new ImageGCManager({
    runtime: rt, clock, log: loggerDouble(), registry,
    imageFsStats: async () => ({ ...fs, availableBytes: fs.availableBytes + rt.removed.reduce((n, id) => n + (sizes.get(id) ?? 0n), 0n) }),
    policy: { highThresholdPercent: 85, lowThresholdPercent: 80, minAgeMs: 2 * MIN, maxAgeMs: 0, ...policy },
    recordEvent: (type, reason, message) => void events.push(`${type} ${reason} ${message}`),
    sandboxImage,
  });
  const sizes = new Map<string, bigint>();
  const add = (img: Image) => { rt.images.push(img); sizes.set(img.id, BigInt(img.size)); };
  return { rt, clock, registry, events, fs, gc, add };
}

describe('image GC', () => {
  it('does nothing under the high threshold', async () => {
    const { rt, gc, add, fs } = setup();
    add(image('a', 100));
    fs.availableBytes = 160n; // upstream: 100 - int(16.0) = 84% used
    await gc.garbageCollect();
    assert.deepEqual(rt.removed, []);
  });

  it('over the high threshold frees down to the low one, least recently used first, never in use, pinned or too young', async () => {
    const { rt, gc, add, fs, clock, registry } = setup();
    add(image('old', 60));
    add(image('older', 60));
    add(image('used', 500));
    add(image('pinned', 500, 'pause:3.9', true));
    rt.containers = [container('used')];
    await gc.detectImages(); // t0: all first detected
    clock.step(1 * MIN);
    rt.containers = [container('used'), container('old')];
    await gc.detectImages(); // 'old' used at t0+1m: more recent than 'older'
    rt.containers = [container('used')];
    clock.step(2 * MIN);
    add(image('young', 60)); // first detected now: under imageMinimumGCAge
    fs.availableBytes = 100n; // 90% used: free 1000*20% - 100 = 100 bytes
    await gc.garbageCollect();
    assert.deepEqual(rt.removed, ['older', 'old']);
    assert.match(registry.metricsText(), /kubelet_image_garbage_collected_total\{reason="space"\} 2/);
  });

  it('reports a FreeDiskSpaceFailed event when not enough can be freed', async () => {
    const { gc, add, fs, clock, events } = setup();
    add(image('a', 10));
    await gc.detectImages();
    clock.step(3 * MIN);
    fs.availableBytes = 50n;
    await assert.rejects(gc.garbageCollect(), (e: Error) => e instanceof ImageGCError && /Attempted to free 150 bytes, but only found 10 bytes eligible to free/.test(e.message));
    assert.equal(events.length, 1);
    assert.match(events[0]!, /^Warning FreeDiskSpaceFailed Failed to garbage collect required amount of images/);
  });

  it('removes images unused for longer than imageMaximumGCAge whatever the disk', async () => {
    const { rt, gc, add, clock, registry } = setup({ maxAgeMs: 10 * MIN });
    add(image('stale', 10));
    add(image('used', 10));
    rt.containers = [container('used')];
    await gc.detectImages();
    clock.step(10 * MIN);
    await gc.garbageCollect();
    assert.deepEqual(rt.removed, []);
    clock.step(1);
    await gc.garbageCollect();
    assert.deepEqual(rt.removed, ['stale']);
    assert.match(registry.metricsText(), /kubelet_image_garbage_collected_total\{reason="age"\} 1/);
  });

  it('deleteUnusedImages (eviction reclaim) removes every unused image old enough', async () => {
    const { rt, gc, add, clock } = setup();
    add(image('a', 10));
    add(image('b', 10));
    add(image('c', 10));
    rt.containers = [container('c')];
    await gc.detectImages();
    clock.step(2 * MIN);
    assert.equal(await gc.deleteUnusedImages(), 20n);
    assert.deepEqual(rt.removed.sort(), ['a', 'b']);
  });

  it('start: images already there count as detected in the unknown past, so eviction reclaim may take them at once', async () => {
    const { rt, gc, add, clock } = setup();
    add(image('before', 10));
    add(image('in-use', 10));
    rt.containers = [container('in-use')];
    await gc.start();
    add(image('after', 10)); // pulled after the start: imageMinimumGCAge holds it back
    clock.step(1000);
    assert.equal(await gc.deleteUnusedImages(), 10n);
    assert.deepEqual(rt.removed, ['before']);
  });

  it('start: imageMaximumGCAge counts from the start for the images already there', async () => {
    const { rt, gc, add, clock } = setup({ maxAgeMs: 10 * MIN });
    add(image('before', 10));
    await gc.start();
    clock.step(10 * MIN);
    await gc.garbageCollect();
    assert.deepEqual(rt.removed, []);
    clock.step(1);
    await gc.garbageCollect();
    assert.deepEqual(rt.removed, ['before']);
  });

  it('never removes the runtime\'s sandbox image, which no container names and the runtime may not pin', async () => {
    let asked = 0;
    const { rt, gc, add, clock } = setup({}, async () => (asked++, 'registry.local/pause:3.9'));
    add(image('sha256:pause', 10, 'registry.local/pause:3.9'));
    add(image('sha256:other', 10));
    await gc.start();
    clock.step(3 * MIN);
    assert.equal(await gc.deleteUnusedImages(), 10n);
    assert.deepEqual(rt.removed, ['sha256:other']);
    assert.equal(asked, 1, 'asked the runtime once');
  });

  it('runtimeSandboxImage reads containerd\'s CRI config from the verbose Status, else nothing', async () => {
    const status = (info: Record<string, string>) => ({ status: async () => ({ info }) });
    assert.equal(await runtimeSandboxImage(status({ config: JSON.stringify({ sandboxImage: 'registry.k8s.io/pause:3.9', other: 1 }) })), 'registry.k8s.io/pause:3.9');
    assert.equal(await runtimeSandboxImage(status({})), undefined);
    assert.equal(await runtimeSandboxImage(status({ config: '{not json' })), undefined);
  });

  it('refuses a low threshold above the high one', () => {
    assert.throws(() => setup({ lowThresholdPercent: 90 }), /LowThresholdPercent 90 can not be higher than HighThresholdPercent 85/);
  });
});
