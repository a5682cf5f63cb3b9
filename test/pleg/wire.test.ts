import { test } from 'node:test';
import assert from 'node:assert/strict';
import { criDefinitions } from '../../src/runtime/cri-client.js';
import { RecordStore } from '../../src/pleg/records.js';
import type { ContainerStatusResponse, PodSandboxStatusResponse } from '../../src/runtime/cri-types.js';
import { WireFormatError, decodeContainerList, decodeSandboxList, emptyListStats, newListMemo } from '../../src/pleg/wire.js';
import { decodeContainerEvent } from '../../src/pleg/wire-event.js';

const id = (n: number): string => n.toString(16).padStart(64, 'a');

function container(n: number, state: string, extra: Record<string, string> = {}): object {
  return {
    id: id(n),
    pod_sandbox_id: id(1000 + n),
    metadata: { name: `app-${n}`, attempt: n % 3 },
    image: { image: 'ghcr.io/example/app:v1', annotations: {} },
    image_ref: `sha256:${id(n)}`,
    state,
    created_at: '1700000000123456789',
    labels: {
      'io.kubernetes.pod.name': `pod-${n}`,
      'io.kubernetes.pod.namespace': 'ns-1',
      'io.kubernetes.pod.uid': `uid-${n}`,
      'io.kubernetes.container.name': `name-${n}`,
      ...extra,
    },
    annotations: { 'io.kubernetes.container.hash': 'abc', 'io.kubernetes.container.restartCount': '0' },
  };
}

async function encodeContainers(items: object[]): Promise<Buffer> {
  const defs = await criDefinitions();
  return defs.runtime.ListContainers!.responseSerialize({ containers: items });
}

async function encodeSandboxes(items: object[]): Promise<Buffer> {
  const defs = await criDefinitions();
  return defs.runtime.ListPodSandbox!.responseSerialize({ items });
}

test('decodeContainerList: creates records with the pod labels, then only marks them (no new records)', async () => {
  const store = new RecordStore();
  const buf = await encodeContainers([container(1, 'CONTAINER_RUNNING'), container(2, 'CONTAINER_EXITED'), container(3, 'CONTAINER_CREATED')]);
  const s1 = emptyListStats();
  decodeContainerList(buf, store, 1, s1);
  assert.equal(s1.items, 3);
  assert.equal(s1.created, 3);
  assert.equal(s1.bytes, buf.length);
  const r1 = store.get(id(1))!;
  assert.equal(r1.podUid, 'uid-1');
  assert.equal(r1.podName, 'pod-1');
  assert.equal(r1.podNamespace, 'ns-1');
  assert.equal(r1.name, 'name-1');
  assert.equal(r1.attempt, 1);
  assert.equal(r1.createdAt, 1700000000123);
  assert.equal(r1.sandbox, false);
  assert.equal(r1.listGen, 1);
  assert.equal(r1.listState, 'CONTAINER_RUNNING');
  assert.equal(store.get(id(2))!.listState, 'CONTAINER_EXITED');
  assert.equal(store.get(id(3))!.listState, 'CONTAINER_CREATED');

  const buf2 = await encodeContainers([container(1, 'CONTAINER_EXITED'), container(2, 'CONTAINER_EXITED')]);
  const s2 = emptyListStats();
  decodeContainerList(buf2, store, 2, s2);
  assert.equal(s2.created, 0);
  assert.equal(store.get(id(1))!.listGen, 2);
  assert.equal(store.get(id(1))!.listState, 'CONTAINER_EXITED');
  assert.equal(store.get(id(3))!.listGen, 1, 'not listed this time');
});

test('decodeContainerList: a container without the pod uid label is foreign and gets no record', async () => {
  const store = new RecordStore();
  const c = container(9, 'CONTAINER_RUNNING') as { labels: Record<string, string> };
  delete c.labels['io.kubernetes.pod.uid'];
  const stats = emptyListStats();
  decodeContainerList(await encodeContainers([c]), store, 1, stats);
  assert.equal(stats.foreign, 1);
  assert.equal(store.size, 0);
});

