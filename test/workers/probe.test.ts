// The probe executors (workers/probe.ts) against local servers on 127.0.0.1: upstream's HTTP
// rules (2xx/3xx, redirects, headers, body limit, timeout), TCP connect, gRPC health checking,
// the Piscina pool, and no TIME_WAIT left behind by probe sockets.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import * as net from 'node:net';
import { readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { httpProbe, tcpProbe, grpcProbe, MAX_RESPONSE_BODY, type HttpProbeRequest } from '../../workers/probe.js';
import { createProbeRunner } from '../../src/prober/runner.js';
import { probeRequest, PROBE_USER_AGENT } from '../../src/prober/target.js';
import type { Pod } from '../../src/api/types.js';

async function listen(handler: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

const close = (s: http.Server | net.Server): Promise<void> => new Promise((r) => { (s as http.Server).closeAllConnections?.(); s.close(() => r()); });

function req(port: number, path: string, over: Partial<HttpProbeRequest> = {}): HttpProbeRequest {
  return { kind: 'http', scheme: 'HTTP', host: '127.0.0.1', port, path, headers: [['User-Agent', PROBE_USER_AGENT]], timeoutMs: 1000, ...over };
}

test('http probe: 2xx is success with the body, 4xx/5xx failure with upstream\'s message', async () => {
  const { server, port } = await listen((q, s) => {
    if (q.url === '/ok') { s.writeHead(200); s.end('fine'); return; }
    s.writeHead(503); s.end('down');
  });
  try {
    assert.deepEqual(await httpProbe(req(port, '/ok')), { result: 'success', output: 'fine' });
    assert.deepEqual(await httpProbe(req(port, '/bad')), { result: 'failure', output: 'HTTP probe failed with statuscode: 503' });
  } finally {
    await close(server);
  }
});

test('http probe: sends the probe\'s headers and upstream\'s User-Agent; a named port resolves', async () => {
  let seen: http.IncomingHttpHeaders = {};
  const { server, port } = await listen((q, s) => { seen = q.headers; s.end('ok'); });
  try {
    const pod: Pod = {
      metadata: { uid: 'u', name: 'p', namespace: 'ns' },
      spec: { containers: [{ name: 'c', ports: [{ name: 'web', containerPort: port }] }] },
    };
    const r = probeRequest(pod, pod.spec.containers[0]!, { httpGet: { port: 'web', path: 'healthz', httpHeaders: [{ name: 'X-Custom', value: 'v1' }] } }, { podIP: '127.0.0.1' }, 'cid');
    assert.equal((await httpProbe(r as HttpProbeRequest)).result, 'success');
    assert.equal(seen['user-agent'], PROBE_USER_AGENT);
    assert.match(PROBE_USER_AGENT, /^kube-probe\/\d+\.\d+$/);
    assert.equal(seen['x-custom'], 'v1');
    assert.equal(seen.accept, '*/*');
    const own = probeRequest(pod, pod.spec.containers[0]!, { httpGet: { port, httpHeaders: [{ name: 'User-Agent', value: 'mine' }] } }, { podIP: '127.0.0.1' }, 'cid');
    await httpProbe(own as HttpProbeRequest);
    assert.equal(seen['user-agent'], 'mine', 'a User-Agent from the probe replaces the default');
  } finally {
    await close(server);
  }
});

test('http probe: a redirect to the same host is followed; to another host it is a warning', async () => {
  const { server, port } = await listen((q, s) => {
    if (q.url === '/same') { s.writeHead(302, { Location: '/ok' }); s.end(); return; }
    if (q.url === '/same-bad') { s.writeHead(301, { Location: '/fail' }); s.end(); return; }
    if (q.url === '/other') { s.writeHead(302, { Location: `http://localhost:${port}/ok` }); s.end('moved'); return; }
    if (q.url === '/loop') { s.writeHead(302, { Location: '/loop' }); s.end(); return; }
    if (q.url === '/ok') { s.end('target'); return; }
    s.writeHead(500); s.end();
  });
  try {
    assert.deepEqual(await httpProbe(req(port, '/same')), { result: 'success', output: 'target' });
    assert.equal((await httpProbe(req(port, '/same-bad'))).result, 'failure');
    assert.deepEqual(await httpProbe(req(port, '/other')), { result: 'warning', output: 'Probe terminated redirects, Response body: moved' });
    const loop = await httpProbe(req(port, '/loop'));
    assert.equal(loop.result, 'failure');
    assert.match(loop.output, /stopped after 10 redirects/);
  } finally {
    await close(server);
  }
});

test('http probe: reads at most 10 KiB of the body; a slow server is a timeout failure', async () => {
  const { server, port } = await listen((q, s) => {
    if (q.url === '/big') { s.end(Buffer.alloc(1 << 20, 'a')); return; }
    // /slow never answers
  });
  try {
    const big = await httpProbe(req(port, '/big'));
    assert.equal(big.result, 'success');
    assert.equal(big.output.length, MAX_RESPONSE_BODY);
    const slow = await httpProbe(req(port, '/slow', { timeoutMs: 200 }));
    assert.equal(slow.result, 'failure');
    assert.match(slow.output, /context deadline exceeded/);
  } finally {
    await close(server);
  }
});

test('http probe: chunked and close-delimited bodies are read; a 1xx before the answer is skipped', async () => {
  const { server, port } = await listen((q, s) => {
    if (q.url === '/chunked') { s.write('par'); setTimeout(() => s.end('ts'), 20); return; }
    s.end('x');
  });
  const raw = net.createServer((c) => {
    c.on('error', () => {});
    c.once('data', () => c.end('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close'));
  });
  await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
  try {
    assert.deepEqual(await httpProbe(req(port, '/chunked')), { result: 'success', output: 'parts' });
    assert.deepEqual(await httpProbe(req((raw.address() as AddressInfo).port, '/')), { result: 'success', output: 'until close' });
  } finally {
    await close(server);
    await close(raw);
  }
});

test('tcp probe: an open port is success, a closed one failure', async () => {
  const server = net.createServer((s) => s.on('error', () => {}));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  try {
    assert.deepEqual(await tcpProbe({ kind: 'tcp', host: '127.0.0.1', port, timeoutMs: 1000 }), { result: 'success', output: '' });
  } finally {
    await close(server);
  }
  const closed = await tcpProbe({ kind: 'tcp', host: '127.0.0.1', port, timeoutMs: 1000 });
  assert.equal(closed.result, 'failure');
  assert.equal(closed.output, `dial tcp 127.0.0.1:${port}: connect: connection refused`);
});

/** TCP sockets in TIME_WAIT (state 06) whose local or remote port is `port`. */
function timeWait(port: number): number {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  let n = 0;
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try { text = readFileSync(f, 'utf8'); } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] === '06' && (cols[1]?.endsWith(`:${hex}`) || cols[2]?.endsWith(`:${hex}`))) n++;
    }
  }
  return n;
}

