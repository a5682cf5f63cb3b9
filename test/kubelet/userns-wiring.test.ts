// The Kubelet's user namespace and RuntimeClass wiring (doubles, no runtime): the runtime's
// handlers come from its CRI Status; the runtime's hooks give a hostUsers: false pod its range
// only when the default handler supports user namespaces; the range is freed when the pod is
// terminated; standalone, a runtimeClassName cannot be resolved and the sandbox is refused.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kubelet } from '../../src/kubelet/kubelet.js';
import type { KubeletDependencies } from '../../src/kubelet/dependencies.js';
import { harness, mkPod, until } from './doubles.js';

test('user namespaces follow the runtime\'s handlers, live in the pod directory and are freed when the pod is terminated', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kts-userns-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const h = harness(dir);
  let handlers: unknown[] = [];
  const status = h.deps.cri.status;
  h.deps.cri = { ...h.deps.cri, status: async () => ({ ...(await status()), runtime_handlers: handlers }) } as KubeletDependencies['cri'];
  const k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
  await k.start();
  t.after(() => k.stop());
  // every cache read is fresh enough (the PLEG's part is tested in test/pleg)
  h.plegWiring!.cache.updateTime(Number.MAX_SAFE_INTEGER);
  const hooks = h.runtimeHooks!;
  const pod = mkPod('u1');
  pod.spec.hostUsers = false;

  // a runtime that reports no handler (containerd 1.6)
  assert.deepEqual(k.runtimeHandlers, []);
  await assert.rejects(hooks.userNamespace!(pod, ''), (err: Error) => err.message === "can't set `spec.hostUsers: false`, runtime does not support user namespaces: the handler \"\" is not known");

  // the runtime now says its default handler can: the next status check sees it
  handlers = [{ name: '', features: { recursive_read_only_mounts: true, user_namespaces: true } }];
  h.clock.step(5_000);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(k.runtimeHandlers, [{ name: '', supportsRecursiveReadOnlyMounts: true, supportsUserNamespaces: true }]);
  // the pod is admitted and synced (the runtime double stands for the real one, which asks for it)
  h.sources.onUpdate({ op: 'ADD', pods: [pod], source: 'file' });
  await until(() => h.runtime.calls.includes('syncPod u1'), 'the pod synced');
  const ns = await hooks.userNamespace!(pod, '');
  assert.equal(ns?.mode, 'POD');
  const hostId = ns!.uids![0]!.host_id;
  assert.ok(hostId >= 65536 && hostId % 65536 === 0, `range starts at ${hostId}`);
  assert.equal(JSON.parse(await readFile(join(dir, 'pods', 'u1', 'userns'), 'utf8')).uidMappings[0].hostId, hostId);

  // a pod that does not ask: NODE (the gate is on by default)
  assert.deepEqual(await hooks.userNamespace!(mkPod('u2'), ''), { mode: 'NODE' });
  // standalone: no RuntimeClass can be read, so a pod naming one gets no sandbox (never the default handler)
  const withClass = mkPod('u3');
  withClass.spec.runtimeClassName = 'gvisor';
  await assert.rejects(hooks.runtimeHandler!(withClass), { code: 'ERR_RUNTIME_CLASS_LOOKUP', message: /RuntimeClass gvisor: RuntimeClass cannot be resolved without an API server/ });

  // housekeeping keeps the range of a pod it knows
  h.clock.step(2_000);
  await new Promise((r) => setImmediate(r));
  assert.equal(k.userns!.allocations().get('u1'), hostId);
  // removed: its termination frees the range and removes the file
  h.sources.onUpdate({ op: 'REMOVE', pods: [pod], source: 'file' });
  await until(() => h.runtime.calls.includes('removePod u1') && k.userns!.allocations().size === 0, 'the range freed');
  await k.userns!.release('u1'); // nothing left to free: waits for the release under way
  await assert.rejects(access(join(dir, 'pods', 'u1', 'userns')), { code: 'ENOENT' });
});