test('decodeContainerList/decodeSandboxList: an invalid pod identity in the labels is not ours, and says why', async () => {
  const store = new RecordStore();
  const bad = [
    container(10, 'CONTAINER_RUNNING', { 'io.kubernetes.pod.uid': '../../victim' }),
    container(11, 'CONTAINER_RUNNING', { 'io.kubernetes.pod.namespace': '..' }),
    container(12, 'CONTAINER_RUNNING', { 'io.kubernetes.pod.name': 'a/b' }),
    container(13, 'CONTAINER_RUNNING', { 'io.kubernetes.container.name': '../x' }),
  ];
  const stats = emptyListStats();
  decodeContainerList(await encodeContainers([...bad, container(14, 'CONTAINER_RUNNING')]), store, 1, stats);
  assert.equal(stats.foreign, 4);
  assert.equal(stats.created, 1);
  assert.equal(store.size, 1);
  assert.equal(stats.invalid.length, 4);
  assert.match(stats.invalid[0]!, /io\.kubernetes\.pod\.uid.*\.\.\/\.\.\/victim/);
  assert.match(stats.invalid[3]!, /io\.kubernetes\.container\.name/);
  const sb = {
    id: id(2000),
    metadata: { name: 'p', uid: '../../../..', namespace: 'default', attempt: 0 },
    state: 'SANDBOX_READY',
    created_at: '1700000000123456789',
    labels: {},
    annotations: {},
  };
  const s2 = emptyListStats();
  decodeSandboxList(await encodeSandboxes([sb]), store, 1, s2);
  assert.equal(s2.foreign, 1);
  assert.equal(store.get(id(2000)), undefined);
  assert.match(s2.invalid[0]!, /^sandbox .*io\.kubernetes\.pod\.uid/);
});

test('decodeSandboxList: the pod comes from the sandbox metadata; states decode', async () => {
  const store = new RecordStore();
  const sb = (n: number, state: string): object => ({
    id: id(500 + n),
    metadata: { name: `meta-pod-${n}`, uid: `meta-uid-${n}`, namespace: 'kube-system', attempt: 2 },
    state,
    created_at: '1700000000999000000',
    labels: { 'io.kubernetes.pod.uid': 'label-uid', app: 'x' },
    annotations: { 'kubernetes.io/config.source': 'file' },
    runtime_handler: '',
  });
  const stats = emptyListStats();
  decodeSandboxList(await encodeSandboxes([sb(1, 'SANDBOX_READY'), sb(2, 'SANDBOX_NOTREADY')]), store, 7, stats);
  assert.equal(stats.created, 2);
  const r = store.get(id(501))!;
  assert.equal(r.sandbox, true);
  assert.equal(r.podUid, 'meta-uid-1');
  assert.equal(r.podName, 'meta-pod-1');
  assert.equal(r.podNamespace, 'kube-system');
  assert.equal(r.attempt, 2);
  assert.equal(r.createdAt, 1700000000999);
  assert.equal(r.listState, 'SANDBOX_READY');
  assert.equal(store.get(id(502))!.listState, 'SANDBOX_NOTREADY');
});

test('a truncated message is a WireFormatError, not a silent partial list', async () => {
  const buf = await encodeContainers([container(1, 'CONTAINER_RUNNING')]);
  assert.throws(() => decodeContainerList(buf.subarray(0, buf.length - 10), new RecordStore(), 1, emptyListStats()), WireFormatError);
});

