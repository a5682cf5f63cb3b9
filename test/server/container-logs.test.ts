// The /containerLogs handler on a plain node http server with a host double: upstream's 404 and
// 400 texts, the container instance chosen from the status (previous = the last terminated
// one), and the log streamed with the query's options.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Pod, PodStatus } from '../../src/api/types.js';
import { containerLogsHandler, type ContainerLogsHost } from '../../src/server/container-logs.js';
import { FakeClock } from '../../src/util/clock.js';

const tempDirs: string[] = [];
after(() => { for (const d of tempDirs) rmSync(d, { recursive: true, force: true }); });
async function tempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const line = (sec: number, text: string): string => `${new Date(T0 + sec * 1000).toISOString().replace('.000Z', '.000000000Z')} stdout F ${text}\n`;

function pod(status: PodStatus): Pod {
  return { metadata: { name: 'web', namespace: 'ns1', uid: 'u1' }, spec: { containers: [{ name: 'app', image: 'busybox' }] }, status } as Pod;
}

async function serve(host: ContainerLogsHost): Promise<{ server: Server; get: (path: string) => Promise<{ status: number; body: string }> }> {
  const handler = containerLogsHandler(host);
  const server = createServer((req, res) => {
    const url = new URL(req.url!, 'http://localhost');
    void handler(req, res, url);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    get: async (path) => {
      const r = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: r.status, body: await r.text() };
    },
  };
}

test('/containerLogs: 404s and 400s with upstream texts, logs of the current and previous instance', async (t) => {
  const d = await tempDir('kts-clogs-');
  await writeFile(join(d, '0.log'), line(1, 'first run'));
  await writeFile(join(d, '1.log'), line(2, 'second run a') + line(3, 'second run b'));
  let status: PodStatus = {
    containerStatuses: [{
      name: 'app', ready: true, restartCount: 1, image: 'busybox', imageID: '', containerID: 'containerd://c1',
      state: { running: { startedAt: '' } },
      lastState: { terminated: { exitCode: 1, containerID: 'containerd://c0' } },
    }],
  };
  const paths: Record<string, string> = { c0: join(d, '0.log'), c1: join(d, '1.log') };
  const host: ContainerLogsHost = {
    clock: new FakeClock(T0 + 60_000),
    getPodByName: (ns, name) => (ns === 'ns1' && name === 'web' ? pod(status) : undefined),
    getPodStatus: () => undefined,
    containerLogPath: async (id) => {
      const p = paths[id];
      if (!p) throw new Error(`failed to get container status ${JSON.stringify(id)}`);
      return p;
    },
    isContainerRunning: async () => false,
  };
  const { server, get } = await serve(host);
  t.after(() => server.close());

  assert.deepEqual(await get('/containerLogs/ns1/nope/app'), { status: 404, body: 'pod "nope" does not exist' });
  assert.deepEqual(await get('/containerLogs/ns2/web/app'), { status: 404, body: 'pod "web" does not exist' });
  assert.deepEqual(await get('/containerLogs/ns1/web/other'), { status: 404, body: 'container "other" not found in pod "web"' });
  assert.equal((await get('/containerLogs/ns1/web')).status, 404);
  const bad = await get('/containerLogs/ns1/web/app?tailLines=ten');
  assert.equal(bad.status, 400);
  assert.match(bad.body, /tailLines/);
  const invalid = await get('/containerLogs/ns1/web/app?limitBytes=0');
  assert.equal(invalid.status, 422);
  assert.match(invalid.body, /limitBytes/);

  assert.deepEqual(await get('/containerLogs/ns1/web/app'), { status: 200, body: 'second run a\nsecond run b\n' });
  assert.deepEqual(await get('/containerLogs/ns1/web/app?tailLines=1&timestamps=true'), { status: 200, body: '2026-01-01T12:00:03Z second run b\n' });
  assert.deepEqual(await get('/containerLogs/ns1/web/app?previous=true'), { status: 200, body: 'first run\n' });

  status = { containerStatuses: [{ ...status.containerStatuses![0]!, lastState: {} }] };
  assert.deepEqual(await get('/containerLogs/ns1/web/app?previous=true'), { status: 400, body: 'previous terminated container "app" in pod "web" not found' });
  status = { containerStatuses: [{ ...status.containerStatuses![0]!, containerID: undefined, state: { waiting: { reason: 'ErrImagePull' } } }] };
  assert.deepEqual(await get('/containerLogs/ns1/web/app'), { status: 400, body: 'container "app" in pod "web" is waiting to start: image can\'t be pulled' });
  status = { containerStatuses: [] };
  assert.deepEqual(await get('/containerLogs/ns1/web/app'), { status: 400, body: 'container "app" in pod "web" is not available' });
});
