// RuntimeClass handlers and user namespaces through the runtime manager: the handler goes to
// RunPodSandbox, the user namespace to the sandbox and its containers; an unknown class or a
// user namespace the runtime cannot give means no sandbox at all and a FailedCreatePodSandBox
// event with upstream's text. Also the StatusResponse fields newer runtimes send, and the pod
// overhead in the pod cgroup's size.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import type { ContainerConfig, PodSandboxConfig, UserNamespaceInput } from '../../src/runtime/cri-types.js';
import { RuntimeClassManager, type RuntimeClassObject } from '../../src/runtime/runtime-class.js';
import { decodeStatusExtras, toRuntimeHandlerInfo } from '../../src/runtime/runtime-handlers.js';
import { RuntimeManager, type RuntimeManagerOptions } from '../../src/runtime/runtime-manager.js';
import { podCgroupResources } from '../../src/runtime/resources.js';
import { FakeClock } from '../../src/util/clock.js';
import { emptyStatus, loggerDouble } from '../kubelet/doubles.js';

test('lookupRuntimeHandler: none, a class, an unknown class, an API failure; answers cached for the TTL', async () => {
  const clock = new FakeClock();
  const gets: string[] = [];
  const classes: Record<string, RuntimeClassObject> = { gvisor: { metadata: { name: 'gvisor' }, handler: 'runsc' } };
  let fail = false;
  const m = new RuntimeClassManager({
    clock,
    ttlMs: 5_000,
    get: async (name) => {
      gets.push(name);
      if (fail) throw new Error('connection refused');
      return classes[name];
    },
  });
  assert.equal(await m.lookupRuntimeHandler(undefined), '');
  assert.equal(await m.lookupRuntimeHandler(''), '');
  assert.equal(await m.lookupRuntimeHandler('gvisor'), 'runsc');
  await assert.rejects(m.lookupRuntimeHandler('nope'), (err: Error) => err.message === 'runtimeclass.node.k8s.io "nope" not found');
  assert.equal(await m.lookupRuntimeHandler('gvisor'), 'runsc');
  assert.deepEqual(gets, ['gvisor', 'nope'], 'within the TTL no second GET');
  // the class appears later: seen once the TTL has passed
  classes.nope = { handler: 'runc' };
  clock.step(5_000);
  assert.equal(await m.lookupRuntimeHandler('nope'), 'runc');
  fail = true;
  clock.step(5_000);
  await assert.rejects(m.lookupRuntimeHandler('gvisor'), /^Error: failed to lookup RuntimeClass gvisor: connection refused$|failed to lookup RuntimeClass gvisor: connection refused/);
});

/** Protobuf wire bytes, enough to build a StatusResponse by hand. */
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 127) { out.push((n & 0x7f) | 0x80); n = Math.floor(n / 128); }
  out.push(n);
  return out;
}
function lenField(field: number, body: number[]): number[] {
  return [...varint(field * 8 + 2), ...varint(body.length), ...body];
}
function boolField(field: number, v: boolean): number[] {
  return [...varint(field * 8), v ? 1 : 0];
}
const str = (s: string) => [...Buffer.from(s)];

test('StatusResponse runtime_handlers (3) and features (4) are read from the raw answer; none sent, none reported', () => {
  const conditions = lenField(1, lenField(1, [...lenField(1, str('RuntimeReady')), ...boolField(2, true)]));
  const handler = (name: string, rro: boolean, userns: boolean) => lenField(3, [...lenField(1, str(name)), ...lenField(2, [...boolField(1, rro), ...boolField(2, userns)])]);
  const raw = Buffer.from([...conditions, ...handler('', true, true), ...handler('kata', false, true), ...lenField(3, lenField(1, str('bare'))), ...lenField(4, boolField(1, true)), ...lenField(2, [...lenField(1, str('k')), ...lenField(2, str('v'))])]);
  const got = decodeStatusExtras(raw);
  assert.deepEqual(got.runtime_handlers, [
    { name: '', features: { recursive_read_only_mounts: true, user_namespaces: true } },
    { name: 'kata', features: { recursive_read_only_mounts: false, user_namespaces: true } },
    { name: 'bare', features: null },
  ]);
  assert.deepEqual(got.features, { supplemental_groups_policy: true });
  assert.deepEqual(toRuntimeHandlerInfo(got.runtime_handlers), [
    { name: '', supportsRecursiveReadOnlyMounts: true, supportsUserNamespaces: true },
    { name: 'kata', supportsRecursiveReadOnlyMounts: false, supportsUserNamespaces: true },
    { name: 'bare', supportsRecursiveReadOnlyMounts: false, supportsUserNamespaces: false },
  ]);
  // containerd 1.6: conditions only
  assert.deepEqual(decodeStatusExtras(Buffer.from(conditions)), { runtime_handlers: [], features: null });
  assert.throws(() => decodeStatusExtras(Buffer.from([...varint(3 * 8 + 2), 50, 1])), /length-delimited field past the end/);
});

