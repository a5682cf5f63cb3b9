// The Kubelet with an apiClient (no runtime, no root): pods from the test API server double
// run and their status reaches the API; a pod beyond maxPods is Failed with OutOfpods; a graceful
// delete kills the pod and ends with the final delete; activeDeadlineSeconds fails the pod with
// DeadlineExceeded; a static pod gets a mirror pod that comes back after a delete.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Pod } from '../../src/api/types.js';
import { RestClient } from '../../src/client/rest.js';
import { Kubelet } from '../../src/kubelet/kubelet.js';
import { PodConfig } from '../../src/sources/pod-config.js';
import type { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { TOKEN, podManifest, startServer } from '../test-apiserver/client.js';
import { until } from '../client/drive.js';
import { harness, type Harness } from './doubles.js';

describe('Kubelet with an API client (test API server, runtime double)', () => {
  let api: TestApiServer;
  let h: Harness;
  let k: Kubelet;
  let dir: string;
  let client: RestClient;
  let podConfig: PodConfig;

  const apiPod = (name: string) => api.get('pods', 'default', name) as Pod | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kts-kubelet-api-'));
    h = harness(dir);
    api = await startServer({ clock: h.clock });
    client = new RestClient({ source: 'test', server: api.url, insecureSkipTLSVerify: false, token: TOKEN }, { clock: h.clock });
    h.deps.apiClient = client;
    h.deps.podSources = ({ onUpdate, onError, onApiPodError }) => {
      podConfig = new PodConfig({ nodeName: 'node-a', onUpdate, onError, ...(onApiPodError ? { onApiPodError } : {}), clock: h.clock, log: () => undefined });
      return podConfig;
    };
    h.config.maxPods = 2;
  });

  afterEach(async () => {
    await k.stop();
    client.close();
    await api.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function start(): Promise<void> {
    k = new Kubelet({ config: h.config, flags: h.flags, deps: h.deps });
    await k.start();
    h.plegWiring!.cache.updateTime(Number.MAX_SAFE_INTEGER);
  }

  it('runs a pod bound here and reports its status; the pod beyond maxPods is Failed with OutOfpods', async () => {
    api.create('pods', 'default', podManifest('a', 'node-a'));
    api.create('pods', 'default', podManifest('b', 'node-a'));
    await start();
    await until(h.clock, 'a and b synced', () => h.runtime.calls.filter((c) => c.startsWith('syncPod')).length >= 2);
    await until(h.clock, 'a status in the API', () => apiPod('a')!.status?.startTime);
    api.create('pods', 'default', podManifest('c', 'node-a'));
    await until(h.clock, 'c rejected in the API', () => apiPod('c')!.status?.phase === 'Failed');
    const c = apiPod('c')!;
    assert.equal(c.status!.reason, 'OutOfpods');
    assert.equal(c.status!.message, "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2");
    assert.ok(!h.runtime.calls.some((x) => x.endsWith(` ${c.metadata.uid}`)), 'the refused pod never reached the runtime');
    assert.ok(k.events.recent().some((e) => e.reason === 'OutOfpods' && e.type === 'Warning'));
  });

  it('a graceful delete kills the pod, then the final delete removes it from the API', async () => {
    api.create('pods', 'default', podManifest('a', 'node-a'));
    await start();
    const uid = apiPod('a')!.metadata.uid!;
    await until(h.clock, 'a synced', () => h.runtime.calls.includes(`syncPod ${uid}`));
    api.registry.delete(api.resource('pods'), 'default', 'a', { gracePeriodSeconds: 30 });
    await until(h.clock, 'the kill', () => h.runtime.calls.includes(`killPod ${uid}`));
    await until(h.clock, 'the final delete', () => !apiPod('a'));
    const del = api.requests.filter((r) => r.method === 'DELETE' && r.path === '/api/v1/namespaces/default/pods/a');
    assert.equal(del.length, 1);
    assert.equal(del[0]!.code, 200);
    assert.ok(h.runtime.calls.includes(`removePod ${uid}`), 'cleaned up before the final delete');
  });

  it('activeDeadlineSeconds: Failed with DeadlineExceeded and killed', async () => {
    const m = podManifest('job', 'node-a') as any;
    m.spec.activeDeadlineSeconds = 5;
    m.spec.restartPolicy = 'Never';
    api.create('pods', 'default', m);
    await start();
    const uid = apiPod('job')!.metadata.uid!;
    await until(h.clock, 'the deadline', () => apiPod('job')!.status?.reason === 'DeadlineExceeded', 500);
    const st = apiPod('job')!.status!;
    assert.equal(st.phase, 'Failed');
    assert.equal(st.message, 'Pod was active on the node longer than the specified deadline');
    await until(h.clock, 'the kill', () => h.runtime.calls.includes(`killPod ${uid}`));
    assert.ok(k.events.recent().some((e) => e.reason === 'DeadlineExceeded' && e.type === 'Normal'));
  });

  it('a static pod gets a mirror pod carrying its status; deleted, the mirror pod comes back', async () => {
    await start();
    const staticPod: Pod = {
      metadata: { uid: 'h1', name: 'web-node-a', namespace: 'default', annotations: { 'kubernetes.io/config.hash': 'h1' } },
      spec: { nodeName: 'node-a', containers: [{ name: 'c', image: 'busybox:1.36' }] },
      status: { phase: 'Pending' },
    };
    podConfig.setPods('file', [staticPod]);
    const mirror = await until(h.clock, 'the mirror pod', () => apiPod('web-node-a'));
    assert.equal(mirror.metadata.annotations!['kubernetes.io/config.mirror'], 'h1');
    await until(h.clock, 'the mirror carries the status', () => apiPod('web-node-a')!.status?.startTime);
    api.registry.delete(api.resource('pods'), 'default', 'web-node-a', { gracePeriodSeconds: 30 });
    await until(h.clock, 'a new mirror pod', () => {
      const m = apiPod('web-node-a');
      return m && m.metadata.uid !== mirror.metadata.uid && !m.metadata.deletionTimestamp;
    });
    await until(h.clock, 'the new mirror carries the status too', () => {
      const m = apiPod('web-node-a');
      return m && m.metadata.uid !== mirror.metadata.uid && m.status?.startTime;
    });
    assert.ok(!h.runtime.calls.some((c) => c.includes(mirror.metadata.uid!)), 'the mirror pod itself never runs');
    podConfig.setPods('file', []);
    await until(h.clock, 'the mirror pod deleted with its static pod', () => !apiPod('web-node-a'));
  });
});
