import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ManifestError } from '../../src/sources/errors.js';
import { FileSource, MANIFEST_READ_CONCURRENCY, STAMP_SETTLE_MS, type SourceEntry } from '../../src/sources/file-source.js';
import { PodConfig, type PodUpdate } from '../../src/sources/pod-config.js';
import { FakeClock } from '../../src/util/clock.js';

const roots: string[] = [];
after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'kubelet-ts-static-'));
  roots.push(d);
  return d;
}

function manifest(name: string, image = 'busybox:1.36'): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  containers:
  - name: main
    image: ${image}
`;
}

/** Writes like editors and config managers do: a dotfile, then a rename into place. */
function writeAtomic(path: string, content: string): void {
  const tmp = join(path, '..', `.tmp-${Math.random().toString(36).slice(2)}`);
  writeFileSync(tmp, content);
  renameSync(tmp, path);
}

/** Polls until `cond` holds; the deadline only turns a hang into a failure. */
async function waitFor(what: string, cond: () => boolean, deadlineMs = 10_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function names(entries: SourceEntry[] | undefined): string[] {
  return (entries ?? []).map((e) => e.pod.metadata.name!);
}

describe('FileSource', () => {
  it('end to end: add, edit, remove, broken file beside a good one, dotfiles and subdirectories ignored', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
    writeFileSync(join(dir, 'b.yaml'), 'apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec: {containers: [{name: c}]}\n');
    writeFileSync(join(dir, '.hidden.yaml'), manifest('hidden'));
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'nested.yaml'), manifest('nested'));

    const updates: PodUpdate[] = [];
    const errors: ManifestError[] = [];
    const config = new PodConfig({ nodeName: 'Node1', onUpdate: (u) => updates.push(u), onError: (e) => errors.push(e), log: () => {} });
    config.startFileSource(dir, 60_000);
    try {
      await waitFor('the first set', () => updates.length > 0);
      assert.equal(config.seenAllSources(), true);
      assert.equal(updates[0]!.op, 'ADD');
      assert.equal(updates[0]!.source, 'file');
      assert.deepEqual(updates[0]!.pods.map((p) => p.metadata.name), ['alpha-node1']);
      const alpha = updates[0]!.pods[0]!;
      assert.equal(alpha.metadata.annotations!['kubernetes.io/config.source'], 'file');
      assert.ok(alpha.metadata.annotations!['kubernetes.io/config.seen']);
      await waitFor('the broken file report', () => errors.length > 0);
      assert.equal(errors[0]!.location, join(dir, 'b.yaml'));
      assert.equal(errors[0]!.field, 'spec.containers[0].image');
      assert.ok(errors[0]!.message.includes(join(dir, 'b.yaml')));

      updates.length = 0;
      writeAtomic(join(dir, 'c.yaml'), manifest('gamma'));
      await waitFor('gamma added', () => updates.some((u) => u.op === 'ADD'));
      assert.deepEqual(updates.map((u) => `${u.op}:${u.pods.map((p) => p.metadata.name)}`), ['ADD:gamma-node1']);

      // editing a manifest changes the UID: the old pod goes, a new one comes
      updates.length = 0;
      writeAtomic(join(dir, 'a.yaml'), manifest('alpha', 'busybox:1.37'));
      await waitFor('alpha replaced', () => updates.some((u) => u.op === 'ADD'));
      assert.deepEqual(updates.map((u) => u.op), ['REMOVE', 'ADD']);
      assert.equal(updates[0]!.pods[0]!.metadata.uid, alpha.metadata.uid);
      assert.notEqual(updates[1]!.pods[0]!.metadata.uid, alpha.metadata.uid);
      assert.equal(updates[1]!.pods[0]!.spec.containers[0]!.image, 'busybox:1.37');

      updates.length = 0;
      unlinkSync(join(dir, 'c.yaml'));
      await waitFor('gamma removed', () => updates.some((u) => u.op === 'REMOVE'));
      assert.deepEqual(updates.map((u) => `${u.op}:${u.pods.map((p) => p.metadata.name)}`), ['REMOVE:gamma-node1']);
      assert.equal(errors.length, 1, 'the broken file is reported once');
      assert.deepEqual(config.mergedPods().map((p) => p.metadata.name), ['alpha-node1']);
    } finally {
      await config.stop();
    }
  });

  it('two files declaring the same pod: the first (by file name) wins, the other is reported', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, '10-web.yaml'), manifest('web', 'busybox:1'));
    writeFileSync(join(dir, '20-web.yaml'), manifest('web', 'busybox:2'));
    const updates: PodUpdate[] = [];
    const errors: ManifestError[] = [];
    const config = new PodConfig({ nodeName: 'n1', onUpdate: (u) => updates.push(u), onError: (e) => errors.push(e), log: () => {} });
    config.startFileSource(dir, 60_000);
    try {
      await waitFor('the first set', () => updates.length > 0);
      assert.deepEqual(updates[0]!.pods.map((p) => p.spec.containers[0]!.image), ['busybox:1']);
      assert.equal(errors.length, 1);
      assert.equal(errors[0]!.location, join(dir, '20-web.yaml'));
      assert.equal(errors[0]!.field, 'metadata.name');
    } finally {
      await config.stop();
    }
  });

  it('the periodic check alone picks up changes (no fs events)', async () => {
    const dir = tempDir();
    const sets: SourceEntry[][] = [];
    const clock = new FakeClock();
    const src = new FileSource({ path: dir, nodeName: 'n1', checkPeriodMs: 20_000, watch: false, clock, onSet: (e) => sets.push(e), onError: () => {} });
    // one period on the clock, then wait for the check it started to be scheduled again
    const period = async (): Promise<void> => {
      clock.step(20_000);
      await waitFor('the next check to be scheduled', () => clock.pendingTimers() === 1);
    };
    src.start();
    try {
      await waitFor('the first (empty) set', () => sets.length > 0 && clock.pendingTimers() === 1);
      assert.deepEqual(names(sets[0]), []);
      writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
      await period();
      await waitFor('alpha', () => names(sets.at(-1)).includes('alpha-n1'));
      const uid = sets.at(-1)![0]!.pod.metadata.uid;
      const count = sets.length;
      await period();
      assert.equal(sets.length, count, 'no set for an unchanged check');
      writeFileSync(join(dir, 'a.yaml'), manifest('alpha', 'busybox:2'));
      await period();
      await waitFor('the edit', () => sets.at(-1)![0]?.pod.metadata.uid !== uid);
      assert.equal(sets.length, count + 1, 'one set per change, none for unchanged checks');
      assert.equal(sets.at(-1)![0]!.pod.spec.containers[0]!.image, 'busybox:2');
      unlinkSync(join(dir, 'a.yaml'));
      await period();
      await waitFor('the removal', () => sets.at(-1)!.length === 0);
    } finally {
      await src.stop();
    }
  });

  it('a previously good file turned bad keeps its pod on the fs event and loses it on the full check', async () => {
    const dir = tempDir();
    const file = join(dir, 'a.yaml');
    writeFileSync(file, manifest('alpha'));
    const sets: SourceEntry[][] = [];
    const errors: ManifestError[] = [];
    const src = new FileSource({ path: dir, nodeName: 'n1', checkPeriodMs: 3_600_000, onSet: (e) => sets.push(e), onError: (e) => errors.push(e) });
    src.start();
    try {
      await waitFor('alpha', () => names(sets.at(-1)).includes('alpha-n1'));
      const count = sets.length;
      writeAtomic(file, 'apiVersion: v1\nkind: Pod\nmetadata: {name: alpha}\nspec: {containers: [{name: main, image: "x", ports: [{containerPort: 0}]}]}\n');
      await waitFor('the error report', () => errors.length > 0);
      assert.equal(errors[0]!.field, 'spec.containers[0].ports[0].containerPort');
      assert.equal(sets.length, count, 'the watch event keeps the last good pod');
      await src.check();
      assert.deepEqual(names(sets.at(-1)), []);
      assert.equal(errors.length, 1, 'the same bad content is reported once');
    } finally {
      await src.stop();
    }
  });

  it('a missing directory is not fatal: empty set, logged once, picked up when it appears', async () => {
    const parent = tempDir();
    const dir = join(parent, 'manifests');
    const sets: SourceEntry[][] = [];
    const logs: string[] = [];
    const clock = new FakeClock();
    const src = new FileSource({
      path: dir,
      nodeName: 'n1',
      checkPeriodMs: 20_000,
      clock,
      onSet: (e) => sets.push(e),
      onError: () => {},
      log: (m) => logs.push(m),
    });
    src.start();
    try {
      await waitFor('the first (empty) set', () => sets.length > 0);
      assert.deepEqual(names(sets[0]), []);
      await src.check();
      await src.check();
      assert.equal(logs.filter((l) => l.includes('does not exist')).length, 1);
      mkdirSync(dir);
      writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
      // the next periodic check finds the directory (there is no watch on a missing path)
      await waitFor('the next check to be scheduled', () => clock.pendingTimers() === 1);
      clock.step(20_000);
      await waitFor('alpha', () => names(sets.at(-1)).includes('alpha-n1'));
    } finally {
      await src.stop();
    }
  });

  it('entries the batched stat cannot settle are worded as before: a symlink loop, a directory, a dangling link; siblings still read', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
    symlinkSync('loop.yaml', join(dir, 'loop.yaml'));
    symlinkSync('nowhere', join(dir, 'dangling.yaml'));
    mkdirSync(join(dir, 'sub'));
    const sets: SourceEntry[][] = [];
    const logs: string[] = [];
    const src = new FileSource({ path: dir, nodeName: 'n1', checkPeriodMs: 20_000, watch: false, clock: new FakeClock(), onSet: (e) => sets.push(e), onError: () => {}, log: (m) => logs.push(m) });
    try {
      await src.check();
      await src.check();
      assert.deepEqual(names(sets.at(-1)), ['alpha-n1']);
      const loop = logs.filter((l) => l.startsWith(`Can't get metadata for ${JSON.stringify(join(dir, 'loop.yaml'))}: ELOOP: too many symbolic links encountered, stat `));
      assert.equal(loop.length, 1, logs.join('\n'));
      assert.equal(logs.filter((l) => l === `Not recursing into manifest path ${JSON.stringify(join(dir, 'sub'))}`).length, 1);
      // a dangling link is a file gone, not an error
      assert.equal(logs.filter((l) => l.includes('dangling')).length, 0);
    } finally {
      await src.stop();
    }
  });

  it('accepts a single manifest file as the path', async () => {
    const dir = tempDir();
    const file = join(dir, 'only.yaml');
    writeFileSync(file, manifest('solo'));
    writeFileSync(join(dir, 'other.yaml'), manifest('other'));
    const sets: SourceEntry[][] = [];
    const src = new FileSource({ path: file, nodeName: 'n1', checkPeriodMs: 3_600_000, onSet: (e) => sets.push(e), onError: () => {} });
    src.start();
    try {
      await waitFor('solo', () => sets.length > 0);
      assert.deepEqual(names(sets[0]), ['solo-n1']);
      assert.equal(sets[0]![0]!.location, file);
      writeAtomic(file, manifest('solo', 'busybox:2'));
      await waitFor('the edit', () => sets.at(-1)![0]?.pod.spec.containers[0]!.image === 'busybox:2');
      assert.deepEqual(names(sets.at(-1)), ['solo-n1']);
    } finally {
      await src.stop();
    }
  });

  describe('the periodic check of many files', () => {
    const fsp = createRequire(import.meta.url)('node:fs/promises') as typeof import('node:fs/promises');
    /** Counts the manifests opened (and the most open at once) while `fn` runs. */
    async function countingOpens<T>(fn: (opened: string[], peak: () => number) => Promise<T>): Promise<T> {
      const real = fsp.open;
      const opened: string[] = [];
      let inFlight = 0;
      let peak = 0;
      fsp.open = (async (...args: Parameters<typeof real>) => {
        opened.push(String(args[0]));
        inFlight++;
        peak = Math.max(peak, inFlight);
        const fh = await real(...args);
        const close = fh.close.bind(fh);
        fh.close = async () => { inFlight--; return close(); };
        return fh;
      }) as typeof real;
      syncBuiltinESMExports();
      try {
        return await fn(opened, () => peak);
      } finally {
        fsp.open = real;
        syncBuiltinESMExports();
      }
    }

    async function periodicSource(dir: string, clock: FakeClock, sets: SourceEntry[][]): Promise<{ src: FileSource; period(): Promise<void> }> {
      const src = new FileSource({ path: dir, nodeName: 'n1', checkPeriodMs: 20_000, watch: false, clock, onSet: (e) => sets.push(e), onError: () => {} });
      src.start();
      await waitFor('the first set', () => sets.length > 0 && clock.pendingTimers() === 1);
      return {
        src,
        async period() {
          clock.step(20_000);
          await waitFor('the next check to be scheduled', () => clock.pendingTimers() === 1);
        },
      };
    }

    it('opens a bounded number of manifests at once', async () => {
      const dir = tempDir();
      for (let i = 0; i < 100; i++) writeFileSync(join(dir, `p${String(i).padStart(3, '0')}.yaml`), manifest(`p${i}`));
      const sets: SourceEntry[][] = [];
      await countingOpens(async (opened, peak) => {
        const { src } = await periodicSource(dir, new FakeClock(), sets);
        await src.stop();
        assert.equal(opened.length, 100);
        assert.ok(peak() <= MANIFEST_READ_CONCURRENCY, `${peak()} manifests open at once`);
      });
      assert.equal(sets[0]!.length, 100);
    });

    it('does not open a file unchanged since a read made after it settled; an edit that keeps size and mtime is still seen', async () => {
      const dir = tempDir();
      const a = join(dir, 'a.yaml');
      writeFileSync(a, manifest('alpha', 'busybox:1.36'));
      // the clock (wall time) well past the file's last change
      const clock = new FakeClock(Date.now() + 10 * STAMP_SETTLE_MS);
      const sets: SourceEntry[][] = [];
      await countingOpens(async (opened) => {
        const { src, period } = await periodicSource(dir, clock, sets);
        try {
          assert.equal(opened.length, 1);
          await period();
          await period();
          assert.equal(opened.length, 1, 'an unchanged settled file is not read again');
          // same size, mtime put back: ctime still moves, so it is read
          const { mtime } = statSync(a);
          writeFileSync(a, manifest('alpha', 'busybox:1.37'));
          utimesSync(a, mtime, mtime);
          clock.step(10 * STAMP_SETTLE_MS);
          await period();
          await waitFor('the edit', () => sets.at(-1)![0]?.pod.spec.containers[0]!.image === 'busybox:1.37');
          assert.equal(opened.length, 2);
        } finally {
          await src.stop();
        }
      });
    });

    it('reads a file changed within the settle window on every check (its timestamps may not move on the next write)', async () => {
      const dir = tempDir();
      writeFileSync(join(dir, 'a.yaml'), manifest('alpha'));
      // wall time at the file's change: not settled
      const clock = new FakeClock(Date.now());
      const sets: SourceEntry[][] = [];
      await countingOpens(async (opened) => {
        const { src, period } = await periodicSource(dir, clock, sets);
        try {
          await period();
          assert.equal(opened.length, 2);
        } finally {
          await src.stop();
        }
      });
    });
  });
});
