import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { access, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  CRI_INVALID_RESPONSE,
  CRI_PROTO_LOADER_OPTIONS,
  CriClient,
  CriError,
  criEndpointToTarget,
  isNotFound,
  isUnavailable,
  resolveCriProtoPath,
} from '../../src/runtime/cri-client.js';

const CONTAINERD = '/usr/bin/containerd';

async function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}

async function rejection(p: Promise<unknown>): Promise<CriError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CriError, `expected a CriError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected the call to fail');
}

// ---------------------------------------------------------------------------------------------
// endpoints (no runtime needed)

test('criEndpointToTarget accepts upstream unix:// form and bare paths only', () => {
  assert.equal(criEndpointToTarget('unix:///run/containerd/containerd.sock'), 'unix:///run/containerd/containerd.sock');
  assert.equal(criEndpointToTarget('/run/crio/crio.sock'), 'unix:///run/crio/crio.sock');
  assert.throws(() => criEndpointToTarget('tcp://127.0.0.1:1234'), /only unix sockets/);
  assert.throws(() => criEndpointToTarget('unix://relative.sock'), /absolute/);
  assert.throws(() => new CriClient({ runtimeEndpoint: 'unix:///x.sock', timeoutMs: 0 }), /timeoutMs/);
});

test('a call to a socket nobody serves fails with an unavailable CriError', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-cri-none-'));
  const client = new CriClient({ runtimeEndpoint: `unix://${join(dir, 'absent.sock')}`, timeoutMs: 10_000 });
  try {
    const err = await rejection(client.version());
    assert.equal(err.code, 'CRI_UNAVAILABLE');
    assert.equal(err.grpcCode, grpc.status.UNAVAILABLE);
    assert.equal(err.method, 'Version');
    assert.equal(err.unavailable, true);
    assert.equal(isUnavailable(err), true);
    assert.equal(isNotFound(err), false);
    assert.match(err.message, /Version/);
    // the image service shares the endpoint and reports the same way
    assert.equal(isUnavailable(await rejection(client.listImages())), true);
  } finally {
    client.close();
    await rm(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------
// against a CRI server double: request encoding, deadlines, response checks

interface DoubleCalls {
  createContainer?: Record<string, unknown>;
}

/** A stand-in CRI server (test double) with canned, deliberately broken answers. */
async function startCriServerDouble(socket: string, calls: DoubleCalls): Promise<grpc.Server> {
  const pkg = await protoLoader.load(await resolveCriProtoPath(), CRI_PROTO_LOADER_OPTIONS);
  const server = new grpc.Server();
  const runtime = pkg['runtime.v1.RuntimeService'] as grpc.ServiceDefinition;
  const image = pkg['runtime.v1.ImageService'] as grpc.ServiceDefinition;
  const unimplemented: grpc.handleUnaryCall<unknown, unknown> = (_call, cb) =>
    cb({ code: grpc.status.UNIMPLEMENTED, details: 'not in the double' });
  const stub = (def: grpc.ServiceDefinition) =>
    Object.fromEntries(Object.keys(def).map((k) => [k, unimplemented])) as grpc.UntypedServiceImplementation;
  server.addService(runtime, {
    ...stub(runtime),
    // never answers: the client's deadline must end the call
    Version: () => {},
    RunPodSandbox: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { pod_sandbox_id: '' }),
    CreateContainer: (call: grpc.ServerUnaryCall<Record<string, unknown>, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      calls.createContainer = call.request;
      cb(null, { container_id: 'c-123' });
    },
    ContainerStatus: (_call: unknown, cb: grpc.sendUnaryData<unknown>) =>
      cb(null, { status: { id: 'c-123', metadata: { name: 'app' }, created_at: '1', image_ref: 'sha256:x' } }),
    Status: (_call: unknown, cb: grpc.sendUnaryData<unknown>) =>
      cb(null, { status: { conditions: [{ type: 'RuntimeReady', status: true }] } }),
  });
  server.addService(image, stub(image));
  await new Promise<void>((ok, fail) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? fail(err) : ok())),
  );
  return server;
}