test('decodeContainerEvent reads containerd 1.6 events (sandbox metadata in field 4)', async () => {
  const defs = await criDefinitions();
  const buf = defs.runtime.GetContainerEvents!.responseSerialize({
    container_id: id(7),
    container_event_type: 'CONTAINER_STOPPED_EVENT',
    created_at: '1700000000123456789',
    pod_sandbox_metadata: { name: 'web-0', uid: 'u-7', namespace: 'default', attempt: 1 },
  });
  const e = decodeContainerEvent(buf);
  assert.equal(e.containerId, id(7));
  assert.equal(e.type, 'CONTAINER_STOPPED_EVENT');
  assert.equal(Math.round(e.createdAt * 1000), 1700000000123457);
  assert.deepEqual(e.pod, { name: 'web-0', uid: 'u-7', namespace: 'default', attempt: 1 });
  assert.equal(e.sandboxId, undefined);
});

// Hand-encoding for the newer CRI shape our api.proto does not carry.
function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}
function lenField(field: number, bytes: number[] | Buffer): number[] {
  return [...varint((field << 3) | 2), ...varint(bytes.length), ...bytes];
}
function strField(field: number, s: string): number[] {
  return lenField(field, Buffer.from(s));
}

test('decodeContainerEvent reads newer CRI events (sandbox status in field 4, with its id and metadata)', () => {
  const metadata = [...strField(1, 'web-0'), ...strField(2, 'u-8'), ...strField(3, 'prod'), ...varint(4 << 3), 3];
  const status = [...strField(1, id(80)), ...lenField(2, metadata), ...varint(3 << 3), 1, ...varint(4 << 3), ...varint(12345)];
  const buf = Buffer.from([...strField(1, id(8)), ...varint(2 << 3), 1, ...varint(3 << 3), ...varint(1_700_000_000_000), ...lenField(4, status)]);
  const e = decodeContainerEvent(buf);
  assert.equal(e.containerId, id(8));
  assert.equal(e.type, 'CONTAINER_STARTED_EVENT');
  assert.equal(e.sandboxId, id(80));
  assert.deepEqual(e.pod, { name: 'web-0', uid: 'u-8', namespace: 'prod', attempt: 3 });
});

test('an event without sandbox metadata has no pod', () => {
  const e = decodeContainerEvent(Buffer.from([...strField(1, 'abc'), ...varint(2 << 3), 3]));
  assert.equal(e.type, 'CONTAINER_DELETED_EVENT');
  assert.equal(e.pod, undefined);
});

test('lean status decoders give what the protobufjs path gives', async () => {
  const { toContainerRuntimeStatus, toSandboxRuntimeStatus } = await import('../../src/pleg/status.js');
  const { decodeContainerStatusResponse, decodeSandboxStatusResponse, encodeIdRequest } = await import('../../src/pleg/wire-status.js');
  const defs = await criDefinitions();
  const status = {
    id: id(42),
    metadata: { name: 'meta-name', attempt: 4 },
    state: 'CONTAINER_EXITED',
    created_at: '1700000000123999999', // a hair before a millisecond boundary
    started_at: '1700000001000000000',
    finished_at: '1700000002500000001',
    exit_code: -2,
    image: { image: 'ghcr.io/example/app:v1', annotations: { a: 'b' } },
    image_ref: 'sha256:abc',
    reason: 'Error',
    message: 'boom',
    labels: { 'io.kubernetes.container.name': 'app', 'io.kubernetes.pod.uid': 'u' },
    annotations: {
      'io.kubernetes.container.hash': 'deadbeef',
      'io.kubernetes.container.restartCount': '3',
      'io.kubernetes.pod.terminationGracePeriod': '30',
      'io.kubernetes.container.preStopHandler': '{"exec":{"command":["sh","-c","sleep 1"]}}',
    },
    mounts: [{ container_path: '/a', host_path: '/b', readonly: true, selinux_relabel: false, propagation: 'PROPAGATION_PRIVATE' }],
    log_path: 'app/3.log',
    resources: null,
  };
  const buf = defs.runtime.ContainerStatus!.responseSerialize({ status, info: { k: 'v' } });
  const viaProtobufjs = toContainerRuntimeStatus((defs.runtime.ContainerStatus!.responseDeserialize(buf) as ContainerStatusResponse).status!, 'containerd');
  const lean = decodeContainerStatusResponse(buf, 'containerd');
  assert.deepEqual(lean, viaProtobufjs);
  assert.equal(lean?.createdAt, 1700000000123);
  assert.deepEqual(lean?.preStopHandler, { exec: { command: ['sh', '-c', 'sleep 1'] } });
  assert.equal(lean?.exitCode, -2);
  assert.equal(lean?.restartCount, 3);

  const sb = {
    id: id(43),
    metadata: { name: 'p', uid: 'u', namespace: 'ns', attempt: 1 },
    state: 'SANDBOX_NOTREADY',
    created_at: '1700000000999000000',
    network: { ip: '10.88.0.5', additional_ips: [{ ip: 'fd00::5' }] },
    linux: { namespaces: { options: { network: 'NODE', pid: 'CONTAINER', ipc: 'POD', target_id: '' } } },
    labels: { x: 'y' },
    annotations: { z: 'w' },
    runtime_handler: '',
  };
  const sbuf = defs.runtime.PodSandboxStatus!.responseSerialize({ status: sb, info: {} });
  assert.deepEqual(decodeSandboxStatusResponse(sbuf), toSandboxRuntimeStatus((defs.runtime.PodSandboxStatus!.responseDeserialize(sbuf) as PodSandboxStatusResponse).status!));
  assert.equal(decodeContainerStatusResponse(defs.runtime.ContainerStatus!.responseSerialize({ info: {} }), 'containerd'), null);
  assert.deepEqual(defs.runtime.ContainerStatus!.requestDeserialize(encodeIdRequest(id(42))), { container_id: id(42), verbose: false });
});

