import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { call, podManifest, startServer, watch } from './client.js';

const pods = '/api/v1/namespaces/default/pods';

type Op =
  | { op: 'create'; name: string; app: string; bound: boolean }
  | { op: 'label'; name: string; app: string }
  | { op: 'delete'; name: string; grace: number };

const names = ['a', 'b', 'c', 'd'];
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('create' as const), name: fc.constantFrom(...names), app: fc.constantFrom('x', 'y'), bound: fc.boolean() }),
  fc.record({ op: fc.constant('label' as const), name: fc.constantFrom(...names), app: fc.constantFrom('x', 'y') }),
  fc.record({ op: fc.constant('delete' as const), name: fc.constantFrom(...names), grace: fc.constantFrom(0, 10) }),
);

describe('test API server watch (property)', () => {
  it('a list at any resourceVersion plus the watch from it gives the list now, under a label selector', async () => {
    const s = await startServer();
    try {
      await fc.assert(fc.asyncProperty(fc.array(opArb, { maxLength: 12 }), fc.array(opArb, { maxLength: 12 }), async (beforeOps, afterOps) => {
        // Each run starts from an empty namespace.
        for (const p of s.list('pods', 'default')) s.store.remove(s.resource('pods'), p);
        const apply = async (o: Op) => {
          if (o.op === 'create') await call(s, 'POST', pods, { body: podManifest(o.name, o.bound ? 'n1' : '', { app: o.app }) });
          else if (o.op === 'label') await call(s, 'PATCH', `${pods}/${o.name}`, { body: { metadata: { labels: { app: o.app } } }, contentType: 'application/strategic-merge-patch+json' });
          else await call(s, 'DELETE', `${pods}/${o.name}?gracePeriodSeconds=${o.grace}`);
        };
        for (const o of beforeOps) await apply(o);
        const snap = await call(s, 'GET', `${pods}?labelSelector=app%3Dx`);
        const state = new Map<string, any>(snap.body.items.map((p: any) => [p.metadata.name, p]));
        for (const o of afterOps) await apply(o);
        await call(s, 'POST', pods, { body: podManifest('zz-sentinel', 'n1', { app: 'x' }) });
        const w = await watch(s, `${pods}?watch=true&labelSelector=app%3Dx&resourceVersion=${snap.body.metadata.resourceVersion}`);
        let lastRv = Number(snap.body.metadata.resourceVersion);
        for (;;) {
          const e = await w.next();
          assert.ok(e, 'watch ended early');
          assert.ok(Number(e.object.metadata.resourceVersion) > lastRv, 'resourceVersions go up along the stream');
          lastRv = Number(e.object.metadata.resourceVersion);
          if (e.type === 'DELETED') state.delete(e.object.metadata.name);
          else state.set(e.object.metadata.name, e.object);
          if (e.object.metadata.name === 'zz-sentinel') break;
        }
        w.close();
        const now = await call(s, 'GET', `${pods}?labelSelector=app%3Dx`);
        const norm = (p: any) => `${p.metadata.name}@${p.metadata.resourceVersion}`;
        assert.deepEqual([...state.values()].map(norm).sort(), now.body.items.map(norm).sort());
        await call(s, 'DELETE', `${pods}/zz-sentinel?gracePeriodSeconds=0`);
      }), { numRuns: 40 });
    } finally {
      await s.stop();
    }
  });
});
