// pods/{name}/ephemeralcontainers on the test API server, as upstream's subresource behaves:
// GET returns the pod; a strategic merge patch (what kubectl debug sends) or a PUT adds an
// ephemeral container, defaulted; only spec.ephemeralContainers is taken from the request; an
// existing one may not be changed or removed; upstream's validation (target, forbidden fields,
// unique names); the main resource may not change ephemeral containers; kubectl debug works.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { TestApiServer } from '../fixtures/test-apiserver/server.js';
import { call, podManifest, startServer } from './client.js';

const run = promisify(execFile);
const pods = '/api/v1/namespaces/default/pods';
const SMP = 'application/strategic-merge-patch+json';

describe('test API server: pods/ephemeralcontainers', () => {
  let s: TestApiServer;
  before(async () => {
    s = await startServer();
    assert.equal((await call(s, 'POST', pods, { body: podManifest('web') })).code, 201);
  });
  after(() => s.stop());

  it('GET returns the pod; a strategic merge patch adds a defaulted ephemeral container and nothing else', async () => {
    const got = await call(s, 'GET', `${pods}/web/ephemeralcontainers`);
    assert.equal(got.code, 200);
    assert.equal(got.body.kind, 'Pod');
    const patched = await call(s, 'PATCH', `${pods}/web/ephemeralcontainers`, {
      contentType: SMP,
      body: { metadata: { labels: { sneaky: 'yes' } }, spec: { ephemeralContainers: [{ name: 'debugger', image: 'busybox:1.36', targetContainerName: 'c', stdin: true, tty: true }], containers: [{ name: 'c', image: 'other:2' }] } },
    });
    assert.equal(patched.code, 200, JSON.stringify(patched.body));
    assert.deepEqual(patched.body.spec.ephemeralContainers, [{
      name: 'debugger', image: 'busybox:1.36', targetContainerName: 'c', stdin: true, tty: true,
      terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', imagePullPolicy: 'IfNotPresent', resources: {},
    }]);
    assert.equal(patched.body.spec.containers[0].image, 'busybox:1.36', 'only spec.ephemeralContainers comes from the request');
    assert.equal(patched.body.metadata.labels?.sneaky, undefined);
    assert.notEqual(patched.body.metadata.resourceVersion, got.body.metadata.resourceVersion);
  });

  it('an existing ephemeral container may not be changed or removed', async () => {
    const pod = (await call(s, 'GET', `${pods}/web/ephemeralcontainers`)).body;
    const changed = structuredClone(pod);
    changed.spec.ephemeralContainers[0].image = 'busybox:9';
    const put = await call(s, 'PUT', `${pods}/web/ephemeralcontainers`, { body: changed });
    assert.equal(put.code, 422, JSON.stringify(put.body));
    assert.match(put.body.message, /spec\.ephemeralContainers\[debugger\]: Forbidden: existing ephemeral containers "debugger" may not be changed/);
    const removed = structuredClone(pod);
    removed.spec.ephemeralContainers = [];
    const del = await call(s, 'PUT', `${pods}/web/ephemeralcontainers`, { body: removed });
    assert.equal(del.code, 422, JSON.stringify(del.body));
    assert.match(del.body.message, /Forbidden: existing ephemeral containers "debugger" may not be removed/);
    // through the main resource, the spec (ephemeral containers included) is immutable
    const main = structuredClone(pod);
    main.spec.ephemeralContainers.push({ name: 'second', image: 'busybox:1.36' });
    const viaMain = await call(s, 'PUT', `${pods}/web`, { body: main });
    assert.equal(viaMain.code, 422, JSON.stringify(viaMain.body));
  });

  it('validation as upstream: the target must be a container of the pod; no ports, probes, resources or lifecycle; unique names; no subPath', async () => {
    const add = (ec: Record<string, unknown>) => call(s, 'PATCH', `${pods}/web/ephemeralcontainers`, { contentType: SMP, body: { spec: { ephemeralContainers: [ec] } } });
    const target = await add({ name: 'd2', image: 'busybox:1.36', targetContainerName: 'nope' });
    assert.equal(target.code, 422);
    assert.match(target.body.message, /spec\.ephemeralContainers\[1\]\.targetContainerName: Not found: "nope"/);
    const forbidden = await add({ name: 'd3', image: 'busybox:1.36', ports: [{ containerPort: 80 }], readinessProbe: { exec: { command: ['true'] } }, resources: { limits: { cpu: '1' } }, lifecycle: { preStop: { exec: { command: ['true'] } } } });
    assert.equal(forbidden.code, 422);
    for (const f of ['ports', 'readinessProbe', 'resources', 'lifecycle']) {
      assert.match(forbidden.body.message, new RegExp(`spec\\.ephemeralContainers\\[1\\]\\.${f}: Forbidden: cannot be set for an Ephemeral Container`));
    }
    const dup = await add({ name: 'c', image: 'busybox:1.36' });
    assert.equal(dup.code, 422);
    assert.match(dup.body.message, /spec\.ephemeralContainers\[1\]\.name: Duplicate value: "c"/);
    const subPath = await add({ name: 'd6', image: 'busybox:1.36', volumeMounts: [{ name: 'v', mountPath: '/x', subPath: 'a' }] });
    assert.equal(subPath.code, 422);
    assert.match(subPath.body.message, /spec\.ephemeralContainers\[1\]\.volumeMounts\[0\]\.subPath: Forbidden: cannot be set for an Ephemeral Container/);
    const noImage = await add({ name: 'd4' });
    assert.equal(noImage.code, 422);
    const ok = await add({ name: 'd5', image: 'busybox:1.36', targetContainerName: 'c' });
    assert.equal(ok.code, 200);
    assert.deepEqual(ok.body.spec.ephemeralContainers.map((c: { name: string }) => c.name), ['debugger', 'd5']);
  });

  it('kubectl debug adds a debug container targeting a container through the subresource', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kts-ephemeral-'));
    // kubectl sends credentials over TLS only
    const tls = new TestApiServer({ tls: true });
    await tls.start();
    try {
      const kubeconfig = join(dir, 'admin.kubeconfig');
      writeFileSync(kubeconfig, tls.kubeconfigFor('admin', ['system:masters'], 'cert'));
      tls.create('pods', 'default', podManifest('dbg'));
      await run('kubectl', ['--kubeconfig', kubeconfig, 'debug', 'dbg', '--image=busybox:1.36', '--target=c', '--container=debugger', '--profile=general'], { timeout: 20_000 });
      const pod = tls.get('pods', 'default', 'dbg')!;
      const ec = pod.spec.ephemeralContainers;
      assert.equal(ec.length, 1);
      assert.equal(ec[0].name, 'debugger');
      assert.equal(ec[0].targetContainerName, 'c');
      assert.ok(tls.requests.some((r) => r.method === 'PATCH' && r.path === `${pods}/dbg/ephemeralcontainers` && r.code === 200));
    } finally {
      await tls.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