// ---- bad frames: each was accepted silently (or read past its message) before every read was bounds-checked ----

/** A WireFormatError naming `path` (outermost first) with `reason`. */
function rejects(decode: () => unknown, path: string[], reason: RegExp): void {
  assert.throws(decode, (err: unknown) => {
    assert.ok(err instanceof WireFormatError, `not a WireFormatError: ${String(err)}`);
    assert.equal(err.code, 'ERR_CRI_WIRE_FORMAT');
    assert.deepEqual(err.path, path);
    assert.match(err.reason, reason);
    assert.match(err.message, new RegExp(path.map((p) => p.replace(/[[\].]/g, '\\$&')).join(' > ')));
    return true;
  });
}

test('a truncated fixed64 at the end of a list frame is a WireFormatError naming the field', async () => {
  const buf = await encodeContainers([container(1, 'CONTAINER_RUNNING')]);
  const bad = Buffer.concat([buf, Buffer.from([(15 << 3) | 1, 1, 2, 3])]);
  rejects(() => decodeContainerList(bad, new RecordStore(), 1, emptyListStats()), ['ListContainersResponse.field15'], /truncated fixed64/);
});

test('a fixed32 running past the end of its container (into the next) is a WireFormatError, not a silent skip', async () => {
  const one = await encodeContainers([container(1, 'CONTAINER_RUNNING')]);
  const two = await encodeContainers([container(2, 'CONTAINER_RUNNING')]);
  // container 1's body with a fixed32 field that has two of its four bytes
  const body = Buffer.concat([one.subarray(3), Buffer.from([(15 << 3) | 5, 0xaa, 0xbb])]);
  const item = Buffer.from([0x0a, ...varint(body.length), ...body]);
  // the body starts after field 1's tag and its (2-byte) length
  assert.equal(one[0], 0x0a);
  assert.ok(one[2]! < 0x80 && one[1]! >= 0x80);
  const store = new RecordStore();
  rejects(() => decodeContainerList(Buffer.concat([item, two]), store, 1, emptyListStats()), ['ListContainersResponse.containers[0]', 'Container.field15'], /truncated fixed32/);
});

