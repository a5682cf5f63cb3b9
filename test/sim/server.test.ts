import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CriClient, CriError } from '../../src/runtime/cri-client.js';
import { WritableLayerReader, decodeWritableLayers } from '../../src/stats/writable-layers.js';
import { WireFormatError } from '../../src/pleg/wire.js';
import { LeanGCLister, decodeGCContainers, decodeGCSandboxes } from '../../src/gc/lean-lists.js';
import { criContainerGCRuntime } from '../../src/gc/node-gc.js';
import { writableLayerOf } from '../../src/stats/fs-usage.js';
import { SIM_RUNTIME_NAME, SimRuntime } from '../../src/sim/sim-runtime.js';
import { startSimRuntimeServer, type SimRuntimeServer } from '../../src/sim/server.js';
import { parseSimRuntimeFlags, SimRuntimeFlagError, startSimRuntime } from '../../src/sim/cli.js';
import { ChurnGenerator } from '../../src/sim/churn.js';
import { LeanCriLister } from '../../src/pleg/relist-source.js';
import { RecordStore } from '../../src/pleg/records.js';
import { GenericPLEG } from '../../src/pleg/generic.js';
import { PodCache } from '../../src/pleg/cache.js';
import type { PodLifecycleEvent } from '../../src/pleg/types.js';
import type { ContainerEvent } from '../../src/pleg/wire-event.js';
import type { ContainerEventResponse } from '../../src/runtime/cri-types.js';
import * as labels from '../../src/runtime/labels.js';
import { realClock } from '../../src/util/clock.js';
import { createLogger } from '../../src/util/log.js';

async function withServer(fn: (s: SimRuntimeServer, cri: CriClient, dir: string) => Promise<void>, populate = 30): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-sim-'));
  const runtime = new SimRuntime({ seed: 11 });
  runtime.populate({ containers: populate });
  const server = await startSimRuntimeServer({ runtime, socketPath: join(dir, 'sim.sock') });
  const cri = new CriClient({ runtimeEndpoint: server.endpoint, timeoutMs: 10_000 });
  try {
    await fn(server, cri, dir);
  } finally {
    cri.close();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
}

test('the simulated runtime names itself as a simulation and reports ready', async () => {
  await withServer(async (_s, cri) => {
    const v = await cri.version();
    assert.equal(v.runtime_name, SIM_RUNTIME_NAME);
    assert.match(v.runtime_version, /simulated/);
    const st = await cri.status();
    assert.deepEqual(st.status?.conditions.map((c) => [c.type, c.status]), [['RuntimeReady', true], ['NetworkReady', true]]);
  });
});

test('list and status over gRPC decode to what the model holds; filters apply; unknown ids are NotFound', async () => {
  await withServer(async (s, cri) => {
    const cs = await cri.listContainers();
    assert.equal(cs.length, 30);
    const model = s.runtime.containers.get(cs[0]!.id)!;
    assert.deepEqual(cs[0]!.labels, model.labels);
    assert.deepEqual(cs[0]!.annotations, model.annotations);
    assert.equal(cs[0]!.created_at, model.createdAt.toString());
    assert.equal(s.lastListBytes.containers > 0, true);
    const uid = cs[0]!.labels[labels.KUBERNETES_POD_UID_LABEL]!;
    const mine = await cri.listContainers({ label_selector: { [labels.KUBERNETES_POD_UID_LABEL]: uid } });
    assert.equal(mine.length, 3);
    const sbs = await cri.listPodSandbox({ label_selector: { [labels.KUBERNETES_POD_UID_LABEL]: uid } });
    assert.equal(sbs.length, 1);
    const sst = await cri.podSandboxStatus(sbs[0]!.id);
    assert.equal(sst.status?.state, 'SANDBOX_READY');
    assert.match(sst.status?.network?.ip ?? '', /^10\./);
    const cst = await cri.containerStatus(cs[0]!.id);
    assert.equal(cst.status?.state, 'CONTAINER_RUNNING');
    assert.notEqual(cst.status?.started_at, '0');
    await assert.rejects(cri.containerStatus('0'.repeat(64)), (e: unknown) => e instanceof CriError && e.notFound);
    assert.equal(s.calls.get('ListContainers'), 2);
  });
});