describe('CriClient against a CRI server double', () => {
  let dir: string;
  let server: grpc.Server;
  let client: CriClient;
  const calls: DoubleCalls = {};

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-cri-double-'));
    const socket = join(dir, 'cri.sock');
    server = await startCriServerDouble(socket, calls);
    client = new CriClient({ runtimeEndpoint: socket, timeoutMs: 200 });
  });

  after(async () => {
    client?.close();
    server?.forceShutdown();
    await rm(dir, { recursive: true, force: true });
  });

  test('a unary call is bounded by timeoutMs', async () => {
    const err = await rejection(client.version());
    assert.equal(err.code, 'CRI_DEADLINE_EXCEEDED');
    assert.equal(err.deadlineExceeded, true);
    assert.equal(isUnavailable(err), false);
  });

  test('requests are encoded as the runtime reads them (numbers for int64, enum names, maps)', async () => {
    const { container_id: id } = await client.createContainer(
      'sb-1',
      {
        metadata: { name: 'app', attempt: 2 },
        image: { image: 'busybox:1.36' },
        labels: { 'io.kubernetes.pod.name': 'p' },
        mounts: [{ container_path: '/data', host_path: '/tmp/d', propagation: 'PROPAGATION_HOST_TO_CONTAINER' }],
        linux: {
          resources: { cpu_shares: 1024, memory_limit_in_bytes: '8589934592', oom_score_adj: -997 },
          security_context: { namespace_options: { pid: 'CONTAINER' }, run_as_user: { value: 1000 } },
        },
      },
      { metadata: { name: 'p', uid: 'u', namespace: 'ns' } },
    );
    assert.equal(id, 'c-123');
    const req = calls.createContainer as {
      pod_sandbox_id: string;
      config: {
        metadata: { attempt: number };
        labels: Record<string, string>;
        mounts: Array<{ propagation: string; readonly: boolean }>;
        linux: {
          resources: { cpu_shares: string; memory_limit_in_bytes: string; oom_score_adj: string; cpu_quota: string };
          security_context: { namespace_options: { pid: string; network: string }; run_as_user: { value: string } };
        };
      };
      sandbox_config: { metadata: { namespace: string } };
    };
    assert.equal(req.pod_sandbox_id, 'sb-1');
    assert.equal(req.config.metadata.attempt, 2);
    assert.deepEqual(req.config.labels, { 'io.kubernetes.pod.name': 'p' });
    assert.equal(req.config.mounts[0]!.propagation, 'PROPAGATION_HOST_TO_CONTAINER');
    assert.equal(req.config.mounts[0]!.readonly, false);
    assert.equal(req.config.linux.resources.cpu_shares, '1024');
    assert.equal(req.config.linux.resources.memory_limit_in_bytes, '8589934592');
    assert.equal(req.config.linux.resources.oom_score_adj, '-997');
    assert.equal(req.config.linux.resources.cpu_quota, '0');
    assert.equal(req.config.linux.security_context.namespace_options.pid, 'CONTAINER');
    assert.equal(req.config.linux.security_context.namespace_options.network, 'POD');
    assert.equal(req.config.linux.security_context.run_as_user.value, '1000');
    assert.equal(req.sandbox_config.metadata.namespace, 'ns');
  });

  test('answers that break the CRI contract are refused, as upstream does', async () => {
    const noId = await rejection(
      client.runPodSandbox({ metadata: { name: 'p', uid: 'u', namespace: 'ns' } }),
    );
    assert.equal(noId.code, CRI_INVALID_RESPONSE);
    assert.equal(noId.method, 'RunPodSandbox');
    const noImage = await rejection(client.containerStatus('c-123'));
    assert.equal(noImage.code, CRI_INVALID_RESPONSE);
    assert.match(noImage.message, /status\.Image is not set/);
    const oneCondition = await rejection(client.status());
    assert.match(oneCondition.message, /RuntimeReady or NetworkReady/);
  });

  test('a method the server lacks surfaces its gRPC status name as the code', async () => {
    const err = await rejection(client.imageFsInfo());
    assert.equal(err.code, 'CRI_UNIMPLEMENTED');
    assert.equal(err.method, 'ImageFsInfo');
    assert.equal(err.details, 'not in the double');
  });
});

// ---------------------------------------------------------------------------------------------
// against a real containerd (throwaway: own root, state and socket; no CNI, so no pods)

interface ThrowawayContainerd {
  dir: string;
  endpoint: string;
  proc: ChildProcess;
  log: string;
}

