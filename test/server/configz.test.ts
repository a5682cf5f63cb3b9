// /configz keeps upstream's {"kubeletconfig": ...} and says beside it which settings kubelet-ts
// enforces: a client reading kubeletconfig sees the same document as before.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';

import { defaultKubeletConfig, FIELD_SUPPORT } from '../../src/config/index.js';
import { configzHandler } from '../../src/server/kubelet-handlers.js';

async function configz(): Promise<Record<string, any>> {
  const handler = configzHandler(defaultKubeletConfig());
  const server = createServer((req, res) => void handler(req, res, new URL(req.url ?? '/', 'http://x')));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/configz`);
    return (await res.json()) as Record<string, any>;
  } finally {
    server.close();
  }
}

describe('/configz', () => {
  it('keeps kubeletconfig as upstream and lists enforced, not implemented and not modeled settings beside it', async () => {
    const body = await configz();
    assert.deepEqual(Object.keys(body).sort(), ['kubeletconfig', 'kubeletconfigEnforcement']);
    assert.equal(body.kubeletconfig.kind, 'KubeletConfiguration');
    assert.equal(body.kubeletconfig.authentication.anonymous.enabled, false);
    const e = body.kubeletconfigEnforcement as { implemented: string[]; notImplemented: string[]; notModeled: string[] };
    assert.ok(e.implemented.includes('authentication'));
    assert.ok(e.implemented.includes('readOnlyPort'));
    assert.ok(e.implemented.includes('protectKernelDefaults'));
    assert.ok(e.notImplemented.includes('cgroupsPerQOS'));
    assert.ok(e.implemented.includes('rotateCertificates'));
    assert.ok(e.implemented.includes('serverTLSBootstrap'));
    assert.ok(e.notModeled.includes('makeIPTablesUtilChains'));
    assert.ok(!e.notModeled.includes('protectKernelDefaults'));
    // Every field shown in kubeletconfig is in exactly one list.
    for (const field of Object.keys(FIELD_SUPPORT)) {
      assert.equal(Number(e.implemented.includes(field)) + Number(e.notImplemented.includes(field)), 1, field);
      assert.ok(field in body.kubeletconfig, field);
    }
  });
});