test('the kubelet-side calls drive the model: run, create, start, stop, remove', async () => {
  await withServer(async (s, cri) => {
    const sb = await cri.runPodSandbox({
      metadata: { name: 'web-0', namespace: 'default', uid: 'u-web-0' },
      labels: { [labels.KUBERNETES_POD_UID_LABEL]: 'u-web-0' },
    });
    const created = await cri.createContainer(
      sb.pod_sandbox_id,
      { metadata: { name: 'app' }, image: { image: 'busybox' }, labels: { [labels.KUBERNETES_POD_UID_LABEL]: 'u-web-0' } },
      { metadata: { name: 'web-0', namespace: 'default', uid: 'u-web-0' } },
    );
    await cri.startContainer(created.container_id);
    assert.equal(s.runtime.containerStatus(created.container_id).state, 'CONTAINER_RUNNING');
    await cri.stopContainer(created.container_id, 10);
    assert.equal((await cri.containerStatus(created.container_id)).status?.exit_code, 0);
    await cri.removeContainer(created.container_id);
    await cri.removePodSandbox(sb.pod_sandbox_id);
    assert.equal(s.runtime.sandboxes.has(sb.pod_sandbox_id), false);
  });
});

test('the server encodes every status before it serves: the first event about a pod does not pay for it', async () => {
  await withServer(async (s) => {
    for (const sb of s.runtime.sandboxes.values()) assert.ok(sb.statusEncoded, `sandbox ${sb.id}`);
    for (const c of s.runtime.containers.values()) assert.ok(c.statusEncoded, `container ${c.id}`);
  });
});

test('each event sent is timed from its timestamp to its bytes written (the simulator\'s share of delivery)', async () => {
  await withServer(async (s) => {
    const lister = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000 });
    const got: ContainerEvent[] = [];
    const h = lister.openContainerEvents({ onReady: () => undefined, onEvent: (e) => got.push(e), onEnd: () => undefined });
    try {
      while (s.eventStreams() === 0) await new Promise((r) => setTimeout(r, 5));
      const [c] = s.runtime.listContainers({ state: { state: 'CONTAINER_RUNNING' } });
      s.runtime.exitContainer(c!.id, 1, 'Error');
      while (got.length === 0) await new Promise((r) => setTimeout(r, 5));
      const lags = s.takeEventSendLags();
      assert.equal(lags.length, 1);
      assert.ok(lags[0]! > -0.01 && lags[0]! < 10_000, `lag ${lags[0]}`);
      assert.deepEqual(s.takeEventSendLags(), []);
    } finally {
      h.cancel();
      lister.close();
    }
  });
});

test('GetContainerEvents streams the model\'s events; dropping the streams ends them with UNAVAILABLE', async () => {
  await withServer(async (s, cri) => {
    // the CRI client decodes with api.proto, which has the metadata shape
    s.eventShape = 'metadata';
    const stream = cri.getContainerEvents();
    const got: ContainerEventResponse[] = [];
    const reading = (async () => {
      for await (const e of stream) got.push(e);
    })();
    while (s.eventStreams() === 0) await new Promise((r) => setTimeout(r, 5));
    const [c] = s.runtime.listContainers({ state: { state: 'CONTAINER_RUNNING' } });
    s.runtime.exitContainer(c!.id, 1, 'Error');
    while (got.length === 0) await new Promise((r) => setTimeout(r, 5));
    assert.equal(got[0]!.container_id, c!.id);
    assert.equal(got[0]!.container_event_type, 'CONTAINER_STOPPED_EVENT');
    assert.equal(got[0]!.pod_sandbox_metadata?.uid, s.runtime.sandboxes.get(c!.sandboxId)!.metadata.uid);
    s.dropEventStreams();
    await assert.rejects(reading, (e: unknown) => e instanceof CriError && e.unavailable);
  });
});