test('http and tcp probes leave no socket in TIME_WAIT', async () => {
  const { server, port } = await listen((_q, s) => s.end('ok'));
  const timeWaitBefore = timeWait(port); // another test's client may have used this port number
  try {
    for (let i = 0; i < 40; i++) {
      assert.equal((await httpProbe(req(port, '/'))).result, 'success');
      assert.equal((await tcpProbe({ kind: 'tcp', host: '127.0.0.1', port, timeoutMs: 1000 })).result, 'success');
    }
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(timeWait(port) <= timeWaitBefore, `${timeWait(port)} sockets in TIME_WAIT on port ${port}, ${timeWaitBefore} before the probes`);
  } finally {
    await close(server);
  }
});

/** Socket handles of this process (server and client sides) that are still open. */
const tcpHandles = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

test('http probe against a server that closes first (HTTP/1.0, as busybox httpd) leaves no socket open', async () => {
  const server = net.createServer((s) => {
    s.on('error', () => {});
    s.once('data', () => s.end('HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const before = tcpHandles();
  try {
    const rs = await Promise.all(Array.from({ length: 20 }, () => httpProbe(req(port, '/'))));
    assert.ok(rs.every((r) => r.result === 'success'));
    // closes finish on the next turns of the loop; the limit only bounds a leak
    for (let i = 0; i < 100 && tcpHandles() > before; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(tcpHandles(), before, 'every probe socket is closed');
  } finally {
    await close(server);
  }
});

test('a process whose probe pool ran probes (one still in flight) exits once the runner is closed', async () => {
  const script = fileURLToPath(new URL('../fixtures/probe-pool-exit.js', import.meta.url));
  const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  // the limit only bounds a hung exit (the old code span in worker teardown forever)
  const hang = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => child.once('exit', (c, s) => r([c, s])));
  clearTimeout(hang);
  assert.equal(signal, null, `the process had to be killed: ${out}`);
  assert.equal(code, 0, out);
  assert.match(out, /closed/);
});

// A grpc.health.v1 server by hand: service name → ServingStatus (1 SERVING, 2 NOT_SERVING).
async function healthServer(statuses: Record<string, number> | undefined): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server();
  const ident = (b: Buffer): Buffer => b;
  if (statuses) {
    server.addService({
      Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false, requestSerialize: ident, requestDeserialize: ident, responseSerialize: ident, responseDeserialize: ident, originalName: 'check' },
    } as grpc.ServiceDefinition, {
      Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const b = call.request;
        const service = b.length > 2 ? b.subarray(2, 2 + b[1]!).toString() : '';
        const st = statuses[service];
        if (st === undefined) return cb({ code: grpc.status.NOT_FOUND, details: 'unknown service' } as grpc.ServiceError);
        cb(null, Buffer.from([0x08, st]));
      },
    });
  }
  const port = await new Promise<number>((res, rej) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
  return { server, port };
}

test('grpc probe: SERVING is success; NOT_SERVING, an unknown service, no health service and no server fail', async () => {
  const { server, port } = await healthServer({ '': 1, ready: 1, draining: 2 });
  try {
    const g = (service: string) => grpcProbe({ kind: 'grpc', host: '127.0.0.1', port, service, timeoutMs: 2000 });
    assert.equal((await g('')).result, 'success');
    assert.equal((await g('ready')).result, 'success');
    assert.deepEqual(await g('draining'), { result: 'failure', output: 'service unhealthy (responded with "NOT_SERVING")' });
    const unknown = await g('nope');
    assert.equal(unknown.result, 'failure');
    assert.match(unknown.output, /health rpc probe failed/);
  } finally {
    server.forceShutdown();
  }
  const bare = await healthServer(undefined);
  try {
    const r = await grpcProbe({ kind: 'grpc', host: '127.0.0.1', port: bare.port, service: '', timeoutMs: 2000 });
    assert.equal(r.result, 'failure');
    assert.match(r.output, /does not implement the grpc health protocol/);
  } finally {
    bare.server.forceShutdown();
  }
  const gone = await grpcProbe({ kind: 'grpc', host: '127.0.0.1', port, service: '', timeoutMs: 500 });
  assert.equal(gone.result, 'failure');
  assert.match(gone.output, /failed to connect service at "127\.0\.0\.1:\d+"/);
});

test('grpc probes leave no socket in TIME_WAIT and no handle open', async () => {
  const { server, port } = await healthServer({ '': 1 });
  const before = tcpHandles();
  // another test's client connection that used this port number as its ephemeral port may
  // still be in TIME_WAIT (the listener binds with SO_REUSEADDR): none may be added
  const timeWaitBefore = timeWait(port);
  try {
    for (let i = 0; i < 30; i++) assert.equal((await grpcProbe({ kind: 'grpc', host: '127.0.0.1', port, service: '', timeoutMs: 2000 })).result, 'success');
    for (let i = 0; i < 100 && tcpHandles() > before; i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(timeWait(port) <= timeWaitBefore, `${timeWait(port)} sockets in TIME_WAIT on port ${port}, ${timeWaitBefore} before the probes`);
    assert.equal(tcpHandles(), before);
  } finally {
    server.forceShutdown();
  }
});

test('grpc probe: a server that never answers is a timeout', async () => {
  const silent = net.createServer((s) => s.on('error', () => {}));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  try {
    const r = await grpcProbe({ kind: 'grpc', host: '127.0.0.1', port: (silent.address() as AddressInfo).port, service: '', timeoutMs: 300 });
    assert.deepEqual(r, { result: 'failure', output: 'timeout: health rpc did not complete within 0.3s' });
  } finally {
    await close(silent);
  }
});

test('probe runner: network probes run in the Piscina pool; exec goes to CRI ExecSync with the timeout', async () => {
  const { server, port } = await listen((q, s) => { if (q.url === '/down') s.writeHead(500); s.end('pooled'); });
  const execs: { id: string; cmd: string[]; timeout: number }[] = [];
  const runner = createProbeRunner({
    threads: 1,
    cri: {
      execSync: async (id: string, cmd: string[], timeout: number) => {
        execs.push({ id, cmd, timeout });
        if (cmd[0] === 'slow') throw Object.assign(new Error('CRI ExecSync failed: DEADLINE_EXCEEDED: timeout 2s exceeded'), { grpcCode: 4 });
        return { stdout: Buffer.from(cmd[0] === 'ok' ? 'fine' : 'bad'), stderr: Buffer.alloc(0), exit_code: cmd[0] === 'ok' ? 0 : 3 };
      },
    },
  });
  try {
    // a success crosses back without its body (nothing reads it); a failure keeps its message
    assert.deepEqual(await runner.run(req(port, '/')), { result: 'success', output: '' });
    assert.deepEqual(await runner.run(req(port, '/down')), { result: 'failure', output: 'HTTP probe failed with statuscode: 500' });
    // many probes started in one turn travel as one batch and all come back
    const many = await Promise.all(Array.from({ length: 300 }, (_, i) => runner.run(i % 2 ? req(port, '/') : { kind: 'tcp', host: '127.0.0.1', port, timeoutMs: 1000 })));
    assert.ok(many.every((o) => o.result === 'success'), JSON.stringify(many.find((o) => o.result !== 'success')));
    assert.deepEqual(await runner.run({ kind: 'tcp', host: '127.0.0.1', port, timeoutMs: 1000 }), { result: 'success', output: '' });
    assert.deepEqual(await runner.run({ kind: 'exec', containerID: 'c1', command: ['ok'], timeoutMs: 2000 }), { result: 'success', output: 'fine' });
    assert.deepEqual(await runner.run({ kind: 'exec', containerID: 'c1', command: ['no'], timeoutMs: 2000 }), { result: 'failure', output: 'bad' });
    assert.deepEqual(await runner.run({ kind: 'exec', containerID: 'c1', command: ['slow'], timeoutMs: 2000 }), { result: 'failure', output: 'command ["slow"] timed out' });
    assert.deepEqual(execs[0], { id: 'c1', cmd: ['ok'], timeout: 2 });
  } finally {
    await runner.close();
    await close(server);
  }
});
