import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChurnGenerator } from '../../src/sim/churn.js';
import { SimCgroupTree } from '../../src/sim/cgroup-tree.js';
import { SimRuntime, SimRuntimeError, type SimContainerEvent } from '../../src/sim/sim-runtime.js';
import { FsCgroupReader } from '../../src/stats/cgroup-fs-reader.js';
import * as labels from '../../src/runtime/labels.js';

function withEvents(rt: SimRuntime): SimContainerEvent[] {
  const got: SimContainerEvent[] = [];
  rt.subscribe((e) => got.push(e));
  return got;
}

const types = (evs: SimContainerEvent[]): string[] => evs.map((e) => `${e.container_event_type}:${e.container_id.slice(0, 6)}`);

test('a pod as the kubelet creates it: sandbox and containers with upstream labels, events as containerd 1.6 sends them', () => {
  const rt = new SimRuntime({ seed: 3 });
  const events = withEvents(rt);
  const pod = rt.syntheticPod(2);
  const sid = rt.addPod(pod);
  const sb = rt.podSandboxStatus(sid);
  assert.equal(sb.state, 'SANDBOX_READY');
  assert.equal(sb.labels[labels.KUBERNETES_POD_UID_LABEL], pod.metadata.uid);
  assert.equal(sb.annotations['kubernetes.io/config.source'], 'api');
  assert.match(sb.ip, /^10\.\d+\.\d+\.\d+$/);
  const cs = rt.listContainers({ pod_sandbox_id: sid });
  assert.equal(cs.length, 2);
  for (const c of cs) {
    assert.equal(c.state, 'CONTAINER_RUNNING');
    assert.equal(c.labels[labels.KUBERNETES_POD_NAME_LABEL], pod.metadata.name);
    assert.equal(c.labels[labels.KUBERNETES_CONTAINER_NAME_LABEL], c.metadata.name);
    assert.match(c.annotations[labels.CONTAINER_HASH_LABEL] ?? '', /^[0-9a-f]+$/);
    assert.equal(c.annotations[labels.CONTAINER_RESTART_COUNT_LABEL], '0');
    assert.match(c.imageRef, /^sha256:[0-9a-f]{64}$/);
    assert.match(c.id, /^[0-9a-f]{64}$/);
  }
  const c0 = cs[0]!.id.slice(0, 6);
  const c1 = cs[1]!.id.slice(0, 6);
  const s = sid.slice(0, 6);
  assert.deepEqual(types(events), [
    `CONTAINER_CREATED_EVENT:${s}`,
    `CONTAINER_STARTED_EVENT:${s}`,
    `CONTAINER_CREATED_EVENT:${c0}`,
    `CONTAINER_STARTED_EVENT:${c0}`,
    `CONTAINER_CREATED_EVENT:${c1}`,
    `CONTAINER_STARTED_EVENT:${c1}`,
  ]);
  for (const e of events) assert.deepEqual(e.pod_sandbox_metadata, sb.metadata);
  assert.ok(BigInt(events[1]!.created_at) >= BigInt(events[0]!.created_at));
});

test('container lifecycle: stop, exit reasons, remove (idempotent), unknown ids are NOT_FOUND', () => {
  const rt = new SimRuntime();
  const sid = rt.addPod(rt.syntheticPod(1));
  const [c] = rt.listContainers({ pod_sandbox_id: sid });
  const events = withEvents(rt);
  rt.exitContainer(c!.id, 137, 'OOMKilled');
  const st = rt.containerStatus(c!.id);
  assert.equal(st.state, 'CONTAINER_EXITED');
  assert.equal(st.exitCode, 137);
  assert.equal(st.reason, 'OOMKilled');
  assert.ok(st.finishedAt >= st.startedAt && st.startedAt > 0n);
  rt.stopContainer(c!.id, 30); // not running: no-op
  rt.removeContainer(c!.id);
  rt.removeContainer(c!.id);
  assert.deepEqual(types(events), [`CONTAINER_STOPPED_EVENT:${c!.id.slice(0, 6)}`, `CONTAINER_DELETED_EVENT:${c!.id.slice(0, 6)}`]);
  assert.throws(() => rt.containerStatus(c!.id), (e: unknown) => e instanceof SimRuntimeError && e.code === 'NOT_FOUND');
  assert.throws(() => rt.startContainer('nope'), (e: unknown) => e instanceof SimRuntimeError && e.code === 'NOT_FOUND');
});