test('the lean lister reads the simulated runtime: records for every item, none rebuilt on the next list', async () => {
  await withServer(async (s, _cri) => {
    const lister = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000 });
    try {
      const store = new RecordStore();
      const first = await lister.list(store, 1);
      assert.equal(first.items, 30 + 10);
      assert.equal(first.created, 40);
      const second = await lister.list(store, 2);
      assert.equal(second.created, 0);
      assert.equal(store.all.every((r) => r.listGen === 2), true);
      const any = store.all.find((r) => !r.sandbox)!;
      const model = s.runtime.containers.get(any.id)!;
      assert.equal(any.podUid, model.labels[labels.KUBERNETES_POD_UID_LABEL]);
      assert.equal(any.name, model.metadata.name);
    } finally {
      lister.close();
    }
  });
});

test('the lean event stream: ready on headers, decoded events, an error end when the runtime drops it', async () => {
  await withServer(async (s) => {
    const lister = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000 });
    const got: ContainerEvent[] = [];
    let ready = false;
    let ended: Error | undefined | 'open' = 'open';
    const h = lister.openContainerEvents({ onReady: () => (ready = true), onEvent: (e) => got.push(e), onEnd: (err) => (ended = err) });
    try {
      while (!ready) await new Promise((r) => setTimeout(r, 5));
      const [c] = s.runtime.listContainers({ state: { state: 'CONTAINER_RUNNING' } });
      s.runtime.exitContainer(c!.id, 2, 'Error');
      while (!got.length) await new Promise((r) => setTimeout(r, 5));
      assert.equal(got[0]!.containerId, c!.id);
      assert.equal(got[0]!.type, 'CONTAINER_STOPPED_EVENT');
      assert.ok(Math.abs(got[0]!.createdAt - Date.now()) < 5_000);
      // the default (newer CRI) shape carries the sandbox status and every container's status
      const sb = s.runtime.sandboxes.get(c!.sandboxId)!;
      assert.equal(got[0]!.sandboxId, sb.id);
      assert.equal(got[0]!.pod?.uid, sb.metadata.uid);
      assert.equal(got[0]!.sandboxStatus?.state, 'ready');
      assert.equal(got[0]!.sandboxStatus?.decode().id, sb.id);
      assert.deepEqual(got[0]!.containerStatuses?.map((x) => x.id).sort(), [...sb.containers].sort());
      const mine = got[0]!.containerStatuses!.find((x) => x.id === c!.id)!;
      assert.equal(mine.state, 'exited');
      assert.equal(mine.decode().exitCode, 2);
      assert.equal(mine.decode().name, c!.metadata.name);
      s.dropEventStreams();
      while (ended === 'open') await new Promise((r) => setTimeout(r, 5));
      assert.match(String((ended as Error | undefined)?.message), /UNAVAILABLE/);
    } finally {
      h.cancel();
      lister.close();
    }
  });
});

