import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { access } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as protoLoader from '@grpc/proto-loader';
import { CRI_PROTO_LOADER_OPTIONS, resolveCriProtoPath } from '../../src/runtime/cri-client.js';

const execFileP = promisify(execFile);
const CONTAINERD = '/usr/bin/containerd';

async function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}

/** The repository root: the first dir holding package.json above this file, else above the cwd. */
async function repoRoot(): Promise<string> {
  for (const start of [dirname(fileURLToPath(import.meta.url)), process.cwd()]) {
    for (let dir = resolve(start); ; dir = dirname(dir)) {
      if ((await exists(join(dir, 'package.json'))) && (await exists(join(dir, 'src', 'runtime', 'proto', 'api.proto'))))
        return dir;
      if (dirname(dir) === dir) break;
    }
  }
  throw new Error('repository root (package.json + src/runtime/proto/api.proto) not found');
}

const RUNTIME_METHODS = [
  'Version',
  'RunPodSandbox',
  'StopPodSandbox',
  'RemovePodSandbox',
  'PodSandboxStatus',
  'ListPodSandbox',
  'CreateContainer',
  'StartContainer',
  'StopContainer',
  'RemoveContainer',
  'ListContainers',
  'ContainerStatus',
  'UpdateContainerResources',
  'ReopenContainerLog',
  'ExecSync',
  'Exec',
  'Attach',
  'PortForward',
  'ContainerStats',
  'ListContainerStats',
  'PodSandboxStats',
  'ListPodSandboxStats',
  'UpdateRuntimeConfig',
  'Status',
  'GetContainerEvents',
];
const IMAGE_METHODS = ['ListImages', 'ImageStatus', 'PullImage', 'RemoveImage', 'ImageFsInfo'];

test('api.proto declares exactly the RPCs kubelet-ts uses, with upstream paths', async () => {
  const pkg = await protoLoader.load(await resolveCriProtoPath(), CRI_PROTO_LOADER_OPTIONS);
  const runtime = pkg['runtime.v1.RuntimeService'] as Record<string, protoLoader.MethodDefinition<object, object>>;
  const image = pkg['runtime.v1.ImageService'] as Record<string, protoLoader.MethodDefinition<object, object>>;
  assert.deepEqual(Object.keys(runtime).sort(), [...RUNTIME_METHODS].sort());
  assert.deepEqual(Object.keys(image).sort(), [...IMAGE_METHODS].sort());
  assert.equal(runtime.ListContainers!.path, '/runtime.v1.RuntimeService/ListContainers');
  assert.equal(image.PullImage!.path, '/runtime.v1.ImageService/PullImage');
  for (const [name, m] of Object.entries(runtime)) {
    assert.equal(m.responseStream, name === 'GetContainerEvents', `${name} streaming`);
    assert.equal(m.requestStream, false, `${name} request stream`);
  }
});

test('api.proto decodes to the shapes cri-types.ts describes', async () => {
  const pkg = await protoLoader.load(await resolveCriProtoPath(), CRI_PROTO_LOADER_OPTIONS);
  const status = (pkg['runtime.v1.RuntimeService'] as Record<string, protoLoader.MethodDefinition<object, object>>)
    .ContainerStatus!;
  // round-trip through the wire: int64 as string, enum as name, maps as records, unset message as null
  const wire = (status as unknown as { responseSerialize(v: object): Buffer }).responseSerialize({
    status: {
      id: 'c1',
      state: 'CONTAINER_EXITED',
      finished_at: '1700000000123456789',
      exit_code: 137,
      reason: 'OOMKilled',
      labels: { 'io.kubernetes.container.name': 'app' },
    },
  });
  const back = status.responseDeserialize(wire) as {
    status: { state: string; finished_at: string; started_at: string; exit_code: number; reason: string; labels: unknown; image: unknown; mounts: unknown };
    info: unknown;
  };
  assert.equal(back.status.state, 'CONTAINER_EXITED');
  assert.equal(back.status.finished_at, '1700000000123456789');
  assert.equal(back.status.started_at, '0');
  assert.equal(back.status.exit_code, 137);
  assert.equal(back.status.reason, 'OOMKilled');
  assert.deepEqual(back.status.labels, { 'io.kubernetes.container.name': 'app' });
  assert.equal(back.status.image, null);
  assert.deepEqual(back.status.mounts, []);
  assert.deepEqual(back.info, {});
});

test('api.proto matches the runtime.v1 descriptor embedded in containerd', async (t) => {
  const root = await repoRoot();
  const tool = join(root, '..', 'shared', 'tools', 'cri-proto-check.mjs');
  if (!(await exists(CONTAINERD))) return t.skip(`${CONTAINERD} not installed`);
  if (!(await exists(tool))) return t.skip(`check tool not found at ${tool}`);
  const proto = join(root, 'src', 'runtime', 'proto', 'api.proto');
  // the tool exits non-zero on any mismatch; execFile rejects then, with its output attached
  const { stdout } = await execFileP(process.execPath, [tool, proto, CONTAINERD], { cwd: root }).catch(
    (err: { stdout?: string; stderr?: string; code?: number }) => {
      assert.fail(`cri-proto-check exited ${err.code}:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    },
  );
  assert.match(stdout, /: 0 mismatches/);
});