test("a label whose length runs past its container's end is a WireFormatError naming Container.labels", async () => {
  const two = await encodeContainers([container(2, 'CONTAINER_RUNNING')]);
  const body = Buffer.from([...strField(1, id(9)), ...varint((8 << 3) | 2), 40, ...strField(1, 'io.kubernetes.pod.uid')]);
  const item = Buffer.from([0x0a, ...varint(body.length), ...body]);
  rejects(() => decodeContainerList(Buffer.concat([item, two]), new RecordStore(), 1, emptyListStats()), ['ListContainersResponse.containers[0]', 'Container.labels'], /length 40 past the end/);
});

test('a varint field whose value is missing (the tag ends the status) is a WireFormatError', async () => {
  const { decodeContainerStatusResponse } = await import('../../src/pleg/wire-status.js');
  const status = Buffer.from([...strField(1, id(3)), ...varint(20 << 3)]);
  const buf = Buffer.from(lenField(1, status));
  rejects(() => decodeContainerStatusResponse(buf, 'containerd'), ['ContainerStatusResponse.status', 'ContainerStatus.field20'], /truncated varint/);
});

test('a truncated fixed64 in an event, and in a sandbox status it carries, is a WireFormatError', () => {
  const head = [...strField(1, id(8)), ...varint(2 << 3), 1];
  rejects(() => decodeContainerEvent(Buffer.from([...head, (9 << 3) | 1, 1, 2])), ['ContainerEventResponse.field9'], /truncated fixed64/);
  // sandbox status in field 4 (newer CRI) whose metadata holds a fixed64 cut by the status's end
  const metadata = [...strField(1, 'web-0'), ...strField(2, 'u-1'), (9 << 3) | 1, 1, 2, 3];
  const status = [...strField(1, id(80)), ...lenField(2, metadata), ...varint(3 << 3), 0];
  rejects(
    () => decodeContainerEvent(Buffer.from([...head, ...lenField(4, status)])),
    ['ContainerEventResponse.pod_sandbox_status', 'PodSandboxStatus.metadata', 'PodSandboxMetadata.field9'],
    /truncated fixed64/,
  );
});

// ---- the relist's fast item scan falls back to the exact reader on any unusual encoding ----

/** A Container item the way a different encoder could write it: each field in its own bytes. */
function oddContainer(n: number, state: number[], extra: number[] = []): number[] {
  const label = (k: string, v: string): number[] => lenField(8, [...strField(1, k), ...strField(2, v)]);
  return lenField(1, [
    ...strField(1, id(n)),
    // field 20 needs a two-byte tag; a varint of ten bytes; a fixed32 and a fixed64
    ...varint((20 << 3) | 0),
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    (15 << 3) | 5, 1, 2, 3, 4,
    ...varint((16 << 3) | 1), 1, 2, 3, 4, 5, 6, 7, 8,
    ...state,
    ...label('io.kubernetes.pod.uid', `uid-${n}`),
    ...label('io.kubernetes.pod.name', `pod-${n}`),
    ...label('io.kubernetes.pod.namespace', 'ns-1'),
    ...label('io.kubernetes.container.name', `c-${n}`),
    // a label longer than two length bytes hold
    ...label('big', 'x'.repeat(20_000)),
    ...extra,
  ]);
}

test('decodeContainerList: unusual encodings of known containers list the same states as canonical ones', async () => {
  const store = new RecordStore();
  const stats = emptyListStats();
  decodeContainerList(await encodeContainers([container(1, 'CONTAINER_CREATED'), container(2, 'CONTAINER_CREATED'), container(3, 'CONTAINER_CREATED')]), store, 1, stats);
  assert.equal(stats.created, 3);
  // 1: canonical; 2: the state as a two-byte varint (EXITED = 2), then the state again (last wins);
  // 3: a state number no runtime.v1 enum has
  const canonical = await encodeContainers([container(1, 'CONTAINER_RUNNING')]);
  const odd = Buffer.from([...oddContainer(2, [6 << 3, 0x82, 0x00], [6 << 3, 1, 6 << 3, 2]), ...oddContainer(3, [6 << 3, 9])]);
  const s2 = emptyListStats();
  decodeContainerList(Buffer.concat([canonical, odd]), store, 2, s2);
  assert.equal(s2.created, 0);
  assert.equal(s2.items, 3);
  assert.equal(store.get(id(1))!.listState, 'CONTAINER_RUNNING');
  assert.equal(store.get(id(2))!.listState, 'CONTAINER_EXITED');
  assert.equal(store.get(id(3))!.listState, 'CONTAINER_UNKNOWN');
  for (const n of [1, 2, 3]) assert.equal(store.get(id(n))!.listGen, 2);
  // a new container in the odd encoding is created from it as well
  const s3 = emptyListStats();
  decodeContainerList(Buffer.from(oddContainer(4, [6 << 3, 1])), store, 3, s3);
  assert.equal(s3.created, 1);
  assert.equal(store.get(id(4))!.podUid, 'uid-4');
  assert.equal(store.get(id(4))!.listState, 'CONTAINER_RUNNING');
});

