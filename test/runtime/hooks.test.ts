// Lifecycle hooks on the injected clock, bounded by their timeout and by the shutdown signal.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pod } from '../../src/api/types.js';
import { HandlerRunner, type HookCri } from '../../src/runtime/hooks.js';
import { LifecycleHookError, ShutdownError } from '../../src/runtime/errors.js';
import { isKubeletError } from '../../src/util/errors.js';
import { FakeClock } from '../../src/util/clock.js';

const pod: Pod = { metadata: { uid: 'u1', name: 'web', namespace: 'default' }, spec: { containers: [{ name: 'main', image: 'busybox' }] } };
const target = { pod, container: pod.spec.containers[0], containerName: 'main', containerID: 'c1', podIP: '127.0.0.1' };

function cri(exit = 0, seen: AbortSignal[] = []): HookCri {
  return {
    execSync: async (_id, _cmd, _t, signal) => {
      if (signal) seen.push(signal);
      return { stdout: Buffer.from('out'), stderr: Buffer.from(''), exit_code: exit };
    },
  };
}

const pending = async (p: Promise<unknown>): Promise<boolean> => {
  let settled = false;
  void p.then(() => { settled = true; }, () => { settled = true; });
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return !settled;
};

test('a sleep hook waits on the injected clock, bounded by the timeout', async () => {
  const clock = new FakeClock();
  const runner = new HandlerRunner({ cri: cri(), clock });
  const p = runner.run(target, { sleep: { seconds: 10 } }, 4);
  assert.equal(await pending(p), true);
  clock.step(3999);
  assert.equal(await pending(p), true);
  clock.step(1);
  await p;
});

test('a sleep hook is abandoned at once when the shutdown signal fires', async () => {
  const clock = new FakeClock();
  const ac = new AbortController();
  const runner = new HandlerRunner({ cri: cri(), clock, signal: ac.signal });
  const p = runner.run(target, { sleep: { seconds: 300 } }, 300);
  assert.equal(await pending(p), true);
  ac.abort();
  await assert.rejects(p, (err) => err instanceof ShutdownError && isKubeletError(err, 'ERR_SHUTDOWN') && /Pod "web_default\(u1\)"/.test(err.message));
  assert.equal(clock.pendingTimers(), 0, 'the hook timer is cancelled');
});

test('an exec hook passes the shutdown signal to the CRI call and reports a failure as upstream', async () => {
  const clock = new FakeClock();
  const ac = new AbortController();
  const seen: AbortSignal[] = [];
  const runner = new HandlerRunner({ cri: cri(3, seen), clock, signal: ac.signal });
  await assert.rejects(runner.run(target, { exec: { command: ['false'] } }, 30), (err) => {
    assert.ok(err instanceof LifecycleHookError);
    assert.equal(err.code, 'ERR_LIFECYCLE_HOOK');
    assert.match(err.message, /^Exec lifecycle hook \(\["false"\]\) for Container "main" in Pod "web_default\(u1\)" failed - error: command 'false' exited with 3: out/);
    return true;
  });
  assert.equal(seen[0], ac.signal);
});

test('an httpGet hook to a server that never answers ends at its timeout on the clock, or at shutdown', async () => {
  const server = createServer(() => { /* never answers */ });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  try {
    const clock = new FakeClock();
    const ac = new AbortController();
    const runner = new HandlerRunner({ cri: cri(), clock, signal: ac.signal });
    const byTimeout = runner.run(target, { httpGet: { port, path: '/hook' } }, 5);
    assert.equal(await pending(byTimeout), true);
    clock.step(5000);
    await assert.rejects(byTimeout, (err) => err instanceof LifecycleHookError && /HTTP lifecycle hook \(\/hook\).*timed out after 5000ms/.test(err.message));

    const byShutdown = runner.run(target, { httpGet: { port, path: '/hook' } }, 300);
    assert.equal(await pending(byShutdown), true);
    ac.abort();
    await assert.rejects(byShutdown, LifecycleHookError);
    assert.equal(clock.pendingTimers(), 0);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test('a named port the container does not declare is a hook error naming it', async () => {
  const runner = new HandlerRunner({ cri: cri(), clock: new FakeClock() });
  await assert.rejects(runner.run(target, { httpGet: { port: 'web' } }, 5), (err) => err instanceof LifecycleHookError && /couldn't find port: web in main/.test(err.message));
});