test('containerd name reservation: the same name and attempt in a pod is refused until removed', () => {
  const rt = new SimRuntime();
  const pod = rt.syntheticPod(1);
  const sid = rt.addPod(pod);
  const [c] = rt.listContainers({ pod_sandbox_id: sid });
  assert.throws(() => rt.createContainer(sid, c!.config), /failed to reserve container name/);
  rt.removeContainer(c!.id);
  const again = rt.createContainer(sid, c!.config);
  assert.equal(rt.containerStatus(again).state, 'CONTAINER_CREATED');
});

test('restartContainer: next attempt created and started, restartCount annotation, one exited attempt kept', () => {
  const rt = new SimRuntime();
  const sid = rt.addPod(rt.syntheticPod(1));
  const [first] = rt.listContainers({ pod_sandbox_id: sid });
  rt.exitContainer(first!.id, 1, 'Error');
  const second = rt.restartContainer(first!.id);
  assert.equal(rt.containerStatus(second).metadata.attempt, 1);
  assert.equal(rt.containerStatus(second).annotations[labels.CONTAINER_RESTART_COUNT_LABEL], '1');
  assert.equal(rt.containerStatus(second).state, 'CONTAINER_RUNNING');
  rt.exitContainer(second, 1, 'Error');
  const third = rt.restartContainer(second);
  const ids = rt.listContainers({ pod_sandbox_id: sid }).map((c) => c.id).sort();
  assert.deepEqual(ids, [second, third].sort(), 'the oldest exited attempt was removed');
  assert.throws(() => rt.restartContainer(third), /has not exited/);
});

test('stopping and removing a sandbox takes its containers with it', () => {
  const rt = new SimRuntime();
  const pod = rt.syntheticPod(2);
  const sid = rt.addPod(pod);
  const events = withEvents(rt);
  rt.removePod(pod.metadata.uid!);
  assert.equal(rt.sandboxes.size, 0);
  assert.equal(rt.containers.size, 0);
  const kinds = events.map((e) => e.container_event_type);
  assert.deepEqual(kinds.filter((k) => k === 'CONTAINER_STOPPED_EVENT').length, 3);
  assert.deepEqual(kinds.filter((k) => k === 'CONTAINER_DELETED_EVENT').length, 3);
  assert.equal(events.at(-1)!.container_id, sid, 'the sandbox goes last');
  rt.removePodSandbox(sid); // idempotent
  assert.throws(() => rt.stopPodSandbox(sid), /not found/);
});

test('list filters: label selector by pod uid, state, id prefix', () => {
  const rt = new SimRuntime();
  const a = rt.syntheticPod(2);
  const b = rt.syntheticPod(1);
  rt.addPod(a);
  rt.addPod(b);
  const sel = { [labels.KUBERNETES_POD_UID_LABEL]: a.metadata.uid! };
  assert.equal(rt.listContainers({ label_selector: sel }).length, 2);
  assert.equal(rt.listPodSandbox({ label_selector: sel }).length, 1);
  const [one] = rt.listContainers({ label_selector: sel });
  rt.exitContainer(one!.id, 0, 'Completed');
  assert.equal(rt.listContainers({ state: { state: 'CONTAINER_EXITED' } }).length, 1);
  assert.equal(rt.listContainers({ id: one!.id.slice(0, 12) })[0]?.id, one!.id);
  assert.equal(rt.listPodSandbox({ state: { state: 'SANDBOX_NOTREADY' } }).length, 0);
});

