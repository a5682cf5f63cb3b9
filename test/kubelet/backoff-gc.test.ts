// Restart and pull backoff entries are keyed by pod UID (and container spec hash): housekeeping
// must drop the quiet ones or every pod that ever crashed or failed a pull stays in memory.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ImageManager } from '../../src/images/image-manager.js';
import { FakeClock } from '../../src/util/clock.js';
import { loggerDouble, mkPod, runtimeManagerOn } from './doubles.js';

test('gcBackoff drops restart backoff entries quiet for twice the cap, keeps recent ones, and GCs the pull backoff', () => {
  const clock = new FakeClock();
  let imageGCs = 0;
  const rm = runtimeManagerOn({}, clock, { ensureImageExists: async () => 'sha256:x', gcBackoff: () => void imageGCs++ });
  const gone = mkPod('gone');
  const live = mkPod('live');
  const goneKey = rm.backoffKey(gone, gone.spec.containers[0]!);
  const liveKey = rm.backoffKey(live, live.spec.containers[0]!);
  rm.crashBackoff.next(goneKey);
  clock.step(2 * rm.crashBackoff.maxMs);
  rm.crashBackoff.next(liveKey);
  clock.step(1);
  rm.gcBackoff();
  assert.equal(rm.crashBackoff.has(goneKey), false);
  assert.equal(rm.crashBackoff.has(liveKey), true);
  assert.equal(imageGCs, 1);
});

test('the image manager forgets pull backoff entries of pods gone quiet', async () => {
  const clock = new FakeClock();
  const images = new ImageManager({
    cri: {
      imageStatus: async () => ({ image: null }),
      pullImage: async () => { throw new Error('registry down'); },
    } as unknown as ConstructorParameters<typeof ImageManager>[0]['cri'],
    clock,
    log: loggerDouble(),
    serializeImagePulls: false,
  });
  const pod = mkPod('p');
  await assert.rejects(images.ensureImageExists(pod, pod.spec.containers[0]!));
  const entries = (images as unknown as { backoff: { entries: Map<string, unknown> } }).backoff.entries;
  assert.equal(entries.size, 1);
  clock.step(2 * 300_000 + 1);
  images.gcBackoff();
  assert.equal(entries.size, 0);
});