test('decodeContainerList: a known container whose item is cut inside a label is still a WireFormatError', async () => {
  const store = new RecordStore();
  decodeContainerList(Buffer.from(oddContainer(5, [6 << 3, 1])), store, 1, emptyListStats());
  assert.ok(store.get(id(5)));
  const body = [...strField(1, id(5)), 6 << 3, 1, ...varint((8 << 3) | 2), 40, ...strField(1, 'io.kubernetes.pod.uid')];
  const two = await encodeContainers([container(2, 'CONTAINER_RUNNING')]);
  rejects(() => decodeContainerList(Buffer.concat([Buffer.from(lenField(1, body)), two]), store, 2, emptyListStats()), ['ListContainersResponse.containers[0]', 'Container.labels'], /length 40 past the end/);
});

test('a list answered with the same bytes is not decoded again: the same records marked, the same counts; new bytes or a changed store decode', async () => {
  const store = new RecordStore();
  const memo = newListMemo();
  const foreign = container(9, 'CONTAINER_RUNNING') as { labels: Record<string, string> };
  delete foreign.labels['io.kubernetes.pod.uid'];
  const buf = await encodeContainers([container(1, 'CONTAINER_RUNNING'), container(2, 'CONTAINER_EXITED'), foreign]);
  const s1 = emptyListStats();
  decodeContainerList(buf, store, 1, s1, memo);
  assert.deepEqual([s1.items, s1.created, s1.foreign, memo.reused], [3, 2, 1, 0]);
  // the same answer again (another Buffer, same bytes)
  const s2 = emptyListStats();
  decodeContainerList(Buffer.from(buf), store, 2, s2, memo);
  assert.equal(memo.reused, 1, 'not decoded');
  assert.deepEqual([s2.items, s2.created, s2.foreign, s2.bytes], [3, 0, 1, buf.length]);
  assert.deepEqual([store.get(id(1))!.listGen, store.get(id(1))!.listState, store.get(id(2))!.listGen, store.get(id(2))!.listState], [2, 'CONTAINER_RUNNING', 2, 'CONTAINER_EXITED']);
  // one state changed: decoded
  const changed = await encodeContainers([container(1, 'CONTAINER_EXITED'), container(2, 'CONTAINER_EXITED'), foreign]);
  decodeContainerList(changed, store, 3, emptyListStats(), memo);
  assert.equal(memo.reused, 1);
  assert.equal(store.get(id(1))!.listState, 'CONTAINER_EXITED');
  // the same bytes, but a record was forgotten meanwhile: decoded, and the record made again
  const r2 = store.get(id(2))!;
  store.discard(r2);
  const s4 = emptyListStats();
  decodeContainerList(changed, store, 4, s4, memo);
  assert.equal(memo.reused, 1);
  assert.equal(s4.created, 1);
  assert.notEqual(store.get(id(2)), r2);
  assert.equal(store.get(id(2))!.listGen, 4);
  // and another store never takes this one's records
  const other = new RecordStore();
  decodeContainerList(changed, other, 5, emptyListStats(), memo);
  assert.equal(other.size, 2);
});