async function startThrowawayContainerd(): Promise<ThrowawayContainerd> {
  const dir = await mkdtemp(join(tmpdir(), 'kts-cri-ctrd-'));
  const socket = join(dir, 'containerd.sock');
  const config = join(dir, 'config.toml');
  const log = join(dir, 'containerd.log');
  await writeFile(
    config,
    `version = 2
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "${socket}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${dir}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = "${dir}/cni"
`,
  );
  const fd = openSync(log, 'a');
  const proc = spawn(CONTAINERD, ['--config', config], { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const ctrd: ThrowawayContainerd = { dir, endpoint: `unix://${socket}`, proc, log };
  // wait (bounded) until the CRI plugin answers
  const probe = new CriClient({ runtimeEndpoint: ctrd.endpoint, timeoutMs: 2000 });
  try {
    for (let i = 0; ; i++) {
      if (proc.exitCode !== null) throw new Error(`containerd exited ${proc.exitCode}: ${await readFile(log, 'utf8')}`);
      try {
        await probe.version();
        return ctrd;
      } catch (err) {
        if (i >= 150) throw new Error(`containerd did not answer: ${String(err)}\n${await readFile(log, 'utf8')}`);
        await sleep(100);
      }
    }
  } catch (err) {
    await stopThrowawayContainerd(ctrd);
    throw err;
  } finally {
    probe.close();
  }
}

async function stopThrowawayContainerd(c: ThrowawayContainerd): Promise<void> {
  if (c.proc.exitCode === null && c.proc.signalCode === null) {
    const exited = new Promise((ok) => c.proc.once('exit', ok));
    c.proc.kill('SIGTERM');
    const timer = setTimeout(() => c.proc.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
  await rm(c.dir, { recursive: true, force: true });
}

describe('CriClient against containerd', { skip: !(await exists(CONTAINERD)) && `${CONTAINERD} not installed` }, () => {
  let ctrd: ThrowawayContainerd;
  let client: CriClient;

  before(async () => {
    ctrd = await startThrowawayContainerd();
    client = new CriClient({ runtimeEndpoint: ctrd.endpoint, timeoutMs: 10_000 });
  });

  after(async () => {
    client?.close();
    if (ctrd) await stopThrowawayContainerd(ctrd);
  });

  test('version() names the runtime and CRI v1', async () => {
    const v = await client.version();
    assert.equal(v.runtime_name, 'containerd');
    assert.equal(v.runtime_api_version, 'v1');
    assert.notEqual(v.runtime_version, '');
  });

  test('status() reports RuntimeReady (and NetworkReady false without CNI config)', async () => {
    const res = await client.status();
    const byType = new Map(res.status!.conditions.map((c) => [c.type, c]));
    assert.equal(byType.get('RuntimeReady')?.status, true);
    assert.equal(byType.get('NetworkReady')?.status, false);
    assert.notEqual(byType.get('NetworkReady')?.reason, '');
  });

  test('list calls on a fresh runtime return empty lists', async () => {
    assert.deepEqual(await client.listPodSandbox(), []);
    assert.deepEqual(await client.listPodSandbox({ state: { state: 'SANDBOX_READY' } }), []);
    assert.deepEqual(await client.listContainers({ label_selector: { 'io.kubernetes.pod.uid': 'x' } }), []);
    assert.deepEqual(await client.listImages(), []);
    assert.deepEqual(await client.listContainerStats(), []);
  });

  test('containerStatus of an unknown id is NOT_FOUND', async () => {
    const err = await rejection(client.containerStatus('0123456789abcdef-bogus'));
    assert.equal(err.code, 'CRI_NOT_FOUND');
    assert.equal(err.method, 'ContainerStatus');
    assert.equal(isNotFound(err), true);
    assert.equal(isUnavailable(err), false);
  });

  test('imageStatus of an absent image is a null image, not an error', async () => {
    const res = await client.imageStatus('127.0.0.1:5000/kubelet-ts/absent:1');
    assert.equal(res.image, null);
  });

  test('imageFsInfo() reports the image filesystem', async () => {
    const res = await client.imageFsInfo();
    assert.ok(res.image_filesystems.length >= 1);
    assert.match(res.image_filesystems[0]!.fs_id!.mountpoint, /kts-cri-ctrd-/);
  });

  test('a response larger than maxMessageBytes is refused (RESOURCE_EXHAUSTED)', async () => {
    const small = new CriClient({ runtimeEndpoint: ctrd.endpoint, timeoutMs: 10_000, maxMessageBytes: 8 });
    try {
      const err = await rejection(small.version());
      assert.equal(err.code, 'CRI_RESOURCE_EXHAUSTED');
    } finally {
      small.close();
    }
  });

  test('getContainerEvents() streams until cancel(), then iteration ends quietly', async () => {
    const events = client.getContainerEvents();
    const seen: unknown[] = [];
    let streamError: unknown;
    const done = (async () => {
      for await (const e of events) seen.push(e);
    })().catch((err) => { streamError = err; });
    // a no-op call on the same channel proves the stream did not block it
    await client.version();
    events.cancel();
    await done;
    assert.equal(events.cancelled, true);
    assert.deepEqual(seen, []);
    // containerd 1.6 may answer before the cancel: then only as a method it does not implement.
    if (streamError !== undefined) {
      assert.ok(streamError instanceof CriError, String(streamError));
      assert.equal(streamError.code, 'CRI_UNIMPLEMENTED');
    }
  });
});