test('populate fills to the requested size; the churn generator produces events at its rate and keeps the population', () => {
  const rt = new SimRuntime({ seed: 7 });
  rt.populate({ containers: 300, containersPerPod: 3, exitedShare: 0.1 });
  assert.equal(rt.containers.size, 300);
  const churn = new ChurnGenerator(rt, { eventsPerSecond: 200 });
  let now = 0;
  churn.tick(now);
  for (let i = 0; i < 50; i++) churn.tick((now += 20)); // one second
  assert.ok(churn.stats.events >= 190 && churn.stats.events <= 210, `events ${churn.stats.events}`);
  assert.ok(churn.stats.exits > 0 && churn.stats.restarts > 0);
  const n = rt.containers.size;
  assert.ok(n > 270 && n < 360, `population ${n}`);
  churn.setRate(0);
  const before = churn.stats.events;
  churn.tick((now += 1000));
  assert.equal(churn.stats.events, before);
});

test('the synthetic cgroup tree: a started container gets every file the readers open, an exited one loses its directory', async () => {
  for (const version of [2, 1] as const) {
    const root = await mkdtemp(join(tmpdir(), 'kts-sim-cg-'));
    try {
      const tree = new SimCgroupTree({ root, version });
      const rt = new SimRuntime({}, { onContainerStarted: (c, sb) => tree.add(sb.metadata.uid, c.id), onContainerGone: (c) => tree.remove(c.id) });
      const pod = rt.syntheticPod(2);
      rt.addPod(pod);
      await tree.flush();
      const ids = [...rt.containers.keys()];
      const refs = ids.map((id) => tree.refFor(tree.paths.get(id)!));
      const batch = await new FsCgroupReader().readCgroups(refs);
      for (let i = 0; i < refs.length; i++) {
        assert.ok(batch.ok(i), `v${version} cgroup ${i} readable`);
        assert.ok(batch.has(i, version === 2 ? 'memory.current' : 'memory.usage_in_bytes'));
        assert.ok(batch.has(i, 'pids.current'));
      }
      assert.match(tree.paths.get(ids[0]!)!, new RegExp(`^/kubepods/burstable/pod${pod.metadata.uid}/${ids[0]}$`));
      rt.exitContainer(ids[0]!, 1, 'Error');
      await tree.flush();
      const hierarchy = version === 2 ? 'unified' : 'memory';
      const dirOf = (id: string): string => join(root, hierarchy, SimCgroupTree.containerPath(pod.metadata.uid!, id));
      await assert.rejects(stat(dirOf(ids[0]!)), /ENOENT/);
      await stat(dirOf(ids[1]!));
      assert.equal(tree.paths.has(ids[0]!), false);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }
});

test('a churn tick catching up works for at most its slice and leaves the rest of the budget to later ticks', () => {
  const rt = new SimRuntime({ seed: 3 });
  rt.populate({ containers: 300, containersPerPod: 3 });
  // each step "takes" 1 ms of work time
  let work = 0;
  const churn = new ChurnGenerator(rt, { eventsPerSecond: 500, podReplaceShare: 0, workNow: () => (work += 1) });
  churn.tick(0);
  // half a second behind: 250 events owed, but a 3 ms slice does a few steps and returns
  churn.tick(500, 3);
  assert.ok(churn.stats.events > 0 && churn.stats.events <= 6, `one slice did ${churn.stats.events} events`);
  // later ticks work the rest off (without a slice, one tick does it all)
  for (let t = 502; churn.stats.events < 240 && t < 2000; t += 2) churn.tick(t, 3);
  assert.ok(churn.stats.events >= 240, `events ${churn.stats.events}`);
  const unsliced = new ChurnGenerator(rt, { eventsPerSecond: 500, podReplaceShare: 0 });
  unsliced.tick(0);
  unsliced.tick(500);
  assert.ok(unsliced.stats.events >= 249, `unsliced ${unsliced.stats.events}`);
});
