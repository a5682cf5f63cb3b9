// The secure port's own handlers, served here over plain HTTP on loopback (the gate is tested
// apart): /logs/ stays inside its root, /configz is v1beta1, /metrics/cadvisor reports a failed
// read, profiling is bounded, debugging handlers can be switched off, and the read-only port
// gains none of them.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { defaultKubeletConfig } from '../../src/config/index.js';
import { debugFlagsVerbosityHandler, renderCadvisorMetrics } from '../../src/server/kubelet-handlers.js';
import { secureRoutes, type SecureRoutesInput } from '../../src/server/secure.js';
import { Registry } from '../../src/metrics/registry.js';
import { FakeClock } from '../../src/util/clock.js';
import { get, exchange, startServers, type TestServers } from './raw-http.js';

function routesWith(patch: (c: ReturnType<typeof defaultKubeletConfig>) => void, clock: FakeClock, logRoot: string) {
  const config = defaultKubeletConfig();
  patch(config);
  const input: SecureRoutesInput = {
    config, clock,
    statsRoutes: new Map(),
    metrics: new Registry(),
    cadvisor: { getSummary: () => Promise.reject(new Error('no stats')), getPods: () => [], podCgroupName: () => '' },
    runningPods: () => [],
    systemLogRoot: logRoot,
  };
  return secureRoutes(input);
}

