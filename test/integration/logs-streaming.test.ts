// Container logs and streaming on real containerd, through the kubelet's own handlers served
// by this test's plain HTTP server (an in-process kubelet): a container writing past a small
// containerLogMaxSize gets its log rotated and compressed, and /containerLogs reads across the
// rotations; exec over WebSocket (v4.channel.k8s.io) with stdin and an exit code, /run, and a
// port-forward to busybox httpd, all proxied to containerd's streaming server. Then kubectl
// (logs -f/--tail/--since/--previous/--timestamps, exec -i with an exit code, port-forward)
// through the test API server, which proxies to these handlers over HTTPS with its own client
// certificate.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { execFile, spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/api/types.js';
import { loadConfig } from '../../src/config/index.js';
import { buildDependencies } from '../../src/kubelet/dependencies.js';
import { Kubelet } from '../../src/kubelet/kubelet.js';
import { CriClient } from '../../src/runtime/cri-client.js';
import { containerRoutes } from '../../src/server/kubelet-host.js';
import { matchRoute, type Handler } from '../../src/server/server.js';
import { createLogger } from '../../src/util/log.js';
import { ensureRuntime, type TestRuntime } from '../fixtures/runtime.js';
import { freePort, startKubelet, waitFor, type KubeletProcess } from '../fixtures/kubelet-process.js';
import { openChannels } from '../fixtures/ws-channel-client.js';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';

const WAIT = 90_000;
const NODE = 'kts-logs-node';
const LOOP = 'trap "exit 0" TERM; while true; do sleep 1; done';