interface Recorded {
  sandboxes: Array<{ config: PodSandboxConfig; handler: string }>;
  containers: ContainerConfig[];
  events: string[];
}

async function manager(t: { after(fn: () => Promise<void>): void }, hooks: Pick<RuntimeManagerOptions, 'runtimeHandler' | 'userNamespace'>): Promise<{ m: RuntimeManager; rec: Recorded }> {
  const dir = await mkdtemp(join(tmpdir(), 'rtclass-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const rec: Recorded = { sandboxes: [], containers: [], events: [] };
  const cri = {
    runPodSandbox: async (config: PodSandboxConfig, handler = '') => { rec.sandboxes.push({ config, handler }); return { pod_sandbox_id: 'sb1' }; },
    podSandboxStatus: async () => ({ status: { network: { ip: '10.1.0.5', additional_ips: [] } } }),
    createContainer: async (_sb: string, config: ContainerConfig) => { rec.containers.push(config); return { container_id: `c${rec.containers.length}` }; },
    startContainer: async () => undefined,
    // the image's user, read for every start as upstream's getImageUser (none set: root)
    imageStatus: async () => ({ image: { id: 'sha256:x' } }),
  };
  const m = new RuntimeManager({
    cri: cri as unknown as RuntimeManagerOptions['cri'],
    images: { ensureImageExists: async () => 'sha256:x', gcBackoff: () => undefined },
    clock: new FakeClock(),
    log: loggerDouble(),
    nodeName: 'node-a',
    hostIPs: () => ['10.0.0.1'],
    memoryCapacityBytes: 1 << 30,
    podLogsDir: join(dir, 'logs'),
    rootDir: join(dir, 'root'),
    ensurePodCgroup: async () => '/kubepods/podu1',
    recordEvent: (_pod, type, reason, message) => rec.events.push(`${type} ${reason} ${message}`),
    ...hooks,
  });
  return { m, rec };
}

function pod(extra: Partial<Pod['spec']> = {}): Pod {
  return { metadata: { uid: 'u1', name: 'p', namespace: 'ns' }, spec: { containers: [{ name: 'c', image: 'busybox' }], ...extra } };
}

const USERNS: UserNamespaceInput = { mode: 'POD', uids: [{ host_id: 131072, container_id: 0, length: 65536 }], gids: [{ host_id: 131072, container_id: 0, length: 65536 }] };

test('the RuntimeClass handler goes to RunPodSandbox, the user namespace to the sandbox and its containers', async (t) => {
  const asked: string[] = [];
  const { m, rec } = await manager(t, {
    runtimeHandler: async (p) => (p.spec.runtimeClassName === 'sandboxed' ? 'runsc' : ''),
    userNamespace: async (_p, handler) => { asked.push(handler); return USERNS; },
  });
  const res = await m.syncPod(pod({ runtimeClassName: 'sandboxed', hostUsers: false }), emptyStatus('u1', 'p', 'ns'));
  assert.deepEqual(res.errors, []);
  assert.equal(rec.sandboxes.length, 1);
  assert.equal(rec.sandboxes[0]!.handler, 'runsc');
  assert.deepEqual(asked, ['runsc'], 'the user namespace is asked for the class\'s handler');
  assert.deepEqual(rec.sandboxes[0]!.config.linux?.security_context?.namespace_options?.userns_options, USERNS);
  assert.equal(rec.containers.length, 1);
  assert.deepEqual(rec.containers[0]!.linux?.security_context?.namespace_options?.userns_options, USERNS);
});

test('an unknown RuntimeClass or a refused user namespace: no sandbox, no container, FailedCreatePodSandBox', async (t) => {
  const notFound = await manager(t, {
    runtimeHandler: () => new RuntimeClassManager({ clock: new FakeClock(), get: async () => undefined }).lookupRuntimeHandler('x'),
  });
  const r1 = await notFound.m.syncPod(pod({ runtimeClassName: 'x' }), emptyStatus('u1', 'p', 'ns'));
  assert.deepEqual(notFound.rec.sandboxes, []);
  assert.deepEqual(notFound.rec.containers, []);
  assert.deepEqual(r1.errors, ['Failed to create pod sandbox: runtimeclass.node.k8s.io "x" not found']);
  assert.deepEqual(notFound.rec.events, ['Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclass.node.k8s.io "x" not found']);

  const refused = await manager(t, {
    userNamespace: async () => { throw new Error("can't set `spec.hostUsers: false`, runtime does not support user namespaces: the handler \"\" is not known"); },
  });
  const r2 = await refused.m.syncPod(pod({ hostUsers: false }), emptyStatus('u1', 'p', 'ns'));
  assert.deepEqual(refused.rec.sandboxes, [], 'never a sandbox without the user namespace it asked for');
  assert.deepEqual(refused.rec.containers, []);
  assert.equal(r2.errors.length, 1);
  assert.deepEqual(refused.rec.events, ['Warning FailedCreatePodSandBox Failed to create pod sandbox: can\'t set `spec.hostUsers: false`, runtime does not support user namespaces: the handler "" is not known']);
});

test('the pod overhead (set by RuntimeClass admission) sizes the pod cgroup on top of the containers', () => {
  const p = pod();
  p.spec.containers[0]!.resources = { requests: { cpu: '500m', memory: '128Mi' }, limits: { cpu: '500m', memory: '128Mi' } };
  const without = podCgroupResources(p);
  p.spec.overhead = { cpu: '250m', memory: '64Mi' };
  const withOverhead = podCgroupResources(p);
  assert.equal(without.memoryLimitBytes, 128 * 1024 * 1024);
  assert.equal(withOverhead.memoryLimitBytes, (128 + 64) * 1024 * 1024);
  assert.equal(withOverhead.cpuShares, Math.floor((750 * 1024) / 1000));
  assert.equal(withOverhead.cpuQuotaUs, 75_000);
});

test('CriClient.status returns the runtime_handlers a newer runtime sends beside the conditions', async (t) => {
  const { createServer } = await import('node:http2');
  const { CriClient, criDefinitions } = await import('../../src/runtime/cri-client.js');
  const dir = await mkdtemp(join(tmpdir(), 'kts-cri-status-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const conditions = (await criDefinitions()).runtime.Status!.responseSerialize({
    status: { conditions: [{ type: 'RuntimeReady', status: true }, { type: 'NetworkReady', status: true }] },
  });
  const handler = lenField(3, [...lenField(1, str('kata')), ...lenField(2, [...boolField(1, false), ...boolField(2, true)])]);
  const server = createServer();
  server.on('stream', (s) => {
    s.on('data', () => undefined);
    s.on('end', () => {
      const message = Buffer.concat([conditions, Buffer.from(handler)]);
      s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
      const head = Buffer.alloc(5);
      head.writeUInt32BE(message.length, 1);
      s.end(Buffer.concat([head, message]));
    });
  });
  await new Promise<void>((r) => server.listen(join(dir, 'cri.sock'), r));
  const cri = new CriClient({ runtimeEndpoint: `unix://${join(dir, 'cri.sock')}`, timeoutMs: 5_000 });
  try {
    const st = await cri.status();
    assert.equal(st.status?.conditions.length, 2);
    assert.deepEqual(st.runtime_handlers, [{ name: 'kata', features: { recursive_read_only_mounts: false, user_namespaces: true } }]);
    assert.equal(st.features, null);
  } finally {
    cri.close();
    server.close();
  }
});
