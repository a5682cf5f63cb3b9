import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NON_EXISTENT, RecordStore, hashString } from '../../src/pleg/records.js';

const id = (n: number): string => n.toString(16).padStart(64, '0');

function find(store: RecordStore, s: string): ReturnType<RecordStore['findBytes']> {
  const buf = Buffer.from(s, 'latin1');
  return store.findBytes(buf, 0, buf.length, hashString(s));
}

test('RecordStore.findBytes finds every live id by its bytes while records come and go', () => {
  const store = new RecordStore();
  const live = new Set<number>();
  let next = 0;
  // enough ids to grow the id arena several times, removing most of them to make it compact
  for (let round = 0; round < 6; round++) {
    for (let i = 0; i < 3000; i++) {
      const n = next++;
      const rec = store.create(id(n), false, `uid-${n % 50}`, 'p', 'ns', 'c', 0, 0);
      store.observe(rec, 'CONTAINER_RUNNING', round * 10);
      live.add(n);
    }
    for (const n of [...live]) {
      if (n % 4 === round % 4) continue;
      store.observe(store.get(id(n))!, NON_EXISTENT, round * 10 + 1);
      live.delete(n);
    }
  }
  assert.equal(store.size, live.size);
  for (const n of live) assert.equal(find(store, id(n))?.id, id(n));
  for (let n = 0; n < next; n++) if (!live.has(n)) assert.equal(find(store, id(n)), undefined);
  // same length, same first and last 16 bytes (same hash), different middle: not found
  const probe = [...id(3)];
  probe[30] = probe[30] === 'f' ? 'e' : 'f';
  assert.equal(find(store, probe.join('')), undefined);
});

test('RecordStore.findBytes: an id that is not latin1 is compared as a string (its bytes never match)', () => {
  const store = new RecordStore();
  const odd = 'ç-é-€';
  store.create(odd, true, 'u', 'p', 'ns', '', 0, 0);
  store.create(id(1), true, 'u', 'p', 'ns', '', 0, 0);
  assert.equal(store.get(odd)?.id, odd);
  assert.equal(find(store, id(1))?.id, id(1));
  // latin1 'ç' and 'é' are one byte each; '€' is not latin1, so no byte string equals the id
  const utf8 = Buffer.from(odd, 'utf8');
  assert.equal(store.findBytes(utf8, 0, utf8.length, hashString(odd)), undefined);
});