describe('container logs and streaming on a real runtime', () => {
  let rt: TestRuntime;
  let cri: CriClient;
  let dir: string;
  let manifestDir: string;
  let podLogsDir: string;
  let kubelet: Kubelet;
  let server: Server;
  let port: number;
  let httpPort: number;
  let api: TestApiServer;
  let tlsServer: Server;
  let kubeconfig: string;
  /** Client certificate subjects the kubelet's HTTPS server saw. */
  const clientCNs: string[] = [];

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-logs-'));
    manifestDir = join(dir, 'manifests');
    podLogsDir = join(dir, 'pods-logs');
    await writeFile(join(dir, 'config.yaml'), [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      'containerLogMaxSize: 4Ki',
      'containerLogMaxFiles: 3',
      'containerLogMonitorInterval: 3s',
      `podLogsDir: ${podLogsDir}`,
      'readOnlyPort: 0',
      'healthzPort: 0',
    ].join('\n'));
    await (await import('node:fs/promises')).mkdir(manifestDir);
    httpPort = await freePort();
    const pod = (name: string, containers: unknown[]): string => JSON.stringify({
      apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: { test: 'logs-streaming' } },
      spec: { hostNetwork: true, terminationGracePeriodSeconds: 1, containers },
    });
    const img = rt.images.busybox;
    // ~60 bytes a line, 400 lines over ~8 s: several rotations at 4 KiB
    await writeFile(join(manifestDir, 'writer.json'), pod('writer', [{
      name: 'w', image: img,
      command: ['sh', '-c', `i=0; while [ $i -lt 400 ]; do echo "line-$(printf %05d $i) padding-padding-padding-padding-pad"; i=$((i+1)); if [ $((i % 20)) -eq 0 ]; then sleep 0.4; fi; done; echo done; ${LOOP}`],
    }]));
    // exits after a line each run: restarted, so it has a previous instance
    await writeFile(join(manifestDir, 'crasher.json'), pod('crasher', [{
      name: 'c', image: img, command: ['sh', '-c', 'echo "started $(cat /proc/sys/kernel/random/uuid)"; sleep 5; exit 1'],
    }]));
    await writeFile(join(manifestDir, 'shell.json'), pod('shell', [
      { name: 'sh', image: img, command: ['sh', '-c', LOOP] },
      { name: 'web', image: img, command: ['sh', '-c', `mkdir -p /www; echo hello-from-httpd > /www/index.html; httpd -f -p 127.0.0.1:${httpPort} -h /www`] },
    ]));
    const { config, flags } = await loadConfig([
      '--config', join(dir, 'config.yaml'),
      '--container-runtime-endpoint', rt.endpoint,
      '--pod-manifest-path', manifestDir,
      '--root-dir', join(dir, 'root'),
      '--hostname-override', NODE,
      '--file-check-frequency', '1s',
    ]);
    const log = createLogger({ test: 'logs-streaming' });
    const deps = await buildDependencies(config, flags, NODE, log);
    kubelet = new Kubelet({ config, flags, deps });
    await kubelet.start();
    const routes: Map<string, Handler> = containerRoutes(kubelet, deps.cri, config);
    const onRequest: RequestListener = (req, res) => {
      const url = new URL(req.url!, 'http://localhost');
      const route = matchRoute(routes, url.pathname);
      if (!route) { res.writeHead(404); return void res.end(); }
      void route(req, res, url);
    };
    const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
      const url = new URL(req.url!, 'http://localhost');
      const route = matchRoute(routes, url.pathname);
      if (!route?.upgrade) return void socket.destroy();
      void route.upgrade(req, socket, head, url);
    };
    server = createServer(onRequest);
    server.on('upgrade', onUpgrade);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;

    // the test API server, and the same handlers on HTTPS where its Node says the kubelet is
    api = new TestApiServer();
    await api.start();
    const serving = api.ca!.serving(['127.0.0.1']);
    const noteClient = (req: IncomingMessage): void => {
      const cn = (req.socket as TLSSocket).getPeerCertificate?.()?.subject?.CN;
      clientCNs.push(String(cn ?? ''));
    };
    tlsServer = createHttpsServer({ cert: serving.cert, key: serving.key, ca: [api.ca!.cert], requestCert: true, rejectUnauthorized: true }, (req, res) => { noteClient(req); onRequest(req, res); });
    tlsServer.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => { noteClient(req); onUpgrade(req, socket, head); });
    await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r));
    const tlsPort = (tlsServer.address() as AddressInfo).port;
    api.create('nodes', undefined, {
      metadata: { name: NODE },
      status: { addresses: [{ type: 'InternalIP', address: '127.0.0.1' }], daemonEndpoints: { kubeletEndpoint: { Port: tlsPort } } },
    });
    kubeconfig = join(dir, 'admin.kubeconfig');
    await writeFile(kubeconfig, api.kubeconfigFor('admin', ['system:masters']));
  });

  after(async () => {
    for (const f of await readdir(manifestDir).catch(() => [])) await rm(join(manifestDir, f), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'logs-streaming' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await kubelet?.stop();
    server?.close();
    tlsServer?.close();
    await api?.stop();
    cri.close();
    await rm(dir, { recursive: true, force: true });
  });

  const running = (name: string, container: string): Promise<Pod> => waitFor(async () => {
    const p = kubelet.getPods().find((x) => x.metadata.name === `${name}-${NODE}`);
    const cs = p?.status?.containerStatuses?.find((c) => c.name === container);
    return cs?.state?.running ? p : undefined;
  }, WAIT, `${name}/${container} to run`);
  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: r.status, body: await r.text() };
  };

  it('rotates a log past containerLogMaxSize, compresses older rotations, and /containerLogs reads across them', async () => {
    const p = await running('writer', 'w');
    const ctrDir = join(podLogsDir, `default_writer-${NODE}_${p.metadata.uid}`, 'w');
    const logs = `/containerLogs/default/writer-${NODE}/w`;
    await waitFor(async () => (await get(logs)).body.includes('done\n'), WAIT, 'the writer to finish');
    // rotated: a plain newest rotation and a gzip'd older one, never more than 3 files
    const files = await waitFor(async () => {
      const f = await readdir(ctrDir);
      return f.some((n) => /^0\.log\.\d{8}-\d{6}\.gz$/.test(n)) && f.some((n) => /^0\.log\.\d{8}-\d{6}$/.test(n)) ? f : undefined;
    }, WAIT, 'a compressed rotation');
    assert.ok(files.length <= 3, `files: ${files.join(' ')}`);
    const body = (await get(logs)).body;
    const lines = body.trim().split('\n');
    assert.equal(lines.at(-1), 'done');
    // what is kept is one contiguous run up to the last line, read across the rotations
    const nums = lines.slice(0, -1).map((l) => Number(/^line-(\d{5}) /.exec(l)![1]));
    assert.equal(nums.at(-1), 399);
    nums.forEach((n, i) => assert.equal(n, nums[0]! + i, `line ${i}`));
    assert.ok(nums.length * 60 > 4096, `more than the live file holds: ${nums.length} lines`);
    // options through the handler
    assert.equal((await get(`${logs}?tailLines=2`)).body, 'line-00399 padding-padding-padding-padding-pad\ndone\n');
    assert.match((await get(`${logs}?tailLines=1&timestamps=true`)).body, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z done\n$/);
    assert.equal((await get(`${logs}?limitBytes=10`)).body.length, 10);
    assert.equal((await get(`${logs}?sinceTime=2999-01-01T00:00:00Z`)).body, '');
    assert.deepEqual(await get(`/containerLogs/default/writer-${NODE}/nope`), { status: 404, body: `container "nope" not found in pod "writer-${NODE}"` });
    assert.deepEqual(await get(`${logs}?previous=true`), { status: 400, body: `previous terminated container "w" in pod "writer-${NODE}" not found` });
    // follow streams what comes and keeps the connection open while the container runs
    const ac = new AbortController();
    const r = await fetch(`http://127.0.0.1:${port}${logs}?follow=true&tailLines=1`, { signal: ac.signal });
    const reader = r.body!.getReader();
    const first = Buffer.from((await reader.read()).value!).toString();
    assert.equal(first, 'done\n');
    ac.abort();
  });

  it('exec over WebSocket: stdin reaches the command, stdout and the exit code come back', async () => {
    await running('shell', 'sh');
    const ws = await openChannels(port, `/exec/default/shell-${NODE}/sh?command=sh&command=-c&command=${encodeURIComponent('read x; echo "got $x"; echo oops >&2; exit 3')}&input=1&output=1&error=1`);
    ws.send(0, 'hello\n');
    await ws.until(() => ws.received(3).length > 0);
    assert.equal(ws.received(1).toString(), 'got hello\n');
    assert.equal(ws.received(2).toString(), 'oops\n');
    const status = JSON.parse(ws.received(3).toString()) as { status: string; reason?: string; details?: { causes?: { reason: string; message: string }[] } };
    assert.equal(status.status, 'Failure');
    assert.equal(status.reason, 'NonZeroExitCode');
    assert.deepEqual(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message, '3');
    ws.close();
  });

  it('/run answers a command\'s output', async () => {
    await running('shell', 'sh');
    const r = await fetch(`http://127.0.0.1:${port}/run/default/shell-${NODE}/sh?cmd=echo%20ran`, { method: 'POST' });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'ran\n');
  });

  it('port-forward over WebSocket reaches busybox httpd in the pod', async () => {
    await running('shell', 'web');
    await waitFor(async () => (await fetch(`http://127.0.0.1:${httpPort}/`).then((x) => x.text(), () => '')).includes('hello'), WAIT, 'httpd to serve');
    const ws = await openChannels(port, `/portForward/default/shell-${NODE}?port=${httpPort}`);
    // each channel first carries the port (uint16 little-endian)
    await ws.until(() => ws.received(0).length >= 2 && ws.received(1).length >= 2);
    assert.equal(ws.received(0).readUInt16LE(0), httpPort);
    ws.send(0, `GET / HTTP/1.0\r\nHost: x\r\n\r\n`);
    await ws.until(() => ws.received(0).toString().includes('hello-from-httpd'));
    assert.match(ws.received(0).subarray(2).toString(), /^HTTP\/1\.[01] 200[\s\S]*hello-from-httpd/);
    ws.close();
  });

  // ---- kubectl through the test API server ----

  const kubectl = (args: string[], input?: string, timeoutMs = 30_000): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      const child = execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], {
        timeout: timeoutMs,
        // SPDY all the way: the test API server proxies bytes, it does not translate WebSocket to SPDY
        env: { ...process.env, KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false', KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' },
      }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
      if (input !== undefined) child.stdin!.end(input);
    });
  /** The pod as the API server knows it (kubelet-ts runs standalone here: the test mirrors it). */
  const mirror = async (name: string, phase?: string): Promise<string> => {
    const p = await running(name, kubelet.getPods().find((x) => x.metadata.name === `${name}-${NODE}`)?.spec.containers[0]!.name ?? '');
    const full = `${name}-${NODE}`;
    if (!api.get('pods', 'default', full)) {
      api.create('pods', 'default', { metadata: { name: full, uid: p.metadata.uid }, spec: { nodeName: NODE, containers: p.spec.containers.map((c) => ({ name: c.name, image: c.image })) } });
    }
    if (phase) {
      const cur = api.get('pods', 'default', full)!;
      api.registry.update(api.resource('pods'), 'default', full, { ...cur, status: { ...cur.status, phase } }, 'status');
    }
    return full;
  };

  it('kubectl logs: --tail, --timestamps, --since, -f, across the rotation; the API server presents its client certificate', async () => {
    await running('writer', 'w');
    const pod = await mirror('writer');
    await waitFor(async () => (await get(`/containerLogs/default/${pod}/w`)).body.includes('done\n'), WAIT, 'the writer to finish');
    const tail = await kubectl(['logs', pod, '--tail=2']);
    assert.equal(tail.stderr, '');
    assert.equal(tail.stdout, 'line-00399 padding-padding-padding-padding-pad\ndone\n');
    assert.match((await kubectl(['logs', pod, '--tail=1', '--timestamps'])).stdout, /^\d{4}-\d\d-\d\dT[\d:.]+Z done\n$/);
    const all = (await kubectl(['logs', pod, '--since=1h'])).stdout.trim().split('\n');
    assert.equal(all.at(-1), 'done');
    assert.ok(all.length * 60 > 4096, `read across the rotation: ${all.length} lines`);
    assert.equal((await kubectl(['logs', pod, '--since-time=2999-01-01T00:00:00Z'])).stdout, '');
    // -f keeps streaming while the container runs
    const child = spawn('kubectl', ['--kubeconfig', kubeconfig, 'logs', '-f', '--tail=1', pod], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    await waitFor(async () => out === 'done\n', WAIT, 'kubectl logs -f to print');
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(child.exitCode, null, 'still following');
    child.kill();
    assert.ok(clientCNs.length > 0 && clientCNs.every((cn) => cn === 'kube-apiserver-kubelet-client'), clientCNs.join(','));
  });

  it('kubectl logs --previous reads the last terminated instance', async () => {
    const p = await waitFor(async () => {
      const x = kubelet.getPods().find((y) => y.metadata.name === `crasher-${NODE}`);
      const cs = x?.status?.containerStatuses?.[0];
      // the second instance running (in backoff, upstream shows the last terminated one as the current log)
      return (cs?.restartCount ?? 0) >= 1 && cs?.state?.running ? x : undefined;
    }, WAIT, 'crasher to run again', 100);
    assert.ok(p);
    const pod = `crasher-${NODE}`;
    if (!api.get('pods', 'default', pod)) api.create('pods', 'default', { metadata: { name: pod }, spec: { nodeName: NODE, containers: [{ name: 'c', image: 'busybox' }] } });
    const prev = await kubectl(['logs', pod, '--previous']);
    assert.equal(prev.stderr, '');
    assert.match(prev.stdout, /^started [0-9a-f-]{36}\n$/);
    const cur = await kubectl(['logs', pod]);
    assert.match(cur.stdout, /^started [0-9a-f-]{36}\n$/);
    assert.notEqual(cur.stdout, prev.stdout);
  });

  it('kubectl exec -i: stdin in, stdout out, the exit code back', async () => {
    await running('shell', 'sh');
    const pod = await mirror('shell', 'Running');
    const r = await kubectl(['exec', '-i', pod, '-c', 'sh', '--', 'sh', '-c', 'read x; echo "got $x"; exit 3'], 'hello\n');
    assert.equal(r.stdout, 'got hello\n');
    assert.equal(r.code, 3, r.stderr);
    const ok = await kubectl(['exec', pod, '-c', 'sh', '--', 'sh', '-c', 'echo fine']);
    assert.deepEqual([ok.code, ok.stdout], [0, 'fine\n']);
    // kubectl's default transport (WebSocket, v5/v4 channel protocols) through the same byte-for-byte proxies
    const ws = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile('kubectl', ['--kubeconfig', kubeconfig, 'exec', '-i', pod, '-c', 'sh', '--', 'sh', '-c', 'read x; echo "ws $x"; exit 4'], { timeout: 30_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
      child.stdin!.end('hi\n');
    });
    assert.deepEqual([ws.code, ws.stdout], [4, 'ws hi\n'], ws.stderr);
    const missing = await kubectl(['exec', pod, '-c', 'nope', '--', 'true']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /container nope is not valid for pod/);
  });

  it('kubectl port-forward reaches busybox httpd', async () => {
    await running('shell', 'web');
    const pod = await mirror('shell', 'Running');
    const local = await freePort();
    const child = spawn('kubectl', ['--kubeconfig', kubeconfig, 'port-forward', `pod/${pod}`, `${local}:${httpPort}`], {
      stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' },
    });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    try {
      const body = await waitFor(async () => {
        const t = await fetch(`http://127.0.0.1:${local}/`).then((x) => x.text());
        return t.includes('hello-from-httpd') ? t : undefined;
      }, 30_000, `port-forward to serve (${err})`);
      assert.equal(body, 'hello-from-httpd\n');
    } finally {
      child.kill();
    }
  });
});