test('generic PLEG over the simulated runtime under churn: every change delivered, zero status calls when still', async () => {
  await withServer(async (s) => {
    const lister = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000 });
    const cri = new CriClient({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000 });
    const events: PodLifecycleEvent[] = [];
    const cache = new PodCache();
    const pleg = new GenericPLEG({
      lister,
      runtime: {
        // a minimal status reader over the CRI: containers by pod uid
        getPodStatus: async (uid, name, namespace) => {
          const cs = await cri.listContainers({ label_selector: { [labels.KUBERNETES_POD_UID_LABEL]: uid } });
          return {
            uid, name, namespace, ips: [], sandboxStatuses: [], timestamp: Date.now(),
            containerStatuses: cs.map((c) => ({ id: c.id, state: c.state === 'CONTAINER_RUNNING' ? 'running' : 'exited' }) as never),
          };
        },
      },
      cache,
      clock: realClock,
      log: createLogger(),
      relistPeriodMs: 1000,
      relistThresholdMs: 180_000,
      emit: (e) => (events.push(e), true),
    });
    try {
      await pleg.relist();
      assert.equal(pleg.lastRelistStats?.statusCalls, 10);
      events.length = 0;
      await pleg.relist();
      assert.equal(pleg.lastRelistStats?.statusCalls, 0);
      assert.equal(events.length, 0);

      const churn = new ChurnGenerator(s.runtime, { eventsPerSecond: 1000, podReplaceShare: 0 });
      for (let i = 0; i < 5; i++) churn.step();
      const running = new Set(s.runtime.listContainers({ state: { state: 'CONTAINER_RUNNING' } }).map((c) => c.id));
      await pleg.relist();
      const started = events.filter((e) => e.type === 'ContainerStarted').map((e) => e.data!);
      const died = events.filter((e) => e.type === 'ContainerDied').map((e) => e.data!);
      for (const id of started) assert.ok(running.has(id));
      for (const id of died) assert.ok(!running.has(id));
      assert.equal(died.length, churn.stats.exits);
      assert.equal(started.length, churn.stats.restarts);
      assert.ok((pleg.lastRelistStats?.statusCalls ?? 0) <= 5);
      for (const [uid, p] of pleg.knownPods()) {
        for (const c of p.containers) assert.equal(c.state, s.runtime.containers.get(c.id)?.state, `${uid}/${c.id}`);
      }
    } finally {
      lister.close();
      cri.close();
    }
  });
});

test('sim-runtime flags: defaults, forms, and clear errors', () => {
  const f = parseSimRuntimeFlags(['--socket=/tmp/x.sock', '--containers', '100', '--churn-percent', '1', '--cgroup-version', '1']);
  assert.ok(f !== 'help');
  assert.equal(f.socket, '/tmp/x.sock');
  assert.equal(f.containers, 100);
  assert.equal(f.churnPercent, 1);
  assert.equal(f.cgroupVersion, 1);
  assert.equal(f.containersPerPod, 3);
  assert.equal(parseSimRuntimeFlags(['-h']), 'help');
  assert.throws(() => parseSimRuntimeFlags(['--containers', '-1']), SimRuntimeFlagError);
  assert.throws(() => parseSimRuntimeFlags(['--socket', 'relative.sock']), /absolute path/);
  assert.throws(() => parseSimRuntimeFlags(['--bogus']), /unknown flag --bogus/);
  assert.throws(() => parseSimRuntimeFlags(['--containers']), /needs a value/);
});

test('the standalone entry serves, answers IPC control messages and stops cleanly', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-sim-main-'));
  const main = fileURLToPath(new URL('../../src/sim/main.js', import.meta.url));
  const child = fork(main, ['--socket', join(dir, 'sim.sock'), '--containers', '12', '--containers-per-pod', '4'], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  try {
    const next = (cmd: string): Promise<Record<string, unknown>> =>
      new Promise((resolve, reject) => {
        const on = (m: Record<string, unknown>): void => {
          if (m.cmd !== cmd) return;
          child.off('message', on);
          resolve(m);
        };
        child.on('message', on);
        child.once('exit', (code) => reject(new Error(`sim exited ${code}`)));
      });
    const ready = await next('ready');
    assert.equal(ready.endpoint, `unix://${join(dir, 'sim.sock')}`);
    assert.deepEqual(ready.counts, { sandboxes: 3, containers: 12, running: 12, exited: 0 });
    const cri = new CriClient({ runtimeEndpoint: ready.endpoint as string, timeoutMs: 10_000 });
    assert.equal((await cri.listContainers()).length, 12);
    cri.close();
    child.send({ cmd: 'stats' });
    const stats = await next('stats');
    assert.equal((stats.calls as Record<string, number>).ListContainers, 1);
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    child.send({ cmd: 'stop' });
    assert.equal(await exited, 0);
  } finally {
    child.kill();
    await rm(dir, { recursive: true, force: true });
  }
});

