import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import type { ManifestError } from '../../src/sources/errors.js';
import { PodConfig, type PodUpdate } from '../../src/sources/pod-config.js';

function apiPod(uid: string, name = uid, extra: Partial<Pod['spec']> = {}): Pod {
  return {
    metadata: { uid, name, namespace: 'default', labels: { app: name } },
    spec: { containers: [{ name: 'c', image: 'x:1' }], ...extra },
  };
}

function harness() {
  const updates: PodUpdate[] = [];
  const errors: ManifestError[] = [];
  const logs: string[] = [];
  const config = new PodConfig({
    nodeName: 'node1',
    onUpdate: (u) => updates.push(u),
    onError: (e) => errors.push(e),
    now: () => new Date(Date.UTC(2024, 0, 1)),
    log: (m) => logs.push(m),
  });
  const ops = () => updates.map((u) => `${u.op}:${u.pods.map((p) => p.metadata.uid).join(',')}`);
  return { config, updates, errors, logs, ops, clear: () => (updates.length = 0) };
}

describe('PodConfig merge', () => {
  it('first set: ADD with source and first-seen annotations', () => {
    const h = harness();
    h.config.setPods('api', [apiPod('a'), apiPod('b')]);
    assert.deepEqual(h.ops(), ['ADD:a,b']);
    const a = h.updates[0]!.pods[0]!;
    assert.equal(h.updates[0]!.source, 'api');
    assert.equal(a.metadata.annotations!['kubernetes.io/config.source'], 'api');
    assert.equal(a.metadata.annotations!['kubernetes.io/config.seen'], '2024-01-01T00:00:00Z');
  });

  it('an empty first set sends an empty ADD (the source is ready)', () => {
    const h = harness();
    h.config.setPods('file', []);
    assert.deepEqual(h.ops(), ['ADD:']);
    h.config.setPods('file', []);
    assert.equal(h.updates.length, 1);
  });

  it('the same set again sends nothing', () => {
    const h = harness();
    h.config.setPods('api', [apiPod('a')]);
    h.clear();
    h.config.setPods('api', [apiPod('a')]);
    assert.deepEqual(h.ops(), []);
  });

  it('spec, label or annotation changes are UPDATEs; config.seen/source are ignored', () => {
    const h = harness();
    h.config.setPods('api', [apiPod('a'), apiPod('b'), apiPod('c'), apiPod('d')]);
    h.clear();
    const a = apiPod('a');
    a.spec.containers[0]!.image = 'x:2';
    const b = apiPod('b');
    b.metadata.labels = { app: 'other' };
    const c = apiPod('c');
    c.metadata.annotations = { note: 'hi' };
    const d = apiPod('d');
    d.metadata.annotations = { 'kubernetes.io/config.seen': 'yesterday', 'kubernetes.io/config.source': 'api' };
    h.config.setPods('api', [a, b, c, d]);
    assert.deepEqual(h.ops(), ['UPDATE:a,b,c']);
    // the kubelet's first-seen time survives an update
    assert.equal(h.updates[0]!.pods[0]!.metadata.annotations!['kubernetes.io/config.seen'], '2024-01-01T00:00:00Z');
  });

  it('a status-only change is a RECONCILE', () => {
    const h = harness();
    h.config.setPods('api', [apiPod('a')]);
    h.clear();
    const a = apiPod('a');
    a.status = { phase: 'Running' };
    h.config.setPods('api', [a]);
    assert.deepEqual(h.ops(), ['RECONCILE:a']);
    assert.equal(h.updates[0]!.pods[0]!.status!.phase, 'Running');
  });

  it('a deletion timestamp is a DELETE; a pod gone from the set is a REMOVE', () => {
    const h = harness();
    h.config.setPods('api', [apiPod('a'), apiPod('b')]);
    h.clear();
    const a = apiPod('a');
    a.metadata.deletionTimestamp = '2024-01-01T00:00:10Z';
    h.config.setPods('api', [a]);
    assert.deepEqual(h.ops(), ['REMOVE:b', 'DELETE:a']);
  });

  it('delivers REMOVE, ADD, UPDATE, DELETE, RECONCILE in that order', () => {
    const h = harness();
    h.config.setPods('api', [apiPod('gone'), apiPod('upd'), apiPod('del'), apiPod('rec')]);
    h.clear();
    const upd = apiPod('upd', 'upd', { hostNetwork: true });
    const del = apiPod('del');
    del.metadata.deletionTimestamp = '2024-01-01T00:00:10Z';
    const rec = apiPod('rec');
    rec.status = { phase: 'Running' };
    h.config.setPods('api', [rec, del, upd, apiPod('new')]);
    assert.deepEqual(h.ops(), ['REMOVE:gone', 'ADD:new', 'UPDATE:upd', 'DELETE:del', 'RECONCILE:rec']);
  });

  it('sources are diffed separately', () => {
    const h = harness();
    h.config.setPods('api', [apiPod('a')]);
    h.config.setPods('file', [apiPod('f')]);
    h.clear();
    h.config.setPods('file', []);
    assert.deepEqual(h.ops(), ['REMOVE:f']);
    assert.deepEqual(h.config.mergedPods().map((p) => p.metadata.uid), ['a']);
  });

  it('keeps the first of two pods with the same name and reports the duplicate once', () => {
    const h = harness();
    const first = apiPod('u1', 'web');
    const second = apiPod('u2', 'web');
    h.config.setPods('api', [first, second]);
    assert.deepEqual(h.ops(), ['ADD:u1']);
    assert.equal(h.logs.filter((l) => l.includes('duplicate pod name')).length, 1);
    h.config.setPods('api', [first, second]);
    assert.equal(h.logs.filter((l) => l.includes('duplicate pod name')).length, 1);
    h.clear();
    // once the first is gone, the other is accepted
    h.config.setPods('api', [second]);
    assert.deepEqual(h.ops(), ['REMOVE:u1', 'ADD:u2']);
  });

  it('seenAllSources waits for every declared source', () => {
    const h = harness();
    h.config.addSource('api');
    h.config.addSource('file');
    assert.equal(h.config.seenAllSources(), false);
    h.config.setPods('file', []);
    assert.equal(h.config.seenAllSources(), false);
    h.config.setPods('api', []);
    assert.equal(h.config.seenAllSources(), true);
  });

  it('updates are delivered in order, never re-entrantly', () => {
    const seen: string[] = [];
    let depth = 0;
    const config: PodConfig = new PodConfig({
      nodeName: 'n',
      onUpdate: (u) => {
        depth++;
        assert.equal(depth, 1);
        seen.push(`${u.op}:${u.pods.map((p) => p.metadata.uid).join(',')}`);
        if (u.op === 'ADD' && u.pods[0]?.metadata.uid === 'a') config.setPods('api', []);
        depth--;
      },
      onError: () => {},
      log: () => {},
    });
    config.setPods('api', [apiPod('a')]);
    assert.deepEqual(seen, ['ADD:a', 'REMOVE:a']);
  });

  it('hands out copies: mutating an update does not change the stored pod', () => {
    const h = harness();
    const input = apiPod('a');
    h.config.setPods('api', [input]);
    h.updates[0]!.pods[0]!.spec.containers[0]!.image = 'mutated';
    input.metadata.labels = { changed: 'by caller' };
    h.clear();
    h.config.setPods('api', [apiPod('a')]);
    assert.deepEqual(h.ops(), []);
  });
});

describe('PodConfig sources', () => {
  it('starting a source twice is a KubeletError naming the source', async () => {
    const { isKubeletError } = await import('../../src/util/errors.js');
    const { FakeClock } = await import('../../src/util/clock.js');
    const config = new PodConfig({ nodeName: 'n1', onUpdate: () => {}, onError: () => {}, log: () => {}, clock: new FakeClock() });
    config.startUrlSource('http://127.0.0.1:1/pods', 20_000);
    try {
      assert.throws(() => config.startUrlSource('http://127.0.0.1:1/pods', 20_000), (e: unknown) => isKubeletError(e, 'PodSourceAlreadyStarted') && /"http"/.test(e.message));
    } finally {
      await config.stop();
    }
  });
});