describe('secure port handlers', { timeout: 60_000 }, () => {
  let dir: string;
  let s: TestServers;
  let off: TestServers;
  const clock = new FakeClock();
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kts-handlers-'));
    mkdirSync(join(dir, 'varlog', 'app'), { recursive: true });
    writeFileSync(join(dir, 'varlog', 'syslog'), 'line one\n');
    writeFileSync(join(dir, 'varlog', 'app', 'a.log'), 'app line\n');
    writeFileSync(join(dir, 'secret'), 'outside\n');
    symlinkSync(join(dir, 'secret'), join(dir, 'varlog', 'escape'));
    symlinkSync(dir, join(dir, 'varlog', 'up'));
    // links that stay inside the root are not followed either (a component swapped for a link
    // between a check and the open is refused the same way)
    symlinkSync(join(dir, 'varlog', 'syslog'), join(dir, 'varlog', 'inner-file'));
    symlinkSync('app', join(dir, 'varlog', 'inner-dir'));
    spawnSync('mkfifo', [join(dir, 'varlog', 'fifo')]);
    s = await startServers({ routes: routesWith(() => undefined, clock, join(dir, 'varlog')) });
    off = await startServers({ routes: routesWith((c) => { c.enableDebuggingHandlers = false; }, clock, join(dir, 'varlog')) });
  });
  after(async () => {
    await s.stop();
    await off.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('/logs/ serves files and listings under its root', async () => {
    assert.equal((await get(s.readOnlyPort, '/logs/syslog')).response?.body, 'line one\n');
    assert.equal((await get(s.readOnlyPort, '/logs/app/a.log')).response?.body, 'app line\n');
    const dirNoSlash = await get(s.readOnlyPort, '/logs/app');
    assert.equal(dirNoSlash.response?.status, 301);
    assert.equal(dirNoSlash.response?.headers.location, '/logs/app/');
    assert.match((await get(s.readOnlyPort, '/logs/')).response!.body, /href="app\/"/);
  });

  it('/logs/ follows no symbolic link out of its root and serves nothing missing', async () => {
    for (const p of ['/logs/escape', '/logs/up/secret', '/logs/nope']) {
      const { response } = await get(s.readOnlyPort, p);
      assert.equal(response?.status, 404, p);
      assert.doesNotMatch(response!.body, /outside/);
    }
  });

  it('/logs/ follows no symbolic link at any component, even one inside its root, and does not hang on a FIFO', async () => {
    for (const p of ['/logs/inner-file', '/logs/inner-dir/a.log', '/logs/inner-dir/', '/logs/fifo']) {
      const { response } = await get(s.readOnlyPort, p);
      assert.equal(response?.status, 404, p);
      assert.doesNotMatch(response!.body, /line/, p);
    }
  });

  it('/configz is {"kubeletconfig": ...} with v1beta1 durations', async () => {
    const { response } = await get(s.readOnlyPort, '/configz');
    const body = JSON.parse(response!.body) as { kubeletconfig: Record<string, any> };
    assert.equal(body.kubeletconfig.kind, 'KubeletConfiguration');
    assert.equal(body.kubeletconfig.apiVersion, 'kubelet.config.k8s.io/v1beta1');
    assert.equal(body.kubeletconfig.syncFrequency, '1m0s');
    assert.equal(body.kubeletconfig.authentication.webhook.cacheTTL, '2m0s');
    assert.equal(body.kubeletconfig.port, 10250);
  });

  it('/metrics/cadvisor reports a failed stats read as container_scrape_error 1', async () => {
    const { response } = await get(s.readOnlyPort, '/metrics/cadvisor');
    assert.equal(response?.status, 200);
    assert.match(response!.body, /^container_scrape_error 1$/m);
    assert.match(renderCadvisorMetrics(undefined, [], () => '', 0), /# TYPE container_scrape_error gauge/);
  });

  it('/debug/pprof/profile is bounded: a bad or too long duration is a 400; a short one returns a CPU profile', async () => {
    assert.equal((await get(s.readOnlyPort, '/debug/pprof/profile?seconds=61')).response?.status, 400);
    assert.equal((await get(s.readOnlyPort, '/debug/pprof/profile?seconds=x')).response?.status, 400);
    const pending = exchange(s.readOnlyPort, ['GET /debug/pprof/profile?seconds=1 HTTP/1.1\r\nHost: x\r\n\r\n'], { deadlineMs: 20_000 });
    for (let i = 0; i < 200 && clock.pendingTimers() === 0; i++) await new Promise((r) => setTimeout(r, 10));
    // A second profile while one runs is refused.
    assert.equal((await get(s.readOnlyPort, '/debug/pprof/profile?seconds=1')).response?.status, 409);
    clock.step(1000);
    const { response } = await pending;
    assert.equal(response?.status, 200);
    const profile = JSON.parse(response!.body) as { nodes: unknown[]; startTime: number };
    assert.ok(Array.isArray(profile.nodes) && profile.nodes.length > 0);
  });

  it('/debug/flags/v: PUT sets the verbosity as upstream; a bad value is a 400, another method a 406', async () => {
    const set: number[] = [];
    const srv = await startServers({ routes: new Map([['/debug/flags/v', debugFlagsVerbosityHandler((v) => set.push(v))]]) });
    try {
      const put = (body: string) => exchange(srv.readOnlyPort, [`PUT /debug/flags/v HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`]);
      let r = (await put('4')).response;
      assert.equal(r?.status, 200);
      assert.equal(r?.body, 'successfully set klog.logging.verbosity to 4');
      r = (await put('-1')).response;
      assert.equal(r?.status, 400);
      assert.match(r!.body, /failed set klog\.logging\.verbosity -1/);
      assert.equal((await get(srv.readOnlyPort, '/debug/flags/v')).response?.status, 406);
      assert.deepEqual(set, [4], 'only the good value was set');
    } finally {
      await srv.stop();
    }
  });

  it('with enableDebuggingHandlers off, the debugging paths answer 405 "Debug endpoints are disabled."', async () => {
    for (const p of ['/runningpods/', '/logs/syslog', '/debug/pprof/profile', '/exec/a/b/c', '/containerLogs/a/b/c', '/portForward/a/b', '/attach/a/b/c', '/run/a/b/c']) {
      const { response } = await get(off.readOnlyPort, p);
      assert.equal(response?.status, 405, p);
      assert.equal(response?.body, 'Debug endpoints are disabled.\n', p);
    }
    assert.equal((await get(off.readOnlyPort, '/configz')).response?.status, 200);
  });

  it('with enableSystemLogHandler or enableProfilingHandler off, their paths are not served', async () => {
    const noLogs = await startServers({ routes: routesWith((c) => { c.enableSystemLogHandler = false; c.enableProfilingHandler = false; }, clock, join(dir, 'varlog')) });
    try {
      assert.equal((await get(noLogs.readOnlyPort, '/logs/syslog')).response?.status, 404);
      assert.equal((await get(noLogs.readOnlyPort, '/debug/pprof/profile')).response?.status, 404);
    } finally {
      await noLogs.stop();
    }
  });

  it('the read-only port serves none of the secure port\'s routes', async () => {
    const ro = await startServers();
    try {
      for (const p of ['/configz', '/runningpods/', '/logs/', '/metrics/cadvisor', '/debug/pprof/', '/exec/a/b/c', '/containerLogs/a/b/c']) {
        assert.equal((await get(ro.readOnlyPort, p)).response?.status, 404, p);
      }
    } finally {
      await ro.stop();
    }
  });
});