test('PodSandboxStatus carries the containers\' statuses and a timestamp with the status event shape, not with metadata', async () => {
  await withServer(async (s, cri) => {
    const lister = new LeanCriLister({ runtimeEndpoint: s.endpoint, timeoutMs: 10_000 });
    try {
      const sb = [...s.runtime.sandboxes.values()][0]!;
      const got = await lister.sandboxStatusWithContainers(sb.id);
      assert.equal(got?.sandbox.id, sb.id);
      assert.deepEqual(got?.containers?.map((c) => c.id).sort(), [...sb.containers].sort());
      const one = await lister.containerStatus([...sb.containers][0]!);
      assert.deepEqual(got?.containers?.find((c) => c.id === one?.id), one, 'the same status ContainerStatus gives');
      // The protobufjs client still reads the sandbox (unknown fields skipped).
      assert.equal((await cri.podSandboxStatus(sb.id)).status?.id, sb.id);
      s.eventShape = 'metadata';
      const old = await lister.sandboxStatusWithContainers(sb.id);
      assert.equal(old?.sandbox.id, sb.id);
      assert.equal(old?.containers, undefined, 'a containerd 1.6-like runtime sends the sandbox alone');
      assert.equal(await lister.sandboxStatusWithContainers('0'.repeat(64)), null);
    } finally {
      lister.close();
    }
  });
});

test('with --container-log-files a started container has its log file, as on a real runtime', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-sim-'));
  const f = parseSimRuntimeFlags([`--socket=${join(dir, 'sim.sock')}`, '--container-log-files']);
  assert.ok(f !== 'help');
  const h = await startSimRuntime(f);
  try {
    const rt = h.server.runtime;
    const logDir = join(dir, 'pod-logs');
    // the kubelet makes the container's log directory; the runtime opens the file at start
    await mkdir(join(logDir, 'app'), { recursive: true });
    const sid = rt.runPodSandbox({ metadata: { name: 'web-0', namespace: 'default', uid: 'u-web-0' }, log_directory: logDir });
    const cid = rt.createContainer(sid, { metadata: { name: 'app' }, image: { image: 'busybox' }, log_path: 'app/0.log' });
    await assert.rejects(stat(join(logDir, 'app', '0.log')), /ENOENT/);
    rt.startContainer(cid);
    await waitUntil(() => stat(join(logDir, 'app', '0.log')).then(() => true, () => false));
  } finally {
    await h.stop();
    await rm(dir, { recursive: true, force: true });
  }
});

async function waitUntil(fn: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await fn()) return;
    await new Promise((r) => setImmediate(r));
  }
  assert.fail('condition not reached');
}

test('the writable layers read lean (wire decode over h2c) match the full ListContainerStats answer', async () => {
  await withServer(async (_s, cri) => {
    const full = await cri.listContainerStats(null);
    const reader = new WritableLayerReader({ runtimeEndpoint: cri.runtimeEndpoint, timeoutMs: cri.timeoutMs, maxMessageBytes: cri.maxMessageBytes });
    const lean = await reader.read();
    assert.equal(full.length, 30);
    assert.equal(lean.size, full.length);
    for (const s of full) {
      const w = s.writable_layer!;
      const got = lean.get(s.attributes!.id)!;
      // the simulator stamps each answer with its own time
      assert.ok(Math.abs(got.timeMs! - Number(BigInt(w.timestamp) / 1_000_000n)) < 60_000, 'timestamp as ms');
      assert.deepEqual({ ...got, timeMs: 0 }, { usedBytes: Number(w.used_bytes!.value), inodesUsed: Number(w.inodes_used!.value), timeMs: 0 });
      assert.deepEqual({ ...got, timeMs: 0 }, { ...writableLayerOf(s), timeMs: 0 }, 'the same figures as the full answer gives the provider');
    }
    reader.close();
    await assert.rejects(reader.read(), (err: unknown) => err instanceof CriError && /ListContainerStats/.test(String(err)));
  });
});

