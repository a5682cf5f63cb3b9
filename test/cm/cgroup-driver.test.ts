// The cgroup driver the node runs with (upstream KubeletCgroupDriverFromCRI): the kubelet asks
// the runtime through CRI RuntimeConfig, over a real gRPC socket served by a runtime double
// that answers it (or does not implement it, as containerd 1.6 does).

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';

import { CgroupDriverError, resolveCgroupDriver } from '../../src/cm/cgroup-driver.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { decodeRuntimeConfigResponse, encodeRuntimeConfigResponse, RUNTIME_CONFIG_PATH, type RuntimeConfigResponse } from '../../src/runtime/runtime-config.js';
import { loggerDouble } from '../kubelet/doubles.js';

/** A runtime double serving RuntimeConfig (undefined: the method is not implemented). */
async function runtimeDouble(dir: string, name: string, answer: (() => RuntimeConfigResponse | Error) | undefined): Promise<{ endpoint: string; calls: () => number; close: () => Promise<void> }> {
  const server = new grpc.Server();
  let calls = 0;
  if (answer) {
    server.addService({
      RuntimeConfig: {
        path: RUNTIME_CONFIG_PATH,
        requestStream: false,
        responseStream: false,
        requestSerialize: (x: Buffer) => x,
        requestDeserialize: (b: Buffer) => b,
        responseSerialize: (r: RuntimeConfigResponse) => encodeRuntimeConfigResponse(r),
        responseDeserialize: (b: Buffer) => decodeRuntimeConfigResponse(b),
      },
    }, {
      RuntimeConfig: (_call: grpc.ServerUnaryCall<Buffer, RuntimeConfigResponse>, cb: grpc.sendUnaryData<RuntimeConfigResponse>) => {
        calls++;
        const a = answer();
        if (a instanceof Error) cb({ code: grpc.status.UNAVAILABLE, details: a.message });
        else cb(null, a);
      },
    });
  }
  const sock = join(dir, `${name}.sock`);
  await new Promise<void>((res, rej) => server.bindAsync(`unix://${sock}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? rej(e) : res())));
  return { endpoint: `unix://${sock}`, calls: () => calls, close: () => new Promise<void>((r) => server.tryShutdown(() => r())) };
}

describe('cgroup driver from the CRI runtime', () => {
  let dir: string;
  const clients: CriClient[] = [];
  const closers: (() => Promise<void>)[] = [];
  const client = (endpoint: string): CriClient => {
    const c = new CriClient({ runtimeEndpoint: endpoint, timeoutMs: 5000 });
    clients.push(c);
    return c;
  };
  const serve = async (name: string, answer: (() => RuntimeConfigResponse | Error) | undefined) => {
    const d = await runtimeDouble(dir, name, answer);
    closers.push(d.close);
    return d;
  };
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-driver-'));
  });
  after(async () => {
    for (const c of clients) c.close();
    for (const c of closers) await c();
    await rm(dir, { recursive: true, force: true });
  });

  it('the runtime says systemd, the config says systemd: systemd, from the runtime', async () => {
    const rt = await serve('sd', () => ({ linux: { cgroup_driver: 0 } }));
    const lines: string[] = [];
    const d = await resolveCgroupDriver({ cri: client(rt.endpoint), configured: 'systemd', featureGates: {}, log: loggerDouble(lines) });
    assert.deepEqual(d, { driver: 'systemd', source: 'runtime' });
    assert.match(lines.join('\n'), /Using cgroup driver setting received from the CRI runtime/);
  });

  it('the runtime says cgroupfs, the config says systemd: an error naming both', async () => {
    const rt = await serve('fs', () => ({ linux: { cgroup_driver: 1 } }));
    await assert.rejects(
      resolveCgroupDriver({ cri: client(rt.endpoint), configured: 'systemd', featureGates: {}, log: loggerDouble() }),
      (err: Error) => err instanceof CgroupDriverError && /kubelet configuration says "systemd" but the container runtime uses "cgroupfs"/.test(err.message),
    );
    const rt2 = await serve('sd2', () => ({ linux: { cgroup_driver: 0 } }));
    await assert.rejects(resolveCgroupDriver({ cri: client(rt2.endpoint), configured: 'cgroupfs', featureGates: {}, log: loggerDouble() }), /says "cgroupfs" but the container runtime uses "systemd"/);
  });

  it('a runtime without RuntimeConfig (UNIMPLEMENTED, as containerd 1.6): the configured driver', async () => {
    const rt = await serve('old', undefined);
    const lines: string[] = [];
    const d = await resolveCgroupDriver({ cri: client(rt.endpoint), configured: 'systemd', featureGates: {}, log: loggerDouble(lines) });
    assert.deepEqual(d, { driver: 'systemd', source: 'config' });
    assert.match(lines.join('\n'), /does not implement CRI RuntimeConfig/);
  });

  it('no linux section: the configured driver; an unknown driver number: an error', async () => {
    const none = await serve('none', () => ({}));
    assert.deepEqual(await resolveCgroupDriver({ cri: client(none.endpoint), configured: 'cgroupfs', featureGates: {}, log: loggerDouble() }), { driver: 'cgroupfs', source: 'config' });
    const odd = await serve('odd', () => ({ linux: { cgroup_driver: 7 } }));
    await assert.rejects(resolveCgroupDriver({ cri: client(odd.endpoint), configured: 'cgroupfs', featureGates: {}, log: loggerDouble() }), /unknown cgroup driver 7/);
  });

  it('a runtime failing otherwise is asked 3 times, 2 s apart, then the config is used with a warning', async () => {
    const rt = await serve('flaky', () => new Error('still starting'));
    const slept: number[] = [];
    const lines: string[] = [];
    const d = await resolveCgroupDriver({ cri: client(rt.endpoint), configured: 'systemd', featureGates: {}, log: loggerDouble(lines), sleep: async (ms) => void slept.push(ms) });
    assert.deepEqual(d, { driver: 'systemd', source: 'config' });
    assert.equal(rt.calls(), 3);
    assert.deepEqual(slept, [2000, 2000]);
    assert.match(lines.join('\n'), /Could not ask the container runtime.*still starting/);
  });

  it('the feature gate set false: the runtime is not asked', async () => {
    const rt = await serve('gated', () => ({ linux: { cgroup_driver: 1 } }));
    const d = await resolveCgroupDriver({ cri: client(rt.endpoint), configured: 'systemd', featureGates: { KubeletCgroupDriverFromCRI: false }, log: loggerDouble() });
    assert.deepEqual(d, { driver: 'systemd', source: 'config' });
    assert.equal(rt.calls(), 0);
  });

  it('the hand-written codec reads what a protobuf encoder writes, unknown fields skipped', () => {
    // linux { cgroup_driver: CGROUPFS } plus an unknown field 2 (string "x") at both levels
    const wire = Buffer.from([0x0a, 0x05, 0x08, 0x01, 0x12, 0x01, 0x78, 0x12, 0x01, 0x78]);
    assert.deepEqual(decodeRuntimeConfigResponse(wire), { linux: { cgroup_driver: 1 } });
    assert.deepEqual(decodeRuntimeConfigResponse(Buffer.from([0x0a, 0x00])), { linux: { cgroup_driver: 0 } }, 'SYSTEMD is the zero value, not written');
    assert.throws(() => decodeRuntimeConfigResponse(Buffer.from([0x0a, 0x05, 0x08])), /truncated/);
  });
});