describe('kubectl through the test API server to the secure port of a kubelet-ts process', () => {
  const NODE2 = 'kts-secure-streams';
  let rt: TestRuntime;
  let cri: CriClient;
  let dir: string;
  let api: TestApiServer;
  let proc: KubeletProcess;
  let kubeconfig: string;
  let httpPort: number;
  let securePort: number;

  before(async () => {
    rt = await ensureRuntime();
    cri = new CriClient({ runtimeEndpoint: rt.endpoint, timeoutMs: 30_000 });
    dir = await mkdtemp(join(tmpdir(), 'kts-secure-streams-'));
    api = new TestApiServer();
    await api.start();
    await writeFile(join(dir, 'ca.crt'), api.ca!.cert);
    await writeFile(join(dir, 'kubelet.kubeconfig'), api.kubeconfigFor(`system:node:${NODE2}`, ['system:nodes'], 'cert'));
    kubeconfig = join(dir, 'admin.kubeconfig');
    await writeFile(kubeconfig, api.kubeconfigFor('admin', ['system:masters']));
    httpPort = await freePort();
    await writeFile(join(dir, 'config.yaml'), [
      'apiVersion: kubelet.config.k8s.io/v1beta1',
      'kind: KubeletConfiguration',
      'authentication:',
      '  anonymous: {enabled: false}',
      '  webhook: {enabled: false}',
      `  x509: {clientCAFile: ${join(dir, 'ca.crt')}}`,
      'authorization: {mode: AlwaysAllow}',
    ].join('\n'));
    const manifestDir = join(dir, 'manifests');
    await mkdir(manifestDir);
    const img = rt.images.busybox;
    await writeFile(join(manifestDir, 'box.json'), JSON.stringify({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'box', labels: { test: 'secure-streams' } },
      spec: { hostNetwork: true, terminationGracePeriodSeconds: 1, containers: [
        { name: 'sh', image: img, command: ['sh', '-c', `echo one; echo two; echo three; ${LOOP}`] },
        { name: 'web', image: img, command: ['sh', '-c', `mkdir -p /www; echo hello-secure > /www/index.html; httpd -f -p 127.0.0.1:${httpPort} -h /www`] },
      ] },
    }));
    proc = await startKubelet({ endpoint: rt.endpoint, manifestDir, nodeName: NODE2, extraArgs: ['--config', join(dir, 'config.yaml'), '--kubeconfig', join(dir, 'kubelet.kubeconfig'), '--node-ip', '127.0.0.1'] });
    // the Node says where the kubelet listens; kubelet-ts makes the static pod's mirror pod in the API
    // (the fixture picks the secure port on its command line)
    securePort = await api.waitFor('the node with its kubelet port', () => api.get('nodes', undefined, NODE2)?.status?.daemonEndpoints?.kubeletEndpoint?.Port as number | undefined, 30_000)
      .catch((err) => { throw new Error(`${(err as Error).message}; node: ${JSON.stringify(api.get('nodes', undefined, NODE2)?.status?.daemonEndpoints)}; kubelet log:\n${proc.logs().slice(-3000)}`); });
    const pod = await waitFor(async () => {
      const p = (await proc.pods()).find((x) => x.metadata.name === `box-${NODE2}`);
      return p?.status?.containerStatuses?.every((c) => c.state?.running) && p.status.containerStatuses.length === 2 ? p : undefined;
    }, WAIT, 'box to run');
    await api.waitFor('the mirror pod, Running', () => api.get('pods', 'default', pod.metadata.name!)?.status?.phase === 'Running' || undefined, WAIT);
  });

  after(async () => {
    await rm(join(dir, 'manifests', 'box.json'), { force: true });
    await waitFor(async () => (await cri.listPodSandbox({ label_selector: { test: 'secure-streams' } })).length === 0, WAIT, 'pods to be removed').catch(() => undefined);
    await proc?.stop();
    await api?.stop();
    cri.close();
    await rm(dir, { recursive: true, force: true });
  });

  const kubectl = (args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> => new Promise((resolve) => {
    const child = execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], { timeout: 30_000, env: { ...process.env, KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' } },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    if (input !== undefined) child.stdin!.end(input);
  });

  it('logs, exec -i with an exit code and port-forward reach the secure port; it refuses a client without a certificate', async () => {
    const pod = `box-${NODE2}`;
    const logs = await kubectl(['logs', pod, '-c', 'sh', '--tail=2']);
    assert.deepEqual([logs.code, logs.stdout], [0, 'two\nthree\n'], logs.stderr);
    const ex = await kubectl(['exec', '-i', pod, '-c', 'sh', '--', 'sh', '-c', 'read x; echo "secure $x"; exit 5'], 'hi\n');
    assert.deepEqual([ex.code, ex.stdout], [5, 'secure hi\n'], ex.stderr);
    const local = await freePort();
    const pf = spawn('kubectl', ['--kubeconfig', kubeconfig, 'port-forward', `pod/${pod}`, `${local}:${httpPort}`], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' } });
    try {
      const body = await waitFor(async () => {
        const t = await fetch(`http://127.0.0.1:${local}/`).then((x) => x.text(), () => '');
        return t.includes('hello-secure') ? t : undefined;
      }, 30_000, 'port-forward through the secure port');
      assert.equal(body, 'hello-secure\n');
    } finally {
      pf.kill();
    }
    // straight to the secure port without a client certificate: 401
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpsRequest({ host: '127.0.0.1', port: securePort, path: `/containerLogs/default/${pod}/sh`, rejectUnauthorized: false, agent: false }, (res) => { res.resume(); resolve(res.statusCode ?? 0); });
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 401);
  });
});