test('the lean writable-layer decoder refuses a malformed answer by name and skips fields it does not know', () => {
  // stats { attributes { id "c1" } writable_layer { timestamp 2e15 ns, used_bytes { 4096 }, fs_id { "/x" } } } + unknown field 9
  const msg = Buffer.from([
    0x0a, 0x1c,
    0x0a, 0x04, 0x0a, 0x02, 0x63, 0x31,
    0x22, 0x14, 0x08, 0x80, 0x80, 0xb4, 0xcc, 0xd4, 0xdf, 0xc6, 0x03, 0x12, 0x04, 0x0a, 0x02, 0x2f, 0x78, 0x1a, 0x03, 0x08, 0x80, 0x20,
    0x48, 0x01,
  ]);
  assert.deepEqual([...decodeWritableLayers(msg)], [['c1', { usedBytes: 4096, timeMs: 2_000_000_000 }]]);
  assert.throws(() => decodeWritableLayers(msg.subarray(0, 10)), (err: unknown) => err instanceof WireFormatError && /past the end/.test((err as Error).message));
});

test('GC lists read lean (wire decode over h2c) give exactly what the protobufjs path gives', async () => {
  await withServer(async (_s, cri) => {
    const full = criContainerGCRuntime(cri, '/nonexistent');
    const lister = new LeanGCLister({ runtimeEndpoint: cri.runtimeEndpoint, timeoutMs: cri.timeoutMs, maxMessageBytes: cri.maxMessageBytes });
    const lean = criContainerGCRuntime(cri, '/nonexistent', lister);
    // an exited container and a stopped sandbox, for both states
    const sandboxes = await cri.listPodSandbox();
    await cri.stopPodSandbox(sandboxes[0]!.id);
    const [fc, lc, fs, ls] = await Promise.all([full.listContainers(), lean.listContainers(), full.listSandboxes(), lean.listSandboxes()]);
    assert.equal(fc.length, 30);
    assert.ok(fs.length > 0);
    assert.ok(fc.some((c) => c.running) && fc.some((c) => !c.running), 'both states listed');
    assert.ok(fs.some((x) => x.ready) && fs.some((x) => !x.ready), 'both sandbox states listed');
    assert.deepEqual(lc, fc);
    assert.deepEqual(ls, fs);
    lister.close();
    await assert.rejects(lister.listContainers(), (err: unknown) => err instanceof CriError && /ListContainers/.test(String(err)));
  });
});

test('the lean GC decoders skip unlabelled items and unknown fields, and refuse a malformed answer', () => {
  const enc = (field: number, body: number[]): number[] => [(field << 3) | 2, body.length, ...body];
  const s = (t: string): number[] => [...Buffer.from(t)];
  const label = (field: number, k: string, v: string): number[] => enc(field, [...enc(1, s(k)), ...enc(2, s(v))]);
  // a labelled container named by its metadata, running; one without a pod uid label; an unknown field 15
  const c1 = [...enc(1, s('c1')), ...enc(2, s('sb1')), ...enc(3, [...enc(1, s('app')), 0x10, 0x02]), 0x30, 0x01, 0x38, 0x80, 0x84, 0xaf, 0x5f, ...label(8, 'io.kubernetes.pod.uid', 'u1'), 0x78, 0x05];
  const c2 = [...enc(1, s('c2')), ...enc(3, enc(1, s('x')))];
  const list = Buffer.from([...enc(1, c1), ...enc(1, c2)]);
  assert.deepEqual(decodeGCContainers(list), [{ id: 'c1', podUID: 'u1', name: 'app', running: true, createdAt: 200, sandboxID: 'sb1' }]);
  // a sandbox known by its metadata only, not ready
  const sb = [...enc(1, s('sb1')), ...enc(2, [...enc(1, s('web')), ...enc(2, s('u1')), ...enc(3, s('ns'))]), 0x18, 0x01];
  assert.deepEqual(decodeGCSandboxes(Buffer.from(enc(1, sb))), [{ id: 'sb1', podUID: 'u1', podName: 'web', podNamespace: 'ns', ready: false, createdAt: 0 }]);
  assert.throws(() => decodeGCContainers(list.subarray(0, 12)), (err: unknown) => err instanceof WireFormatError);
});
